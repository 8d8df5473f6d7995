/**
 * Evidence: what one provider call told us, as plain JSON-serialisable data.
 *
 * Evidence travels in Temporal failure details and workflow history, so it holds no `Date`, no
 * `Headers`, no functions: strings, numbers and records only. The activity that made the call builds
 * it; the policy ({@link classify}) turns it into a decision wherever it is needed.
 *
 * @module
 */

/**
 * Why no HTTP response arrived.
 *
 * - `refused`: the connection was refused.
 * - `dns`: the host name did not resolve.
 * - `tls`: the TLS handshake failed.
 * - `reset`: the connection was reset or closed mid-exchange.
 * - `timeout`: no (complete) response within the time limit.
 * - `other`: anything else (aborted, protocol error, …).
 *
 * The kind describes the failure; whether the request may have reached the provider is said
 * separately by {@link Sent}, which the policy trusts.
 */
export type TransportFailure = 'refused' | 'dns' | 'reset' | 'timeout' | 'tls' | 'other';

/**
 * May the request have reached the provider?
 *
 * - `no`: certainly not (the connection was never established, or nothing of the request was written).
 * - `yes`: it was written in full.
 * - `unknown`: some or all of it may have been written.
 *
 * Any other value is treated as `unknown`.
 */
export type Sent = 'no' | 'yes' | 'unknown';

/**
 * What the call was for.
 *
 * - `dispatch`: an attempt of the intent's action (the default).
 * - `inspect`: a read-only status lookup of the saved operation. Always a read, whatever its HTTP
 *   method, so it never yields `unknown_outcome`; see {@link classifyInspection} for what its 404 means.
 */
export type Purpose = 'dispatch' | 'inspect';

/**
 * What one provider call told us. Plain data (see the module notes).
 *
 * Exactly one of `status` (an HTTP response arrived) and `transport` (none did) is normally present.
 * If both are, `status` wins; if neither is, the call counts as a transport failure of kind `other`.
 */
export interface Evidence {
  /** The HTTP method, e.g. `POST`. Compared case-insensitively. */
  method: string;
  /**
   * What the call was for.
   * @default 'dispatch'
   */
  purpose?: Purpose | undefined;
  /** The HTTP status code of the final response; absent on a transport failure. */
  status?: number | undefined;
  /** Why no HTTP response arrived; absent when one did. */
  transport?: TransportFailure | undefined;
  /**
   * Response headers the policy reads, by lower-case name: `retry-after` and `date`. Other headers may
   * be present and are ignored. Names are matched case-insensitively, lower-case first.
   * @default {} (no headers)
   */
  headers?: Readonly<Record<string, string>> | undefined;
  /**
   * The provider's structured error code, when the response body carried one (e.g.
   * `rate_limit_exceeded`). Looked up in the code table; see {@link CodeTable}.
   */
  code?: string | undefined;
  /** May the request have reached the provider? See {@link Sent}. */
  sent: Sent;
  /**
   * When the response (or the transport failure) was observed, in ms since the Unix epoch, by the
   * clock of whoever made the call. Anchors `Retry-After` when {@link classify} is not given `now`,
   * so a one-argument `classify(evidence)` still computes a correct `notBefore`.
   * @default undefined (see {@link ClassifyOptions.now} for the fallback)
   */
  receivedAtMs?: number | undefined;
}

/**
 * The read methods APIs serve: GET, HEAD, OPTIONS. An intent with one of them needs no inspection, and the proxy
 * retries only these.
 */
export const readMethods: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Methods that are read-only (RFC 9110 §9.2.1 "safe": the read methods and TRACE): never an `unknown_outcome`. */
export const safeMethods: ReadonlySet<string> = new Set([...readMethods, 'TRACE']);

/**
 * Whether the call could not have changed anything at the provider: a safe method (GET, HEAD,
 * OPTIONS, TRACE), or an inspection. Everything else (POST, PUT, PATCH, DELETE, …) is a write.
 */
export function isRead(evidence: Pick<Evidence, 'method' | 'purpose'>): boolean {
  return evidence.purpose === 'inspect' || safeMethods.has(String(evidence.method).toUpperCase());
}

/**
 * Looks up a response header by name: the lower-case key first, then a case-insensitive scan.
 *
 * @param headers - the evidence's headers
 * @param name - a lower-case header name
 */
export function headerValue(headers: Evidence['headers'], name: string): string | undefined {
  if (headers === undefined || headers === null) return undefined;
  if (Object.hasOwn(headers, name)) {
    const value = headers[name];
    return typeof value === 'string' ? value : undefined;
  }
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === name) {
      const value = headers[key];
      return typeof value === 'string' ? value : undefined;
    }
  }
  return undefined;
}
