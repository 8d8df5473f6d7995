/**
 * Acknowledgement only after Temporal stored it (invariant 10), across a Temporal outage: a dev server with its
 * SQLite file is stopped while a delivery arrives (503, nothing stored), then restarted on the same port; the
 * provider's redelivery is stored once the intent's workers are back (the intent's update validator needs one), and a
 * second redelivery through another receiver (a restarted or second receiver process) is answered as a duplicate and
 * writes nothing to the intent's history.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RetryqClient, workflowIdOf } from '../../src/client.js';
import type { TemporalConfig } from '../../src/config.js';
import type { IntentStatus } from '../../src/intent.js';
import { startProviderSim } from '../../src/sim/index.js';
import { resolveTemporalCli } from '../../src/temporal/binaries.js';
import { lazyClient } from '../../src/temporal/connect.js';
import { registerSearchAttributes } from '../../src/temporal/register-search-attributes.js';
import { freePort, startDevServer } from '../../src/temporal/server-process.js';
import type { ManagedServer } from '../../src/temporal/server-process.js';
import { createWorkers, intentWorkflowBundle } from '../../src/worker.js';
import { CREDENTIAL, SIM_SECRET, testCredential } from '../support/intent-credential.js';
import { deliver, simEvent, startTestReceiver } from '../support/webhooks.js';

let dataDir: string;
let cliPath: string;
let port: number;
let server: ManagedServer | undefined;

const start = async () => {
  server = await startDevServer({ cliPath, port, dbFile: path.join(dataDir, 'temporal.db') });
};

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'retryq-webhooks-restart-'));
  cliPath = (await resolveTemporalCli()).path!;
  port = await freePort();
  await start();
  const connection = await Connection.connect({ address: server!.address });
  await registerSearchAttributes(connection, 'default');
  await connection.close();
});
afterAll(async () => {
  await server?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('when Temporal is down as a delivery arrives (invariant 10)', () => {
  it('answers 503, and stores the redelivery once after Temporal restarts', async () => {
    const address = `127.0.0.1:${port}`;
    const prefix = `r-${randomUUID().slice(0, 8)}`;
    const temporal: TemporalConfig = {
      external: true,
      address,
      namespace: 'default',
      connect: { connectionOptions: { address } },
    };
    const workflowBundle = await intentWorkflowBundle();
    const sim = await startProviderSim({});
    const key = `order-${randomUUID()}`;
    sim.setScenario({ rules: [{ match: { idempotencyKey: key }, steps: [{ status: 503, retryAfter: 600 }] }] });
    const withWorkers = async <T>(fn: (rq: RetryqClient) => Promise<T>): Promise<T> => {
      const connection = await NativeConnection.connect({ address });
      const clientConnection = await Connection.connect({ address });
      const rq = new RetryqClient({ client: new Client({ connection: clientConnection }), taskQueuePrefix: prefix });
      const workers = await createWorkers({
        config: { taskQueuePrefix: prefix, credentials: [testCredential()], temporal },
        connection,
        secrets: new Map([[CREDENTIAL, SIM_SECRET]]),
        workflowBundle,
      });
      const running = workers.run();
      try {
        return await fn(rq);
      } finally {
        workers.shutdown();
        await running;
        await connection.close();
        await clientConnection.close();
      }
    };
    const statusWhen = (rq: RetryqClient, ok: (s: IntentStatus) => boolean): Promise<IntentStatus> =>
      vi.waitFor(
        async () => {
          const last = await rq.status(key);
          if (!ok(last)) throw new Error(`status never matched; last ${JSON.stringify(last)}`);
          return last;
        },
        { timeout: 10_000, interval: 50 },
      );

    try {
      // The intent waits ten minutes after a 503: only a webhook ends it early.
      await withWorkers(async (rq) => {
        await rq.submit({
          idempotencyKey: key,
          credential: CREDENTIAL,
          action: { method: 'POST', url: `${sim.url}/v1/charges`, body: { amount: 100 } },
          inspection: { url: `${sim.url}/v1/operations/{idempotencyKey}` },
          deadline: '1h',
        });
        await statusWhen(rq, (s) => s.phase === 'waiting');
      });

      const first = lazyClient(temporal);
      const receiver = await startTestReceiver(first.client, { taskQueuePrefix: prefix, temporalTimeoutMs: 2000 });
      const id = `msg_${randomUUID()}`;
      try {
        await server!.stop();
        const down = await deliver(receiver.url(), id, simEvent(key, 'succeeded'));
        expect(down.status).toBe(503);
        expect(down.json).toMatchObject({ error: { code: 'webhook_temporal_unavailable' } });
        expect(receiver.receiver.metrics.counts()).toMatchObject({ unavailable: 1, stored: 0 });

        await start();
        const outcome = await withWorkers(async (rq) => {
          // The provider redelivers until it gets a 2xx; while the connection comes back it may still get 503s, and
          // a copy that timed out may yet have been stored, so the 2xx may already say `duplicate`.
          let redelivered = await deliver(receiver.url(), id, simEvent(key, 'succeeded'));
          for (let i = 0; i < 30 && redelivered.status === 503; i++) {
            // The provider's own redelivery backoff, which this loop plays: no condition to wait for but time.
            await new Promise((res) => setTimeout(res, 500));
            redelivered = await deliver(receiver.url(), id, simEvent(key, 'succeeded'));
          }
          expect(redelivered).toMatchObject({ status: 200, json: { deliveryId: id } });
          expect(['stored', 'duplicate']).toContain(redelivered.json.outcome);

          // Another receiver process (or this one restarted) gets the provider's next redelivery.
          const second = lazyClient(temporal);
          const other = await startTestReceiver(second.client, { taskQueuePrefix: prefix });
          try {
            const again = await deliver(other.url(), id, simEvent(key, 'succeeded'));
            // The intent may have ended by then (the first copy settled it): then the answer is `late`.
            expect(again.status).toBe(200);
            expect(['duplicate', 'late']).toContain(again.json.outcome);
          } finally {
            await other.close();
            await second.close();
          }
          return rq.result(key);
        });
        expect(outcome).toMatchObject({
          phase: 'succeeded',
          attempts: 1,
          resolvedByWebhook: { deliveryId: id },
          webhooks: { received: 1, late: 0 },
        });
        expect(outcome.attemptLog.filter((a) => a.kind === 'webhook')).toHaveLength(1);
      } finally {
        await receiver.close();
        await first.close();
      }

      // However many copies reached Temporal, the intent's history holds one delivery: duplicates were rejected by
      // its update validator, and rejected updates are not written.
      const conn = await Connection.connect({ address });
      try {
        const history = await new Client({ connection: conn }).workflow.getHandle(workflowIdOf(key)).fetchHistory();
        const events = history.events ?? [];
        expect(events.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toHaveLength(1);
        expect(events.filter((e) => e.workflowExecutionUpdateCompletedEventAttributes)).toHaveLength(1);
        expect(events.some((e) => e.workflowExecutionSignaledEventAttributes)).toBe(false);
      } finally {
        await conn.close();
      }
      expect(sim.metrics().totals.inspections).toBe(0);
    } finally {
      await sim.close();
    }
  });
});
