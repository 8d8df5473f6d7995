/**
 * The dispatch activity: one delivery attempt of an intent's action to the provider.
 *
 * Every attempt sends the same `Idempotency-Key` and the same JSON payload (invariant 8); the credential's
 * secret is added here, from worker config, and never returned or logged (invariant 9). Success returns the
 * provider's answer; every other outcome throws a typed `ApplicationFailure` carrying the evidence.
 */
import { dispatchFailure } from '../failures.js';
import { describeTarget } from '../intent.js';
import type { Action, JsonValue } from '../intent.js';
import { classify, defaultCodeTable, mergeCodeTables } from '../policy/index.js';
import type { CodeTable } from '../policy/index.js';
import { credentialedCall, reportToGates } from './deps.js';
import type { ActivityDeps } from './deps.js';

export interface DispatchInput {
  idempotencyKey: string;
  credential: string;
  action: Action;
  /** 1-based attempt number, sent as `Retryq-Attempt` for the provider's logs. */
  attempt: number;
  timeoutMs: number;
  codes?: CodeTable | undefined;
}

export interface DispatchResult {
  status: number;
  body: JsonValue;
  /** The body was larger than retryq keeps and was cut. */
  truncated: boolean;
  /** The response's `Date` header, if any. */
  date?: string | undefined;
}

export function makeDispatch(deps: ActivityDeps) {
  return async function dispatch(input: DispatchInput): Promise<DispatchResult> {
    const { action } = input;
    const target = describeTarget(action.method, action.url);
    const codes = input.codes ? mergeCodeTables(defaultCodeTable, input.codes) : defaultCodeTable;
    // Header names are case-insensitive: lower-case the intent's own, so that its `Content-Type` or `User-Agent`
    // replaces retryq's default instead of going out as a second header.
    const own = Object.entries(action.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value] as const);
    const headers: Record<string, string> = {
      'user-agent': deps.userAgent ?? 'retryq',
      ...Object.fromEntries(own),
      'idempotency-key': input.idempotencyKey,
      'retryq-attempt': String(input.attempt),
    };
    if (action.body !== undefined) headers['content-type'] ??= 'application/json';
    const outcome = await credentialedCall(deps, input.credential, target, {
      method: action.method,
      url: action.url,
      headers,
      body: action.body === undefined ? undefined : JSON.stringify(action.body),
      timeoutMs: input.timeoutMs,
      purpose: 'dispatch',
    });
    const decision = classify(outcome.evidence, { codes, now: new Date(deps.clock()) });
    await reportToGates(deps, input.credential, 'dispatch', outcome.evidence, decision);
    if (decision.kind === 'success' && outcome.kind === 'response') {
      return {
        status: outcome.evidence.status ?? 200,
        body: outcome.body as JsonValue,
        truncated: outcome.truncated,
        ...(outcome.evidence.headers?.['date'] ? { date: outcome.evidence.headers['date'] } : {}),
      };
    }
    if (decision.kind === 'success') throw new Error('unreachable: success without a response');
    throw dispatchFailure(outcome.evidence, decision, target, outcome.message);
  };
}
