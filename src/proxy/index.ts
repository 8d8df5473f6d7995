/**
 * The synchronous retrying proxy of retryq and its in-process twin, `retryingFetch`.
 *
 * Not every call needs a durable workflow: a read that fails with a brief blip is simply retried
 * in-line so the blip never reaches the caller. Rules (all must hold for a retry):
 *
 * | rule | value |
 * | --- | --- |
 * | method | GET, HEAD, OPTIONS (everything else is forwarded once, `Idempotency-Key` unchanged) |
 * | status | 408, 429, 502, 503, 504 (timeout → 408, unreachable → 502) |
 * | retries | 3 by default; `Retryq-Max-Retries: N` (0 = off), clamped to the ceiling (10) |
 * | wait | `Retry-After` (seconds or HTTP-date, skew-corrected) when ≤ the cap (15 s), else backoff ≈ 250 ms · 2ⁿ ± 20 % |
 * | over the cap or the caller's budget | the upstream response is returned at once, `Retry-After` included |
 * | gate | after a 429 + `Retry-After`, the same upstream and credential get a local 429 until then |
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * import type { AddressInfo } from 'node:net';
 * import { retryingFetch, startProxy } from 'retryq/proxy';
 *
 * // An upstream that fails once with 503, then answers.
 * let calls = 0;
 * const upstream = createServer((_req, res) => res.writeHead(++calls === 1 ? 503 : 200).end('hello'));
 * await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
 * const origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
 *
 * const proxy = await startProxy({ upstreams: { local: origin }, port: 0 });
 * const res = await fetch(`${proxy.url}/local/greeting`, { headers: { 'Retryq-Deadline-Ms': '5000' } });
 * console.log(res.status, await res.text(), res.headers.get('retryq-attempts')); // 200 hello 2
 * await proxy.close();
 *
 * const direct = await retryingFetch(`${origin}/greeting`);
 * console.log(direct.status, direct.retryq.attempts); // 200 1
 * upstream.closeAllConnections();
 * upstream.close();
 * ```
 *
 * @module
 */

export type { CommandIo } from './command.js';
export { ProxyExitCode, proxyCommand, proxyUsage } from './command.js';
export type { Forwarded, LocalErrorBody, RetryReport, Sleep } from './forward.js';
export type { GateOptions } from './gate.js';
export { Gate, gateKey } from './gate.js';
export { ProxyMetrics } from './metrics.js';
export type {
  BackoffOptions,
  GateConfig,
  ProxyOptions,
  ProxySettings,
  RetryOptions,
  RetrySettings,
  Upstream,
} from './options.js';
export { ProxyConfigError } from '../errors.js';
export { resolveProxyOptions, resolveRetryOptions } from './options.js';
export type { RequestControls } from './request-controls.js';
export { proxyRequestHeaders, readRequestControls } from './request-controls.js';
export type { RetryingFetch, RetryingFetchInit, RetryingFetchOptions, RetryingResponse } from './retrying-fetch.js';
export { createRetryingFetch, retryingFetch } from './retrying-fetch.js';
export type { NextStepInput, Outcome, Step, WaitRules } from './rules.js';
export { nextStep, outcomes, retriedMethods, retriedStatuses } from './rules.js';
export type { ProxyRuntime, RunningProxy } from './server.js';
export { startProxy } from './server.js';
export { proxyResponseHeaders } from './headers.js';
