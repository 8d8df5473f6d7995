/**
 * Invariant 11, first half: several workers polling the same task queues make one attempt per eligible intent.
 * (The second half, a worker killed after the next attempt was persisted, runs against the dev server in
 * test/e2e/intent-dev-server.test.ts: the time-skipping test server never moves a workflow task off a dead
 * worker's sticky queue.) Time-skipping.
 */
import { describe, expect, it } from 'vitest';
import type { ScenarioInput } from '../../tools/provider-sim/index.js';
import { dispatchTimes, expectStableDispatches, ms, useIntentHarness } from '../support/intent-harness.js';

const h = useIntentHarness();

const rateLimitedOnce = (seconds: number): ScenarioInput => ({
  rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 429, retryAfter: seconds }], then: 'normal' }],
});

describe('when two workers poll the same task queues (invariant 11)', () => {
  it('makes exactly one attempt for one eligible intent', async () => {
    const t = await h.setup();
    const input = t.intent();
    const outcome = await t.run(
      async () => {
        await t.submit(input);
        return t.client.result(input.idempotencyKey);
      },
      { workers: 2 },
    );
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1 });
    expectStableDispatches(t, input, 1);
    expect(t.sim.metrics().totals.writes).toBe(1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });

  it('makes exactly the scheduled attempts for several rate-limited intents', async () => {
    const t = await h.setup(rateLimitedOnce(30));
    const inputs = Array.from({ length: 6 }, () => t.intent());
    const outcomes = await t.run(
      async () => {
        await Promise.all(inputs.map((i) => t.submit(i)));
        return Promise.all(inputs.map((i) => t.client.result(i.idempotencyKey)));
      },
      { workers: 2 },
    );
    for (const [i, input] of inputs.entries()) {
      expect(outcomes[i]).toMatchObject({ phase: 'succeeded', attempts: 2 });
      expectStableDispatches(t, input, 2);
      const [, second] = dispatchTimes(t, input.idempotencyKey);
      expect(second).toBeGreaterThanOrEqual(ms(outcomes[i]?.permittedAt));
      expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
    }
    expect(t.sim.metrics().totals.writes).toBe(2 * inputs.length);
  });
});
