/**
 * The bare Temporal baselines of `npm run bench:scale`: the least a plain Temporal application does for the same
 * job, on the same server, with SDK defaults. Bundled on its own (nothing from retryq).
 */
import { proxyActivities, sleep } from '@temporalio/workflow';

/** The bare baseline's one activity (bench/scale-worker.mjs): the same HTTP request retryq's dispatch sends. */
interface BareActivities {
  call(url: string, key: string): Promise<number>;
}

const { call } = proxyActivities<BareActivities>({ startToCloseTimeout: '30s', retry: { maximumAttempts: 1 } });

/** Starts and blocks on a one-hour timer. */
export async function sleeper(): Promise<void> {
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
