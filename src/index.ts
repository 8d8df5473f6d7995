/**
 * retryq — a durable retry queue for outbound API actions, on Temporal.
 *
 * This is what application code imports: {@link RetryqClient} to submit intents and follow them, the errors it
 * throws, and the intent types. It loads neither the Temporal worker (a native addon and webpack) nor the
 * synchronous proxy; those live in their own entry points:
 *
 * | import | for |
 * | --- | --- |
 * | `retryq` | application code: the client, errors, intent types |
 * | `retryq/worker` | worker processes: `createWorkers`, configuration (or simply `npx retryq worker`) |
 * | `retryq/workflows` | registering the intent workflow in your own worker's bundle |
 * | `retryq/proxy` | `retryingFetch` and the synchronous retrying proxy for idempotent reads |
 * | `retryq/policy` | the pure rules: `Retry-After` parsing, classification, scheduling |
 * | `retryq/testing` | test environments on locally resolved Temporal binaries |
 * | `retryq/webhooks` | the webhook receiver, standalone or inside your own HTTP server |
 *
 * @example
 * ```ts
 * import { IdempotencyConflictError, RetryqClient } from 'retryq';
 *
 * // Temporal from the environment (TEMPORAL_ADDRESS …); `npx retryq dev` serves localhost:7233.
 * const retryq = await RetryqClient.connect();
 * try {
 *   const { key } = await retryq.submit({
 *     idempotencyKey: 'order-1042-charge',
 *     credential: 'demo-acme',
 *     action: { method: 'POST', url: 'http://127.0.0.1:4010/v1/charges', body: { amount: 1200, currency: 'eur' } },
 *     inspection: { url: 'http://127.0.0.1:4010/v1/operations/{idempotencyKey}' },
 *     deadline: '2h',
 *   });
 *   const outcome = await retryq.result(key); // phase 'succeeded' | 'failed' | 'expired' | 'cancelled'
 *   console.log(outcome.phase, outcome.result);
 * } catch (err) {
 *   if (!(err instanceof IdempotencyConflictError)) throw err; // the key was used with another payload
 * } finally {
 *   await retryq.close();
 * }
 * ```
 *
 * @module
 */
export { RetryqClient, fingerprintOf, isFinal, workflowIdOf } from './client.js';
export type {
  IntentListEntry,
  RetryNowReport,
  RetryqClientOptions,
  RetryqConnectOptions,
  SubmitOptions,
  Submitted,
} from './client.js';
export { defaultIntentLimits } from './intent-limits.js';
export type { IntentLimits } from './intent-limits.js';
export {
  ConfigError,
  CredentialNotServedError,
  IdempotencyConflictError,
  IntentAlreadyEndedError,
  IntentNotFoundError,
  IntentValidationError,
  ProblemsError,
  RetryqError,
  TemporalRequestError,
  TemporalUnreachableError,
} from './errors.js';
export type { Problem } from './errors.js';
export { IntentFailureType } from './failures.js';
export { Phase, defaultPolicy, intentInputSchema } from './intent.js';
export type {
  Action,
  AttemptRecord,
  EvidenceSummary,
  HttpMethod,
  InspectionSpec,
  IntentInput,
  IntentOutcome,
  IntentPolicy,
  IntentSpec,
  IntentStatus,
  JsonValue,
  Reservation,
  StalledDispatch,
  WebhookCounts,
  WebhookDelivery,
  WebhookState,
} from './intent.js';
export type { CodeRule, CodeTable } from './policy/index.js';
export {
  credentialKey,
  lastErrorCodeKey,
  nextAttemptAtKey,
  retryAttemptKey,
  retryPhaseKey,
  retryqSearchAttributes,
  webhookKeyKey,
} from './search-attributes.js';
