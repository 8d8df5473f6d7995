/**
 * Durations at the public edge: `'30s'`, `'5m'`, `'24h'`, `'7d'`, `'250ms'`, or a number of milliseconds.
 * Inside retryq every duration is a plain number of milliseconds with an `Ms` suffix.
 *
 * Workflow-safe: no Node imports.
 *
 * @example
 * ```ts
 * import { parseDurationMs } from './duration.js';
 * parseDurationMs('90s'); // 90_000
 * parseDurationMs('1.5h'); // 5_400_000
 * parseDurationMs('soon'); // undefined
 * ```
 */

/** A duration as users write it: a number of milliseconds or a string such as `'30s'`, `'5m'`, `'24h'`, `'7d'`. */
export type Duration = number | `${number}${DurationUnit}` | `${number} ${DurationUnit}`;
type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd';

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** What a valid duration looks like, for error messages. */
export const DURATION_HINT = `a duration such as '250ms', '30s', '5m', '24h', '7d', or a number of milliseconds`;

/** Parses a {@link Duration}; returns `undefined` for anything else (negative, NaN, unknown unit, …). */
export function parseDurationMs(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const text = value.trim();
  let i = 0;
  while (i < text.length && ((text[i]! >= '0' && text[i]! <= '9') || text[i] === '.')) i++;
  const num = text.slice(0, i);
  const unit = text.slice(i).trim();
  if (!num || num.startsWith('.') || num.endsWith('.') || num.split('.').length > 2) return undefined;
  if (unit === '') return Number(num);
  if (!(unit in UNIT_MS)) return undefined;
  const ms = Number(num) * UNIT_MS[unit as DurationUnit];
  return Number.isFinite(ms) ? Math.round(ms) : undefined;
}

/** Formats milliseconds for people: `'2m 0s'`, `'1h 5m'`, `'850ms'`. */
export function formatDurationMs(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}
