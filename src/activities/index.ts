/**
 * retryq's activities — the only code that talks to providers — built by one factory so that the worker,
 * tests and benchmarks inject the HTTP pool, the credential store and the clock.
 *
 * Workflows import this module as types only (`proxyActivities<Activities>`).
 *
 * @example
 * ```ts
 * import { Agent } from 'undici';
 * import { createActivities } from './activities/index.js';
 * const activities = createActivities({
 *   http: new Agent({ keepAliveTimeout: 10_000 }),
 *   credentials: { authHeaders: (id) => ({ authorization: `Bearer ${secrets.get(id)}` }) },
 *   clock: Date.now,
 * });
 * ```
 */
import { makeDispatch } from './dispatch.js';
import { makeInspect } from './inspect.js';
import type { ActivityDeps } from './deps.js';

export type { ActivityDeps, CredentialStore } from './deps.js';
export type { DispatchInput, DispatchResult } from './dispatch.js';
export type { InspectInput, InspectResult } from './inspect.js';

/** Builds the activity implementations registered on retryq's workers. */
export function createActivities(deps: ActivityDeps) {
  return {
    dispatch: makeDispatch(deps),
    inspect: makeInspect(deps),
  };
}

/** The activity functions, for `proxyActivities<Activities>()` in workflows and for typed test fakes. */
export type Activities = ReturnType<typeof createActivities>;
