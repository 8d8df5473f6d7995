/**
 * Webhook test helpers: a receiver on port 0 in front of a test's Temporal, signed deliveries (Standard Webhooks,
 * signed by the `standardwebhooks` package as a provider would), and real HTTP posts.
 */
import type { Client } from '@temporalio/client';
import { Webhook } from 'standardwebhooks';
import { request } from 'undici';
import { WebhookReceiver } from '../../src/webhooks/receiver.js';
import type { WebhookReceiverOptions } from '../../src/webhooks/receiver.js';
import { startWebhookServer } from '../../src/webhooks/server.js';
import type { WebhookServer } from '../../src/webhooks/server.js';
import { webhookSourceSchema } from '../../src/webhook-config.js';
import type { WebhookSource } from '../../src/webhook-config.js';

/** The test source's signing secret. */
export const SOURCE_SECRET = `whsec_${Buffer.from('retryq-test-webhook-secret-0001').toString('base64')}`;
/** Another valid secret: what a provider configured for someone else signs with. */
export const OTHER_SECRET = `whsec_${Buffer.from('someone-elses-webhook-secret-02').toString('base64')}`;

/** A source reading the simulator's event format (`type`, `status`, `idempotencyKey`, `result`, `error`). */
export function simFormatSource(name = 'acme'): WebhookSource {
  return webhookSourceSchema.parse({
    name,
    verify: { scheme: 'standard-webhooks', secretEnv: 'ACME_WEBHOOK_SECRET' },
    mapping: {
      type: 'type',
      events: {
        'operation.succeeded': 'from-state',
        'operation.failed': 'from-state',
        'operation.pending': 'from-state',
      },
      key: 'idempotencyKey',
      state: 'status',
      result: 'result',
      error: 'error',
    },
  });
}

export interface TestReceiver {
  receiver: WebhookReceiver;
  server: WebhookServer;
  /** `${server.url}/webhooks/<source>` */
  url(source?: string): string;
  close(): Promise<void>;
}

/** A receiver with the given sources (default: {@link simFormatSource} signed with {@link SOURCE_SECRET}). */
export async function startTestReceiver(
  client: Client,
  options: Partial<WebhookReceiverOptions> = {},
): Promise<TestReceiver> {
  const sources = options.sources ?? [simFormatSource()];
  const receiver = new WebhookReceiver({
    client,
    sources,
    secrets: options.secrets ?? new Map(sources.map((s) => [s.name, [SOURCE_SECRET]])),
    ...options,
  });
  const server = await startWebhookServer({ receiver, port: 0 });
  return {
    receiver,
    server,
    url: (source = sources[0]!.name) => `${server.url}/webhooks/${source}`,
    close: () => server.close(),
  };
}

/** A simulator-format event. */
export function simEvent(
  key: string | null,
  state: 'succeeded' | 'failed' | 'pending',
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    type: `operation.${state}`,
    status: state,
    idempotencyKey: key,
    operationId: 'op_test',
    createdAt: new Date().toISOString(),
    ...(state === 'succeeded' ? { result: { charged: true, key } } : {}),
    ...extra,
  };
}

/** Standard Webhooks headers for `body` signed with `secret` at `at` (default now). */
export function signed(secret: string, id: string, body: string, at = new Date()): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, at, body),
  };
}

export interface Posted {
  status: number;
  json: Record<string, unknown>;
}

/** POSTs raw bytes with the given headers (real HTTP). */
export async function post(url: string, headers: Record<string, string>, body: string | Buffer): Promise<Posted> {
  const res = await request(url, { method: 'POST', headers, body });
  const text = await res.body.text();
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = { text };
  }
  return { status: res.statusCode, json };
}

/** Posts one simulator-format event signed with the test secret under delivery id `id`. */
export function deliver(
  url: string,
  id: string,
  event: Record<string, unknown>,
  secret = SOURCE_SECRET,
): Promise<Posted> {
  const body = JSON.stringify(event);
  return post(url, signed(secret, id, body), body);
}
