/**
 * A strict, linear-time reader for `HTTP-date` (RFC 9110 §5.6.7).
 *
 * Accepts exactly the three forms a recipient must accept, character by character, with no regular
 * expressions and no `Date.parse`:
 *
 * | form | example |
 * | --- | --- |
 * | IMF-fixdate (preferred) | `Sun, 06 Nov 1994 08:49:37 GMT` |
 * | obsolete RFC 850 | `Sunday, 06-Nov-94 08:49:37 GMT` |
 * | obsolete asctime | `Sun Nov  6 08:49:37 1994` |
 *
 * Strictness, following the grammar:
 * - day and month names are case-sensitive English (`Sun`, `Nov`; RFC 850 uses `Sunday`);
 * - separators are exactly the single `SP`, `,`, `-` and `:` of the grammar; no extra whitespace
 *   inside the value (callers trim surrounding optional whitespace first);
 * - the zone is the literal `GMT` (asctime carries none and is UTC);
 * - fields are range-checked: day within its month (Feb 29 only in leap years of the proleptic
 *   Gregorian calendar), hour 00–23, minute 00–59, second 00–59, and second 60 only at 23:59
 *   (the grammar's `00:00:00 - 23:59:60 (leap second)`); a leap second reads as the following
 *   midnight, because a JavaScript time value has no leap seconds;
 * - the day name must be the weekday of the date;
 * - RFC 850 two-digit years follow RFC 9110: a year that appears to be more than 50 years in the
 *   future is the most recent past year with the same last two digits.
 *
 * @module
 */

const MS_PER_SECOND = 1000;
const MS_PER_DAY = 86_400_000;

/**
 * The largest magnitude of a valid JavaScript time value, in ms since the epoch (ECMA-262: ±8.64e15,
 * i.e. ±100,000,000 days). Times beyond it would make an Invalid Date, so the policy clamps to it.
 */
export const maxTimeMs = 8.64e15;

const dayNames = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;
const dayNamesLong = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'] as const;
const monthNames = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'] as const;

/** The longest valid HTTP-date (`Wednesday, 06-Nov-94 08:49:37 GMT`), in characters. */
export const maxHttpDateLength = 33;

/**
 * `value` without surrounding optional whitespace (RFC 9110 §5.6.3 `OWS`: SP and HTAB), and nothing
 * else: no other Unicode whitespace is removed. Linear time.
 */
export function trimOws(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && isOws(value.charCodeAt(start))) start++;
  while (end > start && isOws(value.charCodeAt(end - 1))) end--;
  return start === 0 && end === value.length ? value : value.slice(start, end);
}

function isOws(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

/** Which of the three HTTP-date forms a value was written in. */
export type HttpDateFormat = 'imf-fixdate' | 'rfc850' | 'asctime';

/**
 * The outcome of {@link scanHttpDate}: the instant and the form it was written in, or why the value is
 * not an HTTP-date.
 */
export type HttpDateScan = { ok: true; timeMs: number; format: HttpDateFormat } | { ok: false; reason: string };

/** Options of {@link parseHttpDate} and {@link scanHttpDate}. */
export interface HttpDateOptions {
  /**
   * The reference time for RFC 850's two-digit years (RFC 9110: a year more than 50 years after
   * `now` is taken as the most recent past year with the same two digits). Only the obsolete RFC 850
   * form depends on it.
   * @default undefined — without it, two-digit years map to the fixed window 1970–2069 (`70`–`99` →
   * 1970–1999, `00`–`69` → 2000–2069), which is what the RFC rule gives for any `now` in 2019.
   */
  now?: Date | undefined;
}

/**
 * Days from 1970-01-01 to the given proleptic Gregorian date (negative before the epoch).
 *
 * Linear in `day`, so a day past the end of its month rolls into the next month; callers range-check
 * first. Algorithm: H. Hinnant, "chrono-compatible low-level date algorithms" (`days_from_civil`).
 *
 * @param year - full year, e.g. 1994
 * @param month - 1 (January) … 12 (December)
 * @param day - 1 … 31
 */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const marchBasedMonth = (month + 9) % 12;
  const dayOfYear = Math.floor((153 * marchBasedMonth + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

/** Whether `year` is a leap year in the proleptic Gregorian calendar. */
export function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

/** Number of days in `month` (1–12) of `year`. */
export function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/** Weekday (0 = Sunday … 6 = Saturday) of a day count from 1970-01-01, which was a Thursday. */
function weekdayOfDays(days: number): number {
  return (((days + 4) % 7) + 7) % 7;
}

/** One decimal digit at `i`, or -1. */
function digitAt(s: string, i: number): number {
  const c = s.charCodeAt(i) - 48;
  return c >= 0 && c <= 9 ? c : -1;
}

/** A fixed-width run of `width` decimal digits starting at `i`, or -1 if any is not a digit. */
function digitsAt(s: string, i: number, width: number): number {
  let n = 0;
  for (let k = 0; k < width; k++) {
    const d = digitAt(s, i + k);
    if (d < 0) return -1;
    n = n * 10 + d;
  }
  return n;
}

/** Index of the three-letter name at `i` in `names`, or -1 (case-sensitive). */
function nameAt(s: string, i: number, names: readonly string[]): number {
  for (let k = 0; k < names.length; k++) {
    const name = names[k];
    if (name !== undefined && s.startsWith(name, i)) return k;
  }
  return -1;
}

interface TimeOfDay {
  hour: number;
  minute: number;
  second: number;
}

const fail = (reason: string): { ok: false; reason: string } => ({ ok: false, reason });

/** Reads `HH:MM:SS` at `i` and range-checks it. */
function timeOfDayAt(s: string, i: number): TimeOfDay | { ok: false; reason: string } {
  const hour = digitsAt(s, i, 2);
  const minute = digitsAt(s, i + 3, 2);
  const second = digitsAt(s, i + 6, 2);
  if (hour < 0 || s[i + 2] !== ':' || minute < 0 || s[i + 5] !== ':' || second < 0) {
    return fail('time-of-day must be HH:MM:SS with two digits each');
  }
  if (hour > 23) return fail(`hour ${hour} is out of range (00-23)`);
  if (minute > 59) return fail(`minute ${minute} is out of range (00-59)`);
  if (second > 60 || (second === 60 && (hour !== 23 || minute !== 59))) {
    return fail(`second ${second} is out of range (00-59, or 60 at 23:59 for a leap second)`);
  }
  return { hour, minute, second };
}

/** Range-checks the calendar fields, checks the weekday, and returns the instant. */
function instant(
  weekday: number,
  year: number,
  month: number,
  day: number,
  time: TimeOfDay,
  format: HttpDateFormat,
): HttpDateScan {
  if (day < 1 || day > daysInMonth(year, month)) {
    return fail(`day ${day} does not exist in ${monthNames[month - 1] ?? '?'} ${year}`);
  }
  const days = daysFromCivil(year, month, day);
  if (weekdayOfDays(days) !== weekday) {
    return fail(
      `the weekday does not match the date (${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')} is a ${dayNamesLong[weekdayOfDays(days)]})`,
    );
  }
  const timeMs = days * MS_PER_DAY + ((time.hour * 60 + time.minute) * 60 + time.second) * MS_PER_SECOND;
  return { ok: true, timeMs, format };
}

/** `Sun, 06 Nov 1994 08:49:37 GMT` */
function scanImfFixdate(s: string, weekday: number): HttpDateScan {
  if (s[4] !== ' ') return fail('expected a single space after "<day-name>,"');
  const day = digitsAt(s, 5, 2);
  if (day < 0 || s[7] !== ' ') return fail('day must be two digits followed by a space');
  const month = nameAt(s, 8, monthNames) + 1;
  if (month === 0 || s[11] !== ' ') return fail('month must be Jan…Dec (case-sensitive) followed by a space');
  const year = digitsAt(s, 12, 4);
  if (year < 0 || s[16] !== ' ') return fail('year must be four digits followed by a space');
  const time = timeOfDayAt(s, 17);
  if ('ok' in time) return time;
  if (s[25] !== ' ') return fail('expected a single space before the time zone');
  if (!s.startsWith('GMT', 26)) return fail('the time zone must be "GMT"');
  if (s.length !== 29) return fail('unexpected characters after "GMT"');
  return instant(weekday, year, month, day, time, 'imf-fixdate');
}

/** `Sunday, 06-Nov-94 08:49:37 GMT`; `p` is the index of the comma after the long day name. */
function scanRfc850(s: string, weekday: number, p: number, now: Date | undefined): HttpDateScan {
  if (s[p + 1] !== ' ') return fail('expected a single space after "<day-name>,"');
  const day = digitsAt(s, p + 2, 2);
  if (day < 0 || s[p + 4] !== '-') return fail('day must be two digits followed by "-"');
  const month = nameAt(s, p + 5, monthNames) + 1;
  if (month === 0 || s[p + 8] !== '-') return fail('month must be Jan…Dec (case-sensitive) followed by "-"');
  const yy = digitsAt(s, p + 9, 2);
  if (yy < 0 || s[p + 11] !== ' ') return fail('year must be two digits followed by a space');
  const time = timeOfDayAt(s, p + 12);
  if ('ok' in time) return time;
  if (s[p + 20] !== ' ') return fail('expected a single space before the time zone');
  if (!s.startsWith('GMT', p + 21)) return fail('the time zone must be "GMT"');
  if (s.length !== p + 24) return fail('unexpected characters after "GMT"');
  const year = resolveTwoDigitYear(yy, month, day, time, now);
  return instant(weekday, year, month, day, time, 'rfc850');
}

/** `Sun Nov  6 08:49:37 1994` (day is `2DIGIT` or `SP DIGIT`; no zone, always UTC). */
function scanAsctime(s: string, weekday: number): HttpDateScan {
  const month = nameAt(s, 4, monthNames) + 1;
  if (month === 0 || s[7] !== ' ') return fail('month must be Jan…Dec (case-sensitive) followed by a space');
  const day = s[8] === ' ' ? digitAt(s, 9) : digitsAt(s, 8, 2);
  if (day < 0 || s[10] !== ' ') return fail('day must be two digits, or a space and one digit, followed by a space');
  const time = timeOfDayAt(s, 11);
  if ('ok' in time) return time;
  if (s[19] !== ' ') return fail('expected a single space before the year');
  const year = digitsAt(s, 20, 4);
  if (year < 0) return fail('year must be four digits');
  if (s.length !== 24) return fail('unexpected characters after the year (asctime carries no time zone)');
  return instant(weekday, year, month, day, time, 'asctime');
}

/**
 * RFC 9110 §5.6.7: "Recipients of a timestamp value in rfc850-date format, which uses a two-digit
 * year, MUST interpret a timestamp that appears to be more than 50 years in the future as
 * representing the most recent year in the past that had the same last two digits."
 *
 * Takes the latest year ending in `yy` whose timestamp is not more than 50 calendar years after
 * `now`. Without `now`, the fixed window 1970–2069.
 */
function resolveTwoDigitYear(yy: number, month: number, day: number, time: TimeOfDay, now: Date | undefined): number {
  if (now === undefined) return yy >= 70 ? 1900 + yy : 2000 + yy;
  const nowYear = now.getUTCFullYear();
  const limitMs =
    daysFromCivil(nowYear + 50, now.getUTCMonth() + 1, now.getUTCDate()) * MS_PER_DAY +
    (((now.getUTCHours() * 60 + now.getUTCMinutes()) * 60 + now.getUTCSeconds()) * 1000 + now.getUTCMilliseconds());
  const clockMs = ((time.hour * 60 + time.minute) * 60 + time.second) * MS_PER_SECOND;
  // Start one century above `now`'s and step down; at most three steps.
  let year = nowYear - (((nowYear % 100) + 100) % 100) + yy + 100;
  while (daysFromCivil(year, month, day) * MS_PER_DAY + clockMs > limitMs) year -= 100;
  return year;
}

/**
 * Reads an HTTP-date strictly (see the module notes), explaining a rejection.
 *
 * Runs in time linear in the input and gives up at once on values longer than any HTTP-date.
 * The value must already be trimmed of surrounding whitespace.
 *
 * @param value - the candidate HTTP-date
 * @param options - `now` anchors RFC 850 two-digit years
 * @returns the instant in ms since the epoch and the form, or the reason the value was rejected
 * @example
 * scanHttpDate('Sun, 06 Nov 1994 08:49:37 GMT'); // { ok: true, timeMs: 784111777000, format: 'imf-fixdate' }
 * scanHttpDate('Mon, 06 Nov 1994 08:49:37 GMT'); // { ok: false, reason: 'the weekday does not match …' }
 */
export function scanHttpDate(value: string, options: HttpDateOptions = {}): HttpDateScan {
  if (typeof value !== 'string') return fail('not a string');
  if (value.length > maxHttpDateLength) return fail(`longer than any HTTP-date (${maxHttpDateLength} characters)`);
  const now = options.now;
  if (now !== undefined && !Number.isFinite(now.getTime())) {
    throw new RangeError('parseHttpDate: options.now must be a valid Date');
  }
  // The day name ends at the first character that is not an ASCII letter.
  let end = 0;
  while (end < value.length && end < 10) {
    const c = value.charCodeAt(end) | 0x20;
    if (c < 0x61 || c > 0x7a) break;
    end++;
  }
  const separator = value[end];
  if (end === 3 && separator === ',') {
    const weekday = nameAt(value, 0, dayNames);
    if (weekday < 0) return fail('day-name must be Mon…Sun (case-sensitive)');
    return scanImfFixdate(value, weekday);
  }
  if (end === 3 && separator === ' ') {
    const weekday = nameAt(value, 0, dayNames);
    if (weekday < 0) return fail('day-name must be Mon…Sun (case-sensitive)');
    return scanAsctime(value, weekday);
  }
  if (end > 3 && separator === ',') {
    const name = value.slice(0, end);
    const weekday = dayNamesLong.findIndex((n) => n === name);
    if (weekday < 0) return fail('day-name must be Monday…Sunday (case-sensitive) in the RFC 850 form');
    return scanRfc850(value, weekday, end, now);
  }
  return fail('not an HTTP-date: expected IMF-fixdate, RFC 850 or asctime form');
}

/**
 * Parses an HTTP-date (RFC 9110 §5.6.7) in any of its three forms, strictly; `null` if the value is
 * not one.
 *
 * The value must already be trimmed of surrounding whitespace. Never throws on any string; throws
 * `RangeError` only if `options.now` is an Invalid Date.
 *
 * @param value - e.g. `Sun, 06 Nov 1994 08:49:37 GMT`, `Sunday, 06-Nov-94 08:49:37 GMT`, `Sun Nov  6 08:49:37 1994`
 * @param options - `now` anchors RFC 850 two-digit years (see {@link HttpDateOptions})
 * @returns the instant, or `null`
 * @example
 * parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')?.toISOString(); // '1994-11-06T08:49:37.000Z'
 * parseHttpDate('Sun, 06 Nov 1994 08:49:37 UTC'); // null (the zone must be GMT)
 */
export function parseHttpDate(value: string, options: HttpDateOptions = {}): Date | null {
  const scan = scanHttpDate(value, options);
  return scan.ok ? new Date(scan.timeMs) : null;
}
