/**
 * The proxy server: `http://HOST:PORT/NAME/path?query` is forwarded to the upstream `NAME`'s
 * `URL/path?query` with the retry rules of {@link nextStep}; `/metrics` serves the Prometheus text and
 * `/healthz` a liveness answer.
 *
 * @module
 */

import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { Agent } from 'undici';
import type { Dispatcher } from 'undici';
import type { Forwarded, LocalErrorBody, RetryReport, Sleep } from './forward.js';
import { CallerGone, Cancellation, discard, forward } from './forward.js';
import { Gate, gateKey } from './gate.js';
import { forwardedRequestHeaders, forwardedResponseHeaders, isValidReason } from './headers.js';
import { ProxyMetrics } from './metrics.js';
import type { ProxyOptions, ProxySettings, RequestControls, Upstream } from './options.js';
import { readRequestControls, resolveProxyOptions } from './options.js';
import { retriedMethods } from './rules.js';

/** What the proxy takes from its surroundings; tests inject time and randomness here. */
export interface ProxyRuntime {
  /**
   * The current time, in ms since the epoch.
   * @default Date.now
   */
  now?: (() => number) | undefined;
  /**
   * Waits between attempts.
   * @default `setTimeout` from `node:timers/promises`
   */
  sleep?: Sleep | undefined;
  /**
   * Uniform in `[0, 1)`; drives the backoff jitter.
   * @default Math.random
   */
  random?: (() => number) | undefined;
  /**
   * The connection pool to the upstreams. When given, {@link RunningProxy.close} leaves it open.
   * @default a keep-alive undici `Agent` owned by the proxy
   */
  dispatcher?: Dispatcher | undefined;
  /**
   * Where unexpected internal errors are reported, one line each: method, upstream and message; never
   * headers, query strings or bodies.
   * @default no logging
   */
  log?: ((line: string) => void) | undefined;
  /**
   * On {@link RunningProxy.close}, how long requests already talking to an upstream may take to
   * finish, in ms, before their connections are cut.
   * @default 10_000
   */
  stopGraceMs?: number | undefined;
}

/** A started proxy. */
export interface RunningProxy {
  /** `http://HOST:PORT` (IPv6 hosts in brackets). */
  url: string;
  /** The port listened on (useful with `port: 0`). */
  port: number;
  /** The resolved configuration. */
  settings: ProxySettings;
  /** The proxy's metrics (also served at `/metrics`). */
  metrics: ProxyMetrics;
  /**
   * Stops the proxy: no new connections; requests waiting for a retry are answered at once with 503
   * `proxy_stopping`; requests talking to an upstream get up to `stopGraceMs` to finish. Idempotent.
   */
  close(): Promise<void>;
}

/** Response headers that tell the caller what happened. */
export const proxyResponseHeaders = {
  attempts: 'Retryq-Attempts',
  waitMs: 'Retryq-Wait-Ms',
  gated: 'Retryq-Gated',
  outcome: 'Retryq-Outcome',
  maxRetriesClamped: 'Retryq-Max-Retries-Clamped',
} as const;

const defaultSleep: Sleep = async (ms, signal) => {
  await delay(ms, undefined, signal === undefined ? undefined : { signal });
};

/**
 * Starts the proxy and resolves once it listens.
 *
 * @param options - see {@link ProxyOptions}; validated, defaults filled in
 * @param runtime - see {@link ProxyRuntime}
 * @throws ProxyConfigError when `options` is invalid (every problem listed); the listen error (e.g.
 *   `EADDRINUSE`) when the port cannot be bound
 * @example
 * const proxy = await startProxy({ upstreams: { acme: 'https://api.acme.test/v1' }, port: 0 });
 * const res = await fetch(`${proxy.url}/acme/users/42`); // GET https://api.acme.test/v1/users/42, retried
 * res.headers.get('retryq-attempts'); // '1'
 * await proxy.close();
 */
export async function startProxy(options: ProxyOptions, runtime: ProxyRuntime = {}): Promise<RunningProxy> {
  const settings = resolveProxyOptions(options);
  const stopGraceMs = runtime.stopGraceMs ?? 10_000;
  const ownDispatcher = runtime.dispatcher === undefined;
  const dispatcher =
    runtime.dispatcher ??
    new Agent({
      keepAliveTimeout: 4_000,
      keepAliveMaxTimeout: 60_000,
      connect: { timeout: settings.attemptTimeoutMs },
    });
  const metrics = new ProxyMetrics();
  const gate = settings.gate.enabled ? new Gate({ maxClosedMs: settings.gate.maxClosedMs }) : undefined;
  const deps = {
    dispatcher,
    settings,
    gate,
    metrics,
    now: runtime.now ?? Date.now,
    sleep: runtime.sleep ?? defaultSleep,
    random: runtime.random ?? Math.random,
  };
  const log = runtime.log;
  const stop = new AbortController();
  let inFlight = 0;
  let idle: (() => void) | undefined;

  const server: Server = createServer((req, res) => {
    inFlight += 1;
    const gone = new Cancellation();
    res.once('close', () => {
      inFlight -= 1;
      if (!res.writableFinished) gone.abort(new Error('the caller went away'));
      if (inFlight === 0) idle?.();
    });
    handle(req, res, gone).catch((err: unknown) => {
      log?.(`retryq proxy: internal error on ${req.method ?? '?'} ${routeOf(req.url)}: ${messageOf(err)}`);
      if (!res.headersSent) sendLocal(res, 500, { error: { code: 'internal_error', message: 'internal proxy error' } });
      else res.destroy();
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    else socket.destroy();
  });

  async function handle(req: IncomingMessage, res: ServerResponse, gone: Cancellation): Promise<void> {
    if (stop.signal.aborted) res.shouldKeepAlive = false;
    const target = req.url ?? '';
    if (target.charCodeAt(0) !== 0x2f) {
      return sendLocal(res, 400, {
        error: { code: 'invalid_target', message: 'the request target must be a path: /NAME/path?query' },
      });
    }
    let end = 1;
    while (end < target.length) {
      const c = target.charCodeAt(end);
      if (c === 0x2f || c === 0x3f) break;
      end += 1;
    }
    const name = target.slice(1, end);
    const upstream = settings.upstreams.get(name);
    if (upstream === undefined) return ownEndpoint(req, res, name, end === target.length || target[end] === '?');

    const rest = target.slice(end);
    if (hasDotSegment(rest)) {
      return sendLocal(res, 400, {
        error: {
          code: 'invalid_path',
          message: 'the path must not contain "." or ".." segments (they would leave the upstream\'s base path)',
        },
      });
    }
    const read = readRequestControls(req.rawHeaders, {
      maxRetries: settings.maxRetries,
      ceiling: settings.maxRetriesCeiling,
    });
    if (!read.ok) {
      const { header, got, rule } = read.problem;
      return sendLocal(res, 400, {
        error: { code: 'invalid_header', message: `${header} ${rule}`, header, got, allowed: rule },
      });
    }
    const controls = read.controls;
    const method = req.method ?? 'GET';
    const headers = forwardedRequestHeaders(req.rawHeaders);

    let body: Buffer | IncomingMessage | null = null;
    if (hasBody(req)) {
      if (retriedMethods.has(method) && controls.maxRetries > 0) {
        const buffered = await readReplayable(req, settings.maxReplayBodyBytes);
        if (buffered === 'aborted') return void res.destroy();
        if (buffered === undefined) {
          res.shouldKeepAlive = false;
          return sendLocal(res, 413, {
            error: {
              code: 'request_body_too_large',
              message:
                `a ${method} body is buffered so it can be replayed on a retry, up to ${settings.maxReplayBodyBytes} ` +
                'bytes; send Retryq-Max-Retries: 0 to stream a larger one once',
              limitBytes: settings.maxReplayBodyBytes,
            },
          });
        }
        body = buffered;
      } else {
        body = req;
      }
    }

    let result: Forwarded;
    try {
      result = await forward(
        {
          label: upstream.name,
          origin: upstream.origin,
          path: upstreamPath(upstream, rest),
          method,
          headers,
          body,
          maxRetries: controls.maxRetries,
          budgetMs: controls.budgetMs,
          gateKey: gate === undefined ? undefined : gateKey(upstream.name, req.rawHeaders),
          signal: gone,
          stopSignal: stop.signal,
        },
        deps,
      );
    } catch (err) {
      if (err instanceof CallerGone) return void res.destroy();
      throw err;
    }
    if (stop.signal.aborted) res.shouldKeepAlive = false;
    if (result.kind === 'local')
      return sendLocal(res, result.status, result.body, result.headers, result.report, controls);

    const out = forwardedResponseHeaders(result.headers);
    pushReportHeaders(out, result.report, controls);
    const { body: upstreamBody } = result;
    try {
      if (isValidReason(result.statusText)) res.writeHead(result.status, result.statusText, out);
      else res.writeHead(result.status, out);
    } catch (err) {
      void discard(upstreamBody);
      throw err;
    }
    if (method === 'HEAD' || result.status === 204 || result.status === 304) {
      res.end();
      void discard(upstreamBody);
      return;
    }
    // pipe, not pipeline: pipeline destroys the response when done, which would close the caller's
    // keep-alive connection after every request.
    upstreamBody.on('error', () => res.destroy());
    res.once('close', () => {
      if (!upstreamBody.readableEnded) upstreamBody.destroy();
    });
    upstreamBody.pipe(res);
  }

  function ownEndpoint(req: IncomingMessage, res: ServerResponse, name: string, exact: boolean): void {
    if (exact && name === 'metrics' && (req.method === 'GET' || req.method === 'HEAD')) {
      const text = metrics.render();
      res.writeHead(200, {
        'content-type': 'text/plain; version=0.0.4; charset=utf-8',
        'content-length': Buffer.byteLength(text),
        'cache-control': 'no-store',
      });
      res.end(req.method === 'HEAD' ? undefined : text);
      return;
    }
    if (exact && name === 'healthz') {
      sendLocal(res, stop.signal.aborted ? 503 : 200, { ok: !stop.signal.aborted });
      return;
    }
    sendLocal(res, 404, {
      error: {
        code: 'unknown_upstream',
        message: `no upstream named "${name.length > 64 ? `${name.slice(0, 64)}…` : name}"; use /NAME/path with a configured NAME`,
        allowed: [...settings.upstreams.keys()],
      },
    });
  }

  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(settings.port, settings.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', (err) => log?.(`retryq proxy: server error: ${err.message}`));
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      stop.abort();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      if (inFlight > 0) {
        const drained = new Promise<void>((resolve) => (idle = resolve));
        const grace = new AbortController();
        await Promise.race([drained, delay(stopGraceMs, undefined, { signal: grace.signal }).catch(() => undefined)]);
        grace.abort();
      }
      server.closeAllConnections();
      await closed;
      if (ownDispatcher) await dispatcher.close();
    })());

  return { url: `http://${host}:${address.port}`, port: address.port, settings, metrics, close };
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The whole body; `undefined` when it is longer than `limit` bytes; `'aborted'` when the caller broke it off. */
async function readReplayable(req: IncomingMessage, limit: number): Promise<Buffer | undefined | 'aborted'> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) return undefined;
      chunks.push(chunk);
    }
  } catch {
    return 'aborted';
  }
  return Buffer.concat(chunks, size);
}

/** The upstream path for the rest of the target after `/NAME` (`''`, `/…` or `?…`), sent as is. */
function upstreamPath(upstream: Upstream, rest: string): string {
  if (rest.length === 0) return upstream.basePath || '/';
  if (rest.charCodeAt(0) === 0x3f) return (upstream.basePath || '/') + rest;
  return upstream.basePath + rest;
}

const dotSegments: ReadonlySet<string> = new Set(['.', '..', '%2e', '%2e%2e', '.%2e', '%2e.']);

/** Whether the path (before `?`) has a `.` or `..` segment, plain or percent-encoded. */
export function hasDotSegment(rest: string): boolean {
  const q = rest.indexOf('?');
  const path = q === -1 ? rest : rest.slice(0, q);
  if (!path.includes('.') && !path.includes('%')) return false;
  for (const segment of path.split('/')) if (dotSegments.has(segment.toLowerCase())) return true;
  return false;
}

function pushReportHeaders(out: string[], report: RetryReport, controls: RequestControls | undefined): void {
  const h = proxyResponseHeaders;
  out.push(h.attempts, String(report.attempts), h.waitMs, String(Math.round(report.waitedMs)));
  out.push(h.gated, report.gated ? 'true' : 'false', h.outcome, report.outcome);
  if (controls?.clampedFrom !== undefined) out.push(h.maxRetriesClamped, String(controls.maxRetries));
}

/** Answers with a JSON body made by the proxy itself. */
function sendLocal(
  res: ServerResponse,
  status: number,
  body: LocalErrorBody | { ok: boolean },
  extra: Record<string, string> = {},
  report?: RetryReport,
  controls?: RequestControls,
): void {
  const text = JSON.stringify(body);
  const out = [
    'content-type',
    'application/json; charset=utf-8',
    'content-length',
    String(Buffer.byteLength(text)),
    'cache-control',
    'no-store',
  ];
  for (const [name, value] of Object.entries(extra)) out.push(name, value);
  if (report !== undefined) pushReportHeaders(out, report, controls);
  res.writeHead(status, out);
  res.end(res.req.method === 'HEAD' ? undefined : text);
}

/** `/NAME` of a request target, for log lines: no rest of the path, no query string. */
function routeOf(target: string | undefined): string {
  if (target === undefined) return '?';
  const match = /^\/[^/?]*/.exec(target);
  return match === null ? '?' : match[0];
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
