/**
 * The client side of load control: what `submit` knows of each credential's dispatch gate, so that an intent
 * submitted while the gate is closed after a rate-limit answer is held by the Temporal server (a start delay) until
 * its turn, instead of running a workflow task only to go to sleep in it (docs/load-control.md, "Held at submit").
 *
 * Per credential it keeps what the credential's entity last said of its gate (its memo, read with a describe: no
 * worker, no history), read again when it is older than {@link DEFAULT_GATE_FRESH_MS}, at most one read at a time
 * per credential, bounded by {@link DEFAULT_GATE_LOOKUP_TIMEOUT_MS}. What it gets wrong costs time, never safety: an
 * intent held too briefly (the gate closed for longer, or this process's clock runs ahead of the server's) meets the
 * gate check and load control at its first workflow task and is held there, as it would have been without this; an
 * intent not held (the gate closed after the last answer, or the entity did not answer) is held there too.
 *
 * @example
 * ```ts
 * const views = new SubmitGateViews({ lookup: entityLookup(client, 'retryq'), clock: Date.now });
 * const hold = await views.holdFor('acme-prod'); // undefined: open or unknown; else until when, and this one's turn
 * ```
 */
import { WorkflowNotFoundError } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import { boundedWakePlace, spreadWakeUp } from '../policy/index.js';
import { GATE_MEMO, credentialWorkflowId } from '../workflows/credential.js';
import type { GateMemo } from '../workflows/credential.js';

/** How old the last answer about a credential's gate may be before a submit asks its entity again. */
export const DEFAULT_GATE_FRESH_MS = 1_000;
/** Longest a submit waits for the entity's answer; without one, the intent starts at once. */
export const DEFAULT_GATE_LOOKUP_TIMEOUT_MS = 1_000;
/**
 * Intents held at submit that one client starts per second at most, behind one closure: their first workflow tasks
 * land on the shared workflow queue, where the workers' own wake-up bound (`RETRYQ_WAKE_UPS_PER_SECOND`, default 10
 * per worker) does not reach them. The same default as one worker's.
 */
export const DEFAULT_HELD_STARTS_PER_SECOND = 10;
/** After a lookup that failed (no answer in time, no worker serves the entity), how long submits do not ask again. */
export const GATE_LOOKUP_BACKOFF_MS = 5_000;

/** What the entity says of the dispatch gate: closed until a time (server clock, ms), or open (`0`). */
export interface GateAnswer {
  closedUntilMs: number;
  /** What closed it: `HTTP 429 rate_limit_exceeded (Retry-After: 30)`. */
  why: string | undefined;
  /** Places already handed out behind this closure, where known (the next place to hand out); else 0. */
  held: number;
  /** The credential's dispatch budget per minute: the rate held intents are released at. */
  perMinute: number;
  /** The credential is blocked by a quota answer: nothing to hold for a known time. */
  blocked: boolean;
}

/** Asks the credential's entity; `undefined` when it does not exist (it has never held anything: open). */
export type GateLookup = (credential: string, timeoutMs: number) => Promise<GateAnswer | undefined>;

/** An intent held at submit: the gate's time (its permitted time) and its own turn after it. */
export interface SubmitHold {
  /** When the gate opens (ms, the server's clock as the entity counts it). */
  untilMs: number;
  /** When this intent starts: in its place's slice after the gate's time, at the credential's budget. */
  wakeAtMs: number;
  why?: string | undefined;
}

export interface SubmitGateViewsOptions {
  lookup: GateLookup;
  clock: () => number;
  /** @default {@link DEFAULT_GATE_FRESH_MS} */
  freshMs?: number;
  /** @default {@link DEFAULT_GATE_LOOKUP_TIMEOUT_MS} */
  timeoutMs?: number;
  /** @default Math.random */
  random?: () => number;
  /** @default {@link DEFAULT_HELD_STARTS_PER_SECOND}; `0`: the credential's budget only. */
  startsPerSecond?: number;
}

interface Entry {
  answer: GateAnswer | undefined;
  /** Local clock of the answer (or of the failed lookup). */
  atMs: number;
  failed: boolean;
  /** The closure places are counted for, and the next place this process hands out for it. */
  placesFor: number;
  next: number;
  asking: Promise<void> | undefined;
}

/**
 * The entity's memo as a {@link GateLookup}: a describe, which the server answers alone (no worker, no workflow task,
 * nothing added to any history), so it stays quick while the workers are busiest, right after a 429. An entity that
 * has not written its gate yet (gate never closed, or a worker from before 0.5.0) reads as open.
 */
export function entityGateLookup(client: Client, prefix: string): GateLookup {
  return async (credential, timeoutMs) => {
    try {
      const desc = await client.withDeadline(Date.now() + timeoutMs, () =>
        client.workflow.getHandle(credentialWorkflowId(credential, prefix)).describe(),
      );
      const memo = desc.memo?.[GATE_MEMO] as Partial<GateMemo> | undefined;
      if (typeof memo?.closedUntilMs !== 'number' || typeof memo.dispatchPerMinute !== 'number') return undefined;
      return {
        closedUntilMs: memo.closedUntilMs,
        why: typeof memo.reason === 'string' ? memo.reason : undefined,
        held: 0,
        perMinute: memo.dispatchPerMinute,
        blocked: memo.blocked === true,
      };
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    }
  };
}

/** One client's view of its credentials' dispatch gates. */
export class SubmitGateViews {
  readonly #entries = new Map<string, Entry>();
  readonly #lookup: GateLookup;
  readonly #clock: () => number;
  readonly #freshMs: number;
  readonly #timeoutMs: number;
  readonly #random: () => number;
  readonly #startsPerSecond: number;

  constructor(options: SubmitGateViewsOptions) {
    this.#lookup = options.lookup;
    this.#clock = options.clock;
    this.#freshMs = options.freshMs ?? DEFAULT_GATE_FRESH_MS;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_GATE_LOOKUP_TIMEOUT_MS;
    this.#random = options.random ?? Math.random;
    this.#startsPerSecond = options.startsPerSecond ?? DEFAULT_HELD_STARTS_PER_SECOND;
  }

  /**
   * The hold for an intent of `credential` submitted now, or `undefined` (the gate is open, or not known closed).
   * Only the first submit of a credential waits for the entity's answer; later ones use the last answer and, when it
   * is stale, ask again behind it: a stale "open" starts the intent at once, which is what happens without this view,
   * and a stale "closed until T" is still true until T (a gate only ever closes for longer). Each hold takes the next
   * place after the gate's time.
   */
  async holdFor(credential: string): Promise<SubmitHold | undefined> {
    let entry = this.#entries.get(credential);
    const now = this.#clock();
    if (entry === undefined || now - entry.atMs >= (entry.failed ? GATE_LOOKUP_BACKOFF_MS : this.#freshMs)) {
      const asking = this.#ask(credential);
      if (entry === undefined || entry.atMs === -Infinity) await asking;
      entry = this.#entries.get(credential);
    }
    const answer = entry?.answer;
    const at = this.#clock();
    if (!entry || !answer || answer.blocked || !(answer.closedUntilMs > at) || !(answer.perMinute > 0))
      return undefined;
    const rank = entry.next++;
    // Its slice at the credential's budget, or at this client's start rate, whichever comes later.
    const place = boundedWakePlace({
      rank,
      perMinute: answer.perMinute,
      localRank: rank,
      localPerMinute: this.#startsPerSecond > 0 ? this.#startsPerSecond * 60 : undefined,
    });
    return {
      untilMs: answer.closedUntilMs,
      wakeAtMs: spreadWakeUp({ floorMs: answer.closedUntilMs, ...place, random: this.#random }),
      ...(answer.why !== undefined ? { why: answer.why } : {}),
    };
  }

  /** One lookup per credential at a time; a failure leaves the gate unknown (open) for a while. */
  #ask(credential: string): Promise<void> {
    const current = this.#entries.get(credential);
    if (current?.asking) return current.asking;
    const asking = this.#lookup(credential, this.#timeoutMs).then(
      (answer) => this.#store(credential, answer, false),
      () => this.#store(credential, this.#entries.get(credential)?.answer, true),
    );
    const entry: Entry = current ?? {
      answer: undefined,
      atMs: -Infinity,
      failed: false,
      placesFor: 0,
      next: 0,
      asking,
    };
    entry.asking = asking;
    this.#entries.set(credential, entry);
    return asking;
  }

  #store(credential: string, answer: GateAnswer | undefined, failed: boolean): void {
    const entry = this.#entries.get(credential)!;
    entry.asking = undefined;
    entry.atMs = this.#clock();
    entry.failed = failed;
    entry.answer = answer;
    if (!answer) return;
    if (answer.closedUntilMs !== entry.placesFor) {
      // A new closure: count places afresh from those the entity handed out for it.
      entry.placesFor = answer.closedUntilMs;
      entry.next = answer.held;
    } else entry.next = Math.max(entry.next, answer.held);
  }
}
