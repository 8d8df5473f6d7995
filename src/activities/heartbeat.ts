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
 * Runs `work` while heartbeating. `work` calls `sending()` just before its request may leave the process.
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
  ctx.heartbeat();
  const timer = setInterval(() => ctx.heartbeat(), HEARTBEAT_EVERY_MS);
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
    clearInterval(timer);
  }
}
