/**
 * Invariant 11, first half: several workers polling the same task queues make one attempt per eligible intent; and
 * a worker that dies in the middle of an attempt leads to an inspection, not a blind re-dispatch (invariant 5).
 * Workers that die run in their own process. (The second half of invariant 11, a worker killed after the next
 * attempt was persisted, runs against the dev server in test/e2e/intent-dev-server.test.ts: the time-skipping test
 * server never moves a workflow task off a dead worker's sticky queue.) Time-skipping.
 */
import { describe, expect, it, vi } from 'vitest';
import { workflowIdOf } from '../../src/client.js';
import type { ScenarioInput } from '../../src/sim/index.js';
import { ms, useIntentHarness } from '../support/intent-harness.js';
import { useWorkerProcesses } from '../support/worker-process.js';

const h = useIntentHarness();
const processes = useWorkerProcesses();

const rateLimitedOnce = (seconds: number): ScenarioInput => ({
  rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 429, retryAfter: seconds }], then: 'normal' }],
});

describe('when two workers poll the same task queues (invariant 11)', () => {
  // The second worker runs in its own process, as in production (the SDK refuses two workers for one task queue on
  // one connection, and two in one process share more than real deployments do).
  it('makes exactly one attempt for one eligible intent', async () => {
    const t = await h.setup();
    const input = t.intent();
    await processes.start(t.env.address, t.env.namespace ?? 'default', t.prefix);
    const outcome = await t.run(async () => {
      await t.submit(input);
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1 });
    expect(t.sim.metrics().totals.writes).toBe(1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });

  it('makes exactly the scheduled attempts for several rate-limited intents', async () => {
    const t = await h.setup(rateLimitedOnce(30));
    const inputs = Array.from({ length: 6 }, () => t.intent());
    await processes.start(t.env.address, t.env.namespace ?? 'default', t.prefix);
    const outcomes = await t.run(async () => {
      await Promise.all(inputs.map((i) => t.submit(i)));
      // One result at a time: see "time-skipping lock" in test/support/intent-harness.ts.
      const results = [];
      for (const i of inputs) results.push(await t.client.result(i.idempotencyKey));
      return results;
    });
    for (const [i, input] of inputs.entries()) {
      expect(outcomes[i]).toMatchObject({ phase: 'succeeded', attempts: 2 });
      const [first, second] = outcomes[i]!.attemptLog;
      expect(first?.evidence.status).toBe(429);
      expect(ms(second?.startedAt)).toBeGreaterThanOrEqual(ms(outcomes[i]?.permittedAt));
      // Whichever worker sent them, the attempts the in-process worker sent carried the intent's key and payload.
      for (const r of t.dispatches(input.idempotencyKey)) {
        expect(r.body).toBe(JSON.stringify(input.action.body));
        expect(r.activity?.scheduledAtMs).toBeGreaterThanOrEqual(
          r.headers['retryq-attempt'] === '2' ? ms(outcomes[i]?.permittedAt) : 0,
        );
      }
      expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
    }
    expect(t.sim.metrics().totals.writes).toBe(2 * inputs.length);
  });
});

describe('when the worker running an attempt dies mid-request (invariants 5 and 11)', () => {
  it('inspects after the attempt stops heartbeating, finds it committed, and never re-dispatches', async () => {
    // The provider commits and holds the answer; the action worker (its own process) is killed meanwhile.
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ commitThen: 'timeout' }], then: 'normal' }],
    });
    // The default attempt timeout (30 s): Temporal ends the silent attempt at its heartbeat timeout, long before
    // its start-to-close timeout (attempt timeout + 20 s).
    const input = t.intent();
    const child = await processes.start(t.env.address, t.env.namespace ?? 'default', t.prefix, 'actions');
    const outcome = await t.run(
      async () => {
        await t.submit(input);
        await t.waitForStatus(input.idempotencyKey, (s) => s.phase === 'dispatching', 'dispatching');
        await vi.waitFor(() => expect(t.sim.sideEffects(input.idempotencyKey)).toBeGreaterThan(0), {
          timeout: 10_000,
          interval: 10,
        });
        await processes.kill(child);
        const result = await t.client.result(input.idempotencyKey);
        const history = await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).fetchHistory();
        // Temporal timed the attempt out; the killed worker never reported anything.
        const types = (history.events ?? [])
          .map((e) =>
            e.activityTaskTimedOutEventAttributes
              ? `timed out: ${String(e.activityTaskTimedOutEventAttributes.failure?.timeoutFailureInfo?.timeoutType)}`
              : e.activityTaskFailedEventAttributes
                ? 'failed'
                : undefined,
          )
          .filter(Boolean);
        // TimeoutType 4 = HEARTBEAT (1 would be START_TO_CLOSE).
        expect(types).toEqual(['timed out: 4']);
        return result;
      },
      { roles: { workflows: true, actions: false, inspect: true } },
    );
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, inspections: 1 });
    // The missed heartbeat ended the attempt: outcome unknown, so inspect.
    expect(outcome.attemptLog.map((e) => [e.kind, e.evidence.decision])).toEqual([
      ['dispatch', 'unknown_outcome'],
      ['inspect', 'operation_succeeded'],
    ]);
    expect(outcome.attemptLog[0]?.evidence).toMatchObject({ transport: 'timeout', sent: 'unknown' });
    expect(t.dispatches(input.idempotencyKey)).toHaveLength(0); // the only dispatch came from the killed process
    expect(t.inspections(input.idempotencyKey)).toHaveLength(1);
    expect(t.sim.metrics().totals.writes).toBe(1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });
});
