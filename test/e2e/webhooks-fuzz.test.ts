/**
 * Fuzzing the receiver over real HTTP with a real Temporal behind it (fast-check): whatever the headers and body —
 * forged, stale, unsigned, correctly signed garbage, random JSON, events with wrong types at the mapped paths — the
 * answer is never a 5xx while Temporal is up, the receiver keeps answering, and no delivery ever starts an intent.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { createDevServerEnvironment } from '../../src/testing.js';
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

let env: TestWorkflowEnvironment;
let r: TestReceiver;
const prefix = `fuzz-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  env = await createDevServerEnvironment();
  r = await startTestReceiver(env.client, { taskQueuePrefix: prefix });
});
afterAll(async () => {
  await r?.close();
  await env?.teardown();
});

const printable = (max: number) => fc.stringMatching(new RegExp(`^[\\x20-\\x7e]{0,${max}}$`));
const anyJson = fc.jsonValue({ maxDepth: 3 });
const key = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.:~@+=-]{0,40}$/),
  printable(250),
  fc.constant(null),
  anyJson,
);
const event = fc.record(
  {
    type: fc.oneof(
      fc.constantFrom('operation.succeeded', 'operation.failed', 'operation.pending', 'invoice.created'),
      anyJson,
    ),
    status: fc.oneof(fc.constantFrom('succeeded', 'failed', 'pending', 'completed', 'weird'), anyJson),
    idempotencyKey: key,
    result: anyJson,
    error: fc.oneof(anyJson, fc.record({ status: fc.integer(), code: anyJson, message: anyJson })),
  },
  { requiredKeys: [] },
);
const body = fc.oneof(
  fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)),
  anyJson.map((j) => Buffer.from(JSON.stringify(j) ?? 'null')),
  event.map((e) => Buffer.from(JSON.stringify(e))),
  printable(300).map((s) => Buffer.from(s)),
);
const signing = fc.constantFrom('valid', 'wrong-secret', 'stale', 'future', 'garbage', 'missing', 'no-id');
const deliveryIdArb = fc.oneof(
  fc.uuid().map((u) => `msg_${u}`),
  printable(300),
  fc.stringMatching(/^[\x21-\x7e]{1,20}$/),
);
const extraHeaders = fc.dictionary(fc.stringMatching(/^x-[a-z0-9-]{1,20}$/), printable(100), { maxKeys: 4 });

function headersFor(mode: string, id: string, payload: Buffer, garbage: string): Record<string, string> {
  const now = Date.now();
  const text = payload.toString('utf8');
  switch (mode) {
    case 'valid':
      return signed(SOURCE_SECRET, id, text);
    case 'wrong-secret':
      return signed(OTHER_SECRET, id, text);
    case 'stale':
      return signed(SOURCE_SECRET, id, text, new Date(now - 3_600_000));
    case 'future':
      return signed(SOURCE_SECRET, id, text, new Date(now + 3_600_000));
    case 'garbage':
      return { 'webhook-id': id, 'webhook-timestamp': garbage, 'webhook-signature': garbage };
    case 'no-id': {
      const h = signed(SOURCE_SECRET, id, text);
      delete h['webhook-id'];
      return h;
    }
    default:
      return {};
  }
}

describe('the receiver under arbitrary headers and bodies', () => {
  it('never answers 5xx while Temporal is up, never crashes, and never starts an intent', async () => {
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        signing,
        deliveryIdArb,
        body,
        printable(60),
        extraHeaders,
        async (mode, id, payload, garbage, extra) => {
          // Signed over the UTF-8 text, as a sender signs what it sends; random bytes are sent as their text too.
          const bytes = Buffer.from(payload.toString('utf8'));
          const answer = await post(r.url(), { ...extra, ...headersFor(mode, id, bytes, garbage) }, bytes);
          seen.set(answer.status, (seen.get(answer.status) ?? 0) + 1);
          expect(answer.status).toBeLessThan(500);
          expect([200, 400, 401]).toContain(answer.status);
          if (mode !== 'valid') expect(answer.status).toBe(401);
        },
      ),
      {
        numRuns: 250,
        // One case of each answer always runs first: random inputs reach a stored delivery (200) only now and then
        // (a valid signature, an id the scheme accepts and a JSON body), and the check below needs all three.
        examples: [
          ['valid', `msg_${randomUUID()}`, Buffer.from(JSON.stringify({ type: 'invoice.created' })), '', {}],
          ['valid', `msg_${randomUUID()}`, Buffer.from('not json'), '', {}],
          ['missing', `msg_${randomUUID()}`, Buffer.from('{}'), '', {}],
        ],
      },
    );
    // Every kind of answer was reached, so the property ran through verification, parsing, mapping and storing.
    expect([...seen.keys()].sort()).toEqual([200, 400, 401]);
    // Still alive and still storing.
    expect((await fetch(`${r.server.url}/healthz`)).status).toBe(200);
    const k = `after-fuzz-${randomUUID()}`;
    expect((await deliver(r.url(), `msg_${randomUUID()}`, simEvent(k, 'succeeded'))).json).toMatchObject({
      outcome: 'orphan',
    });
    const intents: string[] = [];
    for await (const wf of env.client.workflow.list({ query: 'WorkflowType = "intentWorkflow"' }))
      intents.push(wf.workflowId);
    expect(intents).toEqual([]);
    expect(r.receiver.metrics.counts().unavailable).toBe(0);
  });
});
