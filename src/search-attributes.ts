/**
 * The custom search attributes retryq writes on every intent workflow, so intents can be found and filtered in
 * the Temporal UI and through `client.list()` (e.g. `RetryPhase="waiting" AND Credential="acme-prod"`).
 *
 * Safe to import from workflow code (it only depends on `@temporalio/common`).
 *
 * @example
 * ```ts
 * import { retryPhaseKey } from './search-attributes.js';
 * console.log(retryPhaseKey.name); // 'RetryPhase'
 * ```
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes.js';

/** Where the intent is: `scheduled`, `dispatching`, `waiting`, `inspecting`, `succeeded`, … (Keyword). */
export const retryPhaseKey = defineSearchAttributeKey('RetryPhase', SearchAttributeType.KEYWORD);
/** Attempts made so far (Int). */
export const retryAttemptKey = defineSearchAttributeKey('RetryAttempt', SearchAttributeType.INT);
/** When the next attempt or inspection is due (Datetime). */
export const nextAttemptAtKey = defineSearchAttributeKey('NextAttemptAt', SearchAttributeType.DATETIME);
/** The provider's last structured error code, or the HTTP status / transport failure when it gave none (Keyword). */
export const lastErrorCodeKey = defineSearchAttributeKey('LastErrorCode', SearchAttributeType.KEYWORD);
/** The credential id (never the secret) the intent dispatches with (Keyword). */
export const credentialKey = defineSearchAttributeKey('Credential', SearchAttributeType.KEYWORD);

/**
 * On a recorded webhook delivery whose key has no intent (`webhookOrphanWorkflow`): the idempotency key it names
 * (Keyword), so `WebhookKey = "order-1042"` finds it.
 */
export const webhookKeyKey = defineSearchAttributeKey('WebhookKey', SearchAttributeType.KEYWORD);

/** Every custom search attribute retryq needs registered in its namespace. */
export const retryqSearchAttributes: readonly SearchAttributeKey<SearchAttributeType>[] = [
  retryPhaseKey,
  retryAttemptKey,
  nextAttemptAtKey,
  lastErrorCodeKey,
  credentialKey,
  webhookKeyKey,
];
