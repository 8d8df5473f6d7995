/** What the activities need from the worker process, injected by `createActivities` (tests pass their own). */
import type { Dispatcher } from 'undici';

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
