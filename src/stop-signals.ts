/**
 * How a long-running command (`retryq dev`, `retryq worker`, `retryq proxy`, `retryq sim`) learns that it should
 * stop: SIGINT, SIGTERM, or an `AbortSignal` when it is embedded (tests, other programs). The one place that
 * listens for them.
 *
 * @example
 * ```ts
 * import { untilStopped } from './stop-signals.js';
 * const reason = await untilStopped(); // 'SIGINT' after Ctrl-C
 * ```
 */

/** Why a command stops. */
export type StopReason = 'SIGINT' | 'SIGTERM' | 'stop requested';

export interface UntilStoppedOptions {
  /** Stops as SIGINT/SIGTERM would. */
  signal?: AbortSignal | undefined;
  /**
   * Keep listening after the first signal: a second one more than a second later exits the process at once,
   * without draining. A terminal's Ctrl-C reaches every process of the group (npm, tsx, node) and tsx relays it
   * too, so one press may arrive twice at once; only a later one means "stop now". Without this, the listeners are
   * removed after the first signal (the default handlers then end the process on the next one).
   * @default false
   */
  exitOnSecondSignal?: boolean | undefined;
}

/** Resolves with the reason once SIGINT, SIGTERM or `options.signal` asks to stop. */
export function untilStopped(options: UntilStoppedOptions = {}): Promise<StopReason> {
  const { signal, exitOnSecondSignal = false } = options;
  return new Promise((resolve) => {
    let firstAt: number | undefined;
    const release = (): void => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      signal?.removeEventListener('abort', onAbort);
    };
    const stop = (reason: StopReason): void => {
      if (firstAt !== undefined) return;
      firstAt = Date.now();
      if (!exitOnSecondSignal) release();
      else signal?.removeEventListener('abort', onAbort);
      resolve(reason);
    };
    function onSignal(sig: NodeJS.Signals): void {
      if (firstAt === undefined) return stop(sig === 'SIGTERM' ? 'SIGTERM' : 'SIGINT');
      if (Date.now() - firstAt > 1000) {
        process.stderr.write('Second signal: exiting without draining.\n');
        process.exit(sig === 'SIGINT' ? 130 : 143);
      }
    }
    function onAbort(): void {
      stop('stop requested');
    }
    if (signal?.aborted === true) return stop('stop requested');
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
