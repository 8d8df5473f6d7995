/**
 * Unknown outcomes (invariant 5): a write that may have reached the provider without a definite answer is followed
 * by an inspection (a read of the saved operation by idempotency key), never by a blind re-dispatch. Time-skipping;
 * the simulator commits and then loses the answer, or loses the request before executing it.
 */
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import type { IntentOutcome } from '../../src/intent.js';
import type { ScenarioInput, Step } from '../../src/sim/index.js';
import { SIM_SECRET, dispatchTimes, expectStableDispatches, ms, useIntentHarness } from '../support/intent-harness.js';
import type { IntentTest, SentRequest } from '../support/intent-harness.js';

const h = useIntentHarness();

type Input = ReturnType<IntentTest['intent']>;

function firstWrite(step: Step, extraRules: NonNullable<ScenarioInput['rules']> = []): ScenarioInput {
  return { rules: [...extraRules, { match: { idempotencyKeyPrefix: 'order-' }, steps: [step], then: 'normal' }] };
}

async function deliver(t: IntentTest, input: Input): Promise<IntentOutcome> {
  return t.run(async () => {
    await t.submit(input);
    return t.client.result(input.idempotencyKey);
  });
}

/** The provider calls made for the intent, in order: `POST` dispatches and `GET` inspections. */
function calls(t: IntentTest, key: string): string[] {
  const mine = (r: SentRequest) =>
    r.headers['idempotency-key'] === key || r.path === `/v1/operations/${encodeURIComponent(key)}`;
  return t.sent.filter(mine).map((r) => r.method);
}

function expectInspectionsAuthenticated(t: IntentTest, key: string, count: number): void {
  const inspections = t.inspections(key);
  expect(inspections).toHaveLength(count);
  for (const r of inspections) {
    expect(r.headers['authorization']).toBe(`Bearer ${SIM_SECRET}`);
    expect(r.activity?.type).toBe('inspect');
    expect(r.body).toBeUndefined();
  }
}

describe('when the provider committed but the answer was lost (invariant 5)', () => {
  it('inspects after an attempt timeout, finds the operation and succeeds with exactly one side effect', async () => {
    const t = await h.setup(firstWrite({ commitThen: 'timeout' }));
    const input = t.intent({ policy: { attemptTimeout: '1s' } });
    const outcome = await deliver(t, input);
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, inspections: 1 });
    expect(outcome.attemptLog.map((e) => [e.kind, e.evidence.decision])).toEqual([
      ['dispatch', 'unknown_outcome'],
      ['inspect', 'operation_succeeded'],
    ]);
    expect(outcome.attemptLog[0]?.evidence).toMatchObject({ transport: 'timeout', sent: 'unknown' });
    // The provider's result, read from the saved operation.
    expect(outcome.result).toMatchObject({
      status: 200,
      inspected: true,
      body: { object: 'operation_result', method: 'POST', path: '/v1/charges', request: input.action.body },
    });
    expect(outcome.reservation).toBeUndefined();
    expect(calls(t, input.idempotencyKey)).toEqual(['POST', 'GET']);
    expectStableDispatches(t, input, 1);
    expectInspectionsAuthenticated(t, input.idempotencyKey, 1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });

  it.each([
    ['a reset connection', { commitThen: 'reset' } as const],
    ['a 500 after executing', { commitThen: 500 } as const],
    ['a 502 after executing', { commitThen: 502 } as const],
  ])('inspects after %s instead of dispatching again', async (_what, step) => {
    const t = await h.setup(firstWrite(step));
    const input = t.intent();
    const outcome = await deliver(t, input);
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, inspections: 1 });
    expect(outcome.attemptLog[0]?.evidence.decision).toBe('unknown_outcome');
    expect(calls(t, input.idempotencyKey)).toEqual(['POST', 'GET']);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });

  it('inspects again on the backoff while the inspection itself fails, and never re-dispatches meanwhile', async () => {
    const t = await h.setup(
      firstWrite({ commitThen: 'reset' }, [
        {
          match: { idempotencyKeyPrefix: 'order-', method: 'GET' },
          steps: [{ status: 503 }, { status: 503 }],
          then: 'normal',
        },
      ]),
    );
    const input = t.intent({ policy: { baseDelay: '5s', multiplier: 2 } });
    const outcome = await deliver(t, input);
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, inspections: 3 });
    expect(calls(t, input.idempotencyKey)).toEqual(['POST', 'GET', 'GET', 'GET']);
    const inspectTimes = t.inspections(input.idempotencyKey).map((r) => r.activity!.scheduledAtMs);
    expect(inspectTimes[1]! - inspectTimes[0]!).toBeGreaterThanOrEqual(5_000);
    expect(inspectTimes[2]! - inspectTimes[1]!).toBeGreaterThanOrEqual(10_000);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });

  it('inspects again while the operation is still pending at the provider', async () => {
    // The provider takes 1.5 s (real time) to execute; the attempt gives up after 0.5 s.
    const t = await h.setup(firstWrite({ delayMs: 1_500 }));
    const input = t.intent({ policy: { attemptTimeout: '500ms', baseDelay: '1s' } });
    const outcome = await t.run(async () => {
      await t.submit(input);
      // Poll without unlocking time skipping: the inspection backoff passes in real time, like the provider's work.
      await t.waitForStatus(input.idempotencyKey, (s) => s.phase === 'succeeded', 'succeeded');
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome.phase).toBe('succeeded');
    expect(outcome.attempts).toBe(1);
    expect(outcome.inspections).toBeGreaterThanOrEqual(2);
    const decisions = outcome.attemptLog.filter((e) => e.kind === 'inspect').map((e) => e.evidence.decision);
    expect(decisions.at(-1)).toBe('operation_succeeded');
    expect(decisions.slice(0, -1).every((d) => d === 'operation_pending')).toBe(true);
    expect(calls(t, input.idempotencyKey).filter((m) => m === 'POST')).toHaveLength(1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });
});

describe('when the inspection finds that the provider recorded the attempt as failed', () => {
  it('stops: the same key would only replay the recorded failure, so nothing is sent again', async () => {
    // A 502 the provider saved under the key (Stripe-style): a write's 502 is an unknown outcome, so retryq inspects.
    const t = await h.setup(firstWrite({ status: 502, record: true }));
    const input = t.intent();
    const outcome = await deliver(t, input);
    expect(outcome).toMatchObject({ phase: 'failed', attempts: 1, inspections: 1 });
    expect(outcome.attemptLog.map((e) => [e.kind, e.evidence.decision])).toEqual([
      ['dispatch', 'unknown_outcome'],
      ['inspect', 'operation_failed:unknown_outcome'],
    ]);
    expect(outcome.finalReason).toContain('the provider recorded attempt 1 as failed (HTTP 502');
    expect(calls(t, input.idempotencyKey)).toEqual(['POST', 'GET']);
    expect(outcome.reservation).toBeUndefined();
  });
});

describe('when the idempotency key holds URL-reserved characters', () => {
  it('looks the operation up by the percent-encoded key and finds it', async () => {
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'order:' }, steps: [{ commitThen: 'reset' }], then: 'normal' }],
    });
    const key = `order:${t.newKey('cust@shop')}+v=1`;
    const input = t.intent({ idempotencyKey: key });
    const outcome = await deliver(t, input);
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, inspections: 1, result: { inspected: true } });
    expect(t.inspections(key)[0]?.path).toBe(`/v1/operations/${encodeURIComponent(key)}`);
    expect(t.sim.sideEffects(key)).toBe(1);
  });
});

describe('when a read loses its answer', () => {
  it('retries a GET on the backoff without inspecting: a read cannot have an unknown outcome', async () => {
    // The intent reads an existing operation's status; the first read's connection is reset.
    const saved = 'saved-operation';
    const t = await h.setup({
      rules: [{ match: { idempotencyKey: saved, method: 'GET' }, steps: [{ reset: true }], then: 'normal' }],
    });
    const create = await request(`${t.sim.url}/v1/charges`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SIM_SECRET}`, 'idempotency-key': saved, 'content-type': 'application/json' },
      body: '{"amount":1}',
    });
    await create.body.dump();
    const input = t.intent({
      action: { method: 'GET', url: `${t.sim.url}/v1/operations/${saved}` },
      inspection: undefined,
      policy: { baseDelay: '10s' },
    });
    const outcome = await deliver(t, input);
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 2, inspections: 0 });
    expect(outcome.attemptLog[0]?.evidence).toMatchObject({ transport: 'reset', decision: 'transient' });
    expect(outcome.result).toMatchObject({ status: 200, body: { idempotencyKey: saved, status: 'succeeded' } });
    const reads = t.sent.filter((r) => r.headers['idempotency-key'] === input.idempotencyKey);
    expect(reads.map((r) => r.method)).toEqual(['GET', 'GET']);
    expect(reads[1]!.activity!.scheduledAtMs - reads[0]!.activity!.scheduledAtMs).toBeGreaterThanOrEqual(10_000);
  });
});

describe('when the outcome stays unknown until the deadline', () => {
  it('expires with the unknown attempt recorded as a reservation to reconcile, never re-dispatching', async () => {
    const t = await h.setup(
      firstWrite({ commitThen: 'reset' }, [
        { match: { idempotencyKeyPrefix: 'order-', method: 'GET' }, steps: [{ status: 503 }] },
      ]),
    );
    // Inspections at 0 s, 30 s and 90 s; the next one (210 s) lies past the 2-minute deadline.
    const input = t.intent({ deadline: '2m', policy: { baseDelay: '30s', multiplier: 2 } });
    const failure = await t.run(async () => {
      await t.submit(input);
      return t.failureOf(input.idempotencyKey);
    });
    expect(failure.type).toBe('IntentExpired');
    const outcome = failure.details?.[0] as IntentOutcome;
    expect(outcome).toMatchObject({ phase: 'expired', attempts: 1, inspections: 3 });
    expect(outcome.reservation).toMatchObject({ idempotencyKey: input.idempotencyKey, attempt: 1 });
    expect(outcome.finalReason).toContain('next inspection');
    expect(calls(t, input.idempotencyKey)).toEqual(['POST', 'GET', 'GET', 'GET']);
    // The provider did execute it once: exactly what the reservation asks a person to reconcile.
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });
});

describe('when the request was lost before the provider executed it', () => {
  it('inspects, finds nothing, and re-dispatches with the same key and payload: one side effect', async () => {
    const t = await h.setup(firstWrite({ reset: true }));
    const input = t.intent();
    const outcome = await deliver(t, input);
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 2, inspections: 1 });
    expect(outcome.attemptLog.map((e) => [e.kind, e.evidence.decision])).toEqual([
      ['dispatch', 'unknown_outcome'],
      ['inspect', 'operation_absent'],
      ['dispatch', 'success'],
    ]);
    expect(calls(t, input.idempotencyKey)).toEqual(['POST', 'GET', 'POST']);
    expectStableDispatches(t, input, 2);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });

  it('backs off before each re-dispatch when lost requests keep failing (never an immediate retry)', async () => {
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ reset: true }, { reset: true }], then: 'normal' }],
    });
    const input = t.intent({ policy: { baseDelay: '10s', multiplier: 2 } });
    const outcome = await deliver(t, input);
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 3, inspections: 2 });
    expect(calls(t, input.idempotencyKey)).toEqual(['POST', 'GET', 'POST', 'GET', 'POST']);
    const [first, second, third] = dispatchTimes(t, input.idempotencyKey);
    expect(second! - first!).toBeGreaterThanOrEqual(10_000);
    expect(third! - second!).toBeGreaterThanOrEqual(20_000);
    expectStableDispatches(t, input, 3);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });

  it('still waits for an earlier server floor before re-dispatching after the inspection found nothing', async () => {
    // 429 Retry-After 120 s; the attempt at the permitted time is lost; the inspection finds nothing.
    const t = await h.setup({
      rules: [
        {
          match: { idempotencyKeyPrefix: 'order-' },
          steps: [{ status: 429, retryAfter: 120 }, { reset: true }],
          then: 'normal',
        },
      ],
    });
    const input = t.intent();
    const outcome = await deliver(t, input);
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 3, inspections: 1 });
    expect(calls(t, input.idempotencyKey)).toEqual(['POST', 'POST', 'GET', 'POST']);
    const times = dispatchTimes(t, input.idempotencyKey);
    expect(times[1]).toBeGreaterThanOrEqual(ms(outcome.permittedAt));
    expectStableDispatches(t, input, 3);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });
});
