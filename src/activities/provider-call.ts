/**
 * One HTTP call to a provider, turned into {@link Evidence}: the single place that knows how undici reports
 * failures and whether a request may have reached the provider. Used by the dispatch and inspect activities.
 *
 * @example
 * ```ts
 * import { Agent } from 'undici';
 * import { callProvider } from './provider-call.js';
 * const outcome = await callProvider({ dispatcher: new Agent(), method: 'GET', url: 'https://api.example.com/v1/ping',
 *   headers: {}, timeoutMs: 5000, purpose: 'inspect', clock: Date.now });
 * if (outcome.kind === 'response') console.log(outcome.evidence.status);
 * ```
 */
import { request } from 'undici';
import type { Dispatcher } from 'undici';
import { z } from 'zod';
import { transportFailureOf } from '../policy/index.js';
import type { Evidence, Purpose } from '../policy/index.js';

/** Most bytes of a response body retryq reads and keeps. */
export const MAX_BODY_BYTES = 64 * 1024;

export interface ProviderCall {
  dispatcher: Dispatcher;
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string | undefined;
  timeoutMs: number;
  purpose: Purpose;
  /** ms since the epoch; stamps `receivedAtMs`. */
  clock: () => number;
  /** Aborts the call (activity cancellation). */
  signal?: AbortSignal | undefined;
  /**
   * Secrets sent with the call ({@link secretsOf} the credential's headers). A provider may quote them back ("Incorrect
   * API key provided: sk_…", or an echo of the request); they are cut from the body and messages before anything
   * leaves this function, so they never reach failure details, results or workflow history (invariant 9).
   */
  redact?: readonly string[] | undefined;
  /**
   * A header the credential's config names as the provider's bucket header (e.g. `x-shopify-bucket`): kept with the
   * rate-limit headers. Compared case-insensitively.
   */
  bucketHeader?: string | undefined;
}

/** Most rate-limit headers kept from one response, and the most characters kept of each value. */
const MAX_LIMIT_HEADERS = 24;
const MAX_LIMIT_HEADER_CHARS = 256;

/**
 * The headers load control learns limits from (`RateLimit*`, `X-RateLimit-*`, the configured bucket header, and
 * `Date` for epoch resets), by lower-case name. They stay in the activity: they are parsed there and reported to load
 * control, and never enter the evidence (so never workflow history).
 */
export function rateLimitHeadersOf(
  raw: Record<string, string | string[] | undefined>,
  bucketHeader?: string,
): Record<string, string> {
  const extra = bucketHeader?.toLowerCase();
  const out: Record<string, string> = {};
  let kept = 0;
  for (const [name, v] of Object.entries(raw)) {
    const lower = name.toLowerCase();
    if (!(lower.startsWith('ratelimit') || lower.startsWith('x-ratelimit-') || lower === 'date' || lower === extra))
      continue;
    const value = Array.isArray(v) ? v.join(', ') : v;
    if (typeof value !== 'string') continue;
    out[lower] = value.slice(0, MAX_LIMIT_HEADER_CHARS);
    if (++kept >= MAX_LIMIT_HEADERS) break;
  }
  return out;
}

export type ProviderOutcome =
  | {
      kind: 'response';
      evidence: Evidence;
      /** The rate-limit headers ({@link rateLimitHeadersOf}): not part of the evidence, so never in history. */
      rateLimitHeaders: Record<string, string>;
      /** Parsed JSON when the body was JSON, else the text (bounded by {@link MAX_BODY_BYTES}). */
      body: unknown;
      truncated: boolean;
      /** A message from the provider's error body, for people. */
      message: string | undefined;
    }
  | { kind: 'no_response'; evidence: Evidence; message: string };

/** Common provider error envelopes: `{error:{code,message}}`, `{error:{type}}`, `{code}`, `{errors:[{code}]}`. */
const errorEnvelope = z.union([
  z.object({
    error: z.object({
      code: z.union([z.string(), z.number()]).optional(),
      type: z.string().optional(),
      message: z.string().optional(),
    }),
  }),
  z.object({ error: z.string(), message: z.string().optional() }),
  z.object({
    errors: z.array(z.object({ code: z.union([z.string(), z.number()]), message: z.string().optional() })).min(1),
  }),
  z.object({ code: z.union([z.string(), z.number()]), message: z.string().optional() }),
]);

/** The structured error code and message of an error body, when it has one. */
export function readErrorCode(body: unknown): { code?: string; message?: string } {
  const parsed = errorEnvelope.safeParse(body);
  if (!parsed.success) return {};
  const v = parsed.data;
  const pick = (code: string | number | undefined, message: string | undefined) => ({
    ...(code !== undefined && String(code).length <= 200 ? { code: String(code) } : {}),
    ...(message !== undefined ? { message: message.slice(0, 500) } : {}),
  });
  if ('errors' in v) return pick(v.errors[0]?.code, v.errors[0]?.message);
  if ('error' in v && typeof v.error === 'object') {
    // A code wins over a type; `type: 'error'`-style generic types are not codes.
    const code = v.error.code ?? (v.error.type && v.error.type !== 'error' ? v.error.type : undefined);
    return pick(code, v.error.message);
  }
  if ('error' in v && typeof v.error === 'string') return pick(v.error, 'message' in v ? v.message : undefined);
  if ('error' in v) return {};
  return pick(v.code, v.message);
}

async function readBounded(
  body: AsyncIterable<Buffer> & { destroy?: () => void },
): Promise<{ text: string; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const room = MAX_BODY_BYTES - size;
    if (chunk.length > room) {
      chunks.push(chunk.subarray(0, room));
      body.destroy?.();
      return { text: Buffer.concat(chunks).toString('utf8'), truncated: true };
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { text: Buffer.concat(chunks).toString('utf8'), truncated: false };
}

/** What a redacted secret is replaced with. */
export const REDACTED = '[redacted]';

/** The secret parts of authentication headers: each value, and the token after a scheme (`Bearer <token>`). */
export function secretsOf(authHeaders: Readonly<Record<string, string>>): string[] {
  const secrets = new Set<string>();
  for (const value of Object.values(authHeaders)) {
    secrets.add(value);
    const tokens = value.trim().split(/\s+/);
    if (tokens.length > 1) for (const token of tokens.slice(1)) secrets.add(token);
  }
  // Longest first, so a full header value is replaced before its token; very short values are not secrets.
  return [...secrets].filter((s) => s.length >= 4).sort((a, b) => b.length - a.length);
}

/** `value` with every occurrence of each secret replaced by {@link REDACTED}, in strings (and keys) at any depth. */
export function redactSecrets<T>(value: T, secrets: readonly string[] | undefined): T {
  if (!secrets || secrets.length === 0) return value;
  const inString = (text: string) => secrets.reduce((t, secret) => t.split(secret).join(REDACTED), text);
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return inString(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object')
      return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [inString(k), walk(x)]));
    return v;
  };
  return walk(value) as T;
}

/** Performs the call and reports what happened as evidence; never throws for network or HTTP failures. */
export async function callProvider(call: ProviderCall): Promise<ProviderOutcome> {
  const timeout = AbortSignal.timeout(call.timeoutMs);
  const signal = call.signal ? AbortSignal.any([timeout, call.signal]) : timeout;
  const base = { method: call.method.toUpperCase(), purpose: call.purpose } as const;
  let res: Dispatcher.ResponseData;
  try {
    res = await request(call.url, {
      dispatcher: call.dispatcher,
      method: call.method.toUpperCase(),
      headers: call.headers,
      body: call.body ?? null,
      signal,
      headersTimeout: call.timeoutMs,
      bodyTimeout: call.timeoutMs,
    });
  } catch (err) {
    const { transport, sent } = transportFailureOf(err);
    return {
      kind: 'no_response',
      evidence: { ...base, transport, sent, receivedAtMs: call.clock() },
      message: redactSecrets(err instanceof Error ? err.message : String(err), call.redact),
    };
  }
  let text: string;
  let truncated: boolean;
  try {
    ({ text, truncated } = await readBounded(res.body));
  } catch (err) {
    // Headers arrived but the body broke off: the provider did answer with this status.
    text = '';
    truncated = true;
    void err;
  }
  const headers: Record<string, string> = {};
  for (const name of ['retry-after', 'date'] as const) {
    const v = res.headers[name];
    const value = Array.isArray(v) ? v[0] : v;
    if (typeof value === 'string') headers[name] = value.slice(0, 200);
  }
  let body: unknown = text;
  const contentType = String(res.headers['content-type'] ?? '');
  if (!truncated && (contentType.includes('json') || /^\s*[{[]/.test(text))) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  body = redactSecrets(body, call.redact);
  const ok = res.statusCode >= 200 && res.statusCode <= 299;
  const { code, message } = ok ? {} : readErrorCode(body);
  return {
    kind: 'response',
    evidence: {
      ...base,
      status: res.statusCode,
      headers,
      ...(code !== undefined ? { code } : {}),
      sent: 'yes',
      receivedAtMs: call.clock(),
    },
    rateLimitHeaders: rateLimitHeadersOf(res.headers, call.bucketHeader),
    body,
    truncated,
    message,
  };
}
