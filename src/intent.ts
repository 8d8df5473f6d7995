/**
 * Intents: what the application wants done once, validated with zod at the edge; and the shapes of an intent's
 * status and final outcome.
 *
 * Not for workflow code: the schemas are built when this module loads, and the SDK loads a workflow's modules
 * once per cached workflow. The client validates with {@link intentInputSchema} and turns the input into an
 * `IntentSpec` (absolute deadline, full policy, payload fingerprint), which is what the workflow receives; the
 * workflow imports that shape, the phases and the status types from the zod-free `intent-status.ts`.
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
import { permanentReasons } from './policy/code-table.js';
import { isRead } from './policy/evidence.js';
import { httpMethods } from './intent-status.js';
import type { Action, InspectionSpec, JsonValue } from './intent-status.js';
import type { CodeRule } from './policy/index.js';

export {
  ATTEMPT_LOG_LIMIT,
  Phase,
  describeTarget,
  describeWebhookEntry,
  finalPhases,
  httpMethods,
} from './intent-status.js';
export type {
  Action,
  AttemptRecord,
  EvidenceSummary,
  HttpMethod,
  InspectionSpec,
  IntentOutcome,
  IntentPolicy,
  IntentSpec,
  IntentStatus,
  JsonValue,
  Reservation,
  StalledDispatch,
  WebhookAck,
  WebhookCounts,
  WebhookDelivery,
  WebhookState,
} from './intent-status.js';

/** Idempotency keys: 1–200 chars of letters, digits and `-_.:~@+=`; they become workflow ids and HTTP headers. */
export const idempotencyKeySchema = z
  .string()
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters')
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.:~@+=-]*$/,
    'must start with a letter or digit and use only A-Z a-z 0-9 _ . : ~ @ + = -',
  );

/** Credential ids (`acme-prod`): in intents, configuration, task queue names and the UI. */
export const credentialIdSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be 1–63 chars of a-z, 0-9, "_" or "-", starting with a letter or digit');

/** An HTTP header name (an RFC 9110 token). */
export const headerNameSchema = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name');

/** Deadlines of intents unless configured otherwise (`RETRYQ_DEFAULT_DEADLINE`, `RETRYQ_MAX_DEADLINE`). */
export const deadlineDefaults = {
  /** Deadline of an intent that names none: 24 h. */
  defaultDeadlineMs: 24 * 3_600_000,
  /** Latest deadline an intent may ask for: 30 days. */
  maxDeadlineMs: 30 * 86_400_000,
} as const;

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

const headersSchema = z.record(headerNameSchema, z.string());

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

/** `true` only when A and B are the same type, so the checks below fail to compile when a schema and a type drift. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
// The workflow's zod-free types (intent-status.ts) are exactly what these schemas produce.
const _actionIsSchemaOutput: Same<z.output<typeof actionSchema>, Action> = true;
const _inspectionIsSchemaOutput: Same<z.output<typeof inspectionSchema>, InspectionSpec> = true;

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

const codeRuleSchema: z.ZodType<CodeRule> = z.union(
  [
    z.strictObject({ kind: z.literal('rate_limited') }),
    z.strictObject({ kind: z.literal('transient') }),
    z.strictObject({
      kind: z.literal('permanent'),
      reason: z.enum(permanentReasons),
    }),
  ],
  {
    error: `must be {"kind":"rate_limited"}, {"kind":"transient"} or {"kind":"permanent","reason":R} with R one of ${permanentReasons.join(', ')}`,
  },
);
/** Extra structured error codes for this intent's provider, on top of the built-in table. */
export const codeTableSchema = z.record(z.string().min(1).max(100), codeRuleSchema);

/** What application code passes to `submit()`. */
export const intentInputSchema = z
  .strictObject({
    idempotencyKey: idempotencyKeySchema,
    credential: credentialIdSchema,
    action: actionSchema,
    /** Absolute time (ISO 8601 / Date) or a duration from now. @default the configured default (24h) */
    deadline: z
      .union([z.date(), z.iso.datetime({ offset: true }), z.number(), z.string()], {
        error: `must be an ISO 8601 time, a Date, or ${DURATION_HINT}`,
      })
      .optional(),
    policy: policyOverridesSchema.optional(),
    inspection: inspectionSchema.optional(),
    /** Extra structured error codes. */
    codes: codeTableSchema.optional(),
  })
  .superRefine((intent, ctx) => {
    if (!isRead({ method: intent.action.method }) && !intent.inspection)
      ctx.addIssue({
        code: 'custom',
        path: ['inspection'],
        message: `is required for ${intent.action.method}: retryq must be able to look the operation up before any re-dispatch after an unknown outcome`,
      });
  });
export type IntentInput = z.input<typeof intentInputSchema>;
