/**
 * The typed failure vocabulary shared by activities and workflows: one `const` object plus a same-named type,
 * one zod schema for the details, and the one place that encodes and decodes them.
 *
 * Activities throw `ApplicationFailure`s whose `type` is a {@link FailureType} and whose first detail is
 * {@link FailureDetails} (the evidence). Workflows recognise them with {@link evidenceFromFailure}, by `type`
 * and zod, never by `instanceof` of our own classes or by message text. Workflow-safe.
 *
 * @example
 * ```ts
 * import { dispatchFailure, evidenceFromFailure } from './failures.js';
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
import { z } from 'zod';
import { describeEvidence } from './policy/index.js';
import type { Decision, Evidence } from './policy/index.js';

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

/** Zod schema of {@link Evidence}; the two are checked to agree at compile time below. */
export const evidenceSchema = z.object({
  method: z.string(),
  purpose: z.enum(['dispatch', 'inspect']).optional(),
  status: z.number().int().optional(),
  transport: z.enum(['refused', 'dns', 'reset', 'timeout', 'tls', 'other']).optional(),
  headers: z.record(z.string(), z.string()).optional(),
  code: z.string().max(200).optional(),
  sent: z.enum(['no', 'yes', 'unknown']),
  receivedAtMs: z.number().optional(),
});
type Agrees<A, B> = [A] extends [B] ? true : false;
const evidenceSchemaMatchesPolicy: Agrees<z.infer<typeof evidenceSchema>, Evidence> = true;
void evidenceSchemaMatchesPolicy;

/** The first detail of every {@link FailureType} failure. */
export const failureDetailsSchema = z.object({
  evidence: evidenceSchema,
  /** A bounded excerpt of the provider's error message, for people. */
  message: z.string().max(500).optional(),
});
export type FailureDetails = z.infer<typeof failureDetailsSchema>;

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
 * Builds the failure an activity throws for a non-success decision. Non-retryable: the workflow owns retries
 * (and the dispatch activity runs with `maximumAttempts: 1` anyway). Expected conditions (rate limits,
 * transient failures) are `BENIGN`, which keeps them out of error logs and failure metrics.
 */
export function dispatchFailure(
  evidence: Evidence,
  decision: Exclude<Decision, { kind: 'success' }>,
  target: string,
  message?: string,
): ApplicationFailure {
  const type = failureTypeOf(decision);
  const details: FailureDetails = failureDetailsSchema.parse({
    evidence,
    ...(message ? { message: message.slice(0, 500) } : {}),
  });
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
 * What an activity failure tells the workflow, as evidence. Decodes our typed failures with zod; maps a Temporal
 * timeout to a transport timeout (`sent: 'no'` when the task never started, `unknown` otherwise) and anything
 * else (a worker crash, a bug) to an unknown transport failure that may have been sent: for a write that means
 * inspection, never a blind re-dispatch.
 */
export function evidenceFromFailure(err: unknown, method: string, purpose: 'dispatch' | 'inspect'): Evidence {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (isProviderFailure(cause)) {
    const parsed = failureDetailsSchema.safeParse(cause.details?.[0]);
    if (parsed.success) return stripUndefined(parsed.data.evidence);
  }
  if (cause instanceof TimeoutFailure) {
    const neverStarted = cause.timeoutType === TimeoutType.SCHEDULE_TO_START;
    return { method, purpose, transport: 'timeout', sent: neverStarted ? 'no' : 'unknown' };
  }
  return { method, purpose, transport: 'other', sent: 'unknown' };
}

function stripUndefined(e: z.infer<typeof evidenceSchema>): Evidence {
  return Object.fromEntries(Object.entries(e).filter(([, v]) => v !== undefined)) as unknown as Evidence;
}
