/**
 * Pacing by what the provider said, the pure part: the budget a credential (or bucket) is paced at
 * once a quota was learned from its headers ({@link parseRateLimitHeaders}), and the gate a
 * `remaining` of 0 closes before a 429 comes. Beside src/policy/load.ts, which paces inside whatever
 * budget this returns. Time is a parameter: nothing here reads a clock.
 *
 * @example
 * ```ts
 * import { effectiveBudget, learnedGate } from './learned-limits.js';
 * effectiveBudget({ quota: 600, windowMs: 60_000 }, { quota: 60, windowMs: 60_000, field: 'RateLimit-Policy' });
 * // { quota: 60, windowMs: 60000, perMinute: 60, from: 'learned' }: lowered, for that window
 * learnedGate(learned, { nowMs, floorMs: 1000 });
 * // { kind: 'closed', untilMs: <the reset>, scope: { kind: 'credential' } } when remaining is 0
 * ```
 *
 * @module
 */

import { gateScopeOf } from './rate-limit-headers.js';
import type { LearnedLimit, LimitScope, StatedQuota } from './rate-limit-headers.js';

/**
 * Whether a learned quota may change the configured budget.
 * - `down` (the default): only lower it, when the provider states less than was configured.
 * - `up`: also raise it, when the provider states more (never above `maxPerMinute`).
 */
export type LearnMode = 'down' | 'up';

/** A budget of `quota` calls per `windowMs`. */
export interface WindowBudget {
  quota: number;
  windowMs: number;
}

/** What {@link effectiveBudget} decided: the budget to pace at, and where it came from. */
export interface EffectiveBudget extends WindowBudget {
  /**
   * The same rate per minute (`quota · 60 000 / windowMs`), not rounded. May be below what the pacer
   * accepts (a daily quota gives less than 1 per minute, a quota of 0 gives 0): the caller keeps the
   * gate closed or paces at its smallest budget, never at the configured one.
   */
  perMinute: number;
  /** `configured`: the operator's budget stands; `learned`: the provider's quota replaced it. */
  from: 'configured' | 'learned';
}

/** Options of {@link effectiveBudget}. */
export interface EffectiveBudgetOptions {
  /** @default 'down' */
  learn?: LearnMode | undefined;
  /**
   * With `learn: 'up'`, the highest rate a learned quota may raise the budget to, per minute.
   * @default no cap besides the learned quota itself
   */
  maxPerMinute?: number | undefined;
}

const perMinuteOf = (b: WindowBudget): number => (b.quota * 60_000) / b.windowMs;

function checkBudget(name: string, b: WindowBudget): void {
  if (!Number.isFinite(b.quota) || b.quota < 0 || !Number.isFinite(b.windowMs) || b.windowMs <= 0) {
    throw new RangeError(
      `${name} must be a quota ≥ 0 per window > 0 ms, both finite (got ${b.quota} per ${b.windowMs} ms)`,
    );
  }
}

/**
 * The budget to pace at, given the configured one and what the provider stated.
 *
 * - Nothing learned, or a quota without a window (`X-RateLimit-Limit` states none): the configured
 *   budget. A windowless quota cannot be compared with a rate, so it never lowers or raises one; the
 *   provider's `remaining` and reset still close the gate ({@link learnedGate}).
 * - A learned rate below the configured rate: the learned quota and window replace it (lowered).
 * - A learned rate above it: replaced only with `learn: 'up'`, and then at most `maxPerMinute`.
 * - Equal rates: the configured budget.
 *
 * Rates are compared multiplied out (`q₁ · w₂ < q₂ · w₁`), so no rounding decides.
 *
 * @throws RangeError when a budget is not a finite quota ≥ 0 per a finite window > 0
 */
export function effectiveBudget(
  configured: WindowBudget,
  learned: Pick<StatedQuota, 'quota' | 'windowMs'> | undefined,
  opts: EffectiveBudgetOptions = {},
): EffectiveBudget {
  checkBudget('the configured budget', configured);
  const keep: EffectiveBudget = { ...pick(configured), perMinute: perMinuteOf(configured), from: 'configured' };
  if (learned?.windowMs === undefined) return keep;
  const stated = { quota: learned.quota, windowMs: learned.windowMs };
  checkBudget('the learned quota', stated);
  const lhs = stated.quota * configured.windowMs;
  const rhs = configured.quota * stated.windowMs;
  if (lhs < rhs) return { ...stated, perMinute: perMinuteOf(stated), from: 'learned' };
  if (lhs === rhs || (opts.learn ?? 'down') !== 'up') return keep;
  const cap = opts.maxPerMinute;
  if (cap !== undefined && Number.isFinite(cap) && cap >= 0 && perMinuteOf(stated) > cap) {
    // Raised, but only to the cap: the cap per minute, over the learned window.
    if (cap <= keep.perMinute) return keep;
    return { quota: (cap * stated.windowMs) / 60_000, windowMs: stated.windowMs, perMinute: cap, from: 'learned' };
  }
  return { ...stated, perMinute: perMinuteOf(stated), from: 'learned' };
}

function pick(b: WindowBudget): WindowBudget {
  return { quota: b.quota, windowMs: b.windowMs };
}

/** What {@link learnedGate} decided for the scope the headers name. */
export type LearnedGate =
  | { kind: 'open' }
  /** No dispatch of `scope` before `untilMs`: the provider said none are left. */
  | { kind: 'closed'; untilMs: number; scope: LimitScope; why: 'remaining_zero' };

/** Options of {@link learnedGate}. */
export interface LearnedGateOptions {
  /** When the response was received, ms since the epoch (the clock `resetAtMs` is on). */
  nowMs: number;
  /**
   * The shortest closure, in ms: a reset of "now" (or none) still closes the gate this long, as the
   * backoff floor does for a past `Retry-After` (invariant 4). Finite, ≥ 0.
   */
  floorMs: number;
}

/**
 * The gate a learned limit closes **before** a 429 comes. `remaining` of 0 closes the gate of the
 * limit's scope ({@link gateScopeOf}: the whole credential when `global`) until the reset, and never
 * for less than `floorMs`. Without a reset, until one window after now when the window is known, else
 * for `floorMs`. Any other reading, including a `remaining` that was absent or malformed, leaves the
 * gate as it is (`open`): a count left never opens a gate that something else closed.
 *
 * @throws RangeError when `nowMs` or `floorMs` is not finite, or `floorMs` is negative
 */
export function learnedGate(learned: LearnedLimit, opts: LearnedGateOptions): LearnedGate {
  const { nowMs, floorMs } = opts;
  if (!Number.isFinite(nowMs)) throw new RangeError(`learnedGate: nowMs must be finite (got ${nowMs})`);
  if (!Number.isFinite(floorMs) || floorMs < 0) {
    throw new RangeError(`learnedGate: floorMs must be a finite number of ms ≥ 0 (got ${floorMs})`);
  }
  if (learned.kind === 'none' || learned.remaining !== 0) return { kind: 'open' };
  const windowMs = learned.limit?.windowMs;
  const untilMs = Math.max(
    learned.resetAtMs ?? (windowMs === undefined ? -Infinity : nowMs + windowMs),
    nowMs + floorMs,
  );
  return { kind: 'closed', untilMs, scope: gateScopeOf(learned), why: 'remaining_zero' };
}

/**
 * The smallest learned rate the pacer paces at, per minute (as `splitBudget` accepts no less). A learned quota
 * below it (a daily quota, or 0) does not change the pacing: the provider's `remaining` and reset close the gate
 * when nothing is left ({@link learnedGate}), and a stated quota of 0 closes it until the reset.
 */
export const minLearnedPerMinute = 2;

/** A budget split as src/policy/load.ts paces it (the shape of `BudgetSplit`). */
interface Split {
  totalPerMinute: number;
  inspectPerMinute: number;
  dispatchPerMinute: number;
}

/**
 * The budget split to pace at for a learned rate of `perMinute` ({@link EffectiveBudget.perMinute}): the
 * configured split scaled to it, so inspections keep the same share. `undefined` below
 * {@link minLearnedPerMinute} (or not finite): the pacing is left as it is.
 *
 * @example
 * learnedSplit({ totalPerMinute: 600, inspectPerMinute: 120, dispatchPerMinute: 480 }, 60);
 * // { totalPerMinute: 60, inspectPerMinute: 12, dispatchPerMinute: 48 }
 */
export function learnedSplit(configured: Split, perMinute: number): Split | undefined {
  if (!Number.isFinite(perMinute) || perMinute < minLearnedPerMinute) return undefined;
  const share = configured.inspectPerMinute / configured.totalPerMinute;
  const inspect = perMinute * (Number.isFinite(share) && share > 0 && share < 1 ? share : 0.2);
  return { totalPerMinute: perMinute, inspectPerMinute: inspect, dispatchPerMinute: perMinute - inspect };
}

/** What an answer said is left: `remaining` after the call sent at `sentAtMs`, until `untilMs` (its reset). */
export interface LeftReading {
  remaining: number;
  sentAtMs: number;
  untilMs: number;
}

/**
 * Whether the calls sent after the one an answer was about have used up what that answer said was left, so the next
 * call would likely meet a 429 before their own answers come. `sendTimes` are the times calls were sent, ascending
 * (the same clock as `sentAtMs`); a call sent at `sentAtMs` exactly is the answered one, not counted.
 *
 * After the reset (`nowMs ≥ untilMs`) nothing is known of what is left: for `probeMs`, one call goes first and the
 * others wait for its answer, at most `probeMs` after it was sent (its answer may carry no headers); then the
 * reading says nothing (`false`).
 *
 * @example
 * spentOut({ remaining: 1, sentAtMs: 100, untilMs: 5_000 }, [100, 150], 200); // true: the call at 150 used the one left
 */
export function spentOut(
  left: LeftReading | undefined,
  sendTimes: readonly number[],
  nowMs: number,
  probeMs = 1_000,
): boolean {
  if (left === undefined) return false;
  const last = sendTimes[sendTimes.length - 1];
  if (nowMs >= left.untilMs + probeMs) return false;
  if (!(nowMs < left.untilMs)) return last !== undefined && last >= Math.max(left.untilMs, nowMs - probeMs);
  let since = 0;
  for (let i = sendTimes.length - 1; i >= 0 && sendTimes[i]! > left.sentAtMs; i--) since++;
  return since >= left.remaining;
}
