/**
 * Scheduling: a decision → when the next attempt may run, or why there is none.
 *
 * @module
 */

import type { Decision } from './classify.js';
import { maxTimeMs } from './http-date.js';
import type { RetryAfter } from './retry-after.js';

/**
 * When the next provider call may run, or why there is none.
 *
 * - `retry_at`: not before `at`. `floor` says what set it: `server` when the server's `Retry-After`
 *   lies later than the local backoff, else `backoff` (ties go to `backoff`).
 * - `give_up`: `permanent` (the decision cannot be retried, or was a success and needs no retry),
 *   `attempts` (`maxAttempts` reached) or `deadline` (the earliest permitted time lies past the
 *   deadline; `permittedAt` is that time, whichever floor set it).
 */
export type Schedule =
  | { kind: 'retry_at'; at: Date; floor: 'server' | 'backoff' }
  | { kind: 'give_up'; reason: 'deadline' | 'attempts' | 'permanent'; permittedAt?: Date };

/** How an intent retries. All durations in ms. */
export interface RetryPolicy {
  /** Most dispatch attempts of one intent, the first included: an integer ≥ 1, or `Infinity`. */
  maxAttempts: number;
  /** Backoff after the first attempt, in ms: a finite number ≥ 0. */
  baseDelayMs: number;
  /**
   * Upper bound of the local backoff before jitter, in ms: a finite number ≥ 0. Never bounds the
   * server's `Retry-After` (invariant 3).
   */
  maxBackoffMs: number;
  /** Growth of the backoff per attempt: a finite number ≥ 1 (1 = constant backoff). */
  multiplier: number;
  /**
   * Relative spread of the backoff: the delay is multiplied by a factor uniform in
   * `[1 − jitter, 1 + jitter]`. A fraction in `[0, 1]`.
   */
  jitter: number;
}

/** The part of {@link RetryPolicy} that shapes the backoff (the synchronous proxy uses only this). */
export type BackoffPolicy = Pick<RetryPolicy, 'baseDelayMs' | 'maxBackoffMs' | 'multiplier' | 'jitter'>;

/** Input of {@link nextAttempt}. */
export interface NextAttemptInput {
  /** The decision about the latest provider call. */
  decision: Decision;
  /**
   * Attempts already made, an integer ≥ 1: the exponent of the backoff, and for `rate_limited` and
   * `transient` the count compared with `maxAttempts`. After an `unknown_outcome` the caller may
   * count the inspections made so far instead.
   */
  attempt: number;
  /** The current time (in a workflow: workflow time). A valid Date. */
  now: Date;
  /** No provider call may start after this time. A valid Date. */
  deadline: Date;
  /** See {@link RetryPolicy}. */
  policy: RetryPolicy;
  /**
   * A source of uniform numbers in `[0, 1)`, as `Math.random` (in a workflow, the workflow's
   * deterministic `Math.random`). Values outside `[0, 1]` are clamped into it; a value that is not a
   * finite number counts as 0.5 (no jitter).
   */
  random: () => number;
}

function rangeError(fn: string, path: string, rule: string, value: unknown): RangeError {
  return new RangeError(`${fn}: ${path} must be ${rule} (got ${String(value)})`);
}

function checkFinite(fn: string, path: string, value: number, min: number, max = Number.POSITIVE_INFINITY): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    const rule = max === Number.POSITIVE_INFINITY ? `a finite number ≥ ${min}` : `a number in [${min}, ${max}]`;
    throw rangeError(fn, path, rule, value);
  }
}

function checkBackoffPolicy(fn: string, policy: BackoffPolicy): void {
  checkFinite(fn, 'policy.baseDelayMs', policy.baseDelayMs, 0);
  checkFinite(fn, 'policy.maxBackoffMs', policy.maxBackoffMs, 0);
  checkFinite(fn, 'policy.multiplier', policy.multiplier, 1);
  checkFinite(fn, 'policy.jitter', policy.jitter, 0, 1);
}

function checkAttempt(fn: string, attempt: number): void {
  if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 1) {
    throw rangeError(fn, 'attempt', 'an integer ≥ 1', attempt);
  }
}

function timeOf(fn: string, path: string, date: Date): number {
  const ms = date instanceof Date ? date.getTime() : Number.NaN;
  if (!Number.isFinite(ms)) throw rangeError(fn, path, 'a valid Date', date);
  return ms;
}

/** A `random()` result made safe: clamped into [0, 1]; not a finite number → 0.5. */
function uniform(random: () => number): number {
  const r = random();
  if (typeof r !== 'number' || !Number.isFinite(r)) return 0.5;
  return Math.min(1, Math.max(0, r));
}

/**
 * The local backoff before the next attempt, in whole ms:
 * `min(maxBackoffMs, baseDelayMs × multiplier^(attempt − 1))`, times a jitter factor uniform in
 * `[1 − jitter, 1 + jitter]` (drawn from one `random()` call), rounded, and never below 1 ms.
 *
 * Jitter is applied after the cap, so the result can exceed `maxBackoffMs` by up to the factor
 * `1 + jitter`; it spreads clients that reached the cap together.
 *
 * Shared by the workflow scheduler ({@link nextAttempt}) and the synchronous proxy.
 *
 * @param attempt - attempts already made, an integer ≥ 1
 * @param policy - see {@link BackoffPolicy}
 * @param random - uniform in `[0, 1)`; clamped into `[0, 1]`, a non-finite value counts as 0.5
 * @returns the delay in ms, an integer ≥ 1
 * @throws RangeError when `attempt` or a policy field breaks its rule (the message names it)
 * @example
 * const policy = { baseDelayMs: 250, maxBackoffMs: 10_000, multiplier: 2, jitter: 0.2 };
 * [1, 2, 3, 4, 5].map((n) => backoffDelayMs(n, policy, () => 0.5)); // [250, 500, 1000, 2000, 4000]
 */
export function backoffDelayMs(attempt: number, policy: BackoffPolicy, random: () => number): number {
  checkAttempt('backoffDelayMs', attempt);
  checkBackoffPolicy('backoffDelayMs', policy);
  return jittered(attempt, policy, random);
}

function jittered(attempt: number, policy: BackoffPolicy, random: () => number): number {
  const growth = policy.multiplier ** (attempt - 1); // may be Infinity for huge attempts: then the cap rules
  const capped = policy.baseDelayMs === 0 ? 0 : Math.min(policy.maxBackoffMs, policy.baseDelayMs * growth);
  const factor = 1 - policy.jitter + 2 * policy.jitter * uniform(random);
  return Math.max(1, Math.round(capped * factor));
}

/** The server-permitted time of a decision, in ms, or `undefined` when the server set none. */
function serverFloorMs(retryAfter: RetryAfter): number | undefined {
  if (retryAfter.kind !== 'delay' && retryAfter.kind !== 'date') return undefined;
  return timeOf('nextAttempt', 'decision.retryAfter.notBefore', retryAfter.notBefore);
}

/**
 * When the next provider call may run, or why there is none. Pure: time and randomness are inputs.
 *
 * | decision | schedule |
 * | --- | --- |
 * | `permanent` | give_up `permanent` (invariant 6) |
 * | `success` | give_up `permanent`: nothing to retry (callers should not ask) |
 * | `rate_limited`, `transient`, `attempt ≥ maxAttempts` | give_up `attempts` (invariant 7) |
 * | `rate_limited`, `transient` | `at = max(retryAfter.notBefore, now + backoff)` (invariants 2, 3, 4) |
 * | `unknown_outcome` | `at = now + backoff`: when to run the next *inspection*, not a dispatch (invariant 5). `maxAttempts` does not apply (an inspection is not an attempt); the deadline does |
 * | `at > deadline` | give_up `deadline`, `permittedAt: at` (invariant 3) |
 *
 * - The server floor is never shortened: `maxBackoffMs` bounds only the local backoff (invariant 3).
 * - An absent, invalid or past `Retry-After` leaves the backoff floor, so `at > now` always
 *   (invariant 4); `at` is a whole ms.
 * - `at = deadline` is still allowed; `at` one ms later gives up.
 *
 * @param input - see {@link NextAttemptInput}
 * @returns the schedule; never an Invalid Date
 * @throws RangeError when an input breaks its rule (`now` / `deadline` / `notBefore` not valid Dates,
 *   `attempt` not an integer ≥ 1, a policy field out of range); the message names the field
 * @example
 * nextAttempt({
 *   decision: { kind: 'rate_limited', retryAfter: parseRetryAfter('120', { now }) },
 *   attempt: 1, now, deadline: new Date(now.getTime() + 3_600_000),
 *   policy: { maxAttempts: 5, baseDelayMs: 1000, maxBackoffMs: 60_000, multiplier: 2, jitter: 0.2 },
 *   random: Math.random,
 * }); // { kind: 'retry_at', at: now + 120 s, floor: 'server' }
 */
export function nextAttempt(input: NextAttemptInput): Schedule {
  const fn = 'nextAttempt';
  const { decision, attempt, policy } = input;
  const nowMs = timeOf(fn, 'now', input.now);
  const deadlineMs = timeOf(fn, 'deadline', input.deadline);
  checkAttempt(fn, attempt);
  if (
    typeof policy.maxAttempts !== 'number' ||
    !(Number.isSafeInteger(policy.maxAttempts) || policy.maxAttempts === Number.POSITIVE_INFINITY) ||
    policy.maxAttempts < 1
  ) {
    throw rangeError(fn, 'policy.maxAttempts', 'an integer ≥ 1 or Infinity', policy.maxAttempts);
  }
  checkBackoffPolicy(fn, policy);

  let serverMs: number | undefined;
  switch (decision.kind) {
    case 'success':
    case 'permanent':
      return { kind: 'give_up', reason: 'permanent' };
    case 'rate_limited':
    case 'transient':
      if (attempt >= policy.maxAttempts) return { kind: 'give_up', reason: 'attempts' };
      serverMs = serverFloorMs(decision.retryAfter);
      break;
    case 'unknown_outcome':
      break;
    default:
      throw rangeError(fn, 'decision.kind', 'a Decision kind', (decision as { kind?: unknown }).kind);
  }

  const backoffMs = Math.min(maxTimeMs, nowMs + jittered(attempt, policy, input.random));
  const atMs = serverMs !== undefined && serverMs > backoffMs ? serverMs : backoffMs;
  const at = new Date(atMs);
  if (atMs > deadlineMs) return { kind: 'give_up', reason: 'deadline', permittedAt: at };
  return { kind: 'retry_at', at, floor: atMs === backoffMs ? 'backoff' : 'server' };
}
