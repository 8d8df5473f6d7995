/**
 * Transport failures: an error thrown by an HTTP client (undici / Node) → why no response arrived and whether the
 * request may have reached the provider. The one place that knows those error codes; used by the activities and
 * by the synchronous proxy. Pure: it only reads the error's `code`, `name` and `cause` chain.
 *
 * @module
 */
import type { Sent, TransportFailure } from './evidence.js';

/** Why no response arrived, and what the error said. */
export interface TransportFailureOf {
  transport: TransportFailure;
  /** May the request have reached the provider? */
  sent: Sent;
  /** The error's code (`ECONNREFUSED`, `UND_ERR_HEADERS_TIMEOUT`, `ABORT_ERR`, …), when it had one. */
  code: string | undefined;
}

/** The first `code` along the error's `cause` chain; an `AbortError`/`TimeoutError` without one is `ABORT_ERR`. */
function errorCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && typeof e === 'object' && e !== null; depth++) {
    const { code, name, cause } = e as { code?: unknown; name?: unknown; cause?: unknown };
    if (typeof code === 'string') return code;
    if (name === 'AbortError' || name === 'TimeoutError') return 'ABORT_ERR';
    e = cause;
  }
  return undefined;
}

/**
 * Maps an error thrown by an HTTP request to a transport failure. Refused, unreachable, DNS, TLS and connect
 * timeouts mean the request was never sent; timeouts while waiting for the answer, resets, aborts and anything
 * unrecognised mean it may have been.
 *
 * @param err - what the request rejected with
 * @example
 * transportFailureOf(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
 * // { transport: 'refused', sent: 'no', code: 'ECONNREFUSED' }
 */
export function transportFailureOf(err: unknown): TransportFailureOf {
  const code = errorCode(err);
  switch (code) {
    case 'ECONNREFUSED':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return { transport: 'refused', sent: 'no', code };
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return { transport: 'dns', sent: 'no', code };
    case 'UND_ERR_CONNECT_TIMEOUT':
      return { transport: 'timeout', sent: 'no', code };
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'ETIMEDOUT':
    case 'ABORT_ERR':
    case 'UND_ERR_ABORTED':
      return { transport: 'timeout', sent: 'unknown', code };
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return { transport: 'reset', sent: 'unknown', code };
    default:
      if (code?.startsWith('ERR_TLS') || code?.startsWith('CERT_') || code === 'DEPTH_ZERO_SELF_SIGNED_CERT')
        return { transport: 'tls', sent: 'no', code };
      return { transport: 'other', sent: 'unknown', code };
  }
}
