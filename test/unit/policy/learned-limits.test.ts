/**
 * Pacing by learned limits (src/policy/learned-limits.ts): the effective budget and the gate a
 * remaining of 0 closes. Tables plus fast-check properties.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  budgetProblem,
  effectiveBudget,
  learnedGate,
  learnedSplit,
  minLearnedPerMinute,
  parseRateLimitHeaders,
  spentOut,
  splitBudget,
} from '../../../src/policy/index.js';
import type { LearnedLimit } from '../../../src/policy/index.js';

const minute = 60_000;
const configured = { quota: 600, windowMs: minute };
const nowMs = Date.parse('2025-06-15T12:00:00Z');

describe('effectiveBudget', () => {
  it('keeps the configured budget when nothing was learned', () => {
    expect(effectiveBudget(configured, undefined)).toEqual({
      quota: 600,
      windowMs: minute,
      perMinute: 600,
      from: 'configured',
    });
  });

  it('lowers the budget to a learned quota below it, for that window', () => {
    expect(effectiveBudget(configured, { quota: 60, windowMs: minute })).toEqual({
      quota: 60,
      windowMs: minute,
      perMinute: 60,
      from: 'learned',
    });
  });

  it.each([
    [{ quota: 10, windowMs: 1000 }, 'configured'], // 600 per minute: equal rates keep the configured budget
    [{ quota: 11, windowMs: 1000 }, 'configured'], // 660 per minute: higher, not raised by default
    [{ quota: 9, windowMs: 1000 }, 'learned'], // 540 per minute
    [{ quota: 1000, windowMs: 86_400_000 }, 'learned'], // a daily quota is far below 600 per minute
  ])('compares rates, not numbers: %j → %s', (learned, from) => {
    expect(effectiveBudget(configured, learned).from).toBe(from);
  });

  it('never raises the budget unless learn is up', () => {
    expect(effectiveBudget({ quota: 60, windowMs: minute }, { quota: 600, windowMs: minute })).toMatchObject({
      quota: 60,
      from: 'configured',
    });
    expect(
      effectiveBudget({ quota: 60, windowMs: minute }, { quota: 600, windowMs: minute }, { learn: 'down' }).from,
    ).toBe('configured');
  });

  it('raises the budget with learn: up, up to maxPerMinute', () => {
    const low = { quota: 60, windowMs: minute };
    expect(effectiveBudget(low, { quota: 600, windowMs: minute }, { learn: 'up' })).toMatchObject({
      quota: 600,
      from: 'learned',
    });
    expect(effectiveBudget(low, { quota: 600, windowMs: minute }, { learn: 'up', maxPerMinute: 300 })).toEqual({
      quota: 300,
      windowMs: minute,
      perMinute: 300,
      from: 'learned',
    });
    expect(effectiveBudget(low, { quota: 600, windowMs: minute }, { learn: 'up', maxPerMinute: 30 })).toMatchObject({
      quota: 60,
      from: 'configured',
    });
  });

  it('ignores a quota without a window (X-RateLimit-Limit states none)', () => {
    expect(effectiveBudget(configured, { quota: 1 }).from).toBe('configured');
  });

  it('passes a learned quota of 0 through as a rate of 0', () => {
    expect(effectiveBudget(configured, { quota: 0, windowMs: minute })).toMatchObject({
      perMinute: 0,
      from: 'learned',
    });
  });

  it.each([
    [{ quota: -1, windowMs: minute }],
    [{ quota: 1, windowMs: 0 }],
    [{ quota: Number.NaN, windowMs: minute }],
    [{ quota: 1, windowMs: Number.POSITIVE_INFINITY }],
  ])('throws RangeError for the budget %j', (bad) => {
    expect(() => effectiveBudget(bad, undefined)).toThrow(RangeError);
    expect(() => effectiveBudget(configured, bad)).toThrow(RangeError);
  });

  const budget = fc.record({
    quota: fc.integer({ min: 0, max: 1_000_000 }),
    windowMs: fc.integer({ min: 1, max: 86_400_000 }),
  });

  it('property: the effective rate never exceeds the configured rate unless learn is up (2,000 runs)', () => {
    fc.assert(
      fc.property(
        budget,
        fc.option(budget, { nil: undefined }),
        fc.constantFrom<'down' | undefined>('down', undefined),
        (conf, learned, learn) => {
          const e = effectiveBudget(conf, learned, { learn });
          expect(e.quota * conf.windowMs).toBeLessThanOrEqual(conf.quota * e.windowMs);
          // …and never exceeds the learned rate either, when one was learned.
          if (learned)
            expect(e.quota * learned.windowMs).toBeLessThanOrEqual(
              Math.max(learned.quota * e.windowMs, conf.quota * e.windowMs),
            );
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('property: with learn up, the effective rate is at most max(configured, min(learned, cap)) (2,000 runs)', () => {
    fc.assert(
      fc.property(
        budget,
        budget,
        fc.option(fc.integer({ min: 0, max: 100_000 }), { nil: undefined }),
        (conf, learned, cap) => {
          const e = effectiveBudget(conf, learned, { learn: 'up', maxPerMinute: cap });
          const confPm = (conf.quota * minute) / conf.windowMs;
          const learnedPm = (learned.quota * minute) / learned.windowMs;
          const bound = Math.max(confPm, Math.min(learnedPm, cap ?? Number.POSITIVE_INFINITY));
          expect(e.perMinute).toBeLessThanOrEqual(bound * (1 + 1e-12));
        },
      ),
      { numRuns: 2_000 },
    );
  });
});

describe('learnedGate', () => {
  const learned = (headers: Record<string, string>): LearnedLimit => parseRateLimitHeaders(headers, { nowMs });

  it('closes the credential’s gate until the reset when remaining is 0, before a 429', () => {
    expect(learnedGate(learned({ ratelimit: '"d";r=0;t=30' }), { nowMs, floorMs: 1000 })).toEqual({
      kind: 'closed',
      untilMs: nowMs + 30_000,
      scope: { kind: 'credential' },
      why: 'remaining_zero',
    });
  });

  it('closes only the named bucket’s gate', () => {
    const gate = learnedGate(
      learned({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset-after': '2', 'x-ratelimit-bucket': 'b1' }),
      {
        nowMs,
        floorMs: 0,
      },
    );
    expect(gate).toMatchObject({ kind: 'closed', untilMs: nowMs + 2000, scope: { kind: 'bucket', name: 'b1' } });
  });

  it('closes the whole credential when the answer is global', () => {
    const gate = learnedGate(
      learned({
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset-after': '2',
        'x-ratelimit-bucket': 'b1',
        'x-ratelimit-global': 'true',
      }),
      { nowMs, floorMs: 0 },
    );
    expect(gate).toMatchObject({ kind: 'closed', scope: { kind: 'credential' } });
  });

  it.each([
    [{ ratelimit: '"d";r=0;t=0' }, nowMs + 1000],
    [{ 'x-ratelimit-remaining': '0' }, nowMs + 1000],
    [{ 'ratelimit-policy': '"d";q=60;w=60', ratelimit: '"d";r=0' }, nowMs + 60_000],
    // A past epoch reset is ignored: the floor applies, not "now".
    [{ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(nowMs / 1000 - 30) }, nowMs + 1000],
  ])('never closes for less than the floor, and a full window when no reset came: %j', (headers, untilMs) => {
    expect(learnedGate(learned(headers), { nowMs, floorMs: 1000 })).toMatchObject({ kind: 'closed', untilMs });
  });

  it.each([
    [{}],
    [{ ratelimit: '"d";r=1;t=30' }],
    [{ 'x-ratelimit-remaining': 'none' }],
    [{ 'x-ratelimit-remaining': '-1' }],
    [{ 'x-ratelimit-limit': '60', 'x-ratelimit-reset': '30' }],
  ])('leaves the gate as it is for %j', (headers) => {
    expect(learnedGate(learned(headers), { nowMs, floorMs: 1000 })).toEqual({ kind: 'open' });
  });

  it.each([
    [{ nowMs: Number.NaN, floorMs: 0 }],
    [{ nowMs, floorMs: -1 }],
    [{ nowMs, floorMs: Number.POSITIVE_INFINITY }],
  ])('throws RangeError for %j', (opts) => {
    expect(() => learnedGate({ kind: 'none', ignored: [] }, opts)).toThrow(RangeError);
  });
});

describe('learnedSplit', () => {
  it('scales the configured split to the learned rate, keeping the inspection share', () => {
    expect(learnedSplit(splitBudget(600, 0.2), 60)).toEqual({
      totalPerMinute: 60,
      inspectPerMinute: 12,
      dispatchPerMinute: 48,
    });
  });

  it('keeps an absolute inspection reserve as the same share of the learned rate', () => {
    // 30 of 600 reserved: 5 %; at a learned 40 per minute, 2 per minute.
    expect(learnedSplit(splitBudget(600, 30), 40)).toEqual({
      totalPerMinute: 40,
      inspectPerMinute: 2,
      dispatchPerMinute: 38,
    });
  });

  it.each([0, 1, 1.99, Number.NaN, Number.POSITIVE_INFINITY])(
    'leaves the pacing as it is for a learned rate of %s per minute (below what the pacer accepts, or not finite)',
    (perMinute) => {
      expect(learnedSplit(splitBudget(600, 0.2), perMinute)).toBeUndefined();
    },
  );

  it('paces a learned rate at the smallest the pacer accepts', () => {
    const split = learnedSplit(splitBudget(600, 0.2), minLearnedPerMinute);
    expect(split?.totalPerMinute).toBe(minLearnedPerMinute);
    expect(split!.dispatchPerMinute).toBeGreaterThan(0);
    expect(split!.inspectPerMinute).toBeGreaterThan(0);
  });

  it('property: every split it returns has positive shares that add up to the learned rate (1,000 runs)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 100_000 }),
        fc.oneof(fc.double({ min: 0.01, max: 0.99, noNaN: true }), fc.constant(1)),
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        (total, reserve, perMinute) => {
          fc.pre(budgetProblem(total, reserve) === undefined);
          const split = learnedSplit(splitBudget(total, reserve), perMinute);
          if (perMinute < minLearnedPerMinute) return split === undefined;
          return (
            split !== undefined &&
            split.dispatchPerMinute > 0 &&
            split.inspectPerMinute > 0 &&
            Math.abs(split.dispatchPerMinute + split.inspectPerMinute - perMinute) < 1e-9 * perMinute
          );
        },
      ),
      { numRuns: 1_000 },
    );
  });
});

describe('spentOut', () => {
  const left = { remaining: 2, sentAtMs: 1_000, untilMs: 10_000 };

  it('is false while fewer calls were sent after the answered one than it said were left', () => {
    expect(spentOut(left, [900, 1_000, 1_100], 1_200)).toBe(false);
  });

  it('is true once the calls sent since have used up what was left (the answered call itself not counted)', () => {
    expect(spentOut(left, [1_000, 1_100, 1_150], 1_200)).toBe(true);
    expect(spentOut({ ...left, remaining: 0 }, [1_000], 1_200)).toBe(true);
  });

  it('says nothing without a reading', () => {
    expect(spentOut(undefined, [1_100, 1_150], 1_200)).toBe(false);
  });

  it('after the reset lets one call go and holds the others for its answer, at most probeMs', () => {
    expect(spentOut(left, [1_100, 1_150, 1_160], 10_000)).toBe(false);
    expect(spentOut(left, [1_100, 10_000], 10_050)).toBe(true);
    expect(spentOut(left, [1_100, 10_000], 11_001)).toBe(false);
    expect(spentOut(left, [1_100, 10_000], 10_500, 400)).toBe(false);
    // A reading is forgotten probeMs after its reset: a provider that stops sending headers is not held back.
    expect(spentOut(left, [1_100, 10_990, 10_999], 11_000)).toBe(false);
  });
});
