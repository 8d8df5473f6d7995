/**
 * `retryq/webhooks`: the webhook receiver, to run on its own (`startWebhookServer`, what `retryq webhooks` does) or
 * inside an application's own HTTP server (`WebhookReceiver.handle` / `.receive`). See docs/webhooks.md.
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * import { WebhookReceiver } from 'retryq/webhooks';
 * const receiver = new WebhookReceiver({ client, sources: config.webhooks.sources, secrets });
 * createServer((req, res) => void receiver.handle(req, res)).listen(3000);
 * ```
 */
export { DEFAULT_MAX_BODY_BYTES, WebhookErrorCode, WebhookReceiver, orphanWorkflowId } from './receiver.js';
export type { WebhookAnswer, WebhookReceiverOptions } from './receiver.js';
export { startWebhookServer } from './server.js';
export type { WebhookServer, WebhookServerOptions } from './server.js';
export { DeliveryOutcome, WebhookMetrics } from './metrics.js';
export { mapDelivery, MAX_RESULT_BYTES } from './mapping.js';
export type { MappedDelivery } from './mapping.js';
export {
  formatJsonPath,
  parseJsonPath,
  readJsonPath,
  webhookSourceSchema,
  webhookSourcesSchema,
} from '../webhook-config.js';
export type { JsonPath, VerifySettings, WebhookSource, WebhookSourceInput } from '../webhook-config.js';
export { splitSecrets, standardWebhookHeaders, verifierFor } from './verify.js';
export { loadConfig, resolveWebhookSecrets } from '../config.js';
export type { WebhookConfig } from '../webhook-config.js';
export type { SignedRequest, Verification, Verifier } from './verify.js';
