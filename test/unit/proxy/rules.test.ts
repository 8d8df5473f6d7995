import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Evidence } from '../../../src/policy/index.js';
import type { NextStepInput } from '../../../src/proxy/index.js';
import { nextStep, retriedMethods, retriedStatuses } from '../../../src/proxy/index.js';

const now = Date.UTC(2025, 5, 15, 12, 0, 0);
const rules = { maxWaitMs: 15_000, backoff: { baseDelayMs: 250, maxBackoffMs: 10_000, multiplier: 2, jitter: 0.2 } };

function step(evidence: Partial<Evidence>, over: Partial<NextStepInput> = {}) {
  return nextStep({
    evidence: { method: 'GET', sent: 'yes', ...evidence },
    retriesDone: 0,
    maxRetries: 3,
    nowMs: now,
    deadlineMs: undefined,
    gateOpensAtMs: undefined,
    rules,
    random: () => 0.5,
    ...over,
  });
}

describe('the rule tables', () => {
  it('retries exactly GET, HEAD, OPTIONS and exactly 408, 429, 502, 503, 504', () => {
    expect([...retriedMethods]).toEqual(['GET', 'HEAD', 'OPTIONS']);
    expect([...retriedStatuses]).toEqual([408, 429, 502, 503, 504]);
  });
});

describe('nextStep', () => {
  it('stops with returned for every status outside the retried five', () => {
    for (let status = 200; status <= 599; status++) {
      if (retriedStatuses.has(status)) continue;
      expect(step({ status })).toEqual({ kind: 'stop', outcome: 'returned' });
    }
  });

  it('stops with method_not_retried for writes and TRACE, however many retries are left', () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'TRACE', 'post']) {
      expect(step({ method, status: 503 }, { maxRetries: 10 })).toEqual({
        kind: 'stop',
        outcome: 'method_not_retried',
      });
    }
  });

  it('treats a timeout as 408 and any other transport failure as 502', () => {
    expect(step({ transport: 'timeout', sent: 'unknown' }).kind).toBe('retry');
    expect(step({ transport: 'refused', sent: 'no' }).kind).toBe('retry');
    expect(step({ method: 'POST', transport: 'reset', sent: 'unknown' })).toEqual({
      kind: 'stop',
      outcome: 'method_not_retried',
    });
  });

  it('stops with retries_exhausted once maxRetries retries were made', () => {
    expect(step({ status: 503 }, { retriesDone: 3 })).toEqual({ kind: 'stop', outcome: 'retries_exhausted' });
    expect(step({ status: 503 }, { maxRetries: 0 })).toEqual({ kind: 'stop', outcome: 'retries_exhausted' });
  });

  it('backs off 250, 500, 1000, 2000, 4000 ms for retries 1–5 with no jitter drawn', () => {
    const waits = [0, 1, 2, 3, 4].map((retriesDone) => step({ status: 503 }, { retriesDone, maxRetries: 10 }));
    expect(waits.map((s) => (s.kind === 'retry' ? s.waitMs : -1))).toEqual([250, 500, 1000, 2000, 4000]);
  });

  it('keeps every backoff within ±20 % of its base, for any random draw', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (n, r) => {
          const s = step({ status: 502 }, { retriesDone: n, maxRetries: 10, random: () => r });
          const base = 250 * 2 ** n;
          return s.kind === 'retry' && s.waitMs >= Math.round(base * 0.8) && s.waitMs <= Math.round(base * 1.2);
        },
      ),
    );
    expect(step({ status: 502 }, { random: () => 0 })).toMatchObject({ waitMs: 200 });
    expect(step({ status: 502 }, { random: () => 0.999_999 })).toMatchObject({ waitMs: 300 });
  });

  it('waits the server’s Retry-After when it is longer than the backoff', () => {
    expect(step({ status: 429, headers: { 'retry-after': '7' } })).toEqual({
      kind: 'retry',
      waitMs: 7000,
      floor: 'server',
    });
  });

  it('reads an HTTP-date on the server’s clock when its Date header is valid', () => {
    const s = step({
      status: 503,
      headers: { 'retry-after': 'Sun, 15 Jun 2025 09:00:09 GMT', date: 'Sun, 15 Jun 2025 09:00:00 GMT' },
    });
    expect(s).toEqual({ kind: 'retry', waitMs: 9000, floor: 'server' });
  });

  it('stops with retry_after_over_cap when the server asks for longer than the cap, and not a millisecond before', () => {
    expect(step({ status: 503, headers: { 'retry-after': '15' } })).toEqual({
      kind: 'retry',
      waitMs: 15_000,
      floor: 'server',
    });
    expect(step({ status: 503, headers: { 'retry-after': '16' } })).toEqual({
      kind: 'stop',
      outcome: 'retry_after_over_cap',
    });
  });

  it('falls back to the backoff for an absent, malformed, zero or past Retry-After', () => {
    for (const value of [undefined, 'x', '-3', '0', 'Sun, 15 Jun 2025 11:00:00 GMT']) {
      const headers: Record<string, string> = value === undefined ? {} : { 'retry-after': value };
      expect(step({ status: 503, headers })).toEqual({ kind: 'retry', waitMs: 250, floor: 'backoff' });
    }
  });

  it('cuts the backoff to the cap', () => {
    const s = step({ status: 503 }, { retriesDone: 6, maxRetries: 10, rules: { ...rules, maxWaitMs: 3000 } });
    expect(s).toEqual({ kind: 'retry', waitMs: 3000, floor: 'backoff' });
  });

  it('waits for the gate when it opens later than both floors, and stops when it opens past the cap', () => {
    expect(step({ status: 503 }, { gateOpensAtMs: now + 4000 })).toEqual({
      kind: 'retry',
      waitMs: 4000,
      floor: 'gate',
    });
    expect(step({ status: 503 }, { gateOpensAtMs: now + 20_000 })).toEqual({
      kind: 'stop',
      outcome: 'retry_after_over_cap',
    });
  });

  it('stops with deadline when the retry would start at or after the caller’s deadline', () => {
    expect(step({ status: 503 }, { deadlineMs: now + 251 })).toEqual({ kind: 'retry', waitMs: 250, floor: 'backoff' });
    expect(step({ status: 503 }, { deadlineMs: now + 250 })).toEqual({ kind: 'stop', outcome: 'deadline' });
    expect(step({ status: 429, headers: { 'retry-after': '5' } }, { deadlineMs: now + 4000 })).toEqual({
      kind: 'stop',
      outcome: 'deadline',
    });
  });
});
