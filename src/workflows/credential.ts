/**
 * The credential entity workflow: one long-lived workflow per credential (id `credential:<id>`, see
 * {@link credentialWorkflowId}) that every worker process shares. It holds the credential's load control state:
 *
 * - the **pacer**: send slots for dispatches and inspections inside the one budget (src/policy/load.ts), handed
 *   out through {@link acquireSlotsUpdate}, whatever the task queues' partitioning;
 * - the **gates**: after a rate-limit answer a gate is closed until the permitted time ({@link rateLimitedSignal});
 *   the state is a time, not a lock, so it opens on its own even if every process that saw the 429 is gone;
 * - the **block**: a quota or spending-limit answer ({@link blockSignal}) holds the credential until an operator
 *   resumes it ({@link resumeUpdate}).
 *
 * Activities talk to it with relative durations only (wait so long, closed for so long): the entity counts on its
 * own clock (workflow time), each worker on its own, and neither has to agree with the other. The history is kept
 * short with continue-as-new.
 *
 * @example
 * ```ts
 * const answer = await client.workflow.executeUpdateWithStart(acquireSlotsUpdate, {
 *   args: [{ wants: ['dispatch'], horizonMs: 10_000, budget }],
 *   startWorkflowOperation: WithStartWorkflowOperation.create(credentialWorkflow, { … }),
 * });
 * ```
 */
import {
  allHandlersFinished,
  condition,
  makeContinueAsNewFunc,
  defineQuery,
  defineUpdate,
  setHandler,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import { grantSlot, initialPacer } from '../policy/load.js';
import type { BudgetSplit, PacerState } from '../policy/load.js';

/** The entity workflow's id for a credential under a task-queue prefix (`credential:acme-prod`, or with `@prefix`). */
export function credentialWorkflowId(credential: string, prefix = 'retryq'): string {
  return prefix === 'retryq' ? `credential:${credential}` : `credential:${credential}@${prefix}`;
}

export type SlotKind = 'dispatch' | 'inspect';

/** One gate: closed until a time (entity clock), and why. */
export interface GateState {
  closedUntilMs: number;
  /** What closed it last: `HTTP 429 rate_limit_exceeded (Retry-After: 30)`. */
  reason?: string | undefined;
  /** Held dispatches handed a place since the gate last closed (their wake-ups are spread by it). */
  held: number;
}

export interface BlockState {
  reason: string;
  /** ISO time the block was set (entity clock). */
  since: string;
  code?: string | undefined;
}

export interface CredentialCounters {
  granted: { dispatch: number; inspect: number };
  /** Dispatch slots handed out ahead, as leases (counted apart from `granted`; absent in runs before leases). */
  leased?: number;
  held: { dispatch: number; inspect: number };
  blockedAnswers: number;
  gateClosures: number;
}

/**
 * A budget learned from the provider's headers: slots are paced at it instead of the configured budget until
 * `untilMs` (entity clock); each answer that states the quota again renews it.
 */
export interface LearnedBudgetState {
  budget: BudgetSplit;
  untilMs: number;
  /** Where it came from: `learned from RateLimit-Policy: 60 per 60 s`. */
  reason: string;
}

/** What continues across continue-as-new. */
export interface CredentialCarried {
  pacer: PacerState;
  gates: Record<SlotKind, GateState>;
  blocked: BlockState | undefined;
  counters: CredentialCounters;
  /** Absent in runs before learned limits, and while nothing is learned. */
  learned?: LearnedBudgetState | undefined;
}

export interface CredentialWorkflowInput {
  credential: string;
  budget: BudgetSplit;
  carried?: CredentialCarried;
}

/** A batch of slot requests from one worker process. */
export interface AcquireRequest {
  wants: SlotKind[];
  /** Grant a slot only if it lies at most this far ahead; otherwise answer `held` (reason `paced`). */
  horizonMs: number;
  /** The requester's view of the budget (config); the entity adopts the latest. */
  budget: BudgetSplit;
  /**
   * A lease: up to this many more dispatch slots, after the wants, for the process to hand out itself as its next
   * dispatches ask. Only slots at most {@link AcquireRequest.leaseWindowMs} ahead, and none while the dispatch gate
   * is closed or the credential blocked. Each is accounted like a granted slot.
   */
  lease?: number;
  /** How far ahead a leased slot may lie. */
  leaseWindowMs?: number;
}

/** The answer to one want. Durations are relative to the moment the entity answered. */
export type SlotAnswer =
  | { kind: 'granted'; waitMs: number }
  | { kind: 'held'; reason: 'rate_limited' | 'paced'; holdMs: number; rank: number; why?: string | undefined }
  | { kind: 'blocked'; reason: string; since: string; code?: string | undefined };

export interface AcquireAnswer {
  answers: SlotAnswer[];
  /** The entity's clock when it answered (lets a worker convert the state query's times to its own clock). */
  nowMs: number;
  /** What closed each gate last. */
  reasons: Record<SlotKind, string | undefined>;
  /** How long each gate stays closed from now (0 when open), and the block, for the worker's cache. */
  gates: Record<SlotKind, number>;
  blocked: BlockState | undefined;
  /** The leased slots, in order: each a wait from now, like a granted want's (absent when none was asked for). */
  leased?: number[];
}

/** A rate-limit answer seen by an activity: close the gate of `kind` for `delayMs` from now (entity clock). */
export interface RateLimitedReport {
  kind: SlotKind;
  delayMs: number;
  reason: string;
}

/**
 * A quota the provider stated in its headers: pace at `budget` for `forMs` from now (entity clock), or, with
 * `budget: null`, at the configured budget again.
 */
export interface LearnedBudgetReport {
  budget: BudgetSplit | null;
  forMs: number;
  reason: string;
}

/** A quota or spending-limit answer: block the credential until resumed. */
export interface BlockReport {
  reason: string;
  code?: string | undefined;
}

/** The credential's state for `retryq credentials`, the demo and metrics. Times are ISO (entity clock). */
export interface CredentialState {
  credential: string;
  budget: BudgetSplit;
  gates: Record<SlotKind, { closedUntil: string | undefined; reason: string | undefined; held: number }>;
  blocked: BlockState | undefined;
  counters: CredentialCounters;
  /** The budget learned from the provider's headers that slots are paced at now, if any (else `budget`). */
  learned?: { budget: BudgetSplit; until: string; reason: string } | undefined;
  /** The entity's clock when it last ran (queries do not move it). */
  asOf: string;
}

/** The entity's memo key for its dispatch gate ({@link GateMemo}). */
export const GATE_MEMO = 'dispatchGate';

/**
 * What the entity keeps in its memo about dispatches, for clients to read with a describe (no worker involved):
 * until when the dispatch gate is closed (entity clock, ms; 0: open), what closed it, the budget the held intents are
 * released at, and whether the credential is blocked. Written when one of them changes.
 */
export interface GateMemo {
  closedUntilMs: number;
  reason?: string | undefined;
  dispatchPerMinute: number;
  blocked: boolean;
}

export const acquireSlotsUpdate = defineUpdate<AcquireAnswer, [AcquireRequest]>('acquireSlots');
/** Reports are updates, not signals: once one returns, every later slot request sees it. */
export const rateLimitedUpdate = defineUpdate<void, [RateLimitedReport]>('rateLimited');
export const blockUpdate = defineUpdate<void, [BlockReport]>('block');
export const learnedBudgetUpdate = defineUpdate<void, [LearnedBudgetReport]>('learnedBudget');
export const resumeUpdate = defineUpdate<{ wasBlocked: BlockState | undefined }, [{ by?: string }]>('resume');
export const credentialStateQuery = defineQuery<CredentialState>('credentialState');

/** Most slots one lease may hold. */
const MAX_LEASE = 64;

/** Updates per run before continuing as new (each adds a few events). */
const UPDATES_PER_RUN = 500;

function freshCounters(): CredentialCounters {
  return {
    granted: { dispatch: 0, inspect: 0 },
    held: { dispatch: 0, inspect: 0 },
    blockedAnswers: 0,
    gateClosures: 0,
  };
}

/** The credential's entity. Runs until terminated; continues as new to keep its history short. */
export async function credentialWorkflow(input: CredentialWorkflowInput): Promise<void> {
  let budget = input.budget;
  let pacer = input.carried?.pacer ?? initialPacer();
  const gates: Record<SlotKind, GateState> = input.carried?.gates ?? {
    dispatch: { closedUntilMs: 0, held: 0 },
    inspect: { closedUntilMs: 0, held: 0 },
  };
  let blocked = input.carried?.blocked;
  let learned = input.carried?.learned;
  /** The budget slots are paced at: the learned one while it holds, else the configured one. */
  const paced = (now: number): BudgetSplit =>
    learned !== undefined && learned.untilMs > now ? learned.budget : budget;
  const counters = input.carried?.counters ?? freshCounters();
  let updates = 0;
  let memo = workflowInfo().memo?.[GATE_MEMO] as GateMemo | undefined;

  /** Keeps the memo in step with the dispatch gate, the budget and the block. */
  const publishGate = () => {
    const next: GateMemo = {
      closedUntilMs: gates.dispatch.closedUntilMs,
      ...(gates.dispatch.reason !== undefined ? { reason: gates.dispatch.reason } : {}),
      dispatchPerMinute: paced(Date.now()).dispatchPerMinute,
      blocked: blocked !== undefined,
    };
    if (
      memo?.closedUntilMs === next.closedUntilMs &&
      memo.reason === next.reason &&
      memo.dispatchPerMinute === next.dispatchPerMinute &&
      memo.blocked === next.blocked
    )
      return;
    memo = next;
    upsertMemo({ [GATE_MEMO]: next });
  };

  const openFor = (kind: SlotKind, now: number) => Math.max(0, gates[kind].closedUntilMs - now);

  setHandler(
    acquireSlotsUpdate,
    (req) => {
      updates++;
      const now = Date.now();
      const before = paced(now).dispatchPerMinute;
      budget = req.budget;
      if (learned !== undefined && learned.untilMs <= now) learned = undefined;
      const current = paced(now);
      if (current.dispatchPerMinute !== before && memo) publishGate();
      const answers: SlotAnswer[] = req.wants.map((kind): SlotAnswer => {
        // A block holds dispatches; inspections still run (they resolve what was sent, and spend nothing).
        if (blocked && kind === 'dispatch') {
          counters.blockedAnswers++;
          return { kind: 'blocked', reason: blocked.reason, since: blocked.since, code: blocked.code };
        }
        const gate = gates[kind];
        if (gate.closedUntilMs > now) {
          counters.held[kind]++;
          return {
            kind: 'held',
            reason: 'rate_limited',
            holdMs: gate.closedUntilMs - now,
            rank: gate.held++,
            why: gate.reason,
          };
        }
        const { grant, state } = grantSlot(pacer, kind, now, current, req.horizonMs);
        if (grant.kind === 'later') {
          counters.held[kind]++;
          return { kind: 'held', reason: 'paced', holdMs: grant.atMs - now, rank: 0 };
        }
        pacer = state;
        counters.granted[kind]++;
        return { kind: 'granted', waitMs: Math.max(0, Math.ceil(grant.atMs - now)) };
      });
      // The lease: the next dispatch slots of the same pacer (so every slot, used or not, counts against the
      // budget), only while dispatches may go and only within the lease window.
      const leased: number[] = [];
      const window = Math.min(req.leaseWindowMs ?? 0, req.horizonMs);
      const wanted = Math.min(req.lease ?? 0, MAX_LEASE);
      if (wanted > 0 && !blocked && gates.dispatch.closedUntilMs <= now) {
        while (leased.length < wanted) {
          const { grant, state } = grantSlot(pacer, 'dispatch', now, current, window);
          if (grant.kind === 'later') break;
          pacer = state;
          leased.push(Math.max(0, Math.ceil(grant.atMs - now)));
        }
        counters.leased = (counters.leased ?? 0) + leased.length;
      }
      return {
        answers,
        nowMs: now,
        reasons: { dispatch: gates.dispatch.reason, inspect: gates.inspect.reason },
        gates: { dispatch: openFor('dispatch', now), inspect: openFor('inspect', now) },
        blocked,
        ...(req.lease !== undefined ? { leased } : {}),
      };
    },
    {
      validator: (req: AcquireRequest) => {
        if (!Array.isArray(req.wants) || req.wants.some((w: unknown) => w !== 'dispatch' && w !== 'inspect'))
          throw new Error('wants must list "dispatch" or "inspect"');
        if (!(req.budget.dispatchPerMinute > 0 && req.budget.inspectPerMinute > 0 && req.budget.totalPerMinute > 0))
          throw new Error('the budget must have positive rates');
        if (req.lease !== undefined && !(Number.isInteger(req.lease) && req.lease >= 0))
          throw new Error('lease must be a whole number of slots, 0 or more');
        if (req.leaseWindowMs !== undefined && !(req.leaseWindowMs >= 0))
          throw new Error('leaseWindowMs must be 0 or more');
      },
    },
  );

  setHandler(rateLimitedUpdate, ({ kind, delayMs, reason }) => {
    updates++;
    const gate = gates[kind];
    if (!gate) return;
    const until = Date.now() + Math.max(0, Math.min(delayMs, 366 * 86_400_000));
    if (until > gate.closedUntilMs) {
      // A new closure: held places count afresh from this floor.
      if (gate.closedUntilMs <= Date.now()) gate.held = 0;
      gate.closedUntilMs = until;
      gate.reason = reason.slice(0, 200);
      counters.gateClosures++;
      if (kind === 'dispatch') publishGate();
    }
  });

  setHandler(
    learnedBudgetUpdate,
    ({ budget: stated, forMs, reason }) => {
      updates++;
      const now = Date.now();
      learned =
        stated === null
          ? undefined
          : { budget: stated, untilMs: now + Math.min(forMs, 366 * 86_400_000), reason: reason.slice(0, 200) };
      publishGate();
    },
    {
      validator: ({ budget: stated, forMs }: LearnedBudgetReport) => {
        if (
          stated !== null &&
          !(stated.dispatchPerMinute > 0 && stated.inspectPerMinute > 0 && stated.totalPerMinute > 0)
        )
          throw new Error('a learned budget must have positive rates');
        if (!(forMs >= 0)) throw new Error('forMs must be 0 or more');
      },
    },
  );

  setHandler(blockUpdate, ({ reason, code }) => {
    updates++;
    blocked ??= { reason: reason.slice(0, 300), since: new Date().toISOString(), ...(code ? { code } : {}) };
    publishGate();
  });

  setHandler(resumeUpdate, () => {
    updates++;
    const was = blocked;
    blocked = undefined;
    publishGate();
    return { wasBlocked: was };
  });

  setHandler(credentialStateQuery, () => {
    const view = (g: GateState) => ({
      closedUntil: g.closedUntilMs > 0 ? new Date(g.closedUntilMs).toISOString() : undefined,
      reason: g.reason,
      held: g.held,
    });
    return {
      credential: input.credential,
      budget,
      gates: { dispatch: view(gates.dispatch), inspect: view(gates.inspect) },
      blocked,
      counters,
      ...(learned !== undefined && learned.untilMs > Date.now()
        ? {
            learned: { budget: learned.budget, until: new Date(learned.untilMs).toISOString(), reason: learned.reason },
          }
        : {}),
      asOf: new Date().toISOString(),
    };
  });

  await condition(() => updates >= UPDATES_PER_RUN || workflowInfo().continueAsNewSuggested);
  await condition(allHandlersFinished);
  // The next run starts with the memo this one ended with (describe reads the current run's).
  await makeContinueAsNewFunc<typeof credentialWorkflow>(memo ? { memo: { [GATE_MEMO]: memo } } : {})({
    credential: input.credential,
    budget,
    carried: { pacer, gates, blocked, counters, ...(learned !== undefined ? { learned } : {}) },
  });
}
