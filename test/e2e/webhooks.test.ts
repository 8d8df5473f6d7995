/**
 * The webhook receiver against a real Temporal dev server, real HTTP and the provider simulator (invariant 10): a
 * webhook is acknowledged only after Temporal stored it; a duplicate delivery changes nothing; a delivery never
 * starts an intent or a dispatch. Real time; every wait is a few seconds at most.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/common';
import { afterEach, describe, expect, it } from 'vitest';
import { workflowIdOf } from '../../src/client.js';
import { formatStatus } from '../../src/cli.js';
import { webhookKeyKey } from '../../src/search-attributes.js';
import { orphanWorkflowId } from '../../src/webhooks/receiver.js';
import { webhookSourceSchema } from '../../src/webhook-config.js';
import { useIntentHarness } from '../support/intent-harness.js';
import type { IntentTest } from '../support/intent-harness.js';
import {
  OTHER_SECRET,
  SOURCE_SECRET,
  deliver,
  post,
  signed,
  simEvent,
  startTestReceiver,
} from '../support/webhooks.js';
import type { TestReceiver } from '../support/webhooks.js';

const h = useIntentHarness('dev-server');
const receivers: TestReceiver[] = [];
afterEach(async () => {
  for (const r of receivers.splice(0)) await r.close();
});

async function receiverFor(
  t: IntentTest,
  options: Parameters<typeof startTestReceiver>[1] = {},
): Promise<TestReceiver> {
  const r = await startTestReceiver(t.env.client, { taskQueuePrefix: t.prefix, ...options });
  receivers.push(r);
  return r;
}

const deliveryId = () => `msg_${randomUUID()}`;

/** An intent that waits in backoff for ten minutes after a 503 (deadline 1 h): a webhook is its only way out. */
async function waitingIntent(t: IntentTest): Promise<string> {
  const input = t.intent({ idempotencyKey: t.newKey('waiting') });
  t.sim.setScenario({
    rules: [{ match: { idempotencyKey: input.idempotencyKey }, steps: [{ status: 503, retryAfter: 600 }] }],
  });
  await t.submit(input);
  await t.waitForStatus(input.idempotencyKey, (s) => s.phase === 'waiting', 'waiting');
  return input.idempotencyKey;
}

describe('a verified delivery for a running intent (invariant 10)', () => {
  it('resolves an intent waiting to inspect an unknown outcome with no inspection call at the provider', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const input = t.intent({ policy: { attemptTimeout: '1s' } });
    const key = input.idempotencyKey;
    t.sim.setScenario({
      rules: [{ match: { idempotencyKey: key }, steps: [{ commitThen: 'timeout' }], then: 'normal' }],
    });
    const id = deliveryId();
    // No inspection worker: the inspection waits in its queue, as behind a credential's exhausted inspection budget.
    const outcome = await t.run(
      async () => {
        await t.submit(input);
        await t.waitForStatus(key, (s) => s.phase === 'inspecting', 'inspecting');
        const answer = await deliver(r.url(), id, simEvent(key, 'succeeded'));
        expect(answer).toEqual({
          status: 200,
          json: { outcome: 'stored', deliveryId: id, workflowId: workflowIdOf(key) },
        });
        return t.client.result(key);
      },
      { roles: { workflows: true, actions: true, inspect: false } },
    );
    expect(outcome).toMatchObject({
      phase: 'succeeded',
      attempts: 1,
      resolvedByWebhook: { source: 'acme', deliveryId: id, state: 'succeeded' },
      result: { body: { charged: true, key }, webhook: { source: 'acme', deliveryId: id } },
      webhooks: { received: 1, duplicates: 0, late: 0 },
    });
    expect(outcome.reservation).toBeUndefined();
    expect(outcome.finalReason).toContain(`webhook ${id}: succeeded`);
    expect(formatStatus(outcome)).toContain(`webhook ${id}: succeeded`);
    expect(t.inspections(key)).toHaveLength(0);
    expect(t.sim.metrics().totals.inspections).toBe(0);
    expect(t.dispatches(key)).toHaveLength(1);
    expect(t.sim.sideEffects(key)).toBe(1);
  });

  it('settles a lost answer with the simulator’s own signed webhook, refusing its forged and stale copies', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const input = t.intent({ policy: { attemptTimeout: '2s' } });
    const key = input.idempotencyKey;
    t.sim.setScenario({
      webhookSecret: SOURCE_SECRET,
      webhookUrl: r.url(),
      webhookForged: 1,
      webhookStale: 1,
      webhookRedeliveries: 1,
      webhookBackoffMs: 50,
      webhookOutOfOrder: true,
      rules: [{ match: { idempotencyKey: key }, steps: [{ commitThen: 'timeout' }], then: 'normal' }],
    });
    // Without an inspection worker, a webhook slower than the attempt timeout still settles it before any lookup.
    const outcome = await t.run(
      async () => {
        await t.submit(input);
        return t.client.result(key);
      },
      { roles: { workflows: true, actions: true, inspect: false } },
    );
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, resolvedByWebhook: { state: 'succeeded' } });
    expect(outcome.result).toMatchObject({ body: { object: 'operation_result', method: 'POST' } });
    expect(t.inspections(key)).toHaveLength(0);
    expect(t.dispatches(key)).toHaveLength(1);
    for (let i = 0; i < 100 && t.sim.metrics().webhooks.pending > 0; i++)
      await new Promise((res) => setTimeout(res, 50));
    expect(t.sim.metrics().totals.webhookDeliveries).toMatchObject({ faultsSent: 2, faultsAccepted: 0 });
    expect(r.receiver.metrics.counts()).toMatchObject({ unauthorized: 2 });
    expect((await t.client.status(key)).phase).toBe('succeeded');
  });

  it('stores the same delivery sent five times at once: five 2xx, one state change', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const id = deliveryId();
    const outcome = await t.run(async () => {
      const key = await waitingIntent(t);
      const answers = await Promise.all(
        Array.from({ length: 5 }, () => deliver(r.url(), id, simEvent(key, 'succeeded'))),
      );
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
      return t.client.result(key);
    });
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, resolvedByWebhook: { deliveryId: id } });
    // Four of the five reached the workflow before it ended and were recognised; a fifth may have found it ended.
    const counts = outcome.webhooks!;
    expect(counts.received).toBe(1);
    expect(counts.duplicates + r.receiver.metrics.counts().late).toBe(4);
    expect(outcome.attemptLog.filter((a) => a.kind === 'webhook')).toHaveLength(1);
  });

  it('ends an intent in backoff as succeeded, and leaves it succeeded when an older pending or a failed delivery follows', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const succeeded = deliveryId();
    await t.run(async () => {
      const key = await waitingIntent(t);
      expect((await deliver(r.url(), succeeded, simEvent(key, 'succeeded'))).status).toBe(200);
      await t.client.result(key);
      for (const [id, state] of [
        [deliveryId(), 'pending'],
        [deliveryId(), 'failed'],
      ] as const) {
        const answer = await deliver(
          r.url(),
          id,
          simEvent(key, state, { error: { status: 402, code: 'card_declined' } }),
        );
        expect(answer.status).toBe(200);
        expect(answer.json).toMatchObject({ outcome: 'late', workflowId: workflowIdOf(key) });
      }
      const status = await t.client.status(key);
      expect(status).toMatchObject({ phase: 'succeeded', resolvedByWebhook: { deliveryId: succeeded } });
      expect(t.dispatches(key)).toHaveLength(1);
    });
  });

  it('keeps a running intent settled by the first final delivery: a later failed one is only noted', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    // No workflow worker while the deliveries arrive: both are stored in order before the workflow sees either.
    const key = await t.run(() => waitingIntent(t));
    const first = deliveryId();
    const second = deliveryId();
    expect((await deliver(r.url(), first, simEvent(key, 'succeeded'))).json).toMatchObject({ outcome: 'stored' });
    expect((await deliver(r.url(), second, simEvent(key, 'failed'))).json).toMatchObject({ outcome: 'stored' });
    const outcome = await t.run(() => t.client.result(key));
    expect(outcome).toMatchObject({
      phase: 'succeeded',
      resolvedByWebhook: { deliveryId: first },
      webhooks: { received: 2, duplicates: 0, late: 1 },
    });
    expect(outcome.attemptLog.filter((a) => a.kind === 'webhook').map((a) => a.evidence.decision)).toEqual([
      'webhook_succeeded',
      'webhook_failed_ignored',
    ]);
  });

  it('fails an intent in backoff for good on a failed delivery, like an inspection that found a recorded failure', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const id = deliveryId();
    const outcome = await t.run(async () => {
      const key = await waitingIntent(t);
      const event = simEvent(key, 'failed', { error: { status: 402, code: 'card_declined', message: 'declined' } });
      expect((await deliver(r.url(), id, event)).status).toBe(200);
      return t.client.result(key);
    });
    expect(outcome).toMatchObject({
      phase: 'failed',
      attempts: 1,
      resolvedByWebhook: { deliveryId: id, state: 'failed' },
      lastEvidence: { status: 402, code: 'card_declined', decision: 'webhook_failed:permanent' },
    });
    expect(outcome.finalReason).toContain(`webhook ${id}: failed`);
    expect(outcome.finalReason).toContain('submit a new intent with a new key');
  });

  it('logs a pending delivery without moving the intent', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const id = deliveryId();
    await t.run(async () => {
      const key = await waitingIntent(t);
      expect((await deliver(r.url(), id, simEvent(key, 'pending'))).json).toMatchObject({ outcome: 'stored' });
      const status = await t.waitForStatus(key, (s) => s.webhooks?.received === 1, 'one webhook recorded');
      expect(status.phase).toBe('waiting');
      expect(formatStatus(status)).toContain(`webhook ${id}: pending`);
      await t.client.cancel(key, 'test over');
      await t.client.result(key);
    });
  });
});

describe('deliveries that are not verified (invariant 10)', () => {
  it('answers 401 to a forged signature, a wrong secret, and stale or future timestamps, and stores nothing', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    await t.run(async () => {
      const key = await waitingIntent(t);
      const orphanKey = t.newKey('nobody');
      for (const k of [key, orphanKey]) {
        const body = JSON.stringify(simEvent(k, 'succeeded'));
        const id = deliveryId();
        const good = signed(SOURCE_SECRET, id, body);
        const forged = { ...good, 'webhook-signature': `v1,${Buffer.alloc(32, 7).toString('base64')}` };
        const tampered = JSON.stringify(simEvent(k, 'failed'));
        const cases: [string, Record<string, string>, string][] = [
          ['forged signature', forged, body],
          ['body changed after signing', good, tampered],
          ['wrong secret', signed(OTHER_SECRET, id, body), body],
          ['stale timestamp', signed(SOURCE_SECRET, id, body, new Date(Date.now() - 6 * 60_000)), body],
          ['future timestamp', signed(SOURCE_SECRET, id, body, new Date(Date.now() + 6 * 60_000)), body],
          ['no signature', { 'webhook-id': id, 'webhook-timestamp': good['webhook-timestamp']! }, body],
        ];
        for (const [what, headers, payload] of cases) {
          const answer = await post(r.url(), headers, payload);
          expect(answer.status, what).toBe(401);
          expect(answer.json, what).toMatchObject({ error: { code: 'webhook_unauthorized' } });
        }
      }
      const status = await t.client.status(key);
      expect(status.phase).toBe('waiting');
      expect(status.webhooks).toBeUndefined();
      const history = await t.env.client.workflow.getHandle(workflowIdOf(key)).fetchHistory();
      expect(history.events?.some((e) => e.workflowExecutionSignaledEventAttributes)).toBe(false);
      await expect(t.env.client.workflow.getHandle(workflowIdOf(orphanKey)).describe()).rejects.toBeInstanceOf(
        WorkflowNotFoundError,
      );
      await t.client.cancel(key, 'test over');
      await t.client.result(key);
    });
    expect(r.receiver.metrics.counts()).toMatchObject({ unauthorized: 12, stored: 0, orphan: 0 });
  });

  it('accepts a single-header hmac-sha256 scheme (t=…,v1=…) and refuses a wrong signature with 401', async () => {
    const t = await h.setup();
    const { createHmac } = await import('node:crypto');
    const source = webhookSourceSchema.parse({
      name: 'stripeish',
      verify: {
        scheme: 'hmac-sha256',
        secretEnv: 'STRIPEISH_SECRET',
        header: 'Stripeish-Signature',
        timestampKey: 't',
      },
      mapping: {
        deliveryId: 'id',
        type: 'type',
        events: { 'charge.succeeded': 'succeeded' },
        key: 'data.metadata.key',
      },
    });
    const secret = 'stripeish-secret-value';
    const r = await receiverFor(t, { sources: [source], secrets: new Map([['stripeish', [secret]]]) });
    await t.run(async () => {
      const key = await waitingIntent(t);
      const body = JSON.stringify({ id: 'evt_1', type: 'charge.succeeded', data: { metadata: { key } } });
      const ts = String(Math.floor(Date.now() / 1000));
      const sig = createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex');
      const wrong = createHmac('sha256', 'another').update(`${ts}.${body}`).digest('hex');
      const bad = await post(r.url(), { 'stripeish-signature': `t=${ts},v1=${wrong}` }, body);
      expect(bad.status).toBe(401);
      const good = await post(r.url(), { 'stripeish-signature': `t=${ts},v1=${wrong},v1=${sig}` }, body);
      expect(good).toMatchObject({ status: 200, json: { outcome: 'stored', deliveryId: 'evt_1' } });
      expect(await t.client.result(key)).toMatchObject({
        phase: 'succeeded',
        resolvedByWebhook: { source: 'stripeish' },
      });
    });
  });
});

describe('a delivery for a key with no intent (invariant 10)', () => {
  it('is recorded as a searchable orphan workflow, never starts an intent or a dispatch, and dedupes redeliveries', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const key = t.newKey('orphan');
    const id = deliveryId();
    await t.run(async () => {
      const first = await deliver(r.url(), id, simEvent(key, 'succeeded'));
      expect(first).toEqual({
        status: 200,
        json: {
          outcome: 'orphan',
          deliveryId: id,
          workflowId: orphanWorkflowId('acme', id),
          detail: 'no intent has this key; recorded',
        },
      });
      const again = await deliver(r.url(), id, simEvent(key, 'succeeded'));
      expect(again.json).toMatchObject({ outcome: 'duplicate', workflowId: orphanWorkflowId('acme', id) });
      const handle = t.env.client.workflow.getHandle(orphanWorkflowId('acme', id));
      const record = (await handle.result()) as { idempotencyKey: string; delivery: { state: string } };
      expect(record).toMatchObject({ idempotencyKey: key, delivery: { deliveryId: id, state: 'succeeded' } });
      expect((await handle.describe()).typedSearchAttributes.get(webhookKeyKey)).toBe(key);
      // Found the way an operator would: by the key.
      let found: string[] = [];
      for (let i = 0; i < 100 && found.length === 0; i++) {
        found = [];
        for await (const wf of t.env.client.workflow.list({ query: `WebhookKey = "${key}"` }))
          found.push(wf.workflowId);
        if (found.length === 0) await new Promise((res) => setTimeout(res, 100));
      }
      expect(found).toEqual([orphanWorkflowId('acme', id)]);
    });
    await expect(t.env.client.workflow.getHandle(workflowIdOf(key)).describe()).rejects.toBeInstanceOf(
      WorkflowNotFoundError,
    );
    expect(t.sent).toHaveLength(0);
    expect(t.sim.metrics().totals.requests).toBe(0);
  });
});

describe('deliveries the receiver cannot take', () => {
  it('answers 413 to a 2 MiB body, 400 to malformed JSON and to a body that fails the mapping, naming the field', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const key = t.newKey('bad');
    const big = JSON.stringify({ ...simEvent(key, 'succeeded'), padding: 'x'.repeat(2 * 1024 * 1024) });
    const tooLarge = await post(r.url(), signed(SOURCE_SECRET, deliveryId(), big), big);
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.json).toMatchObject({ error: { code: 'webhook_body_too_large' } });

    const notJson = '{"idempotencyKey": "k", ';
    const malformed = await post(r.url(), signed(SOURCE_SECRET, deliveryId(), notJson), notJson);
    expect(malformed.status).toBe(400);
    expect(malformed.json).toMatchObject({ error: { code: 'webhook_invalid_json', problems: [{ path: '$' }] } });

    const wrongKey = await deliver(r.url(), deliveryId(), { ...simEvent(key, 'succeeded'), idempotencyKey: 42 });
    expect(wrongKey.status).toBe(400);
    expect(wrongKey.json).toMatchObject({
      error: { code: 'webhook_invalid_delivery', problems: [{ path: 'idempotencyKey', received: 42 }] },
    });
    const wrongState = await deliver(r.url(), deliveryId(), { ...simEvent(key, 'succeeded'), status: 'exploded' });
    expect(wrongState.json).toMatchObject({ error: { problems: [{ path: 'status', received: 'exploded' }] } });

    const unknownType = await deliver(r.url(), deliveryId(), {
      ...simEvent(key, 'succeeded'),
      type: 'invoice.created',
    });
    expect(unknownType).toMatchObject({ status: 200, json: { outcome: 'ignored' } });
    expect(r.receiver.metrics.counts()).toMatchObject({ too_large: 1, invalid: 3, ignored: 1, stored: 0, orphan: 0 });
    await expect(t.env.client.workflow.getHandle(workflowIdOf(key)).describe()).rejects.toBeInstanceOf(
      WorkflowNotFoundError,
    );

    const metrics = await (await fetch(`${r.server.url}/metrics`)).text();
    expect(metrics).toContain('retryq_webhook_deliveries_total{source="acme",outcome="too_large"} 1');
    expect(metrics).toContain('retryq_webhook_deliveries_total{source="acme",outcome="invalid"} 3');
  });

  it('answers 404 for an unknown source and 405 for another method', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    expect((await post(`${r.server.url}/webhooks/nope`, {}, '{}')).status).toBe(404);
    expect((await fetch(r.url(), { method: 'GET' })).status).toBe(405);
  });
});
