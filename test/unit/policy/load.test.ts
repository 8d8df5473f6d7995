/**
 * Load control, the pure part (src/policy/load.ts): the budget split, the pacer's guarantees inside one budget,
 * and the spread of wake-ups after a shared floor. Tables plus fast-check properties.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  PACING_MARGIN,
  boundedWakePlace,
  budgetProblem,
  grantSlot,
  initialPacer,
  splitBudget,
  spreadWakeUp,
} from '../../../src/policy/index.js';
import type { BudgetSplit, PacerState } from '../../../src/policy/index.js';

describe('splitBudget: one budget, the inspection reserve inside it', () => {
  it.each([
    [600, 0.2, { totalPerMinute: 600, inspectPerMinute: 120, dispatchPerMinute: 480 }],
    [60, 0.2, { totalPerMinute: 60, inspectPerMinute: 12, dispatchPerMinute: 48 }],
    [60, 6, { totalPerMinute: 60, inspectPerMinute: 6, dispatchPerMinute: 54 }],
    [10, 0.01, { totalPerMinute: 10, inspectPerMinute: 1, dispatchPerMinute: 9 }],
    [2, 1, { totalPerMinute: 2, inspectPerMinute: 1, dispatchPerMinute: 1 }],
  ])('splits %s/min with reserve %s', (total, reserve, split) => {
    expect(splitBudget(total, reserve)).toEqual(split);
  });

  it.each([
    [60, 60, /reserves 60 of the 60 requests per minute for inspections, leaving dispatch 0/],
    [60, 0.999, /leaving dispatch 0; reserve less \(at most 59 per minute/],
    [60, 0, /must be a share in \(0, 1\) or a whole number/],
    [60, 2.5, /must be a whole number/],
    [60, -1, /must be a share in \(0, 1\)/],
  ])('explains why %s/min with reserve %s cannot work', (total, reserve, message) => {
    expect(budgetProblem(total, reserve)).toMatch(message);
    expect(() => splitBudget(total, reserve)).toThrow(RangeError);
  });

  it('always leaves dispatch a positive rate and never exceeds the total (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 1_000_000 }),
        fc.oneof(fc.double({ min: 0.0001, max: 0.9999, noNaN: true }), fc.integer({ min: 1, max: 1_000_000 })),
        (total, reserve) => {
          if (budgetProblem(total, reserve) !== undefined) return;
          const b = splitBudget(total, reserve);
          expect(b.dispatchPerMinute).toBeGreaterThanOrEqual(1);
          expect(b.inspectPerMinute).toBeGreaterThanOrEqual(1);
          expect(b.dispatchPerMinute + b.inspectPerMinute).toBe(total);
        },
      ),
    );
  });
});

type Request = { atMs: number; kind: 'dispatch' | 'inspect' };

/**
 * Runs requests through the pacer as the workers do, in time order: a request answered `later` asks again when its
 * slot comes within the horizon. Returns the granted slots.
 */
function pace(budget: BudgetSplit, requests: Request[], horizonMs: number): Request[] {
  let state: PacerState = initialPacer();
  const granted: Request[] = [];
  const pending = requests.map((r) => ({ ...r }));
  while (pending.length > 0) {
    pending.sort((a, b) => a.atMs - b.atMs);
    const r = pending.shift()!;
    const out = grantSlot(state, r.kind, r.atMs, budget, horizonMs);
    if (out.grant.kind === 'granted') {
      state = out.state;
      granted.push({ atMs: out.grant.atMs, kind: r.kind });
    } else {
      expect(out.grant.atMs).toBeGreaterThan(r.atMs + horizonMs);
      pending.push({ atMs: Math.max(r.atMs + 1, out.grant.atMs - horizonMs), kind: r.kind });
    }
  }
  return granted.sort((a, b) => a.atMs - b.atMs);
}

function maxInWindow(times: number[], windowMs = 60_000): number {
  let best = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while ((times[i] ?? 0) - (times[j] ?? 0) >= windowMs) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}

const budgetArb = fc
  .tuple(fc.integer({ min: 2, max: 1200 }), fc.double({ min: 0.01, max: 0.9, noNaN: true }))
  .filter(([total, share]) => budgetProblem(total, share) === undefined)
  .map(([total, share]) => splitBudget(total, share));

const requestsArb = fc.array(
  fc.record({
    atMs: fc.integer({ min: 0, max: 180_000 }),
    kind: fc.constantFrom<'dispatch' | 'inspect'>('dispatch', 'dispatch', 'inspect'),
  }),
  { maxLength: 300 },
);

describe('grantSlot: pacing inside one budget (invariant 13)', () => {
  it('never grants more than the budget in any 60 s window, dispatches and inspections together (property)', () => {
    fc.assert(
      fc.property(budgetArb, requestsArb, fc.integer({ min: 0, max: 20_000 }), (budget, requests, horizon) => {
        const slots = pace(budget, requests, horizon);
        expect(maxInWindow(slots.map((s) => s.atMs))).toBeLessThanOrEqual(budget.totalPerMinute);
        expect(maxInWindow(slots.filter((s) => s.kind === 'inspect').map((s) => s.atMs))).toBeLessThanOrEqual(
          budget.inspectPerMinute,
        );
      }),
    );
  });

  it('never grants a slot before it was asked for, nor further ahead than the horizon (property)', () => {
    fc.assert(
      fc.property(budgetArb, fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 0, max: 20_000 }), (b, now, h) => {
        for (const kind of ['dispatch', 'inspect'] as const) {
          const { grant } = grantSlot(initialPacer(), kind, now, b, h);
          expect(grant).toEqual({ kind: 'granted', atMs: now });
        }
        let state = initialPacer();
        for (let i = 0; i < 50; i++) {
          const out = grantSlot(state, 'dispatch', now, b, h);
          if (out.grant.kind === 'later') {
            expect(out.grant.atMs).toBeGreaterThan(now + h);
            expect(out.state).toBe(state);
            break;
          }
          expect(out.grant.atMs).toBeGreaterThanOrEqual(now);
          expect(out.grant.atMs).toBeLessThanOrEqual(now + h);
          state = out.state;
        }
      }),
    );
  });

  it('lends the idle inspection reserve to dispatch: the whole budget when no inspection runs', () => {
    const budget = splitBudget(60, 0.2);
    const slots = pace(
      budget,
      Array.from({ length: 120 }, () => ({ atMs: 0, kind: 'dispatch' as const })),
      10_000,
    );
    const last = slots.at(-1)?.atMs ?? 0;
    // 120 dispatches at 60/min take 119 intervals of 1 s (plus the pacing margin), not the 148 s of 48/min.
    expect(last).toBeCloseTo(119 * 1000 * (1 + PACING_MARGIN), -1);
  });

  it('keeps the reserve for inspections while they run: dispatch gets total − reserve, inspections their share', () => {
    const budget = splitBudget(60, 0.25); // 45 dispatch + 15 inspect
    const requests: Request[] = [
      ...Array.from({ length: 200 }, (_, i) => ({ atMs: i * 100, kind: 'dispatch' as const })),
      ...Array.from({ length: 60 }, (_, i) => ({ atMs: i * 1000, kind: 'inspect' as const })),
    ];
    const slots = pace(budget, requests, 10_000);
    const inMinute = (kind: 'dispatch' | 'inspect', from: number) =>
      slots.filter((s) => s.kind === kind && s.atMs >= from && s.atMs < from + 60_000).length;
    // In a minute where both are busy, inspections get their reserve and dispatch at most the rest. The two shares are
    // paced separately inside the total, so their slots do not always line up: together they use ~90 % of the budget
    // (documented in docs/load-control.md), never more than all of it.
    for (const from of [60_000, 90_000]) {
      expect(inMinute('inspect', from)).toBeGreaterThanOrEqual(12);
      expect(inMinute('inspect', from)).toBeLessThanOrEqual(15);
      expect(inMinute('dispatch', from)).toBeGreaterThanOrEqual(36);
      expect(inMinute('dispatch', from)).toBeLessThanOrEqual(45);
      expect(inMinute('dispatch', from) + inMinute('inspect', from)).toBeLessThanOrEqual(60);
    }
  });
});

describe('spreadWakeUp: wake-ups after a shared floor', () => {
  const arb = fc.record({
    floorMs: fc.integer({ min: 0, max: 4_000_000_000_000 }),
    perMinute: fc.integer({ min: 1, max: 100_000 }),
    n: fc.integer({ min: 1, max: 2000 }),
    seed: fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), { minLength: 1, maxLength: 50 }),
  });
  const wakes = ({ floorMs, perMinute, n, seed }: { floorMs: number; perMinute: number; n: number; seed: number[] }) =>
    Array.from({ length: n }, (_, rank) =>
      spreadWakeUp({ floorMs, rank, perMinute, random: () => seed[rank % seed.length] ?? 0.5 }),
    );

  it('never wakes before the floor: jitter only lengthens a server-directed wait (property)', () => {
    fc.assert(fc.property(arb, (x) => wakes(x).every((w) => w >= x.floorMs && Number.isInteger(w))));
  });

  it('wakes at most the budget in the first minute after the floor, and in any minute at most one more (property)', () => {
    fc.assert(
      fc.property(arb, (x) => {
        const w = wakes(x).sort((a, b) => a - b);
        expect(w.filter((t) => t < x.floorMs + 60_000).length).toBeLessThanOrEqual(x.perMinute);
        expect(maxInWindow(w)).toBeLessThanOrEqual(x.perMinute + 1);
      }),
    );
  });

  it('spreads the waiters over the time the budget needs for them: no two ranks share a slice (property)', () => {
    fc.assert(
      fc.property(arb, (x) => {
        const w = wakes(x);
        const slice = 60_000 / x.perMinute;
        w.forEach((t, rank) => {
          expect(t - x.floorMs).toBeGreaterThanOrEqual(Math.floor(rank * slice));
          expect(t - x.floorMs).toBeLessThanOrEqual(Math.ceil((rank + 1) * slice));
        });
      }),
    );
  });

  it('treats a broken random source as the middle and a negative rank as the first', () => {
    expect(spreadWakeUp({ floorMs: 1000, rank: 0, perMinute: 60, random: () => Number.NaN })).toBe(1500);
    expect(spreadWakeUp({ floorMs: 1000, rank: -3, perMinute: 60, random: () => 0 })).toBe(1000);
    expect(spreadWakeUp({ floorMs: 1000, rank: 2, perMinute: 60, random: () => 7 })).toBe(3999);
    expect(() => spreadWakeUp({ floorMs: 0, rank: 0, perMinute: 0, random: Math.random })).toThrow(RangeError);
  });
});

describe("boundedWakePlace: wake-ups bounded by the budget and by the process's own rate", () => {
  // `processes` processes each hold a share of `n` waiters (round robin): global ranks 0..n-1, local ranks per process.
  const arb = fc.record({
    floorMs: fc.integer({ min: 0, max: 4_000_000_000_000 }),
    perMinute: fc.integer({ min: 1, max: 100_000 }),
    localPerMinute: fc.integer({ min: 1, max: 100_000 }),
    processes: fc.integer({ min: 1, max: 5 }),
    n: fc.integer({ min: 1, max: 1500 }),
    u: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  });
  const released = (x: {
    floorMs: number;
    perMinute: number;
    localPerMinute: number;
    processes: number;
    n: number;
    u: number;
  }) =>
    Array.from({ length: x.n }, (_, rank) => {
      const place = boundedWakePlace({
        rank,
        perMinute: x.perMinute,
        localRank: Math.floor(rank / x.processes),
        localPerMinute: x.localPerMinute,
      });
      return { process: rank % x.processes, at: spreadWakeUp({ floorMs: x.floorMs, ...place, random: () => x.u }) };
    });

  it('keeps the budget: at most the budget wakes in the first minute after the floor, whatever the processes (property)', () => {
    fc.assert(
      fc.property(arb, (x) => {
        const w = released(x).map((r) => r.at);
        expect(w.filter((t) => t < x.floorMs + 60_000).length).toBeLessThanOrEqual(x.perMinute);
        expect(w.every((t) => t >= x.floorMs)).toBe(true);
      }),
    );
  });

  it('hands no process more wake-ups than its own rate: at most that many in its first minute (property)', () => {
    fc.assert(
      fc.property(arb, (x) => {
        const all = released(x);
        for (let p = 0; p < x.processes; p++) {
          const mine = all.filter((r) => r.process === p && r.at < x.floorMs + 60_000);
          expect(mine.length).toBeLessThanOrEqual(x.localPerMinute);
        }
      }),
    );
  });

  it('wakes no waiter before either bound lets it go, and no later than the later one (property)', () => {
    fc.assert(
      fc.property(arb, (x) => {
        released(x).forEach(({ at }, rank) => {
          const local = Math.floor(rank / x.processes);
          const start = Math.max((rank * 60_000) / x.perMinute, (local * 60_000) / x.localPerMinute);
          const end = Math.max(((rank + 1) * 60_000) / x.perMinute, ((local + 1) * 60_000) / x.localPerMinute);
          expect(at - x.floorMs).toBeGreaterThanOrEqual(Math.floor(start));
          expect(at - x.floorMs).toBeLessThanOrEqual(Math.ceil(end));
        });
      }),
    );
  });

  it('is the budget alone without a process rate (0 or none), and the process rate when it is the slower one', () => {
    expect(boundedWakePlace({ rank: 7, perMinute: 2400, localRank: 7, localPerMinute: undefined })).toEqual({
      rank: 7,
      perMinute: 2400,
    });
    expect(boundedWakePlace({ rank: 7, perMinute: 2400, localRank: 7, localPerMinute: 0 })).toEqual({
      rank: 7,
      perMinute: 2400,
    });
    // 2,400/min is 40/s; 15/s for this process: its 7th waiter goes at 7/15 s, not 7/40 s.
    expect(boundedWakePlace({ rank: 7, perMinute: 2400, localRank: 7, localPerMinute: 900 })).toEqual({
      rank: 7,
      perMinute: 900,
    });
    // Four processes hold 40 waiters: the 40th overall (10th here) waits for the budget (1 s), not this process (0.67 s).
    expect(boundedWakePlace({ rank: 40, perMinute: 2400, localRank: 10, localPerMinute: 900 })).toEqual({
      rank: 40,
      perMinute: 2400,
    });
  });
});
