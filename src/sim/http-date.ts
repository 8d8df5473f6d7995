/**
 * HTTP-date formatting in the three forms RFC 9110 §5.6.7 tells recipients to accept:
 * the preferred IMF-fixdate and the obsolete RFC 850 and ANSI C asctime() forms.
 * The simulator sends IMF-fixdate itself; the obsolete forms exist so scenarios can check
 * that clients parse what old servers still send.
 */

/** Which HTTP-date form to write. */
export type HttpDateStyle = 'imf' | 'rfc850' | 'asctime';

const shortDays = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;
const longDays = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'] as const;
const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'] as const;

interface DateParts {
  shortDay: string;
  longDay: string;
  day: number;
  month: string;
  year: number;
  time: string;
}

function partsOf(epochMs: number): DateParts {
  const d = new Date(epochMs);
  if (Number.isNaN(d.getTime())) throw new RangeError(`not a representable time: ${epochMs}`);
  const two = (n: number): string => String(n).padStart(2, '0');
  return {
    shortDay: shortDays[d.getUTCDay()] ?? 'Sun',
    longDay: longDays[d.getUTCDay()] ?? 'Sunday',
    day: d.getUTCDate(),
    month: months[d.getUTCMonth()] ?? 'Jan',
    year: d.getUTCFullYear(),
    time: `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`,
  };
}

/** `Sun, 06 Nov 1994 08:49:37 GMT` (IMF-fixdate, the form servers must send). */
export function formatImfFixdate(epochMs: number): string {
  const p = partsOf(epochMs);
  return `${p.shortDay}, ${String(p.day).padStart(2, '0')} ${p.month} ${p.year} ${p.time} GMT`;
}

/** `Sunday, 06-Nov-94 08:49:37 GMT` (obsolete RFC 850 form, two-digit year). */
export function formatRfc850Date(epochMs: number): string {
  const p = partsOf(epochMs);
  const yy = String(p.year % 100).padStart(2, '0');
  return `${p.longDay}, ${String(p.day).padStart(2, '0')}-${p.month}-${yy} ${p.time} GMT`;
}

/** `Sun Nov  6 08:49:37 1994` (obsolete ANSI C asctime() form, space-padded day). */
export function formatAsctimeDate(epochMs: number): string {
  const p = partsOf(epochMs);
  return `${p.shortDay} ${p.month} ${String(p.day).padStart(2, ' ')} ${p.time} ${p.year}`;
}

/** Formats `epochMs` (sub-second part dropped) as an HTTP-date in the given form. */
export function formatHttpDate(epochMs: number, style: HttpDateStyle = 'imf'): string {
  switch (style) {
    case 'imf':
      return formatImfFixdate(epochMs);
    case 'rfc850':
      return formatRfc850Date(epochMs);
    case 'asctime':
      return formatAsctimeDate(epochMs);
  }
}
