/**
 * Upgrading the intent workflow (docs/operations.md, "Upgrading the intent workflow"): an intent started by a
 * worker running the released 0.1.0 workflow (test/workflow/fixtures/released-0.1.0) is taken over mid-flight by a
 * worker running the current code, which replays the old history (the `patched()` guards keep its commands) and
 * applies the new behaviour only from there on. State carried across continue-as-new by 0.1.0 (version 1) is read
 * by the current code. Against the dev server (the time-skipping server never moves a task off a stopped worker's
 * sticky queue); the provider is the simulator on a real port.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { workflowIdOf } from '../../src/client.js';
import type { IntentSpec } from '../../src/intent.js';
import { cachedWorkflowBundle } from '../../src/testing.js';
import { IntentPatch, intentWorkflow } from '../../src/workflows/intent.js';
import type { CarriedState } from '../../src/workflows/intent.js';
import { useIntentHarness } from '../support/intent-harness.js';

const h = useIntentHarness('dev-server');

const releasedBundle = () =>
  cachedWorkflowBundle({
    workflowsPath: fileURLToPath(new URL('../workflow/fixtures/released-0.1.0/index.ts', import.meta.url)),
    inputs: [
      fileURLToPath(new URL('../workflow/fixtures/released-0.1.0', import.meta.url)),
      fileURLToPath(new URL('../../src', import.meta.url)),
    ],
  });

describe('when a worker with the current workflow takes over intents started under 0.1.0', () => {
  it('replays the old part as it was (the refusal counted as an attempt) and applies never-sent rules after it', async () => {
    const t = await h.setup();
    const input = t.intent({ policy: { maxAttempts: 2, baseDelay: '1s', maxBackoff: '2s' } });
    await t.sim.stopListening();
    // 0.1.0: the refused call uses attempt 1 of 2.
    const old = await t.createWorkers(undefined, undefined, await releasedBundle());
    const oldRunning = old.run();
    try {
      await t.submit(input);
      await t.waitForStatus(input.idempotencyKey, (s) => s.phase === 'waiting' && s.attempts === 1, 'refused once');
    } finally {
      old.shutdown();
      await oldRunning;
    }
    // The current worker replays that history, then meets three more refusals: under 0.1.0 the second would have
    // used up the budget and failed the intent; now none of them is an attempt.
    const outcome = await t.run(async () => {
      let status = await t.client.status(input.idempotencyKey);
      for (let i = 0; i < 600 && status.attemptLog.length < 4; i++) {
        await new Promise((r) => setTimeout(r, 100));
        status = await t.client.status(input.idempotencyKey);
      }
      expect(status).toMatchObject({ phase: 'waiting', attempts: 1 });
      expect(status.attemptLog.length).toBeGreaterThanOrEqual(4);
      await t.sim.resumeListening();
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 2 });
    expect(outcome.attemptLog.map((e) => [e.attempt, e.evidence.sent])).toEqual([
      [1, 'no'],
      ...outcome.attemptLog.slice(1, -1).map(() => [2, 'no']),
      [2, 'yes'],
    ]);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
    // The patch marker is in the history from the first new refusal on: later replays take the new path there.
    const history = await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).fetchHistory();
    const patches = (history.events ?? [])
      .filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch')
      .map((e) =>
        Object.values(e.markerRecordedEventAttributes!.details ?? {})
          .flatMap((p) => p.payloads ?? [])
          .map((p) => Buffer.from(p.data ?? []).toString())
          .join(' '),
      );
    expect(patches.filter((text) => text.includes(IntentPatch.neverSentIsNoAttempt))).toHaveLength(1);
    // The part 0.1.0 ran replays without the gate check (its first dispatch had none, so the run's first-dispatch
    // patch stays off); the current worker's first dispatch of its own, after a wait, turns the later-dispatch one on.
    expect(patches.filter((text) => text.includes(IntentPatch.localGateCheck))).toHaveLength(0);
    expect(patches.filter((text) => text.includes(IntentPatch.gateCheckAfterWait))).toHaveLength(1);
  });

  it('completes an intent from state that 0.1.0 carried across continue-as-new (no version field)', async () => {
    const t = await h.setup();
    const input = t.intent();
    const spec = (t.client as unknown as { prepare(i: typeof input): IntentSpec }).prepare(input);
    const carried: CarriedState = {
      status: {
        idempotencyKey: spec.idempotencyKey,
        credential: spec.credential,
        phase: 'waiting',
        attempts: 1,
        maxAttempts: spec.policy.maxAttempts,
        inspections: 0,
        deadline: spec.deadline,
        attemptLog: [
          {
            kind: 'dispatch',
            attempt: 1,
            startedAt: spec.submittedAt,
            evidence: { status: 503, sent: 'yes', decision: 'transient' },
          },
        ],
        attemptLogDropped: 0,
      },
      needsInspection: false,
      inspectionsSinceUnknown: 0,
      permittedAtMs: undefined,
      dueAtMs: undefined,
    };
    expect(carried.version).toBeUndefined();
    const outcome = await t.run(async () => {
      await t.env.client.workflow.start(intentWorkflow, {
        workflowId: workflowIdOf(spec.idempotencyKey),
        taskQueue: `${t.prefix}.workflows`,
        args: [spec, { taskQueuePrefix: t.prefix, publishChangesOnly: true, carried }],
      });
      return t.client.result(spec.idempotencyKey);
    });
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 2 });
    expect(outcome.attemptLog.map((e) => e.evidence.status)).toEqual([503, 201]);
  });
});
