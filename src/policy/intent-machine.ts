/**
 * The intent's decisions as a pure state machine: `(state, event) → { state, commands }`.
 *
 * The intent workflow (src/workflows/intent.ts) is a thin shell over this module: it feeds each thing that happens
 * (the run started, a call answered, a timer fired, a signal or update arrived) to {@link step} with its workflow
 * time and its deterministic `random`, carries out the commands it gets back (dispatch, inspect, sleep until, abort
 * the call in flight, finish) as Temporal calls, and publishes the status. Every rule of DESIGN.md's invariants 2–8
 * lives here, so they are tested without Temporal (test/unit/policy/intent-machine*.test.ts).
 *
 * The state is plain data (it crosses continue-as-new and answers the `status` query). {@link step} never mutates
 * its input: it works on a copy.
 *
 * @example
 * ```ts
 * import { initialState, step } from './intent-machine.js';
 * const ctx = { spec, nowMs: Date.parse('2026-01-01T00:00:00Z'), random: () => 0.5 };
 * let { state, commands } = step(ctx, initialState(spec), { type: 'started' });
 * commands; // [{ kind: 'dispatch', attempt: 1 }]
 * ({ state, commands } = step(ctx, state, { type: 'dispatch_failed', evidence, decision }));
 * commands; // [{ kind: 'sleep', untilMs: … }] — never before the server-permitted time
 * ```
 *
 * @module
 */
import type { CallDecision, CallEvidence, CredentialHold } from './call-outcome.js';
import type { Decision } from './classify.js';
import { classify } from './classify.js';
import { describeEvidence, evidenceText } from './evidence-text.js';
import type { Evidence, TransportFailure } from './evidence.js';
import { inspectionFailure, inspectionVerdict } from './inspection.js';
import type { InspectionFinding } from './inspection.js';
import { spreadWakeUp } from './load.js';
import { deliveryVerdict, rememberDelivery } from './webhook-deliveries.js';
import type { DeliveryVerdict } from './webhook-deliveries.js';
import { nextAttempt } from './schedule.js';
import { ATTEMPT_LOG_LIMIT, Phase } from '../intent-status.js';
import type {
  AttemptRecord,
  EvidenceSummary,
  HeldAtSubmit,
  IntentSpec,
  IntentStatus,
  JsonValue,
  WebhookDelivery,
} from '../intent-status.js';

/** While its credential is blocked, an intent looks again this often (an operator's resume also wakes it). */
export const BLOCKED_RECHECK_MS = 5 * 60_000;

/** Where the run is between events. */
export type Stage =
  /** Before the run's first step (signals that came with the start are recorded, nothing runs). */
  | 'new'
  /** A provider call runs (`call` says which). */
  | 'calling'
  /** A durable sleep until `dueAtMs`. */
  | 'sleeping'
  /** Finished: nothing moves it any more. */
  | 'done';

/** The intent's whole state: plain data, carried across continue-as-new. */
export interface IntentState {
  stage: Stage;
  status: IntentStatus;
  /** The next provider call must be an inspection (invariant 5). */
  needsInspection: boolean;
  inspectionsSinceUnknown: number;
  /** ms; the server's floor for the next dispatch. */
  permittedAtMs?: number | undefined;
  /** ms; when the next provider call is due (while sleeping). */
  dueAtMs?: number | undefined;
  /** Dispatches in a row that were never sent: their backoff. */
  neverSentInARow: number;
  /** `<source>:<deliveryId>` of the webhook deliveries recorded (bounded). */
  seenDeliveries: string[];
  /** A final webhook state not yet applied. */
  webhookVerdict?: WebhookDelivery | undefined;
  /** The call in flight. */
  call?: { kind: 'dispatch' | 'inspect'; startedAt: string } | undefined;
  /** "Retry now" asked before the run's first step. */
  retryNowEarly?: boolean | undefined;
  /** The client held the intent at submit (until the first step). */
  heldAtSubmit?: HeldAtSubmit | undefined;
}

/** What the machine knows of the world at a step: the intent, the workflow time, the deterministic random. */
export interface StepContext {
  spec: IntentSpec;
  nowMs: number;
  random: () => number;
}

/** A successful dispatch: the provider's 2xx answer. */
export interface DispatchSuccess {
  status: number;
  body: JsonValue;
  truncated?: boolean | undefined;
}

/** What an inspection found, or why it could not look. */
export type InspectionAnswer =
  | { kind: 'found'; found: InspectionFinding<JsonValue> }
  | { kind: 'failed'; evidence: CallEvidence; decision: CallDecision }
  | { kind: 'held'; hold: CredentialHold }
  /** The inspection was cancelled (a webhook settled the outcome, or the intent was cancelled): no answer. */
  | { kind: 'cancelled' };

/** Everything that can happen to an intent. */
export type IntentEvent =
  | { type: 'started' }
  | { type: 'timer_fired' }
  | { type: 'dispatch_succeeded'; result: DispatchSuccess }
  /** The dispatch failed; the activity classified its evidence (`decision`, with the absolute permitted time). */
  | { type: 'dispatch_failed'; evidence: CallEvidence; decision: CallDecision }
  /** Load control held the dispatch: nothing was sent, it is no attempt. */
  | { type: 'dispatch_held'; hold: CredentialHold }
  /** The dispatch was cancelled before any worker started it: nothing was sent. */
  | { type: 'dispatch_unsent' }
  /** No worker started the dispatch within the stall time; it keeps waiting for one. */
  | { type: 'dispatch_stalled'; since: string; taskQueue: string }
  | { type: 'inspected'; answer: InspectionAnswer }
  | { type: 'webhook'; delivery: WebhookDelivery }
  | { type: 'cancel'; reason: string }
  | { type: 'retry_now' }
  /** Cancelled through Temporal (UI, `handle.cancel()`): record and stop. `unsent`: the call in flight sent nothing. */
  | { type: 'cancelled_by_temporal'; unsent: boolean };

/** What the shell must do. */
export type IntentCommand =
  | { kind: 'dispatch'; attempt: number }
  | { kind: 'inspect'; attempt: number }
  | { kind: 'sleep'; untilMs: number }
  /** Cancel the call in flight (a cancel, or a webhook that settled what an inspection looks for). */
  | { kind: 'abort_call' }
  | { kind: 'finish'; phase: Exclude<Phase, 'scheduled' | 'dispatching' | 'waiting' | 'inspecting'> };

/** What a step counted, for the shell's metrics (emitted once, never on replay). */
export type IntentCount =
  | { metric: 'attempt'; decision: string }
  | { metric: 'rate_limited'; kind: 'dispatch' | 'inspect' }
  | { metric: 'inspection'; result: string }
  | { metric: 'held'; reason: string }
  | { metric: 'stalled' }
  | { metric: 'ended'; phase: string };

export interface StepResult {
  state: IntentState;
  commands: IntentCommand[];
  counts: IntentCount[];
}

/** The state of a new intent (held at submit when the client said so). */
export function initialState(spec: IntentSpec, heldAtSubmit?: HeldAtSubmit): IntentState {
  const status: IntentStatus = {
    idempotencyKey: spec.idempotencyKey,
    credential: spec.credential,
    phase: Phase.scheduled,
    attempts: 0,
    maxAttempts: spec.policy.maxAttempts,
    inspections: 0,
    deadline: spec.deadline,
    attemptLog: [],
    attemptLogDropped: 0,
  };
  const state: IntentState = {
    stage: 'new',
    status,
    needsInspection: false,
    inspectionsSinceUnknown: 0,
    neverSentInARow: 0,
    seenDeliveries: [],
  };
  if (heldAtSubmit) {
    const until = new Date(heldAtSubmit.untilMs).toISOString();
    state.heldAtSubmit = heldAtSubmit;
    state.permittedAtMs = heldAtSubmit.untilMs;
    Object.assign(status, {
      phase: Phase.waiting,
      nextAttemptAt: new Date(heldAtSubmit.wakeAtMs).toISOString(),
      permittedAt: until,
      held: {
        credential: spec.credential,
        reason: 'rate_limited',
        until,
        ...(heldAtSubmit.why !== undefined ? { why: heldAtSubmit.why } : {}),
      },
    });
  }
  return state;
}

/**
 * What the webhook delivery `d` would do to the intent now (src/policy/webhook-deliveries.ts): a delivery id recorded
 * before, or any delivery for an ended intent, is turned away (the workflow rejects it before anything is written).
 */
export function webhookVerdictOf(state: IntentState, d: WebhookDelivery): DeliveryVerdict {
  return deliveryVerdict(d, {
    seen: state.seenDeliveries,
    phase: state.status.phase,
    settled: state.webhookVerdict !== undefined,
  });
}

function copy(state: IntentState): IntentState {
  const s = state.status;
  return {
    ...state,
    status: {
      ...s,
      attemptLog: s.attemptLog.map((e) => ({ ...e })),
      ...(s.webhooks ? { webhooks: { ...s.webhooks } } : {}),
    },
    seenDeliveries: [...state.seenDeliveries],
  };
}

/** One step: applies `event` to a copy of `state` and says what to do next. Pure. */
export function step(ctx: StepContext, state: IntentState, event: IntentEvent): StepResult {
  const run = new Step(ctx, copy(state));
  run.apply(event);
  return { state: run.s, commands: run.commands, counts: run.counts };
}

type Failed = Exclude<Decision, { kind: 'success' }>;
type Final = Extract<IntentCommand, { kind: 'finish' }>['phase'];

/** One step's work on its own copy of the state. */
class Step {
  readonly commands: IntentCommand[] = [];
  readonly counts: IntentCount[] = [];
  readonly deadlineMs: number;

  constructor(
    readonly ctx: StepContext,
    readonly s: IntentState,
  ) {
    this.deadlineMs = Date.parse(ctx.spec.deadline);
  }

  get status(): IntentStatus {
    return this.s.status;
  }

  iso(ms: number = this.ctx.nowMs): string {
    return new Date(ms).toISOString();
  }

  apply(event: IntentEvent): void {
    const s = this.s;
    if (s.stage === 'done') {
      if (event.type === 'webhook') this.recordDelivery(event.delivery);
      return;
    }
    switch (event.type) {
      case 'started':
        if (s.stage !== 'new') return;
        this.start();
        return;
      case 'cancel':
        if (s.status.cancelRequested !== undefined) return;
        s.status.cancelRequested = event.reason.slice(0, 500);
        if (s.stage === 'calling') this.commands.push({ kind: 'abort_call' });
        else if (s.stage === 'sleeping') this.advance();
        return;
      case 'retry_now':
        this.retryNow();
        return;
      case 'webhook': {
        this.recordDelivery(event.delivery);
        if (s.webhookVerdict === undefined) return;
        if (s.stage === 'sleeping') this.advance();
        // An inspection looks for what the webhook just said: it is no longer needed. A dispatch runs on; its
        // answer comes back and the verdict is applied then.
        else if (s.stage === 'calling' && s.call?.kind === 'inspect') this.commands.push({ kind: 'abort_call' });
        return;
      }
      case 'timer_fired':
        if (s.stage !== 'sleeping') return;
        if (s.dueAtMs !== undefined && this.ctx.nowMs >= s.dueAtMs) s.dueAtMs = undefined;
        this.advance();
        return;
      case 'dispatch_stalled':
        s.status.stalled = { since: event.since, taskQueue: event.taskQueue };
        this.counts.push({ metric: 'stalled' });
        return;
      case 'cancelled_by_temporal':
        this.cancelledByTemporal(event.unsent);
        return;
      case 'dispatch_succeeded':
      case 'dispatch_failed':
      case 'dispatch_held':
      case 'dispatch_unsent':
        if (s.stage !== 'calling' || s.call?.kind !== 'dispatch') return;
        this.afterDispatch(event);
        return;
      case 'inspected':
        if (s.stage !== 'calling' || s.call?.kind !== 'inspect') return;
        this.afterInspection(event.answer);
        return;
    }
  }

  // ---- the loop head ------------------------------------------------------------------------------------

  /** The run's first step. An intent held at submit comes here at its turn, or earlier after a cancel or "retry now". */
  start(): void {
    const s = this.s;
    const hold = s.heldAtSubmit;
    s.heldAtSubmit = undefined;
    if (hold && s.status.cancelRequested === undefined && s.webhookVerdict === undefined) {
      this.counts.push({ metric: 'held', reason: 'rate_limited' });
      if (hold.wakeAtMs > this.deadlineMs)
        return this.finish(
          Phase.expired,
          `credential ${this.ctx.spec.credential} is rate limited until ${this.iso(hold.untilMs)}; this ` +
            `intent's turn would come past the deadline ${this.ctx.spec.deadline}`,
        );
      // "Retry now" ended the start delay early: wait for the gate's time, never less (invariant 2).
      if (s.retryNowEarly && this.ctx.nowMs < hold.untilMs) {
        s.retryNowEarly = undefined;
        return this.sleepUntil(hold.untilMs);
      }
    }
    s.retryNowEarly = undefined;
    this.advance();
  }

  /** What comes next when no call runs: a webhook's verdict, a cancel, a wait, the deadline, or the next call. */
  advance(): void {
    const s = this.s;
    const st = s.status;
    const now = this.ctx.nowMs;
    s.stage = 'new';
    if (s.webhookVerdict) return this.applyWebhook(s.webhookVerdict);
    if (st.cancelRequested !== undefined) return this.finish(Phase.cancelled, st.cancelRequested);
    if (s.dueAtMs !== undefined) {
      // Never sleep past the deadline (the policy gives up first; this guards state carried across runs).
      if (s.dueAtMs > this.deadlineMs)
        return this.finish(
          Phase.expired,
          `the next call would be at ${this.iso(s.dueAtMs)}, past the deadline ${this.ctx.spec.deadline}`,
        );
      if (now < s.dueAtMs) return this.sleepUntil(s.dueAtMs);
      s.dueAtMs = undefined;
    }
    if (now >= this.deadlineMs)
      return this.finish(
        Phase.expired,
        st.held?.reason === 'blocked'
          ? `deadline ${this.ctx.spec.deadline} reached while credential ${this.ctx.spec.credential} was blocked (${st.held.why ?? 'quota'}) and not resumed`
          : `deadline ${this.ctx.spec.deadline} reached before the next provider call`,
      );
    if (s.needsInspection) return this.beginInspection();
    if (st.attempts >= this.ctx.spec.policy.maxAttempts)
      return this.finish(
        Phase.failed,
        `attempt budget of ${this.ctx.spec.policy.maxAttempts} used up; last: ${this.lastText()}`,
      );
    st.attempts++;
    st.phase = Phase.dispatching;
    st.nextAttemptAt = undefined;
    s.stage = 'calling';
    s.call = { kind: 'dispatch', startedAt: this.iso() };
    this.commands.push({ kind: 'dispatch', attempt: st.attempts });
  }

  beginInspection(): void {
    const s = this.s;
    const st = s.status;
    if (!this.ctx.spec.inspection)
      // Unreachable for validated intents (writes need an inspection spec); reads never have unknown outcomes.
      return this.finish(Phase.failed, 'outcome unknown and no inspection is configured');
    st.inspections++;
    s.inspectionsSinceUnknown++;
    st.phase = Phase.inspecting;
    st.nextAttemptAt = undefined;
    s.stage = 'calling';
    s.call = { kind: 'inspect', startedAt: this.iso() };
    this.commands.push({ kind: 'inspect', attempt: st.attempts });
  }

  /** Sleeps until `atMs` (the phase is `waiting`). */
  sleepUntil(atMs: number): void {
    const s = this.s;
    s.dueAtMs = atMs;
    s.status.nextAttemptAt = this.iso(atMs);
    s.status.phase = Phase.waiting;
    s.stage = 'sleeping';
    this.commands.push({ kind: 'sleep', untilMs: atMs });
  }

  /** "Retry now": as soon as the server permits, never before (invariant 2). */
  retryNow(): void {
    const s = this.s;
    if (s.stage === 'new') {
      s.retryNowEarly = true;
      return;
    }
    if (s.stage !== 'sleeping' || s.dueAtMs === undefined) return;
    const earliest = Math.max(this.ctx.nowMs, s.permittedAtMs ?? 0);
    if (earliest <= this.ctx.nowMs) {
      s.dueAtMs = undefined;
      return this.advance();
    }
    if (earliest < s.dueAtMs) this.sleepUntil(earliest);
  }

  // ---- answers ------------------------------------------------------------------------------------------

  afterDispatch(
    event: Extract<
      IntentEvent,
      { type: 'dispatch_succeeded' | 'dispatch_failed' | 'dispatch_held' | 'dispatch_unsent' }
    >,
  ): void {
    const s = this.s;
    const st = s.status;
    const startedAt = s.call?.startedAt ?? this.iso();
    s.call = undefined;
    st.stalled = undefined;
    if (event.type === 'dispatch_unsent') {
      // Cancelled before any worker started it: nothing was sent, so it was no attempt and leaves no reservation.
      st.attempts--;
      return this.finish(Phase.cancelled, `${st.cancelRequested ?? 'cancelled'} (before it was sent)`);
    }
    if (event.type === 'dispatch_held') {
      // Load control held the call: nothing was sent, so it was not an attempt.
      st.attempts--;
      if (s.webhookVerdict) return this.advance();
      return this.held(event.hold, 'dispatch');
    }
    st.held = undefined;
    if (event.type === 'dispatch_succeeded') {
      const evidence: EvidenceSummary = { status: event.result.status, sent: 'yes', decision: 'success' };
      st.unreachableSince = undefined;
      this.counts.push({ metric: 'attempt', decision: 'success' });
      st.lastEvidence = evidence;
      this.record({ kind: 'dispatch', attempt: st.attempts, startedAt, evidence });
      st.result = {
        status: event.result.status,
        body: event.result.body,
        ...(event.result.truncated ? { truncated: true } : {}),
      };
      st.reservation = undefined;
      return this.finish(Phase.succeeded, `provider answered HTTP ${event.result.status}`);
    }
    // A webhook that arrived while the attempt was in flight already says how it ended (e.g. the answer was lost).
    if (s.webhookVerdict) {
      if (event.evidence.sent === 'no') st.attempts--;
      return this.advance();
    }
    const { evidence, decision } = event;
    if (st.cancelRequested !== undefined && evidence.status === undefined && evidence.sent !== 'no') {
      // The cancel aborted a request that had gone out: it may have reached the provider.
      return this.abortedByCancel(startedAt);
    }
    if (evidence.sent === 'no') return this.neverSent(evidence, decision, startedAt);
    s.neverSentInARow = 0;
    st.unreachableSince = undefined;
    const summary = summarize(evidence, decision);
    st.lastEvidence = summary;
    this.counts.push({ metric: 'attempt', decision: decision.kind });
    if (evidence.status === 429) this.counts.push({ metric: 'rate_limited', kind: 'dispatch' });
    const entry: AttemptRecord = { kind: 'dispatch', attempt: st.attempts, startedAt, evidence: summary };
    this.record(entry);
    switch (decision.kind) {
      case 'permanent':
        return this.finish(
          Phase.failed,
          `permanent failure (${decision.reason}${decision.code ? `: ${decision.code}` : ''}): ${describe(evidence, decision)}`,
        );
      case 'unknown_outcome':
        // Invariant 5: the next provider call is an inspection, never a blind re-dispatch.
        s.needsInspection = true;
        s.inspectionsSinceUnknown = 0;
        st.reservation = {
          idempotencyKey: this.ctx.spec.idempotencyKey,
          attempt: st.attempts,
          reason: `attempt ${st.attempts}: ${decision.reason}`,
        };
        return this.advance();
      case 'rate_limited':
      case 'transient':
        return this.schedule(toDecision(decision, this.ctx.nowMs), st.attempts, entry, 'dispatch');
    }
  }

  /** The cancel aborted the attempt in flight: its request may have reached the provider. */
  abortedByCancel(startedAt: string): void {
    const st = this.status;
    const evidence: EvidenceSummary = { transport: 'aborted', sent: 'unknown', decision: 'cancelled' };
    st.lastEvidence = evidence;
    this.record({ kind: 'dispatch', attempt: st.attempts, startedAt, evidence });
    this.counts.push({ metric: 'attempt', decision: 'unknown_outcome' });
    st.reservation = {
      idempotencyKey: this.ctx.spec.idempotencyKey,
      attempt: st.attempts,
      reason: `attempt ${st.attempts} was in flight when the intent was cancelled; its request was aborted and may have reached the provider`,
    };
    this.finish(Phase.cancelled, st.cancelRequested ?? 'cancelled');
  }

  /**
   * A dispatch that was never sent (connection refused, DNS failure, no secret on the worker): nothing reached the
   * provider, so it uses no attempt (invariant 14). Backed off by the number of such failures in a row, bounded by
   * the deadline only.
   */
  neverSent(evidence: CallEvidence, decision: CallDecision, startedAt: string): void {
    const s = this.s;
    const st = s.status;
    st.attempts--;
    s.neverSentInARow++;
    st.unreachableSince ??= startedAt;
    const summary = summarize(evidence, decision);
    st.lastEvidence = summary;
    const entry: AttemptRecord = { kind: 'dispatch', attempt: st.attempts + 1, startedAt, evidence: summary };
    this.record(entry);
    if (decision.kind === 'permanent')
      return this.finish(Phase.failed, `permanent failure before sending: ${describe(evidence, decision)}`);
    const asTransient: Failed =
      decision.kind === 'unknown_outcome'
        ? { kind: 'transient', reason: 'not sent', retryAfter: { kind: 'absent' } }
        : toDecision(decision, this.ctx.nowMs);
    this.schedule(asTransient, s.neverSentInARow, entry, 'resend');
  }

  afterInspection(answer: InspectionAnswer): void {
    const s = this.s;
    const st = s.status;
    const startedAt = s.call?.startedAt ?? this.iso();
    s.call = undefined;
    if (answer.kind === 'cancelled') {
      // Nothing learned; the inspection counts for nothing.
      st.inspections--;
      s.inspectionsSinceUnknown--;
      return this.advance();
    }
    if (answer.kind === 'held') {
      st.inspections--;
      s.inspectionsSinceUnknown--;
      if (s.webhookVerdict) return this.advance();
      return this.held(answer.hold, 'inspect');
    }
    st.held = undefined;
    if (s.webhookVerdict) return this.advance();
    if (answer.kind === 'failed') {
      const { evidence, decision } = answer;
      const summary = summarize(evidence, decision);
      st.lastEvidence = summary;
      this.counts.push({ metric: 'inspection', result: 'error' });
      if (evidence.status === 429) this.counts.push({ metric: 'rate_limited', kind: 'inspect' });
      const entry: AttemptRecord = { kind: 'inspect', attempt: st.attempts, startedAt, evidence: summary };
      this.record(entry);
      const next = inspectionFailure(toDecision(decision, this.ctx.nowMs));
      if (next.kind === 'permanent')
        return this.finish(
          Phase.failed,
          `the inspection itself failed for good (${describe(evidence, decision)}); the outcome of attempt ${st.attempts} stays unknown`,
        );
      return this.schedule(next, s.inspectionsSinceUnknown, entry, 'inspect');
    }
    const found = answer.found;
    this.counts.push({ metric: 'inspection', result: found.kind });
    const verdict = inspectionVerdict(found, {
      method: this.ctx.spec.action.method,
      permittedAtMs: s.permittedAtMs,
      now: new Date(this.ctx.nowMs),
      codes: this.ctx.spec.codes,
    });
    const entry: AttemptRecord = {
      kind: 'inspect',
      attempt: st.attempts,
      startedAt,
      evidence: { status: 200, sent: 'yes', decision: `operation_${found.kind}` },
    };
    if (verdict.kind === 'redispatch') entry.evidence = { status: 404, sent: 'yes', decision: 'operation_absent' };
    if (verdict.kind === 'recorded_failure')
      entry.evidence = {
        ...summarizeEvidence(verdict.evidence, undefined),
        decision: `operation_failed:${verdict.decision.kind}`,
      };
    this.record(entry);
    st.lastEvidence = entry.evidence;
    if (verdict.kind === 'inspect_again')
      return this.schedule(verdict.decision, s.inspectionsSinceUnknown, entry, 'inspect');
    // The operation's fate is known: nothing is left to reconcile.
    st.reservation = undefined;
    s.needsInspection = false;
    switch (verdict.kind) {
      case 'took_effect':
        st.result = { status: 200, body: verdict.result, inspected: true };
        return this.finish(Phase.succeeded, `inspection found attempt ${st.attempts} took effect`);
      case 'redispatch':
        // Safe to dispatch again with the same key; it was a failed attempt all the same.
        return this.schedule(verdict.decision, st.attempts, entry, 'dispatch');
      case 'recorded_failure': {
        // The provider saved this failure under the idempotency key: sending the same key again would only replay
        // it, so a recorded failure is final whatever its status (invariant 5).
        const what = describeEvidence(verdict.evidence);
        return this.finish(
          Phase.failed,
          verdict.decision.kind === 'permanent'
            ? `inspection found attempt ${st.attempts} failed for good: ${what}`
            : `the provider recorded attempt ${st.attempts} as failed (${what}); the same ` +
                `idempotency key would replay that answer, so submit a new intent with a new key to try again`,
        );
      }
    }
  }

  /**
   * A hold by the credential's load control: wait durably until the gate opens — spread after it by the place load
   * control gave, so released intents do not stampede — or until the slot comes; while the credential is blocked,
   * until an operator resumes it (looked at again every few minutes) or the deadline.
   */
  held(hold: CredentialHold, next: 'dispatch' | 'inspect'): void {
    const s = this.s;
    const st = s.status;
    const now = this.ctx.nowMs;
    this.counts.push({ metric: 'held', reason: hold.kind });
    if (hold.kind === 'blocked') {
      st.held = { credential: hold.credential, reason: 'blocked', why: hold.reason, since: hold.since };
      return this.sleepUntil(Math.min(this.deadlineMs, now + BLOCKED_RECHECK_MS));
    }
    const floor = now + hold.holdMs;
    const wake =
      hold.kind === 'rate_limited'
        ? spreadWakeUp({ floorMs: floor, rank: hold.rank, perMinute: hold.perMinute, random: this.ctx.random })
        : floor;
    st.held = {
      credential: hold.credential,
      reason: hold.kind,
      until: this.iso(floor),
      ...(hold.why ? { why: hold.why } : {}),
    };
    if (hold.kind === 'rate_limited' && next === 'dispatch') {
      // The gate's time is a server-permitted time for this intent too: "retry now" never goes before it.
      s.permittedAtMs = Math.max(s.permittedAtMs ?? 0, floor);
      st.permittedAt = this.iso(s.permittedAtMs);
    }
    if (wake > this.deadlineMs)
      return this.finish(
        Phase.expired,
        hold.kind === 'rate_limited'
          ? `credential ${hold.credential} is rate limited until ${this.iso(floor)}; this intent's turn would come past the deadline ${this.ctx.spec.deadline}`
          : `the next send slot of credential ${hold.credential} lies past the deadline ${this.ctx.spec.deadline}`,
      );
    this.sleepUntil(wake);
  }

  /** Applies a schedule from the policy: wait, or stop as expired/failed. */
  schedule(decision: Failed, attempt: number, entry: AttemptRecord, next: 'dispatch' | 'inspect' | 'resend'): void {
    const s = this.s;
    const st = s.status;
    const spec = this.ctx.spec;
    // Inspections and resends of calls that were never sent use no attempt: only the deadline bounds them.
    const policy = next === 'dispatch' ? spec.policy : { ...spec.policy, maxAttempts: Number.POSITIVE_INFINITY };
    const plan = nextAttempt({
      decision,
      attempt: Math.max(1, attempt),
      now: new Date(this.ctx.nowMs),
      deadline: new Date(this.deadlineMs),
      policy,
      random: this.ctx.random,
    });
    const serverFloor =
      (decision.kind === 'rate_limited' || decision.kind === 'transient') &&
      (decision.retryAfter.kind === 'delay' || decision.retryAfter.kind === 'date')
        ? decision.retryAfter.notBefore.getTime()
        : undefined;
    if (next !== 'inspect') {
      s.permittedAtMs = serverFloor;
      st.permittedAt = serverFloor !== undefined ? this.iso(serverFloor) : undefined;
    }
    switch (plan.kind) {
      case 'retry_at':
        entry.nextAt = plan.at.toISOString();
        entry.floor = plan.floor;
        return this.sleepUntil(plan.at.getTime());
      case 'give_up':
        if (plan.reason === 'deadline') {
          if (plan.permittedAt) st.permittedAt = plan.permittedAt.toISOString();
          return this.finish(
            Phase.expired,
            `the next ${next === 'inspect' ? 'inspection' : 'attempt'} would be at ${plan.permittedAt?.toISOString() ?? '?'}, past the deadline ${spec.deadline}; last: ${this.lastText()}` +
              (st.unreachableSince !== undefined && next === 'resend'
                ? `; the provider was unreachable since ${st.unreachableSince} and nothing was sent since then`
                : ''),
          );
        }
        if (plan.reason === 'attempts')
          return this.finish(
            Phase.failed,
            `attempt budget of ${spec.policy.maxAttempts} used up; last: ${this.lastText()}`,
          );
        return this.finish(Phase.failed, `gave up: ${this.lastText()}`);
    }
  }

  // ---- webhooks -----------------------------------------------------------------------------------------

  /**
   * Records a verified delivery: the first final state becomes the verdict, a `pending` state is logged, a delivery
   * after the intent was settled is noted only. A delivery turned away (seen before, or the intent ended) changes
   * nothing; the shell rejects it before it gets here.
   */
  recordDelivery(d: WebhookDelivery): void {
    const s = this.s;
    const st = s.status;
    const verdict = webhookVerdictOf(s, d);
    if (verdict.kind === 'duplicate' || verdict.kind === 'ended') return;
    s.seenDeliveries = rememberDelivery(s.seenDeliveries, d);
    const counts = (st.webhooks ??= { received: 0, late: 0 });
    counts.received++;
    if (verdict.kind === 'late') counts.late++;
    if (verdict.kind === 'settles') s.webhookVerdict = d;
    this.record({
      kind: 'webhook',
      attempt: st.attempts,
      startedAt: this.iso(),
      evidence: {
        sent: 'yes',
        decision: verdict.kind === 'late' ? `webhook_${d.state}_ignored` : `webhook_${d.state}`,
      },
      webhook: { source: d.source, deliveryId: d.deliveryId, state: d.state, eventType: d.eventType },
    });
  }

  /** A webhook's final state becomes the intent's end, without another provider call. */
  applyWebhook(d: WebhookDelivery): void {
    const s = this.s;
    const st = s.status;
    s.webhookVerdict = undefined;
    s.needsInspection = false;
    st.reservation = undefined;
    st.resolvedByWebhook = { source: d.source, deliveryId: d.deliveryId, state: d.state };
    const who = `webhook ${d.deliveryId}: ${d.state} (from ${d.source})`;
    if (d.state === 'succeeded') {
      st.lastEvidence = { sent: 'yes', decision: 'webhook_succeeded' };
      st.result = { body: d.result ?? null, webhook: { source: d.source, deliveryId: d.deliveryId } };
      return this.finish(Phase.succeeded, `${who}: the provider reports the operation succeeded`);
    }
    // Like an inspection that found a recorded failure: the provider saved it under the key, so it is final.
    const evidence: Evidence = {
      method: this.ctx.spec.action.method,
      sent: 'yes',
      status: d.error?.status ?? 500,
      ...(d.error?.code !== undefined ? { code: d.error.code } : {}),
    };
    const decision = classify(evidence, { now: new Date(this.ctx.nowMs), codes: this.ctx.spec.codes });
    st.lastEvidence = { ...summarizeEvidence(evidence, undefined), decision: `webhook_failed:${decision.kind}` };
    this.finish(
      Phase.failed,
      `${who}: the provider recorded the operation as failed (${describeEvidence(evidence)}); the same ` +
        `idempotency key would replay that answer, so submit a new intent with a new key to try again`,
    );
  }

  // ---- the end ------------------------------------------------------------------------------------------

  /** Cancelled through Temporal: records what may be left at the provider. */
  cancelledByTemporal(unsent: boolean): void {
    const s = this.s;
    const st = s.status;
    const inFlight = s.stage === 'calling' && s.call?.kind === 'dispatch';
    if (inFlight && unsent) st.attempts--;
    const leftover =
      inFlight && !unsent
        ? 'attempt in flight at cancellation'
        : s.needsInspection
          ? 'outcome unknown at cancellation'
          : undefined;
    st.cancelRequested ??= 'cancelled through Temporal';
    this.recordFinal(Phase.cancelled, st.cancelRequested, leftover);
  }

  finish(phase: Final, reason: string): void {
    this.recordFinal(phase, reason, this.s.needsInspection ? 'outcome unknown at the end' : undefined);
    this.commands.push({ kind: 'finish', phase });
  }

  recordFinal(phase: Final, reason: string, leftover: string | undefined): void {
    const s = this.s;
    const st = s.status;
    st.phase = phase;
    st.finalReason = reason;
    st.nextAttemptAt = undefined;
    s.dueAtMs = undefined;
    s.stage = 'done';
    s.call = undefined;
    if (phase !== Phase.succeeded && leftover !== undefined)
      st.reservation ??= { idempotencyKey: this.ctx.spec.idempotencyKey, attempt: st.attempts, reason: leftover };
    this.counts.push({ metric: 'ended', phase });
  }

  record(entry: AttemptRecord): void {
    const st = this.status;
    st.attemptLog.push(entry);
    if (st.attemptLog.length > ATTEMPT_LOG_LIMIT) {
      st.attemptLog.splice(0, st.attemptLog.length - ATTEMPT_LOG_LIMIT);
      st.attemptLogDropped++;
    }
  }

  lastText(): string {
    const ev = this.status.lastEvidence;
    return ev ? evidenceText(ev) : 'no answer yet';
  }
}

/** The activity's classified decision as the scheduler's {@link Decision}: the permitted time is absolute. */
export function toDecision(d: CallDecision, nowMs: number): Failed {
  switch (d.kind) {
    case 'rate_limited':
    case 'transient': {
      // The server's wait counts from this step's clock, which lies after the answer's arrival (invariant 2).
      const waitMs = d.waitMs ?? (d.permittedAtMs !== undefined ? Math.max(0, d.permittedAtMs - nowMs) : undefined);
      const retryAfter =
        waitMs === undefined
          ? ({ kind: 'absent' } as const)
          : ({ kind: 'delay', delayMs: waitMs, notBefore: new Date(nowMs + waitMs), clamped: false } as const);
      return d.kind === 'rate_limited'
        ? { kind: 'rate_limited', retryAfter }
        : { kind: 'transient', reason: d.reason ?? 'transient', retryAfter };
    }
    case 'permanent':
      return { kind: 'permanent', reason: d.reason, ...(d.code !== undefined ? { code: d.code } : {}) };
    case 'unknown_outcome':
      return { kind: 'unknown_outcome', reason: d.reason };
  }
}

function summarizeEvidence(e: CallEvidence, retryAfter: string | undefined): Omit<EvidenceSummary, 'decision'> {
  return {
    ...(e.status !== undefined ? { status: e.status } : {}),
    ...(e.code !== undefined ? { code: e.code } : {}),
    ...(e.transport !== undefined ? { transport: e.transport } : {}),
    sent: e.sent,
    ...(retryAfter !== undefined ? { retryAfter } : {}),
  };
}

function summarize(e: CallEvidence, d: CallDecision): EvidenceSummary {
  const retryAfter = d.kind === 'rate_limited' || d.kind === 'transient' ? d.retryAfter : undefined;
  return { ...summarizeEvidence(e, retryAfter), decision: d.kind };
}

/** The evidence as a sentence, with the Retry-After the provider sent. */
function describe(e: CallEvidence, d: CallDecision): string {
  const retryAfter = d.kind === 'rate_limited' || d.kind === 'transient' ? d.retryAfter : undefined;
  return describeEvidence({
    method: e.method,
    sent: e.sent,
    ...(e.status !== undefined ? { status: e.status } : {}),
    ...(e.code !== undefined ? { code: e.code } : {}),
    ...(e.transport !== undefined ? { transport: e.transport as TransportFailure } : {}),
    ...(retryAfter !== undefined ? { headers: { 'retry-after': retryAfter } } : {}),
  });
}
