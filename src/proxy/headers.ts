/**
 * Which headers cross the proxy. Hop-by-hop fields (RFC 9110 §7.6.1) describe one connection and are
 * dropped in both directions, together with every field the `Connection` header names; the proxy's own
 * request headers (`Retryq-*`) are consumed, not forwarded; everything else (including `Authorization`
 * and `Idempotency-Key`) passes unchanged, in order, with duplicates kept.
 *
 * @module
 */

import type { IncomingHttpHeaders } from 'node:http';
import type { RetryReport } from './forward.js';

/**
 * Fields that never cross the proxy: the hop-by-hop fields of RFC 9110 §7.6.1 and the de-facto
 * `Proxy-Connection`, the proxy credentials (meant for a proxy, not the upstream), `Host` (set from the
 * upstream's URL) and `Expect` (the proxy answers `100-continue` itself).
 */
export const droppedHeaders: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
  'host',
  'expect',
]);

/** Request headers that steer the proxy; consumed, never forwarded. */
export const proxyHeaderPrefix = 'retryq-';

/** Response headers that tell the caller what happened. */
export const proxyResponseHeaders = {
  attempts: 'Retryq-Attempts',
  waitMs: 'Retryq-Wait-Ms',
  gated: 'Retryq-Gated',
  outcome: 'Retryq-Outcome',
  maxRetriesClamped: 'Retryq-Max-Retries-Clamped',
} as const;

/**
 * The `Retryq-*` response headers of a report, as a flat `[name, value, …]` list: the one place that writes them,
 * for the proxy and `retryingFetch` alike.
 *
 * @param report - what the retry loop did
 * @param clampedTo - the retries used when the caller asked for more than the ceiling
 */
export function reportHeaders(report: RetryReport, clampedTo?: number): string[] {
  const h = proxyResponseHeaders;
  const out = [h.attempts, String(report.attempts), h.waitMs, String(Math.round(report.waitedMs))];
  out.push(h.gated, report.gated ? 'true' : 'false', h.outcome, report.outcome);
  if (clampedTo !== undefined) out.push(h.maxRetriesClamped, String(clampedTo));
  return out;
}

/** The field names listed in `Connection` header values, lower-cased. */
function connectionTokens(values: readonly string[]): Set<string> | undefined {
  let tokens: Set<string> | undefined;
  for (const value of values) {
    // The common values name no other field.
    if (value === 'keep-alive' || value === 'close' || value === 'Keep-Alive' || value === 'Close') continue;
    for (const token of value.split(',')) {
      const t = token.trim().toLowerCase();
      if (t.length > 0) (tokens ??= new Set()).add(t);
    }
  }
  return tokens;
}

/**
 * The request headers to send upstream, from the caller's raw headers.
 *
 * @param rawHeaders - `IncomingMessage.rawHeaders`: `[name, value, name, value, …]` as received
 * @returns a flat `[name, value, …]` list without hop-by-hop, connection-named and `Retryq-*` fields
 * @example
 * forwardedRequestHeaders(['Host', 'x', 'Connection', 'close', 'Idempotency-Key', 'k1', 'Retryq-Max-Retries', '2']);
 * // ['Idempotency-Key', 'k1']
 */
export function forwardedRequestHeaders(rawHeaders: readonly string[]): string[] {
  let named: Set<string> | undefined;
  const connection: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === 'connection') connection.push(rawHeaders[i + 1] as string);
  }
  if (connection.length > 0) named = connectionTokens(connection);
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    const lower = name.toLowerCase();
    if (droppedHeaders.has(lower) || lower.startsWith(proxyHeaderPrefix) || named?.has(lower)) continue;
    out.push(name, rawHeaders[i + 1] as string);
  }
  return out;
}

/**
 * The response headers to send the caller, from the upstream's response headers.
 *
 * @param headers - the upstream response headers (lower-case names; repeated fields as arrays)
 * @returns a flat `[name, value, …]` list without hop-by-hop and connection-named fields
 * @example
 * forwardedResponseHeaders({ 'content-type': 'application/json', connection: 'keep-alive', 'keep-alive': 'timeout=5' });
 * // ['content-type', 'application/json']
 */
export function forwardedResponseHeaders(headers: IncomingHttpHeaders): string[] {
  const connection = headers['connection'];
  const named =
    connection === undefined ? undefined : connectionTokens(Array.isArray(connection) ? connection : [connection]);
  const out: string[] = [];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || droppedHeaders.has(name) || named?.has(name)) continue;
    if (Array.isArray(value)) for (const v of value) out.push(name, v);
    else out.push(name, value);
  }
  return out;
}

/**
 * Every value of a header in a flat `[name, value, …]` list, by case-insensitive name.
 *
 * @param rawHeaders - a flat list such as `IncomingMessage.rawHeaders`
 * @param name - a lower-case header name
 * @returns the values of every occurrence, in order (empty when absent)
 */
export function rawHeaderValues(rawHeaders: readonly string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).toLowerCase() === name) values.push(rawHeaders[i + 1] as string);
  }
  return values;
}

/**
 * Whether a reason phrase may be passed on (RFC 9112 §4: HTAB, SP, visible and obs-text characters),
 * and is worth it (not empty, at most 512 characters).
 *
 * @param text - the upstream's reason phrase
 */
export function isValidReason(text: string): boolean {
  if (text.length === 0 || text.length > 512) return false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f || c > 0xff) return false;
  }
  return true;
}
