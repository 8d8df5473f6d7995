/**
 * The proxy's configuration and per-request headers, validated strictly. Durations are a `Duration`
 * (`'15s'`, `'250ms'`, or ms) at this edge and plain ms numbers (`…Ms`) inside.
 *
 * @module
 */

import { z } from 'zod';
import type { Duration } from '../duration.js';
import { DURATION_HINT, parseDurationMs } from '../duration.js';
import type { BackoffPolicy } from '../policy/index.js';
import { defaultGateMaxClosedMs } from './gate.js';
import { proxyHeaderPrefix } from './headers.js';
import { formatIssuePath, valueAtPath } from '../issue-path.js';

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

/** One problem with a configuration: where and what is wrong, and what is allowed. */
export interface ConfigIssue {
  /** The option path, e.g. `upstreams.acme` or `backoff.jitter`. */
  path: string;
  /** What is wrong and what is allowed. */
  message: string;
}

/** The proxy (or `retryingFetch`) configuration is invalid; `issues` lists every problem found. */
export class ProxyConfigError extends Error {
  override readonly name = 'ProxyConfigError';
  constructor(readonly issues: readonly ConfigIssue[]) {
    super(
      `Invalid proxy configuration (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n` +
        issues.map((i) => `  - ${i.path || '(root)'}: ${i.message}`).join('\n'),
    );
  }
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

function issuesOf(error: z.ZodError, input: unknown): ConfigIssue[] {
  return error.issues.map((issue) => {
    let message = issue.message;
    if (issue.code === 'unrecognized_keys') message = `unknown option(s) ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
    else if (issue.code === 'invalid_type' && valueAtPath(input, issue.path) === undefined) message = 'is required';
    else if (issue.code === 'invalid_union') message = unionMessage(issue) ?? message;
    else if (issue.code === 'invalid_key') message = `name ${issue.issues.map((i) => i.message).join('; ')}`;
    return { path: formatIssuePath(issue.path), message };
  });
}

/** A union issue (Duration, gate) reads best as the message of its most specific branch. */
function unionMessage(issue: z.core.$ZodIssueInvalidUnion): string | undefined {
  for (const branch of issue.errors) {
    const custom = branch.find((i) => i.code === 'custom' || i.code === 'unrecognized_keys');
    if (custom !== undefined) {
      return custom.code === 'unrecognized_keys'
        ? `unknown option(s) ${custom.keys.map((k) => `"${k}"`).join(', ')}`
        : custom.message;
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
  const parsed = retrySchema.safeParse(options ?? {});
  if (!parsed.success) throw new ProxyConfigError(issuesOf(parsed.error, options ?? {}));
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
  const parsed = proxySchema.safeParse(options);
  if (!parsed.success) throw new ProxyConfigError(issuesOf(parsed.error, options));
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

/** The request headers that steer the proxy. */
export const proxyRequestHeaders = {
  maxRetries: 'Retryq-Max-Retries',
  deadlineMs: 'Retryq-Deadline-Ms',
} as const;

/** What the `Retryq-*` request headers of one request say. */
export interface RequestControls {
  /** Retries allowed for this request, after clamping. */
  maxRetries: number;
  /** The value asked for when it was clamped to the ceiling, else `undefined`. */
  clampedFrom: string | undefined;
  /** The caller's remaining time budget, in ms, when it sent one. */
  budgetMs: number | undefined;
}

/** A bad `Retryq-*` request header: which, what was seen, what is allowed. */
export interface HeaderProblem {
  header: string;
  /** The value seen, cut to 64 characters. */
  got: string;
  /** What is wrong and what is allowed. */
  rule: string;
}

const maxBudgetMs = 2_147_483_647;

/**
 * Reads the `Retryq-*` request headers strictly. `Retryq-Max-Retries` is digits only (after trimming
 * spaces and tabs): 0 turns retries off, a value above `ceiling` is clamped. `Retryq-Deadline-Ms` is
 * the caller's remaining budget, digits only, 1 to 2147483647. Each may appear once; any other
 * `Retryq-*` header is an error, so a misspelt control does not pass silently.
 *
 * @param rawHeaders - the request's raw `[name, value, …]` list
 * @param defaults - the configured default and ceiling
 * @returns the controls, or the first problem found
 * @example
 * readRequestControls(['Retryq-Max-Retries', '50'], { maxRetries: 3, ceiling: 10 });
 * // { ok: true, controls: { maxRetries: 10, clampedFrom: '50', budgetMs: undefined } }
 */
export function readRequestControls(
  rawHeaders: readonly string[],
  defaults: { maxRetries: number; ceiling: number },
): { ok: true; controls: RequestControls } | { ok: false; problem: HeaderProblem } {
  let maxRetries = defaults.maxRetries;
  let clampedFrom: string | undefined;
  let budgetMs: number | undefined;
  let seenRetries = false;
  let seenDeadline = false;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (
      name.length < proxyHeaderPrefix.length ||
      name.slice(0, proxyHeaderPrefix.length).toLowerCase() !== proxyHeaderPrefix
    )
      continue;
    const lower = name.toLowerCase();
    const raw = rawHeaders[i + 1] as string;
    const value = raw.replace(/^[ \t]+|[ \t]+$/g, '');
    if (lower === 'retryq-max-retries') {
      const header = proxyRequestHeaders.maxRetries;
      if (seenRetries) return problem(header, raw, 'must appear at most once');
      seenRetries = true;
      if (!/^[0-9]+$/.test(value)) {
        return problem(
          header,
          raw,
          `must be a whole number of retries ≥ 0 (digits only; 0 turns retries off; at most ${defaults.ceiling} are used)`,
        );
      }
      const asked = Number(value);
      if (asked > defaults.ceiling) {
        maxRetries = defaults.ceiling;
        clampedFrom = value.length > 64 ? `${value.slice(0, 64)}…` : value;
      } else {
        maxRetries = asked;
      }
    } else if (lower === 'retryq-deadline-ms') {
      const header = proxyRequestHeaders.deadlineMs;
      if (seenDeadline) return problem(header, raw, 'must appear at most once');
      seenDeadline = true;
      const ms = /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
      if (!(ms >= 1 && ms <= maxBudgetMs)) {
        return problem(
          header,
          raw,
          `must be the remaining time budget in whole milliseconds, from 1 to ${maxBudgetMs}`,
        );
      }
      budgetMs = ms;
    } else {
      return problem(
        name,
        raw,
        `is not a retryq header; allowed: ${proxyRequestHeaders.maxRetries}, ${proxyRequestHeaders.deadlineMs}`,
      );
    }
  }
  return { ok: true, controls: { maxRetries, clampedFrom, budgetMs } };
}

function problem(header: string, got: string, rule: string): { ok: false; problem: HeaderProblem } {
  return { ok: false, problem: { header, got: got.length > 64 ? `${got.slice(0, 64)}…` : got, rule } };
}
