/**
 * The policy core of retryq: pure functions that read `Retry-After`, HTTP dates and the rate-limit
 * headers (`RateLimit`, `RateLimit-Policy`, `X-RateLimit-*`), classify the evidence of a provider
 * call, schedule the next attempt, and pace by the limits a provider states. No I/O, no clock, no randomness of its
 * own, no Temporal or Node imports, so the intent workflow, the activities and the synchronous proxy
 * all share it. Time (`now`) and randomness (`random`) are parameters.
 *
 * @example
 * ```ts
 * import { classify, nextAttempt } from 'retryq/policy';
 *
 * const now = new Date('2025-03-01T12:00:00Z');
 * const decision = classify(
 *   { method: 'POST', status: 429, headers: { 'retry-after': '120' }, sent: 'yes' },
 *   { now },
 * );
 * // → { kind: 'rate_limited', retryAfter: { kind: 'delay', delayMs: 120000, notBefore: 12:02:00, clamped: false } }
 *
 * const schedule = nextAttempt({
 *   decision,
 *   attempt: 1,
 *   now,
 *   deadline: new Date('2025-03-01T13:00:00Z'),
 *   policy: { maxAttempts: 5, baseDelayMs: 1000, maxBackoffMs: 30_000, multiplier: 2, jitter: 0.2 },
 *   random: () => 0.5,
 * });
 * // → { kind: 'retry_at', at: 2025-03-01T12:02:00.000Z, floor: 'server' }
 * ```
 *
 * @module
 */

export type { CodeRule, CodeTable, PermanentReason } from './code-table.js';
export { defaultCodeTable, lookupCode, mergeCodeTables, permanentReasons } from './code-table.js';
export type { Evidence, Purpose, Sent, TransportFailure } from './evidence.js';
export { headerValue, isRead, readMethods, safeMethods } from './evidence.js';
export type { EvidenceFacts } from './evidence-text.js';
export { describeEvidence, evidenceText, retryAfterText } from './evidence-text.js';
export type { InspectionContext, InspectionFinding, InspectionVerdict, RetryDecision } from './inspection.js';
export { inspectionFailure, inspectionVerdict } from './inspection.js';
export type { TransportFailureOf } from './transport-failure.js';
export { transportFailureOf } from './transport-failure.js';
export type { HttpDateFormat, HttpDateOptions, HttpDateScan } from './http-date.js';
export { maxTimeMs, parseHttpDate, scanHttpDate } from './http-date.js';
export type { ParseRetryAfterOptions, RetryAfter } from './retry-after.js';
export { defaultMaxDelayMs, parseRetryAfter } from './retry-after.js';
export type { ClassifyOptions, Decision, InspectionDecision } from './classify.js';
export { classify, classifyInspection } from './classify.js';
export type { BackoffPolicy, NextAttemptInput, RetryPolicy, Schedule } from './schedule.js';
export { backoffDelayMs, nextAttempt } from './schedule.js';
export type { BudgetSplit, PacerState, SlotGrant, SpreadInput, WakePlace } from './load.js';
export {
  PACING_MARGIN,
  boundedWakePlace,
  budgetProblem,
  grantSlot,
  initialPacer,
  slotIntervalMs,
  splitBudget,
  spreadWakeUp,
} from './load.js';
export type {
  IgnoredField,
  LearnedLimit,
  LimitScope,
  ParseRateLimitOptions,
  RateLimitSource,
  ResetForm,
  StatedQuota,
} from './rate-limit-headers.js';
export {
  describeLearnedLimit,
  epochMillisecondsFrom,
  epochSecondsFrom,
  gateScopeOf,
  maxBucketNameLength,
  parseRateLimitHeaders,
} from './rate-limit-headers.js';
export type {
  EffectiveBudget,
  EffectiveBudgetOptions,
  LearnMode,
  LearnedGate,
  LearnedGateOptions,
  LeftReading,
  WindowBudget,
} from './learned-limits.js';
export { effectiveBudget, learnedGate, learnedSplit, minLearnedPerMinute, spentOut } from './learned-limits.js';
