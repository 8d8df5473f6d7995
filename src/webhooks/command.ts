/**
 * `retryq webhooks`: the webhook receiver as its own process, in front of the configured Temporal. It starts even
 * while Temporal is down (deliveries are then answered 503 and the providers redeliver), and drains on SIGINT/SIGTERM.
 *
 * @example
 * ```sh
 * RETRYQ_WEBHOOK_SOURCES='[{"name":"acme","verify":{"scheme":"standard-webhooks","secretEnv":"ACME_WEBHOOK_SECRET"},"mapping":{"key":"data.idempotencyKey","state":"data.status"}}]' \
 *   ACME_WEBHOOK_SECRET=whsec_… retryq webhooks --port 8788
 * ```
 */
import { parseArgs } from 'node:util';
import type { RetryqConfig } from '../config.js';
import { resolveWebhookSecrets } from '../config.js';
import { lazyClient } from '../temporal/connect.js';
import { assertPortFree } from '../temporal/server-process.js';
import { WebhookReceiver } from './receiver.js';
import { startWebhookServer } from './server.js';
import { ConfigError, UsageError } from '../errors.js';

export const WEBHOOKS_HELP = `retryq webhooks — receive provider webhooks and store them in Temporal as evidence for intents
  POST /webhooks/<source> for each source in RETRYQ_WEBHOOK_SOURCES (see docs/webhooks.md),
  GET /metrics (Prometheus), GET /healthz.
  --port N      port (default RETRYQ_WEBHOOK_PORT, 8788)
  --ip ADDR     address to bind (default RETRYQ_WEBHOOK_IP, 127.0.0.1)`;

export interface WebhooksCommandIo {
  out: (line: string) => void;
  err: (line: string) => void;
  /** Resolves on SIGINT/SIGTERM. */
  untilSignal: () => Promise<unknown>;
}

/** Runs the receiver until a signal; returns the exit code. */
export async function webhooksCommand(argv: string[], config: RetryqConfig, io: WebhooksCommandIo): Promise<number> {
  let values: { port?: string | undefined; ip?: string | undefined; help?: boolean | undefined };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { port: { type: 'string' }, ip: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) {
    io.out(WEBHOOKS_HELP);
    return 0;
  }
  let port = config.webhooks.port;
  if (values.port !== undefined) {
    port = Number(values.port);
    if (!/^\d+$/.test(values.port) || port > 65535)
      throw new UsageError({ path: '--port', message: 'must be a TCP port from 0 to 65535', received: values.port });
  }
  const ip = values.ip ?? config.webhooks.ip;
  const { sources } = config.webhooks;
  if (sources.length === 0)
    throw new ConfigError([
      {
        path: 'RETRYQ_WEBHOOK_SOURCES',
        message: 'must name at least one webhook source for `retryq webhooks` (docs/webhooks.md has an example)',
      },
    ]);
  const secrets = resolveWebhookSecrets(sources);
  if (port !== 0) await assertPortFree(ip, port, 'webhook receiver');
  const { client, close } = lazyClient(config.temporal);
  let server;
  try {
    const receiver = new WebhookReceiver({
      client,
      sources,
      secrets,
      taskQueuePrefix: config.taskQueuePrefix,
      maxBodyBytes: config.webhooks.maxBodyBytes,
      temporalTimeoutMs: config.webhooks.temporalTimeoutMs,
      onError: (message, err) =>
        io.err(`retryq webhooks: ${message}: ${err instanceof Error ? err.message : String(err)}`),
      onIgnored: (line) => io.err(`retryq webhooks: ${line}`),
    });
    server = await startWebhookServer({ receiver, host: ip, port });
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
  io.out(server.url);
  io.err(
    `retryq webhooks listening on ${server.url}: ${sources.map((s) => `POST /webhooks/${s.name}`).join(', ')}; ` +
      `metrics at /metrics. Temporal: ${config.temporal.address} (namespace ${config.temporal.namespace}). Ctrl-C to stop.`,
  );
  await io.untilSignal();
  await server.close();
  await close().catch(() => undefined);
  return 0;
}
