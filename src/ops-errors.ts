// Temporary home until src/errors.ts (#15) is on main.
export class TemporalRequestError extends Error {
  readonly code = 'temporal_request_failed';
  override readonly name = 'TemporalRequestError';
  constructor(
    /** What retryq asked Temporal to do (`start the intent workflow`). */
    readonly doing: string,
    /** The gRPC status name (`INVALID_ARGUMENT`, `RESOURCE_EXHAUSTED`, …). */
    readonly status: string,
    /** The server's own message. */
    readonly serverMessage: string,
    advice: string,
    options?: { cause: unknown },
  ) {
    super(`Temporal refused to ${doing} (${status}): ${serverMessage}.${advice ? ` ${advice}` : ''}`, options);
  }
}

export class CredentialNotServedError extends Error {
  readonly code = 'credential_not_served';
  override readonly name = 'CredentialNotServedError';
  constructor(
    readonly credential: string,
    readonly taskQueue: string,
    readonly served: readonly string[],
  ) {
    super(
      `No live worker serves credential "${credential}" (nobody polls task queue ${taskQueue}), so the intent ` +
        `could not be sent; nothing was started. ` +
        (served.length
          ? `Credentials served now: ${served.join(', ')}. `
          : 'No worker serves any credential retryq knows of right now. ') +
        `Check the credential id, or start a worker with it in RETRYQ_CREDENTIALS; to queue intents for workers ` +
        `deployed later, submit with { requireServedCredential: false } (CLI: --no-worker-check).`,
    );
  }
}
