/**
 * The scenario: every knob of the simulated provider, validated by zod. Loaded from JSON or
 * YAML (`loadScenarioFile`), passed to `startProviderSim`, or replaced at runtime
 * (`setScenario`, `PUT /_sim/scenario`). Invalid input raises a `ScenarioError` whose issues name
 * the field path, the value found and what is allowed.
 */
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import YAML from 'yaml';
import { z } from 'zod';
import { DEFAULT_WEBHOOK_SECRET } from './webhooks.js';
import { relativeHttpDateOffsetMs } from './retry-after.js';
import type { RetryAfterSpec } from './retry-after.js';
import { ScenarioError, problemsFromZod } from '../errors.js';

/** Methods that make a request an operation (a write with a side effect). */
export const writeMethods = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** A write method. */
export type WriteMethod = (typeof writeMethods)[number];
/** Methods a rule may match: the writes, plus `GET` for the operation status endpoint. */
export const ruleMethods = [...writeMethods, 'GET'] as const;
/** A method a rule may match. */
export type RuleMethod = (typeof ruleMethods)[number];

/** An error answer scripted by a rule step. */
export interface StatusStep {
  /** HTTP status, 400–599. */
  status: number;
  /** `error.code`; @default derived from the status (503 → `service_unavailable`, …). */
  code?: string;
  /** `error.type`; @default derived from the status. */
  type?: string;
  /** `error.message`; @default a sentence naming the status. */
  message?: string;
  /** Replaces the whole JSON response body (to test odd provider bodies). */
  body?: Record<string, unknown>;
  /** `Retry-After` header to send; see `RetryAfterSpec`. */
  retryAfter?: RetryAfterSpec;
  /** Extra response headers. */
  headers?: Record<string, string>;
  /** Wait this long (ms) before answering. @default 0 */
  delayMs?: number;
  /**
   * Save this error as the outcome of the request's idempotency key (status `failed`), so the
   * status endpoint reports it and replays of the key return it. @default false
   */
  record?: boolean;
}
/** Execute the operation (side effect counted), then lose the answer. */
export interface CommitThenStep {
  /** `timeout`: hold the socket open; `reset`: destroy it; 500/502/504: answer that error. */
  commitThen: 'timeout' | 'reset' | 500 | 502 | 504;
}
/** Destroy the socket before executing (no side effect). */
export interface ResetStep {
  reset: true;
}
/** Answer normally after a delay (the key is `pending`, and a concurrent replay gets 409). */
export interface DelayStep {
  delayMs: number;
}
/** One scripted answer. */
export type Step = 'normal' | StatusStep | CommitThenStep | ResetStep | DelayStep;

/** Which requests a rule applies to; all given conditions must hold. */
export interface RuleMatch {
  /** Glob on the `Idempotency-Key` (`*` any run, `?` one character). */
  idempotencyKey?: string;
  /** Prefix of the `Idempotency-Key`. */
  idempotencyKeyPrefix?: string;
  /** Method or methods. @default the write methods (a `GET` rule must say `GET`) */
  method?: RuleMethod | RuleMethod[];
  /** Prefix of the request path, e.g. `/v1/charges`. */
  pathPrefix?: string;
  /** An API key, by its secret or its `id`. */
  apiKey?: string;
}

const positiveInt = z.int().min(1);
const nonNegativeInt = z.int().min(0);
const durationMs = z
  .int()
  .min(0)
  .max(24 * 3_600_000);

/** A strict object whose unknown-field error lists the allowed fields. */
function strictObject<S extends z.ZodRawShape>(shape: S) {
  const allowed = Object.keys(shape).join(', ');
  return z.strictObject(shape, {
    error: (issue) => (issue.code === 'unrecognized_keys' ? `unknown field; allowed fields: ${allowed}` : undefined),
  });
}

/**
 * A value of one of several shapes, chosen by `pick` from the raw value, so errors come from the
 * one shape the author evidently meant instead of zod's generic "invalid union".
 */
function oneOf<T>(expected: string, pick: (value: unknown) => z.ZodType<T> | undefined): z.ZodType<T, T> {
  const schema = z.unknown().transform((value, ctx): T => {
    const chosen = pick(value);
    if (!chosen) {
      ctx.addIssue({ code: 'custom', message: `expected ${expected}` });
      return z.NEVER;
    }
    const parsed = chosen.safeParse(value);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) {
      ctx.addIssue({ ...issue, path: [...issue.path] });
    }
    return z.NEVER;
  });
  return schema as unknown as z.ZodType<T, T>;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const headerValue = z
  .string()
  .max(1_000)
  .regex(/^[\t\x20-\x7e\x80-\xff]*$/, 'expected a header value (no line breaks or control characters)');

const relativeDateString = headerValue.refine((s) => relativeHttpDateOffsetMs(s) !== null, {
  message: "a relative HTTP-date must look like 'http-date:+120s' (units ms, s, m, h; sign required)",
});

const retryAfterSchema: z.ZodType<RetryAfterSpec, RetryAfterSpec> = oneOf<RetryAfterSpec>(
  "a number of seconds, a string (sent as is; 'http-date:+120s' for a date relative to the server clock) " +
    "or { httpDate: 'imf' | 'rfc850' | 'asctime', inSeconds: number }",
  (value) => {
    if (typeof value === 'number') return z.number().finite();
    if (typeof value === 'string') return relativeDateString;
    if (isRecord(value)) {
      return strictObject({ httpDate: z.enum(['imf', 'rfc850', 'asctime']), inSeconds: z.number().finite() });
    }
    return undefined;
  },
);

const errorStatus = z
  .int()
  .min(400, 'expected an HTTP error status from 400 to 599')
  .max(599, 'expected an HTTP error status from 400 to 599');

const statusStepSchema = strictObject({
  status: errorStatus,
  code: z.string().min(1).max(200).optional(),
  type: z.string().min(1).max(200).optional(),
  message: z.string().max(2_000).optional(),
  body: z.record(z.string(), z.unknown()).optional(),
  retryAfter: retryAfterSchema.optional(),
  headers: z
    .record(z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'expected an HTTP header name'), headerValue)
    .optional(),
  delayMs: durationMs.optional(),
  record: z.boolean().optional(),
});

const stepShapes = "'normal' or an object with one of: status, commitThen, reset, delayMs";
const stepSchema: z.ZodType<Step, Step> = oneOf<Step>(stepShapes, (value) => {
  if (typeof value === 'string') return z.literal('normal', `expected ${stepShapes}`);
  if (!isRecord(value)) return undefined;
  if ('status' in value) return statusStepSchema as z.ZodType<StatusStep>;
  if ('commitThen' in value) {
    return strictObject({
      commitThen: z.literal(['timeout', 'reset', 500, 502, 504], "expected one of 'timeout', 'reset', 500, 502, 504"),
    });
  }
  if ('reset' in value) return strictObject({ reset: z.literal(true, 'expected true') });
  if ('delayMs' in value) return strictObject({ delayMs: durationMs });
  return undefined;
});

const ruleMethodEnum = z.enum(ruleMethods, `expected one of ${ruleMethods.join(', ')} (upper case)`);
const ruleMethodSchema: z.ZodType<RuleMethod | RuleMethod[], RuleMethod | RuleMethod[]> = oneOf<
  RuleMethod | RuleMethod[]
>(`a method (${ruleMethods.join(', ')}) or a list of them`, (value) => {
  if (typeof value === 'string') return ruleMethodEnum;
  if (Array.isArray(value)) return z.array(ruleMethodEnum).min(1);
  return undefined;
});

const ruleSchema = strictObject({
  /** A label shown in errors and docs. */
  name: z.string().optional(),
  match: strictObject({
    idempotencyKey: z.string().min(1).max(1_000).optional(),
    idempotencyKeyPrefix: z.string().max(1_000).optional(),
    method: ruleMethodSchema.optional(),
    pathPrefix: z.string().startsWith('/', "expected a path starting with '/'").optional(),
    apiKey: z.string().min(1).optional(),
  }).default({}),
  /** Consumed one per matching request. */
  steps: z.array(stepSchema).min(1, 'expected at least one step'),
  /** After the last step: `repeat` it, or fall back to `normal` behaviour. */
  then: z.enum(['repeat', 'normal']).default('repeat'),
  /** Whether each idempotency key walks the steps on its own (`idempotencyKey`) or all share one sequence (`rule`). */
  per: z.enum(['idempotencyKey', 'rule']).default('idempotencyKey'),
});

const apiKeySchema = strictObject({
  /** The secret clients send as `Authorization: Bearer <key>`. */
  key: z
    .string()
    .min(1)
    .max(500)
    .regex(/^[\x21-\x7e]+$/, 'expected printable ASCII without spaces'),
  /** Label used in metrics and operations instead of the secret. @default the key itself */
  id: z.string().min(1).max(200).optional(),
  /** `denied`: every request with this key gets 403 `permission_denied`. @default 'allowed' */
  permission: z.enum(['allowed', 'denied']).default('allowed'),
  /** Write requests per minute (sliding window). @default the scenario's `rateLimitPerMinute` */
  rateLimitPerMinute: positiveInt.max(1_000_000).optional(),
  /** Status-endpoint reads per minute. @default the scenario's `inspectPerMinute` */
  inspectPerMinute: positiveInt.max(1_000_000).optional(),
  /** Billable operations (executions) this key may make; beyond it 402. @default unlimited */
  spendLimit: nonNegativeInt.optional(),
  /** Workspace whose allowance this key draws on. @default 'default' */
  workspace: z.string().min(1).max(200).default('default'),
});

/** The write-limit algorithms (`rateLimit.algorithm`). */
export const limitAlgorithms = ['sliding-window', 'fixed-window', 'token-bucket'] as const;
/** The rate-limit header formats (`rateLimit.headers`). */
export const limitHeaderFormats = ['none', 'ietf', 'ietf-draft', 'x-ratelimit-seconds', 'x-ratelimit-epoch'] as const;
const bucketHeaders = ['X-RateLimit-Bucket', 'X-RateLimit-Resource', 'none'] as const;

const routeBucketSchema = strictObject({
  /** The bucket's name, sent in the bucket header and as the IETF policy name. */
  name: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9._~-]+$/, 'expected a bucket name of letters, digits and . _ ~ -'),
  /** Writes whose path starts with this fall in the bucket. */
  pathPrefix: z.string().startsWith('/', "expected a path starting with '/'"),
  /** Only writes of this method or these methods. @default every write method */
  method: ruleMethodSchema.optional(),
  /** Writes per minute in this bucket, per key. */
  perMinute: z
    .int({
      error: (issue) => (issue.input === undefined ? 'required: writes per minute, a whole number ≥ 1' : undefined),
    })
    .min(1)
    .max(1_000_000),
  /** Token bucket only: writes at once. @default perMinute */
  burst: positiveInt.max(1_000_000).optional(),
});

/** How the provider limits writes and what it says about it (see docs/provider-sim.md, "Rate limit"). */
const rateLimitSchema = strictObject({
  /** How writes are counted. @default 'sliding-window' */
  algorithm: z.enum(limitAlgorithms, `expected one of ${limitAlgorithms.join(', ')}`).default('sliding-window'),
  /** Token bucket only: how many writes may come at once, per key. @default the key's limit per minute */
  burst: positiveInt.max(1_000_000).optional(),
  /** Rate-limit headers on every write answer. @default 'none' */
  headers: z.enum(limitHeaderFormats, `expected one of ${limitHeaderFormats.join(', ')}`).default('none'),
  /** The header naming a write's bucket; `none` sends no bucket and no global flag. @default 'X-RateLimit-Bucket' */
  bucketHeader: z.enum(bucketHeaders, `expected one of ${bucketHeaders.join(', ')}`).default('X-RateLimit-Bucket'),
  /** Route buckets, each with its own limit per key; the first match wins. @default [] */
  buckets: z.array(routeBucketSchema).max(100).default([]),
}).superRefine((limits, ctx) => {
  const seen = new Set<string>();
  limits.buckets.forEach((b, i) => {
    if (seen.has(b.name)) {
      ctx.addIssue({
        code: 'custom',
        path: ['buckets', i, 'name'],
        message: 'duplicate bucket name; names must be unique',
      });
    }
    seen.add(b.name);
    if (b.burst !== undefined && limits.algorithm !== 'token-bucket') {
      ctx.addIssue({
        code: 'custom',
        path: ['buckets', i, 'burst'],
        message: "burst applies only to algorithm 'token-bucket'",
      });
    }
  });
  if (limits.burst !== undefined && limits.algorithm !== 'token-bucket') {
    ctx.addIssue({ code: 'custom', path: ['burst'], message: "burst applies only to algorithm 'token-bucket'" });
  }
});

/** The scenario schema (input: what authors write; output: with defaults filled in). */
export const scenarioSchema = strictObject({
  /** API keys the provider accepts. @default one key `sk_test_acme` with id `acme-prod` */
  keys: z
    .array(apiKeySchema)
    .min(1, 'expected at least one API key')
    .default([{ key: 'sk_test_acme', id: 'acme-prod', permission: 'allowed', workspace: 'default' }]),
  /** Default write limit per key per minute (over 60 s, counted as `rateLimit.algorithm` says). @default 600 */
  rateLimitPerMinute: positiveInt.max(1_000_000).default(600),
  /**
   * How writes are limited (sliding window, fixed window or token bucket), which rate-limit headers
   * answers carry, and per-route buckets. @default sliding window, no headers, no buckets
   */
  rateLimit: rateLimitSchema.prefault({}),
  /** Default status-endpoint read budget per key per minute. @default 300 */
  inspectPerMinute: positiveInt.max(1_000_000).default(300),
  /** How the admission gate writes `Retry-After` on its 429s. @default 'seconds' */
  retryAfterFormat: z.enum(['seconds', 'http-date']).default('seconds'),
  /** Server clock skew in ms, applied to `Date`, HTTP-date `Retry-After` and `createdAt`. @default 0 */
  clockOffsetMs: z
    .int()
    .min(-365 * 86_400_000)
    .max(365 * 86_400_000)
    .default(0),
  /** `false`: a careless provider that executes every request, even replays. @default true */
  honorIdempotencyKeys: z.boolean().default(true),
  /** Extra latency (ms) before every executed operation. @default 0 */
  latencyMs: durationMs.default(0),
  /** Billable operations allowed per workspace; beyond it 403 `workspace_allowance_exhausted`. @default unlimited */
  workspaceAllowance: nonNegativeInt.optional(),
  /** Scripted answers; the first matching rule wins. @default [] */
  rules: z.array(ruleSchema).default([]),
  /** Refused-connection windows, from when the scenario was applied. @default [] */
  outages: z.array(strictObject({ afterMs: durationMs, durationMs: durationMs.min(1) })).default([]),
  /** Windows in which every write is answered with an error (503 by default). @default [] */
  bursts: z
    .array(
      strictObject({
        afterMs: durationMs,
        durationMs: durationMs.min(1),
        status: errorStatus.default(503),
        code: z.string().min(1).max(200).optional(),
        retryAfter: retryAfterSchema.optional(),
      }),
    )
    .default([]),
  /** Where completion webhooks go. @default none */
  webhookUrl: z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' }).optional(),
  /** Deliberate extra deliveries of each event, with the same delivery id. @default 0 */
  webhookRedeliveries: nonNegativeInt.max(100).default(0),
  /** Attempts per delivery while the receiver does not answer 2xx. @default 5 */
  webhookMaxAttempts: positiveInt.max(100).default(5),
  /** First backoff (ms) between webhook attempts; doubles, capped at 30 s. @default 200 */
  webhookBackoffMs: durationMs.default(200),
  /** Per-attempt webhook timeout (ms). @default 5000 */
  webhookTimeoutMs: positiveInt.max(600_000).default(5_000),
  /** Standard Webhooks signing secret (`whsec_` + base64). @default {@link DEFAULT_WEBHOOK_SECRET} */
  webhookSecret: z
    .string()
    .regex(/^(whsec_)?[A-Za-z0-9+/]{16,}={0,2}$/, 'expected a Standard Webhooks secret: "whsec_" followed by base64')
    .default(DEFAULT_WEBHOOK_SECRET),
  /** Forged deliveries (signed with another secret, claiming `failed`) sent before each event. @default 0 */
  webhookForged: nonNegativeInt.max(10).default(0),
  /** Stale deliveries (correctly signed, timestamp 10 minutes old) sent before each event. @default 0 */
  webhookStale: nonNegativeInt.max(10).default(0),
  /** After each event, also deliver an older `operation.pending` event for it (out of order). @default false */
  webhookOutOfOrder: z.boolean().default(false),
  /** Serve the `/_sim/` admin endpoints. @default true */
  admin: z.boolean().default(true),
  /** Operations kept in memory; the oldest are forgotten beyond this. @default 100000 */
  maxOperations: positiveInt.max(10_000_000).default(100_000),
}).superRefine((scenario, ctx) => {
  const seenKeys = new Set<string>();
  const seenIds = new Set<string>();
  scenario.keys.forEach((k, i) => {
    const id = k.id ?? k.key;
    if (seenKeys.has(k.key)) {
      ctx.addIssue({
        code: 'custom',
        path: ['keys', i, 'key'],
        message: 'duplicate API key; each key may appear once',
      });
    } else if (seenIds.has(id)) {
      ctx.addIssue({
        code: 'custom',
        path: ['keys', i, k.id === undefined ? 'key' : 'id'],
        message: 'duplicate key id (the id defaults to the key); ids must be unique',
      });
    }
    seenKeys.add(k.key);
    seenIds.add(id);
  });
});

/** A scenario as written by an author (every field optional). */
export type ScenarioInput = z.input<typeof scenarioSchema>;
/** A validated scenario with defaults filled in. */
export type Scenario = z.output<typeof scenarioSchema>;
/** Top-level fields to replace in the current scenario. */
export type ScenarioPatch = Partial<ScenarioInput>;
/** One configured API key (validated). */
export type ApiKeyConfig = Scenario['keys'][number];
/** How writes are limited (validated). */
export type RateLimitConfig = Scenario['rateLimit'];
/** One rule (validated). */
export type Rule = Scenario['rules'][number];

/** True for a `ScenarioError` (by its code, so it works across module copies). */
export function isScenarioError(error: unknown): error is ScenarioError {
  return error instanceof Error && (error as { code?: unknown }).code === 'invalid_scenario';
}

function problemsOf(error: z.ZodError, input: unknown) {
  return problemsFromZod(error, { input, received: true, splitUnknownKeys: true });
}

/** Validates a scenario; throws `ScenarioError` naming each bad field. */
export function parseScenario(input: unknown, source = 'scenario'): Scenario {
  const parsed = scenarioSchema.safeParse(input ?? {});
  if (!parsed.success) throw new ScenarioError(problemsOf(parsed.error, input ?? {}), source);
  return parsed.data;
}

/** The current scenario with some top-level fields replaced, validated again. */
export function patchScenario(current: Scenario, patch: unknown, source = 'scenario update'): Scenario {
  if (!isRecord(patch)) {
    throw new ScenarioError([{ path: '', message: 'expected an object of scenario fields', received: patch }], source);
  }
  const merged: Record<string, unknown> = { ...current, ...patch };
  const parsed = scenarioSchema.safeParse(merged);
  if (!parsed.success) throw new ScenarioError(problemsOf(parsed.error, merged), source);
  return parsed.data;
}

/** Parses scenario text: JSON for `.json`, YAML otherwise (YAML also reads JSON). */
export function parseScenarioText(text: string, source = 'scenario', format?: 'json' | 'yaml'): Scenario {
  let data: unknown;
  try {
    data = format === 'json' ? JSON.parse(text) : YAML.parse(text);
  } catch (error) {
    const what = format === 'json' ? 'JSON' : 'YAML';
    const detail = error instanceof Error ? error.message : String(error);
    throw new ScenarioError([{ path: '', message: `not valid ${what}: ${detail}` }], source);
  }
  return parseScenario(data, source);
}

/** Reads and validates a scenario file (`.json`, `.yaml` or `.yml`). */
export async function loadScenarioFile(path: string): Promise<Scenario> {
  const text = await readFile(path, 'utf8');
  return parseScenarioText(text, path, extname(path).toLowerCase() === '.json' ? 'json' : 'yaml');
}
