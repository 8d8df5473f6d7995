/**
 * What an inspection means for the intent: the state the provider holds under the idempotency key (found by the
 * inspect activity) → the decision the workflow applies. The workflow maps the result to Temporal calls; it
 * builds no decisions itself.
 *
 * @module
 */
import type { CodeTable } from './code-table.js';
import type { Decision } from './classify.js';
import { classify } from './classify.js';
import type { Evidence } from './evidence.js';

/** What the provider holds under the idempotency key (the inspect activity's answer). */
export type InspectionFinding<R = unknown> =
  | { kind: 'absent' }
  | { kind: 'succeeded'; result: R }
  | { kind: 'failed'; error: { status?: number | undefined; code?: string | undefined; message?: string | undefined } }
  | { kind: 'pending'; state: string };

/** A decision that schedules another provider call. */
export type RetryDecision = Extract<Decision, { kind: 'rate_limited' | 'transient' }>;

/**
 * What an inspection's finding means.
 *
 * - `took_effect`: the attempt of unknown outcome succeeded at the provider; `result` is what it holds.
 * - `redispatch`: it did not take effect; dispatch again with the same key, after `decision` (the backoff, and
 *   never before the server's earlier floor).
 * - `inspect_again`: the operation is still pending; inspect again after `decision`.
 * - `recorded_failure`: the provider recorded the attempt as failed. Final whatever `decision` says: the same
 *   idempotency key would only replay that answer. `evidence` is what the provider recorded, as if it had answered.
 */
export type InspectionVerdict<R = unknown> =
  | { kind: 'took_effect'; result: R }
  | { kind: 'redispatch'; decision: RetryDecision }
  | { kind: 'inspect_again'; decision: RetryDecision }
  | { kind: 'recorded_failure'; evidence: Evidence; decision: Decision };

/** Input of {@link inspectionVerdict}. */
export interface InspectionContext {
  /** The intent's HTTP method (a recorded failure is classified as an answer to it). */
  method: string;
  /** The server's floor for the next dispatch, in ms since the epoch, when it set one. */
  permittedAtMs: number | undefined;
  /** The current time (in a workflow: workflow time). */
  now: Date;
  /** The intent's code table. @default the built-in one */
  codes?: CodeTable | undefined;
}

/**
 * What an inspection's finding means for the intent; see {@link InspectionVerdict}.
 *
 * @example
 * inspectionVerdict({ kind: 'pending', state: 'processing' }, { method: 'POST', permittedAtMs: undefined, now });
 * // { kind: 'inspect_again', decision: { kind: 'transient', reason: 'operation processing', retryAfter: { kind: 'absent' } } }
 */
export function inspectionVerdict<R>(found: InspectionFinding<R>, ctx: InspectionContext): InspectionVerdict<R> {
  switch (found.kind) {
    case 'succeeded':
      return { kind: 'took_effect', result: found.result };
    case 'absent': {
      // A failed attempt all the same: the next one waits for the backoff and any server floor, like after a
      // transient failure.
      const floor = ctx.permittedAtMs;
      return {
        kind: 'redispatch',
        decision: {
          kind: 'transient',
          reason: 'the attempt of unknown outcome did not take effect',
          retryAfter:
            floor === undefined
              ? { kind: 'absent' }
              : {
                  kind: 'delay',
                  delayMs: Math.max(0, floor - ctx.now.getTime()),
                  notBefore: new Date(floor),
                  clamped: false,
                },
        },
      };
    }
    case 'pending':
      return {
        kind: 'inspect_again',
        decision: { kind: 'transient', reason: `operation ${found.state}`, retryAfter: { kind: 'absent' } },
      };
    case 'failed': {
      const evidence: Evidence = {
        method: ctx.method,
        sent: 'yes',
        status: found.error.status ?? 500,
        ...(found.error.code !== undefined ? { code: found.error.code } : {}),
      };
      return { kind: 'recorded_failure', evidence, decision: classify(evidence, { now: ctx.now, codes: ctx.codes }) };
    }
  }
}

/**
 * The decision after the inspection call itself failed: a permanent failure stays permanent (the outcome stays
 * unknown for good); anything else is inspected again after the backoff (or the server's `Retry-After`).
 *
 * @param decision - {@link classify} of the failed inspection's evidence
 */
export function inspectionFailure(decision: Decision): RetryDecision | Extract<Decision, { kind: 'permanent' }> {
  if (decision.kind === 'success' || decision.kind === 'unknown_outcome')
    return { kind: 'transient', reason: 'inspection failed', retryAfter: { kind: 'absent' } };
  return decision;
}
