/**
 * What keeps ten thousand sleeping intents cheap: a worker whose cache holds fewer intents than are asleep still
 * answers `status` and wakes each intent at its time (an evicted intent is replayed from its history), and a
 * successful intent's history stays short (search attributes upserted only when they change). Time-skipping.
 */
import { describe, expect, it } from 'vitest';
import proto from '@temporalio/proto';
import { workflowIdOf } from '../../src/client.js';
import type { ScenarioInput } from '../../src/sim/index.js';
import { dispatchTimes, expectStableDispatches, ms, useIntentHarness } from '../support/intent-harness.js';
import type { IntentTest } from '../support/intent-harness.js';

const h = useIntentHarness();
// @temporalio/proto is CommonJS: take the enum from the default export.
const EventType = proto.temporal.api.enums.v1.EventType;

/** The first write of every key is answered 429 with `Retry-After: 120`; later ones succeed. */
const rateLimitedOnce: ScenarioInput = {
  rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 429, retryAfter: 120 }], then: 'normal' }],
};

/** The event types of an intent's history, as names without the `EVENT_TYPE_` prefix. */
async function eventTypes(t: IntentTest, key: string): Promise<string[]> {
  const history = await t.env.client.workflow.getHandle(workflowIdOf(key)).fetchHistory();
  return (history.events ?? []).map((e) => String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, ''));
}

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

describe('the history of an intent', () => {
  it('holds 13 events when the first attempt succeeds: 3 workflow tasks, 2 search-attribute upserts', async () => {
    const t = await h.setup({});
    const input = t.intent();
    const outcome = await t.run(async () => {
      await t.submit(input);
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome.phase).toBe('succeeded');
    // The start carries the `scheduled` attributes; the run upserts `dispatching` (attempt 1) and `succeeded`.
    expect(await eventTypes(t, input.idempotencyKey)).toEqual([
      'WORKFLOW_EXECUTION_STARTED',
      'WORKFLOW_TASK_SCHEDULED',
      'WORKFLOW_TASK_STARTED',
      'WORKFLOW_TASK_COMPLETED',
      'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
      'ACTIVITY_TASK_SCHEDULED',
      'ACTIVITY_TASK_STARTED',
      'ACTIVITY_TASK_COMPLETED',
      'WORKFLOW_TASK_SCHEDULED',
      'WORKFLOW_TASK_STARTED',
      'WORKFLOW_TASK_COMPLETED',
      'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
      'WORKFLOW_EXECUTION_COMPLETED',
    ]);
  });

  it('upserts once per transition on the way through a rate limit: dispatching, waiting, dispatching, succeeded', async () => {
    const t = await h.setup(rateLimitedOnce);
    const input = t.intent();
    const outcome = await t.run(async () => {
      await t.submit(input);
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome.phase).toBe('succeeded');
    const types = await eventTypes(t, input.idempotencyKey);
    expect(types.filter((e) => e === 'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES')).toHaveLength(4);
    expect(types.filter((e) => e === 'WORKFLOW_TASK_COMPLETED')).toHaveLength(4);
    expect(types).toHaveLength(26);
    // What the UI lists by: the final attributes say succeeded after 2 attempts, and the last error seen.
    const desc = await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).describe();
    expect(desc.searchAttributes['RetryPhase']).toEqual(['succeeded']);
    expect(desc.searchAttributes['RetryAttempt']).toEqual([2]);
    expect(desc.searchAttributes['LastErrorCode']).toEqual(['rate_limit_exceeded']);
  });
});
