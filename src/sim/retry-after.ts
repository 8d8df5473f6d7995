/**
 * What the simulator puts in `Retry-After`: the admission gate's own answer (delay-seconds or an
 * IMF-fixdate on the server's skewed clock, never below one second) and the values scenarios
 * script (raw strings passed through unchanged, relative HTTP-dates in any of the three forms).
 */
import { formatHttpDate, formatImfFixdate } from './http-date.js';
import type { HttpDateStyle } from './http-date.js';

/**
 * A scripted `Retry-After` value.
 * - a number: delay-seconds, written as `String(n)` (so `-5` or `1.5` can be sent on purpose);
 * - `'http-date:+120s'` (also `-30s`, `+500ms`, `+2m`, `+1h`): an IMF-fixdate that far from the
 *   server's (skewed) clock;
 * - any other string: sent exactly as written (malformed values, fixed dates, …);
 * - `{ httpDate, inSeconds }`: an HTTP-date in the chosen form `inSeconds` from the server clock.
 */
export type RetryAfterSpec = string | number | { httpDate: HttpDateStyle; inSeconds: number };

/** How the admission gate writes `Retry-After` on its own 429s. */
export type RetryAfterFormat = 'seconds' | 'http-date';

const relativeHttpDate = /^http-date:([+-]\d+(?:\.\d+)?)(ms|s|m|h)$/;
const unitMs = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;

/**
 * The offset in ms of a relative HTTP-date spec (`'http-date:+120s'`), `undefined` if the string
 * does not start with `http-date:`, or `null` if it does but is not well formed.
 */
export function relativeHttpDateOffsetMs(spec: string): number | undefined | null {
  if (!spec.startsWith('http-date:')) return undefined;
  const m = relativeHttpDate.exec(spec);
  if (!m?.[1] || !m[2]) return null;
  return Number(m[1]) * unitMs[m[2] as keyof typeof unitMs];
}

/** Renders a scripted spec against the server clock (`serverNowMs` already includes the skew). */
export function renderRetryAfter(spec: RetryAfterSpec, serverNowMs: number): string {
  if (typeof spec === 'number') return String(spec);
  if (typeof spec === 'string') {
    const offsetMs = relativeHttpDateOffsetMs(spec);
    return offsetMs == null ? spec : formatImfFixdate(serverNowMs + offsetMs);
  }
  return formatHttpDate(serverNowMs + spec.inSeconds * 1_000, spec.httpDate);
}

/**
 * The admission gate's `Retry-After` for a wait of `waitMs`: whole seconds rounded up and at least
 * 1, or an IMF-fixdate on the server clock that is never earlier than the moment the request
 * would be admitted and at least one second after the response's `Date` header.
 */
export function admissionRetryAfter(waitMs: number, serverNowMs: number, format: RetryAfterFormat): string {
  const seconds = Math.max(1, Math.ceil(waitMs / 1_000));
  if (format === 'seconds') return String(seconds);
  const dateHeaderSecond = Math.floor(serverNowMs / 1_000);
  const admitSecond = Math.ceil((serverNowMs + Math.max(waitMs, 1)) / 1_000);
  return formatImfFixdate(Math.max(admitSecond, dateHeaderSecond + 1) * 1_000);
}
