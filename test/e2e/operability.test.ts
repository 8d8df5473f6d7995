/**
 * Operability against a real Temporal dev server, real workers and the simulated provider: unknown credentials
 * caught at submit, stalled dispatches visible, cancellation before dispatch, size limits and Temporal's own
 * refusals, and "retry now" saying when the next attempt really runs.
 *
 * The dev server runs with a payload limit of 400 kB (dynamic config) so that a body retryq's raised limit lets
 * through meets Temporal's own refusal, which retryq must pass on in its words.
 */
import { WorkflowNotFoundError } from '@temporalio/common';
import { describe, expect, it, vi } from 'vitest';
import { RetryqClient, workflowIdOf } from '../../src/client.js';
import { IntentValidationError } from '../../src/errors.js';
import { CredentialNotServedError, TemporalRequestError } from '../../src/errors.js';
import type { IntentStatus } from '../../src/intent.js';
import { credentialServing } from '../../src/served-credentials.js';
import { CREDENTIAL, useIntentHarness } from '../support/intent-harness.js';
import type { IntentTest } from '../support/intent-harness.js';

const h = useIntentHarness('dev-server', {
  devServerArgs: [
    '--dynamic-config-value',
    'limit.blobSize.error=400000',
    '--dynamic-config-value',
    'limit.blobSize.warn=300000',
  ],
});

/** Polls (every 100 ms, for up to 30 s) until `check` returns a value. */
async function eventually<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  return vi.waitFor(
    async () => {
      const value = await check();
      if (value === undefined) throw new Error(`${what} never happened`);
      return value;
    },
    { timeout: 30_000, interval: 100 },
  );
}

/** A client of this test's queues that checks credentials and reports stalls after `stallMs`. */
function clientOf(t: IntentTest, stallMs = 60_000): RetryqClient {
  return new RetryqClient({
    client: t.env.client,
    taskQueuePrefix: t.prefix,
    knownCredentials: [CREDENTIAL],
    stalledDispatchAfterMs: stallMs,
  });
}

async function notStarted(t: IntentTest, key: string): Promise<void> {
  await expect(t.env.client.workflow.getHandle(workflowIdOf(key)).describe()).rejects.toBeInstanceOf(
    WorkflowNotFoundError,
  );
}

describe('when an intent names a credential no live worker serves', () => {
  it('submit refuses it, naming the served credentials, and starts nothing; the opt-out queues it', async () => {
    const t = await h.setup();
    await t.run(async () => {
      const rq = clientOf(t);
      await eventually('the worker polling its credential', async () =>
        (await credentialServing(t.env.client, t.prefix, CREDENTIAL)).served ? true : undefined,
      );
      const unknown = t.intent({ credential: 'nope-cred' });
      const err = await rq.submit(unknown).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CredentialNotServedError);
      const refusal = err as CredentialNotServedError;
      expect(refusal.code).toBe('credential_not_served');
      expect(refusal.served).toEqual([CREDENTIAL]);
      expect(refusal.message).toContain(`No live worker serves credential "nope-cred"`);
      expect(refusal.message).toContain(`Credentials served now: ${CREDENTIAL}.`);
      await notStarted(t, unknown.idempotencyKey);

      const served = t.intent();
      expect((await rq.submit(served)).attached).toBe(false);
      expect((await rq.result(served.idempotencyKey)).phase).toBe('succeeded');

      const queued = await rq.submit(unknown, { requireServedCredential: false });
      expect(queued.attached).toBe(false);
      await rq.cancel(unknown.idempotencyKey, 'test over');
      expect((await rq.result(unknown.idempotencyKey)).phase).toBe('cancelled');
    });
  });
});

describe('when no worker starts a dispatch', () => {
  it('reports it as stalled in the status, the UI details and a visibility query; a cancel ends it at once, nothing sent', async () => {
    const t = await h.setup();
    await t.run(async () => {
      const rq = clientOf(t, 1000);
      const input = t.intent({ credential: 'nope-cred' });
      await rq.submit(input, { requireServedCredential: false });
      const key = input.idempotencyKey;
      const stalled = await eventually('the stall report', async () => {
        const s = await rq.status(key);
        return s.stalled ? s : undefined;
      });
      expect(stalled).toMatchObject({ phase: 'dispatching', attempts: 1 });
      expect(stalled.stalled?.taskQueue).toBe(`${t.prefix}.actions.nope-cred`);
      const handle = t.env.client.workflow.getHandle(workflowIdOf(key));
      const details = await eventually('the UI details', async () => {
        const meta = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
        return meta.currentDetails?.startsWith('No worker has served') ? meta.currentDetails : undefined;
      });
      expect(details).toMatch(
        /^No worker has served credential nope-cred since (?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d UTC: attempt 1\//,
      );
      const found = await eventually('the visibility query', async () => {
        const query = `WorkflowId = "${workflowIdOf(key)}" AND LastErrorCode = "no_worker" AND RetryPhase = "dispatching"`;
        for await (const wf of t.env.client.workflow.list({ query })) return wf.workflowId;
        return undefined;
      });
      expect(found).toBe(workflowIdOf(key));

      // No worker ever serves nope-cred: only a cancel confirmed before start can end it.
      await rq.cancel(key, 'wrong credential');
      const outcome = await rq.result(key);
      expect(outcome).toMatchObject({ phase: 'cancelled', attempts: 0 });
      expect(outcome.reservation).toBeUndefined();
      expect(outcome.stalled).toBeUndefined();
      expect(outcome.finalReason).toContain('wrong credential');
      expect(t.dispatches(key)).toHaveLength(0);
      const failure = await t.failureOf(key);
      expect(failure.message).toMatch(/^Cancelled: POST [^ ]+\/v1\/charges will not be sent again \(wrong credential/);
      expect(failure.message).toContain('No reservation is left to reconcile.');
    });
  });

  it('a cancel through Temporal before the dispatch started ends it with no reservation', async () => {
    const t = await h.setup();
    await t.run(async () => {
      const rq = clientOf(t);
      const input = t.intent({ credential: 'nope-cred' });
      await rq.submit(input, { requireServedCredential: false });
      const key = input.idempotencyKey;
      await t.waitForStatus(key, (s) => s.phase === 'dispatching', 'dispatching');
      await t.env.client.workflow.getHandle(workflowIdOf(key)).cancel();
      const outcome = await rq.result(key);
      expect(outcome).toMatchObject({ phase: 'cancelled', attempts: 0 });
      expect(outcome.reservation).toBeUndefined();
    });
  });

  it('a cancel while an attempt runs aborts its request, which may have reached the provider: a reservation', async () => {
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'lost-' }, steps: [{ commitThen: 'timeout' }], then: 'normal' }],
    });
    await t.run(async () => {
      const rq = clientOf(t);
      // A 10-minute attempt timeout: only the cancel can end the attempt within this test.
      const input = t.intent({ idempotencyKey: t.newKey('lost'), policy: { attemptTimeout: '10m' } });
      await rq.submit(input, { requireServedCredential: false });
      const key = input.idempotencyKey;
      await eventually('the attempt reaching the provider', () =>
        Promise.resolve(t.dispatches(key).length ? true : undefined),
      );
      await rq.cancel(key, 'changed my mind');
      const outcome = await rq.result(key);
      expect(outcome).toMatchObject({ phase: 'cancelled', attempts: 1 });
      expect(outcome.reservation?.attempt).toBe(1);
      expect(outcome.reservation?.reason).toMatch(/^attempt 1 was in flight when the intent was cancelled/);
      expect(outcome.lastEvidence).toMatchObject({ transport: 'aborted', sent: 'unknown', decision: 'cancelled' });
      // The provider executed the write before the cancel: the reservation is what reconciles it.
      expect(t.sim.sideEffects(key)).toBe(1);
      expect(t.dispatches(key)).toHaveLength(1);
      expect(t.inspections(key)).toHaveLength(0);
      expect((await t.failureOf(key)).message).toContain('Reservation to reconcile');
    });
  });
});

describe('when an intent is too large', () => {
  it('submit names the field, its size and the limit, and starts nothing', async () => {
    const t = await h.setup();
    const rq = clientOf(t);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ body: { blob: 'x'.repeat(300_000) } }, 'action.body'],
      [
        { headers: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`X-Pad-${i}`, 'v'.repeat(1000)])) },
        'action.headers',
      ],
      [{ url: `${t.sim.url}/v1/charges?pad=${'u'.repeat(9000)}` }, 'action.url'],
    ];
    for (const [action, path] of cases) {
      const input = t.intent();
      const err = await rq.submit({ ...input, action: { ...input.action, ...action } }).catch((e: unknown) => e);
      expect(err, path).toBeInstanceOf(IntentValidationError);
      const problem = (err as IntentValidationError).problems[0];
      expect(problem?.path).toBe(path);
      expect(problem?.message).toMatch(/^is [\d,]+ bytes.*; at most [\d,]+ bytes \(\d+ KiB\) are allowed/);
      await notStarted(t, input.idempotencyKey);
    }
  });

  it("passes Temporal's own refusal on in retryq's words, with the server's message", async () => {
    const t = await h.setup();
    await t.run(async () => {
      const rq = new RetryqClient({
        client: t.env.client,
        taskQueuePrefix: t.prefix,
        limits: { maxBodyBytes: 1024 * 1024 },
        requireServedCredential: false,
      });
      const input = t.intent({ action: { method: 'POST', url: `${t.sim.url}/v1/charges`, body: 'b'.repeat(500_000) } });
      const err = await rq.submit(input).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TemporalRequestError);
      const refusal = err as TemporalRequestError;
      expect(refusal.code).toBe('temporal_request_failed');
      expect(refusal.status).toBe('INVALID_ARGUMENT');
      expect(refusal.serverMessage).toMatch(/Blob data size exceeds limit/i);
      expect(refusal.message).toMatch(
        /^Temporal refused to start the workflow of intent "[^"]+" \(INVALID_ARGUMENT\): Blob data size exceeds limit/i,
      );
      expect(refusal.message).toContain("Temporal's payload limit");
      await notStarted(t, input.idempotencyKey);
    });
  });
});

describe('retry now', () => {
  it('says the next attempt waits for the Retry-After, and when; the wait stays', async () => {
    const t = await h.setup({
      rules: [
        { match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 429, retryAfter: '3600' }], then: 'normal' },
      ],
    });
    await t.run(async () => {
      const input = t.intent({ deadline: '3h' });
      await t.submit(input);
      const key = input.idempotencyKey;
      const waiting: IntentStatus = await t.waitForStatus(key, (s) => s.phase === 'waiting', 'waiting');
      const report = await t.client.retryNow(key);
      expect(report).toMatchObject({ key, phase: 'waiting', why: 'server_floor' });
      expect(report.nextAttemptAt).toBe(waiting.nextAttemptAt);
      expect(report.message).toContain(`no sooner than ${waiting.nextAttemptAt}`);
      expect(report.message).toContain('Retry-After 3600');
      const after = await t.client.status(key);
      expect(after).toMatchObject({ phase: 'waiting', nextAttemptAt: waiting.nextAttemptAt });
      expect(t.dispatches(key)).toHaveLength(1);
      await t.client.cancel(key, 'test over');
    });
  });

  it('runs a local backoff at once and says so', async () => {
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ status: 503 }], then: 'normal' }],
    });
    await t.run(async () => {
      const input = t.intent({ deadline: '3h', policy: { baseDelay: '1h', maxBackoff: '2h' } });
      await t.submit(input);
      const key = input.idempotencyKey;
      await t.waitForStatus(key, (s) => s.phase === 'waiting', 'waiting');
      const report = await t.client.retryNow(key);
      expect(report).toMatchObject({ why: 'now', phase: 'waiting' });
      expect((await t.client.result(key)).phase).toBe('succeeded');
      expect(t.dispatches(key)).toHaveLength(2);
    });
  });
});
