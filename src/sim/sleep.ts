/** An abortable wait: the simulator's delays, outages and webhook backoff end at once when it closes. */
import { setTimeout as delay } from 'node:timers/promises';

/** Resolves `true` after `ms` (at once for `ms ≤ 0`), or `false` as soon as `signal` aborts. */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  if (ms <= 0) return Promise.resolve(true);
  return delay(ms, undefined, { signal }).then(
    () => true,
    () => false,
  );
}
