/**
 * Supervises a Temporal server that retryq started: notices its death the moment the process exits, and a hang
 * (a server that stops answering, e.g. SIGSTOPped) with a health check; says so in one line in retryq's words,
 * with the server's last output and the log file's path; restarts it from the same data (bounded: more than
 * `maxRestarts` restarts within `restartWindowMs` and it gives up, with a sentence saying what to do). It also
 * recognises the server's own "database or disk is full" and says that the disk is full.
 *
 * Used by `retryq dev` (session.ts) and usable on its own, e.g. by a chaos scenario that kills the server and
 * measures the recovery through {@link SupervisorEvent}s.
 *
 * @example
 * ```ts
 * import { superviseServer } from './supervisor.js';
 * import { startDevServer } from '../temporal/server-process.js';
 * const supervisor = await superviseServer({
 *   start: (onLine) => startDevServer({ cliPath, port: 7233, dbFile: '.data/temporal.db', onLine }),
 *   what: 'the Temporal server',
 *   logFile: '.data/retryq-dev.log',
 *   say: (line) => console.error(line),
 *   onEvent: (event) => console.log(event.type, event.at),
 * });
 * const reason = await supervisor.gaveUp; // only when it kept dying; supervisor.stop() ends supervision
 * ```
 */
import { Connection } from '@temporalio/client';
import { ServerRestartsExhaustedError } from '../errors.js';
import { processIdentity } from './process-identity.js';
import type { ManagedServer } from '../temporal/server-process.js';

/** What the supervisor saw and did, with the time (`Date.now()`) it happened. */
export type SupervisorEvent =
  | { type: 'started'; at: number; pid: number; address: string }
  | {
      type: 'exited';
      at: number;
      pid: number;
      code: number | null;
      signal: NodeJS.Signals | null;
      /** How long it had been running, ms. */
      uptimeMs: number;
      lastOutput: string[];
    }
  | { type: 'unresponsive'; at: number; pid: number; silentMs: number; stopped: boolean; lastOutput: string[] }
  | { type: 'restarting'; at: number; restart: number; of: number }
  | {
      type: 'restarted';
      at: number;
      pid: number;
      restart: number;
      /** From the death (or hang) to ready, ms. */ downMs: number;
    }
  | { type: 'restart-failed'; at: number; restart: number; reason: string }
  | { type: 'disk-full'; at: number; pid: number; line: string }
  | { type: 'gave-up'; at: number; deaths: number; windowMs: number };

export interface SupervisorOptions {
  /** Starts the server, from the same data each time; `onLine` must receive every line it prints. */
  start: (onLine: (line: string) => void) => Promise<ManagedServer>;
  /** How to name it in notices. @default 'the Temporal server' */
  what?: string;
  /** Where its data is (named when it restarts), e.g. the SQLite file. */
  dataPath?: string;
  /** Where the full output is (named in every notice). */
  logFile: string;
  /** Receives each line of the server's output (to put it in the log file). */
  onServerLine?: (line: string, pid: number) => void;
  /** Says one notice to the person (stderr). */
  say: (line: string) => void;
  onEvent?: (event: SupervisorEvent) => void;
  /** Restarts allowed within `restartWindowMs`; one more death and it gives up. @default 3 */
  maxRestarts?: number;
  /** @default 300_000 (5 min) */
  restartWindowMs?: number;
  /** Time between health checks, ms. @default 2_000 */
  healthIntervalMs?: number;
  /** A health check that takes longer fails, ms. @default 5_000 */
  healthTimeoutMs?: number;
  /** No answer for this long (ms) while the process lives: it is hung, and is killed and restarted. @default 20_000 */
  unresponsiveAfterMs?: number;
  /** Lines of the server's output shown in a notice. @default 3 */
  lastLines?: number;
}

/** A running supervision. */
export interface ServerSupervisor {
  /** The server running now (a new one after each restart). */
  readonly server: ManagedServer;
  /** Every event so far, oldest first. */
  readonly events: readonly SupervisorEvent[];
  /** Resolves if it gives up (restarts used up); never resolves after {@link stop}. */
  readonly gaveUp: Promise<ServerRestartsExhaustedError>;
  /** Ends supervision and stops the server. Idempotent. */
  stop(): Promise<void>;
}

/** The lines a SQLite "disk full" reaches the server's output with. */
const DISK_FULL = /database or disk is full|no space left on device|SQLITE_FULL/i;

/** The server's own words for a full disk in `text` (`database or disk is full`, …), if it holds any. */
export function diskFullWords(text: string): string | undefined {
  return DISK_FULL.exec(text)?.[0];
}

/** `1 h 2 min`, `3 min 4 s`, `5.2 s`. */
export function formatDuration(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return s % 60 === 0 ? `${s / 60} min` : `${Math.floor(s / 60)} min ${s % 60} s`;
  const min = Math.floor((s % 3600) / 60);
  return min === 0 ? `${Math.floor(s / 3600)} h` : `${Math.floor(s / 3600)} h ${min} min`;
}

/** A server's last output as notice lines: trimmed, each cut to 240 characters. */
function quoted(lines: readonly string[]): string[] {
  return lines.map((l) => `  | ${l.length > 240 ? `${l.slice(0, 237)}…` : l}`);
}

/** Starts the server and supervises it until {@link ServerSupervisor.stop} or until it gives up. */
export async function superviseServer(opts: SupervisorOptions): Promise<ServerSupervisor> {
  const what = opts.what ?? 'the Temporal server';
  const maxRestarts = opts.maxRestarts ?? 3;
  const windowMs = opts.restartWindowMs ?? 300_000;
  const intervalMs = opts.healthIntervalMs ?? 2_000;
  const timeoutMs = opts.healthTimeoutMs ?? 5_000;
  const unresponsiveAfterMs = opts.unresponsiveAfterMs ?? 20_000;
  const lastLines = opts.lastLines ?? 3;
  const events: SupervisorEvent[] = [];
  const emit = (event: SupervisorEvent) => {
    events.push(event);
    opts.onEvent?.(event);
  };

  let lastDiskFullNotice = 0;
  let supervising = false;
  let currentPid = 0;
  const onLine = (line: string) => {
    opts.onServerLine?.(line, currentPid);
    // Before the first start completes, a full disk fails that start, and the caller says so.
    if (DISK_FULL.test(line) && supervising) {
      const at = Date.now();
      emit({ type: 'disk-full', at, pid: currentPid, line });
      if (at - lastDiskFullNotice > 60_000) {
        lastDiskFullNotice = at;
        opts.say(
          `retryq: the disk holding ${opts.dataPath ?? "the server's data"} is full: ${what} says ` +
            `"${DISK_FULL.exec(line)?.[0] ?? 'disk full'}", so it cannot save intents. Free some space on that disk ` +
            `(or move RETRYQ_DATA_DIR to another disk); it keeps running. More in ${opts.logFile}`,
        );
      }
    }
  };

  let server = await opts.start(onLine);
  supervising = true;
  currentPid = server.pid;
  let startedAt = Date.now();
  emit({ type: 'started', at: startedAt, pid: server.pid, address: server.address });

  let state: 'running' | 'restarting' | 'stopped' | 'gave-up' = 'running';
  const deaths: number[] = [];
  let resolveGaveUp!: (err: ServerRestartsExhaustedError) => void;
  const gaveUp = new Promise<ServerRestartsExhaustedError>((r) => (resolveGaveUp = r));
  let health: Connection | undefined;
  let restarting: Promise<void> | undefined;

  const giveUp = (last: string) => {
    state = 'gave-up';
    const at = Date.now();
    emit({ type: 'gave-up', at, deaths: deaths.length, windowMs });
    resolveGaveUp(
      new ServerRestartsExhaustedError(
        `${what[0]?.toUpperCase()}${what.slice(1)} died ${deaths.length} times within ${formatDuration(windowMs)} ` +
          `(last: ${last}), so retryq dev gave up restarting it and stopped. Read its output in ${opts.logFile}; ` +
          `if it cannot start on its data${opts.dataPath ? ` (${opts.dataPath})` : ''}, move that data aside ` +
          `(its intents are lost) or set RETRYQ_DATA_DIR to a new folder, then start retryq dev again.`,
      ),
    );
  };

  /** Handles a death or a hang of `dead`: counts it, gives up or restarts. */
  const recover = async (failedAt: number, last: string) => {
    let lastReason = last;
    for (;;) {
      deaths.push(failedAt);
      while (deaths.length > 0 && deaths[0]! < Date.now() - windowMs) deaths.shift();
      if (deaths.length > maxRestarts) return giveUp(lastReason);
      const restart = deaths.length;
      emit({ type: 'restarting', at: Date.now(), restart, of: maxRestarts });
      // The first restart at once; a server that keeps dying gets a little room.
      if (restart > 1) await new Promise((r) => setTimeout(r, Math.min(1000 * 2 ** (restart - 2), 5000)));
      if (state !== 'restarting') return;
      try {
        const next = await opts.start(onLine);
        if (state !== 'restarting') {
          await next.stop();
          return;
        }
        server = next;
        currentPid = next.pid;
        startedAt = Date.now();
        state = 'running';
        watch(next);
        emit({ type: 'restarted', at: startedAt, pid: next.pid, restart, downMs: startedAt - failedAt });
        emit({ type: 'started', at: startedAt, pid: next.pid, address: next.address });
        opts.say(
          `retryq: ${what} is back (pid ${next.pid}, ${next.address}) ${formatDuration(startedAt - failedAt)} ` +
            `after it went down; the workers reconnect by themselves.`,
        );
        return;
      } catch (err) {
        const reason = (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'unknown';
        emit({ type: 'restart-failed', at: Date.now(), restart, reason });
        opts.say(`retryq: restarting ${what} failed: ${reason}`);
        const tail = (err as { logTail?: unknown }).logTail;
        if (typeof tail === 'string' && tail) for (const l of quoted(tail.split('\n').slice(-lastLines))) opts.say(l);
        lastReason = 'it could not start again';
        failedAt = Date.now();
      }
    }
  };

  const onDown = (
    failedAt: number,
    last: string,
    notice: string,
    tail: string[],
    beforeRestart?: () => Promise<void>,
  ) => {
    if (state !== 'running') return;
    state = 'restarting';
    const restartsLeft = maxRestarts - deaths.filter((t) => t >= failedAt - windowMs).length;
    opts.say(
      notice +
        (restartsLeft > 0
          ? `; restarting it${opts.dataPath ? ` from ${opts.dataPath}` : ''} (restart ${maxRestarts - restartsLeft + 1} of ${maxRestarts}).`
          : '.') +
        ` Its last output is below; all of it is in ${opts.logFile}`,
    );
    for (const l of quoted(tail)) opts.say(l);
    restarting = (async () => {
      await beforeRestart?.();
      await recover(failedAt, last);
    })().finally(() => (restarting = undefined));
  };

  function watch(s: ManagedServer): void {
    void s.exited.then(({ code, signal }) => {
      if (s !== server || state !== 'running') return;
      const at = Date.now();
      const lastOutput = s.logTail(lastLines).split('\n').filter(Boolean);
      emit({ type: 'exited', at, pid: s.pid, code, signal, uptimeMs: at - startedAt, lastOutput });
      const how = signal ? `killed by ${signal}` : `exit code ${code ?? '?'}`;
      onDown(
        at,
        how,
        `retryq: ${what} (pid ${s.pid}) died (${how}) after running ${formatDuration(at - startedAt)}`,
        lastOutput,
      );
    });
  }
  watch(server);

  // Health: a server that lives but does not answer (stopped, deadlocked, swapping) is as good as dead.
  let lastAnswerAt = Date.now();
  let checking = false;
  const check = async () => {
    if (checking || state !== 'running') return;
    checking = true;
    const s = server;
    try {
      health ??= await Connection.connect({ address: s.address, connectTimeout: timeoutMs });
      await health.withDeadline(Date.now() + timeoutMs, () => health!.workflowService.getSystemInfo({}));
      lastAnswerAt = Date.now();
    } catch {
      const now = Date.now();
      const silentFrom = Math.max(lastAnswerAt, startedAt);
      if (s === server && state === 'running' && now - silentFrom >= unresponsiveAfterMs) {
        const identity = await processIdentity(s.pid);
        if (identity && s === server && state === 'running') {
          const stopped = identity.stopped === true;
          const lastOutput = s.logTail(lastLines).split('\n').filter(Boolean);
          emit({ type: 'unresponsive', at: now, pid: s.pid, silentMs: now - silentFrom, stopped, lastOutput });
          const why = stopped ? 'it is stopped (SIGSTOP or a debugger)' : 'it is hung or starved';
          onDown(
            now,
            'it stopped answering',
            `retryq: ${what} (pid ${s.pid}) has not answered for ${formatDuration(now - silentFrom)}: ${why}. ` +
              `Killing it`,
            lastOutput,
            () => s.stop(1000), // SIGTERM, then SIGKILL, which a stopped process cannot ignore either
          );
        }
      }
    } finally {
      checking = false;
    }
  };
  const healthTimer = setInterval(() => void check(), intervalMs);
  healthTimer.unref();

  return {
    get server() {
      return server;
    },
    events,
    gaveUp,
    async stop() {
      if (state === 'stopped') return;
      state = 'stopped';
      clearInterval(healthTimer);
      await health?.close().catch(() => undefined);
      await restarting;
      await server.stop();
    },
  };
}
