/**
 * The proxy's configuration, validated strictly (the per-request `Retryq-*` headers are read in
 * `request-controls.ts`). Durations are a `Duration`
 * (`'15s'`, `'250ms'`, or ms) at this edge and plain ms numbers (`…Ms`) inside.
 *
 * @module
 */

import { z } from 'zod';
import type { Duration } from '../duration.js';
import { DURATION_HINT, parseDurationMs } from '../duration.js';
import type { BackoffPolicy } from '../policy/index.js';
import { defaultGateMaxClosedMs } from './gate.js';
import { ProxyConfigError, problemsFromZod, valueAtPath } from '../errors.js';
import type { Problem } from '../errors.js';
import { retryqWords } from '../validation-words.js';

/** Validation messages in retryq's words; the value found is in each problem's `received`. */
const wordsBesideReceived = retryqWords({ sayFound: false });

/** The backoff without a usable `Retry-After`: ≈ 250 ms, 500 ms, 1 s, 2 s, 4 s, 8 s, 10 s, 10 s, … ± 20 %. */
export interface BackoffOptions {
  /**
   * The wait before the first retry, before jitter.
   * @default '250ms'
   */
  base?: Duration | undefined;
  /**
   * The longest backoff before jitter; the cap ({@link ProxyOptions.maxWait}) bounds it too.
   * @default '10s'
   */
  max?: Duration | undefined;
  /**
   * Growth per retry: a number ≥ 1.
   * @default 2
   */
  multiplier?: number | undefined;
  /**
   * Relative random spread of each backoff: the wait is multiplied by a factor uniform in
   * `[1 − jitter, 1 + jitter]`. A fraction in `[0, 1]`.
   * @default 0.2
   */
  jitter?: number | undefined;
}

/** The gate (see {@link Gate}). */
export interface GateConfig {
  /**
   * Answer requests locally with 429 while an upstream's `Retry-After` (after a 429) has not passed.
   * @default true
   */
  enabled?: boolean | undefined;
  /**
   * The longest one 429 keeps the gate closed, whatever its `Retry-After` says.
   * @default '1h'
   */
  maxClosed?: Duration | undefined;
}

/** The retry behaviour shared by the proxy and `retryingFetch`. */
export interface RetryOptions {
  /**
   * Retries per request when the caller does not say (`Retryq-Max-Retries` / `maxRetries`): an integer ≥ 0.
   * @default 3 (4 attempts)
   */
  maxRetries?: number | undefined;
  /**
   * The cap: the longest wait before one retry. A server asking for longer (`Retry-After`) gets no
   * early retry: its response is returned at once, `Retry-After` included.
   * @default '15s'
   */
  maxWait?: Duration | undefined;
  /**
   * How long one attempt may wait for the upstream's response headers (and, while the body streams,
   * for each next chunk). No answer in time counts as 408.
   * @default '10s'
   */
  attemptTimeout?: Duration | undefined;
  /** See {@link BackoffOptions}. */
  backoff?: BackoffOptions | undefined;
  /**
   * The gate; `false` turns it off, `true` keeps the defaults.
   * @default { enabled: true, maxClosed: '1h' }
   */
  gate?: boolean | GateConfig | undefined;
}

/** Configuration of `retryq proxy` (flags, a config file, or {@link startProxy}). */
export interface ProxyOptions extends RetryOptions {
  /**
   * Upstream name → base URL. `http://HOST:PORT/NAME/path?query` is forwarded to `URL/path?query`.
   * Names: 1–63 of `A-Z a-z 0-9 _ . -`, starting with a letter or digit, not `metrics` or `healthz`.
   * URLs: absolute `http://` or `https://`, without user:password, query or fragment.
   */
  upstreams: Record<string, string>;
  /**
   * The address to listen on. Loopback by default: exposing the proxy is a deliberate choice.
   * @default '127.0.0.1'
   */
  host?: string | undefined;
  /**
   * The TCP port to listen on; 0 picks a free one.
   * @default 8787
   */
  port?: number | undefined;
  /**
   * The largest `Retryq-Max-Retries` a caller may ask for; larger values are clamped to it, and the
   * response says so (`Retryq-Max-Retries-Clamped`). An integer ≥ 0.
   * @default 10
   */
  maxRetriesCeiling?: number | undefined;
  /**
   * The largest request body of a GET, HEAD or OPTIONS that is buffered so it can be replayed on a
   * retry, in bytes; a larger one gets 413 (or send `Retryq-Max-Retries: 0` to stream it once).
   * @default 1_048_576 (1 MiB)
   */
  maxReplayBodyBytes?: number | undefined;
}

/** {@link RetryOptions} resolved: every default filled in, durations in ms. */
export interface RetrySettings {
  maxRetries: number;
  maxWaitMs: number;
  attemptTimeoutMs: number;
  backoff: BackoffPolicy;
  gate: { enabled: boolean; maxClosedMs: number };
}

/** {@link ProxyOptions} resolved: every default filled in, durations in ms, upstreams parsed. */
export interface ProxySettings extends RetrySettings {
  upstreams: ReadonlyMap<string, Upstream>;
  host: string;
  port: number;
  maxRetriesCeiling: number;
  maxReplayBodyBytes: number;
}

/** One configured upstream. */
export interface Upstream {
  name: string;
  /** `http://host:port` as undici wants it. */
  origin: string;
  /** The URL's path without a trailing slash (`''` for the root). */
  basePath: string;
  /** The URL as configured, for messages. */
  url: string;
}

/** Names that would shadow the proxy's own endpoints. */
const reservedNames: ReadonlySet<string> = new Set(['metrics', 'healthz']);

const durationSchema = (min: number, allowZero: boolean) =>
  z.union([z.number(), z.string()]).transform((value, ctx) => {
    const ms = parseDurationMs(value);
    if (ms === undefined || (!allowZero && ms <= 0) || ms < min) {
      ctx.addIssue({
        code: 'custom',
        message: `must be ${DURATION_HINT}${allowZero ? '' : ', greater than zero'}${min > 0 ? ` (at least ${min} ms)` : ''}`,
      });
      return z.NEVER;
    }
    if (ms > 2_147_483_647) {
      ctx.addIssue({ code: 'custom', message: 'must be at most 2147483647 ms (about 24.8 days)' });
      return z.NEVER;
    }
    return ms;
  });

const countSchema = (max: number) =>
  z
    .number({ error: `must be an integer from 0 to ${max}` })
    .int(`must be an integer from 0 to ${max}`)
    .min(0, `must be an integer from 0 to ${max}`)
    .max(max, `must be an integer from 0 to ${max}`);

const backoffSchema = z.strictObject({
  base: durationSchema(0, true).default(250),
  max: durationSchema(0, true).default(10_000),
  multiplier: z.number().min(1, 'must be a number ≥ 1').max(100, 'must be at most 100').default(2),
  jitter: z.number().min(0, 'must be a fraction from 0 to 1').max(1, 'must be a fraction from 0 to 1').default(0.2),
});

const gateSchema = z.union([
  z.boolean().transform((enabled) => ({ enabled, maxClosedMs: defaultGateMaxClosedMs })),
  z
    .strictObject({
      enabled: z.boolean().default(true),
      maxClosed: durationSchema(0, true).default(defaultGateMaxClosedMs),
    })
    .transform(({ enabled, maxClosed }) => ({ enabled, maxClosedMs: maxClosed })),
]);

const retryShape = {
  maxRetries: countSchema(100).default(3),
  maxWait: durationSchema(0, true).default(15_000),
  attemptTimeout: durationSchema(1, false).default(10_000),
  backoff: backoffSchema.default({ base: 250, max: 10_000, multiplier: 2, jitter: 0.2 }),
  gate: gateSchema.default({ enabled: true, maxClosedMs: defaultGateMaxClosedMs }),
};

const upstreamNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'must be 1–63 of A-Z a-z 0-9 _ . -, starting with a letter or digit')
  .refine((name) => !reservedNames.has(name.toLowerCase()), {
    message: 'is reserved for the proxy (/metrics, /healthz)',
  });

const upstreamUrlSchema = z.string().transform((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be an absolute http:// or https:// URL' });
    return z.NEVER;
  }
  const problems: string[] = [];
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    problems.push(`must use http or https (got ${url.protocol})`);
  if (url.username || url.password) problems.push('must not contain user:password (send credentials as headers)');
  if (url.search || value.includes('?')) problems.push('must not have a query string');
  if (url.hash || value.includes('#')) problems.push('must not have a fragment');
  for (const message of problems) ctx.addIssue({ code: 'custom', message });
  if (problems.length > 0) return z.NEVER;
  return { origin: url.origin, basePath: url.pathname.replace(/\/+$/, ''), url: value };
});

const retrySchema = z.strictObject(retryShape);

const proxySchema = z
  .strictObject({
    ...retryShape,
    upstreams: z
      .record(upstreamNameSchema, upstreamUrlSchema)
      .refine((u) => Object.keys(u).length > 0, { message: 'must name at least one upstream (NAME=URL)' }),
    host: z.string().min(1, 'must be a host name or IP address').default('127.0.0.1'),
    port: z
      .number({ error: 'must be an integer from 0 to 65535' })
      .int('must be an integer from 0 to 65535')
      .min(0, 'must be an integer from 0 to 65535')
      .max(65_535, 'must be an integer from 0 to 65535')
      .default(8787),
    maxRetriesCeiling: countSchema(100).default(10),
    maxReplayBodyBytes: z
      .number()
      .int('must be an integer number of bytes from 0 to 67108864 (64 MiB)')
      .min(0, 'must be an integer number of bytes from 0 to 67108864 (64 MiB)')
      .max(64 * 1024 * 1024, 'must be an integer number of bytes from 0 to 67108864 (64 MiB)')
      .default(1024 * 1024),
  })
  .superRefine((v, ctx) => {
    if (v.maxRetries > v.maxRetriesCeiling) {
      ctx.addIssue({
        code: 'custom',
        path: ['maxRetries'],
        message: `must not exceed maxRetriesCeiling (${v.maxRetriesCeiling})`,
      });
    }
  });

function problemsOf(error: z.ZodError, input: unknown): Problem[] {
  return problemsFromZod(error, {
    message: (issue) => {
      if (issue.code === 'unrecognized_keys') return unknownOptions(issue.keys);
      if (issue.code === 'invalid_type' && valueAtPath(input, issue.path) === undefined) return 'is required';
      if (issue.code === 'invalid_union') return unionMessage(issue) ?? issue.message;
      if (issue.code === 'invalid_key') return `name ${issue.issues.map((i) => i.message).join('; ')}`;
      return issue.message;
    },
  });
}

function unknownOptions(keys: readonly string[]): string {
  return `unknown option(s) ${keys.map((k) => `"${k}"`).join(', ')}`;
}

/** A union issue (Duration, gate) reads best as the message of its most specific branch. */
function unionMessage(issue: z.core.$ZodIssueInvalidUnion): string | undefined {
  for (const branch of issue.errors) {
    const custom = branch.find((i) => i.code === 'custom' || i.code === 'unrecognized_keys');
    if (custom !== undefined) {
      return custom.code === 'unrecognized_keys' ? unknownOptions(custom.keys) : custom.message;
    }
  }
  return undefined;
}

function toRetrySettings(v: z.output<typeof retrySchema>): RetrySettings {
  return {
    maxRetries: v.maxRetries,
    maxWaitMs: v.maxWait,
    attemptTimeoutMs: v.attemptTimeout,
    backoff: {
      baseDelayMs: v.backoff.base,
      maxBackoffMs: v.backoff.max,
      multiplier: v.backoff.multiplier,
      jitter: v.backoff.jitter,
    },
    gate: v.gate,
  };
}

/**
 * Validates {@link RetryOptions} (for `retryingFetch`) and fills in the defaults.
 *
 * @param options - as given by the user
 * @throws ProxyConfigError listing every problem (option path, what is wrong, what is allowed)
 */
export function resolveRetryOptions(options: unknown): RetrySettings {
  const parsed = retrySchema.safeParse(options ?? {}, { error: wordsBesideReceived });
  if (!parsed.success) throw new ProxyConfigError(problemsOf(parsed.error, options ?? {}));
  return toRetrySettings(parsed.data);
}

/**
 * Validates {@link ProxyOptions} (from flags, a config file or code) and fills in the defaults.
 *
 * @param options - as given by the user
 * @throws ProxyConfigError listing every problem (option path, what is wrong, what is allowed)
 * @example
 * resolveProxyOptions({ upstreams: { acme: 'https://api.acme.test/v1' } }).maxWaitMs; // 15000
 * resolveProxyOptions({ upstreams: {}, maxWait: 'soon' }); // throws: upstreams: must name at least one …; maxWait: must be a duration …
 */
export function resolveProxyOptions(options: unknown): ProxySettings {
  const parsed = proxySchema.safeParse(options, { error: wordsBesideReceived });
  if (!parsed.success) throw new ProxyConfigError(problemsOf(parsed.error, options));
  const v = parsed.data;
  const upstreams = new Map<string, Upstream>();
  for (const [name, u] of Object.entries(v.upstreams)) upstreams.set(name, { name, ...u });
  return {
    ...toRetrySettings(v),
    upstreams,
    host: v.host,
    port: v.port,
    maxRetriesCeiling: v.maxRetriesCeiling,
    maxReplayBodyBytes: v.maxReplayBodyBytes,
  };
}
