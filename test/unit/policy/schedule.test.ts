import { describe, expect, it } from 'vitest';
import { backoffDelayMs, nextAttempt, parseRetryAfter } from '../../../src/policy/index.js';
import type { Decision, NextAttemptInput, RetryAfter, RetryPolicy } from '../../../src/policy/index.js';
import { at, imfFixdate, plus } from './http-date-forms.js';

const now = at('2025-06-15T12:00:00Z');
const hour = 3_600_000;
const policy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 1000, maxBackoffMs: 30_000, multiplier: 2, jitter: 0.2 };
const noJitter = (): number => 0.5;

function input(decision: Decision, overrides: Partial<NextAttemptInput> = {}): NextAttemptInput {
  return { decision, attempt: 1, now, deadline: plus(now, hour), policy, random: noJitter, ...overrides };
}

const rateLimitedAfter = (retryAfter: RetryAfter): Decision => ({ kind: 'rate_limited', retryAfter });
const transientAfter = (retryAfter: RetryAfter): Decision => ({ kind: 'transient', reason: 'status:503', retryAfter });
const delay = (ms: number, from = now): RetryAfter => parseRetryAfter(String(ms / 1000), { now: from });

describe('backoffDelayMs, the local backoff shared with the synchronous proxy', () => {
  const proxy = { baseDelayMs: 250, maxBackoffMs: 10_000, multiplier: 2, jitter: 0.2 };

  it('gives 250 ms, 500 ms, 1 s, 2 s, 4 s for base 250, multiplier 2, at the centre of the jitter', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffDelayMs(n, proxy, noJitter))).toEqual([250, 500, 1000, 2000, 4000]);
  });

  it('stops growing at maxBackoffMs', () => {
    expect([6, 7, 8, 50].map((n) => backoffDelayMs(n, proxy, noJitter))).toEqual([8000, 10_000, 10_000, 10_000]);
  });

  it('reaches the lower jitter bound at random() = 0 and the upper one as random() → 1', () => {
    expect(backoffDelayMs(3, proxy, () => 0)).toBe(800);
    expect(backoffDelayMs(3, proxy, () => 0.999_999_999)).toBe(1200);
    expect(backoffDelayMs(3, proxy, () => 1)).toBe(1200);
  });

  it('applies jitter after the cap, so a capped delay spreads to maxBackoffMs × (1 ± jitter)', () => {
    expect(backoffDelayMs(50, proxy, () => 0)).toBe(8000);
    expect(backoffDelayMs(50, proxy, () => 1)).toBe(12_000);
  });

  it.each([
    ['above 1', 7, 1200],
    ['negative', -3, 800],
    ['NaN', Number.NaN, 1000],
    ['Infinity', Number.POSITIVE_INFINITY, 1000],
  ])('clamps a random() result %s into [0, 1], or counts it as 0.5 when not finite', (_case, r, expected) => {
    expect(backoffDelayMs(3, proxy, () => r)).toBe(expected);
  });

  it('never goes below 1 ms', () => {
    expect(backoffDelayMs(1, { ...proxy, baseDelayMs: 0 }, () => 0)).toBe(1);
    expect(backoffDelayMs(1, { ...proxy, baseDelayMs: 0.2, jitter: 1 }, () => 0)).toBe(1);
  });

  it('stays finite for an attempt number whose growth overflows', () => {
    expect(backoffDelayMs(Number.MAX_SAFE_INTEGER, { ...proxy, multiplier: 10 }, noJitter)).toBe(10_000);
  });

  it('holds a constant delay with multiplier 1 and no jitter', () => {
    expect([1, 5, 9].map((n) => backoffDelayMs(n, { ...proxy, multiplier: 1, jitter: 0 }, () => 0.9))).toEqual([
      250, 250, 250,
    ]);
  });

  it.each<[string, number, Partial<typeof proxy>, RegExp]>([
    ['attempt 0', 0, {}, /attempt must be an integer ≥ 1/],
    ['attempt 1.5', 1.5, {}, /attempt must be an integer ≥ 1/],
    ['attempt NaN', Number.NaN, {}, /attempt must be an integer ≥ 1/],
    ['baseDelayMs NaN', 1, { baseDelayMs: Number.NaN }, /policy\.baseDelayMs must be a finite number ≥ 0/],
    ['baseDelayMs -1', 1, { baseDelayMs: -1 }, /policy\.baseDelayMs/],
    ['maxBackoffMs Infinity', 1, { maxBackoffMs: Number.POSITIVE_INFINITY }, /policy\.maxBackoffMs/],
    ['multiplier 0.5', 1, { multiplier: 0.5 }, /policy\.multiplier must be a finite number ≥ 1/],
    ['jitter 1.5', 1, { jitter: 1.5 }, /policy\.jitter must be a number in \[0, 1\]/],
    ['jitter -0.1', 1, { jitter: -0.1 }, /policy\.jitter/],
  ])('throws RangeError naming the rule for %s', (_case, attempt, bad, message) => {
    expect(() => backoffDelayMs(attempt, { ...proxy, ...bad }, noJitter)).toThrow(message);
  });
});

describe('nextAttempt, given a rate limit or transient failure with a server floor', () => {
  it('waits for the server when its floor is later than the backoff (invariant 2)', () => {
    expect(nextAttempt(input(rateLimitedAfter(delay(120_000))))).toEqual({
      kind: 'retry_at',
      at: plus(now, 120_000),
      floor: 'server',
    });
  });

  it('never shortens the server delay to maxBackoffMs (invariant 3)', () => {
    const small = { ...policy, maxBackoffMs: 5_000 };
    expect(nextAttempt(input(rateLimitedAfter(delay(600_000)), { policy: small }))).toEqual({
      kind: 'retry_at',
      at: plus(now, 600_000),
      floor: 'server',
    });
  });

  it('takes the backoff when it is later than the server floor', () => {
    expect(nextAttempt(input(transientAfter(delay(1_000)), { attempt: 4 }))).toEqual({
      kind: 'retry_at',
      at: plus(now, 8_000),
      floor: 'backoff',
    });
  });

  it('gives a tie to the backoff', () => {
    expect(nextAttempt(input(transientAfter(delay(1_000))))).toEqual({
      kind: 'retry_at',
      at: plus(now, 1_000),
      floor: 'backoff',
    });
  });

  it('honours an HTTP-date floor the same way', () => {
    const retryAfter = parseRetryAfter(imfFixdate(plus(now, 90_000)), { now });
    expect(nextAttempt(input(rateLimitedAfter(retryAfter)))).toEqual({
      kind: 'retry_at',
      at: plus(now, 90_000),
      floor: 'server',
    });
  });

  it('gives up at the deadline when the server floor lies past it, recording the permitted time (invariant 3)', () => {
    expect(nextAttempt(input(rateLimitedAfter(delay(2 * hour))))).toEqual({
      kind: 'give_up',
      reason: 'deadline',
      permittedAt: plus(now, 2 * hour),
    });
  });

  it('still retries when the server floor is exactly the deadline', () => {
    expect(nextAttempt(input(rateLimitedAfter(delay(hour))))).toEqual({
      kind: 'retry_at',
      at: plus(now, hour),
      floor: 'server',
    });
  });
});

describe('nextAttempt, given no usable server floor (invariant 4: never an immediate retry)', () => {
  it.each<[string, RetryAfter]>([
    ['absent', { kind: 'absent' }],
    ['invalid', { kind: 'invalid', raw: 'soon', reason: 'not an HTTP-date' }],
    ['a past date', parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', { now })],
    ['zero seconds', delay(0)],
    ['a floor computed long ago', delay(30_000, plus(now, -hour))],
  ])('applies the backoff floor when Retry-After is %s', (_case, retryAfter) => {
    for (const decision of [rateLimitedAfter(retryAfter), transientAfter(retryAfter)]) {
      expect(nextAttempt(input(decision, { attempt: 2 }))).toEqual({
        kind: 'retry_at',
        at: plus(now, 2_000),
        floor: 'backoff',
      });
    }
  });

  it('gives up at the deadline when even the backoff lies past it, recording that time', () => {
    expect(nextAttempt(input(transientAfter({ kind: 'absent' }), { deadline: plus(now, 500) }))).toEqual({
      kind: 'give_up',
      reason: 'deadline',
      permittedAt: plus(now, 1_000),
    });
  });

  it('gives up at once when the deadline has already passed', () => {
    expect(nextAttempt(input(transientAfter({ kind: 'absent' }), { deadline: plus(now, -1) }))).toMatchObject({
      kind: 'give_up',
      reason: 'deadline',
    });
  });
});

describe('nextAttempt, given the attempt count (invariant 7)', () => {
  it('gives up once maxAttempts attempts were made', () => {
    expect(nextAttempt(input(rateLimitedAfter(delay(1_000)), { attempt: 5 }))).toEqual({
      kind: 'give_up',
      reason: 'attempts',
    });
    expect(nextAttempt(input(transientAfter({ kind: 'absent' }), { attempt: 9 }))).toEqual({
      kind: 'give_up',
      reason: 'attempts',
    });
  });

  it('allows the last attempt when one is left', () => {
    expect(nextAttempt(input(transientAfter({ kind: 'absent' }), { attempt: 4 }))).toMatchObject({ kind: 'retry_at' });
  });

  it('gives up on attempts before looking at the deadline', () => {
    expect(nextAttempt(input(rateLimitedAfter(delay(2 * hour)), { attempt: 5 }))).toEqual({
      kind: 'give_up',
      reason: 'attempts',
    });
  });

  it('allows unbounded attempts with maxAttempts Infinity', () => {
    const unbounded = { ...policy, maxAttempts: Number.POSITIVE_INFINITY };
    expect(nextAttempt(input(transientAfter({ kind: 'absent' }), { attempt: 1000, policy: unbounded }))).toMatchObject({
      kind: 'retry_at',
    });
  });
});

describe('nextAttempt, given a permanent, successful or unknown outcome', () => {
  it('gives up on a permanent decision (invariant 6)', () => {
    expect(nextAttempt(input({ kind: 'permanent', reason: 'quota', code: 'insufficient_quota' }))).toEqual({
      kind: 'give_up',
      reason: 'permanent',
    });
  });

  it('schedules nothing after a success', () => {
    expect(nextAttempt(input({ kind: 'success' }))).toEqual({ kind: 'give_up', reason: 'permanent' });
  });

  it('schedules the next inspection on the backoff after an unknown outcome (invariant 5)', () => {
    expect(
      nextAttempt(input({ kind: 'unknown_outcome', reason: 'transport:timeout after sending' }, { attempt: 2 })),
    ).toEqual({ kind: 'retry_at', at: plus(now, 2_000), floor: 'backoff' });
  });

  it('still schedules the inspection when the attempts are used up: an inspection is not an attempt', () => {
    expect(
      nextAttempt(input({ kind: 'unknown_outcome', reason: 'status:502 after sending' }, { attempt: 5 })),
    ).toMatchObject({ kind: 'retry_at', floor: 'backoff' });
  });

  it('gives up at the deadline after an unknown outcome too', () => {
    expect(
      nextAttempt(input({ kind: 'unknown_outcome', reason: 'status:500 after sending' }, { deadline: plus(now, 10) })),
    ).toEqual({ kind: 'give_up', reason: 'deadline', permittedAt: plus(now, 1_000) });
  });
});

describe('nextAttempt, given jitter', () => {
  it('spreads the backoff between (1 − jitter) and (1 + jitter) times the delay', () => {
    const decision = transientAfter({ kind: 'absent' });
    expect(nextAttempt(input(decision, { attempt: 3, random: () => 0 }))).toMatchObject({ at: plus(now, 3_200) });
    expect(nextAttempt(input(decision, { attempt: 3, random: () => 0.999_999 }))).toMatchObject({
      at: plus(now, 4_800),
    });
  });

  it('draws once per call', () => {
    let calls = 0;
    nextAttempt(input(transientAfter({ kind: 'absent' }), { random: () => (calls++, 0.3) }));
    expect(calls).toBe(1);
  });
});

describe('nextAttempt, given invalid input (programming errors throw RangeError; no Invalid Date escapes)', () => {
  const decision = transientAfter({ kind: 'absent' });

  it.each<[string, Partial<NextAttemptInput>, RegExp]>([
    ['an Invalid Date now', { now: new Date(Number.NaN) }, /now must be a valid Date/],
    ['an Invalid Date deadline', { deadline: new Date(Number.NaN) }, /deadline must be a valid Date/],
    ['attempt 0', { attempt: 0 }, /attempt must be an integer ≥ 1/],
    ['attempt -1', { attempt: -1 }, /attempt/],
    [
      'maxAttempts 0',
      { policy: { ...policy, maxAttempts: 0 } },
      /policy\.maxAttempts must be an integer ≥ 1 or Infinity/,
    ],
    ['maxAttempts 2.5', { policy: { ...policy, maxAttempts: 2.5 } }, /policy\.maxAttempts/],
    ['maxAttempts NaN', { policy: { ...policy, maxAttempts: Number.NaN } }, /policy\.maxAttempts/],
    ['baseDelayMs NaN', { policy: { ...policy, baseDelayMs: Number.NaN } }, /policy\.baseDelayMs/],
    ['jitter 2', { policy: { ...policy, jitter: 2 } }, /policy\.jitter/],
  ])('throws for %s', (_case, overrides, message) => {
    expect(() => nextAttempt(input(decision, overrides))).toThrow(message);
  });

  it('throws for a server floor that is not a valid Date (e.g. a Decision that went through JSON)', () => {
    const broken = JSON.parse(JSON.stringify(rateLimitedAfter(delay(1_000)))) as Decision;
    expect(() => nextAttempt(input(broken))).toThrow(/decision\.retryAfter\.notBefore must be a valid Date/);
  });

  it('throws for a decision kind it does not know', () => {
    expect(() => nextAttempt(input({ kind: 'retry' } as unknown as Decision))).toThrow(/decision\.kind/);
  });

  it('keeps `at` a valid Date at the end of representable time', () => {
    const end = new Date(8.64e15 - 10);
    const schedule = nextAttempt(input(decision, { now: end, deadline: end }));
    expect(schedule).toEqual({ kind: 'give_up', reason: 'deadline', permittedAt: new Date(8.64e15) });
  });
});
