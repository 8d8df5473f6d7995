/**
 * The webhook receiver against a real Temporal dev server, real HTTP and the provider simulator (invariant 10): a
 * webhook is acknowledged only after Temporal stored it; a duplicate delivery changes nothing and writes nothing to
 * the intent's history; a delivery never starts an intent or a dispatch. Real time; every wait is a few seconds at
 * most.
 */
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { WorkflowNotFoundError } from '@temporalio/common';
import { afterEach, describe, expect, it, vi } from 'vitest';
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

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** The intent's history as the server holds it. */
async function historyOf(t: IntentTest, key: string): Promise<HistoryEvent[]> {
  return (await t.env.client.workflow.getHandle(workflowIdOf(key)).fetchHistory()).events ?? [];
}

/** How many events of each kind the `webhook` updates wrote. */
function updateEvents(events: HistoryEvent[]): {
  admitted: number;
  accepted: number;
  rejected: number;
  completed: number;
} {
  const named = (e: HistoryEvent) =>
    e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name ??
    e.workflowExecutionUpdateAdmittedEventAttributes?.request?.input?.name;
  const webhook = events.filter((e) => named(e) === 'webhook' || e.workflowExecutionUpdateCompletedEventAttributes);
  return {
    admitted: webhook.filter((e) => e.workflowExecutionUpdateAdmittedEventAttributes).length,
    accepted: webhook.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).length,
    rejected: events.filter((e) => e.workflowExecutionUpdateRejectedEventAttributes).length,
    completed: webhook.filter((e) => e.workflowExecutionUpdateCompletedEventAttributes).length,
  };
}

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
          json: {
            outcome: 'stored',
            deliveryId: id,
            workflowId: workflowIdOf(key),
            detail: 'recorded; it settles the intent',
          },
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
      webhooks: { received: 1, late: 0 },
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
    await vi.waitFor(() => expect(t.sim.metrics().webhooks.pending).toBe(0), { timeout: 5000, interval: 50 });
    expect(t.sim.metrics().totals.webhookDeliveries).toMatchObject({ faultsSent: 2, faultsAccepted: 0 });
    expect(r.receiver.metrics.counts()).toMatchObject({ unauthorized: 2 });
    expect((await t.client.status(key)).phase).toBe('succeeded');
  });

  it('stores the same delivery sent five times at once: five 2xx, one state change', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const id = deliveryId();
    let key = '';
    const outcome = await t.run(async () => {
      key = await waitingIntent(t);
      const answers = await Promise.all(
        Array.from({ length: 5 }, () => deliver(r.url(), id, simEvent(key, 'succeeded'))),
      );
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
      return t.client.result(key);
    });
    expect(outcome).toMatchObject({ phase: 'succeeded', attempts: 1, resolvedByWebhook: { deliveryId: id } });
    expect(outcome.webhooks).toEqual({ received: 1, late: 0 });
    expect(outcome.attemptLog.filter((a) => a.kind === 'webhook')).toHaveLength(1);
    // One stored; the others were turned away as duplicates, or found the intent ended.
    const counts = r.receiver.metrics.counts();
    expect(counts.stored).toBe(1);
    expect(counts.duplicate + counts.late).toBe(4);
    expect(updateEvents(await historyOf(t, key))).toEqual({ admitted: 0, accepted: 1, rejected: 0, completed: 1 });
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
    // Both arrive while the attempt hangs: the first final state waits for the attempt to end, the second is noted.
    const input = t.intent({ policy: { attemptTimeout: '5s' } });
    const key = input.idempotencyKey;
    t.sim.setScenario({ rules: [{ match: { idempotencyKey: key }, steps: [{ commitThen: 'timeout' }] }] });
    const first = deliveryId();
    const second = deliveryId();
    const outcome = await t.run(async () => {
      await t.submit(input);
      await t.waitForStatus(key, (s) => s.phase === 'dispatching', 'dispatching');
      expect((await deliver(r.url(), first, simEvent(key, 'succeeded'))).json).toMatchObject({
        outcome: 'stored',
        detail: 'recorded; it settles the intent',
      });
      expect((await deliver(r.url(), second, simEvent(key, 'failed'))).json).toMatchObject({
        outcome: 'stored',
        detail: 'recorded; an earlier delivery already settled the intent',
      });
      return t.client.result(key);
    });
    expect(outcome).toMatchObject({
      phase: 'succeeded',
      resolvedByWebhook: { deliveryId: first },
      webhooks: { received: 2, late: 1 },
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
      expect((await deliver(r.url(), id, simEvent(key, 'pending'))).json).toMatchObject({
        outcome: 'stored',
        detail: 'recorded; the intent stays waiting',
      });
      const status = await t.waitForStatus(key, (s) => s.webhooks?.received === 1, 'one webhook recorded');
      expect(status.phase).toBe('waiting');
      expect(formatStatus(status)).toContain(`webhook ${id}: pending`);
      await t.client.cancel(key, 'test over');
      await t.client.result(key);
    });
  });
});

describe('redeliveries of one delivery id (invariant 10: a duplicate writes nothing to the intent’s history)', () => {
  it('records five sequential deliveries once: four answered duplicate, and the history does not grow after the first', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    const id = deliveryId();
    await t.run(async () => {
      // A pending state keeps the intent running, so every copy meets a live intent and its validator.
      const key = await waitingIntent(t);
      const first = await deliver(r.url(), id, simEvent(key, 'pending'));
      expect(first.json).toMatchObject({ outcome: 'stored', workflowId: workflowIdOf(key) });
      const afterFirst = await historyOf(t, key);
      for (let i = 0; i < 4; i++) {
        const again = await deliver(r.url(), id, simEvent(key, 'pending'));
        expect(again).toEqual({
          status: 200,
          json: {
            outcome: 'duplicate',
            deliveryId: id,
            workflowId: workflowIdOf(key),
            detail: 'already recorded by the intent',
          },
        });
      }
      const afterAll = await historyOf(t, key);
      expect(afterAll.map((e) => e.eventType)).toEqual(afterFirst.map((e) => e.eventType));
      expect(updateEvents(afterAll)).toEqual({ admitted: 0, accepted: 1, rejected: 0, completed: 1 });
      const status = await t.client.status(key);
      expect(status).toMatchObject({ phase: 'waiting', webhooks: { received: 1, late: 0 } });
      expect(status.attemptLog.filter((a) => a.kind === 'webhook')).toHaveLength(1);
      await t.client.cancel(key, 'test over');
      await t.client.result(key);
    });
    expect(r.receiver.metrics.counts()).toMatchObject({ stored: 1, duplicate: 4 });
    const metrics = await (await fetch(`${r.server.url}/metrics`)).text();
    expect(metrics).toContain('retryq_webhook_deliveries_total{source="acme",outcome="duplicate"} 4');
  });

  it('records five concurrent deliveries through two receivers once: one stored, four duplicates, one update in history', async () => {
    const t = await h.setup();
    // A second receiver process: its own connection to Temporal.
    const connection = await Connection.connect({ address: t.env.address });
    try {
      const receivers = [
        await receiverFor(t),
        await receiverFor(t, { client: new Client({ connection, namespace: t.env.namespace ?? 'default' }) }),
      ];
      const id = deliveryId();
      await t.run(async () => {
        const key = await waitingIntent(t);
        const answers = await Promise.all(
          Array.from({ length: 5 }, (_, i) => deliver(receivers[i % 2]!.url(), id, simEvent(key, 'pending'))),
        );
        expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
        const outcomes = answers.map((a) => a.json.outcome as string).sort();
        expect(outcomes).toEqual(['duplicate', 'duplicate', 'duplicate', 'duplicate', 'stored']);
        expect(updateEvents(await historyOf(t, key))).toEqual({ admitted: 0, accepted: 1, rejected: 0, completed: 1 });
        const status = await t.client.status(key);
        expect(status).toMatchObject({ phase: 'waiting', webhooks: { received: 1, late: 0 } });
        expect(status.attemptLog.filter((a) => a.kind === 'webhook')).toHaveLength(1);
        await t.client.cancel(key, 'test over');
        await t.client.result(key);
      });
      const stored = receivers.map((r) => r.receiver.metrics.counts());
      expect(stored.reduce((n, c) => n + c.stored, 0)).toBe(1);
      expect(stored.reduce((n, c) => n + c.duplicate, 0)).toBe(4);
    } finally {
      await connection.close();
    }
  });

  it('answers a delivery to an intent that has ended as late, writing nothing to its history', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    await t.run(async () => {
      const key = await waitingIntent(t);
      await t.client.cancel(key, 'done here');
      await t.client.result(key).catch(() => undefined);
      const before = await historyOf(t, key);
      const answer = await deliver(r.url(), deliveryId(), simEvent(key, 'succeeded'));
      expect(answer).toMatchObject({
        status: 200,
        json: { outcome: 'late', workflowId: workflowIdOf(key), detail: 'the intent has already ended (cancelled)' },
      });
      expect((await historyOf(t, key)).length).toBe(before.length);
    });
  });
});

describe('a delivery while no workflow worker runs (invariant 10)', () => {
  it('is answered 503 (the intent cannot validate it), and its redelivery is recorded once a worker is back', async () => {
    const t = await h.setup();
    const r = await receiverFor(t, { temporalTimeoutMs: 1500 });
    const key = await t.run(() => waitingIntent(t));
    const id = deliveryId();
    const down = await deliver(r.url(), id, simEvent(key, 'succeeded'));
    expect(down.status).toBe(503);
    expect(down.json).toMatchObject({ error: { code: 'webhook_temporal_unavailable' } });
    const outcome = await t.run(async () => {
      const again = await deliver(r.url(), id, simEvent(key, 'succeeded'));
      expect(again.status).toBe(200);
      // The copy Temporal held while no worker ran may have been recorded first: then this one is its duplicate, or
      // finds the intent it settled already ended.
      expect(['stored', 'duplicate', 'late']).toContain(again.json.outcome);
      return t.client.result(key);
    });
    expect(outcome).toMatchObject({ phase: 'succeeded', resolvedByWebhook: { deliveryId: id } });
    expect(outcome.webhooks).toEqual({ received: 1, late: 0 });
    expect(updateEvents(await historyOf(t, key))).toEqual({ admitted: 0, accepted: 1, rejected: 0, completed: 1 });
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
      const history = await historyOf(t, key);
      expect(updateEvents(history)).toEqual({ admitted: 0, accepted: 0, rejected: 0, completed: 0 });
      expect(history.some((e) => e.workflowExecutionSignaledEventAttributes)).toBe(false);
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
      await expect
        .poll(
          async () => {
            const found: string[] = [];
            for await (const wf of t.env.client.workflow.list({ query: `WebhookKey = "${key}"` }))
              found.push(wf.workflowId);
            return found;
          },
          { timeout: 10_000, interval: 100 },
        )
        .toEqual([orphanWorkflowId('acme', id)]);
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

  it('acknowledges an event with neither key nor state as ignored, counting and logging it, and stores nothing', async () => {
    const t = await h.setup();
    const lines: string[] = [];
    const r = await receiverFor(t, { onIgnored: (line) => lines.push(line) });
    const id = deliveryId();
    const answer = await deliver(r.url(), id, { type: 'operation.succeeded', operationId: 'op_1' });
    expect(answer).toEqual({
      status: 200,
      json: { outcome: 'ignored', deliveryId: id, detail: 'the event names no idempotency key' },
    });
    expect(lines).toEqual([`webhook ${id} from acme ignored: the event names no idempotency key`]);
    expect(r.receiver.metrics.counts()).toMatchObject({ ignored: 1, invalid: 0, stored: 0, orphan: 0 });
  });

  it('answers 400 to a body that is not UTF-8, even when it is correctly signed over its bytes', async () => {
    const t = await h.setup();
    const { createHmac } = await import('node:crypto');
    const r = await receiverFor(t);
    const id = deliveryId();
    const body = Buffer.concat([
      Buffer.from('{"idempotencyKey":"k","status":"succeeded","note":"'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}'),
    ]);
    const ts = String(Math.floor(Date.now() / 1000));
    const key = Buffer.from(SOURCE_SECRET.slice('whsec_'.length), 'base64');
    const signature = createHmac('sha256', key)
      .update(Buffer.concat([Buffer.from(`${id}.${ts}.`), body]))
      .digest('base64');
    const answer = await post(
      r.url(),
      {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': ts,
        'webhook-signature': `v1,${signature}`,
      },
      body,
    );
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({
      error: {
        code: 'webhook_invalid_json',
        message: 'The body is not UTF-8 text; nothing was stored.',
        problems: [{ path: '$', message: expect.stringContaining('not valid UTF-8') as unknown }],
      },
    });
    expect(r.receiver.metrics.counts()).toMatchObject({ invalid: 1, unauthorized: 0, stored: 0 });
  });

  it('answers 404 for an unknown source and 405 for another method', async () => {
    const t = await h.setup();
    const r = await receiverFor(t);
    expect((await post(`${r.server.url}/webhooks/nope`, {}, '{}')).status).toBe(404);
    expect((await fetch(r.url(), { method: 'GET' })).status).toBe(405);
  });
});
