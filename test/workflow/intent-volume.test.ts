/**
 * What keeps ten thousand sleeping intents cheap: a worker whose cache holds fewer intents than are asleep still
 * answers `status` and wakes each intent at its time (an evicted intent is replayed from its history). Time-skipping.
 * How short an intent's history stays is asserted on a real server (test/e2e/intent-gate-check.test.ts).
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { workflowIdOf } from '../../src/client.js';
import { cachedWorkflowBundle } from '../../src/temporal/workflow-bundle.js';
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

/** The `at …` lines of each stack in the SDK's `__stack_trace` answer (stacks are separated by blank lines). */
function framesPerStack(trace: string): number[] {
  return trace
    .split(/\n\s*\n/)
    .filter((stack) => stack.trim() !== '')
    .map((stack) => stack.split('\n').filter((line) => /^\s*at /.test(line)).length);
}

describe("the intents' workflow thread (src/workflows/worker-entry.ts)", () => {
  it('records one stack frame per promise, where `retryq/workflows` bundled as it is keeps V8’s ten', async () => {
    // Each bundle on task queues of its own (the time-skipping server never moves a task off a stopped worker's
    // sticky queue, so a second worker set on the same queues would wait for the first one's credential entity).
    const stackOfASleepingIntent = async (bundle: typeof h.bundle) => {
      const t = await h.setup(rateLimitedOnce);
      const workers = await t.createWorkers(undefined, undefined, bundle);
      const running = workers.run();
      try {
        const input = t.intent();
        await t.submit(input);
        await t.waitForStatus(input.idempotencyKey, (s) => s.phase === 'waiting', 'waiting');
        const handle = t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey));
        const trace = await handle.query<string>('__stack_trace');
        await handle.terminate('stack checked');
        return framesPerStack(trace);
      } finally {
        workers.shutdown();
        await running;
      }
    };
    // retryq's own bundle: every pending promise of the sleeping intent has a stack of at most one frame.
    const own = await stackOfASleepingIntent(h.bundle);
    expect(own.length).toBeGreaterThan(0);
    expect(Math.max(...own)).toBe(1);
    // The same workflows from `retryq/workflows` alone, as an application bundles them: the thread keeps its frames.
    const plain = await cachedWorkflowBundle({
      workflowsPath: fileURLToPath(new URL('../../src/workflows/index.ts', import.meta.url)),
      inputs: ['src'],
    });
    expect(Math.max(...(await stackOfASleepingIntent(plain)))).toBeGreaterThan(1);
  });

  it('leaves the limit alone in a process that imports `retryq/workflows`', async () => {
    const before = Error.stackTraceLimit;
    await import('../../src/workflows/index.js');
    expect(Error.stackTraceLimit).toBe(before);
    expect(before).toBeGreaterThan(1);
  });
});
