/**
 * What keeps ten thousand sleeping intents cheap: a worker whose cache holds fewer intents than are asleep still
 * answers `status` and wakes each intent at its time (an evicted intent is replayed from its history). Time-skipping.
 * How short an intent's history stays is asserted on a real server (test/e2e/intent-gate-check.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { ScenarioInput } from '../../src/sim/index.js';
import { dispatchTimes, expectStableDispatches, ms, useIntentHarness } from '../support/intent-harness.js';

const h = useIntentHarness();

/** The first write of every key is answered 429 with `Retry-After: 120`; later ones succeed. */
const rateLimitedOnce: ScenarioInput = {
  rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 429, retryAfter: 120 }], then: 'normal' }],
};

// 2 is Temporal's smallest cache (the SDK raises 1 to 2): three sleeping intents cannot all stay cached. 0 is no
// cache at all (no sticky queue: every workflow task replays the intent, the setting for wake-up storms).
describe.each([2, 0])(
  'a worker whose cache holds fewer intents than are asleep (maxCachedWorkflows: %i, three intents)',
  (cache) => {
    it('answers status for an evicted sleeping intent, and wakes and completes every intent at its time', async () => {
      const t = await h.setup(rateLimitedOnce);
      const workers = await t.createWorkers(undefined, { maxCachedWorkflows: cache, workflowTaskConcurrency: 2 });
      const workflowWorker = workers.workers.find((w) => w.options.taskQueue === `${t.prefix}.workflows`);
      expect(workflowWorker).toBeDefined();
      // Without a cache the worker still holds the one intent whose task or query it is running.
      const cached = () => workflowWorker!.getStatus().numCachedWorkflows;
      const most = Math.max(cache, 1);
      const running = workers.run();
      try {
        const inputs = [t.intent(), t.intent(), t.intent()];
        const asleep = [];
        for (const input of inputs) {
          await t.submit(input);
          asleep.push(await t.waitForStatus(input.idempotencyKey, (s) => s.phase === 'waiting', 'waiting'));
        }
        // Three asleep, room for fewer: the least recently used (the first) was evicted and exists only as history.
        expect(cached()).toBeLessThanOrEqual(most);

        // The evicted one answers status, replayed from its history, with exactly what it held before.
        const replayed = await t.client.status(inputs[0]!.idempotencyKey);
        expect(replayed).toEqual(asleep[0]);
        expect(replayed.nextAttemptAt).toBe(replayed.permittedAt);
        expect(replayed.attemptLog[0]?.evidence).toMatchObject({ status: 429, retryAfter: '120' });
        expect(cached()).toBeLessThanOrEqual(most);

        for (const input of inputs) {
          const outcome = await t.client.result(input.idempotencyKey);
          expect(outcome.phase).toBe('succeeded');
          expect(outcome.attempts).toBe(2);
          // Woke at its time: never before the permitted time (invariant 2), and within seconds of it.
          const permitted = ms(outcome.permittedAt);
          const [, wake] = dispatchTimes(t, input.idempotencyKey);
          expect(wake).toBeGreaterThanOrEqual(permitted);
          expect(wake! - permitted).toBeLessThan(5_000);
          expectStableDispatches(t, input, 2);
          expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
        }
        expect(cached()).toBeLessThanOrEqual(most);
      } finally {
        workers.shutdown();
        await running;
      }
    });
  },
);
