/**
 * `retryq/workflows`: the workflow bundle's entry. Every workflow retryq registers, re-exported by name, with its
 * messages (`cancelSignal`, `retryNowSignal`, `statusQuery`).
 *
 * `retryq/worker` bundles this for you. Import it yourself only to serve the intent workflow from your own
 * worker, next to your workflows, on the `retryq.workflows` task queue (the dispatch and inspection activities
 * still run on retryq's per-credential workers: `createWorkers({ roles: { workflows: false } })`).
 *
 * @example
 * ```ts
 * // workflows.ts — your worker's `workflowsPath`
 * export { intentWorkflow } from 'retryq/workflows';
 * // export { myWorkflow } from './my-workflow.js';
 * ```
 *
 * retryq's own workers preload this entry (`preloadModules`): every module it imports is evaluated once per workflow
 * thread and shared by all the workflows the thread runs, with its exports frozen. Module-level values here and in
 * everything imported must therefore be constants; the state of a run lives in objects the run creates.
 *
 * @module
 */
export {
  DEFAULT_STALL_AFTER_MS,
  intentWorkflow,
  cancelSignal,
  retryNowSignal,
  retryNowUpdate,
  statusQuery,
  webhookUpdate,
  HEARTBEAT_TIMEOUT_MS,
} from './intent.js';
export { SEEN_DELIVERIES_LIMIT } from '../policy/webhook-deliveries.js';
export type { IntentWorkflowOptions, CarriedState, RetryNowAnswer } from './intent.js';
export {
  credentialWorkflow,
  acquireSlotsUpdate,
  rateLimitedUpdate,
  blockUpdate,
  resumeUpdate,
  credentialStateQuery,
  credentialWorkflowId,
} from './credential.js';
export type { CredentialState, CredentialWorkflowInput } from './credential.js';
export { webhookOrphanWorkflow } from './webhook-orphan.js';
export type { WebhookOrphanRecord } from './webhook-orphan.js';
