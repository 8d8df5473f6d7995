/**
 * Writes instants in the three HTTP-date forms, so that tests can build valid values (correct
 * weekdays included) for any instant. Independent of the code under test: it uses only `Date`'s own
 * UTC accessors.
 */

const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const longDays = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

function clock(d: Date): string {
  return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/** `Sun, 06 Nov 1994 08:49:37 GMT` (the same as `toUTCString()` for years 0–9999). */
export function imfFixdate(d: Date): string {
  return `${days[d.getUTCDay()]}, ${pad(d.getUTCDate())} ${months[d.getUTCMonth()]} ${pad(d.getUTCFullYear(), 4)} ${clock(d)} GMT`;
}

/** `Sunday, 06-Nov-94 08:49:37 GMT` */
export function rfc850(d: Date): string {
  return `${longDays[d.getUTCDay()]}, ${pad(d.getUTCDate())}-${months[d.getUTCMonth()]}-${pad(d.getUTCFullYear() % 100)} ${clock(d)} GMT`;
}

/** `Sun Nov  6 08:49:37 1994` */
export function asctime(d: Date): string {
  const day = d.getUTCDate();
  return `${days[d.getUTCDay()]} ${months[d.getUTCMonth()]} ${day < 10 ? ` ${day}` : day} ${clock(d)} ${pad(d.getUTCFullYear(), 4)}`;
}

/** The instant of an ISO string, e.g. `at('2025-06-15T12:00:00Z')`. */
export function at(iso: string): Date {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) throw new Error(`bad fixture date ${iso}`);
  return d;
}

/** `date` shifted by `ms`. */
export function plus(date: Date, ms: number): Date {
  return new Date(date.getTime() + ms);
}
