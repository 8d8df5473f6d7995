/**
 * Heartbeats of the dispatch and inspection activities. While an activity waits — for its credential's send slot,
 * for the provider's answer — it heartbeats every {@link HEARTBEAT_EVERY_MS}, so that:
 *
 * - a worker that dies mid-call is noticed when its heartbeats stop (the workflow's heartbeat timeout, a few
 *   seconds), not when the call's whole start-to-close timeout runs out; the attempt then goes to inspection;
 * - a cancellation of the activity (a cancelled intent) reaches it: the SDK delivers cancellation only to an
 *   activity that heartbeats, and aborts `Context.current().cancellationSignal`, which aborts the HTTP request.
 *
 * The worker sends heartbeats to the server at most once per `maxHeartbeatThrottleInterval` (retryq's workers set
 * it to this interval; see src/worker.ts), well inside the workflow's heartbeat timeout.
 */
import { Context } from '@temporalio/activity';

/** How often an activity heartbeats while it waits, in ms. */
export const HEARTBEAT_EVERY_MS = 1_000;

/**
 * Runs `work` while heartbeating. When the activity was cancelled meanwhile, throws the SDK's cancellation (so the
 * activity ends as cancelled, not as a failed attempt) instead of what `work` made of the aborted call.
 */
export async function whileHeartbeating<T>(work: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  // The first heartbeat after one interval, not at the start: a call answered within it (the common case) sends
  // none, which saves the server one write per call. The heartbeat timeout counts from the activity's start, so a
  // worker that dies before its first heartbeat is still noticed in time.
  const timer = setInterval(() => ctx.heartbeat(), HEARTBEAT_EVERY_MS);
  try {
    const result = await work();
    if (ctx.cancellationSignal.aborted) throw ctx.cancellationSignal.reason;
    return result;
  } catch (err) {
    if (ctx.cancellationSignal.aborted) throw ctx.cancellationSignal.reason;
    throw err;
  } finally {
    clearInterval(timer);
  }
}
