/**
 * The intent's model as the workflow sees it: the phase vocabulary, the workflow's input ({@link IntentSpec}) with
 * its {@link Action} and {@link InspectionSpec}, and the shapes of an intent's status and final outcome.
 *
 * Workflow-safe and deliberately light: no zod, no schema building, no tables at module load. The SDK loads the
 * workflow's modules once per cached workflow, so whatever this module builds at load time is paid per sleeping
 * intent. The zod schemas that validate what application code submits live in `intent.ts`, which re-exports
 * everything here.
 *
 * @example
 * ```ts
 * import { Phase, finalPhases } from './intent-status.js';
 * finalPhases.has(Phase.waiting); // false
 * ```
 */
import type { CodeRule } from './policy/code-table.js';

/** Where an intent is. Final phases: `succeeded`, `failed`, `expired`, `cancelled`. */
export const Phase = {
  scheduled: 'scheduled',
  dispatching: 'dispatching',
  waiting: 'waiting',
  inspecting: 'inspecting',
  succeeded: 'succeeded',
  failed: 'failed',
  expired: 'expired',
  cancelled: 'cancelled',
} as const;
export type Phase = (typeof Phase)[keyof typeof Phase];
export const finalPhases: ReadonlySet<Phase> = new Set([Phase.succeeded, Phase.failed, Phase.expired, Phase.cancelled]);

/** A JSON value (request bodies, provider results). */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** The HTTP methods an action may use. */
export const httpMethods = ['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpMethod = (typeof httpMethods)[number];

/** The HTTP request an intent performs, as validated by `actionSchema` (intent.ts). */
export interface Action {
  method: HttpMethod;
  url: string;
  /** Extra request headers (no secrets, no `Idempotency-Key`: retryq sets it). */
  headers?: Record<string, string> | undefined;
  /** JSON body, sent with `Content-Type: application/json`. */
  body?: JsonValue | undefined;
}

/**
 * How to look the saved operation up at the provider by idempotency key (read-only), as validated by
 * `inspectionSchema` (intent.ts), defaults filled in.
 */
export interface InspectionSpec {
  /** URL template; `{idempotencyKey}` is replaced by the URL-encoded key. */
  url: string;
  /** Field of the JSON response holding the operation's state. */
  stateField: string;
  /** State values meaning "done". */
  succeeded: string[];
  /** State values meaning "done and failed". */
  failed: string[];
  /** Field holding the operation's result. */
  resultField: string;
  /** Field holding a failed operation's error `{ status?, code?, message? }`. */
  errorField: string;
}

/** The full retry policy of one intent (ms inside). */
export interface IntentPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxBackoffMs: number;
  multiplier: number;
  jitter: number;
  attemptTimeoutMs: number;
}

/** What the intent workflow receives: the validated intent with absolute deadline and full policy. */
export interface IntentSpec {
  idempotencyKey: string;
  credential: string;
  action: Action;
  /** ISO 8601. */
  deadline: string;
  /** ISO 8601, when the intent was submitted. */
  submittedAt: string;
  policy: IntentPolicy;
  inspection?: InspectionSpec | undefined;
  codes?: Record<string, CodeRule> | undefined;
  /** sha256 of the payload (method, URL, body, credential): same key + other fingerprint = conflict. */
  fingerprint: string;
}

/** What one attempt (or inspection) told us, for the status and the attempt log. */
export interface EvidenceSummary {
  /** HTTP status, when a response arrived. */
  status?: number | undefined;
  /** Provider's structured error code. */
  code?: string | undefined;
  /** Transport failure, when no response arrived. */
  transport?: string | undefined;
  /** May the request have reached the provider? */
  sent: 'no' | 'yes' | 'unknown';
  /** The decision's kind. */
  decision: string;
  /** Raw Retry-After, when the server sent one. */
  retryAfter?: string | undefined;
}

/** The operation's state as a provider's webhook reports it. */
export type WebhookState = 'succeeded' | 'failed' | 'pending';

/**
 * One verified webhook delivery, mapped from the provider's event: what the receiver signals to `intent:<key>`.
 * Only mapped fields travel (never the raw body or its headers), so no signature or secret reaches history.
 */
export interface WebhookDelivery {
  /** The configured source it came through (`POST /webhooks/<source>`). */
  source: string;
  /** The provider's delivery id: the same on every redelivery of one event. */
  deliveryId: string;
  /** The provider's event type, when the mapping reads one. */
  eventType?: string | undefined;
  state: WebhookState;
  /** The provider's own word for the state (`completed`, `processing`, …), when the mapping read one. */
  providerState?: string | undefined;
  /** The operation's result (`succeeded`), when the mapping names one. */
  result?: JsonValue | undefined;
  /** The recorded error (`failed`), when the mapping names one. */
  error?: { status?: number | undefined; code?: string | undefined; message?: string | undefined } | undefined;
  /** When the receiver verified it (ISO), for people; the workflow keeps its own time. */
  receivedAt: string;
}

/**
 * What webhook deliveries did to an intent. Redeliveries of a recorded delivery id, and deliveries for an ended
 * intent, are turned away before anything is recorded: the receiver counts them (`duplicate`, `late`), not the intent.
 */
export interface WebhookCounts {
  /** Distinct deliveries recorded. */
  received: number;
  /** Of those, deliveries that arrived after an earlier delivery had settled the intent: noted only. */
  late: number;
}

/**
 * The intent's answer to a webhook delivery it recorded (the result of the `webhook` update). A delivery it turns
 * away (an id already recorded, or an ended intent) is rejected instead, and nothing is written to its history.
 */
export interface WebhookAck {
  /**
   * - `settles`: the first final state; the intent ends by it at its next step, without another provider call;
   * - `logged`: a `pending` state, logged; nothing moves;
   * - `late`: an earlier delivery already settled the intent; this one is noted only.
   */
  effect: 'settles' | 'logged' | 'late';
  /** The intent's phase when it recorded the delivery. */
  phase: Phase;
}

/** `webhook dlv_123: succeeded`: how the attempt log names a delivery. */
export function describeWebhookEntry(w: { deliveryId: string; state: string }): string {
  return `webhook ${w.deliveryId}: ${w.state}`;
}

/** One line of the attempt log. */
export interface AttemptRecord {
  kind: 'dispatch' | 'inspect' | 'webhook';
  /** 1-based dispatch attempt number (for inspections: the attempt being inspected). */
  attempt: number;
  /** Workflow time the call started (ISO). */
  startedAt: string;
  evidence: EvidenceSummary;
  /** When the next call was scheduled for after this one, if any (ISO). */
  nextAt?: string | undefined;
  /** Which floor set `nextAt`. */
  floor?: 'server' | 'backoff' | undefined;
  /** For `kind: 'webhook'`: which delivery, and the state it reported. */
  webhook?: { source: string; deliveryId: string; state: WebhookState; eventType?: string | undefined } | undefined;
}

/** Why the credential's load control holds an intent (see docs/load-control.md). */
export interface HeldBy {
  credential: string;
  /** `rate_limited`: its gate is closed after a rate limit; `paced`: its budget has no slot sooner; `blocked`: a quota answer blocked it until resumed. */
  reason: 'rate_limited' | 'paced' | 'blocked';
  /** When the gate opens or the slot comes (ISO), for `rate_limited` and `paced`. */
  until?: string | undefined;
  /** What closed the gate or blocked the credential, for people. */
  why?: string | undefined;
  /** ISO time the credential was blocked. */
  since?: string | undefined;
}

/** A dispatch that no worker has started: nobody serves the credential's task queue (or every worker is busy). */
export interface StalledDispatch {
  /** When the dispatch was queued (ISO): no worker has served the credential since. */
  since: string;
  /** The task queue it waits on (`<prefix>.actions.<credential>`). */
  taskQueue: string;
}

/** Something the provider may hold for us that a person or a later inspection must reconcile. */
export interface Reservation {
  idempotencyKey: string;
  attempt: number;
  reason: string;
}

/** Status of an intent, from the `status` query. */
export interface IntentStatus {
  idempotencyKey: string;
  credential: string;
  phase: Phase;
  /** Dispatch attempts made. */
  attempts: number;
  maxAttempts: number;
  inspections: number;
  lastEvidence?: EvidenceSummary | undefined;
  /** When the next dispatch or inspection is due (ISO). */
  nextAttemptAt?: string | undefined;
  /** The earliest time the server permits the next attempt (ISO), when it said so. */
  permittedAt?: string | undefined;
  deadline: string;
  /** The provider's result, once succeeded. */
  result?: JsonValue | undefined;
  /** Why the intent ended, once final. */
  finalReason?: string | undefined;
  reservation?: Reservation | undefined;
  cancelRequested?: string | undefined;
  /**
   * Since when (ISO) the intent's dispatches have not reached the provider (connection refused, DNS failure): they
   * use no attempt and are retried until the deadline. Cleared by the next call that is sent.
   */
  unreachableSince?: string | undefined;
  /** While the credential's load control holds this intent's next call (nothing sent, not an attempt): why. */

  held?: HeldBy | undefined;
  /** While the current dispatch has waited longer than the stall time for a worker to start it. */
  stalled?: StalledDispatch | undefined;
  /** The last attempts and inspections (bounded); `attemptLogDropped` counts older ones left out. */
  attemptLog: AttemptRecord[];
  attemptLogDropped: number;
  /** Webhook deliveries for this intent, once any arrived. */
  webhooks?: WebhookCounts | undefined;
  /** The delivery that settled the intent, when a webhook did (no inspection was needed). */
  resolvedByWebhook?: { source: string; deliveryId: string; state: WebhookState } | undefined;
}

/** The final outcome: the workflow's result when succeeded, the details of its failure otherwise. */
export type IntentOutcome = IntentStatus & { phase: 'succeeded' | 'failed' | 'expired' | 'cancelled' };

/** `METHOD host/path` of a request, for messages and the UI: no query string (it may hold ids) and no credentials. */
export function describeTarget(method: string, url: string): string {
  try {
    const u = new URL(url);
    return `${method.toUpperCase()} ${u.host}${u.pathname}`;
  } catch {
    return method.toUpperCase();
  }
}

/**
 * An intent the client held at submit (the credential's gate was closed): the gate's time and its turn after it, ms
 * on the server's clock. See `IntentWorkflowOptions.heldAtSubmit`.
 */
export interface HeldAtSubmit {
  /** When the gate opens: the intent's permitted time. */
  untilMs: number;
  /** Its turn: when the start delay ends. */
  wakeAtMs: number;
  /** What closed the gate. */
  why?: string | undefined;
}

/**
 * The status of an intent held at submit, as the client answers it while the server holds the intent (no workflow
 * task has run) and as its first workflow task starts from.
 */
export function heldAtSubmitStatus(
  credential: string,
  hold: HeldAtSubmit,
): Pick<IntentStatus, 'phase' | 'nextAttemptAt' | 'permittedAt' | 'held'> {
  const until = new Date(hold.untilMs).toISOString();
  return {
    phase: Phase.waiting,
    nextAttemptAt: new Date(hold.wakeAtMs).toISOString(),
    permittedAt: until,
    held: { credential, reason: 'rate_limited', until, ...(hold.why !== undefined ? { why: hold.why } : {}) },
  };
}

/** Most entries kept in the attempt log. */
export const ATTEMPT_LOG_LIMIT = 25;
