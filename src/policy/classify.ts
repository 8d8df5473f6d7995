/**
 * Classification: evidence of one provider call → a decision.
 *
 * @module
 */

import type { CodeRule, CodeTable, PermanentReason } from './code-table.js';
import { defaultCodeTable, lookupCode } from './code-table.js';
import type { Evidence } from './evidence.js';
import { headerValue, isRead } from './evidence.js';
import { maxTimeMs, parseHttpDate, trimOws } from './http-date.js';
import type { RetryAfter } from './retry-after.js';
import { parseRetryAfter } from './retry-after.js';

export type { Evidence };

/**
 * What the policy makes of evidence.
 *
 * - `success`: the provider answered 2xx.
 * - `rate_limited`: too many requests; `retryAfter` is the server's floor, if any.
 * - `transient`: a passing failure with a definite answer (the request was not carried out, or it was
 *   a read); retry after `retryAfter` / the backoff. `reason` names the evidence, e.g. `status:503`,
 *   `transport:refused`, `code:idempotency_key_in_use`.
 * - `permanent`: retrying cannot help; `code` is the provider's code when there was one.
 * - `unknown_outcome`: a write that may have reached the provider got no definite answer; the next
 *   provider call must be an inspection, never a blind re-dispatch (invariant 5). `reason` names the
 *   evidence, e.g. `status:502 after sending`.
 */
export type Decision =
  | { kind: 'success' }
  | { kind: 'rate_limited'; retryAfter: RetryAfter }
  | { kind: 'transient'; reason: string; retryAfter: RetryAfter }
  | { kind: 'permanent'; reason: PermanentReason; code?: string }
  | { kind: 'unknown_outcome'; reason: string };

/** Options of {@link classify}. */
export interface ClassifyOptions {
  /**
   * The time `Retry-After` counts from (`notBefore = now + delay`). Pass the caller's clock (in a
   * workflow, workflow time) when you have it.
   * @default evidence.receivedAtMs; failing that the response's `Date` header; failing that the Unix
   * epoch, which makes any delay lie in the past so that the scheduler falls back to its backoff.
   */
  now?: Date | undefined;
  /**
   * Structured error code → rule. Extend the defaults with {@link mergeCodeTables}.
   * @default defaultCodeTable
   */
  codes?: CodeTable | undefined;
  /**
   * The longest `Retry-After` accepted, in ms (see {@link parseRetryAfter}).
   * @default 31_536_000_000 (365 days)
   */
  maxDelayMs?: number | undefined;
}

/**
 * Assigned 5xx codes that are definite answers: the server refuses the request as such, whether or
 * not it was a write (501 Not Implemented, 505 HTTP Version Not Supported, 506, 507 Insufficient
 * Storage, 508 Loop Detected, 510, 511 Network Authentication Required).
 */
const definite5xx: ReadonlySet<number> = new Set([501, 505, 506, 507, 508, 510, 511]);

/**
 * Classifies the evidence of one provider call. Pure and total: every evidence gets a decision.
 *
 * Rules, first match wins (`write` = not a read and `sent` is not `no`; see {@link isRead}):
 *
 * | evidence | decision |
 * | --- | --- |
 * | 2xx | success (a code in the body is ignored) |
 * | a code found in the code table (any non-2xx response) | the code's rule |
 * | 429 | rate_limited |
 * | 408, 503 | transient (definite "not processed"; carries Retry-After) |
 * | 502, 504 | write: unknown_outcome · otherwise transient |
 * | 500 | write: unknown_outcome · otherwise permanent other |
 * | 501, 505–508, 510, 511 | permanent other |
 * | other 5xx (509, 512–599, e.g. gateway codes 520–524) | write: unknown_outcome · otherwise permanent other |
 * | 400, 413, 422 | permanent invalid |
 * | 401, 403 | permanent permission |
 * | 402 | permanent quota |
 * | 404, 410 | permanent not_found |
 * | 409 | permanent conflict |
 * | other 4xx, 3xx | permanent other |
 * | status outside 200–599 (1xx is never final) | write: unknown_outcome · otherwise permanent other |
 * | no response (transport failure) | write: unknown_outcome · otherwise transient |
 *
 * `Retry-After` is read only for `rate_limited` and `transient` decisions, relative to `options.now`,
 * else `evidence.receivedAtMs`, else the response's `Date` header, else the Unix epoch; the response's
 * `Date` header also corrects clock skew for HTTP-date values.
 *
 * Inspections (`purpose: 'inspect'`) are reads: they never yield `unknown_outcome`, and their 404 is
 * `permanent` `not_found` like any other read. Use {@link classifyInspection} to learn that a 404
 * means "no such operation".
 *
 * Throws `RangeError` only for invalid options (`now` an Invalid Date, `maxDelayMs` negative).
 *
 * @param evidence - what the call told us
 * @param options - see {@link ClassifyOptions}
 * @example
 * classify({ method: 'POST', status: 429, headers: { 'retry-after': '30' }, sent: 'yes' }, { now });
 * // { kind: 'rate_limited', retryAfter: { kind: 'delay', delayMs: 30000, notBefore: now + 30 s, clamped: false } }
 * classify({ method: 'POST', transport: 'timeout', sent: 'unknown' });
 * // { kind: 'unknown_outcome', reason: 'transport:timeout after sending' }
 */
export function classify(evidence: Evidence, options: ClassifyOptions = {}): Decision {
  const write = !isRead(evidence) && evidence.sent !== 'no';
  const retryAfter = (): RetryAfter => readRetryAfter(evidence, options);
  const status = evidence.status;

  if (status === undefined || status === null) {
    const transport = typeof evidence.transport === 'string' ? evidence.transport : 'other';
    if (write) return { kind: 'unknown_outcome', reason: `transport:${transport} after sending` };
    return { kind: 'transient', reason: `transport:${transport}`, retryAfter: { kind: 'absent' } };
  }

  if (typeof status !== 'number' || !Number.isInteger(status) || status < 200 || status > 599) {
    if (write) return { kind: 'unknown_outcome', reason: `status:${String(status)} unrecognised after sending` };
    return permanent('other', evidence.code);
  }
  if (status >= 200 && status <= 299) return { kind: 'success' };

  const rule = lookupCode(options.codes ?? defaultCodeTable, evidence.code);
  if (rule !== undefined) return fromRule(rule, evidence.code ?? '', retryAfter);

  if (status === 429) return { kind: 'rate_limited', retryAfter: retryAfter() };
  if (status === 408 || status === 503)
    return { kind: 'transient', reason: `status:${status}`, retryAfter: retryAfter() };
  if (status === 502 || status === 504) {
    if (write) return { kind: 'unknown_outcome', reason: `status:${status} after sending` };
    return { kind: 'transient', reason: `status:${status}`, retryAfter: retryAfter() };
  }
  if (status >= 500) {
    if (write && !definite5xx.has(status)) return { kind: 'unknown_outcome', reason: `status:${status} after sending` };
    return permanent('other', evidence.code);
  }
  return permanent(permanentReasonOf4xx(status), evidence.code);
}

function permanentReasonOf4xx(status: number): PermanentReason {
  switch (status) {
    case 400:
    case 413:
    case 422:
      return 'invalid';
    case 401:
    case 403:
      return 'permission';
    case 402:
      return 'quota';
    case 404:
    case 410:
      return 'not_found';
    case 409:
      return 'conflict';
    default:
      return 'other';
  }
}

function permanent(reason: PermanentReason, code: string | undefined): Decision {
  return typeof code === 'string' && code.length > 0
    ? { kind: 'permanent', reason, code }
    : { kind: 'permanent', reason };
}

function fromRule(rule: CodeRule, code: string, retryAfter: () => RetryAfter): Decision {
  switch (rule.kind) {
    case 'rate_limited':
      return { kind: 'rate_limited', retryAfter: retryAfter() };
    case 'transient':
      return { kind: 'transient', reason: `code:${code}`, retryAfter: retryAfter() };
    case 'permanent':
      return permanent(rule.reason, code);
  }
}

function readRetryAfter(evidence: Evidence, options: ClassifyOptions): RetryAfter {
  const header = headerValue(evidence.headers, 'retry-after');
  if (header === undefined) return { kind: 'absent' };
  const serverDate = headerValue(evidence.headers, 'date');
  return parseRetryAfter(header, {
    now: anchor(evidence, options, serverDate),
    serverDate,
    maxDelayMs: options.maxDelayMs,
  });
}

/** The time Retry-After counts from; see {@link ClassifyOptions.now}. */
function anchor(evidence: Evidence, options: ClassifyOptions, serverDate: string | undefined): Date {
  if (options.now !== undefined) return options.now;
  const received = evidence.receivedAtMs;
  if (typeof received === 'number' && Number.isFinite(received) && Math.abs(received) <= maxTimeMs) {
    return new Date(received);
  }
  const server = serverDate === undefined ? null : parseHttpDate(trimOws(serverDate));
  return server ?? new Date(0);
}

/**
 * What an inspection (a read-only status lookup of the saved operation) found.
 *
 * - `operation_found`: 2xx; the operation exists. Its state (done, failed, pending) is in the response
 *   body, which the inspect activity reads.
 * - `operation_absent`: 404 / 410 (or a not-found code): the provider holds no operation under the
 *   idempotency key, so the dispatch whose outcome was unknown did not take effect.
 * - `inspection_failed`: the lookup itself failed; `decision` is the failure (`rate_limited`,
 *   `transient` or `permanent`, never `success` or `unknown_outcome`) and can go to `nextAttempt`
 *   to schedule the next inspection.
 */
export type InspectionDecision =
  | { kind: 'operation_found' }
  | { kind: 'operation_absent' }
  | { kind: 'inspection_failed'; decision: Exclude<Decision, { kind: 'success' } | { kind: 'unknown_outcome' }> };

/**
 * Classifies the evidence of an inspection. `evidence.purpose` is taken as `inspect` whatever it says,
 * so the call counts as a read: it never yields `unknown_outcome`.
 *
 * Why a separate function: a 404 on an inspection is not a failure of the intent but an answer ("no
 * such operation"), which the `Decision` union of {@link classify} has no member for.
 *
 * @param evidence - what the inspection call told us
 * @param options - as for {@link classify}
 * @example
 * classifyInspection({ method: 'GET', status: 404, sent: 'yes' }); // { kind: 'operation_absent' }
 */
export function classifyInspection(evidence: Evidence, options: ClassifyOptions = {}): InspectionDecision {
  const decision = classify({ ...evidence, purpose: 'inspect' }, options);
  switch (decision.kind) {
    case 'success':
      return { kind: 'operation_found' };
    case 'permanent':
      if (decision.reason === 'not_found') return { kind: 'operation_absent' };
      return { kind: 'inspection_failed', decision };
    case 'unknown_outcome':
      // Unreachable: an inspection is a read. Kept total rather than trusting that.
      return {
        kind: 'inspection_failed',
        decision: { kind: 'transient', reason: decision.reason, retryAfter: { kind: 'absent' } },
      };
    default:
      return { kind: 'inspection_failed', decision };
  }
}
