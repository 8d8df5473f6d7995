/**
 * The intent workflow: one durable workflow per idempotency key that delivers an intent's action to the provider
 * until it succeeds, fails for good, runs out of attempts, reaches its deadline, or is cancelled.
 *
 * Loop: dispatch → classify (policy) → schedule (policy) → durable sleep → … Every decision comes from
 * `src/policy/`; this file only maps decisions to Temporal calls, in one place ({@link IntentRun.afterDispatch}
 * and {@link IntentRun.afterInspection}). After an unknown outcome the next provider call is always an
 * inspection (invariant 5); the sleep never ends before the server-permitted time (invariant 2); the dispatch
 * activity runs with `maximumAttempts: 1` so Temporal's retries never stack on ours.
 *
 * @example
 * ```ts
 * import { intentWorkflow, statusQuery } from './workflows/index.js';
 * const handle = await client.workflow.start(intentWorkflow, { workflowId: 'intent:order-1042', taskQueue: 'retryq.workflows', args: [spec] });
 * const status = await handle.query(statusQuery);
 * ```
 */
import { ApplicationFailureCategory, TimeoutType } from '@temporalio/common';
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  TimeoutFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  isCancellation,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type {
  SearchAttributeKey,
  SearchAttributeType,
  SearchAttributeUpdatePair,
} from '@temporalio/common/lib/search-attributes.js';
import type { Activities, DispatchResult, InspectResult } from '../activities/index.js';
import { IntentFailureType, WebhookRejection, evidenceFromFailure, holdFromFailure } from '../failures.js';
import type { CredentialHold } from '../failures.js';
import {
  ATTEMPT_LOG_LIMIT,
  Phase,
  describeTarget,
  describeWebhookEntry,
  finalPhases,
  heldAtSubmitStatus,
} from '../intent-status.js';
import type {
  AttemptRecord,
  EvidenceSummary,
  HeldAtSubmit,
  IntentOutcome,
  IntentSpec,
  IntentStatus,
  Reservation,
  WebhookAck,
  WebhookDelivery,
} from '../intent-status.js';
import { classify } from '../policy/classify.js';
import type { Decision } from '../policy/classify.js';
import { headerValue } from '../policy/evidence.js';
import type { Evidence } from '../policy/evidence.js';
import { nextAttempt } from '../policy/schedule.js';
import type { Schedule } from '../policy/schedule.js';
import { describeEvidence, evidenceText, retryAfterText } from '../policy/evidence-text.js';
import { inspectionFailure, inspectionVerdict } from '../policy/inspection.js';
import { spreadWakeUp } from '../policy/load.js';
import { deliveryVerdict, describeRefusal, isRefusal, rememberDelivery } from '../policy/webhook-deliveries.js';
import type { DeliveryRefusal, DeliveryVerdict } from '../policy/webhook-deliveries.js';
import {
  credentialKey,
  lastErrorCodeKey,
  nextAttemptAtKey,
  retryAttemptKey,
  retryPhaseKey,
} from '../search-attributes.js';
import { taskQueues } from '../task-queues.js';
import { IntentPatch } from './patches.js';
import type { DispatchInput } from '../activities/dispatch.js';
import {
  countAttempt,
  countEnded,
  countHeld,
  countInspection,
  countRateLimited,
  countStalled,
} from './intent-metrics.js';

export { IntentPatch };

/** Room for a call to wait for its send slot inside the activity (the load-control horizon). */
const SLOT_WAIT_MS = 10_000;
/** The local gate check reads memory only; a worker that does not answer in this time is asked through the dispatch. */
const GATE_HINT_TIMEOUT_MS = 2_000;
/** While its credential is blocked, an intent looks again this often (an operator's resume also wakes it at once). */
const BLOCKED_RECHECK_MS = 5 * 60_000;
/**
 * The dispatch and inspection activities heartbeat every second while they wait (src/activities/heartbeat.ts). A
 * call whose worker has been silent this long is given up: its worker is dead or cut off, so the attempt's outcome
 * is unknown and the next provider call is an inspection — seconds after the death instead of the call's whole
 * start-to-close timeout (attempt timeout + 20 s).
 */
export const HEARTBEAT_TIMEOUT_MS = 5_000;

/**
 * The version of {@link CarriedState}. 1 (absent): 0.1.0. 2: adds `neverSentInARow`, `seenDeliveries` and
 * `webhookVerdict` (and the status may hold `unreachableSince`). A run reads every older version ({@link upgradeCarried}) and writes the current one.
 */
export const CARRIED_STATE_VERSION = 2;

/** Stops further dispatch and records why. An in-flight or unknown operation becomes a reservation. */
export const cancelSignal = defineSignal<[{ reason?: string }]>('cancel');
/** Ends the current wait early; the next attempt still never starts before the server-permitted time. */
export const retryNowSignal = defineSignal<[]>('retryNow');
/** The intent's current status. */
export const statusQuery = defineQuery<IntentStatus>('status');
/**
 * A verified webhook delivery for this intent's key (sent by the webhook receiver, never by a provider directly).
 * Its validator rejects a delivery id the intent has already recorded and any delivery once the intent has ended
 * (`ApplicationFailure` of a {@link WebhookRejection} type): a rejected update is not written to history, so
 * redeliveries never grow it. An accepted one is recorded; a final state settles the intent without another
 * provider call. The handler is synchronous: it marks the id seen before any other update is validated.
 */
export const webhookUpdate = defineUpdate<WebhookAck, [WebhookDelivery]>('webhook');

/** What "retry now" did: when the next attempt will really run, and why not sooner. */
export interface RetryNowAnswer {
  /** The intent's phase when the request arrived. */
  phase: Phase;
  /** When the next provider call will run (ISO); `null` while one runs now. */
  nextAttemptAt: string | null;
  /**
   * `now`: at once; `server_floor`: the provider's Retry-After permits it no sooner; `gate`: the credential's gate
   * is closed after a rate limit until then; `blocked`: the credential is blocked until an operator resumes it
   * (the call is held again); `in_progress`: a call runs now.
   */
  why: 'now' | 'server_floor' | 'gate' | 'blocked' | 'in_progress';
  /** The same, as a sentence for people. */
  message: string;
}

/**
 * Ends the current wait early, like {@link retryNowSignal}, and answers when the next attempt will really run and
 * why (the server floor and the credential's gate still apply).
 */
export const retryNowUpdate = defineUpdate<RetryNowAnswer, []>('retryNowAndReport');

/**
 * How long after a run's start its first dispatch still trusts the client's "gate open" ({@link
 * IntentWorkflowOptions.gateOpenAtSubmit}) instead of asking its worker's process. The client's view is at most
 * about 2 s old when it starts the intent; a first workflow task that waited longer in a busy queue asks.
 */
export const GATE_OPEN_AT_SUBMIT_TRUSTED_MS = 5_000;

/** Dispatches not started within this time are reported as stalled, unless the client says otherwise. */
export const DEFAULT_STALL_AFTER_MS = 60_000;

/** Workflow input besides the spec: where the activities run, and state carried across continue-as-new. */
export interface IntentWorkflowOptions {
  /** @default 'retryq' */
  taskQueuePrefix?: string;
  /**
   * Upsert only the search attributes that changed, at most once per workflow task. Every intent the client starts
   * sets it; runs started without it (histories recorded before it existed) keep upserting all attributes at every
   * transition, which is the command sequence their histories hold, so they still replay.
   * @default false
   */
  publishChangesOnly?: boolean;
  /**
   * A dispatch no worker has started within this many ms is reported as stalled (status `stalled`, the UI's
   * details, `LastErrorCode="no_worker"`) and keeps waiting for a worker until the deadline; and a cancel that
   * arrives before the dispatch started ends the intent at once, with nothing sent. Every intent the client starts
   * sets it; runs without it (histories recorded before it existed) keep the earlier command sequence and replay.
   * @default undefined (off)
   */
  stallAfterMs?: number;
  /**
   * Before a dispatch, ask the worker process (a local activity, in the same workflow task) whether it knows the
   * credential's gate closed after a rate-limit answer; if so, wait for it durably right away instead of scheduling a
   * dispatch that load control would only hold. Before a run's first dispatch only when the worker's process knows
   * the gate closed ({@link IntentPatch.localGateCheck}); before every later one (after a wait) always. Every intent
   * the client starts sets it; runs without it (histories recorded before it existed) keep the earlier command
   * sequence and replay.
   * @default false
   */
  localGateCheck?: boolean;
  /**
   * The client held this intent at submit: the credential's gate was closed after a rate-limit answer, so the intent
   * was started with a start delay until its turn, and with the phase `waiting` and `NextAttemptAt` as start search
   * attributes (docs/load-control.md, "Held at submit"). Its first workflow task then runs at its turn, or earlier
   * when a cancel or "retry now" ended the delay (signal-with-start). Times in ms, on the server's clock.
   */
  heldAtSubmit?: HeldAtSubmit;
  /**
   * The client saw the credential's dispatch gate open when it started this intent (the entity's answer, at most about
   * 2 s old; docs/load-control.md, "The gate check"). If the run's first dispatch comes within
   * {@link GATE_OPEN_AT_SUBMIT_TRUSTED_MS} of its start, the workflow does not ask its worker's process whether the
   * gate is closed ({@link IntentPatch.localGateCheck}'s activation callback, a synchronous round trip from the
   * workflow thread to the worker's main thread): it goes on as if the answer were "open", which records nothing. A
   * gate that closed in between still holds the dispatch in load control, and nothing is sent. A replay asks
   * `patched()` as always, which answers from the history, so the choice never changes a replayed command.
   */
  gateOpenAtSubmit?: boolean;
  /** @internal state carried across continue-as-new */
  carried?: CarriedState;
}

/** What continues across continue-as-new. */
export interface CarriedState {
  /** {@link CARRIED_STATE_VERSION} when written; absent in state written by 0.1.0 (version 1). */
  version?: number;
  status: IntentStatus;
  needsInspection: boolean;
  inspectionsSinceUnknown: number;
  /** ms; the server's floor for the next dispatch. */
  permittedAtMs: number | undefined;
  /** ms; when the next provider call is due. */
  dueAtMs: number | undefined;
  /** `<source>:<deliveryId>` of the webhook deliveries already recorded (bounded). */
  seenDeliveries?: string[] | undefined;
  /** A final webhook state not yet applied. */
  webhookVerdict?: WebhookDelivery | undefined;
  /** Dispatches in a row that were never sent (version 2); sets their backoff. */
  neverSentInARow?: number;
}

/** Carried state of any released version, as the current version. */
export function upgradeCarried(carried: CarriedState): CarriedState & { version: number; neverSentInARow: number } {
  const version = carried.version ?? 1;
  if (version > CARRIED_STATE_VERSION)
    // Workflow code must fail the task (not the intent) here: a newer worker wrote this state, so an older worker
    // took the task by mistake; the task is retried until a current worker picks it up.
    throw new Error(`carried state version ${version} is newer than this worker's ${CARRIED_STATE_VERSION}`);
  return { ...carried, version: CARRIED_STATE_VERSION, neverSentInARow: carried.neverSentInARow ?? 0 };
}

type Failed = Exclude<Decision, { kind: 'success' }>;

/** One intent's run. State lives here; the workflow function only wires handlers and drives the loop. */
class IntentRun {
  readonly status: IntentStatus;
  needsInspection = false;
  inspectionsSinceUnknown = 0;
  permittedAtMs: number | undefined;
  dueAtMs: number | undefined;
  retryNowRequests = 0;
  neverSentInARow = 0;
  /** The scope of the dispatch in flight, so that a cancel signal can cancel it. */
  dispatchScope: CancellationScope | undefined;
  abortedByCancel = false;
  seenDeliveries: string[] = [];
  /** The first final state a webhook reported, until the loop applies it. */
  webhookVerdict: WebhookDelivery | undefined;
  readonly deadlineMs: number;
  readonly taskQueuePrefix: string;
  readonly queues: ReturnType<typeof taskQueues>;
  readonly target: string;
  readonly changesOnly: boolean;
  readonly stallAfterMs: number | undefined;
  readonly localGateCheck: boolean;
  /** What {@link IntentPatch.localGateCheck} answered at this run's first dispatch (undefined: none yet). */
  gateCheckedAtFirstDispatch: boolean | undefined;
  /** The last dispatch was cancelled before any worker started it: nothing was sent. */
  dispatchUnsent = false;
  /** Set until the first workflow task of an intent held at submit has looked at why it runs. */
  heldAtSubmit: HeldAtSubmit | undefined;
  /** See {@link IntentWorkflowOptions.gateOpenAtSubmit}; not carried to a next run. */
  readonly gateOpenAtSubmit: boolean;

  constructor(
    readonly spec: IntentSpec,
    options: IntentWorkflowOptions,
  ) {
    this.deadlineMs = new Date(spec.deadline).getTime();
    this.taskQueuePrefix = options.taskQueuePrefix ?? 'retryq';
    this.queues = taskQueues(this.taskQueuePrefix);
    this.target = describeTarget(spec.action.method, spec.action.url);
    this.changesOnly = options.publishChangesOnly === true;
    this.stallAfterMs = options.stallAfterMs;
    this.localGateCheck = options.localGateCheck === true;
    this.gateOpenAtSubmit = options.gateOpenAtSubmit === true && options.carried === undefined;
    const carried = options.carried ? upgradeCarried(options.carried) : undefined;
    if (carried) {
      this.neverSentInARow = carried.neverSentInARow;
      this.status = carried.status;
      this.needsInspection = carried.needsInspection;
      this.inspectionsSinceUnknown = carried.inspectionsSinceUnknown;
      this.permittedAtMs = carried.permittedAtMs;
      this.dueAtMs = carried.dueAtMs;
      this.seenDeliveries = carried.seenDeliveries ?? [];
      this.webhookVerdict = carried.webhookVerdict;
    } else {
      this.status = {
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
      const hold = options.heldAtSubmit;
      if (hold) {
        // What the client's start attributes already say (so the first publish upserts nothing), and what the
        // status answered from them while the server held the intent.
        this.heldAtSubmit = hold;
        this.permittedAtMs = hold.untilMs;
        Object.assign(this.status, heldAtSubmitStatus(spec.credential, hold));
      }
    }
  }

  carry(): CarriedState {
    return {
      version: CARRIED_STATE_VERSION,
      neverSentInARow: this.neverSentInARow,
      status: this.status,
      needsInspection: this.needsInspection,
      inspectionsSinceUnknown: this.inspectionsSinceUnknown,
      permittedAtMs: this.permittedAtMs,
      dueAtMs: this.dueAtMs,
      seenDeliveries: this.seenDeliveries,
      webhookVerdict: this.webhookVerdict,
    };
  }

  // ---- visibility ---------------------------------------------------------------------------------------

  /**
   * Search attributes and the UI's current-details text, at every transition. Upserts only the attributes whose
   * values differ from what the run already holds (the client's start values, or the previous run's after
   * continue-as-new), so a transition that changes none adds no history event.
   */
  publish(): void {
    const s = this.status;
    const ev = s.lastEvidence;
    const errorCode = ev
      ? (ev.code ?? (ev.status ? `http_${ev.status}` : ev.transport ? `transport_${ev.transport}` : null))
      : null;
    const updates: SearchAttributeUpdatePair[] = [];
    if (!this.changesOnly) {
      // The original sequence: every attribute at every transition (what runs without the option recorded).
      updates.push(
        { key: retryPhaseKey, value: s.phase },
        { key: retryAttemptKey, value: s.attempts },
        { key: credentialKey, value: s.credential },
        { key: nextAttemptAtKey, value: s.nextAttemptAt ? new Date(s.nextAttemptAt) : null },
      );
      if (errorCode !== null && ev?.decision !== 'success') updates.push({ key: lastErrorCodeKey, value: errorCode });
      upsertSearchAttributes(updates);
      setCurrentDetails(this.details());
      return;
    }
    const held = workflowInfo().typedSearchAttributes;
    const put = <T extends string | number | Date>(key: SearchAttributeKey<SearchAttributeType>, value: T | null) => {
      const now = held.get(key) as T | undefined;
      const same =
        value === null
          ? now === undefined
          : value instanceof Date
            ? now instanceof Date && now.getTime() === value.getTime()
            : now === value;
      if (!same) updates.push({ key, value } as SearchAttributeUpdatePair);
    };
    put(retryPhaseKey, s.phase);
    put(retryAttemptKey, s.attempts);
    put(credentialKey, s.credential);
    put(nextAttemptAtKey, s.nextAttemptAt ? new Date(s.nextAttemptAt) : null);
    // A stalled dispatch is found with LastErrorCode="no_worker"; the code goes once a worker has answered.
    if (s.stalled) put(lastErrorCodeKey, NO_WORKER_CODE);
    else if (errorCode !== null && ev?.decision !== 'success') put(lastErrorCodeKey, errorCode);
    else if (held.get(lastErrorCodeKey) === NO_WORKER_CODE) put(lastErrorCodeKey, null);
    if (updates.length > 0) upsertSearchAttributes(updates);
    setCurrentDetails(this.details());
  }

  /** A sentence a person understands: what the intent is doing, until when, and why. */
  details(): string {
    const s = this.status;
    const attempt = `attempt ${s.attempts}/${s.maxAttempts}`;
    // Time of day, with the date when it is not today (waits may last days).
    const today = new Date().toISOString().slice(0, 10);
    const clock = (iso: string | undefined) =>
      iso ? `${iso.slice(0, 10) === today ? '' : `${iso.slice(0, 10)} `}${iso.slice(11, 19)} UTC` : '?';
    const last = this.lastEvidenceText();
    switch (s.phase) {
      case Phase.scheduled:
        return `Scheduled: ${this.target}, first attempt due now.`;
      case Phase.dispatching:
        if (s.stalled)
          return (
            `No worker has served credential ${s.credential} since ${clock(s.stalled.since)}: ${attempt} waits on ` +
            `task queue ${s.stalled.taskQueue} and nothing was sent. Start a worker that has this credential ` +
            `(RETRYQ_CREDENTIALS), or cancel the intent (it ends at once); it expires at its deadline ${clock(s.deadline)}.`
          );
        return `Sending ${this.target} (${attempt}).`;
      case Phase.inspecting:
        return `Checking with the provider whether attempt ${s.attempts} took effect (inspection ${s.inspections}) before anything else is sent.`;
      case Phase.waiting: {
        const held = s.held;
        if (held?.reason === 'rate_limited')
          return (
            `Waiting: credential ${held.credential} is rate limited until ${clock(held.until)}` +
            `${held.why ? ` (${held.why})` : ''}; this intent's turn comes at ${clock(s.nextAttemptAt)}. ` +
            `Nothing was sent and no attempt was used (${attempt} so far).`
          );
        if (held?.reason === 'paced')
          return (
            `Waiting for a send slot of credential ${held.credential} at ${clock(s.nextAttemptAt)}: its budget is in ` +
            `use${held.why ? ` (${held.why})` : ''}. Nothing was sent (${attempt} so far).`
          );
        if (held?.reason === 'blocked')
          return (
            `Held: credential ${held.credential} is blocked (${held.why ?? 'quota'}) until an operator runs ` +
            `\`retryq credentials resume ${held.credential}\`. Nothing is sent; the intent expires at its deadline ` +
            `${clock(s.deadline)} (${attempt} so far).`
          );
        const ev = s.lastEvidence;
        if (s.unreachableSince !== undefined && ev?.sent === 'no')
          return (
            `Waiting: ${unsentBecause(ev.code, s.credential)} ` +
            `since ${clock(s.unreachableSince)} (${last}); nothing was sent and no attempt was used. ` +
            `Next try at ${clock(s.nextAttemptAt)} (${attempt} so far; gives up at the deadline ${clock(s.deadline)}).`
          );
        const what = this.needsInspection ? 'to inspect the unknown outcome' : 'for provider';
        const why =
          ev?.retryAfter !== undefined && this.permittedAtMs !== undefined && s.nextAttemptAt === s.permittedAt
            ? `Retry-After ${retryAfterText(ev.retryAfter)}`
            : `backoff after ${last}`;
        return `Waiting ${what} until ${clock(s.nextAttemptAt)} (${why}, ${attempt}).`;
      }
      case Phase.succeeded:
        return s.resolvedByWebhook
          ? `Succeeded: ${describeWebhookEntry(s.resolvedByWebhook)} from ${s.resolvedByWebhook.source}, after ${s.attempts} attempt${s.attempts === 1 ? '' : 's'}; no inspection needed.`
          : `Succeeded after ${s.attempts} attempt${s.attempts === 1 ? '' : 's'}.`;
      default:
        return `${s.phase[0]!.toUpperCase()}${s.phase.slice(1)}: ${s.finalReason ?? 'no reason recorded'}.${
          s.reservation ? ` Reservation to reconcile: ${s.reservation.reason}.` : ''
        }`;
    }
  }

  lastEvidenceText(): string {
    const ev = this.status.lastEvidence;
    return ev ? evidenceText(ev) : 'no answer yet';
  }

  record(entry: AttemptRecord): void {
    const log = this.status.attemptLog;
    log.push(entry);
    if (log.length > ATTEMPT_LOG_LIMIT) {
      log.splice(0, log.length - ATTEMPT_LOG_LIMIT);
      this.status.attemptLogDropped++;
    }
  }

  // ---- webhooks -----------------------------------------------------------------------------------------

  /** What a delivery would do now (src/policy/webhook-deliveries.ts). */
  judgeDelivery(d: WebhookDelivery): DeliveryVerdict {
    return deliveryVerdict(d, {
      seen: this.seenDeliveries,
      phase: this.status.phase,
      settled: this.webhookVerdict !== undefined,
    });
  }

  /** The `webhook` update's validator: throws (rejects, recording nothing) for a delivery to turn away. */
  validateWebhook(d: WebhookDelivery): void {
    const verdict = this.judgeDelivery(d);
    if (isRefusal(verdict)) throw webhookRefusal(verdict);
  }

  /**
   * The `webhook` update's handler, synchronous: marks the id seen, counts and logs the delivery; the first final
   * state is left for the loop to apply at its next step (see {@link applyWebhook}). A delivery to turn away (only
   * reachable if the validator was bypassed) fails the update without changing anything.
   */
  onWebhook(d: WebhookDelivery): WebhookAck {
    const verdict = this.judgeDelivery(d);
    if (isRefusal(verdict)) throw webhookRefusal(verdict);
    const s = this.status;
    this.seenDeliveries = rememberDelivery(this.seenDeliveries, d);
    const counts = (s.webhooks ??= { received: 0, late: 0 });
    counts.received++;
    if (verdict.kind === 'late') counts.late++;
    if (verdict.kind === 'settles') this.webhookVerdict = d;
    this.record({
      kind: 'webhook',
      attempt: s.attempts,
      startedAt: new Date().toISOString(),
      evidence: {
        sent: 'yes',
        decision: verdict.kind === 'late' ? `webhook_${d.state}_ignored` : `webhook_${d.state}`,
      },
      webhook: { source: d.source, deliveryId: d.deliveryId, state: d.state, eventType: d.eventType },
    });
    return { effect: verdict.kind, phase: s.phase };
  }

  /** The one place a webhook's final state becomes the intent's end, without another provider call. */
  async applyWebhook(d: WebhookDelivery): Promise<IntentOutcome> {
    const s = this.status;
    this.webhookVerdict = undefined;
    this.needsInspection = false;
    s.reservation = undefined;
    s.resolvedByWebhook = { source: d.source, deliveryId: d.deliveryId, state: d.state };
    const who = `${describeWebhookEntry(d)} (from ${d.source})`;
    if (d.state === 'succeeded') {
      s.lastEvidence = { sent: 'yes', decision: 'webhook_succeeded' };
      s.result = { body: d.result ?? null, webhook: { source: d.source, deliveryId: d.deliveryId } };
      return this.finish(Phase.succeeded, `${who}: the provider reports the operation succeeded`);
    }
    // Like an inspection that found a recorded failure: the provider saved it under the key, so it is final.
    const evidence: Evidence = {
      method: this.spec.action.method,
      sent: 'yes',
      status: d.error?.status ?? 500,
      ...(d.error?.code !== undefined ? { code: d.error.code } : {}),
    };
    const decision = classify(evidence, { now: new Date(), codes: this.spec.codes });
    s.lastEvidence = { ...summarize(evidence, decision), decision: `webhook_failed:${decision.kind}` };
    return this.finish(
      Phase.failed,
      `${who}: the provider recorded the operation as failed (${describeEvidence(evidence)}); the same ` +
        `idempotency key would replay that answer, so submit a new intent with a new key to try again`,
    );
  }

  // ---- the loop -----------------------------------------------------------------------------------------

  async run(): Promise<IntentOutcome> {
    this.publish();
    if (this.heldAtSubmit) {
      const outcome = this.startAfterHold(this.heldAtSubmit);
      this.heldAtSubmit = undefined;
      if (outcome) return outcome;
    }
    for (;;) {
      if (this.webhookVerdict) return this.applyWebhook(this.webhookVerdict);
      if (this.status.cancelRequested !== undefined) return this.finish(Phase.cancelled, this.status.cancelRequested);
      if (this.dueAtMs !== undefined) {
        // Never sleep past the deadline (the policy gives up first; this guards state carried across runs).
        if (this.dueAtMs > this.deadlineMs)
          return this.finish(
            Phase.expired,
            `the next call would be at ${new Date(this.dueAtMs).toISOString()}, past the deadline ${this.spec.deadline}`,
          );
        await this.waitUntilDue();
        continue;
      }
      if (Date.now() >= this.deadlineMs)
        return this.finish(
          Phase.expired,
          this.status.held?.reason === 'blocked'
            ? `deadline ${this.spec.deadline} reached while credential ${this.spec.credential} was blocked (${this.status.held.why ?? 'quota'}) and not resumed`
            : `deadline ${this.spec.deadline} reached before the next provider call`,
        );
      if (workflowInfo().continueAsNewSuggested) {
        await condition(allHandlersFinished);
        await continueAsNew<typeof intentWorkflow>(this.spec, { ...this.optionsForNextRun(), carried: this.carry() });
      }
      const outcome = this.needsInspection ? await this.inspectOnce() : await this.dispatchOnce();
      if (outcome) return outcome;
    }
  }

  /**
   * The first workflow task of an intent held at submit. A cancel (or a webhook's verdict) ends it in the loop. Its
   * turn past the deadline ends it `expired` now, as a hold in a workflow task would. "Retry now" ended the delay
   * early: wait for the gate's time, never less (invariant 2). Otherwise the delay ended at its turn: dispatch now;
   * the gate check or load control holds it again if the gate has closed for longer since.
   */
  startAfterHold(hold: HeldAtSubmit): Promise<IntentOutcome> | undefined {
    const s = this.status;
    if (s.cancelRequested !== undefined || this.webhookVerdict !== undefined) return undefined;
    countHeld(this.spec.credential, 'rate_limited');
    if (hold.wakeAtMs > this.deadlineMs)
      return this.finish(
        Phase.expired,
        `credential ${this.spec.credential} is rate limited until ${new Date(hold.untilMs).toISOString()}; this ` +
          `intent's turn would come past the deadline ${this.spec.deadline}`,
      );
    if (this.retryNowRequests > 0 && Date.now() < hold.untilMs) this.setDue(hold.untilMs);
    return undefined;
  }

  optionsForNextRun(): IntentWorkflowOptions {
    return {
      taskQueuePrefix: this.taskQueuePrefix,
      ...(this.changesOnly ? { publishChangesOnly: true } : {}),
      ...(this.stallAfterMs !== undefined ? { stallAfterMs: this.stallAfterMs } : {}),
      ...(this.localGateCheck ? { localGateCheck: true } : {}),
    };
  }

  /** Durable sleep until the next call is due; a cancel ends it, "retry now" shortens it to the server floor. */
  async waitUntilDue(): Promise<void> {
    const dueAt = this.dueAtMs!;
    const now = Date.now();
    if (now < dueAt) {
      const asked = this.retryNowRequests;
      const woke = await condition(
        () =>
          this.status.cancelRequested !== undefined ||
          this.retryNowRequests !== asked ||
          this.webhookVerdict !== undefined,
        dueAt - now,
        { summary: `wait until ${new Date(dueAt).toISOString()}` },
      );
      // A webhook settled it: the loop applies it; the due time stays for nothing.
      if (woke && this.webhookVerdict !== undefined) return;
      if (woke && this.status.cancelRequested === undefined) {
        // Retry now: as soon as the server permits, never before (invariant 2).
        const earliest = Math.max(Date.now(), this.permittedAtMs ?? 0);
        // Due now: the dispatch that follows in this workflow task publishes; a later floor is a new wait.
        if (this.changesOnly && earliest <= Date.now()) this.dueAtMs = undefined;
        else if (earliest < dueAt) this.setDue(earliest);
        return;
      }
      if (woke) return;
    }
    this.dueAtMs = undefined;
  }

  setDue(atMs: number): void {
    this.dueAtMs = atMs;
    this.status.nextAttemptAt = new Date(atMs).toISOString();
    this.status.phase = Phase.waiting;
    this.publish();
  }

  async dispatchOnce(): Promise<IntentOutcome | undefined> {
    const s = this.status;
    if (s.attempts >= this.spec.policy.maxAttempts)
      return this.finish(
        Phase.failed,
        `attempt budget of ${this.spec.policy.maxAttempts} used up; last: ${this.lastEvidenceText()}`,
      );
    if (this.localGateCheck && this.gateCheckNow()) {
      // The gate is known closed: wait for it now, in this workflow task. Nothing is sent, so it is no attempt.
      const hold = await this.knownHold();
      if (hold) return this.held(hold, 'dispatch');
    }
    s.attempts++;
    s.phase = Phase.dispatching;
    s.nextAttemptAt = undefined;
    this.publish();
    const startedAt = new Date().toISOString();
    let result: DispatchResult;
    const input: DispatchInput = {
      idempotencyKey: this.spec.idempotencyKey,
      credential: this.spec.credential,
      action: this.spec.action,
      attempt: s.attempts,
      timeoutMs: this.spec.policy.attemptTimeoutMs,
      codes: this.spec.codes,
    };
    try {
      if (this.stallAfterMs === undefined) {
        // Runs started without the option keep their command sequence: a cancel signal cancels this scope (behind
        // IntentPatch.cancelAbortsDispatch) and the dispatch is not waited for.
        const { dispatch } = this.activities(
          this.queues.actions(this.spec.credential),
          `attempt ${s.attempts}/${s.maxAttempts}: ${this.target}`,
        );
        const scope = new CancellationScope();
        this.dispatchScope = scope;
        result = await scope.run(() => dispatch(input));
      } else {
        const answer = await this.watchedDispatch(input);
        if (answer === 'unsent') {
          // Cancelled before any worker started it: nothing was sent, so it was no attempt and leaves no reservation.
          s.attempts--;
          return this.finish(Phase.cancelled, `${s.cancelRequested ?? 'cancelled'} (before it was sent)`);
        }
        result = answer;
      }
    } catch (err) {
      if (isCancellation(err)) {
        if (this.abortedByCancel && !CancellationScope.current().consideredCancelled)
          return this.abortedDispatch(startedAt);
        throw err;
      }
      const hold = holdFromFailure(err);
      // Load control held the call: nothing was sent, so it was not an attempt.
      if (hold) s.attempts--;
      // A webhook that arrived while the attempt was in flight already says how it ended (e.g. the answer was lost).
      if (this.webhookVerdict) return this.applyWebhook(this.webhookVerdict);
      if (hold) return this.held(hold, 'dispatch');
      s.held = undefined;
      const evidence = evidenceFromFailure(err, this.spec.action.method, 'dispatch');
      if (this.stallAfterMs !== undefined && evidence.status === undefined && evidence.sent !== 'no') {
        // A watched dispatch that a cancel reached after its request had gone out: the activity aborted the request
        // and reported it as a call of unknown outcome (a cancel before that point ends as 'unsent' instead).
        if (CancellationScope.current().consideredCancelled) {
          // Cancelled through Temporal: the run's cancellation handler records the attempt in flight.
          this.recordAborted(startedAt);
          throw new CancelledFailure('cancelled through Temporal while the attempt was in flight');
        }
        if (s.cancelRequested !== undefined) return this.abortedDispatch(startedAt);
      }
      const decision = classify(evidence, { now: new Date(), codes: this.spec.codes });
      if (evidence.sent === 'no' && patched(IntentPatch.neverSentIsNoAttempt))
        return this.neverSent(evidence, decision, startedAt);
      return this.afterDispatch(evidence, decision, startedAt);
    } finally {
      this.dispatchScope = undefined;
    }
    const evidence: EvidenceSummary = { status: result.status, sent: 'yes', decision: 'success' };
    s.held = undefined;
    s.unreachableSince = undefined;
    countAttempt(this.spec.credential, 'success');
    s.lastEvidence = evidence;
    this.record({ kind: 'dispatch', attempt: s.attempts, startedAt, evidence });
    s.result = { status: result.status, body: result.body, ...(result.truncated ? { truncated: true } : {}) };
    s.reservation = undefined;
    return this.finish(Phase.succeeded, `provider answered HTTP ${result.status}`);
  }

  /**
   * Whether this dispatch runs the gate check. At the run's first dispatch: {@link IntentPatch.localGateCheck}, which
   * the worker activates only when its process knows the gate closed (an open gate costs the intent nothing). At
   * every later one: the first answer again, or else {@link IntentPatch.gateCheckAfterWait}. Each patch is asked for
   * at one place only, so a marker in the history always sits where its replay asks for it.
   */
  gateCheckNow(): boolean {
    if (this.gateCheckedAtFirstDispatch === undefined) {
      this.gateCheckedAtFirstDispatch = this.trustsGateOpenAtSubmit() ? false : patched(IntentPatch.localGateCheck);
      return this.gateCheckedAtFirstDispatch;
    }
    return this.gateCheckedAtFirstDispatch || patched(IntentPatch.gateCheckAfterWait);
  }

  /**
   * The run's first dispatch goes without asking the worker's process about the gate, because the client saw it open
   * a moment ago ({@link IntentWorkflowOptions.gateOpenAtSubmit}). Only when not replaying: then the outcome is
   * what the activation callback's "open" records, no marker, and a replay that asks `patched()` gets `false` from
   * the history. A replay always asks, so a history whose worker did record the check (a worker of the 0.5.0 shape or
   * earlier, which ignores the option) replays with it.
   */
  trustsGateOpenAtSubmit(): boolean {
    if (!this.gateOpenAtSubmit) return false;
    const info = workflowInfo();
    return !info.unsafe.isReplaying && Date.now() - info.runStartTime.getTime() <= GATE_OPEN_AT_SUBMIT_TRUSTED_MS;
  }

  /**
   * The hold of the credential's gate as this intent's worker process knows it (see {@link IntentWorkflowOptions.localGateCheck}),
   * or `undefined`: the gate is open or unknown there, or the check did not answer, and the dispatch asks load
   * control as usual. A local activity: recorded as one marker, no task of its own, nothing sent.
   */
  async knownHold(): Promise<CredentialHold | undefined> {
    const { gateHint } = proxyLocalActivities<Activities>({
      startToCloseTimeout: GATE_HINT_TIMEOUT_MS,
      retry: { maximumAttempts: 1 },
      summary: `load control: is the gate of ${this.spec.credential} closed?`,
    });
    try {
      const answer = await gateHint({ credential: this.spec.credential, nowMs: Date.now() });
      return answer.kind === 'held' ? answer.hold : undefined;
    } catch (err) {
      if (isCancellation(err)) throw err;
      return undefined;
    }
  }

  /** A cancel signal arrived while a dispatch was in flight (see {@link IntentPatch.cancelAbortsDispatch}). */
  abortInFlightDispatch(): void {
    if (this.dispatchScope === undefined || !patched(IntentPatch.cancelAbortsDispatch)) return;
    this.abortedByCancel = true;
    this.dispatchScope.cancel();
  }

  /** The attempt in flight was aborted by a cancel: its request may have reached the provider. */
  recordAborted(startedAt: string): void {
    const s = this.status;
    const evidence: EvidenceSummary = { transport: 'aborted', sent: 'unknown', decision: 'cancelled' };
    s.lastEvidence = evidence;
    this.record({ kind: 'dispatch', attempt: s.attempts, startedAt, evidence });
    countAttempt(this.spec.credential, 'unknown_outcome');
  }

  /** The dispatch was cancelled by a cancel signal: its request was aborted, and may have reached the provider. */
  async abortedDispatch(startedAt: string): Promise<IntentOutcome> {
    const s = this.status;
    this.recordAborted(startedAt);
    s.reservation = reservation(
      this.spec.idempotencyKey,
      s.attempts,
      `attempt ${s.attempts} was in flight when the intent was cancelled; its request was aborted and may have reached the provider`,
    );
    return this.finish(Phase.cancelled, s.cancelRequested ?? 'cancelled');
  }

  /**
   * A dispatch that was never sent (connection refused, DNS failure, no secret on the worker): nothing reached the
   * provider, so it uses no attempt (see {@link IntentPatch.neverSentIsNoAttempt}). It is backed off by the number
   * of such failures in a row, and bounded by the deadline only.
   */
  async neverSent(evidence: Evidence, decision: Decision, startedAt: string): Promise<IntentOutcome | undefined> {
    const s = this.status;
    s.attempts--;
    this.neverSentInARow++;
    s.unreachableSince ??= startedAt;
    const summary = summarize(evidence, decision);
    s.lastEvidence = summary;
    const entry: AttemptRecord = { kind: 'dispatch', attempt: s.attempts + 1, startedAt, evidence: summary };
    this.record(entry);
    if (decision.kind === 'permanent')
      return this.finish(Phase.failed, `permanent failure before sending: ${describeEvidence(evidence)}`);
    const asTransient: Failed =
      decision.kind === 'success' || decision.kind === 'unknown_outcome'
        ? { kind: 'transient', reason: 'not sent', retryAfter: { kind: 'absent' } }
        : decision;
    return this.schedule(asTransient, this.neverSentInARow, entry, 'resend');
  }

  /**
   * The activities of one provider call, with the one set of options both kinds share: a single attempt (Temporal's
   * retries would stack on retryq's), and not started by the deadline = never started, so no provider call starts
   * after the deadline (invariant 7). 1 ms is the least timeout (zero means "none"); any larger floor would let a
   * call start after the deadline.
   */
  activities(taskQueue: string, summary: string, watched?: { startWithinMs: number }) {
    return proxyActivities<Activities>({
      taskQueue,
      // The attempt's own timeout, the answer's way back, and the wait for a send slot from the credential's
      // load control (SLOT_WAIT_MS).
      startToCloseTimeout: this.spec.policy.attemptTimeoutMs + 10_000 + SLOT_WAIT_MS,
      // Not started by the deadline = never started: no dispatch or inspection after the deadline (invariant 7).
      // No minimum beyond 1 ms (a zero timeout means "none"): any floor would let an attempt start after it.
      scheduleToStartTimeout: Math.max(1, Math.min(this.deadlineMs - Date.now(), watched?.startWithinMs ?? Infinity)),
      // Silent this long = its worker is gone: the call ends (outcome unknown) and the intent moves on in seconds.
      heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
      retry: { maximumAttempts: 1 },
      // A watched dispatch: a cancel before it started is confirmed by the server at once (nothing sent); one that
      // runs is waited for, so its outcome is known (see watchedDispatch).
      ...(watched ? { cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED } : {}),
      summary,
    });
  }

  /** The one place a dispatch decision becomes Temporal calls. */
  async afterDispatch(evidence: Evidence, decision: Decision, startedAt: string): Promise<IntentOutcome | undefined> {
    const s = this.status;
    this.neverSentInARow = 0;
    s.unreachableSince = undefined;
    const summary = summarize(evidence, decision);
    s.lastEvidence = summary;
    countAttempt(this.spec.credential, decision.kind);
    if (evidence.status === 429) countRateLimited(this.spec.credential, 'dispatch');
    const entry: AttemptRecord = { kind: 'dispatch', attempt: s.attempts, startedAt, evidence: summary };
    this.record(entry);
    switch (decision.kind) {
      case 'success':
        // Only reachable if an activity reported success as a failure; treat it as an answer we cannot read.
        return this.finish(Phase.failed, 'inconsistent activity result');
      case 'permanent':
        return this.finish(
          Phase.failed,
          `permanent failure (${decision.reason}${decision.code ? `: ${decision.code}` : ''}): ${describeEvidence(evidence)}`,
        );
      case 'unknown_outcome':
        // Invariant 5: the next provider call is an inspection, never a blind re-dispatch.
        this.needsInspection = true;
        this.inspectionsSinceUnknown = 0;
        s.reservation = reservation(this.spec.idempotencyKey, s.attempts, `attempt ${s.attempts}: ${decision.reason}`);
        // With changesOnly, no publish here: the loop's next step (the inspection, or the end) publishes in this
        // same workflow task.
        if (!this.changesOnly) this.publish();
        return undefined;
      case 'rate_limited':
      case 'transient':
        return this.schedule(decision, s.attempts, entry, 'dispatch');
    }
  }

  /** Applies a schedule from the policy: wait, or stop as expired/failed. */
  async schedule(
    decision: Failed,
    attempt: number,
    entry: AttemptRecord,
    next: 'dispatch' | 'inspect' | 'resend',
  ): Promise<IntentOutcome | undefined> {
    const s = this.status;
    // Inspections and resends of calls that were never sent use no attempt: only the deadline bounds them.
    const policy =
      next === 'dispatch' ? this.spec.policy : { ...this.spec.policy, maxAttempts: Number.POSITIVE_INFINITY };
    const plan: Schedule = nextAttempt({
      decision,
      attempt,
      now: new Date(),
      deadline: new Date(this.deadlineMs),
      policy,
      random: Math.random,
    });
    const serverFloor =
      (decision.kind === 'rate_limited' || decision.kind === 'transient') &&
      (decision.retryAfter.kind === 'delay' || decision.retryAfter.kind === 'date')
        ? decision.retryAfter.notBefore.getTime()
        : undefined;
    if (next !== 'inspect') {
      this.permittedAtMs = serverFloor;
      s.permittedAt = serverFloor !== undefined ? new Date(serverFloor).toISOString() : undefined;
    }
    switch (plan.kind) {
      case 'retry_at':
        entry.nextAt = plan.at.toISOString();
        entry.floor = plan.floor;
        this.setDue(plan.at.getTime());
        return undefined;
      case 'give_up':
        if (plan.reason === 'deadline') {
          if (plan.permittedAt) s.permittedAt = plan.permittedAt.toISOString();
          return this.finish(
            Phase.expired,
            `the next ${next === 'inspect' ? 'inspection' : 'attempt'} would be at ${plan.permittedAt?.toISOString() ?? '?'}, past the deadline ${this.spec.deadline}; last: ${this.lastEvidenceText()}` +
              (s.unreachableSince !== undefined && next === 'resend'
                ? `; the provider was unreachable since ${s.unreachableSince} and nothing was sent since then`
                : ''),
          );
        }
        if (plan.reason === 'attempts')
          return this.finish(
            Phase.failed,
            `attempt budget of ${this.spec.policy.maxAttempts} used up; last: ${this.lastEvidenceText()}`,
          );
        return this.finish(Phase.failed, `gave up: ${this.lastEvidenceText()}`);
    }
  }

  async inspectOnce(): Promise<IntentOutcome | undefined> {
    const s = this.status;
    const inspection = this.spec.inspection;
    if (!inspection)
      // Unreachable for validated intents (writes need an inspection spec); reads never have unknown outcomes.
      return this.finish(Phase.failed, 'outcome unknown and no inspection is configured');
    s.inspections++;
    this.inspectionsSinceUnknown++;
    s.phase = Phase.inspecting;
    s.nextAttemptAt = undefined;
    this.publish();
    const startedAt = new Date().toISOString();
    const { inspect } = this.activities(
      this.queues.inspect(this.spec.credential),
      `inspect attempt ${s.attempts} by idempotency key`,
    );
    // The inspection races a webhook: a delivery that settles the outcome first cancels the (read-only) lookup,
    // e.g. while it waits in the inspection queue behind the credential's rate limit.
    const call = new CancellationScope();
    const settled = call
      .run(() =>
        inspect({
          idempotencyKey: this.spec.idempotencyKey,
          credential: this.spec.credential,
          inspection,
          timeoutMs: this.spec.policy.attemptTimeoutMs,
          codes: this.spec.codes,
        }),
      )
      .then(
        (found) => ({ kind: 'found', found }) as const,
        (err: unknown) => ({ kind: 'error', err }) as const,
      );
    const watch = new CancellationScope();
    const webhook = watch
      .run(() => condition(() => this.webhookVerdict !== undefined))
      .then(
        () => ({ kind: 'webhook' }) as const,
        () => ({ kind: 'unwatched' }) as const,
      );
    let first = await Promise.race([settled, webhook]);
    if (first.kind === 'webhook' && this.webhookVerdict) {
      call.cancel();
      return this.applyWebhook(this.webhookVerdict);
    }
    watch.cancel();
    if (first.kind !== 'found' && first.kind !== 'error') first = await settled;
    let found: InspectResult;
    if (first.kind === 'found') found = first.found;
    else {
      const err = first.err;
      if (isCancellation(err)) throw err;
      const hold = holdFromFailure(err);
      if (hold) {
        s.inspections--;
        this.inspectionsSinceUnknown--;
        return this.held(hold, 'inspect');
      }
      s.held = undefined;
      const evidence = evidenceFromFailure(err, 'GET', 'inspect');
      const decision = classify(evidence, { now: new Date(), codes: this.spec.codes });
      const summary = summarize(evidence, decision);
      s.lastEvidence = summary;
      countInspection(this.spec.credential, 'error');
      if (evidence.status === 429) countRateLimited(this.spec.credential, 'inspect');
      const entry: AttemptRecord = { kind: 'inspect', attempt: s.attempts, startedAt, evidence: summary };
      this.record(entry);
      const next = inspectionFailure(decision);
      if (next.kind === 'permanent')
        return this.finish(
          Phase.failed,
          `the inspection itself failed for good (${describeEvidence(evidence)}); the outcome of attempt ${s.attempts} stays unknown`,
        );
      return this.schedule(next, this.inspectionsSinceUnknown, entry, 'inspect');
    }
    s.held = undefined;
    return this.afterInspection(found, startedAt);
  }

  /**
   * The one place a hold by the credential's load control becomes Temporal calls: wait durably (a timer) until the
   * gate opens — spread after it by the place the credential handed out, so released intents do not stampede — or
   * until the slot comes; while the credential is blocked, until an operator resumes it (the resume command wakes
   * waiting intents; they also look again every few minutes) or the deadline.
   */
  async held(hold: CredentialHold, next: 'dispatch' | 'inspect'): Promise<IntentOutcome | undefined> {
    const s = this.status;
    const now = Date.now();
    countHeld(hold.credential, hold.kind);
    if (hold.kind === 'blocked') {
      s.held = { credential: hold.credential, reason: 'blocked', why: hold.reason, since: hold.since };
      this.setDue(Math.min(this.deadlineMs, now + BLOCKED_RECHECK_MS));
      return undefined;
    }
    const floor = now + hold.holdMs;
    const wake =
      hold.kind === 'rate_limited'
        ? spreadWakeUp({ floorMs: floor, rank: hold.rank, perMinute: hold.perMinute, random: Math.random })
        : floor;
    s.held = {
      credential: hold.credential,
      reason: hold.kind,
      until: new Date(floor).toISOString(),
      ...(hold.why ? { why: hold.why } : {}),
    };
    if (hold.kind === 'rate_limited' && next === 'dispatch') {
      // The gate's time is a server-permitted time for this intent too: "retry now" never goes before it.
      this.permittedAtMs = Math.max(this.permittedAtMs ?? 0, floor);
      s.permittedAt = new Date(this.permittedAtMs).toISOString();
    }
    if (wake > this.deadlineMs)
      return this.finish(
        Phase.expired,
        hold.kind === 'rate_limited'
          ? `credential ${hold.credential} is rate limited until ${new Date(floor).toISOString()}; this intent's turn would come past the deadline ${this.spec.deadline}`
          : `the next send slot of credential ${hold.credential} lies past the deadline ${this.spec.deadline}`,
      );
    this.setDue(wake);
    return undefined;
  }

  /** The one place an inspection result becomes Temporal calls; what it means comes from the policy. */
  async afterInspection(found: InspectResult, startedAt: string): Promise<IntentOutcome | undefined> {
    const s = this.status;
    countInspection(this.spec.credential, found.kind);
    const verdict = inspectionVerdict(found, {
      method: this.spec.action.method,
      permittedAtMs: this.permittedAtMs,
      now: new Date(),
      codes: this.spec.codes,
    });
    const entry: AttemptRecord = {
      kind: 'inspect',
      attempt: s.attempts,
      startedAt,
      evidence: { status: 200, sent: 'yes', decision: `operation_${found.kind}` },
    };
    if (verdict.kind === 'redispatch') entry.evidence = { status: 404, sent: 'yes', decision: 'operation_absent' };
    if (verdict.kind === 'recorded_failure')
      entry.evidence = {
        ...summarize(verdict.evidence, verdict.decision),
        decision: `operation_failed:${verdict.decision.kind}`,
      };
    this.record(entry);
    s.lastEvidence = entry.evidence;
    if (verdict.kind === 'inspect_again')
      return this.schedule(verdict.decision, this.inspectionsSinceUnknown, entry, 'inspect');
    // The operation's fate is known: nothing is left to reconcile.
    s.reservation = undefined;
    this.needsInspection = false;
    switch (verdict.kind) {
      case 'took_effect':
        s.result = { status: 200, body: verdict.result, inspected: true };
        return this.finish(Phase.succeeded, `inspection found attempt ${s.attempts} took effect`);
      case 'redispatch':
        // Safe to dispatch again with the same key; it was a failed attempt all the same.
        return this.schedule(verdict.decision, s.attempts, entry, 'dispatch');
      case 'recorded_failure': {
        // The provider saved this failure under the idempotency key: sending the same key again would only replay
        // it (Stripe-style idempotency), so a recorded failure is final whatever its status.
        const what = describeEvidence(verdict.evidence);
        return this.finish(
          Phase.failed,
          verdict.decision.kind === 'permanent'
            ? `inspection found attempt ${s.attempts} failed for good: ${what}`
            : `the provider recorded attempt ${s.attempts} as failed (${what}); the same ` +
                `idempotency key would replay that answer, so submit a new intent with a new key to try again`,
        );
      }
    }
  }

  /**
   * Writes the final phase and reason into the status and publishes it. `leftover` names what may be left at the
   * provider; unless the intent succeeded, it becomes a reservation (an earlier one stays).
   */
  recordFinal(phase: IntentOutcome['phase'], reason: string, leftover: string | undefined): void {
    const s = this.status;
    s.phase = phase;
    s.finalReason = reason;
    s.nextAttemptAt = undefined;
    this.dueAtMs = undefined;
    if (phase !== Phase.succeeded && leftover !== undefined)
      s.reservation ??= reservation(this.spec.idempotencyKey, s.attempts, leftover);
    this.publish();
    countEnded(this.spec.credential, phase);
  }

  /** Records the final phase; returns the outcome (success) or throws the intent's failure. */
  async finish(phase: IntentOutcome['phase'], reason: string): Promise<IntentOutcome> {
    const s = this.status;
    this.recordFinal(phase, reason, this.needsInspection ? 'outcome unknown at the end' : undefined);
    await condition(allHandlersFinished);
    const outcome = { ...s, phase } as IntentOutcome;
    if (phase === Phase.succeeded) return outcome;
    const type =
      phase === Phase.expired
        ? IntentFailureType.IntentExpired
        : phase === Phase.cancelled
          ? IntentFailureType.IntentCancelled
          : IntentFailureType.IntentFailed;
    const failure = ApplicationFailure.create({
      type,
      message: this.failureSentence(phase, reason),
      nonRetryable: true,
      details: [outcome],
      // An intent that ends unsuccessfully is an outcome, not a crash of retryq: the SDK logs it quietly.
      category: ApplicationFailureCategory.BENIGN,
    });
    // No stack trace: the failure is the intent's outcome, and the UI shows a stack as if the code had crashed.
    failure.stack = '';
    throw failure;
  }

  /**
   * The failure's message in the UI: a sentence saying what happened, the last evidence and any reservation, then
   * where the full outcome is.
   */
  failureSentence(phase: Exclude<Phase, 'succeeded'>, reason: string): string {
    const s = this.status;
    const what =
      phase === Phase.expired
        ? `Expired: ${this.target} was not delivered by the deadline`
        : phase === Phase.cancelled
          ? `Cancelled: ${this.target} will not be sent again`
          : `Failed: ${this.target} was not delivered`;
    const lastText = this.lastEvidenceText();
    const last = !s.lastEvidence ? ' Nothing was sent.' : reason.includes(lastText) ? '' : ` Last answer: ${lastText}.`;
    const reservationText = s.reservation
      ? ` Reservation to reconcile: ${s.reservation.reason}; check the operation with idempotency key ${s.reservation.idempotencyKey} at the provider.`
      : ' No reservation is left to reconcile.';
    return (
      `${what} (${reason}).${last}${reservationText} ` +
      `The full outcome (attempts, evidence, log) is in this failure's details and \`retryq status ${this.spec.idempotencyKey}\`.`
    );
  }

  /** The answer to "retry now", computed the way {@link waitUntilDue} will act on it. */
  retryNowAnswer(): RetryNowAnswer {
    const s = this.status;
    const now = Date.now();
    const iso = (ms: number) => new Date(ms).toISOString();
    const answer = (why: RetryNowAnswer['why'], at: number | null, message: string): RetryNowAnswer => ({
      phase: s.phase,
      nextAttemptAt: at === null ? null : iso(at),
      why,
      message,
    });
    if (s.phase === Phase.dispatching || s.phase === Phase.inspecting || finalPhases.has(s.phase))
      return answer(
        'in_progress',
        null,
        finalPhases.has(s.phase)
          ? `The intent is ending (${s.phase}); nothing more will be sent.`
          : `A provider call runs now (${s.phase}, attempt ${s.attempts}/${s.maxAttempts}); nothing to shorten.`,
      );
    if (this.dueAtMs === undefined || s.phase === Phase.scheduled) return answer('now', now, 'The next call runs now.');
    if (s.held?.reason === 'blocked')
      return answer(
        'blocked',
        now,
        `Credential ${s.credential} is blocked (${s.held.why ?? 'quota'}): the call runs now but is held again ` +
          `until an operator runs \`retryq credentials resume ${s.credential}\`.`,
      );
    const earliest = Math.min(this.dueAtMs, Math.max(now, this.permittedAtMs ?? 0));
    if (earliest <= now) return answer('now', now, 'The next call runs now.');
    const gateUntil = s.held?.reason === 'rate_limited' && s.held.until ? Date.parse(s.held.until) : 0;
    if (gateUntil >= earliest)
      return answer(
        'gate',
        earliest,
        `Credential ${s.credential} is rate limited until ${iso(gateUntil)}${s.held?.why ? ` (${s.held.why})` : ''}: ` +
          `the next call runs at ${iso(earliest)}, not sooner.`,
      );
    return answer(
      'server_floor',
      earliest,
      `The provider permits the next call no sooner than ${iso(earliest)}` +
        `${s.lastEvidence?.retryAfter ? ` (Retry-After ${s.lastEvidence.retryAfter})` : ''}: it runs then.`,
    );
  }

  /**
   * The dispatch activity, watched (runs started with {@link IntentWorkflowOptions.stallAfterMs}):
   * - not started within the stall time: the intent says so (status, details, search attribute) and the dispatch
   *   is queued again to wait for a worker until the deadline — a timeout before start means nothing was sent;
   * - a cancel (signal) cancels the activity, and waits for it to confirm (`WAIT_CANCELLATION_COMPLETED`), so the
   *   answer says whether anything was sent: the server confirms a cancel before start at once, and an activity
   *   still waiting for its send slot ends as cancelled — both `'unsent'` (no attempt, no reservation); an activity
   *   whose request had gone out hears the cancel through its heartbeat, aborts the request and fails as a call of
   *   unknown outcome (src/activities/heartbeat.ts), which {@link dispatchOnce} turns into a reservation; an answer
   *   that arrived first stands;
   * - a cancel through Temporal does the same through the scope, and the run records whether anything was sent.
   */
  async watchedDispatch(input: DispatchInput): Promise<DispatchResult | 'unsent'> {
    const s = this.status;
    const queue = this.queues.actions(this.spec.credential);
    const queuedAt = Date.now();
    let watchStall = true;
    for (;;) {
      // Within the stall time, or it is reported; after that, until the deadline.
      const { dispatch } = this.activities(queue, `attempt ${s.attempts}/${s.maxAttempts}: ${this.target}`, {
        startWithinMs: watchStall ? this.stallAfterMs! : Infinity,
      });
      const scope = new CancellationScope();
      let settled = false;
      condition(() => settled || s.cancelRequested !== undefined).then(
        () => {
          if (!settled) scope.cancel();
        },
        () => undefined, // the run itself was cancelled: the scope is cancelled with it
      );
      try {
        const result = await scope.run(() => dispatch(input));
        s.stalled = undefined;
        return result;
      } catch (err) {
        if (isCancellation(err)) {
          s.stalled = undefined;
          this.dispatchUnsent = true;
          // Through Temporal (the root scope): the run's cancellation handler records it.
          if (CancellationScope.current().consideredCancelled) throw err;
          return 'unsent';
        }
        if (watchStall && isNotStarted(err) && Date.now() < this.deadlineMs) {
          watchStall = false;
          s.stalled = { since: new Date(queuedAt).toISOString(), taskQueue: queue };
          countStalled(this.spec.credential);
          this.publish();
          continue;
        }
        s.stalled = undefined;
        throw err;
      } finally {
        settled = true;
      }
    }
  }
}

/** `LastErrorCode` of an intent whose dispatch no worker has started within the stall time. */
const NO_WORKER_CODE = 'no_worker';

/** Whether an activity failed because no worker started it in time (so nothing was sent). */
function isNotStarted(err: unknown): boolean {
  const cause = (err as { cause?: unknown } | undefined)?.cause;
  return cause instanceof TimeoutFailure && cause.timeoutType === TimeoutType.SCHEDULE_TO_START;
}

function reservation(idempotencyKey: string, attempt: number, reason: string): Reservation {
  return { idempotencyKey, attempt, reason };
}

function summarize(evidence: Evidence, decision: Decision): EvidenceSummary {
  const retryAfter = headerValue(evidence.headers, 'retry-after');
  return {
    ...(evidence.status !== undefined ? { status: evidence.status } : {}),
    ...(evidence.code !== undefined ? { code: evidence.code } : {}),
    ...(evidence.transport !== undefined ? { transport: evidence.transport } : {}),
    sent: evidence.sent,
    decision: decision.kind,
    ...(retryAfter !== undefined ? { retryAfter: retryAfter.slice(0, 64) } : {}),
  };
}

/**
 * Delivers one intent. Returns the outcome when it succeeded; fails with an `ApplicationFailure` of type
 * `IntentFailed`, `IntentExpired` or `IntentCancelled` (details: the outcome) otherwise.
 */
export async function intentWorkflow(spec: IntentSpec, options: IntentWorkflowOptions = {}): Promise<IntentOutcome> {
  if (typeof spec?.idempotencyKey !== 'string')
    // Only a signal-with-start that reached an intent id after its intent was gone starts one without a spec (the
    // client uses it only for an intent it has just seen running, with the start refused for a closed id).
    throw ApplicationFailure.nonRetryable(
      'this workflow was started without an intent (a cancel or "retry now" arrived for an intent that no longer ' +
        'exists); nothing was sent',
      'IntentWithoutSpec',
    );
  const run = new IntentRun(spec, options);
  setHandler(statusQuery, () => run.status);
  setHandler(cancelSignal, ({ reason }) => {
    if (run.status.cancelRequested !== undefined) return;
    run.status.cancelRequested = (reason ?? 'no reason given').slice(0, 500);
    run.abortInFlightDispatch();
  });
  setHandler(retryNowSignal, () => {
    run.retryNowRequests++;
  });
  setHandler(retryNowUpdate, () => {
    const answer = run.retryNowAnswer();
    run.retryNowRequests++;
    return answer;
  });
  setHandler(webhookUpdate, (delivery) => run.onWebhook(delivery), {
    validator: (delivery: WebhookDelivery) => run.validateWebhook(delivery),
  });
  try {
    return await run.run();
  } catch (err) {
    if (isCancellation(err)) {
      // Cancelled through Temporal (UI button, handle.cancel()): record it, then let the cancellation stand.
      await CancellationScope.nonCancellable(async () => {
        const s = run.status;
        // A dispatch the server confirmed cancelled before any worker started it sent nothing: no reservation.
        const unsent = run.dispatchUnsent && s.phase === Phase.dispatching;
        if (unsent) s.attempts--;
        const leftover =
          s.phase === Phase.dispatching && !unsent
            ? 'attempt in flight at cancellation'
            : run.needsInspection
              ? 'outcome unknown at cancellation'
              : undefined;
        s.cancelRequested ??= 'cancelled through Temporal';
        run.recordFinal(Phase.cancelled, s.cancelRequested, leftover);
        return Promise.resolve();
      });
      log.info('intent cancelled through Temporal', { idempotencyKey: spec.idempotencyKey });
    }
    throw err;
  }
}

/** The rejection of a delivery the intent turns away (recognised by the receiver by its `type`). */
function webhookRefusal(verdict: DeliveryRefusal): ApplicationFailure {
  return ApplicationFailure.create({
    type: verdict.kind === 'duplicate' ? WebhookRejection.DeliverySeen : WebhookRejection.IntentEnded,
    message: describeRefusal(verdict),
    details: verdict.kind === 'ended' ? [{ phase: verdict.phase }] : [],
    nonRetryable: true,
  });
}

/** Why a call that was never sent was not sent, for the status line. */
function unsentBecause(code: string | undefined, credential: string): string {
  if (code === 'credential_unavailable') return `no worker has the secret of credential ${credential}`;
  if (code === 'worker_shutdown') return 'the worker shut down before sending';
  return 'provider unreachable';
}
