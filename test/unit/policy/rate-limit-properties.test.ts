/**
 * Property-based tests of the rate-limit header reader (fast-check): it never throws, its output is
 * always bounded and well formed, it reads what a provider writes, and nothing malformed makes retryq
 * faster. Run counts are stated per property; the file runs 9,500 generated cases.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { defaultMaxDelayMs, learnedGate, parseRateLimitHeaders } from '../../../src/policy/index.js';
import type { LearnedLimit } from '../../../src/policy/index.js';
import { imfFixdate } from './http-date-forms.js';

const names = [
  'ratelimit',
  'ratelimit-policy',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'x-ratelimit-reset-after',
  'x-ratelimit-bucket',
  'x-ratelimit-resource',
  'x-ratelimit-global',
  'x-ratelimit-scope',
  'date',
] as const;

/** Whole seconds from a day after the epoch boundary (10^9 s, 2001-09-09) to 2100: any clock in use. */
const nowArb = fc.integer({ min: 1_000_086_400, max: 4_102_444_800 }).map((sec) => sec * 1000);

/** Values that look like what providers send, near misses, and anything at all. */
const valueArb = fc.oneof(
  fc.nat({ max: 100_000 }).map(String),
  fc.stringMatching(/^[0-9]{1,20}(\.[0-9]{1,5})?$/),
  fc.constantFrom(
    '"default";q=100;w=60',
    '"default";r=0;t=30',
    'limit=100, remaining=0, reset=30',
    '100;w=60',
    '"a";q=1;w=1, "b";q=2;w=2',
    'true',
    'false',
    'global',
    '-1',
    '1e3',
    '',
    ' ',
    '"',
    '"d";r=',
    'Sun, 15 Jun 2025 12:00:00 GMT',
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
);

const headersArb = fc.dictionary(fc.constantFrom(...names), valueArb, { maxKeys: names.length });

function checkWellFormed(r: LearnedLimit, nowMs: number, maxDelayMs: number): void {
  expect(r.ignored.length).toBeLessThanOrEqual(16);
  for (const i of r.ignored) expect(i.raw.length).toBeLessThanOrEqual(128);
  if (r.kind === 'none') return;
  if (r.remaining !== undefined) {
    expect(Number.isSafeInteger(r.remaining)).toBe(true);
    expect(r.remaining).toBeGreaterThanOrEqual(0);
  }
  if (r.resetAtMs !== undefined) {
    // A reset is never before the response, and never past the cap.
    expect(r.resetAtMs).toBeGreaterThanOrEqual(nowMs);
    expect(r.resetAtMs).toBeLessThanOrEqual(nowMs + maxDelayMs);
    expect(Number.isInteger(r.resetAtMs)).toBe(true);
  }
  if (r.limit !== undefined) {
    expect(Number.isSafeInteger(r.limit.quota) && r.limit.quota >= 0).toBe(true);
    if (r.limit.windowMs !== undefined) {
      expect(r.limit.windowMs).toBeGreaterThanOrEqual(1000);
      expect(Number.isFinite(r.limit.windowMs)).toBe(true);
    }
  }
  if (r.scope.kind === 'bucket') {
    expect(r.scope.name.length).toBeGreaterThan(0);
    expect(r.scope.name.length).toBeLessThanOrEqual(128);
  }
}

describe('parseRateLimitHeaders, properties', () => {
  it('never throws, and its output is bounded: remaining ≥ 0, now ≤ reset ≤ now + cap (3,000 runs)', () => {
    fc.assert(
      fc.property(
        headersArb,
        nowArb,
        fc.option(fc.integer({ min: 0, max: 10 * defaultMaxDelayMs })),
        (h, nowMs, cap) => {
          const maxDelayMs = cap ?? defaultMaxDelayMs;
          checkWellFormed(parseRateLimitHeaders(h, { nowMs, maxDelayMs }), nowMs, maxDelayMs);
        },
      ),
      { numRuns: 3_000 },
    );
  });

  it('a remaining-zero gate never opens before now + floor, whatever the headers (2,000 runs)', () => {
    fc.assert(
      fc.property(headersArb, nowArb, fc.integer({ min: 0, max: 60_000 }), (h, nowMs, floorMs) => {
        const gate = learnedGate(parseRateLimitHeaders(h, { nowMs }), { nowMs, floorMs });
        if (gate.kind === 'closed') expect(gate.untilMs).toBeGreaterThanOrEqual(nowMs + floorMs);
      }),
      { numRuns: 2_000 },
    );
  });

  it('reads X-RateLimit-Reset as delay-seconds or epoch seconds as written, on the server’s clock (1,500 runs)', () => {
    fc.assert(
      fc.property(
        nowArb,
        fc.integer({ min: 0, max: 30 * 86_400 }),
        fc.boolean(),
        fc.integer({ min: -3_600, max: 3_600 }),
        (nowMs, inS, asEpoch, skewS) => {
          const serverMs = nowMs + skewS * 1000;
          const value = asEpoch ? String(serverMs / 1000 + inS) : String(inS);
          const r = parseRateLimitHeaders(
            { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': value, date: imfFixdate(new Date(serverMs)) },
            { nowMs },
          );
          expect(r).toMatchObject({ resetAtMs: nowMs + inS * 1000, resetForm: asEpoch ? 'epoch-seconds' : 'delay' });
        },
      ),
      { numRuns: 1_500 },
    );
  });

  it('reads the most restrictive of any list of IETF policies (1,500 runs)', () => {
    const policy = fc.record({
      name: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
      q: fc.integer({ min: 0, max: 1_000_000 }),
      w: fc.integer({ min: 1, max: 86_400 }),
    });
    fc.assert(
      fc.property(fc.array(policy, { minLength: 1, maxLength: 6 }), nowArb, (policies, nowMs) => {
        const header = policies.map((p) => `"${p.name}";q=${p.q};w=${p.w}`).join(', ');
        const r = parseRateLimitHeaders({ 'ratelimit-policy': header }, { nowMs });
        const lowest = Math.min(...policies.map((p) => p.q / p.w));
        expect(r.kind).toBe('limit');
        if (r.kind !== 'limit' || r.limit?.windowMs === undefined) throw new Error('expected a windowed limit');
        expect(r.limit.quota / (r.limit.windowMs / 1000)).toBeCloseTo(lowest, 9);
        expect(r.ignored).toEqual([]);
      }),
      { numRuns: 1_500 },
    );
  });

  it('corrupting a valid value never yields an earlier reset, a larger remaining or a bucket scope (1,500 runs)', () => {
    const corruption = fc.constantFrom('x', ' x', '-', '.', ',', '"', '\u0000', 'é', '1e3', ';q');
    fc.assert(
      fc.property(
        nowArb,
        fc.integer({ min: 0, max: 1000 }),
        fc.integer({ min: 0, max: 3600 }),
        fc.constantFrom('x-ratelimit-remaining', 'x-ratelimit-reset', 'x-ratelimit-global'),
        corruption,
        fc.boolean(),
        (nowMs, remaining, resetS, target, junk, prepend) => {
          const valid: Record<string, string> = {
            'x-ratelimit-remaining': String(remaining),
            'x-ratelimit-reset': String(resetS),
            'x-ratelimit-bucket': 'b1',
            'x-ratelimit-global': 'false',
          };
          const original = valid[target] ?? '';
          const corrupt = { ...valid, [target]: prepend ? junk + original : original + junk };
          const before = parseRateLimitHeaders(valid, { nowMs });
          const after = parseRateLimitHeaders(corrupt, { nowMs });
          if (before.kind !== 'limit' || after.kind !== 'limit') throw new Error('expected limits');
          // Remaining: unchanged or absent (absent is "as today", never "plenty").
          if (after.remaining !== undefined) expect(after.remaining).toBeLessThanOrEqual(before.remaining ?? Infinity);
          if (after.resetAtMs !== undefined)
            expect(after.resetAtMs).toBeGreaterThanOrEqual(before.resetAtMs ?? -Infinity);
          // A malformed global flag leaves the whole credential, never a bucket.
          if (target === 'x-ratelimit-global') expect(after.scope).toEqual({ kind: 'credential' });
        },
      ),
      { numRuns: 1_500 },
    );
  });

  it('handles a 100 kB value of any header in one pass', () => {
    const big = '9'.repeat(100_000);
    for (const name of names) {
      const r = parseRateLimitHeaders({ [name]: big }, { nowMs: 0 });
      checkWellFormed(r, 0, defaultMaxDelayMs);
    }
    expect(
      parseRateLimitHeaders({ 'ratelimit-policy': `"${'a'.repeat(100_000)}";q=1;w=1` }, { nowMs: 0 }),
    ).toMatchObject({
      kind: 'none',
      ignored: [{ field: 'RateLimit-Policy', reason: expect.stringMatching(/longer than 4096/) as string }],
    });
  });
});
