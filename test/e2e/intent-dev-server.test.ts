/**
 * The intent workflow on a real Temporal dev server, for what the time-skipping test server lacks: workflow id
 * conflict and reuse policies (invariant 1), visibility queries over search attributes, sticky-queue timeouts after
 * a worker is killed (invariant 11), and continue-as-new when the server suggests it (a low history threshold is
 * set through dynamic config). Real time: every wait here is a few seconds at most.
 */
import { describe, expect, it, vi } from 'vitest';
import { workflowIdOf } from '../../src/client.js';
import { IdempotencyConflictError } from '../../src/errors.js';
import type { ScenarioInput } from '../../src/sim/index.js';
import { CREDENTIAL, SIM_SECRET, expectStableDispatches, ms, useIntentHarness } from '../support/intent-harness.js';
import type { IntentTest } from '../support/intent-harness.js';
import { useWorkerProcesses } from '../support/worker-process.js';

/** History length at which the server suggests continue-as-new (default 4096 events). */
const SUGGEST_CONTINUE_AS_NEW_AT = 40;
const h = useIntentHarness('dev-server', {
  devServerArgs: ['--dynamic-config-value', `limit.historyCount.suggestContinueAsNew=${SUGGEST_CONTINUE_AS_NEW_AT}`],
});
const processes = useWorkerProcesses();

const rateLimitedOnce = (seconds: number): ScenarioInput => ({
  rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 429, retryAfter: seconds }], then: 'normal' }],
});

/** Workflow runs under the intent's workflow id, from visibility (eventually consistent: waits until `settled`). */
async function runsOf(
  t: IntentTest,
  key: string,
  settled: (runs: { runId: string; status: string }[]) => boolean,
): Promise<{ runId: string; status: string }[]> {
  return vi.waitFor(
    async () => {
      const runs: { runId: string; status: string }[] = [];
      for await (const wf of t.env.client.workflow.list({ query: `WorkflowId = "${workflowIdOf(key)}"` }))
        runs.push({ runId: wf.runId, status: wf.status.name });
      if (!settled(runs)) throw new Error(`visibility never settled for ${key}: ${JSON.stringify(runs)}`);
      return runs;
    },
    { timeout: 10_000, interval: 100 },
  );
}

describe('when the same idempotency key is submitted again (invariant 1)', () => {
  it('starts one workflow for concurrent submits of one key and payload, and the others attach', async () => {
    const t = await h.setup();
    const input = t.intent();
    const outcome = await t.run(async () => {
      const submitted = await Promise.all(Array.from({ length: 5 }, () => t.submit(input)));
      expect(submitted.filter((s) => !s.attached)).toHaveLength(1);
      expect(new Set(submitted.map((s) => s.workflowId))).toEqual(new Set([workflowIdOf(input.idempotencyKey)]));
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1 });
    const runs = await runsOf(t, input.idempotencyKey, (r) => r.length > 0 && r.every((x) => x.status !== 'RUNNING'));
    expect(runs).toHaveLength(1);
    expectStableDispatches(t, input, 1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });

  it('rejects a different payload under the key with IdempotencyConflictError, while running and after it finished', async () => {
    const t = await h.setup(rateLimitedOnce(1));
    const input = t.intent();
    const otherBody = { ...input, action: { ...input.action, body: { amount: 9999, currency: 'eur' } } };
    const otherCredential = { ...input, credential: 'acme-staging' };
    await t.run(async () => {
      expect((await t.submit(input)).attached).toBe(false);
      for (const other of [otherBody, otherCredential]) {
        const err = await t.submit(other).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(IdempotencyConflictError);
        expect((err as IdempotencyConflictError).idempotencyKey).toBe(input.idempotencyKey);
        expect((err as Error).message).toContain(input.idempotencyKey);
      }
      await t.client.result(input.idempotencyKey);
      await expect(t.submit(otherBody)).rejects.toBeInstanceOf(IdempotencyConflictError);
    });
    // The conflicting submits changed nothing: the original payload went out, twice (429, then success).
    expectStableDispatches(t, input, 2);
  });

  it('attaches a submit after the intent finished and never starts a new run', async () => {
    const t = await h.setup();
    const input = t.intent();
    await t.run(async () => {
      await t.submit(input);
      await t.client.result(input.idempotencyKey);
    });
    const handle = t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey));
    const firstRun = (await handle.describe()).runId;
    // Key order in the body does not matter: the fingerprint is over canonical JSON.
    const reordered = {
      ...input,
      action: { ...input.action, body: { order: input.idempotencyKey, currency: 'eur', amount: 1200 } },
    };
    for (const again of [input, reordered]) {
      const submitted = await t.submit(again);
      expect(submitted).toEqual({
        key: input.idempotencyKey,
        workflowId: workflowIdOf(input.idempotencyKey),
        attached: true,
      });
    }
    expect((await handle.describe()).runId).toBe(firstRun);
    const runs = await runsOf(t, input.idempotencyKey, (r) => r.length > 0);
    expect(runs).toEqual([{ runId: firstRun, status: 'COMPLETED' }]);
    expectStableDispatches(t, input, 1);
  });

  it('attaches a submit after the intent failed for good: the key is spent, nothing is dispatched again', async () => {
    const t = await h.setup({ keys: [{ key: SIM_SECRET, id: CREDENTIAL, permission: 'denied' }] });
    const input = t.intent();
    const first = await t.run(async () => {
      await t.submit(input);
      return t.client.result(input.idempotencyKey);
    });
    expect(first.phase).toBe('failed');
    expect((await t.submit(input)).attached).toBe(true);
    expect(await t.client.status(input.idempotencyKey)).toMatchObject({ phase: 'failed', attempts: 1 });
    expectStableDispatches(t, input, 1);
  });
});

describe('visibility', () => {
  it('lists intents by phase and credential through the search attributes', async () => {
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'slow-' }, steps: [{ status: 429, retryAfter: 600 }] }],
    });
    const done = t.intent();
    const waiting = t.intent({ idempotencyKey: t.newKey('slow') });
    await t.run(async () => {
      // One after the other: the 429 closes the credential's gate for 600 s (load control, invariant 13), which would
      // hold `done` too if its dispatch came second.
      await t.submit(done);
      await t.client.result(done.idempotencyKey);
      await t.submit(waiting);
      await t.waitForStatus(waiting.idempotencyKey, (s) => s.phase === 'waiting', 'waiting');
      const keys = async (filter: Parameters<IntentTest['client']['list']>[0]) =>
        (await t.client.list(filter)).map((e) => e.key).sort();
      // Visibility is eventually consistent: poll until both show.
      await expect
        .poll(
          async () => ({
            waiting: await keys({ phase: 'waiting' }),
            succeeded: (await keys({ phase: 'succeeded' })).includes(done.idempotencyKey),
          }),
          { timeout: 10_000, interval: 100 },
        )
        .toEqual({ waiting: [waiting.idempotencyKey], succeeded: true });
      expect(await keys({ phase: 'succeeded', credential: CREDENTIAL })).toEqual([done.idempotencyKey]);
      expect(await keys({ credential: CREDENTIAL })).toEqual([done.idempotencyKey, waiting.idempotencyKey].sort());
      expect(await keys({ credential: 'nobody' })).toEqual([]);
      const entry = (await t.client.list({ phase: 'waiting' }))[0];
      expect(entry).toMatchObject({ phase: 'waiting', attempts: 1, credential: CREDENTIAL, temporalStatus: 'RUNNING' });
    });
  });
});

describe('when a worker is killed after the next attempt was persisted (invariant 11)', () => {
  it('a fresh worker makes exactly one further attempt, not before the permitted time', async () => {
    const t = await h.setup(rateLimitedOnce(3));
    const input = t.intent();
    const child = await processes.start(t.env.address, t.env.namespace ?? 'default', t.prefix);
    await t.submit(input);
    const waiting = await t.waitForStatus(input.idempotencyKey, (s) => s.phase === 'waiting', 'waiting');
    expect(waiting).toMatchObject({ attempts: 1, lastEvidence: { status: 429 } });
    // The timer for the next attempt is persisted; the worker dies without a word to the server.
    await processes.kill(child);
    expect(t.sim.metrics().totals.writes).toBe(1);

    const outcome = await t.run(() => t.client.result(input.idempotencyKey));
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 2, permittedAt: waiting.permittedAt });
    // The fresh worker sent exactly one request: attempt 2, same key and payload, at or after the permitted time.
    const sent = t.dispatches(input.idempotencyKey);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.headers['retryq-attempt']).toBe('2');
    expect(sent[0]?.body).toBe(JSON.stringify(input.action.body));
    expect(sent[0]?.activity?.scheduledAtMs).toBeGreaterThanOrEqual(ms(waiting.permittedAt));
    expect(t.sim.metrics().totals.writes).toBe(2);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });
});

describe('when Temporal suggests continue-as-new', () => {
  it('carries the state into the next run: attempts, log, budget and the key identity', async () => {
    // About 13 events per attempt: two or three continue-as-new on the way. (Each dev-server timer takes ~1 s.)
    const failures = 7;
    const t = await h.setup({
      rules: [
        {
          match: { idempotencyKeyPrefix: 'order-' },
          steps: Array.from({ length: failures }, () => ({ status: 503 })),
          then: 'normal',
        },
      ],
    });
    const input = t.intent({ policy: { maxAttempts: 20, baseDelay: '10ms', maxBackoff: '10ms' } });
    const outcome = await t.run(async () => {
      await t.submit(input);
      const result = await t.client.result(input.idempotencyKey);
      // The memo (payload fingerprint) went along: the same payload still attaches, another one still conflicts.
      expect((await t.submit(input)).attached).toBe(true);
      await expect(t.submit({ ...input, action: { ...input.action, body: { amount: 1 } } })).rejects.toBeInstanceOf(
        IdempotencyConflictError,
      );
      return result;
    });
    const desc = await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).describe();
    expect(desc.raw.workflowExecutionInfo?.firstRunId).toBeTruthy();
    expect(desc.runId).not.toBe(desc.raw.workflowExecutionInfo?.firstRunId);
    const runs = await runsOf(t, input.idempotencyKey, (r) => r.length > 1 && r.every((x) => x.status !== 'RUNNING'));
    expect(runs.filter((r) => r.status === 'CONTINUED_AS_NEW').length).toBeGreaterThanOrEqual(1);
    expect(runs.filter((r) => r.status === 'COMPLETED')).toEqual([{ runId: desc.runId, status: 'COMPLETED' }]);
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: failures + 1, maxAttempts: 20 });
    expect(outcome.attemptLog.map((e) => e.attempt)).toEqual(Array.from({ length: failures + 1 }, (_, i) => i + 1));
    expectStableDispatches(t, input, failures + 1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });
});
