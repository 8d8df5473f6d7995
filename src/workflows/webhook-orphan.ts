/**
 * A webhook delivery for an idempotency key that has no intent: recorded as its own small workflow, so an operator
 * finds it (Temporal UI: `WebhookKey = "<key>"` or `WorkflowType = "webhookOrphanWorkflow"`) and nothing is started
 * or dispatched for it. Its workflow id, `webhook-orphan:<source>:<deliveryId>`, deduplicates redeliveries.
 *
 * @example
 * ```ts
 * import { webhookOrphanWorkflow } from './workflows/index.js';
 * await client.workflow.start(webhookOrphanWorkflow, { workflowId: 'webhook-orphan:acme:dlv_1', taskQueue: 'retryq.workflows', args: [record] });
 * ```
 */
import { setCurrentDetails } from '@temporalio/workflow';
import type { WebhookDelivery } from '../intent-status.js';

/** What the receiver records for a delivery whose key has no intent. */
export interface WebhookOrphanRecord {
  /** The idempotency key the delivery names. */
  idempotencyKey: string;
  delivery: WebhookDelivery;
}

/** Records the delivery (its input is the record) and completes; returns the record. */
export async function webhookOrphanWorkflow(record: WebhookOrphanRecord): Promise<WebhookOrphanRecord> {
  const d = record.delivery;
  setCurrentDetails(
    `Webhook ${d.deliveryId} from ${d.source} reported "${d.state}" for idempotency key ${record.idempotencyKey}, ` +
      `but no intent has that key: nothing was started or dispatched. Reconcile it with the provider if it matters.`,
  );
  return Promise.resolve(record);
}
