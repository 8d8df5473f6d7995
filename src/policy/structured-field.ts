/**
 * A strict, linear-time reader for the two Structured Field shapes the rate-limit headers use
 * (RFC 9651): a **List** of Items and a **Dictionary**, each member with Parameters. Bare items are
 * Integers, Decimals, Strings, Tokens, Byte Sequences and Booleans; Inner Lists, Dates and Display
 * Strings are refused, because no rate-limit field carries them. No regular expressions.
 *
 * A value that breaks the grammar anywhere is refused as a whole (RFC 9651 §4.2: "fail parsing"),
 * with a reason that names what was expected and where.
 *
 * @module
 */

/** One bare item: what an Item, a Dictionary value or a Parameter value holds. */
export type BareItem =
  | { type: 'integer'; value: number }
  | { type: 'decimal'; value: number }
  | { type: 'string'; value: string }
  | { type: 'token'; value: string }
  | { type: 'bytes'; value: string }
  | { type: 'boolean'; value: boolean };

/** An Item with its Parameters, in the order they came (a later duplicate key replaces an earlier one). */
export interface SfItem {
  value: BareItem;
  params: ReadonlyMap<string, BareItem>;
}

/** A Dictionary member: its key and its Item (a key without `=` is the Boolean `true`). */
export interface SfMember extends SfItem {
  key: string;
}

/** What a read gives: the parsed value, or why the field must be ignored. */
export type SfResult<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Fields longer than this are refused without reading them (a rate-limit field is a few dozen characters). */
export const maxStructuredFieldLength = 4096;

class Reader {
  i = 0;
  constructor(readonly s: string) {}
  get done(): boolean {
    return this.i >= this.s.length;
  }
  peek(): number {
    return this.s.charCodeAt(this.i);
  }
  skipSp(): void {
    while (this.s.charCodeAt(this.i) === 0x20) this.i++;
  }
  skipOws(): void {
    for (let c = this.peek(); c === 0x20 || c === 0x09; c = this.peek()) this.i++;
  }
}

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
const isLcAlpha = (c: number): boolean => c >= 0x61 && c <= 0x7a;
const isAlpha = (c: number): boolean => isLcAlpha(c) || (c >= 0x41 && c <= 0x5a);
/** RFC 9110 `tchar`. */
function isTchar(c: number): boolean {
  if (isAlpha(c) || isDigit(c)) return true;
  return "!#$%&'*+-.^_`|~".includes(String.fromCharCode(c)) && c < 0x80;
}
const isBase64 = (c: number): boolean => isAlpha(c) || isDigit(c) || c === 0x2b || c === 0x2f || c === 0x3d;

function at(r: Reader): string {
  if (r.done) return 'at the end';
  const c = r.peek();
  const shown =
    c >= 0x21 && c <= 0x7e ? `"${String.fromCharCode(c)}"` : `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
  return `at character ${r.i + 1} (${shown})`;
}

function fail(r: Reader, what: string): never {
  // A grammar failure: caught in parseMembers and returned as a reason, never thrown out of this module.
  throw new SyntaxError(`${what} ${at(r)}`);
}

function parseKey(r: Reader): string {
  const start = r.i;
  const first = r.peek();
  if (!isLcAlpha(first) && first !== 0x2a) fail(r, 'expected a key (lower-case letter or "*")');
  r.i++;
  for (let c = r.peek(); isLcAlpha(c) || isDigit(c) || c === 0x5f || c === 0x2d || c === 0x2e || c === 0x2a;) {
    r.i++;
    c = r.peek();
  }
  return r.s.slice(start, r.i);
}

function parseNumber(r: Reader): BareItem {
  const start = r.i;
  let sign = 1;
  if (r.peek() === 0x2d) {
    sign = -1;
    r.i++;
  }
  if (!isDigit(r.peek())) fail(r, 'expected a digit');
  let digits = 0;
  let intPart = 0;
  while (isDigit(r.peek())) {
    intPart = intPart * 10 + (r.peek() - 0x30);
    r.i++;
    if (++digits > 15) {
      r.i = start;
      fail(r, 'an Integer has at most 15 digits');
    }
  }
  if (r.peek() !== 0x2e) return { type: 'integer', value: sign * intPart };
  if (digits > 12) fail(r, 'a Decimal has at most 12 integer digits');
  r.i++;
  let frac = 0;
  let scale = 1;
  let fracDigits = 0;
  while (isDigit(r.peek())) {
    frac = frac * 10 + (r.peek() - 0x30);
    scale *= 10;
    r.i++;
    if (++fracDigits > 3) fail(r, 'a Decimal has at most 3 fractional digits');
  }
  if (fracDigits === 0) fail(r, 'a Decimal needs a digit after "."');
  return { type: 'decimal', value: sign * (intPart + frac / scale) };
}

function parseString(r: Reader): BareItem {
  r.i++; // opening quote
  let out = '';
  for (;;) {
    if (r.done) fail(r, 'unterminated String');
    const c = r.peek();
    r.i++;
    if (c === 0x22) return { type: 'string', value: out };
    if (c === 0x5c) {
      const next = r.peek();
      if (next !== 0x22 && next !== 0x5c) fail(r, 'a String may only escape \\" and \\\\');
      out += String.fromCharCode(next);
      r.i++;
    } else if (c < 0x20 || c > 0x7e) {
      r.i--;
      fail(r, 'a String holds printable ASCII only');
    } else {
      out += String.fromCharCode(c);
    }
  }
}

function parseToken(r: Reader): BareItem {
  const start = r.i;
  r.i++;
  for (let c = r.peek(); isTchar(c) || c === 0x3a || c === 0x2f;) {
    r.i++;
    c = r.peek();
  }
  return { type: 'token', value: r.s.slice(start, r.i) };
}

function parseBytes(r: Reader): BareItem {
  r.i++;
  const start = r.i;
  while (isBase64(r.peek())) r.i++;
  if (r.peek() !== 0x3a) fail(r, 'a Byte Sequence holds base64 and ends with ":"');
  const value = r.s.slice(start, r.i);
  r.i++;
  return { type: 'bytes', value };
}

function parseBareItem(r: Reader): BareItem {
  const c = r.peek();
  if (c === 0x2d || isDigit(c)) return parseNumber(r);
  if (c === 0x22) return parseString(r);
  if (isAlpha(c) || c === 0x2a) return parseToken(r);
  if (c === 0x3a) return parseBytes(r);
  if (c === 0x3f) {
    r.i++;
    const b = r.peek();
    if (b !== 0x30 && b !== 0x31) fail(r, 'a Boolean is ?0 or ?1');
    r.i++;
    return { type: 'boolean', value: b === 0x31 };
  }
  if (c === 0x28) fail(r, 'Inner Lists are not expected in this field');
  fail(r, 'expected an Integer, Decimal, String, Token, Byte Sequence or Boolean');
}

function parseParams(r: Reader): Map<string, BareItem> {
  const params = new Map<string, BareItem>();
  while (r.peek() === 0x3b) {
    r.i++;
    r.skipSp();
    const key = parseKey(r);
    let value: BareItem = { type: 'boolean', value: true };
    if (r.peek() === 0x3d) {
      r.i++;
      value = parseBareItem(r);
    }
    params.delete(key); // a later duplicate replaces the earlier one, in its place
    params.set(key, value);
  }
  return params;
}

function parseMembers<T>(input: string, member: (r: Reader) => T): SfResult<T[]> {
  if (input.length > maxStructuredFieldLength) {
    return { ok: false, reason: `longer than ${maxStructuredFieldLength} characters` };
  }
  const r = new Reader(input);
  const out: T[] = [];
  try {
    r.skipOws();
    if (r.done) return { ok: false, reason: 'empty value' };
    for (;;) {
      out.push(member(r));
      r.skipOws();
      if (r.done) return { ok: true, value: out };
      if (r.peek() !== 0x2c) fail(r, 'expected "," between members');
      r.i++;
      r.skipOws();
      if (r.done) fail(r, 'a trailing "," is not allowed');
    }
  } catch (error) {
    if (error instanceof SyntaxError) return { ok: false, reason: error.message };
    throw error;
  }
}

/**
 * Reads a Structured Field List of Items (RFC 9651 §4.2.1). Surrounding optional whitespace is
 * allowed; an empty value is refused (the caller treats an absent field separately).
 *
 * @example
 * parseSfList('"burst";q=100;w=60, "daily";q=1000;w=86400');
 * // { ok: true, value: [{ value: { type: 'string', value: 'burst' }, params: Map { q → 100, w → 60 } }, …] }
 */
export function parseSfList(input: string): SfResult<SfItem[]> {
  return parseMembers(input, (r) => {
    const value = parseBareItem(r);
    return { value, params: parseParams(r) };
  });
}

/**
 * Reads a Structured Field Dictionary (RFC 9651 §4.2.2). A later duplicate key replaces the earlier
 * one, as the RFC says.
 *
 * @example
 * parseSfDictionary('limit=100, remaining=50, reset=30');
 */
export function parseSfDictionary(input: string): SfResult<SfMember[]> {
  const parsed = parseMembers(input, (r): SfMember => {
    const key = parseKey(r);
    let value: BareItem = { type: 'boolean', value: true };
    if (r.peek() === 0x3d) {
      r.i++;
      value = parseBareItem(r);
    }
    return { key, value, params: parseParams(r) };
  });
  if (!parsed.ok) return parsed;
  const byKey = new Map<string, SfMember>();
  for (const m of parsed.value) byKey.set(m.key, m);
  return { ok: true, value: [...byKey.values()] };
}
