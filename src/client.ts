/**
 * What application code imports: submit an intent, read its status, wait for its result, cancel it, list intents.
 *
 * Every intent runs as one workflow whose id is `intent:<idempotencyKey>`. Submitting the same key again with
 * the same payload attaches to that workflow (running or finished) and never starts a second one; the same key
 * with a different payload throws {@link IdempotencyConflictError}. A finished intent's key never starts a new run.
 *
 * @example
 * ```ts
 * import { Client, Connection } from '@temporalio/client';
 * import { RetryqClient } from 'retryq';
 *
 * const client = new Client({ connection: await Connection.connect({ address: 'localhost:7233' }) });
 * const retryq = new RetryqClient({ client });
 * const { key } = await retryq.submit({
 *   idempotencyKey: 'order-1042-charge',
 *   credential: 'acme-prod',
 *   action: { method: 'POST', url: 'https://api.example.com/v1/charges', body: { amount: 1200, currency: 'eur' } },
 *   inspection: { url: 'https://api.example.com/v1/operations/{idempotencyKey}' },
 *   deadline: '2h',
 * });
 * console.log((await retryq.status(key)).phase); // 'dispatching', 'waiting', …
 * const outcome = await retryq.result(key); // phase 'succeeded' | 'failed' | 'expired' | 'cancelled'
 * ```
 */
import { createHash } from 'node:crypto';
import {
  WorkflowFailedError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';
import type { Client, WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import {
  ApplicationFailure,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
} from '@temporalio/common';
import type { SignalDefinition } from '@temporalio/common';
import { canonicalJson } from './canonical-json.js';
import { loadConfig } from './config.js';
import { DURATION_HINT, parseDurationMs } from './duration.js';
import {
  ConfigError,
  CredentialNotServedError,
  IdempotencyConflictError,
  IntentAlreadyEndedError,
  IntentNotFoundError,
  IntentValidationError,
  problemsFromZod,
} from './errors.js';
import type { Problem } from './errors.js';
import { IntentFailureType } from './failures.js';
import { deadlineDefaults, defaultPolicy, describeTarget, finalPhases, intentInputSchema } from './intent.js';
import { defaultIntentLimits, limitProblems, sizeProblems } from './intent-limits.js';
import type { IntentLimits } from './intent-limits.js';
import { credentialServing, servedCredentials } from './served-credentials.js';
import { translateTemporalError } from './temporal/service-errors.js';
import { inRetryqWords } from './validation-words.js';
import type { IntentInput, IntentOutcome, IntentSpec, IntentStatus, Phase } from './intent.js';
import type { CodeTable } from './policy/index.js';
import { credentialKey, nextAttemptAtKey, retryAttemptKey, retryPhaseKey } from './search-attributes.js';
import { taskQueues } from './task-queues.js';
import { workflowIdOf } from './workflow-ids.js';
import { connectClient } from './temporal/connect.js';
import { SubmitGateViews, entityGateLookup } from './load-control/submit-gates.js';
import { heldAtSubmitStatus } from './intent-status.js';
import type { HeldAtSubmit } from './intent-status.js';
import {
  DEFAULT_STALL_AFTER_MS,
  cancelSignal,
  intentWorkflow,
  retryNowSignal,
  retryNowUpdate,
  statusQuery,
} from './workflows/index.js';
import type { RetryNowAnswer } from './workflows/index.js';

export { workflowIdOf } from './workflow-ids.js';

export interface RetryqClientOptions {
  /** A Temporal client. */
  client: Client;
  /** @default 'retryq' */
  taskQueuePrefix?: string;
  /** Deadline of an intent that names none, in ms. @default 86_400_000 (24 h) */
  defaultDeadlineMs?: number;
  /** Latest deadline an intent may ask for, in ms from now. @default 2_592_000_000 (30 days) */
  maxDeadlineMs?: number;
  /** Extra structured error codes applied to every intent (an intent's own `codes` win). */
  codes?: CodeTable;
  /** @default Date.now */
  clock?: () => number;
  /** Size limits of an intent's action, in bytes (see docs/configuration.md). @default {@link defaultIntentLimits} */
  limits?: Partial<IntentLimits>;
  /**
   * Refuse an intent whose credential no live worker serves (the server lists no poller of
   * `<prefix>.actions.<credential>`), with {@link CredentialNotServedError}. Turn off to queue intents for workers
   * deployed later; one submit can also say `{ requireServedCredential: false }`.
   * @default true
   */
  requireServedCredential?: boolean;
  /** Credential ids to name as served in that error, besides those whose load control is active. @default [] */
  knownCredentials?: readonly string[];
  /**
   * A dispatch no worker has started within this many ms is reported as stalled: in the status (`stalled`), the
   * UI's details and `LastErrorCode="no_worker"`. @default 60_000 (1 min)
   */
  stalledDispatchAfterMs?: number;
  /**
   * Hold an intent submitted while its credential's dispatch gate is closed after a rate-limit answer on the Temporal
   * server itself: it starts with a start delay until its turn after the gate's time (its place among the held
   * intents, at the credential's budget) and runs no workflow task before then. Without it such an intent runs one
   * workflow task to learn the gate is closed and sleeps in it, which costs several times as much server and worker
   * work. The client learns the gate from the credential's entity (its memo, read with a describe that the server
   * answers alone, at most once per credential per {@link RetryqClientOptions.gateFreshMs}); only a credential's
   * first submit waits for that answer (at most 1 s).
   * See docs/load-control.md, "Held at submit". @default true
   */
  holdAtSubmit?: boolean;
  /** How old the client's knowledge of a credential's gate may be before a submit asks again. @default 1_000 */
  gateFreshMs?: number;
  /**
   * Most intents held at submit that this client lets the server start per second behind one closure of a gate
   * (their first workflow tasks go to any worker, outside each worker's `RETRYQ_WAKE_UPS_PER_SECOND`): set it to what
   * your workers complete per second together. `0`: the credential's budget only. @default 10
   */
  heldStartsPerSecond?: number;
}

/** Options of one {@link RetryqClient.submit}. */
export interface SubmitOptions {
  /** Overrides {@link RetryqClientOptions.requireServedCredential} for this submit. */
  requireServedCredential?: boolean;
}

export interface Submitted {
  key: string;
  workflowId: string;
  /** `true` when an intent with this key and payload already existed and nothing new was started. */
  attached: boolean;
  /**
   * Set when this submit started the intent held (its credential's gate is closed after a rate-limit answer): the
   * server starts it at `startsAt`, its turn after the gate opens at `until` (ISO). Its phase is `waiting` meanwhile.
   */
  heldAtSubmit?: { until: string; startsAt: string; why?: string | undefined };
}

/** What {@link RetryqClient.retryNow} did. */
export interface RetryNowReport extends Omit<RetryNowAnswer, 'why' | 'phase'> {
  key: string;
  /** The intent's phase when asked; `undefined` when it did not answer. */
  phase: RetryNowAnswer['phase'] | undefined;
  /** {@link RetryNowAnswer.why}, or `requested` when the intent did not answer. */
  why: RetryNowAnswer['why'] | 'requested';
}

export interface IntentListEntry {
  key: string;
  workflowId: string;
  /** The `RetryPhase` search attribute (a {@link Phase}). */
  phase: string | undefined;
  attempts: number | undefined;
  credential: string | undefined;
  startTime: Date;
  closeTime: Date | undefined;
  temporalStatus: string;
}

/** sha256 over the canonical JSON of what makes an operation itself: method, URL, body and credential. */
export function fingerprintOf(spec: Pick<IntentSpec, 'action' | 'credential'>): string {
  const canonical = canonicalJson({
    method: spec.action.method,
    url: spec.action.url,
    body: spec.action.body ?? null,
    credential: spec.credential,
  });
  return createHash('sha256').update(canonical).digest('hex');
}

/** Options of {@link RetryqClient.connect}: everything but the client, which it builds from the environment. */
export interface RetryqConnectOptions extends Omit<RetryqClientOptions, 'client' | 'taskQueuePrefix'> {
  /** Where to read the configuration from. @default process.env */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Submits and follows intents. */
export class RetryqClient {
  /**
   * Connects to the Temporal server the environment configures, the same way the workers do (`TEMPORAL_ADDRESS`,
   * `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS*`, `TEMPORAL_PROFILE`; without an address, the
   * embedded dev server of `retryq dev` on `RETRYQ_DEV_IP:RETRYQ_DEV_PORT`, `127.0.0.1:7233`), with the workers'
   * `RETRYQ_TASK_QUEUE_PREFIX` and deadline limits. Throws `ConfigError` for bad configuration and
   * `TemporalUnreachableError` when the server cannot be reached. Call {@link close} when done.
   */
  static async connect(options: RetryqConnectOptions = {}): Promise<RetryqClient> {
    const { env, ...rest } = options;
    const config = loadConfig(env ?? process.env);
    const { client, close } = await connectClient(config.temporal);
    const rq = new RetryqClient({
      defaultDeadlineMs: config.intents.defaultDeadlineMs,
      maxDeadlineMs: config.intents.maxDeadlineMs,
      limits: config.intents.limits,
      stalledDispatchAfterMs: config.intents.stalledDispatchAfterMs,
      knownCredentials: config.credentials.map((c) => c.id),
      ...rest,
      client,
      taskQueuePrefix: config.taskQueuePrefix,
    });
    rq.closeConnection = close;
    return rq;
  }

  /** Credentials recently found served (ms until which the answer holds): one DescribeTaskQueue per half minute. */
  private readonly servedUntil = new Map<string, number>();

  readonly client: Client;
  private closeConnection: (() => Promise<void>) | undefined;
  private readonly queues: ReturnType<typeof taskQueues>;
  private readonly prefix: string;
  private readonly defaultDeadlineMs: number;
  private readonly maxDeadlineMs: number;
  private readonly codes: CodeTable | undefined;
  private readonly clock: () => number;
  private readonly limits: IntentLimits;
  private readonly requireServed: boolean;
  private readonly knownCredentials: readonly string[];
  private readonly stallAfterMs: number;
  /** What submit knows of each credential's dispatch gate (undefined: holding at submit is off). */
  private readonly gateViews: SubmitGateViews | undefined;

  constructor(options: RetryqClientOptions) {
    const bad = limitProblems(options.limits ?? {});
    if (bad.length > 0)
      throw new ConfigError(
        bad.map((b) => ({ path: `limits.${b.key}`, message: b.message, received: options.limits?.[b.key] })),
      );
    this.limits = { ...defaultIntentLimits, ...options.limits };
    this.requireServed = options.requireServedCredential ?? true;
    this.knownCredentials = options.knownCredentials ?? [];
    this.stallAfterMs = options.stalledDispatchAfterMs ?? DEFAULT_STALL_AFTER_MS;
    this.client = options.client;
    this.prefix = options.taskQueuePrefix ?? 'retryq';
    this.queues = taskQueues(this.prefix);
    this.defaultDeadlineMs = options.defaultDeadlineMs ?? deadlineDefaults.defaultDeadlineMs;
    this.maxDeadlineMs = options.maxDeadlineMs ?? deadlineDefaults.maxDeadlineMs;
    this.codes = options.codes;
    this.clock = options.clock ?? Date.now;
    if (options.heldStartsPerSecond !== undefined && !(options.heldStartsPerSecond >= 0))
      throw new ConfigError([
        {
          path: 'heldStartsPerSecond',
          message: 'must be a number of intents per second, 0 (the budget only) or more',
          received: options.heldStartsPerSecond,
        },
      ]);
    if (options.gateFreshMs !== undefined && !(options.gateFreshMs >= 0))
      throw new ConfigError([
        { path: 'gateFreshMs', message: 'must be a number of milliseconds, 0 or more', received: options.gateFreshMs },
      ]);
    this.gateViews =
      options.holdAtSubmit === false
        ? undefined
        : new SubmitGateViews({
            lookup: entityGateLookup(this.client, this.prefix),
            clock: this.clock,
            ...(options.gateFreshMs !== undefined ? { freshMs: options.gateFreshMs } : {}),
            ...(options.heldStartsPerSecond !== undefined ? { startsPerSecond: options.heldStartsPerSecond } : {}),
          });
  }

  /**
   * Closes the connection {@link RetryqClient.connect} opened. A client built around your own `Client` leaves its
   * connection alone (close it yourself). Idempotent.
   */
  async close(): Promise<void> {
    const close = this.closeConnection;
    this.closeConnection = undefined;
    await close?.();
  }

  /**
   * Validates an intent and turns it into the workflow's input. Throws {@link IntentValidationError} listing every
   * problem; nothing is started.
   */
  prepare(input: IntentInput): IntentSpec {
    // Sizes first: an oversize body is reported without walking it, and nothing reaches Temporal.
    const oversize = sizeProblems(input, this.limits);
    if (oversize.length > 0) throw new IntentValidationError(oversize.map(({ path, message }) => ({ path, message })));
    const parsed = intentInputSchema.safeParse(input, { error: inRetryqWords });
    if (!parsed.success) throw new IntentValidationError(problemsFromZod(parsed.error));
    const intent = parsed.data;
    const now = this.clock();
    const problems: Problem[] = [];
    let deadlineMs = now + this.defaultDeadlineMs;
    const d = intent.deadline;
    if (d instanceof Date) deadlineMs = d.getTime();
    else if (typeof d === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(d)) deadlineMs = Date.parse(d);
    else if (d !== undefined) {
      const ms = parseDurationMs(d);
      if (ms === undefined)
        problems.push({ path: 'deadline', message: `must be an ISO 8601 time, a Date, or ${DURATION_HINT}` });
      else deadlineMs = now + ms;
    }
    if (!Number.isFinite(deadlineMs)) problems.push({ path: 'deadline', message: 'is not a valid time' });
    else if (deadlineMs <= now) problems.push({ path: 'deadline', message: 'must lie in the future' });
    else if (deadlineMs > now + this.maxDeadlineMs)
      problems.push({ path: 'deadline', message: `must lie at most ${this.maxDeadlineMs / 86_400_000} days ahead` });
    const p = intent.policy ?? {};
    const policy = {
      maxAttempts: p.maxAttempts ?? defaultPolicy.maxAttempts,
      baseDelayMs: p.baseDelay ?? defaultPolicy.baseDelayMs,
      maxBackoffMs: p.maxBackoff ?? defaultPolicy.maxBackoffMs,
      multiplier: p.multiplier ?? defaultPolicy.multiplier,
      jitter: p.jitter ?? defaultPolicy.jitter,
      attemptTimeoutMs: p.attemptTimeout ?? defaultPolicy.attemptTimeoutMs,
    };
    if (policy.baseDelayMs < 1) problems.push({ path: 'policy.baseDelay', message: 'must be at least 1 ms' });
    if (policy.attemptTimeoutMs < 100)
      problems.push({ path: 'policy.attemptTimeout', message: 'must be at least 100 ms' });
    if (policy.maxBackoffMs < policy.baseDelayMs)
      problems.push({ path: 'policy.maxBackoff', message: 'must be at least policy.baseDelay' });
    if (problems.length > 0) throw new IntentValidationError(problems);
    const codes = this.codes || intent.codes ? { ...(this.codes ?? {}), ...(intent.codes ?? {}) } : undefined;
    const spec: IntentSpec = {
      idempotencyKey: intent.idempotencyKey,
      credential: intent.credential,
      action: intent.action,
      deadline: new Date(deadlineMs).toISOString(),
      submittedAt: new Date(now).toISOString(),
      policy,
      inspection: intent.inspection,
      codes,
      fingerprint: '',
    };
    spec.fingerprint = fingerprintOf(spec);
    return spec;
  }

  /**
   * Starts the intent's workflow, or attaches to the existing one for the same key and payload.
   * @throws IntentValidationError on bad input; IdempotencyConflictError when the key is used with another payload.
   */
  async submit(input: IntentInput, options: SubmitOptions = {}): Promise<Submitted> {
    const spec = this.prepare(input);
    const workflowId = workflowIdOf(spec.idempotencyKey);
    const target = describeTarget(spec.action.method, spec.action.url);
    if (options.requireServedCredential ?? this.requireServed) await this.assertServed(spec.credential);
    const hold = await this.gateViews?.holdFor(spec.credential);
    // Held: the server starts it at its turn. A turn past the deadline starts it at once, to end `expired` there.
    const delayMs = hold && hold.wakeAtMs <= new Date(spec.deadline).getTime() ? hold.wakeAtMs - this.clock() : 0;
    try {
      // One round trip in the common case: the start either creates the workflow or fails because the key is taken
      // (running: the conflict policy FAIL; finished: REJECT_DUPLICATE). Only then is the existing one described.
      await this.client.workflow.start(intentWorkflow, {
        workflowId,
        taskQueue: this.queues.workflows,
        // The intent, and only what the run must know besides: a hold at submit, a stall time of its own.
        args:
          hold || this.stallAfterMs !== DEFAULT_STALL_AFTER_MS
            ? [
                spec,
                {
                  ...(hold ? { heldAtSubmit: hold } : {}),
                  ...(this.stallAfterMs !== DEFAULT_STALL_AFTER_MS ? { stallAfterMs: this.stallAfterMs } : {}),
                },
              ]
            : [spec],
        workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
        ...(delayMs > 0 ? { startDelay: delayMs } : {}),
        memo: {
          fingerprint: spec.fingerprint,
          target,
          credential: spec.credential,
          ...(hold ? { [HELD_AT_SUBMIT_MEMO]: heldMemo(spec, hold) } : {}),
        },
        typedSearchAttributes: [
          { key: retryPhaseKey, value: hold ? 'waiting' : 'scheduled' },
          { key: retryAttemptKey, value: 0 },
          { key: credentialKey, value: spec.credential },
          ...(hold ? [{ key: nextAttemptAtKey, value: new Date(hold.wakeAtMs) }] : []),
        ],
        staticSummary: `${target} · key ${spec.idempotencyKey} · credential ${spec.credential}`,
        staticDetails:
          `**Intent** \`${spec.idempotencyKey}\`: ${target} with credential \`${spec.credential}\`.\n\n` +
          `Deadline ${spec.deadline}; at most ${spec.policy.maxAttempts} attempts; ` +
          `backoff ${spec.policy.baseDelayMs} ms ×${spec.policy.multiplier} up to ${spec.policy.maxBackoffMs} ms ` +
          `(±${Math.round(spec.policy.jitter * 100)}%), never earlier than the provider's Retry-After.` +
          (hold
            ? `\n\nHeld at submit: credential \`${spec.credential}\` is rate limited until ` +
              `${new Date(hold.untilMs).toISOString()}${hold.why ? ` (${hold.why})` : ''}; ` +
              `the server starts this intent at its turn, ${new Date(hold.wakeAtMs).toISOString()}.`
            : ''),
      });
      return {
        key: spec.idempotencyKey,
        workflowId,
        attached: false,
        ...(hold
          ? {
              heldAtSubmit: {
                until: new Date(hold.untilMs).toISOString(),
                // A turn past the deadline: started at once, to end `expired`.
                startsAt: new Date(delayMs > 0 ? hold.wakeAtMs : this.clock()).toISOString(),
                ...(hold.why !== undefined ? { why: hold.why } : {}),
              },
            }
          : {}),
      };
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError))
        throw translateTemporalError(err, `start the workflow of intent "${spec.idempotencyKey}"`);
    }
    // The key is taken: attach when the payload is the same (invariant 1), refuse otherwise.
    const desc = await this.client.workflow
      .getHandle(workflowId)
      .describe()
      .catch((err: unknown) => {
        throw translateTemporalError(err, `describe intent "${spec.idempotencyKey}"`);
      });
    const existing = typeof desc.memo?.['fingerprint'] === 'string' ? desc.memo['fingerprint'] : undefined;
    if (existing !== spec.fingerprint)
      throw new IdempotencyConflictError(spec.idempotencyKey, existing, spec.fingerprint);
    return { key: spec.idempotencyKey, workflowId, attached: true };
  }

  /**
   * Throws {@link CredentialNotServedError} when no live worker polls the credential's dispatch queue. A worker that
   * has just started may not have polled yet: a "no" is asked once more, half a second later, before it stands.
   */
  private async assertServed(credential: string): Promise<void> {
    if ((this.servedUntil.get(credential) ?? 0) > Date.now()) return;
    const look = () =>
      credentialServing(this.client, this.prefix, credential).catch((err: unknown) => {
        throw translateTemporalError(err, `look up the workers of credential "${credential}"`);
      });
    let serving = await look();
    if (serving.served === false) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      serving = await look();
    }
    if (serving.served === false) {
      const served = await servedCredentials(this.client, this.prefix, this.knownCredentials);
      if (!served.includes(credential))
        throw new CredentialNotServedError(credential, this.queues.actions(credential), served);
    }
    if (serving.served !== undefined) this.servedUntil.set(credential, Date.now() + 30_000);
  }

  private handle(key: string): WorkflowHandle<typeof intentWorkflow> {
    return this.client.workflow.getHandle<typeof intentWorkflow>(workflowIdOf(key));
  }

  /** The intent's status: live from the workflow while it runs, from its outcome once it ended. */
  async status(key: string): Promise<IntentStatus> {
    const handle = this.handle(key);
    try {
      const desc = await handle.describe();
      if (desc.status.name === 'RUNNING') {
        // Held at submit and not started yet: no workflow task could answer (a query waits for the hold to end, or
        // is refused), and nothing has happened since the start recorded the hold.
        const held = heldFromMemo(desc.memo);
        if (held && stillHeld(desc, held)) return statusWhileHeld(key, held);
        return await handle.query(statusQuery);
      }
      if (desc.status.name === 'TERMINATED' || desc.status.name === 'TIMED_OUT')
        // Ended by Temporal, not by retryq: the last recorded status, marked failed.
        return {
          ...(await this.lastKnown(key, 'failed')),
          finalReason: `the workflow was ${desc.status.name.toLowerCase().replace('_', ' ')} in Temporal`,
        };
      return await this.result(key);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw new IntentNotFoundError(key);
      throw translateTemporalError(err, `read the status of intent "${key}"`);
    }
  }

  /** Waits for the final outcome: succeeded, failed, expired or cancelled. */
  async result(key: string): Promise<IntentOutcome> {
    try {
      return await this.handle(key).result();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw new IntentNotFoundError(key);
      if (err instanceof WorkflowFailedError) {
        const cause = err.cause;
        if (
          cause instanceof ApplicationFailure &&
          Object.values(IntentFailureType).includes(cause.type as IntentFailureType) &&
          cause.details?.[0]
        )
          return cause.details[0] as IntentOutcome;
        if (cause && 'name' in cause && cause.name === 'CancelledFailure') {
          // Cancelled through Temporal: the last status is what the workflow recorded before ending.
          return { ...(await this.lastKnown(key, 'cancelled')), phase: 'cancelled' };
        }
      }
      throw translateTemporalError(err, `wait for the outcome of intent "${key}"`);
    }
  }

  /** The status the workflow last recorded (a query replays it), or what the search attributes still say. */
  private async lastKnown(key: string, phase: Phase): Promise<IntentStatus> {
    try {
      return { ...(await this.handle(key).query(statusQuery)), phase };
    } catch {
      const desc = await this.handle(key).describe();
      return {
        idempotencyKey: key,
        credential: typeof desc.memo?.['credential'] === 'string' ? desc.memo['credential'] : '',
        phase,
        attempts: Number(desc.typedSearchAttributes.get(retryAttemptKey) ?? 0),
        maxAttempts: 0,
        inspections: 0,
        deadline: '',
        attemptLog: [],
        attemptLogDropped: 0,
      };
    }
  }

  /**
   * Stops further dispatch and records the reason. A dispatch whose request has not gone out yet (no worker has
   * started it, or it waits for a send slot) is cancelled with it and the intent ends `cancelled` at once: nothing
   * sent, no attempt used, no reservation. An attempt whose request is out is aborted; it may have reached the
   * provider, so the intent ends `cancelled` with a reservation naming the attempt.
   */
  async cancel(key: string, reason: string): Promise<void> {
    try {
      if (await this.wakeIfHeld(key, cancelSignal, [{ reason }])) return;
      await this.handle(key).signal(cancelSignal, { reason });
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw await this.notRunning(key);
      throw translateTemporalError(err, `cancel intent "${key}"`);
    }
  }

  /**
   * Ends the current wait early and says when the next attempt will really run and why: never before the
   * provider's Retry-After or while the credential's gate is closed. Intents started before this answer existed
   * get the request all the same, answered with `why: 'requested'`.
   * @throws IntentNotFoundError, or IntentAlreadyEndedError (a kind of it) when the intent has ended.
   */
  async retryNow(key: string): Promise<RetryNowReport> {
    try {
      // Held at submit: end the server's hold first (an update would wait for a workflow task until it ends).
      await this.wakeIfHeld(key, retryNowSignal, []);
      const answer = await this.client.connection.withDeadline(Date.now() + 10_000, () =>
        this.handle(key).executeUpdate(retryNowUpdate),
      );
      return { key, ...answer };
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw await this.notRunning(key);
      // An intent started before the update existed, or no workflow worker answered in time: the signal is recorded.
      if (!(err instanceof WorkflowUpdateFailedError || err instanceof WorkflowUpdateRPCTimeoutOrCancelledError))
        throw translateTemporalError(err, `ask intent "${key}" to retry now`);
    }
    try {
      await this.handle(key).signal(retryNowSignal);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw await this.notRunning(key);
      throw translateTemporalError(err, `ask intent "${key}" to retry now`);
    }
    return {
      key,
      phase: undefined,
      nextAttemptAt: null,
      why: 'requested',
      message:
        'Retry requested; the intent did not say when it runs (it was started by an earlier retryq, or no workflow ' +
        'worker answered within 10 s). It never runs before the server permits.',
    };
  }

  /**
   * For an intent held at submit (its memo says so) that still runs: delivers the signal with signal-with-start,
   * which ends the server's start delay, where a plain signal would wait with the intent for its turn. `false` for any
   * other intent (the caller signals it as usual). The start is refused for a closed id and attaches to a running one,
   * so it never starts a run; the placeholder arguments are never read.
   */
  private async wakeIfHeld(
    key: string,
    signal: SignalDefinition<[{ reason?: string }]> | SignalDefinition<[]>,
    signalArgs: [{ reason?: string }] | [],
  ): Promise<boolean> {
    const desc = await this.handle(key).describe();
    if (desc.status.name !== 'RUNNING' || !heldFromMemo(desc.memo)) return false;
    try {
      await this.client.workflow.signalWithStart(intentWorkflow, {
        workflowId: workflowIdOf(key),
        taskQueue: this.queues.workflows,
        args: [undefined as unknown as IntentSpec],
        signal: signal.name,
        signalArgs: signalArgs as unknown[],
        workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
        workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      });
    } catch (err) {
      // It ended between the two calls.
      if (err instanceof WorkflowExecutionAlreadyStartedError) throw new WorkflowNotFoundError('ended', key, undefined);
      throw err;
    }
    return true;
  }

  /** Why a signal found no running workflow: the intent ended, or never existed. */
  private async notRunning(key: string): Promise<IntentNotFoundError> {
    try {
      const desc = await this.handle(key).describe();
      return new IntentAlreadyEndedError(key, desc.typedSearchAttributes.get(retryPhaseKey));
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return new IntentNotFoundError(key);
      throw err;
    }
  }

  /** Lists intents, newest first, filtered by phase and credential through the search attributes. */
  async list(filter: { phase?: string; credential?: string; limit?: number } = {}): Promise<IntentListEntry[]> {
    const clauses = [`WorkflowType = "intentWorkflow"`, `TaskQueue = "${this.queues.workflows}"`];
    const quote = (v: string) => `"${v.replace(/["\\]/g, '')}"`;
    if (filter.phase) clauses.push(`RetryPhase = ${quote(filter.phase)}`);
    if (filter.credential) clauses.push(`Credential = ${quote(filter.credential)}`);
    const out: IntentListEntry[] = [];
    const limit = filter.limit ?? 100;
    // A page no larger than asked for (the server's default page is 1,000 rows, fetched and decoded in full).
    const pageSize = Math.max(1, Math.min(limit, 1000));
    try {
      for await (const wf of this.client.workflow.list({ query: clauses.join(' AND '), pageSize })) {
        const phase = wf.typedSearchAttributes.get(retryPhaseKey);
        out.push({
          key: wf.workflowId.replace(/^intent:/, ''),
          workflowId: wf.workflowId,
          phase,
          attempts: wf.typedSearchAttributes.get(retryAttemptKey),
          credential: wf.typedSearchAttributes.get(credentialKey),
          startTime: wf.startTime,
          closeTime: wf.closeTime,
          temporalStatus: wf.status.name,
        });
        if (out.length >= limit) break;
      }
    } catch (err) {
      throw translateTemporalError(err, 'list intents');
    }
    return out;
  }
}

/** The memo key of an intent held at submit. */
const HELD_AT_SUBMIT_MEMO = 'heldAtSubmit';

/** What an intent held at submit keeps in its memo: the hold, and what its status needs before any workflow task. */
interface HeldMemo extends HeldAtSubmit {
  credential: string;
  deadline: string;
  maxAttempts: number;
}

function heldMemo(spec: IntentSpec, hold: HeldAtSubmit): HeldMemo {
  return { ...hold, credential: spec.credential, deadline: spec.deadline, maxAttempts: spec.policy.maxAttempts };
}

function heldFromMemo(memo: Record<string, unknown> | undefined): HeldMemo | undefined {
  const held = memo?.[HELD_AT_SUBMIT_MEMO] as Partial<HeldMemo> | undefined;
  if (
    typeof held?.untilMs !== 'number' ||
    typeof held.wakeAtMs !== 'number' ||
    typeof held.credential !== 'string' ||
    typeof held.deadline !== 'string' ||
    typeof held.maxAttempts !== 'number'
  )
    return undefined;
  return held as HeldMemo;
}

/**
 * The server still holds an intent held at submit: no workflow task is pending, and its search attributes are still
 * what its start set (its first workflow task changes them: dispatching, a new wait, or an end). Should that task
 * have left them as they were (a "retry now" that waits for the gate's time, which is its turn), the hold's status is
 * still what it says.
 */
function stillHeld(desc: WorkflowExecutionDescription, held: HeldMemo): boolean {
  const sa = desc.typedSearchAttributes;
  return (
    !desc.raw.pendingWorkflowTask &&
    sa.get(retryPhaseKey) === 'waiting' &&
    (sa.get(retryAttemptKey) ?? 0) === 0 &&
    sa.get(nextAttemptAtKey)?.getTime() === held.wakeAtMs
  );
}

/** The status of an intent the server still holds: nothing has run, so nothing but the hold to tell. */
function statusWhileHeld(key: string, held: HeldMemo): IntentStatus {
  return {
    idempotencyKey: key,
    credential: held.credential,
    attempts: 0,
    maxAttempts: held.maxAttempts,
    inspections: 0,
    deadline: held.deadline,
    attemptLog: [],
    attemptLogDropped: 0,
    ...heldAtSubmitStatus(held.credential, held),
  };
}

/** True for the phases in which an intent has ended. */
export function isFinal(phase: string): boolean {
  return finalPhases.has(phase as Phase);
}
