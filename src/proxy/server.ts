/**
 * The proxy server: `http://HOST:PORT/NAME/path?query` is forwarded to the upstream `NAME`'s
 * `URL/path?query` with the retry rules of {@link nextStep}; `/metrics` serves the Prometheus text and
 * `/healthz` a liveness answer. This file owns the server's life (listen, drain, close); one request's
 * handling is in `handler.ts`.
 *
 * @module
 */

import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import type { Dispatcher } from 'undici';
import type { Sleep } from './forward.js';
import { Cancellation, createForwardDeps } from './forward.js';
import type { ProxyContext } from './handler.js';
import { handleRequest, sendLocal } from './handler.js';
import { ProxyMetrics } from './metrics.js';
import type { ProxyOptions, ProxySettings } from './options.js';
import { resolveProxyOptions } from './options.js';

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
  const metrics = new ProxyMetrics();
  const { deps, ownsDispatcher } = createForwardDeps(settings, { ...runtime, metrics });
  const stop = new AbortController();
  const ctx: ProxyContext = { settings, deps, metrics, stopSignal: stop.signal };
  const log = runtime.log;
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
    handleRequest(ctx, req, res, gone).catch((err: unknown) => {
      log?.(`retryq proxy: internal error on ${req.method ?? '?'} ${routeOf(req.url)}: ${messageOf(err)}`);
      if (!res.headersSent) sendLocal(res, 500, { error: { code: 'internal_error', message: 'internal proxy error' } });
      else res.destroy();
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    else socket.destroy();
  });

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

  const stopGraceMs = runtime.stopGraceMs ?? 10_000;
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
      if (ownsDispatcher) await deps.dispatcher.close();
    })());

  return { url: `http://${host}:${address.port}`, port: address.port, settings, metrics, close };
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
