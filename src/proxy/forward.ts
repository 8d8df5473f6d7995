/**
 * The retry loop shared by the proxy server and `retryingFetch`: send one request upstream, retry it by
 * the rules of {@link nextStep}, and hand back the last upstream response (its body still streaming) or
 * a local answer (gate, timeout, unreachable upstream) as structured JSON.
 *
 * Failed attempts' bodies are drained before the wait, so their connections return to the pool. Time
 * and randomness are injected (`now`, `sleep`, `random`), so tests assert the waits that were asked for
 * instead of sleeping.
 *
 * @module
 */

import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { Agent } from 'undici';
import type { Dispatcher } from 'undici';
import { CallerGoneError } from '../errors.js';
import type { Evidence } from '../policy/index.js';
import { classify } from '../policy/index.js';
import { Gate } from './gate.js';
import type { ProxyMetrics } from './metrics.js';
import type { RetrySettings } from './options.js';
import type { Outcome } from './rules.js';
import { nextStep, transportStatus } from './rules.js';
import type { AttemptFailure } from './transport.js';
import { transportLabel } from './transport.js';
import { transportFailureOf } from '../policy/index.js';

/**
 * A cancellation that undici accepts as a request `signal` (an emitter of `abort`) and that costs far
 * less per request than an `AbortController`, whose `EventTarget` machinery showed up as about a fifth
 * of the proxy's CPU time per request. An `AbortSignal` is made from it only when a wait needs one.
 *
 * @example
 * const cancel = new Cancellation();
 * res.once('close', () => cancel.abort(new Error('the caller went away')));
 */
export class Cancellation extends EventEmitter {
  /** Whether {@link Cancellation.abort} was called. */
  aborted = false;
  /** What {@link Cancellation.abort} was called with. */
  reason: unknown = undefined;

  /**
   * Cancels (once; later calls do nothing) and emits `abort`.
   *
   * @param reason - why; an `Error` by default
   */
  abort(reason: unknown = new Error('cancelled')): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }

  /** An `AbortSignal` that aborts with this cancellation. */
  toAbortSignal(): AbortSignal {
    const controller = new AbortController();
    if (this.aborted) controller.abort(this.reason);
    else this.once('abort', () => controller.abort(this.reason));
    return controller.signal;
  }
}

/** Waits `ms` milliseconds; rejects (with the signal's reason) when `signal` aborts first. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/** The {@link Sleep} of the proxy and `retryingFetch` unless a test injects its own: `setTimeout` of `node:timers/promises`. */
export const defaultSleep: Sleep = async (ms, signal) => {
  await delay(ms, undefined, signal === undefined ? undefined : { signal });
};

/** What the retry loop needs besides the request. */
export interface ForwardDeps {
  /** The connection pool (an undici `Agent`, keep-alive). */
  dispatcher: Dispatcher;
  settings: RetrySettings;
  /** The gate; `undefined` when it is off. */
  gate: Gate | undefined;
  metrics: ProxyMetrics | undefined;
  /** The current time, in ms since the epoch (as `Date.now`). */
  now: () => number;
  sleep: Sleep;
  /** Uniform in `[0, 1)` (as `Math.random`); drives the backoff jitter. */
  random: () => number;
}

/** The parts of {@link ForwardDeps} a caller may inject; the rest are made from the settings. */
export interface ForwardParts {
  /** @default a keep-alive undici `Agent` owned by the caller of {@link createForwardDeps} */
  dispatcher?: Dispatcher | undefined;
  metrics?: ProxyMetrics | undefined;
  /** @default Date.now */
  now?: (() => number) | undefined;
  /** @default {@link defaultSleep} */
  sleep?: Sleep | undefined;
  /** @default Math.random */
  random?: (() => number) | undefined;
}

/**
 * The retry loop's dependencies for `settings`, shared by the proxy server and `retryingFetch`: a keep-alive
 * pool (unless one is given), a gate when it is on, and the injected or default time, sleep and randomness.
 *
 * @returns the deps, and whether the dispatcher was made here (then its owner closes it)
 */
export function createForwardDeps(
  settings: RetrySettings,
  parts: ForwardParts,
): { deps: ForwardDeps; ownsDispatcher: boolean } {
  const dispatcher =
    parts.dispatcher ??
    new Agent({
      keepAliveTimeout: 4_000,
      keepAliveMaxTimeout: 60_000,
      connect: { timeout: settings.attemptTimeoutMs },
    });
  const deps: ForwardDeps = {
    dispatcher,
    settings,
    gate: settings.gate.enabled ? new Gate({ maxClosedMs: settings.gate.maxClosedMs }) : undefined,
    metrics: parts.metrics,
    now: parts.now ?? Date.now,
    sleep: parts.sleep ?? defaultSleep,
    random: parts.random ?? Math.random,
  };
  return { deps, ownsDispatcher: parts.dispatcher === undefined };
}

/** One request to forward. */
export interface ForwardRequest {
  /** The upstream's name (proxy) or origin (`retryingFetch`): metrics label and messages. */
  label: string;
  /** `http(s)://host[:port]`. */
  origin: string;
  /** The path and query, sent as is. */
  path: string;
  /** Upper-case HTTP method. */
  method: string;
  /** Flat `[name, value, …]` request headers, already filtered. */
  headers: string[];
  /** The body: bytes can be replayed on a retry; a stream is sent once, so it disables retries. */
  body: string | Uint8Array | Readable | null;
  /** Retries allowed for this request. */
  maxRetries: number;
  /** The caller's remaining time budget, in ms, from the moment {@link forward} is called. */
  budgetMs: number | undefined;
  /** See {@link gateKey}; `undefined` skips the gate. */
  gateKey: string | undefined;
  /** Cancels everything (the attempt in flight, the wait, further retries): the caller is gone. */
  signal: Cancellation | undefined;
  /** Aborts only a wait between attempts (the proxy is stopping); the request is then answered with 503. */
  stopSignal?: AbortSignal | undefined;
}

/** What happened to a request, for the `Retryq-*` response headers and the caller. */
export interface RetryReport {
  /** Upstream requests made (0 when the gate answered). */
  attempts: number;
  /** Total time waited between attempts, in ms (the waits asked for). */
  waitedMs: number;
  /** Whether the gate answered locally. */
  gated: boolean;
  /** Why the loop stopped; see {@link Outcome}. */
  outcome: Outcome;
  /** Retries that were allowed. */
  maxRetries: number;
}

/** The JSON body of every answer the proxy makes itself. */
export interface LocalErrorBody {
  error: {
    /** Stable machine-readable code, e.g. `upstream_timeout`, `gated`, `invalid_header`. */
    code: string;
    /** For people: what happened and what to do. */
    message: string;
    /** Further fields, e.g. `upstream`, `transport`, `retryAfterMs`, `header`, `allowed`. */
    [field: string]: unknown;
  };
}

/** The result of {@link forward}. */
export type Forwarded =
  | {
      kind: 'upstream';
      status: number;
      statusText: string;
      headers: IncomingHttpHeaders;
      /** The body, still streaming: pipe it on or dump it. */
      body: Dispatcher.ResponseData['body'];
      report: RetryReport;
    }
  | { kind: 'local'; status: number; headers: Record<string, string>; body: LocalErrorBody; report: RetryReport };

/** Most bytes read from a failed attempt's body to keep its connection; past it the connection is closed. */
const drainLimitBytes = 128 * 1024;

/**
 * Forwards one request with retries. Never rejects for upstream failures (those become a local 408 /
 * 502 answer); rejects with {@link CallerGoneError} when `request.signal` aborts.
 *
 * @param request - see {@link ForwardRequest}
 * @param deps - see {@link ForwardDeps}
 */
export async function forward(request: ForwardRequest, deps: ForwardDeps): Promise<Forwarded> {
  const { settings, gate, metrics } = deps;
  const key = gate === undefined ? undefined : request.gateKey;
  const startMs = deps.now();
  const deadlineMs = request.budgetMs === undefined ? undefined : startMs + request.budgetMs;
  const maxRetries = request.body instanceof Readable ? 0 : request.maxRetries;
  const report: RetryReport = { attempts: 0, waitedMs: 0, gated: false, outcome: 'returned', maxRetries };

  if (key !== undefined) {
    const opensAt = gate?.opensAt(key, startMs);
    if (opensAt !== undefined) return gated(request, report, opensAt, startMs, metrics);
  }

  for (;;) {
    let timeoutMs = settings.attemptTimeoutMs;
    if (deadlineMs !== undefined) timeoutMs = Math.max(1, Math.min(timeoutMs, deadlineMs - deps.now()));
    report.attempts += 1;

    let response: Dispatcher.ResponseData | undefined;
    let failure: AttemptFailure | undefined;
    // undici's own headers timeout ticks at about 1 s; this timer keeps the attempt (and the caller's
    // budget) to the millisecond.
    const attempt = new Cancellation();
    const onGone = (): void => attempt.abort(request.signal?.reason);
    request.signal?.once('abort', onGone);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      attempt.abort(new Error(`no response headers within ${timeoutMs} ms`));
    }, timeoutMs);
    try {
      response = await deps.dispatcher.request({
        origin: request.origin,
        path: request.path,
        method: request.method,
        headers: request.headers,
        body: request.body,
        signal: attempt,
        headersTimeout: timeoutMs + 1000,
        bodyTimeout: settings.attemptTimeoutMs,
      });
    } catch (err) {
      request.signal?.off('abort', onGone);
      if (request.signal?.aborted === true) throw new CallerGoneError('the caller went away', { cause: err });
      failure = timedOut ? { transport: 'timeout', sent: 'unknown', code: 'ATTEMPT_TIMEOUT' } : transportFailureOf(err);
    } finally {
      clearTimeout(timer);
    }

    const nowMs = deps.now();
    let evidence: Evidence;
    if (response !== undefined) {
      metrics?.upstreamRequest(request.label, response.statusCode);
      evidence = {
        method: request.method,
        status: response.statusCode,
        headers: policyHeaders(response.headers),
        sent: 'yes',
      };
      if (response.statusCode === 429 && key !== undefined && gate !== undefined) {
        const decision = classify(evidence, { now: new Date(nowMs) });
        if (
          decision.kind === 'rate_limited' &&
          (decision.retryAfter.kind === 'delay' || decision.retryAfter.kind === 'date') &&
          gate.close(key, decision.retryAfter.notBefore.getTime(), nowMs)
        ) {
          metrics?.gateClosed(request.label);
        }
      }
    } else {
      const f = failure as AttemptFailure;
      metrics?.upstreamRequest(request.label, transportLabel(f));
      evidence = { method: request.method, transport: f.transport, sent: f.sent };
    }

    const step = nextStep({
      evidence,
      retriesDone: report.attempts - 1,
      maxRetries,
      nowMs,
      deadlineMs,
      gateOpensAtMs: key === undefined ? undefined : gate?.opensAt(key, nowMs),
      rules: settings,
      random: deps.random,
    });

    if (step.kind === 'stop') {
      report.outcome = step.outcome;
      metrics?.requestAnswered(request.label, step.outcome, report.attempts);
      if (response !== undefined) {
        return {
          kind: 'upstream',
          status: response.statusCode,
          statusText: response.statusText,
          headers: response.headers,
          body: response.body,
          report,
        };
      }
      return transportAnswer(request, report, failure as AttemptFailure, timeoutMs);
    }

    request.signal?.off('abort', onGone);
    if (response !== undefined) await discard(response.body);
    metrics?.retry(request.label, step.waitMs);
    const retryAtMs = nowMs + step.waitMs;
    try {
      await deps.sleep(step.waitMs, waitSignal(request));
    } catch (err) {
      if (request.signal?.aborted === true) throw new CallerGoneError('the caller went away', { cause: err });
      if (request.stopSignal?.aborted === true) return stopping(request, report, metrics);
      throw err;
    }
    report.waitedMs += step.waitMs;

    // Another request's 429 may have closed the gate past the time this retry was planned for.
    if (key !== undefined) {
      const afterMs = deps.now();
      const opensAt = gate?.opensAt(key, afterMs);
      if (opensAt !== undefined && opensAt > retryAtMs) return gated(request, report, opensAt, afterMs, metrics);
    }
  }
}

/** `retry-after` and `date` of a response, for the policy. A repeated field is joined, so it reads as invalid. */
function policyHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  const retryAfter = headers['retry-after'];
  if (retryAfter !== undefined) out['retry-after'] = Array.isArray(retryAfter) ? retryAfter.join(', ') : retryAfter;
  const date = headers['date'];
  if (date !== undefined) out['date'] = Array.isArray(date) ? date.join(', ') : date;
  return out;
}

/**
 * Reads and drops a response body (up to 128 KiB, so its connection can be reused; past that the
 * connection is closed). Never rejects.
 *
 * @param body - an undici response body
 */
export async function discard(body: Dispatcher.ResponseData['body']): Promise<void> {
  try {
    await body.dump({ limit: drainLimitBytes });
  } catch {
    // A body that breaks off while draining only costs its connection.
  }
}

function waitSignal(request: ForwardRequest): AbortSignal | undefined {
  const { stopSignal } = request;
  const signal = request.signal?.toAbortSignal();
  if (signal === undefined) return stopSignal;
  if (stopSignal === undefined) return signal;
  return AbortSignal.any([signal, stopSignal]);
}

function gated(
  request: ForwardRequest,
  report: RetryReport,
  opensAtMs: number,
  nowMs: number,
  metrics: ProxyMetrics | undefined,
): Forwarded {
  const retryAfterMs = opensAtMs - nowMs;
  const retryAfterSeconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  report.gated = true;
  report.outcome = 'gated';
  metrics?.requestAnswered(request.label, 'gated', report.attempts);
  return {
    kind: 'local',
    status: 429,
    headers: { 'retry-after': String(retryAfterSeconds) },
    body: {
      error: {
        code: 'gated',
        message:
          `${request.label} rate-limited this credential; answered locally without an upstream request until ` +
          `the permitted time (in ${retryAfterSeconds} s). Retry after that, or submit a durable intent.`,
        upstream: request.label,
        retryAfterMs,
        permittedAt: new Date(opensAtMs).toISOString(),
      },
    },
    report,
  };
}

function transportAnswer(
  request: ForwardRequest,
  report: RetryReport,
  failure: AttemptFailure,
  timeoutMs: number,
): Forwarded {
  const status = transportStatus(failure);
  const attempts = `${report.attempts} attempt${report.attempts === 1 ? '' : 's'}`;
  let code: string;
  let message: string;
  if (status === 408) {
    code = 'upstream_timeout';
    message = `${request.label} did not answer within ${timeoutMs} ms (${attempts}).`;
  } else if (failure.transport === 'reset' || failure.transport === 'other') {
    code = 'upstream_connection_failed';
    message = `the connection to ${request.label} failed before a complete response (${attempts}).`;
  } else {
    code = 'upstream_unreachable';
    message = `${request.label} could not be reached (${failure.transport}; ${attempts}).`;
  }
  if (failure.sent !== 'no' && report.outcome === 'method_not_retried') {
    message += ' The request may have reached the upstream; it was not repeated.';
  }
  return {
    kind: 'local',
    status,
    headers: {},
    body: {
      error: {
        code,
        message,
        upstream: request.label,
        transport: failure.transport,
        sent: failure.sent,
        ...(failure.code === undefined ? {} : { cause: failure.code }),
      },
    },
    report,
  };
}

function stopping(request: ForwardRequest, report: RetryReport, metrics: ProxyMetrics | undefined): Forwarded {
  report.outcome = 'stopping';
  metrics?.requestAnswered(request.label, 'stopping', report.attempts);
  return {
    kind: 'local',
    status: 503,
    headers: { 'retry-after': '1' },
    body: {
      error: {
        code: 'proxy_stopping',
        message: `the proxy is shutting down; the retry of this request to ${request.label} was cancelled.`,
        upstream: request.label,
      },
    },
    report,
  };
}
