/**
 * retryq's own counters, emitted by the intent workflow through the Temporal SDK's workflow metric meter: the
 * worker exports them with the SDK's metrics (Prometheus, `RETRYQ_METRICS_PORT`, see docs/operations.md). The SDK
 * emits nothing while a workflow replays, so a counter counts each event once, on the worker that first ran it.
 *
 * Every label is a fixed word or a credential id (never a secret); the SDK adds `namespace`, `taskQueue` and
 * `workflowType`. Counters are created where they are used, not at module load (workflow code stays light).
 *
 * | metric (Prometheus) | labels | counts |
 * | --- | --- | --- |
 * | `retryq_attempts_total` | `credential`, `decision` | dispatch attempts by the policy's decision |
 * | `retryq_rate_limited_answers_total` | `credential`, `kind` | HTTP 429 answers, dispatch or inspect |
 * | `retryq_inspections_total` | `credential`, `result` | inspections by what they found |
 * | `retryq_intents_ended_total` | `credential`, `phase` | intents reaching a final phase |
 * | `retryq_dispatches_held_total` | `credential`, `reason` | calls held by load control (not sent, not attempts) |
 * | `retryq_dispatches_stalled_total` | `credential` | dispatches no worker started within the stall time |
 *
 * @example
 * ```ts
 * import { countAttempt } from './intent-metrics.js';
 * countAttempt('acme-prod', 'transient');
 * ```
 */
import { metricMeter } from '@temporalio/workflow';

function add(name: string, description: string, tags: Record<string, string>): void {
  metricMeter.createCounter(name, undefined, description).add(1, tags);
}

/** One dispatch attempt and the policy's decision about it (`success`, `transient`, `rate_limited`, …). */
export function countAttempt(credential: string, decision: string): void {
  add('retryq_attempts', 'Dispatch attempts by the decision the policy made of their evidence', {
    credential,
    decision,
  });
}

/** One HTTP 429 answer to a dispatch or an inspection. */
export function countRateLimited(credential: string, kind: 'dispatch' | 'inspect'): void {
  add('retryq_rate_limited_answers', 'HTTP 429 answers from the provider, by credential', { credential, kind });
}

/** One inspection and what it found (`succeeded`, `absent`, `pending`, `failed`, `error`). */
export function countInspection(credential: string, result: string): void {
  add('retryq_inspections', 'Inspections by what they found', { credential, result });
}

/** One intent reaching a final phase. */
export function countEnded(credential: string, phase: string): void {
  add('retryq_intents_ended', 'Intents reaching a final phase', { credential, phase });
}

/** One call held by the credential's load control (`rate_limited`, `paced`, `blocked`): not sent, not an attempt. */
export function countHeld(credential: string, reason: string): void {
  add('retryq_dispatches_held', 'Calls held by load control: not sent and not attempts', { credential, reason });
}

/** One dispatch that no worker started within the stall time (no live worker serves the credential). */
export function countStalled(credential: string): void {
  add('retryq_dispatches_stalled', 'Dispatches no worker started within the stall time', { credential });
}
