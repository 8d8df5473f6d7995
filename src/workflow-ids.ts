/**
 * The workflow id of an intent, derived from its idempotency key: `intent:<key>`. A leaf, so that every room that
 * names an intent's workflow (the client, load control's reports, the webhook receiver) derives it the same way.
 *
 * @example
 * ```ts
 * import { workflowIdOf } from './workflow-ids.js';
 * workflowIdOf('order-1042-charge'); // 'intent:order-1042-charge'
 * ```
 */

/** The workflow id of an intent. */
export function workflowIdOf(idempotencyKey: string): string {
  return `intent:${idempotencyKey}`;
}
