/**
 * Where a validation problem is: the one way retryq writes a path into input (`rules[0].steps`,
 * `action.headers.Authorization`) and reads the value found there. Used by every zod boundary (intents, config,
 * proxy options, simulator scenarios). Workflow-safe.
 *
 * @example
 * ```ts
 * import { formatIssuePath, valueAtPath } from './issue-path.js';
 * formatIssuePath(['rules', 0, 'steps']); // 'rules[0].steps'
 * valueAtPath({ rules: [{ steps: 3 }] }, ['rules', 0, 'steps']); // 3
 * ```
 */

/** `['rules', 0, 'steps']` → `rules[0].steps`; `[]` → `''` (the caller names the root). */
export function formatIssuePath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out;
}

/** The value at `path` inside `input`, or `undefined` when the path leaves the objects. */
export function valueAtPath(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}
