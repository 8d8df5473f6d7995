/**
 * The admission gates: a sliding-window request limit per API key (one for writes, one for
 * status reads) and the spending ledger (per-key spend limit, per-workspace allowance).
 * All time comes from the caller, so tests drive the windows with an injected clock.
 */

/** Whether a request may pass the rate gate, and if not, how long until it could. */
export type Admission = { admitted: true } | { admitted: false; waitMs: number };

/** Timestamps in arrival order, with O(1) amortised removal from the front. */
class TimestampLog {
  #items: number[] = [];
  #head = 0;

  get size(): number {
    return this.#items.length - this.#head;
  }

  at(index: number): number {
    return this.#items[this.#head + index] ?? 0;
  }

  push(t: number): void {
    this.#items.push(t);
  }

  dropWhile(predicate: (t: number) => boolean): void {
    while (this.size > 0 && predicate(this.at(0))) this.#head++;
    if (this.#head > 1_024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }
}

/**
 * A sliding-window log: a request is admitted when fewer than `limit` admitted requests arrived in
 * the last `windowMs`. Rejected requests do not count. Memory per bucket is at most `limit`
 * timestamps.
 */
export class SlidingWindowLimiter {
  readonly #logs = new Map<string, TimestampLog>();

  constructor(readonly windowMs = 60_000) {}

  /** Admits (and records) a request in `bucket`, or says how long to wait. */
  take(bucket: string, limit: number, nowMs: number): Admission {
    let log = this.#logs.get(bucket);
    if (!log) {
      log = new TimestampLog();
      this.#logs.set(bucket, log);
    }
    log.dropWhile((t) => t + this.windowMs <= nowMs);
    if (log.size < limit) {
      log.push(nowMs);
      return { admitted: true };
    }
    // The (size - limit)th oldest entry must leave the window before one more fits.
    const oldestThatMustExpire = log.at(log.size - limit);
    return { admitted: false, waitMs: Math.max(1, oldestThatMustExpire + this.windowMs - nowMs) };
  }

  /** Forgets every window. */
  clear(): void {
    this.#logs.clear();
  }
}

/** Which spending gate stopped an operation. */
export type SpendRefusal =
  | { kind: 'spend_limit'; limit: number; used: number }
  | { kind: 'workspace_allowance'; workspace: string; allowance: number; used: number };

/** Counts billable operations per key and per workspace. */
export class SpendingLedger {
  readonly #byKey = new Map<string, number>();
  readonly #byWorkspace = new Map<string, number>();

  /** Billable operations charged to a key so far. */
  usedByKey(keyId: string): number {
    return this.#byKey.get(keyId) ?? 0;
  }

  /** Billable operations charged to a workspace so far. */
  usedByWorkspace(workspace: string): number {
    return this.#byWorkspace.get(workspace) ?? 0;
  }

  /** Why one more billable operation is not allowed, or `undefined` if it is. */
  check(
    key: { id: string; workspace: string; spendLimit?: number | undefined },
    workspaceAllowance: number | undefined,
  ): SpendRefusal | undefined {
    const usedByKey = this.usedByKey(key.id);
    if (key.spendLimit !== undefined && usedByKey >= key.spendLimit) {
      return { kind: 'spend_limit', limit: key.spendLimit, used: usedByKey };
    }
    const usedByWorkspace = this.usedByWorkspace(key.workspace);
    if (workspaceAllowance !== undefined && usedByWorkspace >= workspaceAllowance) {
      return {
        kind: 'workspace_allowance',
        workspace: key.workspace,
        allowance: workspaceAllowance,
        used: usedByWorkspace,
      };
    }
    return undefined;
  }

  /** Records one billable operation. */
  charge(key: { id: string; workspace: string }): void {
    this.#byKey.set(key.id, this.usedByKey(key.id) + 1);
    this.#byWorkspace.set(key.workspace, this.usedByWorkspace(key.workspace) + 1);
  }

  /** Forgets all spending. */
  clear(): void {
    this.#byKey.clear();
    this.#byWorkspace.clear();
  }
}
