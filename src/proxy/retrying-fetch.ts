/**
 * `retryingFetch`: the proxy's retry rules in-process. A fetch-shaped client on an undici keep-alive
 * pool that retries GET, HEAD and OPTIONS on 408, 429, 502, 503 and 504 (a timeout counts as 408, an
 * unreachable host as 502), honours `Retry-After` up to the cap, and answers exactly as the proxy would,
 * `Retryq-*` response headers included.
 *
 * @module
 */

import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { CallerGoneError } from '../errors.js';
import type { Forwarded, RetryReport, Sleep } from './forward.js';
import { Cancellation, createForwardDeps, discard, forward } from './forward.js';
import { gateKey } from './gate.js';
import { forwardedRequestHeaders, forwardedResponseHeaders, isValidReason, reportHeaders } from './headers.js';
import type { ProxyMetrics } from './metrics.js';
import type { RetryOptions, RetrySettings } from './options.js';
import { resolveRetryOptions } from './options.js';

/** Options of {@link createRetryingFetch}: the retry rules plus injected parts. */
export interface RetryingFetchOptions extends RetryOptions {
  /**
   * The connection pool. When given, {@link RetryingFetch.close} leaves it open.
   * @default a keep-alive undici `Agent` owned by the client
   */
  dispatcher?: Dispatcher | undefined;
  /**
   * Counts upstream requests, retries and gated answers, labelled by origin.
   * @default none
   */
  metrics?: ProxyMetrics | undefined;
  /**
   * The current time, in ms since the epoch.
   * @default Date.now
   */
  now?: (() => number) | undefined;
  /**
   * Waits between attempts; must reject when `signal` aborts.
   * @default `setTimeout` from `node:timers/promises`
   */
  sleep?: Sleep | undefined;
  /**
   * Uniform in `[0, 1)`; drives the backoff jitter.
   * @default Math.random
   */
  random?: (() => number) | undefined;
}

/** Per-request options of a {@link RetryingFetch} call. */
export interface RetryingFetchInit {
  /**
   * The HTTP method. Only GET, HEAD and OPTIONS are ever retried.
   * @default 'GET'
   */
  method?: string | undefined;
  /** Request headers. Hop-by-hop fields and `Host` are dropped; `Idempotency-Key` passes unchanged. */
  headers?: Headers | Record<string, string> | ReadonlyArray<readonly [string, string]> | undefined;
  /**
   * The request body. Bytes or a string, so it can be replayed on a retry.
   * @default null
   */
  body?: string | Uint8Array | null | undefined;
  /** Aborts the request, its waits and the response body; the promise then rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /**
   * Retries for this request (0 turns them off): an integer from 0 to 100.
   * @default the client's `maxRetries` (3)
   */
  maxRetries?: number | undefined;
  /**
   * This call's time budget, in ms: no retry starts at or after it, and no attempt runs past it. A
   * server `Retry-After` beyond it returns the response at once. An integer ≥ 1.
   * @default no budget
   */
  deadlineMs?: number | undefined;
}

/** A fetch `Response` plus what the retry loop did (the same facts as its `Retryq-*` headers). */
export type RetryingResponse = Response & { readonly retryq: RetryReport };

/** A retrying fetch function with its own pool, gate and settings. */
export interface RetryingFetch {
  /**
   * Sends the request, retrying it by the rules. Never rejects for an upstream failure: a timeout is a
   * 408 response and an unreachable upstream a 502, with a JSON error body. Rejects with the signal's
   * reason when `init.signal` aborts, and with `TypeError` / `RangeError` for an invalid URL or init.
   */
  (input: string | URL, init?: RetryingFetchInit): Promise<RetryingResponse>;
  /** Closes the pool (when the client owns it). */
  close(): Promise<void>;
}

/**
 * Makes a {@link RetryingFetch} with its own settings, connection pool and gate.
 *
 * @param options - see {@link RetryingFetchOptions}; validated, defaults filled in
 * @throws ProxyConfigError when an option is invalid (every problem listed)
 * @example
 * const fetchWithRetries = createRetryingFetch({ maxWait: '5s', gate: false });
 * const res = await fetchWithRetries('https://api.example.com/v1/users/42', { deadlineMs: 8_000 });
 * res.retryq.attempts; // 1 when the first attempt succeeded
 * await fetchWithRetries.close();
 */
export function createRetryingFetch(options: RetryingFetchOptions = {}): RetryingFetch {
  const { dispatcher, metrics, now, sleep, random, ...retry } = options;
  const settings: RetrySettings = resolveRetryOptions(retry);
  const { deps, ownsDispatcher } = createForwardDeps(settings, { dispatcher, metrics, now, sleep, random });

  const call = async (input: string | URL, init: RetryingFetchInit = {}): Promise<RetryingResponse> => {
    const url = toUrl(input);
    const method = (init.method ?? 'GET').toUpperCase();
    if (!/^[!#$%&'*+.^_`|~0-9A-Z-]+$/.test(method))
      throw new TypeError(`retryingFetch: "${init.method}" is not a method`);
    const maxRetries = init.maxRetries ?? settings.maxRetries;
    if (!Number.isSafeInteger(maxRetries) || maxRetries < 0 || maxRetries > 100) {
      throw new RangeError(
        `retryingFetch: init.maxRetries must be an integer from 0 to 100 (got ${String(maxRetries)})`,
      );
    }
    const budgetMs = init.deadlineMs;
    if (budgetMs !== undefined && !(Number.isSafeInteger(budgetMs) && budgetMs >= 1)) {
      throw new RangeError(
        `retryingFetch: init.deadlineMs must be an integer number of ms ≥ 1 (got ${String(budgetMs)})`,
      );
    }
    const raw = flatHeaders(init.headers);
    const signal = init.signal;
    signal?.throwIfAborted();
    let cancel: Cancellation | undefined;
    let unlink = (): void => undefined;
    if (signal !== undefined) {
      const c = new Cancellation();
      const onAbort = (): void => c.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      unlink = () => signal.removeEventListener('abort', onAbort);
      cancel = c;
    }
    let result: Forwarded;
    try {
      result = await forward(
        {
          label: url.origin,
          origin: url.origin,
          path: url.pathname + url.search,
          method,
          headers: forwardedRequestHeaders(raw),
          body: init.body ?? null,
          maxRetries,
          budgetMs,
          gateKey: gateKey(url.origin, raw),
          signal: cancel,
        },
        deps,
      );
    } catch (err) {
      unlink();
      if (err instanceof CallerGoneError && signal?.aborted === true) throw signal.reason;
      throw err;
    }
    // The signal keeps governing the body while it streams; then it is let go (a long-lived signal
    // shared by many calls must not collect a listener per call).
    if (result.kind === 'upstream') result.body.once('close', unlink);
    else unlink();
    return toResponse(result, method);
  };

  return Object.assign(call, {
    close: async (): Promise<void> => {
      if (ownsDispatcher) await deps.dispatcher.close();
    },
  });
}

let shared: RetryingFetch | undefined;

/**
 * Sends a request with the default retry rules (3 retries, 15 s cap, gate on), on a shared keep-alive
 * pool. See {@link createRetryingFetch} for other settings and {@link RetryingFetch} for what it returns.
 *
 * @param input - an absolute `http://` or `https://` URL
 * @param init - see {@link RetryingFetchInit}
 * @example
 * import { retryingFetch } from 'retryq/proxy';
 * const res = await retryingFetch('https://api.example.com/v1/users/42', {
 *   headers: { authorization: `Bearer ${process.env.API_KEY}` },
 *   deadlineMs: 10_000,
 * });
 * if (res.ok) console.log(await res.json(), res.retryq.attempts);
 */
export function retryingFetch(input: string | URL, init?: RetryingFetchInit): Promise<RetryingResponse> {
  shared ??= createRetryingFetch();
  return shared(input, init);
}

function toUrl(input: string | URL): URL {
  let url: URL;
  try {
    url = input instanceof URL ? input : new URL(input);
  } catch {
    throw new TypeError(`retryingFetch: "${String(input).slice(0, 200)}" is not an absolute URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`retryingFetch: the URL must use http or https (got ${url.protocol})`);
  }
  if (url.username || url.password) {
    throw new TypeError('retryingFetch: the URL must not contain user:password; send credentials as headers');
  }
  return url;
}

function flatHeaders(headers: RetryingFetchInit['headers']): string[] {
  const out: string[] = [];
  if (headers === undefined) return out;
  const pairs: Iterable<readonly [string, string]> =
    headers instanceof Headers || Array.isArray(headers)
      ? (headers as Iterable<readonly [string, string]>)
      : Object.entries(headers as Record<string, string>);
  for (const [name, value] of pairs) out.push(name, value);
  return out;
}

const nullBodyStatuses: ReadonlySet<number> = new Set([101, 103, 204, 205, 304]);

function toResponse(result: Forwarded, method: string): RetryingResponse {
  if (result.kind === 'upstream' && (result.status < 200 || result.status > 599)) {
    // A fetch Response cannot carry such a status; say so as the proxy would about a broken upstream.
    void discard(result.body);
    return toResponse(
      {
        kind: 'local',
        status: 502,
        headers: {},
        body: {
          error: {
            code: 'upstream_response_invalid',
            message: `the upstream answered with status ${result.status}, outside 200–599`,
            status: result.status,
          },
        },
        report: result.report,
      },
      method,
    );
  }
  const headers = new Headers();
  let body: ReadableStream<Uint8Array> | string | null;
  if (result.kind === 'local') {
    headers.set('content-type', 'application/json; charset=utf-8');
    for (const [name, value] of Object.entries(result.headers)) headers.set(name, value);
    body = method === 'HEAD' ? null : JSON.stringify(result.body);
  } else {
    const flat = forwardedResponseHeaders(result.headers);
    for (let i = 0; i + 1 < flat.length; i += 2) headers.append(flat[i] as string, flat[i + 1] as string);
    if (method === 'HEAD' || nullBodyStatuses.has(result.status)) {
      void discard(result.body);
      body = null;
    } else {
      body = Readable.toWeb(result.body) as ReadableStream<Uint8Array>;
    }
  }
  const { report } = result;
  const own = reportHeaders(report);
  for (let i = 0; i + 1 < own.length; i += 2) headers.set(own[i] as string, own[i + 1] as string);
  const response = new Response(body, {
    status: result.status,
    ...(result.kind === 'upstream' && isValidReason(result.statusText) ? { statusText: result.statusText } : {}),
    headers,
  });
  return Object.defineProperty(response, 'retryq', { value: report, enumerable: true }) as RetryingResponse;
}
