/** What the activities need from the worker process, injected by `createActivities` (tests pass their own). */
import type { Dispatcher } from 'undici';
import { dispatchFailure } from '../failures.js';
import type { Evidence, Purpose } from '../policy/index.js';

/** Turns a credential id into the request headers that authenticate it. Secrets stay inside. */
export interface CredentialStore {
  /** Throws when the worker has no secret for `credential`. */
  authHeaders(credential: string): Record<string, string>;
}

export interface ActivityDeps {
  /** The HTTP connection pool (an undici `Agent`, keep-alive). */
  http: Dispatcher;
  credentials: CredentialStore;
  /** ms since the epoch. @default Date.now */
  clock: () => number;
  /** @default 'retryq' */
  userAgent?: string;
}

/**
 * The credential's auth headers, or the typed failure of a call that was never sent because this worker has no
 * secret for it: a configuration problem an operator can fix, so the workflow backs off and tries again.
 */
export function credentialHeaders(
  deps: ActivityDeps,
  credential: string,
  method: string,
  purpose: Purpose,
  target: string,
): Record<string, string> {
  try {
    return deps.credentials.authHeaders(credential);
  } catch (err) {
    const evidence: Evidence = { method, purpose, transport: 'other', sent: 'no', code: 'credential_unavailable' };
    throw dispatchFailure(
      evidence,
      { kind: 'transient', reason: 'credential_unavailable', retryAfter: { kind: 'absent' } },
      target,
      (err as Error).message,
    );
  }
}
