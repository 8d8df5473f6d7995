import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { DEFAULT_WEBHOOK_SECRET } from '../../../src/sim/index.js';
import { useSimHarness, waitFor } from './sim-harness.js';

const { start, call, track } = useSimHarness();

interface Delivery {
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
  raw: string;
}

/** Verifies a delivery as a Standard Webhooks receiver would; returns the library's error message or 'ok'. */
function verifyWith(secret: string, d: Delivery): string {
  try {
    new Webhook(secret).verify(d.raw, {
      'webhook-id': String(d.headers['webhook-id']),
      'webhook-timestamp': String(d.headers['webhook-timestamp']),
      'webhook-signature': String(d.headers['webhook-signature']),
    });
    return 'ok';
  } catch (err) {
    return (err as Error).message;
  }
}

/** A real local webhook receiver that answers with the scripted statuses in turn (then 200). */
async function startReceiver(statuses: number[] = []): Promise<{ url: string; deliveries: Delivery[] }> {
  const deliveries: Delivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      deliveries.push({ headers: req.headers, body: JSON.parse(raw) as Record<string, unknown>, raw });
      res.statusCode = statuses.shift() ?? 200;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  track(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, deliveries };
}

describe('completion webhooks', () => {
  it('POST operation.succeeded with a delivery id header after each executed operation', async () => {
    const receiver = await startReceiver();
    const sim = await start({ scenario: { webhookUrl: receiver.url } });
    const res = await call(sim, { idempotencyKey: 'order-1' });
    await waitFor(() => receiver.deliveries.length === 1, 'one delivery');
    const [delivery] = receiver.deliveries;
    expect(delivery?.body).toEqual({
      deliveryId: expect.stringMatching(/^dlv_/) as unknown,
      type: 'operation.succeeded',
      status: 'succeeded',
      idempotencyKey: 'order-1',
      operationId: res.json['id'],
      createdAt: sim.operations()[0]?.createdAt,
      result: sim.operations()[0]?.result,
    });
    expect(delivery?.headers['webhook-delivery-id']).toBe(delivery?.body['deliveryId']);
    expect(delivery?.headers['content-type']).toBe('application/json');
  });

  it('send nothing for replays, scripted errors or refused requests', async () => {
    const receiver = await startReceiver();
    const sim = await start({
      scenario: { webhookUrl: receiver.url, rules: [{ match: { idempotencyKey: 'fail' }, steps: [{ status: 500 }] }] },
    });
    await call(sim, { idempotencyKey: 'ok' });
    await call(sim, { idempotencyKey: 'ok' });
    await call(sim, { idempotencyKey: 'fail' });
    await waitFor(
      () => sim.metrics().webhooks.pending === 0 && receiver.deliveries.length === 1,
      'deliveries to settle',
    );
    expect(receiver.deliveries.map((d) => d.body['idempotencyKey'])).toEqual(['ok']);
  });

  it('redeliver the same delivery id webhookRedeliveries extra times', async () => {
    const receiver = await startReceiver();
    const sim = await start({ scenario: { webhookUrl: receiver.url, webhookRedeliveries: 2, webhookBackoffMs: 5 } });
    await call(sim, { idempotencyKey: 'order-1' });
    await waitFor(() => sim.metrics().webhooks.pending === 0, 'deliveries to finish');
    expect(receiver.deliveries).toHaveLength(3);
    expect(new Set(receiver.deliveries.map((d) => d.headers['webhook-delivery-id'])).size).toBe(1);
    expect(new Set(receiver.deliveries.map((d) => d.body['deliveryId'])).size).toBe(1);
    expect(sim.metrics().totals.webhookDeliveries).toEqual({
      attempts: 3,
      delivered: 3,
      failed: 0,
      redeliveries: 2,
      exhausted: 0,
      dropped: 0,
      faultsSent: 0,
      faultsAccepted: 0,
    });
  });

  it('retry with the same delivery id while the receiver does not answer 2xx', async () => {
    const receiver = await startReceiver([500, 503]);
    const sim = await start({ scenario: { webhookUrl: receiver.url, webhookBackoffMs: 5 } });
    await call(sim, { idempotencyKey: 'order-1' });
    await waitFor(() => sim.metrics().webhooks.pending === 0, 'deliveries to finish');
    expect(receiver.deliveries.map((d) => d.headers['webhook-attempt'])).toEqual(['1', '2', '3']);
    expect(new Set(receiver.deliveries.map((d) => d.body['deliveryId'])).size).toBe(1);
    expect(sim.metrics().keys['acme-prod']?.webhookDeliveries).toMatchObject({ attempts: 3, delivered: 1, failed: 2 });
  });

  it('give up after webhookMaxAttempts and count the delivery as exhausted', async () => {
    const receiver = await startReceiver([500, 500, 500, 500]);
    const sim = await start({ scenario: { webhookUrl: receiver.url, webhookBackoffMs: 1, webhookMaxAttempts: 2 } });
    await call(sim, { idempotencyKey: 'order-1' });
    await waitFor(() => sim.metrics().webhooks.pending === 0, 'deliveries to finish');
    expect(receiver.deliveries).toHaveLength(2);
    expect(sim.metrics().totals.webhookDeliveries).toMatchObject({ attempts: 2, failed: 2, exhausted: 1 });
  });

  it('count an unreachable receiver as failed attempts without affecting the operation', async () => {
    const sim = await start({
      scenario: { webhookUrl: 'http://127.0.0.1:9/unreachable', webhookBackoffMs: 1, webhookMaxAttempts: 2 },
    });
    expect((await call(sim, { idempotencyKey: 'k' })).status).toBe(201);
    await waitFor(() => sim.metrics().webhooks.pending === 0, 'deliveries to finish');
    expect(sim.metrics().totals.webhookDeliveries).toMatchObject({ attempts: 2, delivered: 0, exhausted: 1 });
  });

  it('send one event per execution in careless mode, each with its own delivery id', async () => {
    const receiver = await startReceiver();
    const sim = await start({ scenario: { webhookUrl: receiver.url, honorIdempotencyKeys: false } });
    await call(sim, { idempotencyKey: 'k' });
    await call(sim, { idempotencyKey: 'k' });
    await waitFor(() => receiver.deliveries.length === 2, 'two deliveries');
    expect(new Set(receiver.deliveries.map((d) => d.body['deliveryId'])).size).toBe(2);
  });

  it('sign every delivery with the Standard Webhooks scheme, webhook-id being the delivery id', async () => {
    const receiver = await startReceiver();
    const secret = 'whsec_' + Buffer.from('a-receiver-specific-secret').toString('base64');
    const sim = await start({ scenario: { webhookUrl: receiver.url, webhookSecret: secret } });
    await call(sim, { idempotencyKey: 'order-1' });
    await waitFor(() => receiver.deliveries.length === 1, 'one delivery');
    const [d] = receiver.deliveries;
    expect(d!.headers['webhook-id']).toBe(d!.body['deliveryId']);
    expect(verifyWith(secret, d!)).toBe('ok');
    expect(verifyWith(DEFAULT_WEBHOOK_SECRET, d!)).toBe('No matching signature found');
  });

  it('send forged and stale copies before the event and an older pending event after it, when asked', async () => {
    const receiver = await startReceiver([401, 401]);
    const sim = await start({
      scenario: { webhookUrl: receiver.url, webhookForged: 1, webhookStale: 1, webhookOutOfOrder: true },
    });
    await call(sim, { idempotencyKey: 'order-1' });
    await waitFor(() => sim.metrics().webhooks.pending === 0 && receiver.deliveries.length === 4, 'four deliveries');
    const [forged, stale, real, pending] = receiver.deliveries;
    expect(forged!.body).toMatchObject({ type: 'operation.failed', status: 'failed', idempotencyKey: 'order-1' });
    expect(verifyWith(DEFAULT_WEBHOOK_SECRET, forged!)).toBe('No matching signature found');
    expect(verifyWith(DEFAULT_WEBHOOK_SECRET, stale!)).toBe('Message timestamp too old');
    expect(verifyWith(DEFAULT_WEBHOOK_SECRET, real!)).toBe('ok');
    expect(real!.body).toMatchObject({ type: 'operation.succeeded', status: 'succeeded' });
    expect(verifyWith(DEFAULT_WEBHOOK_SECRET, pending!)).toBe('ok');
    expect(pending!.body).toMatchObject({ type: 'operation.pending', status: 'pending', idempotencyKey: 'order-1' });
    expect(pending!.body['deliveryId']).not.toBe(real!.body['deliveryId']);
    expect(sim.metrics().totals.webhookDeliveries).toMatchObject({ faultsSent: 2, faultsAccepted: 0, delivered: 2 });
  });
});
