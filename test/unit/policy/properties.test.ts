/**
 * Property-based tests of the policy core (fast-check). Run counts are stated per property; the
 * whole file runs 31,000 generated cases.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  backoffDelayMs,
  classify,
  defaultCodeTable,
  defaultMaxDelayMs,
  nextAttempt,
  parseHttpDate,
  parseRetryAfter,
} from '../../../src/policy/index.js';
import type { Evidence, RetryPolicy } from '../../../src/policy/index.js';
import { asctime, imfFixdate, rfc850 } from './http-date-forms.js';

const isValidDate = (d: unknown): d is Date => d instanceof Date && Number.isFinite(d.getTime());

/** Instants between 1970 and 2200, whole or fractional seconds. */
const instant = fc.date({
  min: new Date('1970-01-01T00:00:00Z'),
  max: new Date('2200-01-01T00:00:00Z'),
  noInvalidDate: true,
});

/** Anything a `random()` might return, well-behaved or not. */
const randomValue = fc.oneof(
  { weight: 6, arbitrary: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(0, 1, 0.999_999_999_999, -1, 2, Number.NaN, Number.POSITIVE_INFINITY, -0) },
  { weight: 1, arbitrary: fc.double() },
);

const policyArb: fc.Arbitrary<RetryPolicy> = fc.record({
  maxAttempts: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.constant(Number.POSITIVE_INFINITY)),
  baseDelayMs: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 600_000, noNaN: true })),
  maxBackoffMs: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 86_400_000, noNaN: true })),
  multiplier: fc.double({ min: 1, max: 10, noNaN: true }),
  jitter: fc.double({ min: 0, max: 1, noNaN: true }),
});

/**
 * Retry-After values: valid seconds, valid dates in each form around `now`, near misses, garbage.
 * Generated as data (so counterexamples print) and written out against `now` by {@link headerText}.
 */
type HeaderSpec = { text: string } | { form: 0 | 1 | 2; offsetS: number };
const headerSpec: fc.Arbitrary<HeaderSpec> = fc.oneof(
  fc.nat({ max: 100_000 }).map((n) => ({ text: String(n) })),
  fc.stringMatching(/^[0-9]{1,40}$/).map((text) => ({ text })),
  fc.record({ form: fc.constantFrom<0 | 1 | 2>(0, 1, 2), offsetS: fc.integer({ min: -86_400, max: 3 * 86_400 }) }),
  fc
    .constantFrom('-1', '1.5', '+5', '0x10', '12abc', '', ' ', 'Mon, 06 Nov 1994 08:49:37 GMT')
    .map((text) => ({ text })),
  fc.string().map((text) => ({ text })),
);
const forms = [imfFixdate, rfc850, asctime] as const;
function headerText(spec: HeaderSpec, now: Date): string {
  if ('text' in spec) return spec.text;
  return forms[spec.form](new Date(Math.floor(now.getTime() / 1000) * 1000 + spec.offsetS * 1000));
}

const methodArb = fc.oneof(
  fc.constantFrom('GET', 'HEAD', 'OPTIONS', 'TRACE', 'POST', 'PUT', 'PATCH', 'DELETE', 'get', 'post'),
  fc.string({ maxLength: 8 }),
);

const statusArb = fc.oneof(
  fc.constantFrom(
    200,
    201,
    204,
    301,
    400,
    401,
    402,
    403,
    404,
    408,
    409,
    410,
    413,
    422,
    429,
    500,
    501,
    502,
    503,
    504,
    529,
  ),
  fc.integer({ min: 0, max: 700 }),
);

const codeArb = fc.oneof(
  fc.constantFrom(...Object.keys(defaultCodeTable), 'constructor', '__proto__'),
  fc.string({ maxLength: 12 }),
);

/** Any evidence (headers as specs, written against `now` in the property), any policy and random(). */
const scenario = fc.record({
  now: instant,
  evidence: fc.record(
    {
      method: methodArb,
      purpose: fc.constantFrom<'dispatch' | 'inspect'>('dispatch', 'inspect'),
      status: statusArb,
      transport: fc.constantFrom<NonNullable<Evidence['transport']>>(
        'refused',
        'dns',
        'reset',
        'timeout',
        'tls',
        'other',
      ),
      code: codeArb,
      sent: fc.constantFrom<Evidence['sent']>('no', 'yes', 'unknown'),
    },
    { requiredKeys: ['method', 'sent'] },
  ),
  retryAfter: fc.option(headerSpec, { nil: undefined }),
  date: fc.option(fc.oneof(headerSpec, fc.constant<HeaderSpec>({ form: 0, offsetS: 0 })), { nil: undefined }),
  receivedAgoMs: fc.option(fc.integer({ min: 0, max: 5_000 }), { nil: undefined }),
  passNow: fc.boolean(),
  attempt: fc.integer({ min: 1, max: 40 }),
  deadlineOffsetMs: fc.integer({ min: -60_000, max: 7 * 86_400_000 }),
  policy: policyArb,
  randomValue,
});

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

/** The evidence of a scenario, with its headers written out against `now`. */
function evidenceOf(sc: Scenario): Evidence {
  const headers: Record<string, string> = {};
  if (sc.retryAfter !== undefined) headers['retry-after'] = headerText(sc.retryAfter, sc.now);
  if (sc.date !== undefined) headers['date'] = headerText(sc.date, sc.now);
  const evidence: Evidence = { ...sc.evidence, headers };
  if (sc.receivedAgoMs !== undefined) evidence.receivedAtMs = sc.now.getTime() - sc.receivedAgoMs;
  return evidence;
}

describe('properties of classify and nextAttempt, for any evidence and any random() (5,000 runs each)', () => {
  it('classify is total: it never throws, and reads never yield unknown_outcome', () => {
    fc.assert(
      fc.property(scenario, (sc) => {
        const evidence = evidenceOf(sc);
        const decision = classify(evidence, sc.passNow ? { now: sc.now } : {});
        expect(['success', 'rate_limited', 'transient', 'permanent', 'unknown_outcome']).toContain(decision.kind);
        const read =
          evidence.purpose === 'inspect' || ['GET', 'HEAD', 'OPTIONS', 'TRACE'].includes(evidence.method.toUpperCase());
        if (read || evidence.sent === 'no') expect(decision.kind).not.toBe('unknown_outcome');
        if ('retryAfter' in decision && (decision.retryAfter.kind === 'delay' || decision.retryAfter.kind === 'date')) {
          expect(isValidDate(decision.retryAfter.notBefore)).toBe(true);
          expect(Number.isFinite(decision.retryAfter.delayMs)).toBe(true);
        }
      }),
      { numRuns: 5000 },
    );
  });

  it('nextAttempt: at ≥ server floor (2), at > now (4), at ≤ deadline or give_up, no Invalid Date', () => {
    const seen = new Map<string, number>();
    fc.assert(
      fc.property(scenario, (sc) => {
        const { now, passNow, attempt, deadlineOffsetMs, policy, randomValue } = sc;
        const decision = classify(evidenceOf(sc), passNow ? { now } : {});
        const deadline = new Date(now.getTime() + deadlineOffsetMs);
        const schedule = nextAttempt({ decision, attempt, now, deadline, policy, random: () => randomValue });
        const floor =
          'retryAfter' in decision && (decision.retryAfter.kind === 'delay' || decision.retryAfter.kind === 'date')
            ? decision.retryAfter.notBefore.getTime()
            : Number.NEGATIVE_INFINITY;

        const outcome = schedule.kind === 'retry_at' ? `retry_at/${schedule.floor}` : `give_up/${schedule.reason}`;
        seen.set(outcome, (seen.get(outcome) ?? 0) + 1);
        if (schedule.kind === 'retry_at') {
          expect(isValidDate(schedule.at)).toBe(true);
          expect(schedule.at.getTime()).toBeGreaterThan(now.getTime()); // invariant 4
          expect(schedule.at.getTime()).toBeGreaterThanOrEqual(floor); // invariant 2
          expect(schedule.at.getTime()).toBeLessThanOrEqual(deadline.getTime());
          expect(['rate_limited', 'transient', 'unknown_outcome']).toContain(decision.kind);
          if (decision.kind !== 'unknown_outcome') expect(attempt).toBeLessThan(policy.maxAttempts); // invariant 7
          if (schedule.floor === 'server') expect(schedule.at.getTime()).toBe(floor);
        } else if (schedule.reason === 'deadline') {
          expect(isValidDate(schedule.permittedAt)).toBe(true);
          expect(schedule.permittedAt?.getTime()).toBeGreaterThan(deadline.getTime());
          expect(schedule.permittedAt?.getTime()).toBeGreaterThanOrEqual(floor); // invariant 3
        } else if (schedule.reason === 'permanent') {
          expect(['permanent', 'success']).toContain(decision.kind); // invariant 6
        } else {
          expect(attempt).toBeGreaterThanOrEqual(policy.maxAttempts);
        }
      }),
      { numRuns: 5000 },
    );
    // The generator reaches every kind of schedule, so the property is not vacuous.
    for (const outcome of [
      'retry_at/server',
      'retry_at/backoff',
      'give_up/deadline',
      'give_up/attempts',
      'give_up/permanent',
    ]) {
      expect(seen.get(outcome) ?? 0, outcome).toBeGreaterThan(25);
    }
  });

  it('backoffDelayMs stays within the jitter bounds of the capped delay, ≥ 1 ms, whole ms', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2000 }), policyArb, randomValue, (attempt, policy, r) => {
        const delayMs = backoffDelayMs(attempt, policy, () => r);
        const capped =
          policy.baseDelayMs === 0
            ? 0
            : Math.min(policy.maxBackoffMs, policy.baseDelayMs * policy.multiplier ** (attempt - 1));
        expect(Number.isInteger(delayMs)).toBe(true);
        expect(delayMs).toBeGreaterThanOrEqual(1);
        expect(delayMs).toBeGreaterThanOrEqual(Math.max(1, Math.round(capped * (1 - policy.jitter))));
        expect(delayMs).toBeLessThanOrEqual(Math.max(1, Math.round(capped * (1 + policy.jitter))));
      }),
      { numRuns: 5000 },
    );
  });
});

describe('properties of parseRetryAfter (2,000 runs each)', () => {
  const expectWellFormed = (header: string, now: Date): void => {
    const result = parseRetryAfter(header, { now });
    if (result.kind === 'delay' || result.kind === 'date') {
      expect(isValidDate(result.notBefore)).toBe(true);
      expect(result.delayMs).toBeGreaterThanOrEqual(0);
      expect(result.delayMs).toBeLessThanOrEqual(defaultMaxDelayMs);
      expect(result.notBefore.getTime()).toBe(now.getTime() + result.delayMs);
    } else if (result.kind === 'invalid') {
      expect(result.reason.length).toBeGreaterThan(0);
      expect(result.raw.length).toBeLessThanOrEqual(128);
    } else {
      expect.unreachable('a string header is never absent');
    }
  };

  it.each([
    ['any string', fc.string()],
    ['any full-Unicode string', fc.string({ unit: 'binary' })],
    ['any string of graphemes', fc.string({ unit: 'grapheme', maxLength: 60 })],
  ])('never throws on %s and always returns a well-formed result', (_case, arb) => {
    fc.assert(
      fc.property(arb, instant, (header, now) => expectWellFormed(header, now)),
      { numRuns: 2000 },
    );
  });

  it('never throws on near-valid dates (one character of a valid date replaced, dropped or doubled)', () => {
    const mutated = fc
      .tuple(
        instant,
        fc.constantFrom(imfFixdate, rfc850, asctime),
        fc.nat(),
        fc.constantFrom('replace', 'drop', 'double'),
        fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
      )
      .map(([d, form, i, op, c]) => {
        const s = form(d);
        const k = i % s.length;
        if (op === 'drop') return s.slice(0, k) + s.slice(k + 1);
        if (op === 'double') return s.slice(0, k + 1) + s.slice(k);
        return s.slice(0, k) + c + s.slice(k + 1);
      });
    fc.assert(
      fc.property(mutated, instant, (header, now) => expectWellFormed(header, now)),
      { numRuns: 2000 },
    );
  });

  it('reads any digit string exactly, clamping iff its value exceeds maxDelayMs', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9]{1,60}$/), instant, (digits, now) => {
        const result = parseRetryAfter(digits, { now });
        const exactMs = BigInt(digits) * 1000n;
        const clamped = exactMs > BigInt(defaultMaxDelayMs);
        expect(result).toEqual({
          kind: 'delay',
          delayMs: clamped ? defaultMaxDelayMs : Number(exactMs),
          notBefore: new Date(now.getTime() + (clamped ? defaultMaxDelayMs : Number(exactMs))),
          clamped,
        });
      }),
      { numRuns: 2000 },
    );
  });
});

describe('round trips of HTTP-dates (2,000 runs each)', () => {
  const anyYear = fc.date({
    min: new Date('0000-01-01T00:00:00Z'),
    max: new Date('9999-12-31T23:59:59Z'),
    noInvalidDate: true,
  });
  const toSecond = (d: Date): number => Math.floor(d.getTime() / 1000) * 1000;

  it('any Date written by toUTCString() (IMF-fixdate) parses back to the same second', () => {
    fc.assert(
      fc.property(anyYear, (d) => {
        expect(parseHttpDate(d.toUTCString())?.getTime()).toBe(toSecond(d));
      }),
      { numRuns: 2000 },
    );
  });

  it('any Date written in asctime form parses back to the same second', () => {
    fc.assert(
      fc.property(anyYear, (d) => {
        expect(parseHttpDate(asctime(d))?.getTime()).toBe(toSecond(d));
      }),
      { numRuns: 2000 },
    );
  });

  it('any Date within 49 years of now, written in RFC 850 form, parses back to the same second', () => {
    const pair = instant.chain((now) =>
      fc.tuple(
        fc.constant(now),
        fc.integer({ min: -49 * 365, max: 49 * 365 }).map((days) => new Date(now.getTime() + days * 86_400_000)),
      ),
    );
    fc.assert(
      fc.property(pair, ([now, d]) => {
        expect(parseHttpDate(rfc850(d), { now })?.getTime()).toBe(toSecond(d));
      }),
      { numRuns: 2000 },
    );
  });
});
