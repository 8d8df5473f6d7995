/**
 * Evidence as people read it: the one way retryq writes what a provider call told it, in failure messages, final
 * reasons, the UI's details, the CLI and the demo. Pure and workflow-safe.
 *
 * @example
 * ```ts
 * import { describeEvidence, evidenceText } from './evidence-text.js';
 * evidenceText({ status: 429, code: 'rate_limit_exceeded' }); // 'HTTP 429 rate_limit_exceeded'
 * describeEvidence({ method: 'POST', transport: 'refused', sent: 'no' }); // 'connection refused (not sent)'
 * ```
 *
 * @module
 */
import type { Evidence } from './evidence.js';
import { headerValue } from './evidence.js';
import { parseRetryAfter } from './retry-after.js';

/** What a call told us, from {@link Evidence} or from its summary in an intent's status. */
export interface EvidenceFacts {
  status?: number | undefined;
  code?: string | undefined;
  transport?: string | undefined;
}

/** `HTTP 429 rate_limit_exceeded`, `connection refused`, `transport timeout`. */
export function evidenceText(e: EvidenceFacts): string {
  const what =
    e.status !== undefined
      ? `HTTP ${e.status}`
      : e.transport === 'refused'
        ? 'connection refused'
        : `transport ${e.transport ?? 'failure'}`;
  return e.code ? `${what} ${e.code}` : what;
}

/**
 * {@link evidenceText} plus the server's `Retry-After` and, when no response arrived, whether the request may have
 * been sent: `HTTP 429 rate_limit_exceeded (Retry-After: 120)`, `transport timeout (may have been sent)`.
 */
export function describeEvidence(e: Evidence): string {
  const parts = [evidenceText(e)];
  const retryAfter = headerValue(e.headers, 'retry-after');
  if (retryAfter !== undefined) parts.push(`(Retry-After: ${retryAfter.slice(0, 40)})`);
  if (e.status === undefined) parts.push(e.sent === 'no' ? '(not sent)' : '(may have been sent)');
  return parts.join(' ');
}

/** A raw `Retry-After` for people: delay-seconds with their unit (`120 s`), anything else as the server sent it. */
export function retryAfterText(raw: string): string {
  // The anchor only shifts `notBefore`; whether the value is delay-seconds does not depend on it.
  return parseRetryAfter(raw, { now: new Date(0) }).kind === 'delay' ? `${raw.trim()} s` : raw;
}
