/**
 * retryq — a durable retry queue for outbound API actions, on Temporal.
 *
 * What application code imports: the client to submit and follow intents, the workers' factory, configuration,
 * the pure policy core, and the synchronous `retryingFetch` for idempotent reads. Test helpers live in
 * `retryq/testing`.
 *
 * @example
 * ```ts
 * import { Client, Connection } from '@temporalio/client';
 * import { RetryqClient } from 'retryq';
 *
 * const retryq = new RetryqClient({ client: new Client({ connection: await Connection.connect() }) });
 * await retryq.submit({
 *   idempotencyKey: 'order-1042-charge',
 *   credential: 'acme-prod',
 *   action: { method: 'POST', url: 'https://api.example.com/v1/charges', body: { amount: 1200 } },
 *   inspection: { url: 'https://api.example.com/v1/operations/{idempotencyKey}' },
 * });
 * const outcome = await retryq.result('order-1042-charge');
 * ```
 */
export {
  IdempotencyConflict,
  IntentAlreadyEnded,
  IntentNotFound,
  IntentValidationError,
  RetryqClient,
  fingerprintOf,
  isFinal,
  workflowIdOf,
} from './client.js';
export type { IntentListEntry, RetryqClientOptions, Submitted } from './client.js';
export { ConfigError, CONFIG_VARIABLES, loadConfig, resolveSecrets, resolveWebhookSecrets } from './config.js';
export type { ConfigProblem, CredentialConfig, RetryqConfig, TemporalConfig } from './config.js';
export { FailureType, IntentFailureType, evidenceFromFailure, isProviderFailure } from './failures.js';
export { Phase, defaultPolicy, intentInputSchema } from './intent.js';
export type {
  Action,
  AttemptRecord,
  EvidenceSummary,
  InspectionSpec,
  IntentInput,
  IntentOutcome,
  IntentSpec,
  IntentStatus,
  Reservation,
  WebhookCounts,
  WebhookDelivery,
  WebhookState,
} from './intent.js';
export {
  backoffDelayMs,
  classify,
  classifyInspection,
  defaultCodeTable,
  mergeCodeTables,
  nextAttempt,
  parseHttpDate,
  parseRetryAfter,
} from './policy/index.js';
export type { CodeRule, CodeTable, Decision, Evidence, RetryAfter, Schedule } from './policy/index.js';
export { createRetryingFetch, retryingFetch, startProxy } from './proxy/index.js';
export type { RetryingFetch, RetryingFetchOptions, RetryingResponse } from './proxy/index.js';
export {
  credentialKey,
  lastErrorCodeKey,
  nextAttemptAtKey,
  retryAttemptKey,
  retryPhaseKey,
  retryqSearchAttributes,
  webhookKeyKey,
} from './search-attributes.js';
export { taskQueues } from './task-queues.js';
export { createWorkers, credentialStore, intentWorkflowBundle } from './worker.js';
export type { RetryqWorkers, WorkerSetup } from './worker.js';
export {
  cancelSignal,
  intentWorkflow,
  retryNowSignal,
  statusQuery,
  webhookOrphanWorkflow,
  webhookSignal,
} from './workflows/index.js';
