/**
 * Registers retryq's custom search attributes in a namespace through the operator service, idempotently.
 *
 * The dev server's `--search-attribute` flag is silently ignored once its SQLite file exists, so `retryq dev`
 * calls this at every start instead. Attributes that already exist with the right type are left alone; one that
 * exists with another type is an error that names it.
 *
 * @example
 * ```ts
 * import { Connection } from '@temporalio/client';
 * import { registerSearchAttributes } from './register-search-attributes.js';
 * const connection = await Connection.connect({ address: 'localhost:7233' });
 * const added = await registerSearchAttributes(connection, 'default'); // ['RetryPhase', …] the first time, [] after
 * ```
 */
import type { Connection } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { SearchAttributeType } from '@temporalio/common';
import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes.js';
import proto from '@temporalio/proto';
import type { temporal } from '@temporalio/proto';
import { SearchAttributeTypeMismatchError } from '../errors.js';
import { retryqSearchAttributes } from '../search-attributes.js';

// @temporalio/proto is CommonJS: take the enum from the default export.
const IndexedValueType = proto.temporal.api.enums.v1.IndexedValueType;

function indexedType(type: SearchAttributeType): temporal.api.enums.v1.IndexedValueType {
  const name = `INDEXED_VALUE_TYPE_${type}` as keyof typeof IndexedValueType;
  return IndexedValueType[name];
}

const GRPC_UNIMPLEMENTED = 12;
const GRPC_INVALID_ARGUMENT = 3;

/**
 * Ensures every key exists in `namespace`. Returns the names it added.
 *
 * @param keys what to register. @default retryq's own attributes
 * @param waitMs how long to wait for attributes it added to become usable ({@link SEARCH_ATTRIBUTES_USABLE_WITHIN_MS})
 */
export async function registerSearchAttributes(
  connection: Connection,
  namespace: string,
  keys: readonly SearchAttributeKey<SearchAttributeType>[] = retryqSearchAttributes,
  waitMs: number = SEARCH_ATTRIBUTES_USABLE_WITHIN_MS,
): Promise<string[]> {
  let existing: temporal.api.operatorservice.v1.IListSearchAttributesResponse;
  try {
    existing = await connection.operatorService.listSearchAttributes({ namespace });
  } catch (err) {
    // The time-skipping test server implements AddSearchAttributes but not ListSearchAttributes.
    if ((err as { code?: number }).code !== GRPC_UNIMPLEMENTED) throw err;
    const all = Object.fromEntries(keys.map((k) => [k.name, indexedType(k.type)]));
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: all });
    return keys.map((k) => k.name);
  }
  const current: Record<string, temporal.api.enums.v1.IndexedValueType> = {
    ...(existing.systemAttributes ?? {}),
    ...(existing.customAttributes ?? {}),
  };
  const missing: Record<string, temporal.api.enums.v1.IndexedValueType> = {};
  for (const key of keys) {
    const want = indexedType(key.type);
    const have = current[key.name];
    if (have === undefined) missing[key.name] = want;
    else if (have !== want)
      throw new SearchAttributeTypeMismatchError(
        `Search attribute ${key.name} exists in namespace ${namespace} as ${IndexedValueType[have]}, ` +
          `but retryq needs ${TypedSearchAttributes.toMetadataType(key.type)}. Remove or rename it.`,
      );
  }
  const names = Object.keys(missing);
  if (names.length === 0) return [];
  try {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
  } catch (err) {
    // Two processes starting at once may race; what matters is that they exist now.
    const again = await connection.operatorService.listSearchAttributes({ namespace });
    const nowHave = again.customAttributes ?? {};
    if (!names.every((n) => nowHave[n] === missing[n])) throw err;
  }
  await untilUsable(connection, namespace, names, waitMs);
  return names;
}

/**
 * How long {@link registerSearchAttributes} waits for attributes it added to become usable. A server that caches
 * search-attribute definitions (every production server; retryq's dev server, see `refreshSearchAttributesOnRead`
 * in src/temporal/server-process.ts) refuses them until its cache refreshes, within seconds.
 */
export const SEARCH_ATTRIBUTES_USABLE_WITHIN_MS = 30_000;

/**
 * Waits until a visibility query naming every attribute in `names` is accepted: the server's search-attribute cache
 * then knows them, and so do the starts and upserts that carry them (they read the same cache).
 */
async function untilUsable(connection: Connection, namespace: string, names: string[], waitMs: number): Promise<void> {
  const query = names.map((n) => `${n} IS NULL`).join(' AND ');
  const until = Date.now() + waitMs;
  for (;;) {
    try {
      await connection.workflowService.countWorkflowExecutions({ namespace, query });
      return;
    } catch (err) {
      const code = (err as { code?: number }).code;
      // Only "not known yet" is worth waiting for; the time-skipping server has no visibility queries at all.
      if (code === GRPC_UNIMPLEMENTED) return;
      if (code !== GRPC_INVALID_ARGUMENT || Date.now() >= until)
        throw new Error(
          `Temporal accepted the search attributes ${names.join(', ')} in namespace ${namespace} but still refuses ` +
            `them after ${Math.round(waitMs / 1000)} s (${(err as Error).message}). Check the server's ` +
            `search-attribute cache settings, or start retryq again in a minute.`,
          { cause: err },
        );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
