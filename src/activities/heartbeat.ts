/**
 * Heartbeats of the dispatch and inspection activities. While an activity waits — for its credential's send slot,
 * for the provider's answer — it heartbeats every {@link HEARTBEAT_EVERY_MS}, so that:
 *
 * - a worker that dies mid-call is noticed when its heartbeats stop (the workflow's heartbeat timeout, a few
 *   seconds), not when the call's whole start-to-close timeout runs out; the attempt then goes to inspection;
 * - a cancellation of the activity (a cancelled intent) reaches it: the SDK delivers cancellation only to an
 *   activity that heartbeats, and aborts `Context.current().cancellationSignal`, which aborts the HTTP request
 *   (or the wait for a send slot, and then nothing was sent).
 *
 * The worker sends heartbeats to the server at most once per `maxHeartbeatThrottleInterval` (retryq's workers set
 * it to this interval; see src/worker.ts), well inside the workflow's heartbeat timeout.
 */
import { Context } from '@temporalio/activity';

/** How often an activity heartbeats while it waits, in ms. */
export const HEARTBEAT_EVERY_MS = 1_000;

/**
 * When an activity sends its first heartbeat, in ms from `nowMs`. A call answered before then sends none (a
 * heartbeat is one more write on the server for every dispatch). Never later than {@link HEARTBEAT_EVERY_MS}, and
 * never later than half the heartbeat timeout after the attempt was *scheduled*: the server counts that timeout from
 * the attempt's start, which comes after its scheduling, so an activity that reached a busy worker late heartbeats
 * at once and keeps at least half the timeout for the heartbeat to arrive. Without a heartbeat timeout, heartbeats
 * only carry cancellations: the first one after {@link HEARTBEAT_EVERY_MS}.
 */
export function firstHeartbeatDelayMs(
  info: { currentAttemptScheduledTimestampMs: number; heartbeatTimeoutMs?: number | undefined },
  nowMs: number,
): number {
  const timeout = info.heartbeatTimeoutMs;
  if (!timeout || !Number.isFinite(info.currentAttemptScheduledTimestampMs)) return timeout ? 0 : HEARTBEAT_EVERY_MS;
  const latest = info.currentAttemptScheduledTimestampMs + timeout / 2;
  return Math.max(0, Math.min(HEARTBEAT_EVERY_MS, latest - nowMs));
}

/**
 * Runs `work` while heartbeating (the first heartbeat after {@link firstHeartbeatDelayMs}, then every
 * {@link HEARTBEAT_EVERY_MS}). `work` calls `sending()` just before its request may leave the process.
 *
 * When the activity was cancelled before that, throws the SDK's cancellation, so the activity ends as cancelled:
 * a cancelled activity then always means "nothing was sent" (the intent workflow relies on it, see
 * `watchedDispatch` in src/workflows/intent.ts). Once the request may have left, the cancellation aborts it and the
 * activity ends with what `work` made of the aborted call — a failure whose evidence says the outcome is unknown
 * (or the answer, if it arrived first) — because the provider may have received it.
 */
export async function whileHeartbeating<T>(work: (sending: () => void) => Promise<T>): Promise<T> {
  const ctx = Context.current();
  let mayHaveSent = false;
  const cancelledBeforeSending = () => ctx.cancellationSignal.aborted && !mayHaveSent;
  let timer: NodeJS.Timeout | undefined;
  const first = setTimeout(
    () => {
      ctx.heartbeat();
      timer = setInterval(() => ctx.heartbeat(), HEARTBEAT_EVERY_MS);
    },
    firstHeartbeatDelayMs(ctx.info, Date.now()),
  );
  try {
    const result = await work(() => {
      mayHaveSent = true;
    });
    if (cancelledBeforeSending()) throw ctx.cancellationSignal.reason;
    return result;
  } catch (err) {
    if (cancelledBeforeSending()) throw ctx.cancellationSignal.reason;
    throw err;
  } finally {
    clearTimeout(first);
    clearInterval(timer);
  }
}
