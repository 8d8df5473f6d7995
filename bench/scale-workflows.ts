/**
 * The bare Temporal baselines of `npm run bench:scale`: the least a plain Temporal application does for the same
 * job, on the same server, with SDK defaults. Bundled on its own (nothing from retryq).
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { patched, proxyActivities, proxyLocalActivities, sleep, upsertSearchAttributes } from '@temporalio/workflow';

/** The bare baseline's one activity (bench/scale-worker.mjs): the same HTTP request retryq's dispatch sends. */
interface BareActivities {
  call(url: string, key: string): Promise<number>;
}

const { call } = proxyActivities<BareActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 1 } });

/** Starts and blocks on a one-hour timer. */
export async function sleeper(): Promise<void> {
  await sleep('1h');
}

/** retryq's phase attribute (the bench registers retryq's search attributes on its dev server). */
const phaseKey = defineSearchAttributeKey('RetryPhase', SearchAttributeType.KEYWORD);
/** retryq's next-attempt time, upserted with the phase when an intent goes to sleep. */
const nextAttemptAtKey = defineSearchAttributeKey('NextAttemptAt', SearchAttributeType.DATETIME);

/** The recorded sleeper's local activity (bench/scale-worker.mjs): answers from memory, as the gate check does. */
interface RecordedActivities {
  heldHint(): Promise<string>;
}

const { heldHint } = proxyLocalActivities<RecordedActivities>({ startToCloseTimeout: '2s' });

/**
 * {@link sleeper} recording what a held intent must record on its way to sleep, and nothing else: a patch (its marker,
 * and the version upsert the SDK adds to every patch), one local activity's answer (its marker) and the visible phase
 * (one upsert: the phase and the wake-up time). retryq's held intent records exactly these, so retryq's settle time
 * over this side's is what retryq costs beyond what DESIGN.md requires an intent to record.
 */
export async function sleeperRecorded(): Promise<void> {
  if (patched('bench-gate-check')) await heldHint();
  // One upsert event, as retryq's: the phase and the time the intent wakes.
  upsertSearchAttributes([
    { key: phaseKey, value: 'waiting' },
    { key: nextAttemptAtKey, value: new Date(Date.now() + 3_600_000) },
  ]);
  await sleep('1h');
}

/** One HTTP call (answered 429 by the bench provider), then a one-hour timer: an intent's path to sleep. */
export async function callThenSleep(url: string, key: string): Promise<void> {
  await call(url, key);
  await sleep('1h');
}

/** One HTTP call through one activity: an intent that succeeds at once. */
export async function callOnce(url: string, key: string): Promise<number> {
  return call(url, key);
}

// Part b's decomposition sides: the bare workflow with one of retryq's costs added at a time, so that the gap between
// retryq and bare is measured piece by piece in the same run.

/**
 * The same activity on a task queue of its own, as retryq's dispatch runs on its credential's: `<queue>-activities`
 * of part b's bare worker (bench/scale-worker.mjs serves it when `ownActivityQueue` is set).
 */
const { call: callOnItsOwnQueue } = proxyActivities<BareActivities>({
  startToCloseTimeout: '30s',
  retry: { maximumAttempts: 1 },
  taskQueue: 'scale-b-bare-activities',
});

/** {@link callOnce} with its activity matched on a queue of its own: no eager dispatch with the workflow task. */
export async function callOnceOwnQueue(url: string, key: string): Promise<number> {
  return callOnItsOwnQueue(url, key);
}

/** One call between the two search-attribute upserts of a successful intent (`dispatching`, `succeeded`). */
async function betweenUpserts(send: () => Promise<number>): Promise<number> {
  upsertSearchAttributes([{ key: phaseKey, value: 'dispatching' }]);
  const status = await send();
  upsertSearchAttributes([{ key: phaseKey, value: 'succeeded' }]);
  return status;
}

/** {@link callOnce} with the two search-attribute upserts of a successful intent. */
export async function callOnceWithUpserts(url: string, key: string): Promise<number> {
  return betweenUpserts(() => call(url, key));
}

/** Both at once: the activity on a queue of its own and the two upserts (the costs DESIGN.md requires of an intent). */
export async function callOnceOwnQueueWithUpserts(url: string, key: string): Promise<number> {
  return betweenUpserts(() => callOnItsOwnQueue(url, key));
}

/**
 * The same activity on its own queue with the two timeouts DESIGN.md requires of a dispatch besides its
 * start-to-close: a schedule-to-start timeout (nothing starts after the intent's deadline, invariant 7; 60 s, the
 * stall time, as retryq's first dispatch has) and a heartbeat timeout (a dead worker is noticed in seconds; 5 s). The
 * server keeps a timer for each: one when the activity is scheduled, one when it starts.
 */
const { call: callWatched } = proxyActivities<BareActivities>({
  startToCloseTimeout: '30s',
  scheduleToStartTimeout: '60s',
  heartbeatTimeout: '5s',
  retry: { maximumAttempts: 1 },
  taskQueue: 'scale-b-bare-activities',
});

/** {@link callOnceOwnQueueWithUpserts} with the dispatch's two further timeouts: every cost DESIGN.md requires. */
export async function callOnceWatchedWithUpserts(url: string, key: string): Promise<number> {
  return betweenUpserts(() => callWatched(url, key));
}
