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
 * import { startProxy, retryingFetch } from './src/proxy/index.js';
 *
 * const proxy = await startProxy({ upstreams: { acme: 'https://api.acme.test/v1' }, port: 0 });
 * const viaProxy = await fetch(`${proxy.url}/acme/users/42`, { headers: { 'Retryq-Deadline-Ms': '5000' } });
 * viaProxy.headers.get('retryq-attempts'); // '1'
 * await proxy.close();
 *
 * const direct = await retryingFetch('https://api.acme.test/v1/users/42', { deadlineMs: 5000 });
 * direct.retryq.attempts; // 1
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
  ConfigIssue,
  GateConfig,
  ProxyOptions,
  ProxySettings,
  RetryOptions,
  RetrySettings,
  Upstream,
} from './options.js';
export { ProxyConfigError, proxyRequestHeaders, resolveProxyOptions, resolveRetryOptions } from './options.js';
export type { RetryingFetch, RetryingFetchInit, RetryingFetchOptions, RetryingResponse } from './retrying-fetch.js';
export { createRetryingFetch, retryingFetch } from './retrying-fetch.js';
export type { NextStepInput, Outcome, Step, WaitRules } from './rules.js';
export { nextStep, outcomes, retriedMethods, retriedStatuses } from './rules.js';
export type { ProxyRuntime, RunningProxy } from './server.js';
export { proxyResponseHeaders, startProxy } from './server.js';
