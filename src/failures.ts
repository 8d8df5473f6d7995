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

/** One line for people: `HTTP 429 rate_limit_exceeded (Retry-After: 120)` or `connection refused (not sent)`. */
export function describeEvidence(e: Evidence): string {
  const parts: string[] = [];
  if (e.status !== undefined) parts.push(`HTTP ${e.status}`);
  else parts.push(e.transport === 'refused' ? 'connection refused' : `transport ${e.transport ?? 'failure'}`);
  if (e.code) parts.push(e.code);
  const retryAfter = e.headers?.['retry-after'];
  if (retryAfter !== undefined) parts.push(`(Retry-After: ${retryAfter.slice(0, 40)})`);
  if (e.status === undefined) parts.push(e.sent === 'no' ? '(not sent)' : '(may have been sent)');
  return parts.join(' ');
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

/** Why a call was held by the credential's load control (the second detail of a `CredentialHeld` failure). */
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
    details: [{ evidence } satisfies FailureDetails, hold],
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
