/**
 * Intents: what the application wants done once, validated with zod at the edge; and the shapes of an intent's
 * status and final outcome.
 *
 * Workflow-safe: zod and the pure policy only, no Node imports. The client validates with
 * {@link intentInputSchema} and turns the input into an {@link IntentSpec} (absolute deadline, full policy,
 * payload fingerprint), which is what the workflow receives.
 *
 * @example
 * ```ts
 * import { intentInputSchema } from './intent.js';
 * const parsed = intentInputSchema.safeParse({
 *   idempotencyKey: 'order-1042-charge',
 *   credential: 'acme-prod',
 *   action: { method: 'POST', url: 'https://api.example.com/v1/charges', body: { amount: 1200 } },
 *   inspection: { url: 'https://api.example.com/v1/operations/{idempotencyKey}' },
 * });
 * parsed.success; // true
 * ```
 */
import { z } from 'zod';
import { DURATION_HINT, parseDurationMs } from './duration.js';
import type { CodeRule } from './policy/index.js';

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

/** Idempotency keys: 1–200 chars of letters, digits and `-_.:~@+=`; they become workflow ids and HTTP headers. */
export const idempotencyKeySchema = z
  .string()
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters')
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.:~@+=-]*$/,
    'must start with a letter or digit and use only A-Z a-z 0-9 _ . : ~ @ + = -',
  );

export const credentialIdSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be 1–63 chars of a-z, 0-9, "_" or "-", starting with a letter or digit');

/**
 * Header names that carry secrets. The worker adds the credential itself; an intent that tries to carry one is
 * rejected so that no secret ever enters workflow history.
 */
export const secretHeaderNames: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-api-key',
  'api-key',
  'x-auth-token',
  'x-access-token',
  'x-amz-security-token',
  'x-goog-api-key',
]);
/** Headers retryq sets itself on every attempt. */
export const reservedHeaderNames: ReadonlySet<string> = new Set([
  'idempotency-key',
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
]);
/** Query parameters that look like credentials: rejected in URLs for the same reason. */
const secretQueryParams = /^(api[-_]?key|access[-_]?token|token|secret|client[-_]?secret|password|signature|sig|key)$/i;

const urlSchema = z.string().superRefine((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be an absolute http:// or https:// URL' });
    return;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    ctx.addIssue({ code: 'custom', message: `must use http or https (got ${url.protocol})` });
  if (url.username || url.password)
    ctx.addIssue({ code: 'custom', message: 'must not contain user:password; credentials are added by the worker' });
  for (const name of url.searchParams.keys())
    if (secretQueryParams.test(name))
      ctx.addIssue({
        code: 'custom',
        message: `must not carry the secret-looking query parameter "${name}"; credentials are added by the worker`,
      });
});

const headersSchema = z.record(
  z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be a valid header name'),
  z.string(),
);

const jsonValueSchema: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([
    z.string(),
    z.number(),
    z.boolean(),
    z.null(),
    z.array(jsonValueSchema),
    z.record(z.string(), jsonValueSchema),
  ]),
);
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export const httpMethods = ['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpMethod = (typeof httpMethods)[number];

/** The HTTP request an intent performs. */
export const actionSchema = z
  .strictObject({
    method: z.preprocess((m) => (typeof m === 'string' ? m.toUpperCase() : m), z.enum(httpMethods)),
    url: urlSchema,
    /** Extra request headers (no secrets, no `Idempotency-Key`: retryq sets it). */
    headers: headersSchema.optional(),
    /** JSON body, sent with `Content-Type: application/json`. */
    body: jsonValueSchema.optional(),
  })
  .superRefine((action, ctx) => {
    for (const name of Object.keys(action.headers ?? {})) {
      const lower = name.toLowerCase();
      if (secretHeaderNames.has(lower))
        ctx.addIssue({
          code: 'custom',
          path: ['headers', name],
          message: `must not be set: "${name}" carries a secret; the worker adds the credential itself`,
        });
      else if (reservedHeaderNames.has(lower))
        ctx.addIssue({ code: 'custom', path: ['headers', name], message: `must not be set: retryq manages "${name}"` });
    }
    if ((action.method === 'GET' || action.method === 'HEAD') && action.body !== undefined)
      ctx.addIssue({ code: 'custom', path: ['body'], message: `must be absent for ${action.method}` });
  });
export type Action = z.infer<typeof actionSchema>;

/**
 * How to look the saved operation up at the provider by idempotency key (read-only). Required for writes: it is
 * what lets retryq resolve an unknown outcome without a blind re-dispatch.
 */
export const inspectionSchema = z.strictObject({
  /** URL template; `{idempotencyKey}` is replaced by the URL-encoded key. */
  url: urlSchema.refine((u) => u.includes('{idempotencyKey}'), 'must contain the placeholder {idempotencyKey}'),
  /** Field of the JSON response holding the operation's state. @default 'status' */
  stateField: z.string().min(1).default('status'),
  /** State values meaning "done". @default ['succeeded', 'completed'] */
  succeeded: z.array(z.string().min(1)).min(1).default(['succeeded', 'completed']),
  /** State values meaning "done and failed". @default ['failed', 'canceled', 'cancelled'] */
  failed: z.array(z.string().min(1)).min(1).default(['failed', 'canceled', 'cancelled']),
  /** Field holding the operation's result. @default 'result' */
  resultField: z.string().min(1).default('result'),
  /** Field holding a failed operation's error `{ status?, code?, message? }`. @default 'error' */
  errorField: z.string().min(1).default('error'),
});
export type InspectionSpec = z.infer<typeof inspectionSchema>;

const durationInput = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const ms = parseDurationMs(v);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: `must be ${DURATION_HINT}` });
    return z.NEVER;
  }
  return ms;
});

/** Per-intent overrides of the retry policy; every field optional. */
export const policyOverridesSchema = z.strictObject({
  /** Most dispatch attempts, the first included. @default 10 */
  maxAttempts: z.number().int().min(1).max(1000).optional(),
  /** Backoff after the first attempt. @default '1s' */
  baseDelay: durationInput.optional(),
  /** Largest local backoff (never shortens a server-requested delay). @default '10m' */
  maxBackoff: durationInput.optional(),
  /** Backoff growth per attempt, ≥ 1. @default 2 */
  multiplier: z.number().min(1).max(10).optional(),
  /** Relative jitter in [0, 1]. @default 0.2 */
  jitter: z.number().min(0).max(1).optional(),
  /** Time limit of one HTTP attempt. @default '30s' */
  attemptTimeout: durationInput.optional(),
});

/** Defaults of the retry policy (ms inside). */
export const defaultPolicy = {
  maxAttempts: 10,
  baseDelayMs: 1000,
  maxBackoffMs: 10 * 60_000,
  multiplier: 2,
  jitter: 0.2,
  attemptTimeoutMs: 30_000,
} as const;

const codeRuleSchema: z.ZodType<CodeRule> = z.union([
  z.strictObject({ kind: z.literal('rate_limited') }),
  z.strictObject({ kind: z.literal('transient') }),
  z.strictObject({
    kind: z.literal('permanent'),
    reason: z.enum(['permission', 'invalid', 'conflict', 'not_found', 'quota', 'other']),
  }),
]);
/** Extra structured error codes for this intent's provider, on top of the built-in table. */
export const codeTableSchema = z.record(z.string().min(1).max(100), codeRuleSchema);

/** What application code passes to `submit()`. */
export const intentInputSchema = z
  .strictObject({
    idempotencyKey: idempotencyKeySchema,
    credential: credentialIdSchema,
    action: actionSchema,
    /** Absolute time (ISO 8601 / Date) or a duration from now. @default the configured default (24h) */
    deadline: z.union([z.date(), z.iso.datetime({ offset: true }), z.number(), z.string()]).optional(),
    policy: policyOverridesSchema.optional(),
    inspection: inspectionSchema.optional(),
    /** Extra structured error codes. */
    codes: codeTableSchema.optional(),
  })
  .superRefine((intent, ctx) => {
    const write = !['GET', 'HEAD', 'OPTIONS'].includes(intent.action.method);
    if (write && !intent.inspection)
      ctx.addIssue({
        code: 'custom',
        path: ['inspection'],
        message: `is required for ${intent.action.method}: retryq must be able to look the operation up before any re-dispatch after an unknown outcome`,
      });
  });
export type IntentInput = z.input<typeof intentInputSchema>;

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

/** What webhook deliveries did to an intent. */
export interface WebhookCounts {
  /** Distinct deliveries recorded. */
  received: number;
  /** Redeliveries of a delivery id already recorded: ignored. */
  duplicates: number;
  /** Deliveries that arrived after the intent had ended or after an earlier delivery had settled it: recorded only. */
  late: number;
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
  /** The last attempts, inspections and webhook deliveries (bounded); `attemptLogDropped` counts older ones left out. */
  attemptLog: AttemptRecord[];
  attemptLogDropped: number;
  /** Webhook deliveries for this intent, once any arrived. */
  webhooks?: WebhookCounts | undefined;
  /** The delivery that settled the intent, when a webhook did (no inspection was needed). */
  resolvedByWebhook?: { source: string; deliveryId: string; state: WebhookState } | undefined;
}

/** `webhook dlv_123: succeeded`: how the attempt log names a delivery. */
export function describeWebhookEntry(w: { deliveryId: string; state: string }): string {
  return `webhook ${w.deliveryId}: ${w.state}`;
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

/** Most entries kept in the attempt log. */
export const ATTEMPT_LOG_LIMIT = 25;
