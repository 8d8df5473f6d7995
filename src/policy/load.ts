/**
 * Load control per credential, the pure part: how one provider budget is split between dispatches and
 * inspections, how send slots are paced inside it, and how wake-ups released by one floor are spread.
 *
 * The credential entity workflow (src/workflows/credential.ts) keeps a {@link PacerState} and calls
 * {@link grantSlot} for every slot it hands out; the intent workflow calls {@link spreadWakeUp} when a
 * dispatch was held by a closed gate. Time is a parameter: nothing here reads a clock.
 *
 * @example
 * ```ts
 * import { grantSlot, initialPacer, splitBudget, spreadWakeUp } from './load.js';
 * const budget = splitBudget(60, 0.2); // { totalPerMinute: 60, inspectPerMinute: 12, dispatchPerMinute: 48 }
 * const { grant, state } = grantSlot(initialPacer(), 'dispatch', 0, budget, 10_000);
 * grant; // { kind: 'granted', atMs: 0 }
 * spreadWakeUp({ floorMs: 60_000, rank: 3, perMinute: 60, random: () => 0.5 }); // 63_500
 * ```
 *
 * @module
 */

/** One credential's budget per minute: the provider's limit, and the part of it reserved for inspections. */
export interface BudgetSplit {
  /** The provider's limit for the key: every call made with it. */
  totalPerMinute: number;
  /** Reserved for inspections (read-only lookups), inside the total. */
  inspectPerMinute: number;
  /** What dispatches may use while inspections are running: `total − inspect`, always > 0. */
  dispatchPerMinute: number;
}

/**
 * Splits a credential's limit. `inspectReserve` is a share of the total when it lies in (0, 1), or a
 * number of requests per minute when it is an integer ≥ 1. The reserve is rounded to whole requests
 * per minute (at least 1) and must leave dispatch at least 1 per minute.
 *
 * @throws RangeError when the split cannot work; the message says why and what would
 */
export function splitBudget(totalPerMinute: number, inspectReserve: number): BudgetSplit {
  if (!Number.isFinite(totalPerMinute) || totalPerMinute < 2)
    throw new RangeError(
      `requestsPerMinute must be at least 2 to leave room for dispatches and inspections (got ${totalPerMinute})`,
    );
  const problem = budgetProblem(totalPerMinute, inspectReserve);
  if (problem) throw new RangeError(problem);
  const inspect = inspectReserve < 1 ? Math.max(1, Math.round(totalPerMinute * inspectReserve)) : inspectReserve;
  return { totalPerMinute, inspectPerMinute: inspect, dispatchPerMinute: totalPerMinute - inspect };
}

/** Why a budget split cannot work, as a sentence, or `undefined` when it can. */
export function budgetProblem(totalPerMinute: number, inspectReserve: number): string | undefined {
  if (!Number.isFinite(inspectReserve) || inspectReserve <= 0)
    return `inspectReserve must be a share in (0, 1) or a whole number of requests per minute ≥ 1 (got ${inspectReserve})`;
  if (inspectReserve >= 1 && !Number.isInteger(inspectReserve))
    return `inspectReserve of 1 or more is a number of requests per minute and must be a whole number (got ${inspectReserve})`;
  const inspect = inspectReserve < 1 ? Math.max(1, Math.round(totalPerMinute * inspectReserve)) : inspectReserve;
  if (totalPerMinute - inspect < 1)
    return (
      `inspectReserve ${inspectReserve} reserves ${inspect} of the ${totalPerMinute} requests per minute for inspections, ` +
      `leaving dispatch ${totalPerMinute - inspect}; reserve less (at most ${totalPerMinute - 1} per minute, ` +
      `or a share below ${((totalPerMinute - 0.5) / totalPerMinute).toFixed(3)}) or raise requestsPerMinute`
    );
  return undefined;
}

/**
 * Slots are spaced 2 % wider than the budget allows: the provider counts arrival times, and sends
 * land a little after their slot by varying amounts; over one 60 s window the margin adds up to 1.2 s of
 * slack between a request and the one that would make it the (limit + 1)-th.
 */
export const PACING_MARGIN = 0.02;

/** Where the pacer of one credential stands (ms on one clock, the entity workflow's). */
export interface PacerState {
  /** No slot of any kind before this (the total budget). */
  nextAnyAtMs: number;
  /** No dispatch slot before this while inspections are active (the dispatch share). */
  nextDispatchAtMs: number;
  /** No inspection slot before this (the reserved share). */
  nextInspectAtMs: number;
  /** The last inspection slot; inspections count as active for 60 s after it. */
  lastInspectAtMs: number;
}

export function initialPacer(): PacerState {
  return {
    nextAnyAtMs: 0,
    nextDispatchAtMs: 0,
    nextInspectAtMs: 0,
    lastInspectAtMs: -8.64e15, // long ago (finite: the state travels as JSON)
  };
}

/** The spacing of slots at `perMinute`, with the {@link PACING_MARGIN}. */
export function slotIntervalMs(perMinute: number): number {
  return (60_000 / perMinute) * (1 + PACING_MARGIN);
}

/** What {@link grantSlot} decided. */
export type SlotGrant =
  | { kind: 'granted'; atMs: number }
  /** The next free slot lies beyond the horizon; nothing was taken. */
  | { kind: 'later'; atMs: number };

/**
 * Hands out the next send slot of `kind`, or says when the next one would be if it lies more than
 * `horizonMs` ahead (then the state is unchanged).
 *
 * - Every slot is at least one total interval after the previous slot of any kind, so any 60 s window
 *   holds at most `totalPerMinute` slots.
 * - Inspections take slots at most at their reserved rate; dispatches use the whole budget while no
 *   inspection ran in the last minute, and `total − inspect` while inspections are active, so the
 *   reserve is there when it is needed and lent to dispatch when it is not.
 */
export function grantSlot(
  state: PacerState,
  kind: 'dispatch' | 'inspect',
  nowMs: number,
  budget: BudgetSplit,
  horizonMs: number,
): { grant: SlotGrant; state: PacerState } {
  const total = slotIntervalMs(budget.totalPerMinute);
  if (kind === 'inspect') {
    const atMs = Math.max(nowMs, state.nextAnyAtMs, state.nextInspectAtMs);
    if (atMs > nowMs + horizonMs) return { grant: { kind: 'later', atMs: Math.ceil(atMs) }, state };
    return {
      grant: { kind: 'granted', atMs },
      state: {
        ...state,
        nextAnyAtMs: atMs + total,
        nextInspectAtMs: atMs + slotIntervalMs(budget.inspectPerMinute),
        lastInspectAtMs: atMs,
      },
    };
  }
  const inspecting = nowMs - state.lastInspectAtMs < 60_000;
  const atMs = Math.max(nowMs, state.nextAnyAtMs, inspecting ? state.nextDispatchAtMs : nowMs);
  if (atMs > nowMs + horizonMs) return { grant: { kind: 'later', atMs: Math.ceil(atMs) }, state };
  return {
    grant: { kind: 'granted', atMs },
    state: { ...state, nextAnyAtMs: atMs + total, nextDispatchAtMs: atMs + slotIntervalMs(budget.dispatchPerMinute) },
  };
}

/** Input of {@link spreadWakeUp}. */
export interface SpreadInput {
  /** The floor: when the gate opens (the server-permitted time). */
  floorMs: number;
  /** This waiter's place among those held by the same floor, 0-based (the credential hands them out). */
  rank: number;
  /** The rate the waiters may be released at (the credential's dispatch budget per minute), > 0. */
  perMinute: number;
  /** Uniform in [0, 1); clamped; a non-finite value counts as 0.5. */
  random: () => number;
}

/**
 * When a dispatch held by a closed gate should wake: after the floor, in the rank's own slice of
 * width `60 000 / perMinute` ms, at a random point inside it. So the wait is never shorter than the
 * server asked (jitter only lengthens it), waiters never stampede, and the first minute after the floor
 * wakes at most `perMinute` of them (ranks ≥ perMinute fall later). Whole ms.
 */
export function spreadWakeUp(input: SpreadInput): number {
  const { floorMs, perMinute } = input;
  const rank = Number.isFinite(input.rank) && input.rank > 0 ? Math.floor(input.rank) : 0;
  if (!Number.isFinite(perMinute) || perMinute <= 0) throw new RangeError(`perMinute must be > 0 (got ${perMinute})`);
  const r = input.random();
  const u = typeof r === 'number' && Number.isFinite(r) ? Math.min(Math.max(r, 0), 0.999_999) : 0.5;
  // Multiply before dividing: (rank · 60 000) / perMinute is exact where rank · (60 000 / perMinute) may fall short.
  return Math.ceil(floorMs) + Math.floor(((rank + u) * 60_000) / perMinute);
}

/** A held waiter's place as {@link spreadWakeUp} takes it: a rank and the rate its slices are counted at. */
export interface WakePlace {
  rank: number;
  perMinute: number;
}

/**
 * The place a held waiter wakes by when its wake-ups are bounded twice: by the credential's budget (`rank` among
 * every waiter of the closure, at `perMinute`), and by what the process that will run its next workflow task can
 * take (`localRank` among the waiters that process holds, at `localPerMinute`; `undefined` or not above 0: no such
 * bound). Whichever slice starts later wins, so the waiter is never released sooner than either bound allows: the
 * budget keeps its first-minute guarantee across every process, and no process is handed wake-ups faster than it
 * was told it can run them.
 */
export function boundedWakePlace(input: {
  rank: number;
  perMinute: number;
  localRank: number;
  localPerMinute: number | undefined;
}): WakePlace {
  const { rank, perMinute, localRank, localPerMinute } = input;
  if (localPerMinute === undefined || !(localPerMinute > 0)) return { rank, perMinute };
  // Compare slice starts in one unit (rank · 60 000 / rate), multiplied out to stay exact.
  return localRank * perMinute > rank * localPerMinute
    ? { rank: localRank, perMinute: localPerMinute }
    : { rank, perMinute };
}
