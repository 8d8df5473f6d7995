/**
 * The intent workflow against a provider that rate-limits: every form of Retry-After, the backoff floor when the
 * header says nothing usable, server delays beyond the local maximum and past the deadline, and what a day-long
 * schedule costs in wall time. Time-skipping: waits of minutes to hours take milliseconds.
 */
import { describe, expect, it } from 'vitest';
import type { IntentOutcome } from '../../src/intent.js';
import type { RetryAfterSpec, ScenarioInput } from '../../src/sim/index.js';
import { dispatchTimes, expectStableDispatches, ms, useIntentHarness } from '../support/intent-harness.js';
import type { IntentTest } from '../support/intent-harness.js';

const h = useIntentHarness();

/** The first write of every key is answered 429 (with `retryAfter`, if given); later ones succeed. */
function rateLimitedOnce(retryAfter: RetryAfterSpec | undefined, extra: ScenarioInput = {}): ScenarioInput {
  return {
    ...extra,
    rules: [
      {
        match: { idempotencyKeyPrefix: 'order-' },
        steps: [retryAfter === undefined ? { status: 429 } : { status: 429, retryAfter }],
        then: 'normal',
      },
    ],
  };
}

type Input = ReturnType<IntentTest['intent']>;

async function deliver(t: IntentTest, input: Input): Promise<IntentOutcome> {
  return t.run(async () => {
    await t.submit(input);
    return t.client.result(input.idempotencyKey);
  });
}

/**
 * The second attempt waited for the server's delay, measured from when the 429 arrived (workflow time): the
 * scheduled time is the permitted time, and the second dispatch started no earlier (invariant 2).
 */
function expectServerFloor(t: IntentTest, input: Input, outcome: IntentOutcome, delayMs: number): void {
  expect(outcome.phase).toBe('succeeded');
  expect(outcome.attempts).toBe(2);
  const [first, second] = outcome.attemptLog;
  expect(first?.evidence).toMatchObject({ status: 429, sent: 'yes', decision: 'rate_limited' });
  expect(first?.floor).toBe('server');
  expect(first?.nextAt).toBe(outcome.permittedAt);
  const permitted = ms(outcome.permittedAt);
  const asked = permitted - ms(first?.startedAt);
  // The delay counts from the 429's arrival, a few (real) ms after the attempt started.
  expect(asked).toBeGreaterThanOrEqual(delayMs);
  expect(asked).toBeLessThan(delayMs + 5_000);
  const [, secondDispatch] = dispatchTimes(t, input.idempotencyKey);
  expect(secondDispatch).toBeGreaterThanOrEqual(permitted);
  expect(ms(second?.startedAt)).toBeGreaterThanOrEqual(permitted);
  expectStableDispatches(t, input, 2);
  expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
}

/** The second attempt came after the local backoff (`policy.baseDelay`, no jitter), never at once (invariant 4). */
function expectBackoffFloor(t: IntentTest, input: Input, outcome: IntentOutcome, backoffMs: number): void {
  expect(outcome.phase).toBe('succeeded');
  expect(outcome.attempts).toBe(2);
  const [first] = outcome.attemptLog;
  expect(first?.evidence).toMatchObject({ status: 429, decision: 'rate_limited' });
  expect(first?.floor).toBe('backoff');
  const scheduled = ms(first?.nextAt) - ms(first?.startedAt);
  expect(scheduled).toBeGreaterThanOrEqual(backoffMs);
  expect(scheduled).toBeLessThan(backoffMs + 5_000);
  const [firstDispatch, secondDispatch] = dispatchTimes(t, input.idempotencyKey);
  expect(secondDispatch! - firstDispatch!).toBeGreaterThanOrEqual(backoffMs);
  expect(secondDispatch).toBeGreaterThanOrEqual(ms(first?.nextAt));
  expectStableDispatches(t, input, 2);
}

describe('when the provider answers 429 with a Retry-After (invariant 2)', () => {
  it('waits the delay-seconds in full before the second attempt', async () => {
    const t = await h.setup(rateLimitedOnce(120));
    const input = t.intent();
    const outcome = await deliver(t, input);
    expect(outcome.attemptLog[0]?.evidence.retryAfter).toBe('120');
    expectServerFloor(t, input, outcome, 120_000);
  });

  it('waits until an IMF-fixdate, measured on the server clock', async () => {
    const t = await h.setup(rateLimitedOnce('http-date:+120s'));
    const input = t.intent();
    const outcome = await deliver(t, input);
    expect(outcome.attemptLog[0]?.evidence.retryAfter).toMatch(/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} /);
    expectServerFloor(t, input, outcome, 120_000);
  });

  it('waits until an RFC 850 date', async () => {
    const t = await h.setup(rateLimitedOnce({ httpDate: 'rfc850', inSeconds: 120 }));
    const input = t.intent();
    const outcome = await deliver(t, input);
    expect(outcome.attemptLog[0]?.evidence.retryAfter).toMatch(/^[A-Z][a-z]+day, \d{2}-[A-Z][a-z]{2}-\d{2} /);
    expectServerFloor(t, input, outcome, 120_000);
  });

  it('corrects a server Date header 5 minutes ahead of the worker clock (waits 120 s, not 420 s)', async () => {
    const t = await h.setup(rateLimitedOnce('http-date:+120s', { clockOffsetMs: 5 * 60_000 }));
    const input = t.intent();
    const outcome = await deliver(t, input);
    expectServerFloor(t, input, outcome, 120_000);
  });
});

describe('when the Retry-After is missing, malformed or in the past (invariant 4)', () => {
  it('applies the backoff floor to a 429 without Retry-After', async () => {
    const t = await h.setup(rateLimitedOnce(undefined));
    const input = t.intent({ policy: { baseDelay: '30s' } });
    const outcome = await deliver(t, input);
    expect(outcome.attemptLog[0]?.evidence.retryAfter).toBeUndefined();
    expect(outcome.permittedAt).toBeUndefined();
    expectBackoffFloor(t, input, outcome, 30_000);
  });

  it.each(['soon', '-5', '1.5'])('applies the backoff floor to the malformed Retry-After %j', async (header) => {
    const t = await h.setup(rateLimitedOnce(header));
    const input = t.intent({ policy: { baseDelay: '30s' } });
    const outcome = await deliver(t, input);
    expect(outcome.attemptLog[0]?.evidence.retryAfter).toBe(header);
    expect(outcome.permittedAt).toBeUndefined();
    expectBackoffFloor(t, input, outcome, 30_000);
  });

  it('applies the backoff floor to a Retry-After date in the past', async () => {
    const t = await h.setup(rateLimitedOnce('http-date:-30s'));
    const input = t.intent({ policy: { baseDelay: '30s' } });
    const outcome = await deliver(t, input);
    expectBackoffFloor(t, input, outcome, 30_000);
    // The server permitted "now"; the backoff lies exactly one base delay later.
    const first = outcome.attemptLog[0];
    expect(ms(first?.nextAt) - ms(outcome.permittedAt)).toBe(30_000);
  });
});

describe('when the server asks for more than the local maximum (invariant 3)', () => {
  it('honours a server delay longer than maxBackoff in full', async () => {
    const t = await h.setup(rateLimitedOnce(3_600));
    const input = t.intent({ deadline: '2h', policy: { maxBackoff: '1m' } });
    const outcome = await deliver(t, input);
    expectServerFloor(t, input, outcome, 3_600_000);
  });

  it('ends as expired, recording the permitted time and the 429, without dispatching again when the delay passes the deadline', async () => {
    const t = await h.setup(rateLimitedOnce(7_200));
    const input = t.intent({ deadline: '1h' });
    const outcome = await deliver(t, input);
    expect(outcome.phase).toBe('expired');
    expect(outcome.attempts).toBe(1);
    expect(outcome.lastEvidence).toMatchObject({ status: 429, decision: 'rate_limited', retryAfter: '7200' });
    const asked = ms(outcome.permittedAt) - ms(outcome.attemptLog[0]?.startedAt);
    expect(asked).toBeGreaterThanOrEqual(7_200_000);
    expect(asked).toBeLessThan(7_205_000);
    expect(ms(outcome.permittedAt)).toBeGreaterThan(ms(outcome.deadline));
    expect(outcome.finalReason).toContain(outcome.permittedAt);
    expect(outcome.nextAttemptAt).toBeUndefined();
    expectStableDispatches(t, input, 1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(0);
  });
});

describe('when the provider rate-limits for a whole day', () => {
  it('keeps a 24-hour Retry-After schedule until success (logs its wall time)', async () => {
    const hours = 24;
    const t = await h.setup({
      rules: [
        {
          match: { idempotencyKeyPrefix: 'order-' },
          steps: Array.from({ length: hours }, () => ({ status: 429, retryAfter: 3_600 })),
          then: 'normal',
        },
      ],
    });
    const input = t.intent({ deadline: '26h', policy: { maxAttempts: hours + 1 } });
    const wallStart = performance.now();
    const outcome = await deliver(t, input);
    const wallMs = Math.round(performance.now() - wallStart);
    expect(outcome.phase).toBe('succeeded');
    expect(outcome.attempts).toBe(hours + 1);
    const times = dispatchTimes(t, input.idempotencyKey);
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(3_600_000);
    const workflowHours = (times.at(-1)! - times[0]!) / 3_600_000;
    expect(workflowHours).toBeGreaterThanOrEqual(hours);
    expectStableDispatches(t, input, hours + 1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
    console.log(
      JSON.stringify({ measure: '24h-retry-after-schedule', attempts: outcome.attempts, workflowHours, wallMs }),
    );
  });
});
