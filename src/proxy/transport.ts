/**
 * Why no response arrived: an undici / Node error → a transport failure the policy understands, and the
 * status the proxy answers with (408 for a timeout, 502 for anything else).
 *
 * @module
 */

import type { TransportFailureOf } from '../policy/index.js';

/** A transport failure of one attempt (the policy core's mapping of the HTTP client's error). */
export type AttemptFailure = TransportFailureOf;

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
