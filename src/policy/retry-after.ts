/**
 * `Retry-After` (RFC 9110 §10.2.3) read as a strict recipient: `delay-seconds` or an `HTTP-date`,
 * turned into a server-permitted time (`notBefore`).
 *
 * @module
 */

import { maxHttpDateLength, maxTimeMs, parseHttpDate, scanHttpDate, trimOws } from './http-date.js';

export { parseHttpDate };

/**
 * What a `Retry-After` header says.
 *
 * - `absent`: no header.
 * - `invalid`: a header that is neither `delay-seconds` nor an `HTTP-date`; `raw` is the header as
 *   received (cut to 128 characters, so a hostile header cannot bloat workflow history) and `reason`
 *   says what is wrong. The scheduler treats it like `absent` (invariant 4: the backoff floor applies).
 * - `delay`: `delay-seconds`; `delayMs` is the delay, `notBefore = now + delayMs`, `clamped` says the
 *   value exceeded `maxDelayMs` and was cut to it.
 * - `date`: an `HTTP-date`; `delayMs` is its distance from the server's clock (`skewCorrected`, when
 *   the response's `Date` header was valid) or from `now`, 0 if it lies in the past.
 */
export type RetryAfter =
  | { kind: 'absent' }
  | { kind: 'invalid'; raw: string; reason: string }
  | { kind: 'delay'; delayMs: number; notBefore: Date; clamped: boolean }
  | { kind: 'date'; delayMs: number; notBefore: Date; clamped: boolean; skewCorrected: boolean };

/** Options of {@link parseRetryAfter}. */
export interface ParseRetryAfterOptions {
  /**
   * When the response was received; the delay counts from here (`notBefore = now + delayMs`). Also
   * the reference for RFC 850 two-digit years. Must be a valid Date.
   */
  now: Date;
  /**
   * The response's own `Date` header. When it is a valid HTTP-date, an HTTP-date `Retry-After` is
   * measured on the server's clock (`date − serverDate`) and applied to `now`, which cancels clock
   * skew between server and client. Ignored when absent or invalid.
   * @default undefined (no skew correction)
   */
  serverDate?: string | null | undefined;
  /**
   * The longest delay accepted, in ms; longer delays are cut to it and marked `clamped`. Must be a
   * finite number ≥ 0.
   * @default 31_536_000_000 (365 days)
   */
  maxDelayMs?: number | undefined;
}

/** Default of {@link ParseRetryAfterOptions.maxDelayMs}: 365 days, in ms. */
export const defaultMaxDelayMs = 365 * 24 * 60 * 60 * 1000;

/** How much of an invalid header is kept in `raw`, in UTF-16 code units. */
export const maxRawLength = 128;

function invalid(header: string, reason: string): RetryAfter {
  let raw = header;
  if (raw.length > maxRawLength) {
    raw = raw.slice(0, maxRawLength);
    // Do not leave half of a surrogate pair at the cut.
    const last = raw.charCodeAt(raw.length - 1);
    if (last >= 0xd800 && last <= 0xdbff) raw = raw.slice(0, -1);
  }
  return { kind: 'invalid', raw, reason };
}

/** A printable description of the character at `i`, for reasons. */
function describeChar(s: string, i: number): string {
  const c = s.codePointAt(i) ?? 0;
  return c >= 0x21 && c <= 0x7e ? `"${String.fromCodePoint(c)}"` : `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * Parses a `Retry-After` header value strictly (RFC 9110 §10.2.3).
 *
 * - `delay-seconds` is `1*DIGIT` after trimming surrounding optional whitespace (SP / HTAB only).
 *   Signs, fractions, hex, trailing text, an empty or whitespace-only value are `invalid`. Digit
 *   strings of any length are read without overflow: past `maxDelayMs` the value is clamped.
 * - `HTTP-date` in IMF-fixdate, RFC 850 or asctime form, read by {@link parseHttpDate}. A date in the
 *   past is valid with `delayMs: 0`.
 * - Linear time and no regular expressions: a 100 kB header is rejected (or clamped, if all digits)
 *   in a single pass.
 *
 * Never throws on any header value. Throws `RangeError` for invalid options (`now` an Invalid Date,
 * `maxDelayMs` negative or not finite): those are programming errors, not evidence.
 *
 * @param header - the header value; `null` / `undefined` mean the response had none
 * @param opts - see {@link ParseRetryAfterOptions}
 * @returns the parsed header; see {@link RetryAfter}
 * @example
 * const now = new Date('2025-01-01T00:00:00Z');
 * parseRetryAfter('120', { now }); // { kind: 'delay', delayMs: 120000, notBefore: 2025-01-01T00:02:00Z, clamped: false }
 * parseRetryAfter('Wed, 01 Jan 2025 00:00:30 GMT', { now, serverDate: 'Wed, 01 Jan 2025 00:00:10 GMT' });
 * // { kind: 'date', delayMs: 20000, notBefore: 2025-01-01T00:00:20Z, clamped: false, skewCorrected: true }
 * parseRetryAfter('1.5', { now }); // { kind: 'invalid', raw: '1.5', reason: 'delay-seconds must be a whole number …' }
 */
export function parseRetryAfter(header: string | null | undefined, opts: ParseRetryAfterOptions): RetryAfter {
  const nowMs = opts.now instanceof Date ? opts.now.getTime() : Number.NaN;
  if (!Number.isFinite(nowMs)) throw new RangeError('parseRetryAfter: opts.now must be a valid Date');
  const maxDelayMs = opts.maxDelayMs ?? defaultMaxDelayMs;
  if (typeof maxDelayMs !== 'number' || !Number.isFinite(maxDelayMs) || maxDelayMs < 0) {
    throw new RangeError('parseRetryAfter: opts.maxDelayMs must be a finite number of ms ≥ 0');
  }

  if (header === null || header === undefined) return { kind: 'absent' };
  if (typeof header !== 'string') return invalid('', 'the header value is not a string');

  const trimmed = trimOws(header);
  if (trimmed.length === 0) return invalid(header, header.length === 0 ? 'empty value' : 'only whitespace');

  const first = trimmed.charCodeAt(0);
  if (first >= 0x30 && first <= 0x39) return parseDelaySeconds(header, trimmed, nowMs, maxDelayMs);
  if (first === 0x2b || first === 0x2d) {
    return invalid(header, 'delay-seconds must be unsigned digits (no "+" or "-")');
  }

  if (trimmed.length > maxHttpDateLength) {
    return invalid(header, `neither delay-seconds nor an HTTP-date (longer than ${maxHttpDateLength} characters)`);
  }
  const scan = scanHttpDate(trimmed, { now: opts.now });
  if (!scan.ok) return invalid(header, `not an HTTP-date: ${scan.reason}`);

  let referenceMs = nowMs;
  let skewCorrected = false;
  if (typeof opts.serverDate === 'string') {
    const server = trimmedHttpDate(opts.serverDate, opts.now);
    if (server !== null) {
      referenceMs = server;
      skewCorrected = true;
    }
  }
  const untilMs = scan.timeMs - referenceMs;
  const { delayMs, clamped } = bounded(Math.max(0, untilMs), nowMs, maxDelayMs);
  return { kind: 'date', delayMs, notBefore: new Date(nowMs + delayMs), clamped, skewCorrected };
}

function parseDelaySeconds(header: string, digits: string, nowMs: number, maxDelayMs: number): RetryAfter {
  const length = digits.length;
  let seconds = 0;
  let overCap = false;
  let i = 0;
  // Accumulate until past the cap; the number never exceeds cap × 10 + 9 s, so never overflows.
  for (; i < length && !overCap; i++) {
    const d = digits.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return notDigit(header, digits, i);
    seconds = seconds * 10 + d;
    overCap = seconds * 1000 > maxDelayMs;
  }
  // Past the cap, only check that the rest are digits.
  for (; i < length; i++) {
    const d = digits.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return notDigit(header, digits, i);
  }
  const { delayMs, clamped } = bounded(overCap ? Number.POSITIVE_INFINITY : seconds * 1000, nowMs, maxDelayMs);
  return { kind: 'delay', delayMs, notBefore: new Date(nowMs + delayMs), clamped };
}

function notDigit(header: string, digits: string, i: number): RetryAfter {
  if (digits.charCodeAt(i) === 0x2e) return invalid(header, 'delay-seconds must be a whole number of seconds');
  return invalid(header, `delay-seconds must be digits only; found ${describeChar(digits, i)}`);
}

/** Cuts a delay to `maxDelayMs` and to the last representable time value. */
function bounded(delayMs: number, nowMs: number, maxDelayMs: number): { delayMs: number; clamped: boolean } {
  const cap = Math.min(maxDelayMs, maxTimeMs - nowMs);
  return delayMs > cap ? { delayMs: Math.max(0, cap), clamped: true } : { delayMs, clamped: false };
}

function trimmedHttpDate(value: string, now: Date): number | null {
  const scan = scanHttpDate(trimOws(value), { now });
  return scan.ok ? scan.timeMs : null;
}
