/**
 * Temporal's refusals in retryq's words: a request the server (or the gRPC layer) refused becomes a
 * {@link TemporalRequestError} that says what retryq was doing, carries the server's own message and the gRPC
 * status, and adds what to do where retryq knows. Nothing else is translated: retryq's own errors and the SDK's
 * typed outcomes (not found, already started, workflow failed) pass through unchanged.
 *
 * @example
 * ```ts
 * try {
 *   await client.workflow.start(…);
 * } catch (err) {
 *   throw translateTemporalError(err, 'start the intent workflow');
 * }
 * ```
 */
import { ServiceError, isGrpcServiceError } from '@temporalio/client';
import { NamespaceNotFoundError } from '@temporalio/common';
import { TemporalRequestError } from '../errors.js';

/** gRPC status names by number (the ones Temporal answers with). */
const GRPC_STATUS: Record<number, string> = {
  1: 'CANCELLED',
  2: 'UNKNOWN',
  3: 'INVALID_ARGUMENT',
  4: 'DEADLINE_EXCEEDED',
  5: 'NOT_FOUND',
  6: 'ALREADY_EXISTS',
  7: 'PERMISSION_DENIED',
  8: 'RESOURCE_EXHAUSTED',
  9: 'FAILED_PRECONDITION',
  10: 'ABORTED',
  11: 'OUT_OF_RANGE',
  12: 'UNIMPLEMENTED',
  13: 'INTERNAL',
  14: 'UNAVAILABLE',
  15: 'DATA_LOSS',
  16: 'UNAUTHENTICATED',
};

/** What to do about a refusal, where retryq knows. */
function adviceFor(status: string, message: string): string {
  if (/blob data size exceeds limit|payload.*(too large|exceeds)/i.test(message))
    return (
      "The intent is larger than Temporal's payload limit (2 MiB by default). retryq's own size limits " +
      '(docs/configuration.md, "Intent size limits") keep intents well inside it unless they were raised.'
    );
  if (/larger than max|message larger|received message/i.test(message))
    return 'The request is larger than the gRPC message size the server accepts (4 MiB by default): make the intent smaller.';
  switch (status) {
    case 'UNAUTHENTICATED':
    case 'PERMISSION_DENIED':
      return 'Check TEMPORAL_API_KEY / the TLS settings and that they grant access to TEMPORAL_NAMESPACE.';
    case 'NOT_FOUND':
      return /namespace/i.test(message) ? 'Check TEMPORAL_NAMESPACE: the server has no such namespace.' : '';
    case 'UNAVAILABLE':
      return 'The server could not be reached: check that it runs and TEMPORAL_ADDRESS points to it.';
    case 'DEADLINE_EXCEEDED':
      return 'The server did not answer in time: it may be overloaded; try again.';
    case 'RESOURCE_EXHAUSTED':
      return "The server is rate limiting this namespace's requests: try again shortly.";
    default:
      return '';
  }
}

/** The gRPC error inside `err`, if it is one (directly, or as the cause of the SDK's `ServiceError`). */
function grpcErrorOf(err: unknown): { code: number; details: string } | undefined {
  if (isGrpcServiceError(err)) return { code: err.code, details: err.details || err.message };
  if (err instanceof ServiceError && isGrpcServiceError(err.cause))
    return { code: err.cause.code, details: err.cause.details || err.cause.message };
  return undefined;
}

/**
 * `err` as a {@link TemporalRequestError} when Temporal refused a request (`doing`: what retryq was doing, e.g.
 * `start the intent workflow`); any other error unchanged.
 */
export function translateTemporalError(err: unknown, doing: string): unknown {
  if (err instanceof TemporalRequestError) return err;
  // The SDK turns the server's NOT_FOUND for a namespace into its own error (the server's words are in its message).
  if (err instanceof NamespaceNotFoundError)
    return new TemporalRequestError(
      doing,
      'NOT_FOUND',
      err.message.replace(/\.$/, ''),
      adviceFor('NOT_FOUND', 'namespace'),
      {
        cause: err,
      },
    );
  const grpc = grpcErrorOf(err);
  if (grpc) {
    const status = GRPC_STATUS[grpc.code] ?? `gRPC status ${grpc.code}`;
    return new TemporalRequestError(doing, status, grpc.details, adviceFor(status, grpc.details), { cause: err });
  }
  if (err instanceof ServiceError) return new TemporalRequestError(doing, 'UNKNOWN', err.message, '', { cause: err });
  return err;
}
