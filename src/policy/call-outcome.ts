/**
 * What one provider call tells the intent, as the activity that made it concluded: the evidence without raw headers,
 * and the decision already classified, with the server-permitted time as an absolute instant. The activity
 * classifies once, where the answer arrives ({@link callDecisionOf}); the intent's state machine schedules from it
 * and never parses a header (DESIGN.md, "classify once").
 *
 * Plain, workflow-safe data: it travels in activity failure details and in the intent's history.
 *
 * @example
 * ```ts
 * import { classify } from './classify.js';
 * import { callDecisionOf } from './call-outcome.js';
 * const evidence = { method: 'POST', status: 429, headers: { 'retry-after': '120' }, sent: 'yes' } as const;
 * callDecisionOf(classify(evidence, { now }), evidence);
 * // { kind: 'rate_limited', permittedAtMs: now + 120 000, retryAfter: '120' }
 * ```
 *
 * @module
 */
import type { PermanentReason } from './code-table.js';
import type { Decision } from './classify.js';
import type { Evidence, Purpose, Sent } from './evidence.js';
import { headerValue } from './evidence.js';

/** The evidence of a call, without headers: what travels to the workflow. */
export interface CallEvidence {
  method: string;
  purpose?: Purpose | undefined;
  status?: number | undefined;
  /** Why no response arrived (`refused`, `timeout`, …; `aborted` for a call a cancel cut off). */
  transport?: string | undefined;
  code?: string | undefined;
  sent: Sent;
}

/** A non-success decision as the activity made it. */
export type CallDecision =
  | {
      kind: 'rate_limited' | 'transient';
      reason?: string | undefined;
      /**
       * ms since the epoch on the worker's clock: the server-permitted time (Retry-After; an HTTP-date is
       * skew-corrected against the answer's `Date`), when the server set one.
       */
      permittedAtMs?: number | undefined;
      /**
       * ms: how long after the answer arrived the server permits the next call (`permittedAtMs` − the worker's clock
       * at the answer). The workflow counts it from its own clock when it handles the answer, which lies after the
       * answer's arrival: never earlier than the provider permits, whatever the worker's clock says of the workflow's
       * (a time-skipping test runs far ahead of it).
       */
      waitMs?: number | undefined;
      /** The `Retry-After` value as the provider sent it (at most 64 characters), for people. */
      retryAfter?: string | undefined;
    }
  | { kind: 'permanent'; reason: PermanentReason; code?: string | undefined }
  | { kind: 'unknown_outcome'; reason: string };

/** Why a call was held by the credential's load control (nothing was sent; not an attempt). */
export type CredentialHold =
  | {
      /** `rate_limited`: the gate is closed after a rate-limit answer; `paced`: no send slot within the horizon. */
      kind: 'rate_limited' | 'paced';
      credential: string;
      /** How long from the moment the activity gave up until the gate opens / the slot comes (ms). */
      holdMs: number;
      /** Place among the calls held by the same floor (spreads their wake-ups). */
      rank: number;
      /** The rate held calls may be released at (the credential's dispatch or inspection budget per minute). */
      perMinute: number;
      /** What closed the gate, for people. */
      why?: string | undefined;
    }
  | {
      kind: 'blocked';
      credential: string;
      /** Why the credential is blocked (the quota or spending-limit answer). */
      reason: string;
      /** ISO time it was blocked. */
      since: string;
    };

/** The evidence without its headers. */
export function callEvidenceOf(e: Evidence): CallEvidence {
  return {
    method: e.method,
    ...(e.purpose !== undefined ? { purpose: e.purpose } : {}),
    ...(e.status !== undefined ? { status: e.status } : {}),
    ...(e.transport !== undefined ? { transport: e.transport } : {}),
    ...(e.code !== undefined ? { code: e.code } : {}),
    sent: e.sent,
  };
}

/** A classified decision as the workflow receives it. `decision` must not be a success. */
export function callDecisionOf(decision: Exclude<Decision, { kind: 'success' }>, evidence: Evidence): CallDecision {
  switch (decision.kind) {
    case 'rate_limited':
    case 'transient': {
      const ra = decision.retryAfter;
      const raw = headerValue(evidence.headers, 'retry-after');
      return {
        kind: decision.kind,
        ...(decision.kind === 'transient' ? { reason: decision.reason } : {}),
        ...(ra.kind === 'delay' || ra.kind === 'date'
          ? {
              permittedAtMs: ra.notBefore.getTime(),
              waitMs: Math.max(
                0,
                ra.notBefore.getTime() - (evidence.receivedAtMs ?? ra.notBefore.getTime() - ra.delayMs),
              ),
            }
          : {}),
        ...(raw !== undefined ? { retryAfter: raw.slice(0, 64) } : {}),
      };
    }
    case 'permanent':
      return {
        kind: 'permanent',
        reason: decision.reason,
        ...(decision.code !== undefined ? { code: decision.code } : {}),
      };
    case 'unknown_outcome':
      return { kind: 'unknown_outcome', reason: decision.reason };
  }
}
