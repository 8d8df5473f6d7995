import { describe, expect, it } from 'vitest';
import { GATE_LOOKUP_BACKOFF_MS, SubmitGateViews } from '../../../src/load-control/submit-gates.js';
import type { GateAnswer, GateLookup } from '../../../src/load-control/submit-gates.js';

/** A lookup that answers what the test sets, counts its calls and can be held open. */
function fakeEntity() {
  const state: { answer: GateAnswer | undefined | Error; calls: number; release: (() => void) | undefined } = {
    answer: undefined,
    calls: 0,
    release: undefined,
  };
  let gate: Promise<void> | undefined;
  const lookup: GateLookup = async () => {
    state.calls++;
    if (gate) await gate;
    const a = state.answer;
    if (a instanceof Error) throw a;
    return a === undefined ? undefined : { ...a };
  };
  return {
    state,
    lookup,
    hold() {
      gate = new Promise((r) => (state.release = r));
    },
    open() {
      gate = undefined;
      state.release?.();
    },
  };
}

/** Resolves after every pending promise reaction ran (a lookup's answer reaching the views), not after a time. */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

const closed = (untilMs: number, held = 0): GateAnswer => ({
  closedUntilMs: untilMs,
  why: 'HTTP 429 rate_limit_exceeded (Retry-After: 60)',
  held,
  perMinute: 600,
  blocked: false,
});

describe('SubmitGateViews', () => {
  it('holds nothing while the gate is open or the credential has no entity', async () => {
    const e = fakeEntity();
    let now = 1_000_000;
    const views = new SubmitGateViews({ lookup: e.lookup, clock: () => now, random: () => 0.5 });
    expect(await views.holdFor('acme')).toBeUndefined(); // no entity
    e.state.answer = { ...closed(0), closedUntilMs: 0 };
    now += 1_000;
    await views.holdFor('acme'); // stale: asks behind this submit
    await Promise.resolve();
    expect(e.state.calls).toBe(2);
    expect(await views.holdFor('acme')).toBeUndefined();
  });

  it('holds each intent in its own slice after the gate time, counting places on from those the entity gave', async () => {
    const e = fakeEntity();
    const now = 1_000_000;
    e.state.answer = closed(now + 60_000, 3);
    const views = new SubmitGateViews({ lookup: e.lookup, clock: () => now, random: () => 0.5, startsPerSecond: 0 });
    const holds = [await views.holdFor('acme'), await views.holdFor('acme'), await views.holdFor('acme')];
    // 600 per minute: slices of 100 ms; places 3, 4, 5, each in the middle of its slice.
    expect(holds.map((h) => (h?.wakeAtMs ?? 0) - (now + 60_000))).toEqual([350, 450, 550]);
    expect(holds.every((h) => h?.untilMs === now + 60_000 && h.why?.includes('429'))).toBe(true);
    expect(e.state.calls).toBe(1); // fresh within the second
  });

  it('waits for the first answer only; later a stale closure answers at once while the entity is asked again', async () => {
    const e = fakeEntity();
    let now = 1_000_000;
    e.state.answer = closed(now + 60_000);
    const views = new SubmitGateViews({ lookup: e.lookup, clock: () => now, random: () => 0, startsPerSecond: 0 });
    expect(await views.holdFor('acme')).toBeDefined();
    now += 5_000;
    e.hold();
    // The entity does not answer yet: the closure known still holds (a gate only closes for longer).
    const held = await views.holdFor('acme');
    expect(held?.untilMs).toBe(now - 5_000 + 60_000);
    expect(e.state.calls).toBe(2);
    // A second submit meanwhile does not ask again.
    await views.holdFor('acme');
    expect(e.state.calls).toBe(2);
    // The entity extends the closure: new places count from its held intents.
    e.state.answer = closed(now + 120_000, 10);
    e.open();
    await settled();
    const later = await views.holdFor('acme');
    expect(later?.untilMs).toBe(now + 120_000);
    expect(later?.wakeAtMs).toBe(now + 120_000 + 1_000); // place 10 at 600/min
  });

  it('starts at most startsPerSecond held intents per second when that is slower than the budget', async () => {
    const e = fakeEntity();
    const now = 1_000_000;
    e.state.answer = closed(now + 60_000); // 600 per minute: 10 per second
    const views = new SubmitGateViews({ lookup: e.lookup, clock: () => now, random: () => 0.5, startsPerSecond: 4 });
    const holds = [await views.holdFor('acme'), await views.holdFor('acme'), await views.holdFor('acme')];
    // 4 per second: slices of 250 ms, not the budget's 100 ms (place 0: both slices start at the gate time).
    expect(holds.map((h) => (h?.wakeAtMs ?? 0) - (now + 60_000))).toEqual([50, 375, 625]);
    const fast = new SubmitGateViews({ lookup: e.lookup, clock: () => now, random: () => 0.5, startsPerSecond: 100 });
    const fastHolds = [await fast.holdFor('acme'), await fast.holdFor('acme')];
    // Faster than the budget: the budget's slices.
    expect(fastHolds.map((h) => (h?.wakeAtMs ?? 0) - (now + 60_000))).toEqual([50, 150]);
  });

  it('starts at once when the entity cannot be asked, and does not ask again for a while', async () => {
    const e = fakeEntity();
    let now = 1_000_000;
    e.state.answer = new Error('no worker answered in time');
    const views = new SubmitGateViews({ lookup: e.lookup, clock: () => now });
    expect(await views.holdFor('acme')).toBeUndefined();
    now += 1_000;
    expect(await views.holdFor('acme')).toBeUndefined();
    expect(e.state.calls).toBe(1);
    now += GATE_LOOKUP_BACKOFF_MS;
    e.state.answer = closed(now + 60_000);
    await views.holdFor('acme');
    await settled();
    expect(e.state.calls).toBe(2);
    expect(await views.holdFor('acme')).toBeDefined();
  });

  it('holds nothing for a blocked credential (an operator resumes it, at no known time) or a gate already open', async () => {
    const e = fakeEntity();
    let now = 1_000_000;
    e.state.answer = { ...closed(now + 60_000), blocked: true };
    const views = new SubmitGateViews({ lookup: e.lookup, clock: () => now });
    expect(await views.holdFor('acme')).toBeUndefined();
    const v2 = new SubmitGateViews({ lookup: e.lookup, clock: () => now });
    e.state.answer = closed(now + 500);
    expect(await v2.holdFor('acme')).toBeDefined();
    now += 600; // the closure has passed, though the answer is still fresh
    expect(await v2.holdFor('acme')).toBeUndefined();
  });
});
