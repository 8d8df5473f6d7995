/**
 * The provider simulator: a realistic paid API on loopback for the retryq demo, integration and
 * workflow tests, and benchmarks. Per-key rate limits with `Retry-After`, spending gates,
 * idempotency keys with replay, an operation status endpoint, scripted faults, outages, 503
 * bursts, webhooks with redeliveries, and metrics that make duplicate side effects visible.
 * The HTTP contract and scenario format are in docs/provider-sim.md.
 *
 * @example
 * ```ts
 * import { startProviderSim } from './sim/index.js';
 *
 * let t = Date.UTC(2026, 0, 1);
 * const sim = await startProviderSim({
 *   now: () => t,
 *   scenario: {
 *     keys: [{ key: 'sk_test_acme', id: 'acme-prod', rateLimitPerMinute: 2 }],
 *     rules: [{ match: { idempotencyKey: 'flaky-*' }, steps: [{ commitThen: 'timeout' }], then: 'normal' }],
 *   },
 * });
 * // ... drive sim.url with real HTTP, advance `t` to move the admission windows ...
 * console.log(sim.metrics().totals.duplicates); // 0
 * await sim.close();
 * ```
 */
export { startProviderSim } from './server.js';
export type { AnsweredRequest, KeyMetrics, ProviderSim, ProviderSimOptions, SimMetrics } from './server.js';
export { ScenarioError, UsageError } from '../errors.js';
export {
  isScenarioError,
  loadScenarioFile,
  parseScenario,
  parseScenarioText,
  patchScenario,
  ruleMethods,
  scenarioSchema,
  writeMethods,
} from './scenario.js';
export type {
  ApiKeyConfig,
  CommitThenStep,
  DelayStep,
  ResetStep,
  Rule,
  RuleMatch,
  RuleMethod,
  Scenario,
  ScenarioInput,
  ScenarioPatch,
  StatusStep,
  Step,
  WriteMethod,
} from './scenario.js';
export { formatAsctimeDate, formatHttpDate, formatImfFixdate, formatRfc850Date } from './http-date.js';
export type { HttpDateStyle } from './http-date.js';
export { admissionRetryAfter, renderRetryAfter } from './retry-after.js';
export type { RetryAfterFormat, RetryAfterSpec } from './retry-after.js';
export { defaultErrorFor, ProviderErrorCode, ProviderErrorType } from './provider-errors.js';
export type { ErrorBody } from './provider-errors.js';
export { canonicalJson } from '../canonical-json.js';
export type { OperationError, OperationRecord, OperationStatus } from './operation-store.js';
export type { RequestCounters, WebhookCounters } from './metrics.js';
export type { WebhookEvent } from './webhooks.js';
export { DEFAULT_WEBHOOK_SECRET } from './webhooks.js';
export { parseProviderSimArgs, runProviderSimCli, usage } from './cli.js';
export type { ProviderSimCliIo, ProviderSimCliOptions } from './cli.js';
