/**
 * Why no response arrived: an undici / Node error → a transport failure the policy understands, and the
 * status the proxy answers with (408 for a timeout, 502 for anything else).
 *
 * @module
 */

import type { Sent, TransportFailure } from '../policy/index.js';

/** A transport failure of one attempt. */
export interface AttemptFailure {
  transport: TransportFailure;
  /** May the request have reached the upstream? */
  sent: Sent;
  /** The error's code (`ECONNREFUSED`, `UND_ERR_HEADERS_TIMEOUT`, …), for the error body. */
  code: string | undefined;
}

/**
 * Maps an error thrown by an undici request to a transport failure.
 *
 * @param err - what `Dispatcher.request` rejected with
 * @example
 * transportFailureOf(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
 * // { transport: 'refused', sent: 'no', code: 'ECONNREFUSED' }
 */
export function transportFailureOf(err: unknown): AttemptFailure {
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
      return { transport: 'timeout', sent: 'unknown', code };
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return { transport: 'reset', sent: 'unknown', code };
    default:
      if (code?.startsWith('ERR_TLS') || code?.startsWith('CERT_') || code === 'DEPTH_ZERO_SELF_SIGNED_CERT') {
        return { transport: 'tls', sent: 'no', code };
      }
      return { transport: 'other', sent: 'unknown', code };
  }
}

function errorCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && typeof e === 'object' && e !== null; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The metrics label of a transport failure: `timeout`, `unreachable` (refused, dns, tls), `reset` or `other`. */
export function transportLabel(
  failure: Pick<AttemptFailure, 'transport'>,
): 'timeout' | 'unreachable' | 'reset' | 'other' {
  switch (failure.transport) {
    case 'timeout':
      return 'timeout';
    case 'refused':
    case 'dns':
    case 'tls':
      return 'unreachable';
    case 'reset':
      return 'reset';
    case 'other':
      return 'other';
  }
}
