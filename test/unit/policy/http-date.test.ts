import { describe, expect, it } from 'vitest';
import { parseHttpDate, scanHttpDate } from '../../../src/policy/index.js';
import { asctime, at, imfFixdate, plus, rfc850 } from './http-date-forms.js';

const iso = (value: string, now?: Date): string | null =>
  parseHttpDate(value, now === undefined ? {} : { now })?.toISOString() ?? null;

describe('parseHttpDate, given each of the three forms RFC 9110 requires recipients to accept', () => {
  it.each([
    ['IMF-fixdate', 'Sun, 06 Nov 1994 08:49:37 GMT'],
    ['RFC 850', 'Sunday, 06-Nov-94 08:49:37 GMT'],
    ['asctime with a space-padded day', 'Sun Nov  6 08:49:37 1994'],
    ['asctime with a two-digit day', 'Sun Nov 06 08:49:37 1994'],
  ])('reads the RFC example in %s form as 1994-11-06T08:49:37Z', (_form, value) => {
    expect(iso(value, at('2025-01-01T00:00:00Z'))).toBe('1994-11-06T08:49:37.000Z');
  });

  it('names the form it read', () => {
    expect(scanHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')).toMatchObject({ ok: true, format: 'imf-fixdate' });
    expect(scanHttpDate('Sunday, 06-Nov-94 08:49:37 GMT')).toMatchObject({ ok: true, format: 'rfc850' });
    expect(scanHttpDate('Sun Nov  6 08:49:37 1994')).toMatchObject({ ok: true, format: 'asctime' });
  });

  it('reads every long day name of the RFC 850 form', () => {
    // 2024-01-07 was a Sunday; seven consecutive days cover each name once.
    for (let i = 0; i < 7; i++) {
      const d = plus(at('2024-01-07T10:00:00Z'), i * 86_400_000);
      expect(iso(rfc850(d), at('2025-01-01T00:00:00Z'))).toBe(d.toISOString());
    }
  });
});

describe('parseHttpDate, given calendar edge cases', () => {
  it.each([
    ['Feb 29 in a leap year', 'Thu, 29 Feb 2024 00:00:00 GMT', '2024-02-29T00:00:00.000Z'],
    ['Feb 29 in 2000 (divisible by 400)', 'Tue, 29 Feb 2000 12:00:00 GMT', '2000-02-29T12:00:00.000Z'],
    ['Dec 31 at 23:59:59', 'Wed, 31 Dec 2025 23:59:59 GMT', '2025-12-31T23:59:59.000Z'],
    ['the epoch', 'Thu, 01 Jan 1970 00:00:00 GMT', '1970-01-01T00:00:00.000Z'],
    ['a date before the epoch', 'Mon, 01 Jan 1900 00:00:00 GMT', '1900-01-01T00:00:00.000Z'],
    ['year 9999', 'Fri, 31 Dec 9999 23:59:59 GMT', '9999-12-31T23:59:59.000Z'],
  ])('accepts %s', (_case, value, expected) => {
    expect(iso(value)).toBe(expected);
  });

  it('accepts a leap second (23:59:60) and reads it as the following midnight, since time values have none', () => {
    expect(iso('Wed, 31 Dec 2025 23:59:60 GMT')).toBe('2026-01-01T00:00:00.000Z');
    expect(iso('Wed Dec 31 23:59:60 2025')).toBe('2026-01-01T00:00:00.000Z');
  });
});

describe('parseHttpDate, given values a strict recipient rejects', () => {
  it.each([
    ['a wrong weekday', 'Mon, 06 Nov 1994 08:49:37 GMT', 'weekday does not match'],
    ['a wrong weekday in RFC 850 form', 'Monday, 06-Nov-94 08:49:37 GMT', 'weekday does not match'],
    ['a wrong weekday in asctime form', 'Mon Nov  6 08:49:37 1994', 'weekday does not match'],
    ['zone UTC', 'Sun, 06 Nov 1994 08:49:37 UTC', 'time zone must be "GMT"'],
    ['zone +0000', 'Sun, 06 Nov 1994 08:49:37 +0000', 'time zone must be "GMT"'],
    ['zone PST in RFC 850 form', 'Sunday, 06-Nov-94 08:49:37 PST', 'time zone must be "GMT"'],
    ['a lower-case zone', 'Sun, 06 Nov 1994 08:49:37 gmt', 'time zone must be "GMT"'],
    ['a zone on an asctime date', 'Sun Nov  6 08:49:37 1994 GMT', 'unexpected characters'],
    ['Feb 30', 'Sun, 30 Feb 2025 00:00:00 GMT', 'day 30 does not exist'],
    ['Feb 29 in a common year', 'Sat, 29 Feb 2025 00:00:00 GMT', 'day 29 does not exist'],
    ['Feb 29 in 1900 (divisible by 100, not 400)', 'Thu, 29 Feb 1900 00:00:00 GMT', 'day 29 does not exist'],
    ['Apr 31', 'Thu, 31 Apr 2025 00:00:00 GMT', 'day 31 does not exist'],
    ['day 00', 'Sun, 00 Nov 1994 08:49:37 GMT', 'day 0 does not exist'],
    ['hour 24', 'Sun, 06 Nov 1994 24:00:00 GMT', 'hour 24 is out of range'],
    ['hour 99', 'Sun, 06 Nov 1994 99:00:00 GMT', 'hour 99 is out of range'],
    ['minute 60', 'Sun, 06 Nov 1994 08:60:00 GMT', 'minute 60 is out of range'],
    ['second 61', 'Wed, 31 Dec 2025 23:59:61 GMT', 'second 61 is out of range'],
    ['second 60 other than at 23:59', 'Sun, 06 Nov 1994 08:49:60 GMT', 'second 60 is out of range'],
    ['a lower-case day name', 'sun, 06 Nov 1994 08:49:37 GMT', 'day-name must be'],
    ['an upper-case month', 'Sun, 06 NOV 1994 08:49:37 GMT', 'month must be'],
    ['an unknown month', 'Sun, 06 Nox 1994 08:49:37 GMT', 'month must be'],
    ['a spelled-out month (longer than any HTTP-date)', 'Sun, 06 November 1994 08:49:37 GMT', 'longer than any'],
    ['a one-digit day in IMF-fixdate', 'Sun, 6 Nov 1994 08:49:37 GMT', 'day must be two digits'],
    ['a two-digit year in IMF-fixdate', 'Sun, 06 Nov 94 08:49:37 GMT', 'year must be four digits'],
    ['a four-digit year in RFC 850 form', 'Sunday, 06-Nov-1994 08:49:37 GMT', 'year must be two digits'],
    ['a short day name in RFC 850 form', 'Sun, 06-Nov-94 08:49:37 GMT', 'day must be two digits'],
    ['a long day name in IMF-fixdate', 'Sunday, 06 Nov 1994 08:49:37 GMT', 'day must be two digits'],
    ['a made-up long day name', 'Sonday, 06-Nov-94 08:49:37 GMT', 'day-name must be Monday'],
    ['a double space', 'Sun,  06 Nov 1994 08:49:37 GMT', 'day must be two digits'],
    ['a tab instead of a space', 'Sun,\t06 Nov 1994 08:49:37 GMT', 'expected a single space'],
    ['a missing comma', 'Sun 06 Nov 1994 08:49:37 GMT', 'month must be'],
    ['time without seconds', 'Sun, 06 Nov 1994 08:49 GMT', 'time-of-day must be HH:MM:SS'],
    ['trailing text', 'Sun, 06 Nov 1994 08:49:37 GMTx', 'unexpected characters after "GMT"'],
    ['surrounding whitespace (callers trim it)', ' Sun, 06 Nov 1994 08:49:37 GMT', 'not an HTTP-date'],
    ['an ISO 8601 timestamp', '1994-11-06T08:49:37Z', 'not an HTTP-date'],
    ['an empty string', '', 'not an HTTP-date'],
    ['a value longer than any HTTP-date', `Sun, 06 Nov 1994 08:49:37 GMT${' '.repeat(10)}`, 'longer than any'],
    ['non-ASCII look-alike digits', 'Sun, ０6 Nov 1994 08:49:37 GMT', 'day must be two digits'],
  ])('rejects %s', (_case, value, reason) => {
    expect(parseHttpDate(value)).toBeNull();
    const scan = scanHttpDate(value);
    expect(scan.ok).toBe(false);
    if (!scan.ok) expect(scan.reason).toContain(reason);
  });

  it('throws RangeError for an Invalid Date `now`, a programming error rather than evidence', () => {
    expect(() => parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT', { now: new Date(Number.NaN) })).toThrow(RangeError);
  });
});

describe('parseHttpDate, given RFC 850 two-digit years (RFC 9110: more than 50 years ahead means the past century)', () => {
  const now = at('2025-06-15T12:00:00Z');

  it.each([
    ['a year in the current decade', '2025-01-01T00:00:00Z'],
    ['a year 49 years ahead', '2074-06-15T12:00:00Z'],
    ['exactly 50 years ahead (not more than 50)', '2075-06-15T12:00:00Z'],
    ['a year in the last century that is not ahead', '1994-11-06T08:49:37Z'],
    ['1 second past the 50-year limit, read in the past century', '1975-06-15T12:00:01Z'],
    ['a year 51 years ahead, read in the past century', '1976-01-01T00:00:00Z'],
    ['the year 2000', '2000-01-01T00:00:00Z'],
  ])('reads %s', (_case, expected) => {
    const d = at(expected);
    expect(iso(rfc850(d), now)).toBe(d.toISOString());
  });

  it('reads "-75" as 1975 when the moment lies 1 second past the 50-year limit', () => {
    expect(iso('Sunday, 15-Jun-75 12:00:01 GMT', now)).toBe('1975-06-15T12:00:01.000Z');
  });

  it('picks the next century when it is not more than 50 years ahead (now in 2099: "-00" is 2100)', () => {
    const late = at('2099-06-01T00:00:00Z');
    expect(iso(rfc850(at('2100-03-01T00:00:00Z')), late)).toBe('2100-03-01T00:00:00.000Z');
    expect(iso(rfc850(at('2050-03-01T00:00:00Z')), late)).toBe('2050-03-01T00:00:00.000Z');
  });

  it('rejects a weekday that fits only another century than the rule picks', () => {
    // 06-Nov-94 was a Sunday in 1994; in 2094 it is a Friday. The rule picks 1994, so "Friday" is wrong.
    expect(iso('Friday, 06-Nov-94 08:49:37 GMT', now)).toBeNull();
  });

  it('without `now`, maps 70–99 to 1970–1999 and 00–69 to 2000–2069', () => {
    expect(iso(rfc850(at('1970-01-01T00:00:00Z')))).toBe('1970-01-01T00:00:00.000Z');
    expect(iso(rfc850(at('2069-12-31T23:59:59Z')))).toBe('2069-12-31T23:59:59.000Z');
  });
});

describe('the test fixtures that write the three forms', () => {
  it('agree with the RFC examples', () => {
    const d = at('1994-11-06T08:49:37Z');
    expect(imfFixdate(d)).toBe('Sun, 06 Nov 1994 08:49:37 GMT');
    expect(imfFixdate(d)).toBe(d.toUTCString());
    expect(rfc850(d)).toBe('Sunday, 06-Nov-94 08:49:37 GMT');
    expect(asctime(d)).toBe('Sun Nov  6 08:49:37 1994');
  });
});
