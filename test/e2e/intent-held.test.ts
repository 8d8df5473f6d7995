/**
 * Intents behind a closed gate on a real Temporal dev server: load control holds the dispatch (nothing sent, no
 * attempt) and the intent sleeps until its place; the client holds intents at submit; and how short an intent's
 * history stays, so that it cannot creep back up silently. Real time: waits of a few seconds.
 */
import { describe, expect, it } from 'vitest';
import proto from '@temporalio/proto';
import { RetryqClient, workflowIdOf } from '../../src/client.js';
import { credentialWorkflowId } from '../../src/workflows/credential.js';
import type { ScenarioInput } from '../../src/sim/index.js';
import { CREDENTIAL, dispatchTimes, ms, useIntentHarness } from '../support/intent-harness.js';
import type { IntentInput } from '../../src/index.js';
import type { RetryqWorkers } from '../../src/worker.js';
import type { IntentTest } from '../support/intent-harness.js';

const h = useIntentHarness('dev-server');
// @temporalio/proto is CommonJS: take the enum from the default export.
const EventType = proto.temporal.api.enums.v1.EventType;

/** The first write of every key with `prefix` is answered 429 with `Retry-After: seconds`; later ones succeed. */
const rateLimitedOnce = (prefix: string, seconds: number): ScenarioInput => ({
  rules: [{ match: { idempotencyKeyPrefix: prefix }, steps: [{ status: 429, retryAfter: seconds }], then: 'normal' }],
});

/** The event types of an intent's history, as names without the `EVENT_TYPE_` prefix. */
async function eventTypes(t: IntentTest, key: string): Promise<string[]> {
  const history = await t.env.client.workflow.getHandle(workflowIdOf(key)).fetchHistory();
  return (history.events ?? []).map((e) => String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, ''));
}

/**
 * Submits `first` (answered 429) and waits until it sleeps and the workers' process knows the credential's gate
 * closed: the 429 closed it, and the worker learns its time on the entity's clock right after.
 */
async function closeGateWith(
  t: IntentTest,
  workers: RetryqWorkers,
  first: IntentInput,
  submit: (input: IntentInput) => Promise<unknown> = (input) => t.submit(input),
): Promise<void> {
  await submit(first);
  await t.waitForStatus(first.idempotencyKey, (s) => s.phase === 'waiting', 'the first intent waiting');
  const known = () => (workers.gates?.views().get(CREDENTIAL)?.entityClosedUntil.dispatch ?? 0) > Date.now();
  for (let i = 0; i < 50 && !known(); i++) await new Promise((r) => setTimeout(r, 50));
  expect(known()).toBe(true);
}

const count = (types: string[], type: string) => types.filter((e) => e === type).length;

/** The first workflow task of a fresh intent, up to its dispatch: the intent decides nothing before it sends. */
const FIRST_TASK = [
  'WORKFLOW_EXECUTION_STARTED',
  'WORKFLOW_TASK_SCHEDULED',
  'WORKFLOW_TASK_STARTED',
  'WORKFLOW_TASK_COMPLETED',
  'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  'ACTIVITY_TASK_SCHEDULED',
];

describe('the history of an intent', () => {
  it('holds 13 events when the first attempt succeeds: 2 workflow tasks, 2 upserts of its own', async () => {
    const t = await h.setup({});
    const input = t.intent();
    const outcome = await t.run(async () => {
      await t.submit(input);
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome.phase).toBe('succeeded');
    // The start carries the `scheduled` attributes; the run upserts `dispatching` (attempt 1) and `succeeded`; no
    // marker, no local activity.
    expect(await eventTypes(t, input.idempotencyKey)).toEqual([
      ...FIRST_TASK,
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
    const t = await h.setup(rateLimitedOnce('order-', 2));
    const input = t.intent();
    const outcome = await t.run(async () => {
      await t.submit(input);
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome.phase).toBe('succeeded');
    const types = await eventTypes(t, input.idempotencyKey);
    expect(count(types, 'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES')).toBe(4); // one per transition
    expect(count(types, 'WORKFLOW_TASK_COMPLETED')).toBe(4);
    expect(count(types, 'MARKER_RECORDED')).toBe(0);
    expect(types).toHaveLength(26);
    // What the UI lists by: the final attributes say succeeded after 2 attempts, and the last error seen.
    const desc = await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).describe();
    expect(desc.searchAttributes['RetryPhase']).toEqual(['succeeded']);
    expect(desc.searchAttributes['RetryAttempt']).toEqual([2]);
    expect(desc.searchAttributes['LastErrorCode']).toEqual(['rate_limit_exceeded']);
  });
});

describe("when another intent's 429 closed the credential's gate", () => {
  it('load control holds the dispatch: nothing sent, no attempt, one timer until its place, sent once it opens', async () => {
    // A client that does not hold at submit (that client is below): the hold in load control is what this tests.
    const t = await h.setup(rateLimitedOnce('first-', 4), { client: { holdAtSubmit: false } });
    const first = t.intent({ idempotencyKey: t.newKey('first') });
    const second = t.intent();
    const workers = await t.createWorkers();
    const running = workers.run();
    try {
      await closeGateWith(t, workers, first);

      await t.submit(second);
      const waiting = await t.waitForStatus(
        second.idempotencyKey,
        (s) => s.phase === 'waiting' && s.held !== undefined,
        'held by load control',
      );
      expect(waiting).toMatchObject({ attempts: 0, held: { credential: CREDENTIAL, reason: 'rate_limited' } });
      expect(waiting.held?.why).toContain('429');
      // Never before the gate opens (invariant 2): the gate's time is this intent's permitted time too.
      expect(ms(waiting.permittedAt)).toBe(ms(waiting.held?.until));
      expect(ms(waiting.nextAttemptAt)).toBeGreaterThanOrEqual(ms(waiting.permittedAt));
      expect(t.sim.sideEffects(second.idempotencyKey)).toBe(0);
      expect(t.dispatches(second.idempotencyKey)).toHaveLength(0);
      // The held dispatch, then one upsert (waiting) and one timer: holding costs a few events, not a loop.
      const types = await eventTypes(t, second.idempotencyKey);
      expect(types.slice(0, FIRST_TASK.length)).toEqual(FIRST_TASK);
      expect(types.slice(FIRST_TASK.length)).toEqual([
        'ACTIVITY_TASK_STARTED',
        'ACTIVITY_TASK_FAILED',
        'WORKFLOW_TASK_SCHEDULED',
        'WORKFLOW_TASK_STARTED',
        'WORKFLOW_TASK_COMPLETED',
        'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
        'TIMER_STARTED',
      ]);

      const outcome = await t.client.result(second.idempotencyKey);
      expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1 });
      const [sent] = dispatchTimes(t, second.idempotencyKey);
      expect(sent).toBeGreaterThanOrEqual(ms(waiting.held?.until));
      expect(t.dispatches(second.idempotencyKey)).toHaveLength(1);
      expect(t.sim.sideEffects(second.idempotencyKey)).toBe(1);
      expect((await t.client.result(first.idempotencyKey)).phase).toBe('succeeded');
    } finally {
      workers.shutdown();
      await running;
    }
  });

  it('waits out a rate limit on a worker without a cache (every task replayed), with no workflow task timeout', async () => {
    const t = await h.setup(rateLimitedOnce('order-', 2));
    const input = t.intent();
    const workers = await t.createWorkers(undefined, { maxCachedWorkflows: 0, workflowTaskConcurrency: 2 });
    const running = workers.run();
    try {
      await t.submit(input);
      const outcome = await t.client.result(input.idempotencyKey);
      expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 2 });
      const types = await eventTypes(t, input.idempotencyKey);
      // Every task after the first was replayed from history: the same commands, no marker.
      expect(count(types, 'MARKER_RECORDED')).toBe(0);
      expect(count(types, 'WORKFLOW_TASK_TIMED_OUT')).toBe(0);
      expect(count(types, 'WORKFLOW_TASK_FAILED')).toBe(0);
    } finally {
      workers.shutdown();
      await running;
    }
  });
});

describe('when the gate opens on many intents this worker held', () => {
  it("spreads their wake-ups at the worker's wakeUpsPerSecond, each in its own slice after the gate's time, and sends each once", async () => {
    // 10 s: long enough that the gate is still closed when the last of the six is submitted on a loaded machine (an
    // intent submitted after it opened is not held at all, and never shows `waiting`).
    const t = await h.setup(rateLimitedOnce('first-', 10), { client: { holdAtSubmit: false } });
    const first = t.intent({ idempotencyKey: t.newKey('first') });
    const held = Array.from({ length: 6 }, () => t.intent());
    // 4 per second: slices of 250 ms. The test credential's budget (600,000/min) would spread them 0.125 ms apart.
    const workers = await t.createWorkers(undefined, { wakeUpsPerSecond: 4 });
    const running = workers.run();
    try {
      await closeGateWith(t, workers, first);

      // One after another, so that each takes the next place this worker hands out.
      const waiting = [];
      for (const input of held) {
        await t.submit(input);
        waiting.push(await t.waitForStatus(input.idempotencyKey, (s) => s.phase === 'waiting', 'held'));
      }
      waiting.forEach((s, place) => {
        expect(s).toMatchObject({ attempts: 0, held: { credential: CREDENTIAL, reason: 'rate_limited' } });
        // Never before the gate opens, and in this place's own 250 ms slice after it.
        const after = ms(s.nextAttemptAt) - ms(s.held?.until);
        expect(after).toBeGreaterThanOrEqual(place * 250);
        expect(after).toBeLessThanOrEqual((place + 1) * 250);
      });

      for (const [i, input] of held.entries()) {
        const outcome = await t.client.result(input.idempotencyKey);
        expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1 });
        const [sent] = dispatchTimes(t, input.idempotencyKey);
        expect(sent).toBeGreaterThanOrEqual(ms(waiting[i]!.nextAttemptAt));
        expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
      }
    } finally {
      workers.shutdown();
      await running;
    }
  });
});

/**
 * A client that knows the credential's gate closed: a client built after the gate closed (a client learns a gate at
 * its first submit of the credential and again at most once per `gateFreshMs`, behind later submits).
 */
function clientThatKnows(t: IntentTest): RetryqClient {
  return new RetryqClient({ client: t.env.client, taskQueuePrefix: t.prefix, requireServedCredential: false });
}

/**
 * Runs `body` with workers running, after a first intent's 429 (`Retry-After: seconds`) closed the credential's gate,
 * and with a client that knows it.
 */
async function whileGateClosed(
  seconds: number,
  body: (t: IntentTest, client: RetryqClient) => Promise<void>,
): Promise<void> {
  const t = await h.setup(rateLimitedOnce('first-', seconds));
  const workers = await t.createWorkers();
  const running = workers.run();
  try {
    await closeGateWith(t, workers, t.intent({ idempotencyKey: t.newKey('first') }));
    await body(t, clientThatKnows(t));
  } finally {
    workers.shutdown();
    await running;
  }
}

describe("when the client knows the credential's gate is closed (held at submit)", () => {
  it('the server holds the intent until its turn: no workflow task, status and list say waiting, sent once after the gate opens', async () => {
    await whileGateClosed(4, async (t, client) => {
      const second = t.intent();
      await client.submit(second);

      // Nothing has run: the start is the whole history, and the status comes from what the start recorded.
      expect(await eventTypes(t, second.idempotencyKey)).toEqual(['WORKFLOW_EXECUTION_STARTED']);
      const waiting = await client.status(second.idempotencyKey);
      expect(waiting).toMatchObject({
        phase: 'waiting',
        attempts: 0,
        inspections: 0,
        held: { credential: CREDENTIAL, reason: 'rate_limited' },
        attemptLog: [],
      });
      expect(waiting.held?.why).toContain('429');
      // Never before the gate opens (invariant 2): the gate's time is the intent's permitted time, its turn after it.
      expect(ms(waiting.permittedAt)).toBe(ms(waiting.held?.until));
      expect(ms(waiting.nextAttemptAt)).toBeGreaterThanOrEqual(ms(waiting.permittedAt));
      const desc = await t.env.client.workflow.getHandle(workflowIdOf(second.idempotencyKey)).describe();
      expect(desc.executionTime?.getTime()).toBeGreaterThan(desc.startTime.getTime());
      expect(desc.searchAttributes['RetryPhase']).toEqual(['waiting']);
      // What the client read: the entity's memo, written when the 429 closed the gate (a describe, no worker).
      const entity = await t.env.client.workflow.getHandle(credentialWorkflowId(CREDENTIAL, t.prefix)).describe();
      expect(entity.memo?.['dispatchGate']).toMatchObject({ closedUntilMs: ms(waiting.permittedAt), blocked: false });
      const listed = await client.list({ phase: 'waiting' });
      expect(listed.map((e) => e.key)).toContain(second.idempotencyKey);

      const outcome = await client.result(second.idempotencyKey);
      expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, deadline: waiting.deadline });
      expect(waiting.maxAttempts).toBe(outcome.maxAttempts);
      const [sent] = dispatchTimes(t, second.idempotencyKey);
      expect(sent).toBeGreaterThanOrEqual(ms(waiting.permittedAt));
      expect(t.dispatches(second.idempotencyKey)).toHaveLength(1);
      expect(t.sim.sideEffects(second.idempotencyKey)).toBe(1);
      // Held at submit, it cost no more than an intent that never met the gate: no gate check (the worker knows the
      // gate opened before the intent's first task), one upsert per transition (dispatching, succeeded).
      const types = await eventTypes(t, second.idempotencyKey);
      expect(count(types, 'MARKER_RECORDED')).toBe(0);
      expect(count(types, 'TIMER_STARTED')).toBe(0);
      expect(types).toHaveLength(13);
    });
  });

  it('a cancel ends the hold at once: cancelled, nothing sent, no attempt', async () => {
    await whileGateClosed(30, async (t, client) => {
      const second = t.intent();
      await client.submit(second);
      expect((await client.status(second.idempotencyKey)).phase).toBe('waiting');
      const asked = Date.now();
      await client.cancel(second.idempotencyKey, 'customer changed their mind');
      const outcome = await client.result(second.idempotencyKey);
      // Long before the gate's 30 s: the cancel did not wait for the intent's turn.
      expect(Date.now() - asked).toBeLessThan(15_000);
      expect(outcome).toMatchObject({
        phase: 'cancelled',
        attempts: 0,
        cancelRequested: 'customer changed their mind',
      });
      expect(outcome.reservation).toBeUndefined();
      expect(t.dispatches(second.idempotencyKey)).toHaveLength(0);
      await expect(client.cancel(second.idempotencyKey, 'again')).rejects.toThrow(/already ended|has ended/);
    });
  });

  it('"retry now" ends the hold but never sends before the gate opens; a turn past the deadline ends it expired at once', async () => {
    await whileGateClosed(5, async (t, client) => {
      const second = t.intent();
      const late = t.intent({ deadline: '2s' });
      await client.submit(second);
      await client.submit(late);
      const held = await client.status(second.idempotencyKey);
      const report = await client.retryNow(second.idempotencyKey);
      expect(report).toMatchObject({ phase: 'waiting', why: 'gate' });
      expect(ms(report.nextAttemptAt ?? undefined)).toBe(ms(held.permittedAt));
      const outcome = await client.result(second.idempotencyKey);
      expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1 });
      const [sent] = dispatchTimes(t, second.idempotencyKey);
      expect(sent).toBeGreaterThanOrEqual(ms(held.permittedAt));

      const expired = await client.result(late.idempotencyKey);
      expect(expired).toMatchObject({ phase: 'expired', attempts: 0 });
      expect(expired.finalReason).toMatch(/rate limited until .*turn would come past the deadline/);
      expect(t.dispatches(late.idempotencyKey)).toHaveLength(0);
    });
  });
});
