/**
 * The intent workflow: one durable workflow per idempotency key that delivers an intent's action to the provider
 * until it succeeds, fails for good, runs out of attempts, reaches its deadline, or is cancelled.
 *
 * A thin shell over the pure state machine in `src/policy/intent-machine.ts`: it feeds the machine what happens
 * (the run started, a call answered, a timer fired, a signal or update arrived) with workflow time and the
 * workflow's deterministic `random`, carries out the commands it gets back as Temporal calls, and publishes the
 * status (search attributes, the UI's details). Every decision is the machine's.
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
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities, DispatchInput } from '../activities/index.js';
import { IntentFailureType, WebhookRejection, answerFromFailure, holdFromFailure } from '../failures.js';
import { Phase } from '../intent-status.js';
import type {
  HeldAtSubmit,
  IntentOutcome,
  IntentSpec,
  IntentStatus,
  WebhookAck,
  WebhookDelivery,
} from '../intent-status.js';
import { initialState, step, webhookVerdictOf } from '../policy/intent-machine.js';
import { describeRefusal, isRefusal } from '../policy/webhook-deliveries.js';
import type { IntentCommand, IntentEvent, IntentState } from '../policy/intent-machine.js';
import { failureSentence, retryNowAnswer } from '../policy/intent-text.js';
import type { RetryNowAnswer } from '../policy/intent-text.js';
import { describeTarget } from '../intent-status.js';
import { taskQueues } from '../task-queues.js';
import { countOf, publishStatus } from './intent-visibility.js';

export type { RetryNowAnswer };

/** Room for a call to wait for its send slot inside the activity (the load-control horizon). */
const SLOT_WAIT_MS = 10_000;
/**
 * The dispatch and inspection activities heartbeat every second while they wait (src/activities/heartbeat.ts). A
 * call whose worker has been silent this long is given up: its worker is dead or cut off, so the attempt's outcome
 * is unknown and the next provider call is an inspection — seconds after the death instead of the call's whole
 * start-to-close timeout.
 */
export const HEARTBEAT_TIMEOUT_MS = 5_000;
/** Dispatches not started within this time are reported as stalled (status, UI, `LastErrorCode=no_worker`). */
export const DEFAULT_STALL_AFTER_MS = 60_000;

/** Stops further dispatch and records why. An in-flight or unknown operation becomes a reservation. */
export const cancelSignal = defineSignal<[{ reason?: string }]>('cancel');
/** Ends the current wait early; the next attempt still never starts before the server-permitted time. */
export const retryNowSignal = defineSignal<[]>('retryNow');
/** The intent's current status. */
export const statusQuery = defineQuery<IntentStatus>('status');
/**
 * Ends the current wait early, like {@link retryNowSignal}, and answers when the next attempt will really run and
 * why (the server floor and the credential's gate still apply).
 */
export const retryNowUpdate = defineUpdate<RetryNowAnswer, []>('retryNowAndReport');
/**
 * A verified webhook delivery for this intent's key (sent by the webhook receiver, never by a provider directly).
 * A final state settles an intent that has not ended without another provider call. The validator rejects a
 * delivery id the intent recorded before, and any delivery for an ended intent (`WebhookRejection`): a rejected
 * update writes nothing to history, so a provider that redelivers for days does not grow it.
 */
export const webhookUpdate = defineUpdate<WebhookAck, [WebhookDelivery]>('webhook');

/** What the intent's history holds besides the intent: set only when there is something to say. */
export interface IntentWorkflowOptions {
  /** The client held this intent at submit (the credential's gate was closed): the gate's time and its turn. */
  heldAtSubmit?: HeldAtSubmit;
  /** A dispatch no worker started within this many ms is reported as stalled. @default 60_000 */
  stallAfterMs?: number;
  /** @internal the state carried across continue-as-new */
  carried?: CarriedState;
}

/** What continues across continue-as-new: the machine's state. */
export type CarriedState = IntentState;

/**
 * Delivers one intent. Returns the outcome when it succeeded; fails with an `ApplicationFailure` of type
 * `IntentFailed`, `IntentExpired` or `IntentCancelled` (details: the outcome) otherwise.
 */
export async function intentWorkflow(spec: IntentSpec, options: IntentWorkflowOptions = {}): Promise<IntentOutcome> {
  if (typeof spec?.idempotencyKey !== 'string')
    // Only a signal-with-start that reached an intent id after its intent was gone starts one without a spec.
    throw ApplicationFailure.nonRetryable(
      'this workflow was started without an intent (a cancel or "retry now" arrived for an intent that no longer ' +
        'exists); nothing was sent',
      'IntentWithoutSpec',
    );
  return new IntentShell(spec, options).run();
}

/** The shell: the machine's state, the commands waiting to be carried out, and the call in flight. */
class IntentShell {
  state: IntentState;
  /** The next command of the run's loop (a sleep, a call, or the end). */
  next: IntentCommand | undefined;
  /** Cancels the call in flight. */
  abortCall: (() => void) | undefined;
  readonly queues: ReturnType<typeof taskQueues>;
  readonly target: string;
  readonly stallAfterMs: number;

  constructor(
    readonly spec: IntentSpec,
    options: IntentWorkflowOptions,
  ) {
    this.state = options.carried ?? initialState(spec, options.heldAtSubmit);
    // The activities' queues share the prefix of this workflow's own queue (`<prefix>.workflows`).
    this.queues = taskQueues(workflowInfo().taskQueue.replace(/\.workflows$/, ''));
    this.target = describeTarget(spec.action.method, spec.action.url);
    this.stallAfterMs = options.stallAfterMs ?? DEFAULT_STALL_AFTER_MS;
    setHandler(statusQuery, () => this.state.status);
    setHandler(cancelSignal, ({ reason }) => this.feed({ type: 'cancel', reason: reason ?? 'no reason given' }));
    setHandler(retryNowSignal, () => this.feed({ type: 'retry_now' }));
    setHandler(retryNowUpdate, () => {
      const answer = retryNowAnswer(this.state, Date.now());
      this.feed({ type: 'retry_now' });
      return answer;
    });
    setHandler(
      webhookUpdate,
      (delivery) => {
        // Synchronous: the id is recorded before any other update of this task is validated.
        this.refuse(delivery);
        const verdict = webhookVerdictOf(this.state, delivery);
        const phase = this.state.status.phase;
        this.feed({ type: 'webhook', delivery });
        return { effect: verdict.kind as WebhookAck['effect'], phase };
      },
      { validator: (delivery: WebhookDelivery) => this.refuse(delivery) },
    );
  }

  /** Throws the rejection of a delivery the intent turns away (seen before, or the intent has ended). */
  refuse(delivery: WebhookDelivery): void {
    const verdict = webhookVerdictOf(this.state, delivery);
    if (!isRefusal(verdict)) return;
    throw ApplicationFailure.create({
      type: verdict.kind === 'duplicate' ? WebhookRejection.DeliverySeen : WebhookRejection.IntentEnded,
      message: describeRefusal(verdict),
      details: verdict.kind === 'ended' ? [{ phase: verdict.phase }] : [],
      nonRetryable: true,
    });
  }

  /** Feeds an event to the machine, keeps its commands, publishes what changed. */
  feed(event: IntentEvent): void {
    const result = step({ spec: this.spec, nowMs: Date.now(), random: Math.random }, this.state, event);
    this.state = result.state;
    for (const c of result.counts) countOf(this.spec.credential, c);
    for (const command of result.commands) {
      if (command.kind === 'abort_call') this.abortCall?.();
      else this.next = command;
    }
    publishStatus(this.state, this.spec);
  }

  async run(): Promise<IntentOutcome> {
    try {
      if (this.state.stage === 'new') this.feed({ type: 'started' });
      else this.next = this.resume();
      for (;;) {
        const command = this.next;
        this.next = undefined;
        if (command === undefined) {
          await condition(() => this.next !== undefined);
          continue;
        }
        if (command.kind === 'finish') return await this.finish();
        if (command.kind === 'sleep' && workflowInfo().continueAsNewSuggested) {
          // Between calls only: the next run goes on from the carried state (see resume).
          await condition(allHandlersFinished);
          await continueAsNew<typeof intentWorkflow>(this.spec, {
            carried: this.state,
            ...(this.stallAfterMs !== DEFAULT_STALL_AFTER_MS ? { stallAfterMs: this.stallAfterMs } : {}),
          });
        }
        if (command.kind === 'sleep') await this.sleep(command.untilMs);
        else if (command.kind === 'dispatch') this.feed(await this.dispatch(command.attempt));
        else if (command.kind === 'inspect') this.feed(await this.inspect());
      }
    } catch (err) {
      if (isCancellation(err)) {
        // Cancelled through Temporal (UI button, handle.cancel()): record it, then let the cancellation stand.
        await CancellationScope.nonCancellable(async () => {
          this.feed({ type: 'cancelled_by_temporal', unsent: this.unsent });
          return Promise.resolve();
        });
        log.info('intent cancelled through Temporal', { idempotencyKey: this.spec.idempotencyKey });
      }
      throw err;
    }
  }

  /** A run that continues the previous one goes on where it stopped: its sleep, or the call it was about to make. */
  resume(): IntentCommand | undefined {
    const s = this.state;
    if (s.stage === 'sleeping') return { kind: 'sleep', untilMs: s.dueAtMs ?? Date.now() };
    if (s.stage === 'calling' && s.call) return { kind: s.call.kind, attempt: s.status.attempts };
    if (s.stage === 'done') return { kind: 'finish', phase: s.status.phase as IntentOutcome['phase'] };
    return undefined;
  }

  /** A durable sleep; an event that gives the machine a new command (cancel, retry now, a webhook) ends it. */
  async sleep(untilMs: number): Promise<void> {
    const ms = untilMs - Date.now();
    const woke =
      ms > 0 &&
      (await condition(() => this.next !== undefined, ms, {
        summary: `wait until ${new Date(untilMs).toISOString()}`,
      }));
    if (!woke) this.feed({ type: 'timer_fired' });
  }

  /** Set while the dispatch in flight was cancelled before any worker started it (nothing was sent). */
  unsent = false;

  /**
   * The dispatch activity, watched: not started within the stall time, the intent says so and keeps waiting for a
   * worker until the deadline (a timeout before start means nothing was sent); a cancel cancels it and waits for the
   * activity to confirm (`WAIT_CANCELLATION_COMPLETED`), so the answer says whether anything was sent.
   */
  async dispatch(attempt: number): Promise<IntentEvent> {
    const input: DispatchInput = {
      idempotencyKey: this.spec.idempotencyKey,
      credential: this.spec.credential,
      action: this.spec.action,
      attempt,
      timeoutMs: this.spec.policy.attemptTimeoutMs,
      codes: this.spec.codes,
    };
    const queue = this.queues.actions(this.spec.credential);
    const queuedAt = new Date().toISOString();
    let watchStall = true;
    this.unsent = false;
    for (;;) {
      const { dispatch } = this.activities(
        queue,
        `attempt ${attempt}/${this.spec.policy.maxAttempts}: ${this.target}`,
        {
          startWithinMs: watchStall ? this.stallAfterMs : Infinity,
        },
      );
      try {
        const result = await this.cancellable(() => dispatch(input));
        return { type: 'dispatch_succeeded', result };
      } catch (err) {
        if (isCancellation(err)) {
          this.unsent = true;
          // Through Temporal (the root scope): the run records it.
          if (CancellationScope.current().consideredCancelled) throw err;
          return { type: 'dispatch_unsent' };
        }
        if (watchStall && isNotStarted(err) && Date.now() < Date.parse(this.spec.deadline)) {
          watchStall = false;
          this.feed({ type: 'dispatch_stalled', since: queuedAt, taskQueue: queue });
          continue;
        }
        const hold = holdFromFailure(err);
        if (hold) return { type: 'dispatch_held', hold };
        // Cancelled through Temporal after the request had gone out: the run records the attempt in flight.
        if (CancellationScope.current().consideredCancelled)
          throw new CancelledFailure('cancelled through Temporal while the attempt was in flight');
        return { type: 'dispatch_failed', ...answerFromFailure(err, this.spec.action.method, 'dispatch') };
      }
    }
  }

  /** The read-only inspection activity; a webhook that settles the outcome first (or a cancel) cancels it. */
  async inspect(): Promise<IntentEvent> {
    const inspection = this.spec.inspection!;
    const { inspect } = this.activities(
      this.queues.inspect(this.spec.credential),
      `inspect attempt ${this.state.status.attempts} by idempotency key`,
    );
    try {
      const found = await this.cancellable(() =>
        inspect({
          idempotencyKey: this.spec.idempotencyKey,
          credential: this.spec.credential,
          inspection,
          timeoutMs: this.spec.policy.attemptTimeoutMs,
          codes: this.spec.codes,
        }),
      );
      return { type: 'inspected', answer: { kind: 'found', found } };
    } catch (err) {
      if (isCancellation(err)) {
        if (CancellationScope.current().consideredCancelled) throw err;
        return { type: 'inspected', answer: { kind: 'cancelled' } };
      }
      const hold = holdFromFailure(err);
      if (hold) return { type: 'inspected', answer: { kind: 'held', hold } };
      return { type: 'inspected', answer: { kind: 'failed', ...answerFromFailure(err, 'GET', 'inspect') } };
    }
  }

  /** Runs `call` in a scope that the machine's `abort_call` cancels. */
  async cancellable<T>(call: () => Promise<T>): Promise<T> {
    const scope = new CancellationScope();
    this.abortCall = () => scope.cancel();
    try {
      return await scope.run(call);
    } finally {
      this.abortCall = undefined;
    }
  }

  /**
   * The activities of one provider call: a single attempt (Temporal's retries would stack on retryq's), and not
   * started by the deadline = never started, so no provider call starts after the deadline (invariant 7). 1 ms is
   * the least timeout (zero means "none").
   */
  activities(taskQueue: string, summary: string, watched?: { startWithinMs: number }) {
    const deadlineMs = Date.parse(this.spec.deadline);
    return proxyActivities<Activities>({
      taskQueue,
      // The attempt's own timeout, the answer's way back, and the wait for a send slot from load control.
      startToCloseTimeout: this.spec.policy.attemptTimeoutMs + 10_000 + SLOT_WAIT_MS,
      scheduleToStartTimeout: Math.max(1, Math.min(deadlineMs - Date.now(), watched?.startWithinMs ?? Infinity)),
      // Silent this long = its worker is gone: the call ends (outcome unknown) and the intent moves on in seconds.
      heartbeatTimeout: HEARTBEAT_TIMEOUT_MS,
      retry: { maximumAttempts: 1 },
      // A cancel before start is confirmed by the server at once (nothing sent); one that runs is waited for.
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      summary,
    });
  }

  /** Returns the outcome (success) or throws the intent's failure. */
  async finish(): Promise<IntentOutcome> {
    await condition(allHandlersFinished);
    const s = this.state.status;
    const outcome = { ...s } as IntentOutcome;
    if (s.phase === Phase.succeeded) return outcome;
    const type =
      s.phase === Phase.expired
        ? IntentFailureType.IntentExpired
        : s.phase === Phase.cancelled
          ? IntentFailureType.IntentCancelled
          : IntentFailureType.IntentFailed;
    const failure = ApplicationFailure.create({
      type,
      message: failureSentence(this.state, this.spec),
      nonRetryable: true,
      details: [outcome],
      // An intent that ends unsuccessfully is an outcome, not a crash of retryq: the SDK logs it quietly.
      category: ApplicationFailureCategory.BENIGN,
    });
    // No stack trace: the failure is the intent's outcome, and the UI shows a stack as if the code had crashed.
    failure.stack = '';
    throw failure;
  }
}

/** Whether an activity failed because no worker started it in time (so nothing was sent). */
function isNotStarted(err: unknown): boolean {
  const cause = (err as { cause?: unknown } | undefined)?.cause;
  return cause instanceof TimeoutFailure && cause.timeoutType === TimeoutType.SCHEDULE_TO_START;
}
