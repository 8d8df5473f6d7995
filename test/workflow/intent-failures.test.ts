/**
 * The intent workflow against a provider that is down, answers 503, refuses for good, or keeps failing until the
 * attempt budget or the deadline runs out. Time-skipping; the provider is the simulator on a real port.
 */
import { tsToMs } from '@temporalio/common/lib/time.js';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { workflowIdOf } from '../../src/client.js';
import { IntentFailureType } from '../../src/failures.js';
import type { IntentOutcome } from '../../src/intent.js';
import type { ScenarioInput } from '../../src/sim/index.js';
import {
  CREDENTIAL,
  SIM_SECRET,
  dispatchTimes,
  expectStableDispatches,
  ms,
  useIntentHarness,
} from '../support/intent-harness.js';
import type { IntentTest } from '../support/intent-harness.js';

const h = useIntentHarness();

type Input = ReturnType<IntentTest['intent']>;

describe('when the provider is down and then recovers', () => {
  it('retries through refused connections (no attempt used) and 503s on the backoff or the server floor, then succeeds with one side effect', async () => {
    const t = await h.setup({
      rules: [
        {
          match: { idempotencyKeyPrefix: 'order-' },
          steps: [{ status: 503, retryAfter: 60 }, { status: 503 }],
          then: 'normal',
        },
      ],
    });
    const input = t.intent({ policy: { baseDelay: '10s', multiplier: 2 } });
    await t.sim.stopListening();
    const outcome = await t.run(async () => {
      await t.submit(input);
      const down = await t.waitForStatus(input.idempotencyKey, (s) => s.phase === 'waiting', 'waiting after a refusal');
      expect(down.lastEvidence).toMatchObject({ transport: 'refused', sent: 'no', decision: 'transient' });
      expect(down.attempts).toBe(0);
      expect(down.unreachableSince).toBe(down.attemptLog[0]!.startedAt);
      await t.env.sleep(10_000);
      const still = await t.waitForStatus(
        input.idempotencyKey,
        (s) => s.attemptLog.length === 2 && s.phase === 'waiting',
        'second refusal done',
      );
      expect(still.attempts).toBe(0);
      expect(still.unreachableSince).toBe(down.unreachableSince);
      await t.sim.resumeListening();
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome.phase).toBe('succeeded');
    // The refusals reached nobody: three attempts, the three that the provider answered.
    expect(outcome.attempts).toBe(3);
    expect(outcome.unreachableSince).toBeUndefined();
    expect(outcome.attemptLog.map((e) => [e.attempt, e.evidence.transport ?? e.evidence.status])).toEqual([
      [1, 'refused'],
      [1, 'refused'],
      [1, 503],
      [2, 503],
      [3, 201],
    ]);
    // Backoff 10 s, 20 s (refusals in a row), then the first 503's Retry-After (60 s beats the 10 s backoff of
    // attempt 1), then 20 s (attempt 2's backoff; no jitter).
    const times = dispatchTimes(t, input.idempotencyKey);
    const expected = [
      [10_000, 'backoff'],
      [20_000, 'backoff'],
      [60_000, 'server'],
      [20_000, 'backoff'],
    ] as const;
    expected.forEach(([delay, floor], i) => {
      expect(times[i + 1]! - times[i]!).toBeGreaterThanOrEqual(delay);
      const entry = outcome.attemptLog[i]!;
      expect(entry.floor).toBe(floor);
      expect(ms(entry.nextAt) - ms(entry.startedAt)).toBeGreaterThanOrEqual(delay);
      expect(ms(entry.nextAt) - ms(entry.startedAt)).toBeLessThan(delay + 5_000);
    });
    expectStableDispatches(t, input, 5, [1, 1, 1, 2, 3]);
    // Refused connections never reached the provider; the three that did executed once.
    expect(t.sim.metrics().totals.writes).toBe(3);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });

  it('keeps trying a provider that refuses longer than maxAttempts backoffs last, and says since when it is unreachable', async () => {
    const t = await h.setup({});
    const input = t.intent({ policy: { maxAttempts: 2, baseDelay: '1s', maxBackoff: '30s' } });
    await t.sim.stopListening();
    const outcome = await t.run(async () => {
      await t.submit(input);
      // Ten refusals: five times the attempt budget, with backoff growing to 30 s.
      let down = await t.client.status(input.idempotencyKey);
      for (let i = 0; i < 40 && down.attemptLog.length < 10; i++) {
        await t.env.sleep(30_000);
        down = await t.client.status(input.idempotencyKey);
      }
      expect(down.attemptLog.length).toBeGreaterThanOrEqual(10);
      expect(down.attempts).toBe(0);
      expect(down.phase).toBe('waiting');
      expect(down.unreachableSince).toBe(down.attemptLog[0]!.startedAt);
      const metadata = await t.env.client.workflow
        .getHandle(workflowIdOf(input.idempotencyKey))
        .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      expect(metadata.currentDetails).toMatch(
        /^Waiting: provider unreachable since (?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC \(connection refused\); nothing was sent and no attempt was used\./,
      );
      await t.sim.resumeListening();
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome.phase).toBe('succeeded');
    expect(outcome.attempts).toBe(1);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
    const delays = dispatchTimes(t, input.idempotencyKey)
      .slice(0, 10)
      .map((at, i, all) => (i === 0 ? 0 : at - all[i - 1]!));
    // Backed off (1 s, 2 s, 4 s, … up to 30 s), never a tight loop.
    delays.slice(1).forEach((d, i) => expect(d).toBeGreaterThanOrEqual(Math.min(30_000, 1000 * 2 ** i) * 0.8));
  });

  it('expires at the deadline, not at maxAttempts, while the provider refuses every connection', async () => {
    const t = await h.setup({});
    const input = t.intent({ deadline: '10m', policy: { maxAttempts: 1, baseDelay: '5s', maxBackoff: '1m' } });
    await t.sim.stopListening();
    const outcome = await t.run(async () => {
      await t.submit(input);
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome.phase).toBe('expired');
    expect(outcome.attempts).toBe(0);
    expect(outcome.attemptLog.length).toBeGreaterThan(5);
    expect(outcome.finalReason).toMatch(
      /past the deadline .*the provider was unreachable since .* and nothing was sent/,
    );
    expect(t.sim.metrics().totals.writes).toBe(0);
  });
});

/** A scenario and what the intent's single attempt meets. */
interface PermanentCase {
  name: string;
  scenario: (t: { keyPrefix: string }) => ScenarioInput;
  /** Runs before the intent is submitted (e.g. another client saves the key first). */
  prepare?: (t: IntentTest, input: Input) => Promise<void>;
  status: number;
  code: string;
}

const permanentCases: PermanentCase[] = [
  {
    name: 'permission denied (403)',
    scenario: () => ({ keys: [{ key: SIM_SECRET, id: CREDENTIAL, permission: 'denied' }] }),
    status: 403,
    code: 'permission_denied',
  },
  {
    name: 'schema invalid (400 invalid_request_error)',
    scenario: () => ({
      rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 400, code: 'invalid_request_error' }] }],
    }),
    status: 400,
    code: 'invalid_request_error',
  },
  {
    name: 'payload conflict (422 idempotency_key_reused)',
    scenario: () => ({}),
    // Someone already used this idempotency key at the provider for another body.
    prepare: async (t, input) => {
      const res = await request(input.action.url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${SIM_SECRET}`,
          'idempotency-key': input.idempotencyKey,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ amount: 1, currency: 'usd' }),
      });
      await res.body.dump();
      expect(res.statusCode).toBe(201);
    },
    status: 422,
    code: 'idempotency_key_reused',
  },
  {
    name: 'spending limit reached (402)',
    scenario: () => ({ keys: [{ key: SIM_SECRET, id: CREDENTIAL, spendLimit: 0 }] }),
    status: 402,
    code: 'spending_limit_exceeded',
  },
];

describe('when the provider refuses for good (invariant 6)', () => {
  it.each(permanentCases)('fails after one attempt on $name and never dispatches again', async (c) => {
    const t = await h.setup(c.scenario({ keyPrefix: 'order-' }));
    const input = t.intent();
    await c.prepare?.(t, input);
    const requestsBefore = t.sim.metrics().totals.requests;
    const failure = await t.run(async () => {
      await t.submit(input);
      const f = await t.failureOf(input.idempotencyKey);
      // An hour later, still nothing more was sent.
      await t.env.sleep(3_600_000);
      return f;
    });
    expect(failure.type).toBe(IntentFailureType.IntentFailed);
    expect(failure.nonRetryable).toBe(true);
    const outcome = failure.details?.[0] as IntentOutcome;
    expect(outcome).toMatchObject({
      phase: 'failed',
      attempts: 1,
      lastEvidence: { status: c.status, code: c.code, sent: 'yes', decision: 'permanent' },
    });
    expect(outcome.finalReason).toMatch(/^permanent failure/);
    expect(outcome.nextAttemptAt).toBeUndefined();
    expect(await t.client.result(input.idempotencyKey)).toEqual(outcome);
    expectStableDispatches(t, input, 1);
    expect(t.sim.metrics().totals.requests - requestsBefore).toBe(1);
    expect(t.sim.metrics().totals.inspections).toBe(0);
  });
});

const always503: ScenarioInput = { rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 503 }] }] };

describe('when the provider keeps failing (invariant 7)', () => {
  it('stops as failed after exactly maxAttempts dispatches', async () => {
    const t = await h.setup(always503);
    const input = t.intent({ policy: { maxAttempts: 3, baseDelay: '1s' } });
    const failure = await t.run(async () => {
      await t.submit(input);
      return t.failureOf(input.idempotencyKey);
    });
    expect(failure.type).toBe(IntentFailureType.IntentFailed);
    const outcome = failure.details?.[0] as IntentOutcome;
    expect(outcome).toMatchObject({ phase: 'failed', attempts: 3, maxAttempts: 3 });
    expect(outcome.finalReason).toContain('attempt budget of 3 used up');
    expectStableDispatches(t, input, 3);
  });

  it('stops as expired instead of dispatching after the deadline', async () => {
    const t = await h.setup(always503);
    // Backoff 10 min then 20 min: the third attempt would start at ~30 min, past the 25-minute deadline.
    const input = t.intent({ deadline: '25m', policy: { baseDelay: '10m', maxBackoff: '1h', multiplier: 2 } });
    const failure = await t.run(async () => {
      await t.submit(input);
      return t.failureOf(input.idempotencyKey);
    });
    expect(failure.type).toBe(IntentFailureType.IntentExpired);
    const outcome = failure.details?.[0] as IntentOutcome;
    expect(outcome).toMatchObject({ phase: 'expired', attempts: 2, lastEvidence: { status: 503 } });
    expect(ms(outcome.permittedAt)).toBeGreaterThan(ms(outcome.deadline));
    const times = expectStableDispatches(t, input, 2).map((r) => r.activity!.scheduledAtMs);
    for (const at of times) expect(at).toBeLessThanOrEqual(ms(outcome.deadline));
  });

  it('lets no dispatch task start after the deadline, even when the attempt is scheduled just before it', async () => {
    // 429 Retry-After 60 s under a 70-second deadline: attempt 2 is scheduled seconds before the deadline (the wait
    // counts from when the workflow handles the 429, which a busy machine delays by a second or more).
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 429, retryAfter: 60 }], then: 'normal' }],
    });
    const input = t.intent({ deadline: '70s' });
    const { outcome, history } = await t.run(async () => {
      await t.submit(input);
      const result = await t.client.result(input.idempotencyKey);
      return {
        outcome: result,
        history: await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).fetchHistory(),
      };
    });
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 2 });
    const events = history.events ?? [];
    const scheduled = events.filter((e) => e.activityTaskScheduledEventAttributes);
    expect(scheduled).toHaveLength(2);
    for (const event of scheduled) {
      // Temporal drops a task not started within its schedule-to-start timeout, which the workflow sets at its own
      // "now" (the start of the workflow task that scheduled it): from there, the timeout must end by the deadline.
      const attrs = event.activityTaskScheduledEventAttributes!;
      const started = events.slice(0, events.indexOf(event)).findLast((e) => e.workflowTaskStartedEventAttributes);
      const latestStart = tsToMs(started?.eventTime) + tsToMs(attrs.scheduleToStartTimeout);
      expect(latestStart).toBeLessThanOrEqual(ms(outcome.deadline));
    }
  });

  it('never sends a dispatch that no worker picked up before the deadline', async () => {
    const t = await h.setup({});
    // The test server does not skip time while an activity task is outstanding, so this deadline is real time.
    const input = t.intent({ deadline: '2s' });
    // Only the workflow worker runs: the dispatch task waits in its queue until the deadline passes.
    const failure = await t.run(
      async () => {
        await t.submit(input);
        return t.failureOf(input.idempotencyKey);
      },
      { roles: { workflows: true, actions: false, inspect: false } },
    );
    expect(failure.type).toBe(IntentFailureType.IntentExpired);
    const outcome = failure.details?.[0] as IntentOutcome;
    // Never started, so never sent: no attempt was used.
    expect(outcome).toMatchObject({
      phase: 'expired',
      attempts: 0,
      lastEvidence: { transport: 'timeout', sent: 'no' },
    });
    // Action workers that start now find nothing to send.
    await t.run(() => t.env.sleep(60_000));
    expect(t.dispatches(input.idempotencyKey)).toHaveLength(0);
    expect(t.sim.metrics().totals.writes).toBe(0);
  });
});
