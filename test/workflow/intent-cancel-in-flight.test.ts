/**
 * A cancelled intent cancels its HTTP request in flight: the dispatch activity heartbeats, so the cancellation
 * reaches it, and its abort signal closes the connection long before the attempt timeout. The provider here is a
 * plain HTTP server on port 0 that never answers and records when each request's connection closes.
 * Time-skipping (the test server does not skip time while the activity runs). These tests never need time to
 * skip, and stay in a file of their own: the time-skipping test server keeps counting an activity whose workflow
 * ended before the activity did (a cancellation of type TRY_CANCEL) as outstanding, and skips no time after it.
 */
import type { Server } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { closeServer, silentProvider } from '../support/silent-provider.js';
import { workflowIdOf } from '../../src/client.js';
import { expectStableDispatches, useIntentHarness } from '../support/intent-harness.js';

const h = useIntentHarness();

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await closeServer(s);
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

  it('aborts the attempt in flight, records a reservation, and neither inspects nor dispatches again', async () => {
    const t = await h.setup({
      rules: [{ match: { idempotencyKeyPrefix: 'order-' }, steps: [{ commitThen: 'timeout' }], then: 'normal' }],
    });
    const input = t.intent({ policy: { attemptTimeout: '1500ms' } });
    const outcome = await t.run(async () => {
      await t.submit(input);
      await t.waitForStatus(input.idempotencyKey, (x) => x.phase === 'dispatching', 'dispatching');
      // The provider executed the write and holds the answer back.
      await vi.waitFor(() => expect(t.sim.sideEffects(input.idempotencyKey)).toBeGreaterThan(0), {
        timeout: 5000,
        interval: 10,
      });
      await t.client.cancel(input.idempotencyKey, 'stop');
      const result = await t.client.result(input.idempotencyKey);
      const metadata = await t.env.client.workflow
        .getHandle(workflowIdOf(input.idempotencyKey))
        .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      expect(metadata.currentDetails).toBe(`Cancelled: stop. Reservation to reconcile: ${result.reservation?.reason}.`);
      return result;
    });
    expect(outcome).toMatchObject({ phase: 'cancelled', attempts: 1, inspections: 0 });
    expect(outcome.reservation).toMatchObject({ idempotencyKey: input.idempotencyKey, attempt: 1 });
    // The cancel aborted the request (the activity heartbeats, so it hears the cancellation): it may have arrived.
    expect(outcome.reservation?.reason).toBe(
      'attempt 1 was in flight when the intent was cancelled; its request was aborted and may have reached the provider',
    );
    expect(outcome.lastEvidence).toMatchObject({ transport: 'aborted', sent: 'unknown', decision: 'cancelled' });
    expect(outcome.finalReason).toBe('stop');
    expectStableDispatches(t, input, 1);
    expect(t.inspections(input.idempotencyKey)).toHaveLength(0);
    expect(t.sim.sideEffects(input.idempotencyKey)).toBe(1);
  });
});
