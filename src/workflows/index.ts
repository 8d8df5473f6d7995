/**
 * The workflow bundle's entry: every workflow retryq registers, re-exported by name, with its messages.
 *
 * @example
 * ```ts
 * import { Worker } from '@temporalio/worker';
 * const worker = await Worker.create({ workflowsPath: require.resolve('./workflows/index.js'), taskQueue: 'retryq.workflows' });
 * ```
 */
export {
  intentWorkflow,
  cancelSignal,
  retryNowSignal,
  statusQuery,
  webhookSignal,
  SEEN_DELIVERIES_LIMIT,
} from './intent.js';
export type { IntentWorkflowOptions, CarriedState } from './intent.js';
export { webhookOrphanWorkflow } from './webhook-orphan.js';
export type { WebhookOrphanRecord } from './webhook-orphan.js';
