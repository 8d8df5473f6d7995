/**
 * The typed failure vocabulary shared by activities and workflows: one `const` object plus a same-named type,
 * the shape of the details, and the one place that encodes ({@link dispatchFailure}) and decodes
 * ({@link answerFromFailure}) them.
 *
 * Activities throw `ApplicationFailure`s whose `type` is a {@link FailureType} and whose first detail is
 * {@link FailureDetails} (the evidence). Workflows recognise them with {@link answerFromFailure}, by `type` and a
 * structural check of the details, never by `instanceof` of our own classes or by message text.
 *
 * Workflow-safe and light: no zod and nothing built at module load, because the SDK loads a workflow's modules
 * once per cached workflow (see DESIGN.md "Workflow code stays light"). The details are plain data that retryq's own
 * activities build from typed evidence; {@link readFailureDetails} checks every field before the workflow uses it.
 *
 * @example
 * ```ts
 * import { dispatchFailure, answerFromFailure } from './failures.js';
 * const failure = dispatchFailure({ method: 'POST', status: 429, sent: 'yes' }, { kind: 'rate_limited', retryAfter: { kind: 'absent' } }, 'POST api.example.com/v1/charges');
 * failure.type; // 'RateLimited'
 * ```
 */
import {
  ActivityFailure,
  ApplicationFailure,
  ApplicationFailureCategory,
  TimeoutFailure,
  TimeoutType,
} from '@temporalio/common';
import { callDecisionOf, callEvidenceOf } from './policy/call-outcome.js';
import type { CallDecision, CallEvidence, CredentialHold } from './policy/call-outcome.js';
import type { Decision } from './policy/classify.js';
import { classify } from './policy/classify.js';
import type { Evidence, Purpose, Sent } from './policy/evidence.js';
import { describeEvidence } from './policy/evidence-text.js';

export type { CallDecision, CallEvidence, CredentialHold };

/** `ApplicationFailure.type` of every failure an activity raises about a provider call. */
export const FailureType = {
  /** 429 or a rate-limit code: wait for the server-permitted time. */
  RateLimited: 'RateLimited',
  /** A passing failure with a definite answer: back off and retry. */
  Transient: 'Transient',
  /** Retrying cannot help (permission, invalid, conflict, quota, …). */
  Permanent: 'Permanent',
  /** A write may have reached the provider and got no definite answer: inspect before anything else. */
  OutcomeUnknown: 'OutcomeUnknown',
  /**
   * Not sent: the credential's load control held the call (its gate is closed after a rate limit, its pacer has no
   * slot soon enough, or it is blocked after a quota answer). Not an attempt; the details carry a {@link CredentialHold}.
   */
  CredentialHeld: 'CredentialHeld',
} as const;
export type FailureType = (typeof FailureType)[keyof typeof FailureType];
const failureTypes: ReadonlySet<string> = new Set(Object.values(FailureType));

/** `ApplicationFailure.type` of a failed intent workflow (what `result()` decodes). */
export const IntentFailureType = {
  IntentFailed: 'IntentFailed',
  IntentExpired: 'IntentExpired',
  IntentCancelled: 'IntentCancelled',
} as const;
export type IntentFailureType = (typeof IntentFailureType)[keyof typeof IntentFailureType];

/**
 * `ApplicationFailure.type` of a webhook delivery the intent turned away in its `webhook` update's validator (a
 * rejected update leaves nothing in history). The first detail is `{ phase }` for `WebhookIntentEnded`.
 */
export const WebhookRejection = {
  /** The intent has already recorded this delivery id. */
  DeliverySeen: 'WebhookDeliverySeen',
  /** The intent has ended; nothing can move it. */
  IntentEnded: 'WebhookIntentEnded',
} as const;
export type WebhookRejection = (typeof WebhookRejection)[keyof typeof WebhookRejection];

/** The first detail of every {@link FailureType} failure. */
export interface FailureDetails {
  /** What the call told us, without headers. */
  evidence: CallEvidence;
  /** The activity's classification, with the server-permitted time as an absolute instant (classified once). */
  decision: CallDecision;
  /** A bounded excerpt of the provider's error message, for people (at most 500 characters). */
  message?: string;
}

/** Longest structured error code carried in failure details. */
const CODE_LIMIT = 200;
/** Longest message excerpt carried in failure details. */
const MESSAGE_LIMIT = 500;
const sentValues: ReadonlySet<string> = new Set(['no', 'yes', 'unknown']);
const purposes: ReadonlySet<string> = new Set(['dispatch', 'inspect']);
const decisionKinds: ReadonlySet<string> = new Set(['rate_limited', 'transient', 'permanent', 'unknown_outcome']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const optional = (v: unknown, type: 'string' | 'number') => v === undefined || typeof v === type;

/**
 * Reads failure details back: the {@link FailureDetails} when `value` has their shape (every field checked),
 * `undefined` otherwise. Unknown fields are dropped.
 */
export function readFailureDetails(value: unknown): FailureDetails | undefined {
  if (!isRecord(value) || !isRecord(value['evidence']) || !isRecord(value['decision'])) return undefined;
  const e = value['evidence'];
  const d = value['decision'];
  const { method, purpose, status, transport, code, sent } = e;
  if (typeof method !== 'string' || typeof sent !== 'string' || !sentValues.has(sent)) return undefined;
  if (purpose !== undefined && (typeof purpose !== 'string' || !purposes.has(purpose))) return undefined;
  if (status !== undefined && !Number.isInteger(status)) return undefined;
  if (!optional(transport, 'string')) return undefined;
  if (code !== undefined && (typeof code !== 'string' || code.length > CODE_LIMIT)) return undefined;
  if (typeof d['kind'] !== 'string' || !decisionKinds.has(d['kind'])) return undefined;
  if (!optional(d['reason'], 'string') || !optional(d['code'], 'string') || !optional(d['retryAfter'], 'string'))
    return undefined;
  if (d['permittedAtMs'] !== undefined && !Number.isFinite(d['permittedAtMs'])) return undefined;
  if (d['waitMs'] !== undefined && !(Number.isFinite(d['waitMs']) && (d['waitMs'] as number) >= 0)) return undefined;
  if ((d['kind'] === 'permanent' || d['kind'] === 'unknown_outcome') && typeof d['reason'] !== 'string')
    return undefined;
  const message = value['message'];
  if (message !== undefined && (typeof message !== 'string' || message.length > MESSAGE_LIMIT)) return undefined;
  const evidence: CallEvidence = {
    method,
    sent: sent as Sent,
    ...(purpose !== undefined ? { purpose: purpose as Purpose } : {}),
    ...(status !== undefined ? { status: status as number } : {}),
    ...(transport !== undefined ? { transport: transport as string } : {}),
    ...(code !== undefined ? { code } : {}),
  };
  const decision = Object.fromEntries(
    ['kind', 'reason', 'code', 'permittedAtMs', 'waitMs', 'retryAfter']
      .filter((k) => d[k] !== undefined)
      .map((k) => [k, d[k]]),
  ) as CallDecision;
  return { evidence, decision, ...(message !== undefined ? { message } : {}) };
}

/** Which failure type a (non-success) decision raises. */
export function failureTypeOf(decision: Exclude<Decision, { kind: 'success' }>): FailureType {
  switch (decision.kind) {
    case 'rate_limited':
      return FailureType.RateLimited;
    case 'transient':
      return FailureType.Transient;
    case 'permanent':
      return FailureType.Permanent;
    case 'unknown_outcome':
      return FailureType.OutcomeUnknown;
  }
}

/**
 * Builds the failure an activity throws for a non-success decision: the evidence (without headers) and the decision,
 * classified here, once, with the server-permitted time as an absolute instant. Non-retryable: the workflow owns
 * retries (and the dispatch activity runs with `maximumAttempts: 1` anyway). Expected conditions (rate limits,
 * transient failures) are `BENIGN`, which keeps them out of error logs and failure metrics.
 */
export function dispatchFailure(
  evidence: Evidence,
  decision: Exclude<Decision, { kind: 'success' }>,
  target: string,
  message?: string,
): ApplicationFailure {
  const type = failureTypeOf(decision);
  const bounded = callEvidenceOf(evidence);
  if (bounded.code !== undefined) bounded.code = bounded.code.slice(0, CODE_LIMIT);
  const details: FailureDetails = {
    evidence: bounded,
    decision: callDecisionOf(decision, evidence),
    ...(message ? { message: message.slice(0, MESSAGE_LIMIT) } : {}),
  };
  return ApplicationFailure.create({
    type,
    message: `${describeEvidence(evidence)} from ${target}`,
    nonRetryable: true,
    details: [details],
    ...(type === FailureType.RateLimited || type === FailureType.Transient
      ? { category: ApplicationFailureCategory.BENIGN }
      : {}),
  });
}

/** True when `err` is an `ApplicationFailure` of one of our {@link FailureType}s. */
export function isProviderFailure(err: unknown): err is ApplicationFailure & { type: FailureType } {
  return err instanceof ApplicationFailure && typeof err.type === 'string' && failureTypes.has(err.type);
}

/**
 * What an activity failure tells the workflow: the evidence and the activity's decision. Decodes our typed failures
 * ({@link readFailureDetails}); maps a Temporal timeout to a transport timeout (`sent: 'no'` when the task never
 * started, `unknown` otherwise) and anything else (a worker crash, a bug) to an unknown transport failure that may
 * have been sent: for a write that means inspection, never a blind re-dispatch. Those carry no headers, so their
 * classification reads none.
 */
export function answerFromFailure(
  err: unknown,
  method: string,
  purpose: 'dispatch' | 'inspect',
): { evidence: CallEvidence; decision: CallDecision } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (isProviderFailure(cause)) {
    const details = readFailureDetails(cause.details?.[0]);
    if (details) return { evidence: details.evidence, decision: details.decision };
  }
  const evidence: Evidence =
    cause instanceof TimeoutFailure
      ? {
          method,
          purpose,
          transport: 'timeout',
          sent: cause.timeoutType === TimeoutType.SCHEDULE_TO_START ? 'no' : 'unknown',
        }
      : { method, purpose, transport: 'other', sent: 'unknown' };
  const decision = classify(evidence);
  return {
    evidence: callEvidenceOf(evidence),
    decision:
      decision.kind === 'success'
        ? { kind: 'unknown_outcome', reason: 'inconsistent activity result' }
        : callDecisionOf(decision, evidence),
  };
}

/** The failure an activity throws when load control held its call: nothing was sent, it is not an attempt. */
export function credentialHeldFailure(
  hold: CredentialHold,
  method: string,
  purpose: 'dispatch' | 'inspect',
): ApplicationFailure {
  const evidence: Evidence = { method, purpose, sent: 'no', transport: 'other', code: 'credential_held' };
  const message =
    hold.kind === 'blocked'
      ? `credential ${hold.credential} is blocked (${hold.reason}); not sent`
      : hold.kind === 'rate_limited'
        ? `credential ${hold.credential} is rate limited for ${Math.ceil(hold.holdMs / 1000)} s more; not sent`
        : `credential ${hold.credential} has no send slot for ${Math.ceil(hold.holdMs / 1000)} s; not sent`;
  return ApplicationFailure.create({
    type: FailureType.CredentialHeld,
    message,
    nonRetryable: true,
    details: [
      {
        evidence: callEvidenceOf(evidence),
        decision: { kind: 'transient', reason: 'credential_held' },
      } satisfies FailureDetails,
      hold,
    ],
    category: ApplicationFailureCategory.BENIGN,
  });
}

/** The hold carried by a `CredentialHeld` activity failure, or `undefined` for any other error. No zod: workflow-safe. */
export function holdFromFailure(err: unknown): CredentialHold | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (!(cause instanceof ApplicationFailure) || cause.type !== FailureType.CredentialHeld) return undefined;
  const hold = cause.details?.[1] as Partial<CredentialHold> | undefined;
  if (!hold || typeof hold !== 'object' || typeof hold.credential !== 'string') return undefined;
  if (hold.kind === 'blocked' && typeof hold.reason === 'string' && typeof hold.since === 'string')
    return hold as CredentialHold;
  if ((hold.kind === 'rate_limited' || hold.kind === 'paced') && typeof hold.holdMs === 'number' && hold.holdMs >= 0)
    return {
      ...(hold as CredentialHold),
      rank: typeof hold.rank === 'number' ? hold.rank : 0,
      perMinute: typeof hold.perMinute === 'number' && hold.perMinute > 0 ? hold.perMinute : 60,
    } as CredentialHold;
  return undefined;
}
