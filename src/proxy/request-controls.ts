/**
 * The `Retryq-*` request headers that steer the proxy for one request, read strictly: how many retries
 * (`Retryq-Max-Retries`, clamped to the configured ceiling) and the caller's remaining time budget
 * (`Retryq-Deadline-Ms`). A bad one is a {@link Problem} naming the header, the value seen and what is allowed.
 *
 * @module
 */

import type { Problem } from '../errors.js';
import { proxyHeaderPrefix } from './headers.js';

/** The request headers that steer the proxy. */
export const proxyRequestHeaders = {
  maxRetries: 'Retryq-Max-Retries',
  deadlineMs: 'Retryq-Deadline-Ms',
} as const;

/** What the `Retryq-*` request headers of one request say. */
export interface RequestControls {
  /** Retries allowed for this request, after clamping. */
  maxRetries: number;
  /** The value asked for when it was clamped to the ceiling, else `undefined`. */
  clampedFrom: string | undefined;
  /** The caller's remaining time budget, in ms, when it sent one. */
  budgetMs: number | undefined;
}

const maxBudgetMs = 2_147_483_647;

/**
 * Reads the `Retryq-*` request headers strictly. `Retryq-Max-Retries` is digits only (after trimming
 * spaces and tabs): 0 turns retries off, a value above `ceiling` is clamped. `Retryq-Deadline-Ms` is
 * the caller's remaining budget, digits only, 1 to 2147483647. Each may appear once; any other
 * `Retryq-*` header is an error, so a misspelt control does not pass silently.
 *
 * @param rawHeaders - the request's raw `[name, value, …]` list
 * @param defaults - the configured default and ceiling
 * @returns the controls, or the first problem found (`path`: the header; `received`: the value, cut to 64
 *   characters)
 * @example
 * readRequestControls(['Retryq-Max-Retries', '50'], { maxRetries: 3, ceiling: 10 });
 * // { ok: true, controls: { maxRetries: 10, clampedFrom: '50', budgetMs: undefined } }
 */
export function readRequestControls(
  rawHeaders: readonly string[],
  defaults: { maxRetries: number; ceiling: number },
): { ok: true; controls: RequestControls } | { ok: false; problem: Problem } {
  let maxRetries = defaults.maxRetries;
  let clampedFrom: string | undefined;
  let budgetMs: number | undefined;
  let seenRetries = false;
  let seenDeadline = false;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (
      name.length < proxyHeaderPrefix.length ||
      name.slice(0, proxyHeaderPrefix.length).toLowerCase() !== proxyHeaderPrefix
    )
      continue;
    const lower = name.toLowerCase();
    const raw = rawHeaders[i + 1] as string;
    const value = raw.replace(/^[ \t]+|[ \t]+$/g, '');
    if (lower === 'retryq-max-retries') {
      const header = proxyRequestHeaders.maxRetries;
      if (seenRetries) return problem(header, raw, 'must appear at most once');
      seenRetries = true;
      if (!/^[0-9]+$/.test(value)) {
        return problem(
          header,
          raw,
          `must be a whole number of retries ≥ 0 (digits only; 0 turns retries off; at most ${defaults.ceiling} are used)`,
        );
      }
      const asked = Number(value);
      if (asked > defaults.ceiling) {
        maxRetries = defaults.ceiling;
        clampedFrom = value.length > 64 ? `${value.slice(0, 64)}…` : value;
      } else {
        maxRetries = asked;
      }
    } else if (lower === 'retryq-deadline-ms') {
      const header = proxyRequestHeaders.deadlineMs;
      if (seenDeadline) return problem(header, raw, 'must appear at most once');
      seenDeadline = true;
      const ms = /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
      if (!(ms >= 1 && ms <= maxBudgetMs)) {
        return problem(
          header,
          raw,
          `must be the remaining time budget in whole milliseconds, from 1 to ${maxBudgetMs}`,
        );
      }
      budgetMs = ms;
    } else {
      return problem(
        name,
        raw,
        `is not a retryq header; allowed: ${proxyRequestHeaders.maxRetries}, ${proxyRequestHeaders.deadlineMs}`,
      );
    }
  }
  return { ok: true, controls: { maxRetries, clampedFrom, budgetMs } };
}

function problem(header: string, got: string, rule: string): { ok: false; problem: Problem } {
  return {
    ok: false,
    problem: { path: header, message: rule, received: got.length > 64 ? `${got.slice(0, 64)}…` : got },
  };
}
