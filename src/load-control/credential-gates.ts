/**
 * The worker side of load control: one {@link CredentialGates} per worker process, shared by the dispatch and
 * inspect activities of every credential. Before a provider call an activity asks {@link CredentialGates.admit};
 * after a rate-limit or quota answer it reports it ({@link CredentialGates.rateLimited},
 * {@link CredentialGates.blocked}).
 *
 * Per credential, the gates talk to the credential's entity workflow (src/workflows/credential.ts) through one
 * channel at a time: slot requests that pile up while a call is out go together in the next update (so a process
 * sends at most one update per credential at a time), and reports go first. Each answer refreshes an in-process
 * cache of the gate, converted to this process's clock; right before sending, an activity checks that cache, and
 * when it is older than {@link CACHE_FRESH_MS} it asks the entity (a query: no history) whether another process
 * closed the gate in the meantime.
 *
 * @example
 * ```ts
 * const gates = new CredentialGates({ client, prefix: 'retryq', credentials: config.credentials });
 * const admission = await gates.admit('acme-prod', 'dispatch');
 * if (admission.kind === 'held') throw credentialHeldFailure(admission.hold, 'POST', 'dispatch');
 * ```
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { WithStartWorkflowOperation } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { WorkflowIdConflictPolicy, WorkflowNotFoundError } from '@temporalio/common';
import type { UpdateDefinition } from '@temporalio/common';
import type { CredentialHold } from '../failures.js';
import type { LoadControl } from '../activities/deps.js';
import {
  boundedWakePlace,
  describeLearnedLimit,
  effectiveBudget,
  gateScopeOf,
  learnedGate,
  learnedSplit,
  slotIntervalMs,
  spentOut,
} from '../policy/index.js';
import type { BudgetSplit, LearnedLimit, LearnMode, StatedQuota, WakePlace } from '../policy/index.js';
import { taskQueues } from '../task-queues.js';
import {
  acquireSlotsUpdate,
  blockUpdate,
  credentialStateQuery,
  credentialWorkflow,
  credentialWorkflowId,
  learnedBudgetUpdate,
  rateLimitedUpdate,
} from '../workflows/credential.js';
import type { AcquireAnswer, BlockState, CredentialState, SlotAnswer, SlotKind } from '../workflows/credential.js';
import type { LoadMetrics } from './metrics.js';

/** How old the in-process view of a gate may be before a call is sent without asking the entity again. */
export const CACHE_FRESH_MS = 250;
/** Slots further ahead than this are not waited for inside the activity: the intent waits durably instead. */
export const DEFAULT_HORIZON_MS = 10_000;
/** Most wants sent in one update. */
const BATCH = 64;
/**
 * How far ahead the entity may place the slots of a lease. A leased slot nobody uses is budget lost to the other
 * processes of the credential for at most this long.
 */
export const LEASE_WINDOW_MS = 1_000;
/**
 * How late a leased slot may still be used; a later one is dropped, never saved up. Slots are spaced 2 % wider than
 * the budget (`PACING_MARGIN`): 1.2 s per 60 s window for sends that land after their slot. Sends at most this late
 * stay within the budget in every window and leave the rest of that slack to the network and the gate check.
 */
export const LEASE_GRACE_MS = 400;
/** A lease is sized by this process's dispatches asking for a slot within this span. */
const DEMAND_SPAN_MS = 1_000;
/**
 * Longest one call to a credential's entity may take (update or query). Without a bound, a call to an entity that no
 * worker serves (every workflow worker stopped, or none deployed) waits forever, and with it the activity.
 */
export const DEFAULT_ENTITY_CALL_TIMEOUT_MS = 20_000;

export interface CredentialGatesOptions {
  client: Client;
  /** Task queue prefix (the entity workflows run on `<prefix>.credentials`). @default 'retryq' */
  prefix?: string;
  /** Each credential's budget (from config). */
  budgets: ReadonlyMap<string, BudgetSplit>;
  /**
   * How each credential learns from the provider's rate-limit headers (from config): whether a stated quota may
   * raise the budget (`learn: 'up'`) or only lower it (the default), and the header naming its bucket, if any.
   */
  learning?: ReadonlyMap<string, CredentialLearning> | undefined;
  /** @default Date.now */
  clock?: () => number;
  /** @default {@link DEFAULT_HORIZON_MS} */
  horizonMs?: number;
  metrics?: LoadMetrics | undefined;
  /** @default {@link DEFAULT_ENTITY_CALL_TIMEOUT_MS} */
  entityCallTimeoutMs?: number;
  /**
   * The most intents held behind one closure of a credential's gate that this process releases per second (their
   * next workflow task runs on this process's sticky queue): each one's wake-up is spread by its place among this
   * process's held intents at this rate as well as by its place among all of them at the credential's budget,
   * whichever comes later. `0` or unset: by the budget only. See {@link WorkerTuning.wakeUpsPerSecond}.
   */
  wakeUpsPerSecond?: number | undefined;
}

/** How a credential learns from rate-limit headers ({@link CredentialGatesOptions.learning}). */
export interface CredentialLearning {
  /** @default 'down' */
  learn?: LearnMode | undefined;
  bucketHeader?: string | undefined;
}

/**
 * The shortest closure after an answer said no request is left, when its reset says "now" or nothing: as the
 * backoff floor does for a past `Retry-After`, a reset of now never means "send at once".
 */
export const LEARNED_GATE_FLOOR_MS = 1_000;

/** How many send times a channel keeps to set a provider's `remaining` against the calls sent since. */
const SENDS_KEPT = 256;
/** How often a call waits for the answers of calls in flight that may have used up what the provider said was left. */
const SPENT_OUT_POLL_MS = 25;

/** A learned budget is renewed at the entity when it was last sent this long ago (one window, at least). */
const LEARNED_RENEW_MIN_MS = 60_000;

/** What this process learned about a credential's budget, on its own clock. */
export interface LearnedBudgetView {
  budget: BudgetSplit;
  untilMs: number;
  reason: string;
}

/**
 * What {@link CredentialGates.admit} decided: send now (in the slot the entity placed at `slotAtMs` on its own clock,
 * when it answered), or do not send (and why).
 */
export type Admission =
  { kind: 'go'; slotAtMs?: number | undefined; leased?: boolean } | { kind: 'held'; hold: CredentialHold };

interface Want {
  kind: SlotKind;
  resolve: (answer: Answered) => void;
}

/** A send slot this process holds: when to send on its own clock, and where the entity placed it on its clock. */
interface Slot {
  atMs: number;
  entityAtMs: number | undefined;
  /** Taken from a lease (dropped once more than {@link LEASE_GRACE_MS} late) rather than granted to this want. */
  leased: boolean;
}

/** An answer to one want, the entity's clock when it gave it, and the want's slot when granted. */
interface Answered {
  answer: SlotAnswer;
  entityNowMs: number | undefined;
  slot?: Slot | undefined;
}

/** Places behind one closure of a gate (entity clock). */
interface Places {
  /** The closure they count for. */
  closedUntil: number;
  /** The next place among every held call of the credential, counted on from the last one the entity gave. */
  next: number;
  /** The next place among the calls this process held: it bounds the wake-ups landing on this process. */
  local: number;
}

/** The in-process view of one credential's entity, on this process's clock. */
interface View {
  closedUntil: Record<SlotKind, number>;
  reason: Record<SlotKind, string | undefined>;
  blocked: BlockState | undefined;
  /** When the view was last confirmed by the entity (local clock). */
  refreshedAt: number;
  /** When this process last closed a gate itself (local clock): answers to older requests must not reopen it. */
  closedLocallyAt: Record<SlotKind, number>;
  /** Local clock − entity clock, estimated from the last answer (includes the answer's latency: errs late). */
  offsetMs: number | undefined;
  /**
   * The smallest such estimate seen: the entity's clock plus the quickest answer. Sends are aligned to it, so that a
   * slow answer (the entity's workflow task started long before it ran the handler) does not shift one send against
   * the others. Never below the true difference, so a send never comes before its slot.
   */
  minOffsetMs: number;
  /**
   * Until when each gate is closed on the entity's clock, as the entity last said (0: open or not known). Workflows
   * count on the same clock (Temporal's workflow time, even in a time-skipping test), so an intent can compare its own
   * time with it; this process's clock may differ from both.
   */
  entityClosedUntil: Record<SlotKind, number>;
  /**
   * Places this process hands out itself for the gate's current closure (entity
   * clock): counted on from the highest place the entity gave this process, afresh once that closure has passed.
   */
  places: Record<SlotKind, Places>;
  /** Dispatch slots leased and not yet handed out (some may have expired since). */
  leased: number;
  /** The budget learned from the provider's headers, while it holds (local clock). */
  learned: LearnedBudgetView | undefined;
}

class CredentialChannel {
  readonly view: View = {
    closedUntil: { dispatch: 0, inspect: 0 },
    reason: { dispatch: undefined, inspect: undefined },
    blocked: undefined,
    refreshedAt: Number.NEGATIVE_INFINITY,
    closedLocallyAt: { dispatch: Number.NEGATIVE_INFINITY, inspect: Number.NEGATIVE_INFINITY },
    offsetMs: undefined,
    minOffsetMs: Number.POSITIVE_INFINITY,
    entityClosedUntil: { dispatch: 0, inspect: 0 },
    places: { dispatch: { closedUntil: 0, next: 0, local: 0 }, inspect: { closedUntil: 0, next: 0, local: 0 } },
    leased: 0,
    learned: undefined,
  };
  readonly #wants: Want[] = [];
  /** When this process let dispatches through, in order (local clock; the last {@link SENDS_KEPT}). */
  readonly #sends: number[] = [];
  /**
   * What the newest answer said is left (`remaining`), for the call sent at `sentAtMs`, and until when that holds
   * (its reset, local clock). Calls this process sent after that call use it up before their answers come.
   */
  #left: { remaining: number; sentAtMs: number; untilMs: number } | undefined;
  /** The learned budget last sent to the entity (`0`: the configured one), and when (local clock). */
  #learnedSent: { perMinute: number; atMs: number } = { perMinute: 0, atMs: Number.NEGATIVE_INFINITY };
  /** Leased dispatch slots, in order of time (local clock). */
  #lease: Slot[] = [];
  /** When this process's recent dispatches asked for a slot (local clock), for sizing the next lease. */
  readonly #demand: number[] = [];
  /** This process has seen the entity's run answer: plain updates reach it (a start is needed only at first). */
  #running = false;
  readonly #reports: Array<() => Promise<void>> = [];
  #busy = false;
  #querying: Promise<void> | undefined;

  constructor(
    readonly credential: string,
    readonly budget: BudgetSplit,
    readonly gates: CredentialGates,
    readonly learning: CredentialLearning = {},
  ) {}

  /** A dispatch let through now. */
  noteSend(now: number): void {
    this.#sends.push(now);
    if (this.#sends.length > SENDS_KEPT) this.#sends.splice(0, this.#sends.length - SENDS_KEPT);
  }

  /** An answer to the call sent at `sentAtMs` said `remaining` are left until `untilMs`; the newest call's word wins. */
  noteRemaining(remaining: number, sentAtMs: number, untilMs: number): void {
    if (this.#left !== undefined && this.#left.sentAtMs > sentAtMs && this.#left.untilMs > this.gates.clock()) return;
    this.#left = { remaining, sentAtMs, untilMs };
  }

  /**
   * Whether the calls this process sent since the newest answer have used up what that answer said was left (so
   * the next call would likely meet a 429 before their own answers come). Until that answer's reset at most.
   */
  spentOut(now: number): boolean {
    return spentOut(this.#left, this.#sends, now);
  }

  /** The budget this process paces its own estimates by: the learned one while it holds, else the configured one. */
  paced(now = this.gates.clock()): BudgetSplit {
    const learned = this.view.learned;
    return learned !== undefined && learned.untilMs > now ? learned.budget : this.budget;
  }

  /**
   * A quota the provider stated: the budget to pace at ({@link effectiveBudget}; below the configured one, or above
   * it only with `learn: 'up'`). Returns the report for the entity when it changed or is due for renewal, else
   * `undefined`. A quota without a window, or a rate below what the pacer accepts, leaves the pacing as it is.
   */
  noteQuota(limit: StatedQuota | undefined, reason: string, now: number): LearnedBudgetReportJob | undefined {
    if (limit?.windowMs === undefined) return undefined;
    const effective = effectiveBudget({ quota: this.budget.totalPerMinute, windowMs: 60_000 }, limit, {
      learn: this.learning.learn,
    });
    const split = effective.from === 'learned' ? learnedSplit(this.budget, effective.perMinute) : undefined;
    const perMinute = split?.totalPerMinute ?? 0;
    const renewMs = Math.max(LEARNED_RENEW_MIN_MS, limit.windowMs);
    const forMs = 2 * renewMs;
    const sent = this.#learnedSent;
    if (perMinute === sent.perMinute && (perMinute === 0 || now - sent.atMs < renewMs)) return undefined;
    this.#learnedSent = { perMinute, atMs: now };
    this.view.learned = split ? { budget: split, untilMs: now + forMs, reason } : undefined;
    return { budget: split ?? null, forMs, reason, sentAt: now };
  }

  get workflowId(): string {
    return credentialWorkflowId(this.credential, this.gates.prefix);
  }

  request(kind: SlotKind): Promise<Answered> {
    if (this.gates.closed) return Promise.resolve(shutDown());
    if (kind === 'dispatch') {
      const now = this.gates.clock();
      this.#demand.push(now);
      while (this.#demand.length > 0 && this.#demand[0]! <= now - DEMAND_SPAN_MS) this.#demand.shift();
      if (this.#wants.length === 0) {
        const slot = this.#takeLeased(now);
        if (slot) return Promise.resolve(leasedAnswer(slot, now));
      }
    }
    return new Promise((resolve) => {
      this.#wants.push({ kind, resolve });
      this.#pump();
    });
  }

  /** The next leased slot still usable at `now`: expired ones are dropped; none while the gate is closed or blocked. */
  #takeLeased(now: number): Slot | undefined {
    if (this.view.closedUntil.dispatch > now || this.view.blocked) {
      this.voidLease();
      return undefined;
    }
    while (this.#lease.length > 0 && now - this.#lease[0]!.atMs > LEASE_GRACE_MS) this.#lease.shift();
    const slot = this.#lease.shift();
    this.view.leased = this.#lease.length;
    return slot;
  }

  /** Drops every leased slot (a gate closed or a block): the entity keeps them counted; nobody sends in them. */
  voidLease(): void {
    this.#lease = [];
    this.view.leased = 0;
  }

  report(job: () => Promise<void>): Promise<void> {
    return new Promise((resolve) => {
      this.#reports.push(() => job().finally(resolve));
      this.#pump();
    });
  }

  /** Lets queued wants see that the gates closed. */
  wake(): void {
    this.#pump();
  }

  #pump(): void {
    if (this.#busy) return;
    if (this.gates.closed) {
      for (const w of this.#wants.splice(0)) w.resolve(shutDown());
    }
    const report = this.#reports.shift();
    if (report) {
      this.#busy = true;
      void report().finally(() => {
        this.#busy = false;
        this.#pump();
      });
      return;
    }
    this.#serveFromLease();
    if (this.#wants.length === 0) return;
    const batch = this.#wants.splice(0, BATCH);
    this.#busy = true;
    void this.#acquire(batch).finally(() => {
      this.#busy = false;
      this.#pump();
    });
  }

  /** Dispatch wants that queued while an update was out take leased slots, in order, while there are some. */
  #serveFromLease(): void {
    if (this.#lease.length === 0) return;
    const now = this.gates.clock();
    for (let i = 0; i < this.#wants.length;) {
      const want = this.#wants[i]!;
      if (want.kind !== 'dispatch') {
        i++;
        continue;
      }
      const slot = this.#takeLeased(now);
      if (!slot) return;
      this.#wants.splice(i, 1);
      want.resolve(leasedAnswer(slot, now));
    }
  }

  /**
   * How many dispatch slots to lease with this batch: as many as this process's dispatches are expected to use before
   * the slots expire, at the rate they asked in the last {@link DEMAND_SPAN_MS}. Leased slots lie one budget interval
   * apart and each stays usable for {@link LEASE_GRACE_MS}, so `n` of them last `n · interval + grace`: at `rate`
   * wants per ms that is `n = rate · grace / (1 − rate · interval)` (the whole batch's room when the demand meets
   * or exceeds the budget). An idle or slow process leases none.
   */
  #leaseSize(batch: Want[]): number {
    if (!batch.some((w) => w.kind === 'dispatch')) return 0;
    const rate = this.#demand.length / DEMAND_SPAN_MS;
    const busy = rate * slotIntervalMs(this.paced().totalPerMinute);
    const expected = busy >= 1 ? BATCH : Math.floor((rate * LEASE_GRACE_MS) / (1 - busy));
    return Math.max(0, Math.min(BATCH - batch.length, expected));
  }

  /**
   * One update to the entity: a plain update once this process knows the entity's run answers (after
   * continue-as-new the workflow id still reaches the new run), update-with-start at first and whenever the server
   * says no run is there (not started yet, or ended).
   */
  async update<Ret, Arg>(def: UpdateDefinition<Ret, [Arg]>, arg: Arg): Promise<Ret> {
    const { client } = this.gates;
    if (this.#running) {
      try {
        return await this.gates.bounded(() =>
          client.workflow.getHandle(this.workflowId).executeUpdate(def, { args: [arg] }),
        );
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        this.#running = false;
      }
    }
    const answer = await this.gates.bounded(() =>
      client.workflow.executeUpdateWithStart(def, { args: [arg], startWorkflowOperation: this.startOperation() }),
    );
    this.#running = true;
    return answer;
  }

  /** One update for a batch of wants; on repeated failure the wants are held briefly (never sent blind). */
  async #acquire(batch: Want[]): Promise<void> {
    const lease = this.#leaseSize(batch);
    const request = {
      wants: batch.map((w) => w.kind),
      horizonMs: this.gates.horizonMs,
      budget: this.budget,
      ...(lease > 0 ? { lease, leaseWindowMs: LEASE_WINDOW_MS } : {}),
    };
    let lastError: unknown;
    for (let attempt = 0; attempt < 4 && !this.gates.closed; attempt++) {
      try {
        const askedAt = this.gates.clock();
        const answer = await this.update(acquireSlotsUpdate, request);
        this.#absorb(answer, askedAt);
        const now = this.gates.clock();
        const slotOf = (waitMs: number, leased: boolean): Slot => {
          // Send at the slot on the entity's timeline (aligned by the best offset seen), never before it.
          const aligned = Number.isFinite(this.view.minOffsetMs)
            ? answer.nowMs + waitMs + this.view.minOffsetMs
            : now + waitMs;
          return { atMs: Math.min(now + waitMs, aligned), entityAtMs: answer.nowMs + waitMs, leased };
        };
        if (answer.leased && answer.leased.length > 0 && !this.#voidedSince(askedAt)) {
          this.#lease.push(...answer.leased.map((w) => slotOf(w, true)));
          this.#lease.sort((a, b) => a.atMs - b.atMs);
          this.view.leased = this.#lease.length;
        }
        batch.forEach((w, i) => {
          const a = answer.answers[i] ?? unavailable('no answer for this request');
          w.resolve({
            answer: a,
            entityNowMs: answer.nowMs,
            ...(a.kind === 'granted' ? { slot: slotOf(a.waitMs, false) } : {}),
          });
        });
        return;
      } catch (err) {
        lastError = err;
        if (process.env['RETRYQ_LOAD_DEBUG'])
          process.stderr.write(`load control: slot request failed: ${String(err)}\n`);
        await this.gates.pause(100 * 2 ** attempt);
      }
    }
    const why = this.gates.closed ? SHUTTING_DOWN : lastError instanceof Error ? lastError.message : String(lastError);
    for (const w of batch) w.resolve({ answer: unavailable(why), entityNowMs: undefined });
  }

  /** Whether this process's view closed the dispatch gate or saw a block after `askedAt` (a lease then is void). */
  #voidedSince(askedAt: number): boolean {
    return (
      this.view.closedLocallyAt.dispatch >= askedAt ||
      this.view.closedLocallyAt.inspect >= askedAt ||
      this.view.closedUntil.dispatch > this.gates.clock() ||
      this.view.blocked !== undefined
    );
  }

  startOperation() {
    return new WithStartWorkflowOperation(credentialWorkflow, {
      workflowId: this.workflowId,
      taskQueue: taskQueues(this.gates.prefix).credentials,
      args: [{ credential: this.credential, budget: this.budget }],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      staticSummary: `load control of credential ${this.credential}`,
    });
  }

  #absorb(answer: AcquireAnswer, askedAt: number): void {
    const now = this.gates.clock();
    this.view.offsetMs = now - answer.nowMs;
    this.view.minOffsetMs = Math.min(this.view.minOffsetMs, this.view.offsetMs);
    for (const kind of ['dispatch', 'inspect'] as const) {
      const until = answer.gates[kind] > 0 ? now + answer.gates[kind] : 0;
      // The entity's word replaces this process's view, unless this process closed the gate after asking (the
      // entity may not have had the report yet).
      this.view.closedUntil[kind] =
        this.view.closedLocallyAt[kind] >= askedAt ? Math.max(this.view.closedUntil[kind], until) : until;
      this.view.reason[kind] = answer.reasons[kind] ?? this.view.reason[kind];
      this.view.entityClosedUntil[kind] = answer.gates[kind] > 0 ? answer.nowMs + answer.gates[kind] : 0;
    }
    this.view.blocked = answer.blocked;
    this.view.refreshedAt = now;
    if (this.view.closedUntil.dispatch > now || this.view.blocked) this.voidLease();
    this.gates.metrics?.view(this.credential, this.view.closedUntil, this.view.blocked, now);
  }

  /**
   * The entity handed this process place `rank` behind the closed gate of `kind` at `entityNowMs` (its clock): places
   * this process hands out itself count on after it. Returns the place to wake by (see `#wakePlace`).
   */
  notePlace(kind: SlotKind, rank: number, entityNowMs: number): WakePlace {
    const places = this.#places(kind, entityNowMs);
    places.next = Math.max(places.next, rank + 1);
    return this.#wakePlace(kind, rank, places.local++);
  }

  /** The credential's budget for calls of `kind`, per minute. */
  perMinute(kind: SlotKind): number {
    const budget = this.paced();
    return kind === 'dispatch' ? budget.dispatchPerMinute : budget.inspectPerMinute;
  }

  /**
   * A held call's place for spreading its wake-up: among every held call of the credential at its budget, or among
   * the calls this process held at the process's wake-up rate, whichever slice comes later.
   */
  #wakePlace(kind: SlotKind, rank: number, localRank: number): WakePlace {
    const perMinute = this.perMinute(kind);
    const perSecond = this.gates.wakeUpsPerSecond;
    return boundedWakePlace({
      rank,
      perMinute,
      localRank,
      localPerMinute: perSecond !== undefined && perSecond > 0 ? perSecond * 60 : undefined,
    });
  }

  #places(kind: SlotKind, nowMs: number): Places {
    const places = this.view.places[kind];
    if (places.closedUntil <= nowMs) {
      // The closure it counted for has passed.
      places.next = 0;
      places.local = 0;
    }
    places.closedUntil = Math.max(places.closedUntil, this.view.entityClosedUntil[kind]);
    return places;
  }

  /** Refreshes the view from the entity's state (a query), unless it is fresh. One query at a time. */
  async refresh(force = false): Promise<void> {
    if (!force && this.gates.clock() - this.view.refreshedAt <= CACHE_FRESH_MS) return;
    this.#querying ??= (async () => {
      try {
        const state = await this.gates.bounded(() =>
          this.gates.client.workflow.getHandle(this.workflowId).query(credentialStateQuery),
        );
        this.#absorbState(state);
      } catch {
        // No entity yet (nothing was ever sent) or it is briefly unreachable: keep the last view.
      } finally {
        this.#querying = undefined;
      }
    })();
    await this.#querying;
  }

  #absorbState(state: CredentialState): void {
    const now = this.gates.clock();
    for (const kind of ['dispatch', 'inspect'] as const) {
      const until = state.gates[kind].closedUntil;
      const entityUntil = until ? Date.parse(until) : 0;
      if (entityUntil > this.view.entityClosedUntil[kind]) this.view.entityClosedUntil[kind] = entityUntil;
    }
    const offset = this.view.offsetMs;
    if (offset === undefined) return;
    for (const kind of ['dispatch', 'inspect'] as const) {
      const until = state.gates[kind].closedUntil;
      const entityUntil = until ? Date.parse(until) : 0;
      const local = until ? entityUntil + offset : 0;
      // Only ever later: a query may lag behind what this process already knows.
      if (local > this.view.closedUntil[kind]) {
        this.view.closedUntil[kind] = local;
        this.view.reason[kind] = state.gates[kind].reason;
      }
    }
    this.view.blocked = state.blocked;
    this.view.refreshedAt = now;
    // Another process closed the gate (or blocked the credential): this process's lease is void too.
    if (this.view.closedUntil.dispatch > now || this.view.blocked) this.voidLease();
    this.gates.metrics?.view(this.credential, this.view.closedUntil, this.view.blocked, now);
  }
}

/** A learned budget on its way to the entity (`sentAt`: when it was learned, local clock). */
interface LearnedBudgetReportJob {
  budget: BudgetSplit | null;
  forMs: number;
  reason: string;
  sentAt: number;
}

const SHUTTING_DOWN = 'this worker is shutting down';

/** The answer to every slot request once the gates are closed: held, nothing sent. */
const shutDown = (): Answered => ({ answer: unavailable(SHUTTING_DOWN), entityNowMs: undefined });

/** A want served from the lease: granted, at the leased slot's time. */
const leasedAnswer = (slot: Slot, now: number): Answered => ({
  answer: { kind: 'granted', waitMs: Math.max(0, Math.ceil(slot.atMs - now)) },
  entityNowMs: undefined,
  slot,
});

function unavailable(why: string): SlotAnswer {
  return {
    kind: 'held',
    reason: 'paced',
    holdMs: 5_000,
    rank: 0,
    why: `load control unavailable: ${why.slice(0, 200)}`,
  };
}

/** Load control of every credential in one worker process. */
export class CredentialGates implements LoadControl {
  readonly client: Client;
  readonly prefix: string;
  readonly clock: () => number;
  readonly horizonMs: number;
  readonly metrics: LoadMetrics | undefined;
  readonly entityCallTimeoutMs: number;
  readonly wakeUpsPerSecond: number | undefined;
  readonly #channels = new Map<string, CredentialChannel>();
  readonly #closing = new AbortController();

  constructor(options: CredentialGatesOptions) {
    this.client = options.client;
    this.prefix = options.prefix ?? 'retryq';
    this.clock = options.clock ?? Date.now;
    this.horizonMs = options.horizonMs ?? DEFAULT_HORIZON_MS;
    this.metrics = options.metrics;
    this.entityCallTimeoutMs = options.entityCallTimeoutMs ?? DEFAULT_ENTITY_CALL_TIMEOUT_MS;
    this.wakeUpsPerSecond = options.wakeUpsPerSecond;
    for (const [id, budget] of options.budgets) {
      this.#channels.set(id, new CredentialChannel(id, budget, this, options.learning?.get(id)));
      this.metrics?.budget(id, budget);
    }
  }

  #channel(credential: string): CredentialChannel | undefined {
    return this.#channels.get(credential);
  }

  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.#closing.signal.aborted;
  }

  /**
   * The worker is shutting down: every slot request waiting now or made from now on is answered `held` at once
   * (nothing is sent; the intent waits durably and tries again, on another worker or after the restart), and calls
   * to the entities in flight are abandoned. A graceful shutdown needs this: the entity's workflow worker may stop
   * before the activities that wait on it, and an activity waiting for a slot would keep the drain from ending.
   */
  close(): void {
    if (this.closed) return;
    this.#closing.abort(new Error(SHUTTING_DOWN));
    for (const channel of this.#channels.values()) channel.wake();
  }

  /**
   * Runs one call to an entity with a deadline of {@link entityCallTimeoutMs}; at {@link close} the caller stops
   * waiting for it at once (the worker's native connection cannot cancel a call; the deadline ends it).
   */
  bounded<T>(call: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error(SHUTTING_DOWN));
    const closing = this.#closing.signal;
    const running = this.client.withDeadline(Date.now() + this.entityCallTimeoutMs, call);
    return new Promise<T>((resolve, reject) => {
      const onClose = (): void => reject(new Error(SHUTTING_DOWN));
      closing.addEventListener('abort', onClose, { once: true });
      running.then(resolve, reject).finally(() => closing.removeEventListener('abort', onClose));
    });
  }

  /** Waits `ms` between tries, cut short by {@link close}. */
  async pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.#closing.signal }).catch(() => undefined);
  }

  /**
   * Waits for a send slot of `kind` and checks the gate right before returning `go`. Returns `held` (send nothing)
   * when the gate is closed, the credential is blocked, or the next slot lies beyond the horizon. A credential this
   * process has no budget for is let through (the call then fails on the missing secret).
   */
  async admit(credential: string, kind: SlotKind, signal?: AbortSignal): Promise<Admission> {
    const channel = this.#channel(credential);
    if (!channel) return { kind: 'go' };
    const m = this.metrics;
    m?.waiting(credential, kind, +1);
    try {
      for (;;) {
        const { answer, entityNowMs, slot } = await channel.request(kind);
        if (answer.kind === 'blocked') {
          m?.held(credential, kind, 'blocked');
          return { kind: 'held', hold: { kind: 'blocked', credential, reason: answer.reason, since: answer.since } };
        }
        if (answer.kind === 'held') {
          m?.held(credential, kind, answer.reason);
          const place =
            answer.reason === 'rate_limited' && entityNowMs !== undefined
              ? channel.notePlace(kind, answer.rank, entityNowMs)
              : {
                  rank: answer.rank,
                  perMinute: channel.perMinute(kind),
                };
          return {
            kind: 'held',
            hold: { kind: answer.reason, credential, holdMs: answer.holdMs, ...place, why: answer.why },
          };
        }
        const waitMs = slot ? slot.atMs - this.clock() : answer.waitMs;
        if (waitMs > 0) {
          const stop = signal ? AbortSignal.any([signal, this.#closing.signal]) : this.#closing.signal;
          await sleep(waitMs, undefined, { signal: stop }).catch((err: unknown) => {
            if (signal?.aborted) throw err; // the activity was cancelled: it says so itself
          });
          if (this.closed) continue; // asks again, and is answered `held`: the slot is not used
        }
        // Calls in flight may have used up what the provider said was left: wait for their answers (within the
        // horizon), which either close the gate or say more is left.
        if (kind === 'dispatch' && channel.spentOut(this.clock())) {
          const giveUpAt = this.clock() + this.horizonMs;
          while (channel.spentOut(this.clock()) && this.clock() < giveUpAt && !this.closed && !signal?.aborted)
            await this.pause(SPENT_OUT_POLL_MS);
          if (channel.spentOut(this.clock())) {
            m?.held(credential, kind, 'paced');
            return {
              kind: 'held',
              hold: {
                kind: 'paced',
                credential,
                holdMs: 1_000,
                rank: 0,
                perMinute: channel.perMinute(kind),
                why: 'the calls in flight may have used what the provider said was left',
              },
            };
          }
        }
        // Right before sending: did this or another process close the gate meanwhile?
        await channel.refresh();
        const now = this.clock();
        if (channel.view.closedUntil[kind] > now || (kind === 'dispatch' && channel.view.blocked)) continue; // ask again: the entity hands out the held place
        // A leased slot that has passed by more than the grace is not used late: take the next one, or ask again.
        if (slot?.leased && now - slot.atMs > LEASE_GRACE_MS) continue;
        m?.granted(credential, kind);
        if (kind === 'dispatch') channel.noteSend(now);
        return { kind: 'go', slotAtMs: slot?.entityAtMs, leased: slot?.leased ?? false };
      }
    } finally {
      m?.waiting(credential, kind, -1);
    }
  }

  /**
   * A rate-limit answer for `credential`: closes the gate of `kind` in this process at once and in every process
   * through the entity. `delayMs` is how long from now the provider asked to wait (a floor when it said nothing).
   */
  async rateLimited(credential: string, kind: SlotKind, delayMs: number, reason: string): Promise<void> {
    const channel = this.#channel(credential);
    if (!channel) return;
    this.metrics?.rateLimited(credential, kind);
    await this.#close(channel, kind, delayMs, reason);
  }

  /** The header naming `credential`'s bucket in its config, if any. */
  bucketHeaderOf(credential: string): string | undefined {
    return this.#channel(credential)?.learning.bucketHeader;
  }

  /**
   * What the rate-limit headers of an answer said. No request left (`remaining` 0, or a stated quota of 0) closes
   * the gate of `kind` until the reset, before a 429 comes, in this process at once and in every process through
   * the entity; a stated quota paces the credential at it ({@link CredentialChannel.noteQuota}). Either is sent to
   * the entity only when it changes what the entity knows, so most answers send nothing.
   */
  async learned(
    credential: string,
    kind: SlotKind,
    learned: Extract<LearnedLimit, { kind: 'limit' }>,
    sentAtMs: number = this.clock(),
  ): Promise<void> {
    const channel = this.#channel(credential);
    if (!channel) return;
    const now = this.clock();
    if (kind === 'dispatch' && learned.remaining !== undefined && learned.resetAtMs !== undefined)
      channel.noteRemaining(learned.remaining, sentAtMs, learned.resetAtMs);
    const reason = describeLearnedLimit(learned, now);
    const jobs: Array<Promise<void>> = [];
    const nothingLeft =
      learned.remaining === undefined && learned.limit?.quota === 0 ? { ...learned, remaining: 0 } : learned;
    const gate = learnedGate(nothingLeft, { nowMs: now, floorMs: LEARNED_GATE_FLOOR_MS });
    if (gate.kind === 'closed' && gate.untilMs > channel.view.closedUntil[kind]) {
      this.metrics?.learnedClosure(credential, kind, gate.scope.kind);
      jobs.push(this.#close(channel, kind, gate.untilMs - now, reason));
    }
    // A quota stated for a bucket is the bucket's, not the key's: it does not change the credential's budget.
    const report =
      gateScopeOf(learned).kind === 'credential' ? channel.noteQuota(learned.limit, reason, now) : undefined;
    if (report) {
      this.metrics?.paced(
        credential,
        channel.paced(now).totalPerMinute,
        report.budget === null ? 'configured' : (learned.limit?.field ?? 'configured'),
      );
      jobs.push(
        channel.report(() =>
          this.#retrying(() =>
            channel.update(learnedBudgetUpdate, {
              budget: report.budget,
              forMs: Math.max(0, report.forMs - (this.clock() - report.sentAt)),
              reason: report.reason,
            }),
          ),
        ),
      );
    }
    await Promise.all(jobs);
  }

  /** Closes the gate of `kind` for `delayMs` from now, here at once and at the entity. */
  async #close(channel: CredentialChannel, kind: SlotKind, delayMs: number, reason: string): Promise<void> {
    const { credential } = channel;
    const now = this.clock();
    channel.view.closedUntil[kind] = Math.max(channel.view.closedUntil[kind], now + delayMs);
    channel.view.closedLocallyAt[kind] = now;
    channel.view.reason[kind] = reason;
    // Any closure for the key voids this process's lease at once (other processes: at their next check).
    channel.voidLease();
    this.metrics?.view(credential, channel.view.closedUntil, channel.view.blocked, now);
    await channel.report(async () => {
      // Only the time still left: the report may have queued behind other calls.
      const left = Math.max(0, now + delayMs - this.clock());
      await this.#retrying(() => channel.update(rateLimitedUpdate, { kind, delayMs: left, reason }));
      // Learn the closure on the entity's clock (a query, no history), for the intents' local gate check.
      await channel.refresh(true);
    });
  }

  /** A quota or spending-limit answer: blocks the credential's dispatches in every process until resumed. */
  async blocked(credential: string, reason: string, code: string | undefined): Promise<void> {
    const channel = this.#channel(credential);
    if (!channel) return;
    channel.view.blocked ??= { reason, since: new Date(this.clock()).toISOString(), ...(code ? { code } : {}) };
    channel.voidLease();
    this.metrics?.view(credential, channel.view.closedUntil, channel.view.blocked, this.clock());
    await channel.report(() =>
      this.#retrying(() => channel.update(blockUpdate, { reason, ...(code ? { code } : {}) })),
    );
  }

  /** A few tries; when the entity stays unreachable the local gate still holds this process. */
  async #retrying(call: () => Promise<unknown>): Promise<void> {
    for (let attempt = 0; attempt < 4 && !this.closed; attempt++) {
      try {
        await call();
        return;
      } catch {
        await this.pause(100 * 2 ** attempt);
      }
    }
  }

  /** This process's view of each credential (for metrics and the demo). */
  views(): Map<string, Readonly<View>> {
    return new Map([...this.#channels].map(([id, c]) => [id, c.view]));
  }
}
