/**
 * The synchronous proxy's retry rules: after one attempt, retry (and after how long) or stop (and why).
 *
 * What coincides with the intent workflow comes from the policy core: which statuses are transient and
 * the server's `Retry-After` (via {@link classify}, which parses it strictly and corrects clock skew
 * with the upstream's `Date`), and the jittered exponential backoff ({@link backoffDelayMs}). The rules
 * that only the proxy has live here: only GET, HEAD and OPTIONS are retried; only 408, 429, 502, 503
 * and 504; a wait never exceeds the cap; a retry never starts at or past the caller's deadline.
 *
 * @module
 */

import { backoffDelayMs, classify, readMethods } from '../policy/index.js';
import type { BackoffPolicy, Evidence } from '../policy/index.js';

/** Methods the proxy retries: the policy's read methods (TRACE, safe too, is forwarded once). */
export const retriedMethods: ReadonlySet<string> = readMethods;

/** Statuses the proxy retries. A timeout counts as 408 and an unreachable upstream as 502. */
export const retriedStatuses: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);

/**
 * Why the proxy stopped and returned what it returned.
 *
 * - `returned`: the response is final by rule (2xx, 3xx, 4xx other than 408/429, 500, …).
 * - `method_not_retried`: a retryable status on a method that is never retried (POST, PUT, PATCH, DELETE, …).
 * - `retries_exhausted`: every allowed retry was made (with `Retryq-Max-Retries: 0`, none were allowed).
 * - `retry_after_over_cap`: the server asked to wait longer than the cap; its `Retry-After` is passed through.
 * - `deadline`: the next retry would start at or past the caller's deadline (`Retryq-Deadline-Ms`).
 * - `gated`: answered locally with 429: the upstream had rate-limited this credential and its
 *   `Retry-After` has not yet passed. No upstream request was spent.
 * - `stopping`: the proxy shut down while the request waited for a retry; answered locally with 503.
 */
export type Outcome =
  'returned' | 'method_not_retried' | 'retries_exhausted' | 'retry_after_over_cap' | 'deadline' | 'gated' | 'stopping';

/** Every {@link Outcome}, in documentation order (for metrics and tests). */
export const outcomes: readonly Outcome[] = [
  'returned',
  'method_not_retried',
  'retries_exhausted',
  'retry_after_over_cap',
  'deadline',
  'gated',
  'stopping',
];

/** The waits of the retry rules. All durations in ms. */
export interface WaitRules {
  /** The longest single wait before a retry, in ms; a longer server `Retry-After` stops the retries. */
  maxWaitMs: number;
  /** The local backoff, used when it is longer than the server's `Retry-After` (or there is none). */
  backoff: BackoffPolicy;
}

/** Input of {@link nextStep}. */
export interface NextStepInput {
  /** What the attempt told us (`status` for a response, `transport` when none arrived). */
  evidence: Evidence;
  /** Retries already made for this request (0 after the first attempt). */
  retriesDone: number;
  /** Retries allowed for this request. */
  maxRetries: number;
  /** The current time, in ms since the epoch. */
  nowMs: number;
  /** The caller's deadline, in ms since the epoch; `undefined` when the caller set none. */
  deadlineMs: number | undefined;
  /**
   * When the gate for this upstream and credential opens, in ms since the epoch; `undefined` when it is
   * open or off. A retry never starts before it.
   */
  gateOpensAtMs: number | undefined;
  /** See {@link WaitRules}. */
  rules: WaitRules;
  /** Uniform in `[0, 1)`, as `Math.random`; drives the backoff jitter. */
  random: () => number;
}

/**
 * What to do after an attempt.
 *
 * - `retry` after `waitMs`; `floor` says what set the wait: the local `backoff`, the `server`'s
 *   `Retry-After`, or the `gate` (another request's `Retry-After` for the same upstream and credential).
 * - `stop` with the response in hand; see {@link Outcome}.
 */
export type Step =
  | { kind: 'retry'; waitMs: number; floor: 'backoff' | 'server' | 'gate' }
  | { kind: 'stop'; outcome: Exclude<Outcome, 'gated' | 'stopping'> };

/**
 * Decides whether to retry after an attempt, and how long to wait first. Pure: time and randomness are
 * inputs. Rules, in order:
 *
 * 1. A status outside 408, 429, 502, 503, 504 (a transport failure counts as one of them) → stop `returned`.
 * 2. A method other than GET, HEAD, OPTIONS → stop `method_not_retried`.
 * 3. `retriesDone ≥ maxRetries` → stop `retries_exhausted`.
 * 4. The server's wait (its `Retry-After`, or the gate's remaining time) longer than `maxWaitMs` →
 *    stop `retry_after_over_cap`: never retry earlier than the server allows.
 * 5. wait = max(server's wait, backoff), the backoff being `backoffDelayMs(retriesDone + 1)` cut to
 *    `maxWaitMs`. An absent, malformed or past `Retry-After` leaves the backoff, so never an immediate retry.
 * 6. `nowMs + wait ≥ deadlineMs` → stop `deadline`.
 *
 * @param input - see {@link NextStepInput}
 * @returns a {@link Step}
 * @example
 * nextStep({
 *   evidence: { method: 'GET', status: 503, headers: { 'retry-after': '2' }, sent: 'yes' },
 *   retriesDone: 0, maxRetries: 3, nowMs: Date.now(), deadlineMs: undefined, gateOpensAtMs: undefined,
 *   rules: { maxWaitMs: 15_000, backoff: { baseDelayMs: 250, maxBackoffMs: 10_000, multiplier: 2, jitter: 0.2 } },
 *   random: Math.random,
 * }); // { kind: 'retry', waitMs: 2000, floor: 'server' }
 */
export function nextStep(input: NextStepInput): Step {
  const { evidence, nowMs, rules } = input;
  const status = evidence.status ?? transportStatus(evidence);
  if (!retriedStatuses.has(status)) return { kind: 'stop', outcome: 'returned' };
  if (!retriedMethods.has(evidence.method.toUpperCase())) return { kind: 'stop', outcome: 'method_not_retried' };

  const decision = classify(evidence, { now: new Date(nowMs) });
  if (decision.kind !== 'transient' && decision.kind !== 'rate_limited') return { kind: 'stop', outcome: 'returned' };
  if (input.retriesDone >= input.maxRetries) return { kind: 'stop', outcome: 'retries_exhausted' };

  const retryAfter = decision.retryAfter;
  const serverWaitMs =
    retryAfter.kind === 'delay' || retryAfter.kind === 'date' ? Math.max(0, retryAfter.notBefore.getTime() - nowMs) : 0;
  const gateWaitMs = input.gateOpensAtMs === undefined ? 0 : Math.max(0, input.gateOpensAtMs - nowMs);
  if (serverWaitMs > rules.maxWaitMs || gateWaitMs > rules.maxWaitMs) {
    return { kind: 'stop', outcome: 'retry_after_over_cap' };
  }

  const backoffMs = Math.min(rules.maxWaitMs, backoffDelayMs(input.retriesDone + 1, rules.backoff, input.random));
  let waitMs = backoffMs;
  let floor: 'backoff' | 'server' | 'gate' = 'backoff';
  if (serverWaitMs > waitMs) {
    waitMs = serverWaitMs;
    floor = 'server';
  }
  if (gateWaitMs > waitMs) {
    waitMs = gateWaitMs;
    floor = 'gate';
  }
  if (input.deadlineMs !== undefined && nowMs + waitMs >= input.deadlineMs)
    return { kind: 'stop', outcome: 'deadline' };
  return { kind: 'retry', waitMs, floor };
}

/** The status a transport failure counts as: 408 for a timeout, 502 for anything else. */
export function transportStatus(evidence: Pick<Evidence, 'transport'>): 408 | 502 {
  return evidence.transport === 'timeout' ? 408 : 502;
}
