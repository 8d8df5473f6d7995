import { describe, expect, it } from 'vitest';
import { defaultMaxDelayMs, parseRetryAfter } from '../../../src/policy/index.js';
import type { RetryAfter } from '../../../src/policy/index.js';
import { asctime, at, imfFixdate, plus, rfc850 } from './http-date-forms.js';

const now = at('2025-06-15T12:00:00Z');
const second = 1000;

describe('parseRetryAfter, given no header', () => {
  it.each([null, undefined])('returns absent for %s', (header) => {
    expect(parseRetryAfter(header, { now })).toEqual({ kind: 'absent' });
  });
});

describe('parseRetryAfter, given delay-seconds', () => {
  it.each([
    ['0', 0],
    ['1', 1 * second],
    ['120', 120 * second],
    ['007', 7 * second],
    [' 120', 120 * second],
    ['120 ', 120 * second],
    ['\t 120 \t', 120 * second],
    ['86400', 86_400 * second],
  ])('reads %j as a delay of %i ms from now', (header, delayMs) => {
    expect(parseRetryAfter(header, { now })).toEqual({
      kind: 'delay',
      delayMs,
      notBefore: plus(now, delayMs),
      clamped: false,
    });
  });

  it('clamps a delay past maxDelayMs to maxDelayMs and says so', () => {
    expect(parseRetryAfter('61', { now, maxDelayMs: 60_000 })).toEqual({
      kind: 'delay',
      delayMs: 60_000,
      notBefore: plus(now, 60_000),
      clamped: true,
    });
  });

  it('does not clamp a delay exactly at maxDelayMs', () => {
    expect(parseRetryAfter('60', { now, maxDelayMs: 60_000 })).toMatchObject({ delayMs: 60_000, clamped: false });
  });

  it('clamps to a default of one year (365 days)', () => {
    expect(defaultMaxDelayMs).toBe(365 * 86_400 * second);
    expect(parseRetryAfter('31536001', { now })).toMatchObject({ delayMs: defaultMaxDelayMs, clamped: true });
    expect(parseRetryAfter('31536000', { now })).toMatchObject({ delayMs: defaultMaxDelayMs, clamped: false });
  });

  it('clamps a digit string too large for any number (no overflow, no Infinity)', () => {
    const result = parseRetryAfter('9'.repeat(400), { now });
    expect(result).toEqual({
      kind: 'delay',
      delayMs: defaultMaxDelayMs,
      notBefore: plus(now, defaultMaxDelayMs),
      clamped: true,
    });
  });

  it('accepts maxDelayMs 0, which turns every delay into 0', () => {
    expect(parseRetryAfter('5', { now, maxDelayMs: 0 })).toMatchObject({ delayMs: 0, clamped: true });
  });
});

describe('parseRetryAfter, given malformed values', () => {
  it.each([
    ['-1', 'unsigned'],
    ['+5', 'unsigned'],
    ['1.5', 'whole number'],
    ['1,5', 'found ","'],
    ['0x10', 'found "x"'],
    ['12abc', 'found "a"'],
    ['1e3', 'found "e"'],
    ['1 2', 'found U+0020'],
    ['120s', 'found "s"'],
    ['', 'empty value'],
    [' ', 'only whitespace'],
    ['\t\t', 'only whitespace'],
    ['\n120', 'not an HTTP-date'],
    ['120\r\n', 'found U+000D'],
    ['\u00a0120', 'not an HTTP-date'],
    ['１２０', 'not an HTTP-date'],
    ['Infinity', 'not an HTTP-date'],
    ['NaN', 'not an HTTP-date'],
    ['soon', 'not an HTTP-date'],
    ['120, 120', 'found ","'],
  ])('rejects %j as invalid (%s), keeping the raw value', (header, reason) => {
    const result = parseRetryAfter(header, { now });
    expect(result.kind).toBe('invalid');
    if (result.kind === 'invalid') {
      expect(result.raw).toBe(header);
      expect(result.reason).toContain(reason);
    }
  });

  it('rejects HTTP-dates a strict recipient rejects, with the date reader’s reason', () => {
    expect(parseRetryAfter('Mon, 06 Nov 1994 08:49:37 GMT', { now })).toMatchObject({
      kind: 'invalid',
      reason: expect.stringContaining('weekday does not match') as unknown,
    });
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 UTC', { now })).toMatchObject({
      kind: 'invalid',
      reason: expect.stringContaining('GMT') as unknown,
    });
  });

  it('treats a non-string header from an untyped caller as invalid rather than throwing', () => {
    expect(parseRetryAfter(120 as unknown as string, { now })).toMatchObject({ kind: 'invalid', raw: '' });
  });
});

describe('parseRetryAfter, given 100 kB headers (linear time, bounded output)', () => {
  it('clamps a 100 kB digit string to maxDelayMs', () => {
    expect(parseRetryAfter('7'.repeat(100_000), { now })).toMatchObject({
      kind: 'delay',
      delayMs: defaultMaxDelayMs,
      clamped: true,
    });
  });

  it('rejects a 100 kB digit string with one bad character at the end', () => {
    expect(parseRetryAfter(`${'7'.repeat(100_000)}x`, { now })).toMatchObject({ kind: 'invalid' });
  });

  it('rejects 100 kB of garbage and keeps only the first 128 characters in raw', () => {
    const result = parseRetryAfter('Sun, '.repeat(20_000), { now });
    expect(result.kind).toBe('invalid');
    if (result.kind === 'invalid') expect(result.raw).toBe('Sun, '.repeat(20_000).slice(0, 128));
  });

  it('rejects 100 kB of whitespace', () => {
    expect(parseRetryAfter(' '.repeat(100_000), { now })).toMatchObject({ kind: 'invalid', reason: 'only whitespace' });
  });

  it('never cuts raw in the middle of a surrogate pair', () => {
    const header = `${'a'.repeat(127)}😀${'b'.repeat(100)}`;
    const result = parseRetryAfter(header, { now });
    expect(result).toMatchObject({ kind: 'invalid', raw: 'a'.repeat(127) });
  });
});

describe('parseRetryAfter, given an HTTP-date without a server Date header', () => {
  const future = plus(now, 90 * second);

  it.each([
    ['IMF-fixdate', imfFixdate(future)],
    ['RFC 850', rfc850(future)],
    ['asctime', asctime(future)],
  ])('measures a future %s date from now', (_form, header) => {
    expect(parseRetryAfter(header, { now })).toEqual({
      kind: 'date',
      delayMs: 90 * second,
      notBefore: future,
      clamped: false,
      skewCorrected: false,
    });
  });

  it('trims surrounding whitespace around a date', () => {
    expect(parseRetryAfter(` ${imfFixdate(future)}\t`, { now })).toMatchObject({ kind: 'date', delayMs: 90 * second });
  });

  it.each([
    ['a date in the past', imfFixdate(plus(now, -3_600 * second))],
    ['the current second', imfFixdate(now)],
    ['a date decades ago', 'Sun, 06 Nov 1994 08:49:37 GMT'],
  ])('gives delayMs 0 for %s: valid, not an error (the scheduler keeps its backoff, invariant 4)', (_case, header) => {
    expect(parseRetryAfter(header, { now })).toEqual({
      kind: 'date',
      delayMs: 0,
      notBefore: now,
      clamped: false,
      skewCorrected: false,
    });
  });

  it('clamps a date further away than maxDelayMs', () => {
    expect(parseRetryAfter(imfFixdate(plus(now, 2 * 86_400 * second)), { now, maxDelayMs: 86_400 * second })).toEqual({
      kind: 'date',
      delayMs: 86_400 * second,
      notBefore: plus(now, 86_400 * second),
      clamped: true,
      skewCorrected: false,
    });
  });

  it('counts milliseconds of now: a date 1 s after a now of .400 is 600 ms away', () => {
    const n = at('2025-06-15T12:00:00.400Z');
    expect(parseRetryAfter(imfFixdate(at('2025-06-15T12:00:01Z')), { now: n })).toMatchObject({ delayMs: 600 });
  });
});

describe('parseRetryAfter, given an HTTP-date and the server’s Date header (clock skew)', () => {
  it('measures on the server clock when the server is ahead of us', () => {
    const serverNow = plus(now, 300 * second); // server clock 5 min ahead
    const result = parseRetryAfter(imfFixdate(plus(serverNow, 30 * second)), {
      now,
      serverDate: imfFixdate(serverNow),
    });
    // Without correction this would be 330 s; the server meant 30 s.
    expect(result).toEqual({
      kind: 'date',
      delayMs: 30 * second,
      notBefore: plus(now, 30 * second),
      clamped: false,
      skewCorrected: true,
    });
  });

  it('measures on the server clock when the server is behind us', () => {
    const serverNow = plus(now, -300 * second); // server clock 5 min behind
    const result = parseRetryAfter(imfFixdate(plus(serverNow, 30 * second)), {
      now,
      serverDate: imfFixdate(serverNow),
    });
    // Without correction this date lies in the past and would give 0; the server meant 30 s.
    expect(result).toMatchObject({ kind: 'date', delayMs: 30 * second, skewCorrected: true });
  });

  it('gives delayMs 0 when the date is before the server’s own Date', () => {
    const serverNow = plus(now, 300 * second);
    const result = parseRetryAfter(imfFixdate(plus(serverNow, -1 * second)), {
      now,
      serverDate: imfFixdate(serverNow),
    });
    expect(result).toMatchObject({ kind: 'date', delayMs: 0, notBefore: now, skewCorrected: true });
  });

  it('accepts a server Date in any of the three forms, with surrounding whitespace', () => {
    const serverNow = plus(now, 60 * second);
    for (const serverDate of [imfFixdate(serverNow), rfc850(serverNow), ` ${asctime(serverNow)} `]) {
      expect(parseRetryAfter(imfFixdate(plus(serverNow, 10 * second)), { now, serverDate })).toMatchObject({
        delayMs: 10 * second,
        skewCorrected: true,
      });
    }
  });

  it.each([
    ['invalid', 'yesterday'],
    ['null', null],
    ['empty', ''],
  ])('falls back to now when the server Date is %s', (_case, serverDate) => {
    const result = parseRetryAfter(imfFixdate(plus(now, 30 * second)), { now, serverDate });
    expect(result).toMatchObject({ kind: 'date', delayMs: 30 * second, skewCorrected: false });
  });

  it('ignores the server Date for delay-seconds, which carry no clock', () => {
    const result: RetryAfter = parseRetryAfter('30', { now, serverDate: imfFixdate(plus(now, 600 * second)) });
    expect(result).toEqual({ kind: 'delay', delayMs: 30 * second, notBefore: plus(now, 30 * second), clamped: false });
  });
});

describe('parseRetryAfter, given invalid options (programming errors)', () => {
  it('throws RangeError for an Invalid Date now', () => {
    expect(() => parseRetryAfter('1', { now: new Date(Number.NaN) })).toThrow(/opts\.now must be a valid Date/);
  });

  it.each([Number.NaN, -1, Number.POSITIVE_INFINITY])('throws RangeError for maxDelayMs %s', (maxDelayMs) => {
    expect(() => parseRetryAfter('1', { now, maxDelayMs })).toThrow(/opts\.maxDelayMs must be a finite number/);
  });

  it('keeps notBefore a valid Date even at the end of representable time', () => {
    const end = new Date(8.64e15 - 1000);
    const result = parseRetryAfter('3600', { now: end });
    expect(result).toMatchObject({ kind: 'delay', delayMs: 1000, clamped: true });
    if (result.kind === 'delay') expect(result.notBefore.getTime()).toBe(8.64e15);
  });
});
