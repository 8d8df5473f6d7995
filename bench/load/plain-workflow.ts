/**
 * Baseline (d) of bench:load: what a plain Temporal application does — one workflow per intent whose activity
 * POSTs once and throws on any non-2xx answer, retried by Temporal's default activity retry policy (1 s, doubling,
 * up to 100 s, unlimited attempts), which knows nothing of Retry-After.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { PlainActivities } from './plain-activities.js';

const { post } = proxyActivities<PlainActivities>({ startToCloseTimeout: '30s' });

export async function plainIntentWorkflow(url: string, idempotencyKey: string, body: unknown): Promise<number> {
  return post(url, idempotencyKey, body);
}
