/**
 * The provider's operations: a write is admitted (key, body, rate limit), may meet a burst or a rule
 * step, and otherwise executes once per idempotency key (replays return the saved answer, a changed
 * request under the same key is refused, spending gates apply), with a completion webhook; the
 * status endpoint looks an operation up by its idempotency key.
 */
import { canonicalJson } from '../canonical-json.js';
import type { Answer, Exchange } from './exchange.js';
import { randomId, readBody, maxBodyBytes } from './exchange.js';
import type { MetricsRecorder } from './metrics.js';
import type { OperationError, StoredOperation } from './operation-store.js';
import { errorAnswer, ProviderErrorCode } from './provider-errors.js';
import type { ProviderState, ResolvedKey } from './state.js';
import { applyStep, rateLimited, scripted } from './steps.js';
import { bucketOf, limitHeaders } from './write-limits.js';
import type { LimitSpec, ReportedLimit } from './write-limits.js';

/** A parsed, admitted operation request. */
interface OperationRequest {
  key: ResolvedKey;
  idempotencyKey: string | undefined;
  method: string;
  path: string;
  request: unknown;
  canonicalRequest: string;
}

/** A write (POST, PUT, PATCH, DELETE) under `/v1`. */
export async function handleWrite(state: ProviderState, exchange: Exchange, key: ResolvedKey): Promise<void> {
  const { req, method, path } = exchange;
  state.metrics.event(key.id, 'write');
  const rawKey = req.headers['idempotency-key'];
  let idempotencyKey: string | undefined;
  if (typeof rawKey === 'string') {
    idempotencyKey = rawKey.trim();
    if (idempotencyKey.length === 0 || idempotencyKey.length > 255) {
      state.send(
        exchange,
        errorAnswer(ProviderErrorCode.invalidIdempotencyKey, 'Idempotency-Key must be 1 to 255 characters.'),
      );
      return;
    }
  }
  const text = await readBody(req);
  if (text === null) {
    state.send(
      exchange,
      errorAnswer(ProviderErrorCode.requestTooLarge, `Request bodies are limited to ${maxBodyBytes} bytes.`, {
        Connection: 'close',
      }),
    );
    return;
  }
  if (!admitWrite(state, exchange, key)) return;
  let request: unknown = null;
  if (text.trim() !== '') {
    try {
      request = JSON.parse(text);
    } catch {
      state.send(exchange, errorAnswer(ProviderErrorCode.invalidJson, 'The request body is not valid JSON.'));
      return;
    }
  }
  const burst = state.activeBurst();
  if (burst) {
    state.send(exchange, scripted(state, burst).answer);
    return;
  }
  const step = state.rules.next({ method, path, idempotencyKey, apiKey: key.key, apiKeyId: key.id });
  const op: OperationRequest = { key, idempotencyKey, method, path, request, canonicalRequest: canonicalJson(request) };
  await applyStep(
    state,
    exchange,
    step,
    (delayMs) => execute(state, op, delayMs),
    (error, answer) => recordFailure(state, op, error, answer),
  );
}

/**
 * The write limits: the route bucket the write falls in (if any), then the key's own limit. A refusal
 * answers 429 (the key's own limit flagged `X-RateLimit-Global: true` when buckets are configured);
 * an admission records the write in both and puts the rate-limit headers on whatever answer follows.
 */
function admitWrite(state: ProviderState, exchange: Exchange, key: ResolvedKey): boolean {
  const { rateLimit } = state.scenario;
  const nowMs = state.now();
  const keyLimit: LimitSpec = {
    algorithm: rateLimit.algorithm,
    perMinute: key.rateLimitPerMinute ?? state.scenario.rateLimitPerMinute,
    burst: rateLimit.burst,
  };
  const keyName = `write\u0000${key.id}`;
  const bucket = bucketOf(rateLimit.buckets, exchange.method, exchange.path);
  const bucketLimit: LimitSpec | undefined = bucket && {
    algorithm: rateLimit.algorithm,
    perMinute: bucket.perMinute,
    burst: bucket.burst,
  };
  const bucketName = bucket && `${keyName}\u0000${bucket.name}`;
  const named: Record<string, string> =
    bucket && rateLimit.bucketHeader !== 'none' ? { [rateLimit.bucketHeader]: bucket.name } : {};

  const refuse = (limit: LimitSpec, waitMs: number, name: string, extra: Record<string, string>, what: string) => {
    const answer = rateLimited(state, limit.perMinute, waitMs, what);
    const serverNowMs = answer.serverNowMs ?? state.serverNow();
    const report: ReportedLimit = { name, perMinute: limit.perMinute, remaining: 0, resetMs: waitMs };
    answer.headers = { ...limitHeaders(rateLimit.headers, [report], serverNowMs), ...extra, ...answer.headers };
    state.send(exchange, answer);
    return false;
  };

  if (bucket && bucketLimit && bucketName) {
    const verdict = state.writeLimits.check(bucketName, bucketLimit, nowMs);
    if (!verdict.admitted)
      return refuse(bucketLimit, verdict.waitMs, bucket.name, named, `Rate limit of bucket ${bucket.name}`);
  }
  const keyVerdict = state.writeLimits.check(keyName, keyLimit, nowMs);
  if (!keyVerdict.admitted) {
    const global: Record<string, string> =
      rateLimit.buckets.length > 0 && rateLimit.bucketHeader !== 'none' ? { 'X-RateLimit-Global': 'true' } : {};
    return refuse(keyLimit, keyVerdict.waitMs, 'default', global, 'Rate limit');
  }
  const reports: ReportedLimit[] = [];
  if (bucket && bucketLimit && bucketName) {
    const v = state.writeLimits.commit(bucketName, bucketLimit, nowMs);
    reports.push({ name: bucket.name, perMinute: bucketLimit.perMinute, remaining: v.remaining, resetMs: v.resetMs });
  }
  const v = state.writeLimits.commit(keyName, keyLimit, nowMs);
  reports.push({ name: 'default', perMinute: keyLimit.perMinute, remaining: v.remaining, resetMs: v.resetMs });
  exchange.headers = { ...limitHeaders(rateLimit.headers, reports, state.serverNow()), ...named };
  return true;
}

/** The normal handling of an admitted write: idempotency, spending gates, execution. */
async function execute(state: ProviderState, op: OperationRequest, extraDelayMs: number): Promise<Answer> {
  const { scenario, store, metrics } = state;
  const { key, idempotencyKey } = op;
  const honor = scenario.honorIdempotencyKeys && idempotencyKey !== undefined;
  if (honor) {
    const existing = store.find(idempotencyKey);
    if (existing) return replay(state, existing, op);
  }
  const refusal = state.ledger.check(key, scenario.workspaceAllowance);
  if (refusal?.kind === 'spend_limit') {
    return errorAnswer(
      ProviderErrorCode.spendingLimitExceeded,
      `This API key reached its spending limit of ${refusal.limit} billable operations.`,
    );
  }
  if (refusal?.kind === 'workspace_allowance') {
    return errorAnswer(
      ProviderErrorCode.workspaceAllowanceExhausted,
      `Workspace ${refusal.workspace} used its allowance of ${refusal.allowance} billable operations.`,
    );
  }
  state.ledger.charge(key);
  const stored = store.begin({ ...newOperation(state, op), idempotencyKey });
  const delayMs = extraDelayMs + scenario.latencyMs;
  if (delayMs > 0 && !(await state.sleep(delayMs))) {
    store.abandon(stored);
    return errorAnswer(ProviderErrorCode.serviceUnavailable, 'The simulator is shutting down.');
  }
  const completedAt = new Date(state.serverNow()).toISOString();
  const status = op.method === 'POST' ? 201 : 200;
  const result = {
    object: 'operation_result',
    method: op.method,
    path: op.path,
    request: op.request,
    executedAt: completedAt,
  };
  const body = { id: stored.record.operationId, idempotencyKey: idempotencyKey ?? null, status: 'succeeded', result };
  const { duplicate } = store.commit(stored, { result, response: { status, body }, completedAt });
  metrics.sideEffect(key.id, duplicate);
  sendWebhook(state, stored, metrics);
  return { status, body };
}

/** What a new stored operation starts from (`createdAt` on the server clock). */
function newOperation(state: ProviderState, op: OperationRequest) {
  return {
    operationId: randomId('op'),
    apiKeyId: op.key.id,
    method: op.method,
    path: op.path,
    request: op.request,
    canonicalRequest: op.canonicalRequest,
    createdAt: new Date(state.serverNow()).toISOString(),
  };
}

function replay(state: ProviderState, existing: StoredOperation, op: OperationRequest): Answer {
  const { record } = existing;
  if (record.status === 'pending' || !existing.response) {
    return errorAnswer(
      ProviderErrorCode.idempotencyKeyInUse,
      'A request with this Idempotency-Key is still being processed; retry later.',
    );
  }
  if (record.method !== op.method || record.path !== op.path || existing.canonicalRequest !== op.canonicalRequest) {
    return errorAnswer(
      ProviderErrorCode.idempotencyKeyReused,
      'This Idempotency-Key was already used with a different request (method, path or body).',
    );
  }
  state.metrics.event(op.key.id, 'replay');
  return {
    status: existing.response.status,
    body: existing.response.body,
    headers: { 'Idempotent-Replayed': 'true' },
  };
}

function recordFailure(state: ProviderState, op: OperationRequest, error: OperationError, answer: Answer): void {
  if (!state.scenario.honorIdempotencyKeys || op.idempotencyKey === undefined) return;
  if (state.store.find(op.idempotencyKey)) return;
  state.store.recordFailure({ ...newOperation(state, op), idempotencyKey: op.idempotencyKey }, error, {
    status: answer.status,
    body: answer.body,
  });
}

function sendWebhook(state: ProviderState, stored: StoredOperation, metrics: MetricsRecorder): void {
  const { scenario } = state;
  if (scenario.webhookUrl === undefined) return;
  const { record } = stored;
  state.webhooks.deliver(
    {
      url: scenario.webhookUrl,
      redeliveries: scenario.webhookRedeliveries,
      maxAttempts: scenario.webhookMaxAttempts,
      backoffMs: scenario.webhookBackoffMs,
      timeoutMs: scenario.webhookTimeoutMs,
      secret: scenario.webhookSecret,
      forged: scenario.webhookForged,
      stale: scenario.webhookStale,
      outOfOrder: scenario.webhookOutOfOrder,
    },
    {
      deliveryId: randomId('dlv'),
      type: 'operation.succeeded',
      status: 'succeeded',
      idempotencyKey: record.idempotencyKey,
      operationId: record.operationId,
      createdAt: record.createdAt,
      result: record.result ?? null,
    },
    (outcome) => metrics.webhook(record.apiKeyId, outcome),
  );
}

/** `GET /v1/operations/{key}`: the status endpoint, with its own admission budget. */
export async function handleInspection(
  state: ProviderState,
  exchange: Exchange,
  key: ResolvedKey,
  encodedKey: string,
): Promise<void> {
  let idempotencyKey: string;
  try {
    idempotencyKey = decodeURIComponent(encodedKey);
  } catch {
    state.send(exchange, errorAnswer(ProviderErrorCode.invalidRequest, 'Malformed idempotency key in the path.'));
    return;
  }
  const limit = key.inspectPerMinute ?? state.scenario.inspectPerMinute;
  const admission = state.limiter.take(`inspect\u0000${key.id}`, limit, state.now());
  if (!admission.admitted) {
    state.send(exchange, rateLimited(state, limit, admission.waitMs, 'Inspection budget'));
    return;
  }
  state.metrics.event(key.id, 'inspection');
  const step = state.rules.next({
    method: 'GET',
    path: exchange.path,
    idempotencyKey,
    apiKey: key.key,
    apiKeyId: key.id,
  });
  await applyStep(
    state,
    exchange,
    step,
    async (delayMs) => {
      await state.sleep(delayMs);
      return lookup(state, idempotencyKey);
    },
    () => undefined,
  );
}

function lookup(state: ProviderState, idempotencyKey: string): Answer {
  const stored = state.store.find(idempotencyKey);
  if (!stored) {
    return errorAnswer(ProviderErrorCode.operationNotFound, 'No operation was saved under this idempotency key.');
  }
  const { record } = stored;
  const body: Record<string, unknown> = {
    idempotencyKey,
    status: record.status,
    operationId: record.operationId,
    createdAt: record.createdAt,
  };
  if (record.result !== undefined) body['result'] = record.result;
  if (record.error !== undefined) body['error'] = record.error;
  return { status: 200, body };
}
