/**
 * One request through the proxy: route `/NAME/path?query` to the upstream `NAME`, read the `Retryq-*`
 * controls, buffer a replayable body, run the retry loop ({@link forward}) and stream the answer back;
 * `/metrics` and `/healthz` are answered here too. The server around it (listening, draining, closing)
 * is in `server.ts`.
 *
 * @module
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { CallerGoneError } from '../errors.js';
import type { Cancellation, ForwardDeps, Forwarded, LocalErrorBody, RetryReport } from './forward.js';
import { discard, forward } from './forward.js';
import { gateKey } from './gate.js';
import { forwardedRequestHeaders, forwardedResponseHeaders, isValidReason, reportHeaders } from './headers.js';
import type { ProxyMetrics } from './metrics.js';
import type { ProxySettings, Upstream } from './options.js';
import type { RequestControls } from './request-controls.js';
import { readRequestControls } from './request-controls.js';
import { retriedMethods } from './rules.js';

/** What every request of one proxy shares. */
export interface ProxyContext {
  settings: ProxySettings;
  deps: ForwardDeps;
  metrics: ProxyMetrics;
  /** Aborts when the proxy stops: waits for a retry end with 503, connections are not kept alive. */
  stopSignal: AbortSignal;
}

/**
 * Answers one request. Rejects only for an unexpected internal error (the server answers 500).
 *
 * @param gone - cancels the request when the caller goes away
 */
export async function handleRequest(
  ctx: ProxyContext,
  req: IncomingMessage,
  res: ServerResponse,
  gone: Cancellation,
): Promise<void> {
  const { settings, stopSignal } = ctx;
  if (stopSignal.aborted) res.shouldKeepAlive = false;
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
  if (upstream === undefined) return ownEndpoint(ctx, req, res, name, end === target.length || target[end] === '?');

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
    const { path: header, message: rule, received: got } = read.problem;
    return sendLocal(res, 400, {
      error: { code: 'invalid_header', message: `${header} ${rule}`, header, got, allowed: rule },
    });
  }
  const controls = read.controls;
  const method = req.method ?? 'GET';

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
        headers: forwardedRequestHeaders(req.rawHeaders),
        body,
        maxRetries: controls.maxRetries,
        budgetMs: controls.budgetMs,
        gateKey: ctx.deps.gate === undefined ? undefined : gateKey(upstream.name, req.rawHeaders),
        signal: gone,
        stopSignal,
      },
      ctx.deps,
    );
  } catch (err) {
    if (err instanceof CallerGoneError) return void res.destroy();
    throw err;
  }
  if (stopSignal.aborted) res.shouldKeepAlive = false;
  if (result.kind === 'local')
    return sendLocal(res, result.status, result.body, result.headers, result.report, controls);
  sendUpstream(res, method, result, controls);
}

/** Streams an upstream answer to the caller, with the report headers. */
function sendUpstream(
  res: ServerResponse,
  method: string,
  result: Extract<Forwarded, { kind: 'upstream' }>,
  controls?: RequestControls,
): void {
  const out = forwardedResponseHeaders(result.headers);
  out.push(...reportHeaders(result.report, clampedTo(controls)));
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

/** `/metrics`, `/healthz`, or 404 for a name that is no upstream. */
function ownEndpoint(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse, name: string, exact: boolean): void {
  if (exact && name === 'metrics' && (req.method === 'GET' || req.method === 'HEAD')) {
    const text = ctx.metrics.render();
    res.writeHead(200, {
      'content-type': 'text/plain; version=0.0.4; charset=utf-8',
      'content-length': Buffer.byteLength(text),
      'cache-control': 'no-store',
    });
    res.end(req.method === 'HEAD' ? undefined : text);
    return;
  }
  if (exact && name === 'healthz') {
    const stopping = ctx.stopSignal.aborted;
    sendLocal(res, stopping ? 503 : 200, { ok: !stopping });
    return;
  }
  sendLocal(res, 404, {
    error: {
      code: 'unknown_upstream',
      message: `no upstream named "${name.length > 64 ? `${name.slice(0, 64)}…` : name}"; use /NAME/path with a configured NAME`,
      allowed: [...ctx.settings.upstreams.keys()],
    },
  });
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

function clampedTo(controls: RequestControls | undefined): number | undefined {
  return controls?.clampedFrom === undefined ? undefined : controls.maxRetries;
}

/** Answers with a JSON body made by the proxy itself. */
export function sendLocal(
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
  if (report !== undefined) out.push(...reportHeaders(report, clampedTo(controls)));
  res.writeHead(status, out);
  res.end(res.req.method === 'HEAD' ? undefined : text);
}
