/**
 * The rate-limit headers a provider sends, read as strictly as `Retry-After`: the IETF fields of
 * draft-ietf-httpapi-ratelimit-headers (the current Structured Field form and the earlier drafts'
 * forms) and the common `X-RateLimit-*` family with its bucket and scope names. The result is plain
 * data, so it can travel in dispatch evidence and workflow history.
 *
 * The one rule every branch keeps: **a malformed value is ignored and never makes retryq faster.**
 * A malformed remaining is not "plenty" (it is absent), a reset in the past is not "now" (it is
 * absent), a malformed bucket or global flag leaves the limit on the whole credential, and absurd
 * numbers are bounded. What was ignored is listed, with the reason, in `ignored`.
 *
 * @module
 */

import { headerValue } from './evidence.js';
import type { Evidence } from './evidence.js';
import { maxTimeMs, scanHttpDate, trimOws } from './http-date.js';
import { defaultMaxDelayMs } from './retry-after.js';
import { parseSfDictionary, parseSfList } from './structured-field.js';
import type { BareItem, SfItem } from './structured-field.js';

/** Which header family a learned limit came from. */
export type RateLimitSource =
  /** `RateLimit` / `RateLimit-Policy` in the current Structured Field form (`"default";q=100;w=60`). */
  | 'ietf'
  /** The earlier drafts' forms: `RateLimit-Limit` / `-Remaining` / `-Reset`, `RateLimit: limit=…`, `RateLimit-Policy: 100;w=60`. */
  | 'ietf-draft'
  /** `X-RateLimit-Limit` / `-Remaining` / `-Reset` / `-Reset-After`. */
  | 'x-ratelimit';

/**
 * What a limit covers. `credential`: every call made with the key (the default). `bucket`: the bucket
 * or resource the provider named, `from` the header that named it (e.g. `X-RateLimit-Bucket`).
 */
export type LimitScope = { kind: 'credential' } | { kind: 'bucket'; name: string; from: string };

/** A quota the provider stated: `quota` requests per `windowMs` (absent: the family states no window). */
export interface StatedQuota {
  /** Requests allowed per window, an integer ≥ 0. */
  quota: number;
  /** The window in ms, whole seconds ≥ 1 s; absent when the header states no window (`X-RateLimit-Limit`). */
  windowMs?: number;
  /** The IETF policy's name (`"default"` in `"default";q=100;w=60`), when it has one. */
  policy?: string;
  /** The header it was read from, as written in docs (`RateLimit-Policy`, `X-RateLimit-Limit`, …). */
  field: string;
}

/** How a reset value was read. `delay`: seconds from now; `epoch-seconds` / `epoch-ms`: an instant. */
export type ResetForm = 'delay' | 'epoch-seconds' | 'epoch-ms';

/** A header value that was present but ignored, and why. `raw` is cut to 128 characters. */
export interface IgnoredField {
  field: string;
  raw: string;
  reason: string;
}

/**
 * What the rate-limit headers of one response say.
 *
 * - `none`: no usable rate-limit or scope header (possibly some ignored ones, listed).
 * - `limit`: at least one usable value. Every part is optional except the scope:
 *   - `limit`: the stated quota (the most restrictive policy when several are listed);
 *   - `remaining`: requests left (the smallest when several policies report);
 *   - `resetAtMs`: when more quota comes (ms since the epoch, on the caller's clock);
 *   - `scope` and `global`: the gate to close. `global: true` (from `X-RateLimit-Global: true` or
 *     `X-RateLimit-Scope: global`) means the whole credential whatever bucket is named; use
 *     {@link gateScopeOf} to get the scope to act on.
 */
export type LearnedLimit =
  | { kind: 'none'; ignored: IgnoredField[] }
  | {
      kind: 'limit';
      source: RateLimitSource;
      limit?: StatedQuota;
      remaining?: number;
      resetAtMs?: number;
      resetForm?: ResetForm;
      scope: LimitScope;
      global: boolean;
      /** `X-RateLimit-Scope` as sent (`user`, `shared`, `global`, …), when it was a valid token. */
      providerScope?: string;
      ignored: IgnoredField[];
    };

/** Options of {@link parseRateLimitHeaders}. */
export interface ParseRateLimitOptions {
  /** When the response was received, in ms since the epoch; resets count from here. Must be finite. */
  nowMs: number;
  /**
   * An extra header, named in the credential's config, that names the bucket (e.g. `x-shopify-bucket`).
   * It wins over `X-RateLimit-Bucket` and `X-RateLimit-Resource`. Compared case-insensitively.
   * @default undefined
   */
  bucketHeader?: string | undefined;
  /**
   * The furthest reset accepted, in ms from `nowMs`; later resets are cut to it (never shortened
   * otherwise). Must be a finite number ≥ 0.
   * @default 31_536_000_000 (365 days, as `Retry-After`)
   */
  maxDelayMs?: number | undefined;
}

/** Epoch/delay boundaries of a reset value, in seconds: see {@link parseRateLimitHeaders}. */
export const epochSecondsFrom = 1e9;
/** A reset value at or above this is an epoch in milliseconds. */
export const epochMillisecondsFrom = 1e12;
/** The longest bucket or scope name kept, in characters. */
export const maxBucketNameLength = 128;

const maxRaw = 128;
const maxScalarLength = 64;

function cut(raw: string): string {
  if (raw.length <= maxRaw) return raw;
  let s = raw.slice(0, maxRaw);
  const last = s.charCodeAt(s.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) s = s.slice(0, -1);
  return s;
}

class Collector {
  readonly ignored: IgnoredField[] = [];
  ignore(field: string, raw: string, reason: string): undefined {
    if (this.ignored.length < 16) this.ignored.push({ field, raw: cut(raw), reason });
    return undefined;
  }
}

interface Context {
  nowMs: number;
  maxDelayMs: number;
  /** The response's `Date`, when valid: the server's clock for epoch resets. */
  serverMs: number | undefined;
  out: Collector;
}

/** `1*DIGIT`, at most 15 digits (bounded below 2^53), after trimming OWS. */
function readCount(field: string, raw: string, ctx: Context): number | undefined {
  const s = trimOws(raw);
  if (s.length === 0) return ctx.out.ignore(field, raw, 'empty value');
  if (s.length > 15) {
    return ctx.out.ignore(field, raw, allDigits(s) ? 'more than 15 digits' : 'expected a whole number (digits only)');
  }
  if (!allDigits(s)) return ctx.out.ignore(field, raw, 'expected a whole number (digits only)');
  return Number(s);
}

function allDigits(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return s.length > 0;
}

/** `1*DIGIT [ "." 1*DIGIT ]` seconds as ms, rounded up (never shorter than stated). */
function readSecondsMs(field: string, raw: string, ctx: Context): number | undefined {
  const s = trimOws(raw);
  if (s.length === 0) return ctx.out.ignore(field, raw, 'empty value');
  if (s.length > maxScalarLength) return ctx.out.ignore(field, raw, `longer than ${maxScalarLength} characters`);
  const dot = s.indexOf('.');
  const whole = dot < 0 ? s : s.slice(0, dot);
  const fraction = dot < 0 ? '' : s.slice(dot + 1);
  if (!allDigits(whole) || (dot >= 0 && !allDigits(fraction))) {
    return ctx.out.ignore(field, raw, 'expected seconds as digits, with an optional fraction (e.g. 30 or 1.5)');
  }
  if (whole.length > 16) return ctx.out.ignore(field, raw, 'more than 16 digits');
  // ms = whole·1000 + ceil(fraction·1000); three fraction digits are ms, the rest round up.
  const fracMs = fraction.length === 0 ? 0 : Math.ceil(Number(`0.${fraction}`) * 1000 - 1e-9);
  return Number(whole) * 1000 + fracMs;
}

/** An instant `delayMs` after now, cut to `maxDelayMs` and the last valid time value. */
function after(delayMs: number, ctx: Context): number {
  const cap = Math.min(ctx.maxDelayMs, maxTimeMs - ctx.nowMs);
  return ctx.nowMs + Math.max(0, Math.min(delayMs, cap));
}

/**
 * A reset that may be delay-seconds or an epoch: below 10^9 it is seconds from now (no reset window
 * is 31 years long); from 10^9 it is epoch seconds (no epoch in use is before 2001-09-09); from 10^12
 * it is epoch milliseconds (as seconds it would lie past the year 33,000). An epoch is measured on the
 * server's clock (the response's `Date`, when valid) and applied to now, which cancels clock skew; an
 * epoch in the past is ignored, not read as "now".
 */
function readReset(field: string, raw: string, ctx: Context): { atMs: number; form: ResetForm } | undefined {
  const ms = readSecondsMs(field, raw, ctx);
  if (ms === undefined) return undefined;
  if (ms < epochSecondsFrom * 1000) return { atMs: after(ms, ctx), form: 'delay' };
  const form: ResetForm = ms < epochMillisecondsFrom * 1000 ? 'epoch-seconds' : 'epoch-ms';
  const epochMs = form === 'epoch-seconds' ? ms : Math.ceil(ms / 1000);
  const delayMs = epochMs - (ctx.serverMs ?? ctx.nowMs);
  if (delayMs < 0) {
    const clock = ctx.serverMs === undefined ? 'now' : "the response's Date";
    return ctx.out.ignore(
      field,
      raw,
      `read as an epoch (${form}), it lies ${Math.ceil(-delayMs / 1000)} s before ${clock}`,
    );
  }
  return { atMs: after(delayMs, ctx), form };
}

function integerParam(item: SfItem, key: string): number | undefined | null {
  const v = item.params.get(key);
  if (v === undefined) return undefined;
  return v.type === 'integer' ? v.value : null;
}

function describeBare(v: BareItem): string {
  return v.type;
}

/** Picks the most restrictive quota: the lowest rate among windowed ones, else the smallest windowless one. */
function mostRestrictive(quotas: StatedQuota[]): StatedQuota | undefined {
  let best: StatedQuota | undefined;
  for (const q of quotas) {
    if (best === undefined) {
      best = q;
      continue;
    }
    if (q.windowMs !== undefined && best.windowMs !== undefined) {
      // q.quota / q.windowMs < best.quota / best.windowMs, multiplied out; a tie goes to the shorter window.
      const lhs = q.quota * best.windowMs;
      const rhs = best.quota * q.windowMs;
      if (lhs < rhs || (lhs === rhs && q.windowMs < best.windowMs)) best = q;
    } else if (q.windowMs !== undefined) {
      best = q;
    } else if (best.windowMs === undefined && q.quota < best.quota) {
      best = q;
    }
  }
  return best;
}

interface Reading {
  limit?: StatedQuota;
  remaining?: number;
  reset?: { atMs: number; form: ResetForm };
}

/** Several reports of remaining and reset: the smallest remaining, and on a tie the latest reset. */
function binding(
  a: { remaining: number; reset?: { atMs: number; form: ResetForm } | undefined },
  b: { remaining: number; reset?: { atMs: number; form: ResetForm } | undefined },
) {
  if (b.remaining < a.remaining) return b;
  if (b.remaining > a.remaining) return a;
  return (b.reset?.atMs ?? -Infinity) > (a.reset?.atMs ?? -Infinity) ? b : a;
}

function setReading(
  r: Reading,
  limit: StatedQuota | undefined,
  remaining: number | undefined,
  reset?: Reading['reset'],
) {
  if (limit !== undefined) r.limit = limit;
  if (remaining !== undefined) r.remaining = remaining;
  if (reset !== undefined) r.reset = reset;
}

const isEmpty = (r: Reading): boolean => r.limit === undefined && r.remaining === undefined && r.reset === undefined;

/** Whether a field's value starts (after OWS) with a `"`: the current form names each policy with a String. */
function startsWithString(value: string): boolean {
  return trimOws(value).startsWith('"');
}

/** `RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400` → quotas, per item; bad items are ignored. */
function currentPolicies(raw: string, ctx: Context): StatedQuota[] {
  const field = 'RateLimit-Policy';
  const list = parseSfList(raw);
  if (!list.ok) return (ctx.out.ignore(field, raw, `not a Structured Field List: ${list.reason}`), []);
  const quotas: StatedQuota[] = [];
  for (const item of list.value) {
    if (item.value.type !== 'string') {
      ctx.out.ignore(field, raw, `a policy is named by a String, found ${describeBare(item.value)}`);
      continue;
    }
    const name = item.value.value;
    const q = integerParam(item, 'q');
    const w = integerParam(item, 'w');
    const qu = item.params.get('qu');
    if (q === undefined || q === null || q < 0) {
      ctx.out.ignore(field, raw, `policy "${name}": q must be a non-negative Integer`);
    } else if (w === null || (w !== undefined && w < 1)) {
      ctx.out.ignore(field, raw, `policy "${name}": w must be an Integer ≥ 1 (seconds)`);
    } else if (qu !== undefined && !(qu.type === 'string' && qu.value === 'requests')) {
      ctx.out.ignore(field, raw, `policy "${name}": its quota unit is not "requests"`);
    } else {
      quotas.push({
        quota: q,
        ...(w === undefined ? {} : { windowMs: w * 1000 }),
        policy: name,
        field,
      });
    }
  }
  return quotas;
}

/** `RateLimit: "default";r=50;t=30` → the binding remaining and reset. */
function currentServiceLimits(raw: string, ctx: Context): Reading {
  const field = 'RateLimit';
  const list = parseSfList(raw);
  if (!list.ok) return (ctx.out.ignore(field, raw, `not a Structured Field List: ${list.reason}`), {});
  let best: { remaining: number; reset?: { atMs: number; form: ResetForm } | undefined } | undefined;
  for (const item of list.value) {
    if (item.value.type !== 'string') {
      ctx.out.ignore(field, raw, `a service limit is named by a String, found ${describeBare(item.value)}`);
      continue;
    }
    const name = item.value.value;
    const r = integerParam(item, 'r');
    const t = integerParam(item, 't');
    if (r === undefined || r === null || r < 0) {
      ctx.out.ignore(field, raw, `service limit "${name}": r must be a non-negative Integer`);
      continue;
    }
    if (t === null || (t !== undefined && t < 0)) {
      ctx.out.ignore(field, raw, `service limit "${name}": t must be a non-negative Integer (seconds)`);
      continue;
    }
    const candidate = {
      remaining: r,
      reset: t === undefined ? undefined : { atMs: after(t * 1000, ctx), form: 'delay' as const },
    };
    best = best === undefined ? candidate : binding(best, candidate);
  }
  const out: Reading = {};
  if (best) setReading(out, undefined, best.remaining, best.reset);
  return out;
}

/** The earlier drafts' `RateLimit-Policy: 100;w=60, 1000;w=3600` (Integer items with a `w`). */
function draftPolicies(field: string, items: SfItem[], raw: string, ctx: Context): StatedQuota[] {
  const quotas: StatedQuota[] = [];
  for (const item of items) {
    const w = integerParam(item, 'w');
    if (item.value.type !== 'integer' || item.value.value < 0) {
      ctx.out.ignore(field, raw, 'a quota policy is a non-negative Integer');
    } else if (w === undefined || w === null || w < 1) {
      ctx.out.ignore(field, raw, `quota policy ${item.value.value}: w must be an Integer ≥ 1 (seconds)`);
    } else {
      quotas.push({ quota: item.value.value, windowMs: w * 1000, field });
    }
  }
  return quotas;
}

function readIetf(h: Evidence['headers'], ctx: Context): Reading {
  const out: Reading = {};
  const policy = headerValue(h, 'ratelimit-policy');
  const rateLimit = headerValue(h, 'ratelimit');
  if (policy !== undefined && startsWithString(policy))
    setReading(out, mostRestrictive(currentPolicies(policy, ctx)), undefined);
  if (rateLimit !== undefined && startsWithString(rateLimit)) {
    const r = currentServiceLimits(rateLimit, ctx);
    setReading(out, undefined, r.remaining, r.reset);
  }
  return out;
}

function readIetfDraft(h: Evidence['headers'], ctx: Context): Reading {
  const out: Reading = {};
  const quotas: StatedQuota[] = [];
  const policy = headerValue(h, 'ratelimit-policy');
  if (policy !== undefined && !startsWithString(policy)) {
    const list = parseSfList(policy);
    if (list.ok) quotas.push(...draftPolicies('RateLimit-Policy', list.value, policy, ctx));
    else ctx.out.ignore('RateLimit-Policy', policy, `not a Structured Field List: ${list.reason}`);
  }
  // `RateLimit-Limit: 100` or, in the first drafts, `100, 100;w=60` (the limit, then quota policies).
  const limitRaw = headerValue(h, 'ratelimit-limit');
  if (limitRaw !== undefined) {
    const list = parseSfList(limitRaw);
    const first = list.ok ? list.value[0] : undefined;
    if (!list.ok) ctx.out.ignore('RateLimit-Limit', limitRaw, `not a Structured Field List: ${list.reason}`);
    else if (first?.value.type !== 'integer' || first.value.value < 0) {
      ctx.out.ignore('RateLimit-Limit', limitRaw, 'expected a non-negative Integer first');
    } else {
      const windowed = draftPolicies('RateLimit-Limit', list.value.slice(1), limitRaw, ctx);
      quotas.push(...windowed);
      const w = integerParam(first, 'w');
      if (windowed.length === 0) {
        quotas.push({
          quota: first.value.value,
          ...(typeof w === 'number' && w >= 1 ? { windowMs: w * 1000 } : {}),
          field: 'RateLimit-Limit',
        });
      }
    }
  }
  let remaining: number | undefined;
  let reset: Reading['reset'];
  const remainingRaw = headerValue(h, 'ratelimit-remaining');
  if (remainingRaw !== undefined) remaining = readCount('RateLimit-Remaining', remainingRaw, ctx);
  const resetRaw = headerValue(h, 'ratelimit-reset');
  if (resetRaw !== undefined) reset = readReset('RateLimit-Reset', resetRaw, ctx);
  // `RateLimit: limit=100, remaining=50, reset=30` (a Dictionary).
  const rateLimit = headerValue(h, 'ratelimit');
  if (rateLimit !== undefined && !startsWithString(rateLimit)) {
    const dict = parseSfDictionary(rateLimit);
    if (!dict.ok) ctx.out.ignore('RateLimit', rateLimit, `not a Structured Field Dictionary: ${dict.reason}`);
    else {
      for (const m of dict.value) {
        const ok = m.value.type === 'integer' && m.value.value >= 0;
        const n = m.value.type === 'integer' ? m.value.value : -1;
        if (m.key !== 'limit' && m.key !== 'remaining' && m.key !== 'reset') continue;
        if (!ok) {
          ctx.out.ignore('RateLimit', rateLimit, `${m.key} must be a non-negative Integer`);
        } else if (m.key === 'limit') {
          quotas.push({ quota: n, field: 'RateLimit' });
        } else if (m.key === 'remaining') {
          remaining = remaining === undefined ? n : Math.min(remaining, n);
        } else {
          const atMs = after(n * 1000, ctx);
          if (reset === undefined || atMs > reset.atMs) reset = { atMs, form: 'delay' };
        }
      }
    }
  }
  setReading(out, mostRestrictive(quotas), remaining, reset);
  return out;
}

function readX(h: Evidence['headers'], ctx: Context): Reading {
  const out: Reading = {};
  const limitRaw = headerValue(h, 'x-ratelimit-limit');
  const quota = limitRaw === undefined ? undefined : readCount('X-RateLimit-Limit', limitRaw, ctx);
  const remainingRaw = headerValue(h, 'x-ratelimit-remaining');
  const remaining = remainingRaw === undefined ? undefined : readCount('X-RateLimit-Remaining', remainingRaw, ctx);
  const resetRaw = headerValue(h, 'x-ratelimit-reset');
  const resetAfterRaw = headerValue(h, 'x-ratelimit-reset-after');
  let reset = resetRaw === undefined ? undefined : readReset('X-RateLimit-Reset', resetRaw, ctx);
  if (resetAfterRaw !== undefined) {
    const ms = readSecondsMs('X-RateLimit-Reset-After', resetAfterRaw, ctx);
    if (ms !== undefined) {
      const atMs = after(ms, ctx);
      // Both sent: the later one (never faster).
      if (reset === undefined || atMs > reset.atMs) reset = { atMs, form: 'delay' };
    }
  }
  setReading(out, quota === undefined ? undefined : { quota, field: 'X-RateLimit-Limit' }, remaining, reset);
  return out;
}

/** A bucket or scope name: 1–128 visible ASCII characters. */
function bucketName(field: string, raw: string, ctx: Context): string | undefined {
  const s = trimOws(raw);
  if (s.length === 0) return ctx.out.ignore(field, raw, 'empty value');
  if (s.length > maxBucketNameLength)
    return ctx.out.ignore(field, raw, `longer than ${maxBucketNameLength} characters`);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return ctx.out.ignore(field, raw, 'expected visible ASCII characters only');
  }
  return s;
}

const canonicalBucketFields: Record<string, string> = {
  'x-ratelimit-bucket': 'X-RateLimit-Bucket',
  'x-ratelimit-resource': 'X-RateLimit-Resource',
};

interface ScopeReading {
  scope: LimitScope;
  global: boolean;
  providerScope?: string;
  /** Whether any scope header was present and usable. */
  said: boolean;
}

function readScope(h: Evidence['headers'], ctx: Context, bucketHeader: string | undefined): ScopeReading {
  let forceCredential = false;
  let said = false;
  let scope: LimitScope = { kind: 'credential' };
  const names = [
    ...(bucketHeader === undefined ? [] : [bucketHeader.toLowerCase()]),
    'x-ratelimit-bucket',
    'x-ratelimit-resource',
  ];
  for (const name of names) {
    const raw = headerValue(h, name);
    if (raw === undefined) continue;
    const field = canonicalBucketFields[name] ?? bucketHeader ?? name;
    const value = bucketName(field, raw, ctx);
    // The first bucket header present decides; a malformed one leaves the whole credential.
    if (value === undefined) forceCredential = true;
    else scope = { kind: 'bucket', name: value, from: field };
    said = said || value !== undefined;
    break;
  }
  let global = false;
  const globalRaw = headerValue(h, 'x-ratelimit-global');
  if (globalRaw !== undefined) {
    const v = trimOws(globalRaw).toLowerCase();
    if (v === 'true') global = true;
    else if (v !== 'false') {
      ctx.out.ignore(
        'X-RateLimit-Global',
        globalRaw,
        'expected true or false; the limit stays on the whole credential',
      );
      forceCredential = true;
    }
    said = said || v === 'true' || v === 'false';
  }
  let providerScope: string | undefined;
  const scopeRaw = headerValue(h, 'x-ratelimit-scope');
  if (scopeRaw !== undefined) {
    const v = trimOws(scopeRaw);
    let token = v.length > 0 && v.length <= 64;
    for (let i = 0; token && i < v.length; i++) {
      const c = v.charCodeAt(i);
      token =
        (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f;
    }
    if (!token) {
      ctx.out.ignore(
        'X-RateLimit-Scope',
        scopeRaw,
        'expected a token such as user, shared or global; the limit stays on the whole credential',
      );
      forceCredential = true;
    } else {
      providerScope = v;
      said = true;
      if (v.toLowerCase() === 'global') global = true;
    }
  }
  if (forceCredential) scope = { kind: 'credential' };
  return { scope, global, said, ...(providerScope === undefined ? {} : { providerScope }) };
}

/**
 * Reads the rate-limit headers of one response. Never throws on any header value; throws `RangeError`
 * for invalid options (`nowMs` not finite, `maxDelayMs` negative or not finite).
 *
 * Rules (docs/load-control.md, "Limits the provider states", has the full table):
 * - Families are tried in order: the current IETF form (`RateLimit-Policy` / `RateLimit` whose items
 *   are Strings), the earlier drafts' forms, then `X-RateLimit-*`; the first family that yields a
 *   usable value is the `source`, the others are not mixed in.
 * - Several policies: the one with the lowest rate (quota per window) is the `limit`; several service
 *   limits: the smallest remaining, and on a tie the latest reset.
 * - Counts are digits only (at most 15); seconds may carry a fraction, rounded up to the ms.
 * - `X-RateLimit-Reset` and `RateLimit-Reset`: below 10^9 delay-seconds, from 10^9 epoch seconds, from
 *   10^12 epoch ms; an epoch is measured against the response's `Date` when valid (else `now`), and an
 *   epoch in the past is ignored. With `X-RateLimit-Reset-After` too, the later reset wins.
 * - Resets are cut to `maxDelayMs`. Windows are kept as stated: cutting one would raise the rate.
 * - Scope: the configured bucket header, else `X-RateLimit-Bucket`, else `X-RateLimit-Resource`; the
 *   first one present decides, and a malformed one (or a malformed `X-RateLimit-Global` /
 *   `X-RateLimit-Scope`) leaves the limit on the whole credential.
 *
 * @param headers - the response headers by lower-case name (as in {@link Evidence.headers})
 * @param opts - see {@link ParseRateLimitOptions}
 * @example
 * parseRateLimitHeaders({ 'ratelimit-policy': '"default";q=60;w=60', ratelimit: '"default";r=0;t=12' }, { nowMs: 0 });
 * // { kind: 'limit', source: 'ietf', limit: { quota: 60, windowMs: 60000, policy: 'default', field: 'RateLimit-Policy' },
 * //   remaining: 0, resetAtMs: 12000, resetForm: 'delay', scope: { kind: 'credential' }, global: false, ignored: [] }
 */
export function parseRateLimitHeaders(headers: Evidence['headers'], opts: ParseRateLimitOptions): LearnedLimit {
  const { nowMs } = opts;
  if (typeof nowMs !== 'number' || !Number.isFinite(nowMs)) {
    throw new RangeError('parseRateLimitHeaders: opts.nowMs must be a finite number of ms');
  }
  const maxDelayMs = opts.maxDelayMs ?? defaultMaxDelayMs;
  if (typeof maxDelayMs !== 'number' || !Number.isFinite(maxDelayMs) || maxDelayMs < 0) {
    throw new RangeError('parseRateLimitHeaders: opts.maxDelayMs must be a finite number of ms ≥ 0');
  }
  const out = new Collector();
  const dateRaw = headerValue(headers, 'date');
  let serverMs: number | undefined;
  if (dateRaw !== undefined) {
    const scan = scanHttpDate(trimOws(dateRaw), { now: new Date(nowMs) });
    if (scan.ok) serverMs = scan.timeMs;
  }
  const ctx: Context = { nowMs, maxDelayMs, serverMs, out };

  let source: RateLimitSource | undefined;
  let reading: Reading = {};
  for (const [name, read] of [
    ['ietf', readIetf],
    ['ietf-draft', readIetfDraft],
    ['x-ratelimit', readX],
  ] as const) {
    const r = read(headers, ctx);
    if (!isEmpty(r)) {
      source = name;
      reading = r;
      break;
    }
  }
  const scope = readScope(headers, ctx, opts.bucketHeader);
  if (source === undefined && !scope.said) return { kind: 'none', ignored: out.ignored };
  return {
    kind: 'limit',
    source: source ?? 'x-ratelimit',
    ...(reading.limit === undefined ? {} : { limit: reading.limit }),
    ...(reading.remaining === undefined ? {} : { remaining: reading.remaining }),
    ...(reading.reset === undefined ? {} : { resetAtMs: reading.reset.atMs, resetForm: reading.reset.form }),
    scope: scope.scope,
    global: scope.global,
    ...(scope.providerScope === undefined ? {} : { providerScope: scope.providerScope }),
    ignored: out.ignored,
  };
}

/** The gate a learned limit closes: the whole credential when `global`, else its scope. */
export function gateScopeOf(learned: LearnedLimit): LimitScope {
  if (learned.kind === 'none' || learned.global) return { kind: 'credential' };
  return learned.scope;
}

function seconds(ms: number): string {
  const s = ms / 1000;
  return Number.isInteger(s) ? `${s} s` : `${s.toFixed(1)} s`;
}

/**
 * One sentence naming what was learned and where it came from, for `retryq credentials`, metrics
 * labels and the UI: "learned from RateLimit-Policy: 60 per 60 s". Parts that were not sent are left
 * out; `nowMs` (optional) turns the reset into "resets in 12 s".
 *
 * @example
 * describeLearnedLimit(parseRateLimitHeaders({ 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '0',
 *   'x-ratelimit-reset': '30', 'x-ratelimit-bucket': 'abc' }, { nowMs: 0 }), 0);
 * // 'learned from X-RateLimit-Limit: 60 per window, 0 remaining, resets in 30 s, bucket abc (X-RateLimit-Bucket)'
 */
export function describeLearnedLimit(learned: LearnedLimit, nowMs?: number): string {
  if (learned.kind === 'none') return 'no limit learned from headers';
  const parts: string[] = [];
  const { limit } = learned;
  if (limit !== undefined) {
    const per = limit.windowMs === undefined ? 'per window' : `per ${seconds(limit.windowMs)}`;
    parts.push(`${limit.quota} ${per}${limit.policy === undefined ? '' : ` ("${limit.policy}")`}`);
  }
  if (learned.remaining !== undefined) parts.push(`${learned.remaining} remaining`);
  if (learned.resetAtMs !== undefined) {
    parts.push(
      nowMs === undefined || !Number.isFinite(nowMs)
        ? `resets at ${new Date(learned.resetAtMs).toISOString()}`
        : `resets in ${seconds(Math.max(0, Math.ceil((learned.resetAtMs - nowMs) / 1000) * 1000))}`,
    );
  }
  if (learned.global) parts.push('global (the whole credential)');
  else if (learned.scope.kind === 'bucket') parts.push(`bucket ${learned.scope.name} (${learned.scope.from})`);
  const field = limit?.field ?? sourceField[learned.source];
  return `learned from ${field}: ${parts.length > 0 ? parts.join(', ') : 'a scope only'}`;
}

const sourceField: Record<RateLimitSource, string> = {
  ietf: 'RateLimit',
  'ietf-draft': 'RateLimit',
  'x-ratelimit': 'X-RateLimit-*',
};
