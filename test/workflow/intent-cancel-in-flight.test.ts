/**
 * A cancelled intent cancels its HTTP request in flight: the dispatch activity heartbeats, so the cancellation
 * reaches it, and its abort signal closes the connection long before the attempt timeout. The provider here is a
 * plain HTTP server on port 0 that never answers and records when each request's connection closes.
 * Time-skipping (the test server does not skip time while the activity runs).
 */
import { createServer } from 'node:http';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { workflowIdOf } from '../../src/client.js';
import { useIntentHarness } from '../support/intent-harness.js';

const h = useIntentHarness();

/** A provider that takes every request and never answers; `closed` resolves when a request's connection closes. */
async function silentProvider(): Promise<{
  server: Server;
  url: string;
  arrived: Promise<IncomingMessage>;
  closed: Promise<void>;
}> {
  let arrive!: (req: IncomingMessage) => void;
  let close!: () => void;
  const arrived = new Promise<IncomingMessage>((r) => (arrive = r));
  const closed = new Promise<void>((r) => (close = r));
  const server = createServer((req) => {
    req.resume();
    req.socket.once('close', close);
    arrive(req);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrived, closed };
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

describe('when an intent is cancelled while its dispatch waits for the provider', () => {
  it('a cancel signal aborts the HTTP request and the intent ends cancelled with a reservation', async () => {
    const t = await h.setup();
    const provider = await silentProvider();
    servers.push(provider.server);
    // A 10-minute attempt timeout: only the cancellation can close the connection within this test.
    const input = t.intent({
      action: { method: 'POST', url: `${provider.url}/v1/charges`, body: { amount: 1 } },
      policy: { attemptTimeout: '10m' },
    });
    const outcome = await t.run(async () => {
      await t.submit(input);
      await provider.arrived;
      await t.client.cancel(input.idempotencyKey, 'customer left');
      await provider.closed;
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome).toMatchObject({ phase: 'cancelled', attempts: 1, inspections: 0, finalReason: 'customer left' });
    expect(outcome.reservation?.reason).toMatch(/^attempt 1 was in flight when the intent was cancelled/);
  });

  it('a cancellation through Temporal (the UI button) aborts the HTTP request too', async () => {
    const t = await h.setup();
    const provider = await silentProvider();
    servers.push(provider.server);
    const input = t.intent({
      action: { method: 'POST', url: `${provider.url}/v1/charges`, body: { amount: 1 } },
      policy: { attemptTimeout: '10m' },
    });
    const outcome = await t.run(async () => {
      await t.submit(input);
      await provider.arrived;
      await t.env.client.workflow.getHandle(workflowIdOf(input.idempotencyKey)).cancel();
      await provider.closed;
      return t.client.result(input.idempotencyKey);
    });
    expect(outcome).toMatchObject({ phase: 'cancelled', attempts: 1, cancelRequested: 'cancelled through Temporal' });
    expect(outcome.reservation?.reason).toBe('attempt in flight at cancellation');
  });
});
