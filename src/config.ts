/**
 * retryq's configuration: environment variables → one validated, typed object.
 *
 * The Temporal connection follows the SDK's standard environment configuration (`TEMPORAL_ADDRESS`,
 * `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS*`, `TEMPORAL_PROFILE`, `TEMPORAL_CONFIG_FILE`), read
 * with `@temporalio/envconfig`. When no address is configured, `retryq dev` starts an embedded dev server.
 * Everything else is a `RETRYQ_*` variable, listed in {@link CONFIG_VARIABLES}.
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
import { DURATION_HINT, parseDurationMs } from './duration.js';
import { ConfigError, problemsFromZod } from './errors.js';
import type { Problem } from './errors.js';
import { credentialIdSchema, deadlineDefaults, headerNameSchema } from './intent.js';
import { defaultIntentLimits, limitCeilings, limitProblems } from './intent-limits.js';
import type { IntentLimits } from './intent-limits.js';
import { budgetProblem, splitBudget } from './policy/index.js';
import type { BudgetSplit } from './policy/index.js';
import { stateRoot } from './temporal/binaries.js';
import { webhookSourcesSchema } from './webhooks/source.js';
import type { WebhookSource } from './webhooks/source.js';
import { retryqWords } from './validation-words.js';

/** Validation messages in retryq's words; the value found is in each problem's `received`. */
const wordsBesideReceived = retryqWords({ sayFound: false });

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

/** The webhook receiver (`retryq webhooks`, and `retryq dev` when sources are configured). */
export interface WebhookConfig {
  /** Configured sources; deliveries go to `POST /webhooks/<name>`. @default [] */
  sources: WebhookSource[];
  /** Address the receiver binds. @default '127.0.0.1' */
  ip: string;
  /** The receiver's port. @default 8788 */
  port: number;
  /** Largest delivery body, bytes. @default 1 MiB */
  maxBodyBytes: number;
  /** How long storing a delivery in Temporal may take before the answer is 503, ms. @default 5000 */
  temporalTimeoutMs: number;
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

/** The zod rules of {@link WorkerTuning}: each field, and concurrency within the cache. */
export const workerTuningSchema = z
  .strictObject({
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
  })
  .superRefine((t, ctx) => {
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
   * uses 9464 and `retryq dev` none).
   */
  metricsPort: number | undefined;
  /** Workflow worker sizing. */
  worker: WorkerTuning;
}

/**
 * Every variable retryq reads, with its default and meaning (the README's configuration reference). Each entry is
 * `[names, default, meaning]`; the type holds every entry to exactly that shape.
 */
export const CONFIG_VARIABLES = [
  ['TEMPORAL_ADDRESS', 'unset (embedded dev server)', 'host:port of an existing Temporal cluster or Temporal Cloud'],
  ['TEMPORAL_NAMESPACE', 'default', 'namespace to use'],
  ['TEMPORAL_API_KEY', 'unset', 'API key for Temporal Cloud (never printed)'],
  ['TEMPORAL_TLS, TEMPORAL_TLS_*', 'unset', 'TLS settings, as in the Temporal SDK environment configuration'],
  ['TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE', 'default / ~/.config/temporalio/temporal.toml', 'profile file'],
  ['RETRYQ_TASK_QUEUE_PREFIX', 'retryq', 'prefix of all task queue names'],
  ['RETRYQ_CREDENTIALS', '[]', 'JSON array of credentials (see below)'],
  ['RETRYQ_DEFAULT_DEADLINE', '24h', 'deadline of an intent that names none'],
  ['RETRYQ_MAX_DEADLINE', '30d', 'latest deadline an intent may ask for'],
  [
    'RETRYQ_MAX_BODY_BYTES',
    String(defaultIntentLimits.maxBodyBytes),
    `largest intent body (JSON, bytes) submit accepts; at most ${limitCeilings.maxBodyBytes}`,
  ],
  [
    'RETRYQ_MAX_HEADER_BYTES',
    String(defaultIntentLimits.maxHeaderBytes),
    `largest total of an intent's extra headers (bytes); at most ${limitCeilings.maxHeaderBytes}`,
  ],
  [
    'RETRYQ_MAX_URL_BYTES',
    String(defaultIntentLimits.maxUrlBytes),
    `longest action or inspection URL (bytes); at most ${limitCeilings.maxUrlBytes}`,
  ],
  [
    'RETRYQ_STALLED_DISPATCH_AFTER',
    '1m',
    'a dispatch no worker has started this long is reported as stalled (status, UI, LastErrorCode="no_worker")',
  ],
  [
    'RETRYQ_MAX_CACHED_WORKFLOWS',
    String(defaultWorkerTuning.maxCachedWorkflows),
    'intent workflows a worker keeps cached; bounds its memory (see docs/operations.md)',
  ],
  [
    'RETRYQ_WORKFLOW_TASK_CONCURRENCY',
    String(defaultWorkerTuning.workflowTaskConcurrency),
    'workflow tasks a worker runs at once',
  ],
  [
    'RETRYQ_STICKY_QUEUE_TIMEOUT_MS',
    String(defaultWorkerTuning.stickyQueueTimeoutMs),
    "ms a workflow task waits on its worker's sticky queue before any worker may take it",
  ],
  [
    'RETRYQ_WORKFLOW_SEMI_SPACE_MB',
    String(defaultWorkerTuning.workflowThreadSemiSpaceMb),
    "MB of one semi-space of the workflow thread's young generation (0: V8's own sizing); bounds its memory",
  ],
  [
    'RETRYQ_WORKFLOW_OLD_SPACE_MB',
    String(defaultWorkerTuning.workflowThreadOldSpaceMb),
    "largest old generation of the workflow thread, MB (0: V8's own limit); a lower limit makes V8 collect sooner",
  ],
  [
    'RETRYQ_HEAP_RELEASE_AFTER_BURST_MB',
    String(defaultWorkerTuning.heapReleaseAfterBurstMb),
    'main-thread heap growth (MB) after which an idle worker runs one full garbage collection to give it back (0: off)',
  ],
  [
    'RETRYQ_WAKE_UPS_PER_SECOND',
    String(defaultWorkerTuning.wakeUpsPerSecond),
    "intents held by a credential's closed gate that one worker wakes per second when it opens (0: by the budget only)",
  ],
  ['RETRYQ_DATA_DIR', '.data', 'embedded dev server: folder of its SQLite file'],
  ['RETRYQ_DEV_IP', '127.0.0.1', 'embedded dev server: address to bind'],
  ['RETRYQ_DEV_PORT', '7233', 'embedded dev server: gRPC port'],
  ['RETRYQ_UI_PORT', '8233', 'embedded dev server: Web UI port'],
  ['RETRYQ_DEV_SIM_PORT', '4010', '`retryq dev`: port of the simulated provider'],
  ['RETRYQ_WEBHOOK_SOURCES', '[]', 'JSON array of webhook sources (docs/webhooks.md)'],
  ['RETRYQ_WEBHOOK_IP', '127.0.0.1', 'webhook receiver: address to bind'],
  ['RETRYQ_WEBHOOK_PORT', '8788', 'webhook receiver: port'],
  ['RETRYQ_WEBHOOK_MAX_BODY', '1MiB', 'webhook receiver: largest body (bytes, or with KiB / MiB)'],
  [
    'RETRYQ_WEBHOOK_TEMPORAL_TIMEOUT',
    '5s',
    'webhook receiver: time to store a delivery in Temporal before answering 503',
  ],
  [
    'RETRYQ_METRICS_PORT',
    '9464',
    "workers (`retryq worker`, `retryq dev`): retryq's and the Temporal SDK's Prometheus metrics at /metrics (0: off)",
  ],
] as const satisfies readonly (readonly [names: string, defaultValue: string, meaning: string])[];

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Reads and validates the configuration. Throws {@link ConfigError} listing every problem.
 *
 * @param env the environment to read. @default process.env
 */
export function loadConfig(env: Env = process.env): RetryqConfig {
  const problems: Problem[] = [];
  const raw = (name: string) => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };

  const port = (name: string, fallback: number): number => {
    const v = raw(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < 1 || n > 65535) {
      problems.push({ path: name, message: 'must be a TCP port, an integer from 1 to 65535', received: v });
      return fallback;
    }
    return n;
  };
  const duration = (name: string, fallbackMs: number): number => {
    const v = raw(name);
    if (v === undefined) return fallbackMs;
    const ms = parseDurationMs(v);
    if (ms === undefined || ms <= 0) {
      problems.push({ path: name, message: `must be ${DURATION_HINT}, greater than zero`, received: v });
      return fallbackMs;
    }
    return ms;
  };

  const prefix = raw('RETRYQ_TASK_QUEUE_PREFIX') ?? 'retryq';
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$/.test(prefix))
    problems.push({
      path: 'RETRYQ_TASK_QUEUE_PREFIX',
      message: 'must be 1–101 chars of letters, digits, ".", "_" or "-", starting with a letter or digit',
      received: prefix,
    });

  const credentials = parseCredentials(raw('RETRYQ_CREDENTIALS'), problems);

  const limit = (name: string, key: keyof IntentLimits): number => {
    const v = raw(name);
    if (v === undefined) return defaultIntentLimits[key];
    const n = Number(v);
    const [problem] = /^\d+$/.test(v) ? limitProblems({ [key]: n }) : limitProblems({ [key]: Number.NaN });
    if (problem) {
      problems.push({ path: name, message: problem.message, received: v });
      return defaultIntentLimits[key];
    }
    return n;
  };
  const intents: IntentDefaults = {
    defaultDeadlineMs: duration('RETRYQ_DEFAULT_DEADLINE', deadlineDefaults.defaultDeadlineMs),
    maxDeadlineMs: duration('RETRYQ_MAX_DEADLINE', deadlineDefaults.maxDeadlineMs),
    limits: {
      maxBodyBytes: limit('RETRYQ_MAX_BODY_BYTES', 'maxBodyBytes'),
      maxHeaderBytes: limit('RETRYQ_MAX_HEADER_BYTES', 'maxHeaderBytes'),
      maxUrlBytes: limit('RETRYQ_MAX_URL_BYTES', 'maxUrlBytes'),
    },
    stalledDispatchAfterMs: duration('RETRYQ_STALLED_DISPATCH_AFTER', 60_000),
  };
  if (intents.defaultDeadlineMs > intents.maxDeadlineMs)
    problems.push({
      path: 'RETRYQ_DEFAULT_DEADLINE',
      message: `must not exceed RETRYQ_MAX_DEADLINE (${raw('RETRYQ_MAX_DEADLINE') ?? '30d'})`,
      received: raw('RETRYQ_DEFAULT_DEADLINE') ?? '24h',
    });

  const dev: DevConfig = {
    dataDir: path.resolve(stateRoot, raw('RETRYQ_DATA_DIR') ?? '.data'),
    ip: raw('RETRYQ_DEV_IP') ?? '127.0.0.1',
    port: port('RETRYQ_DEV_PORT', 7233),
    uiPort: port('RETRYQ_UI_PORT', 8233),
    simPort: port('RETRYQ_DEV_SIM_PORT', 4010),
  };
  if (dev.port === dev.uiPort)
    problems.push({
      path: 'RETRYQ_UI_PORT',
      message: 'must differ from RETRYQ_DEV_PORT',
      received: String(dev.uiPort),
    });
  if (dev.simPort === dev.port || dev.simPort === dev.uiPort)
    problems.push({
      path: 'RETRYQ_DEV_SIM_PORT',
      message: 'must differ from RETRYQ_DEV_PORT and RETRYQ_UI_PORT',
      received: String(dev.simPort),
    });

  let metricsPort: number | undefined;
  const metricsRaw = raw('RETRYQ_METRICS_PORT');
  if (metricsRaw === '0') metricsPort = 0;
  else if (metricsRaw !== undefined) metricsPort = port('RETRYQ_METRICS_PORT', 9464);
  const worker = loadWorkerTuning(raw, problems);

  const temporal = loadTemporal(env, dev, problems);

  const webhooks: WebhookConfig = {
    sources: parseWebhookSources(raw('RETRYQ_WEBHOOK_SOURCES'), problems),
    ip: raw('RETRYQ_WEBHOOK_IP') ?? '127.0.0.1',
    port: port('RETRYQ_WEBHOOK_PORT', 8788),
    maxBodyBytes: byteSize('RETRYQ_WEBHOOK_MAX_BODY', raw('RETRYQ_WEBHOOK_MAX_BODY'), 1024 * 1024, problems),
    temporalTimeoutMs: duration('RETRYQ_WEBHOOK_TEMPORAL_TIMEOUT', 5000),
  };

  if (problems.length > 0) throw new ConfigError(problems);
  return { temporal, taskQueuePrefix: prefix, credentials, dev, intents, worker, metricsPort, webhooks };
}

const workerTuningVariables: Record<keyof WorkerTuning, string> = {
  maxCachedWorkflows: 'RETRYQ_MAX_CACHED_WORKFLOWS',
  workflowTaskConcurrency: 'RETRYQ_WORKFLOW_TASK_CONCURRENCY',
  stickyQueueTimeoutMs: 'RETRYQ_STICKY_QUEUE_TIMEOUT_MS',
  workflowThreadSemiSpaceMb: 'RETRYQ_WORKFLOW_SEMI_SPACE_MB',
  workflowThreadOldSpaceMb: 'RETRYQ_WORKFLOW_OLD_SPACE_MB',
  heapReleaseAfterBurstMb: 'RETRYQ_HEAP_RELEASE_AFTER_BURST_MB',
  wakeUpsPerSecond: 'RETRYQ_WAKE_UPS_PER_SECOND',
};

function loadWorkerTuning(raw: (name: string) => string | undefined, problems: Problem[]): WorkerTuning {
  const given: Partial<Record<keyof WorkerTuning, number>> = {};
  let readable = true;
  for (const field of Object.keys(workerTuningVariables) as (keyof WorkerTuning)[]) {
    const variable = workerTuningVariables[field];
    const text = raw(variable);
    if (text === undefined) continue;
    if (!/^-?\d+$/.test(text)) {
      problems.push({ path: variable, message: 'must be a whole number', received: text });
      readable = false;
    } else given[field] = Number(text);
  }
  if (!readable) return { ...defaultWorkerTuning };
  const input = withTuningDefaults(given) as Record<string, number>;
  const parsed = workerTuningSchema.safeParse(input, { error: wordsBesideReceived });
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) {
    const variable = workerTuningVariables[issue.path[0] as keyof WorkerTuning];
    problems.push({
      path: variable,
      message: issue.message,
      received: raw(variable) ?? String(input[issue.path[0] as string]),
    });
  }
  return { ...defaultWorkerTuning };
}

/**
 * One JSON variable read through `schema`; `[]` when it is unset or has problems (each one recorded, naming the path
 * inside the variable). `example` is the shape shown when the text is not JSON at all.
 */
function parseJsonVariable<T>(
  variable: string,
  text: string | undefined,
  schema: z.ZodType<T[]>,
  example: string,
  problems: Problem[],
): T[] {
  if (text === undefined) return [];
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    problems.push({
      path: variable,
      message: `must be a JSON array like ${example} (${(err as Error).message})`,
      received: text,
    });
    return [];
  }
  const parsed = schema.safeParse(json, { error: wordsBesideReceived });
  if (!parsed.success) {
    problems.push(...problemsFromZod(parsed.error, { input: json, received: true, prefix: variable }));
    return [];
  }
  return parsed.data;
}

function parseCredentials(text: string | undefined, problems: Problem[]): CredentialConfig[] {
  const variable = 'RETRYQ_CREDENTIALS';
  const credentials = parseJsonVariable(
    variable,
    text,
    z.array(credentialSchema),
    '[{"id":"acme-prod","secretEnv":"ACME_PROD_KEY"}]',
    problems,
  );
  const seen = new Set<string>();
  credentials.forEach((c, i) => {
    if (seen.has(c.id)) problems.push({ path: `${variable}[${i}].id`, message: 'must be unique', received: c.id });
    seen.add(c.id);
  });
  return credentials;
}

/** `1048576`, `512KiB`, `1MiB` (also `KB`/`MB` as the binary units) → bytes, between 1 KiB and 64 MiB. */
function byteSize(variable: string, text: string | undefined, fallback: number, problems: Problem[]): number {
  if (text === undefined) return fallback;
  const m = /^(\d+(?:\.\d+)?)\s*(b|kib|kb|k|mib|mb|m)?$/i.exec(text);
  const unit = (m?.[2] ?? 'b').toLowerCase();
  const bytes = m
    ? Math.round(Number(m[1]) * (unit.startsWith('k') ? 1024 : unit.startsWith('m') ? 1024 * 1024 : 1))
    : NaN;
  if (!Number.isFinite(bytes) || bytes < 1024 || bytes > 64 * 1024 * 1024) {
    problems.push({
      path: variable,
      message: "must be a size between 1KiB and 64MiB, such as '1MiB', '512KiB' or 1048576",
      received: text,
    });
    return fallback;
  }
  return bytes;
}

function parseWebhookSources(text: string | undefined, problems: Problem[]): WebhookSource[] {
  return parseJsonVariable(
    'RETRYQ_WEBHOOK_SOURCES',
    text,
    webhookSourcesSchema,
    '[{"name":"acme","verify":{"scheme":"standard-webhooks","secretEnv":"ACME_WEBHOOK_SECRET"},' +
      '"mapping":{"key":"idempotencyKey","state":"status"}}]',
    problems,
  );
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
