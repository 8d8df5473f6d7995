/**
 * `retryq/worker`: retryq's workers for the task-queue topology, and the configuration they run from.
 *
 * - one worker on `<prefix>.workflows` for the intent workflows;
 * - per credential, one worker on `<prefix>.actions.<credential>` running the dispatch activity with `concurrency`
 *   slots, and one on `<prefix>.inspect.<credential>` running the inspection activity with `inspectConcurrency`
 *   slots, so a pile of rejected dispatches can never take the slots of the inspections that resolve them;
 * - load control per credential (docs/load-control.md): every call waits for a send slot from the credential's
 *   entity workflow, which paces dispatches and inspections inside one budget (`requestsPerMinute`, the
 *   inspection reserve inside it) across all worker processes, and holds them while the credential's gate is
 *   closed after a rate limit or the credential is blocked after a quota answer.
 *
 * Credentials come from the environment (`RETRYQ_CREDENTIALS` and a variable per secret: `loadConfig`,
 * `resolveSecrets`) or from the application's own code ({@link credentialsInCode}: a file, a secret store).
 *
 * `npx retryq worker` does exactly what the example does. The intent workflow's bundle is built with webpack on
 * first use and cached on disk (`node_modules/.cache/retryq`), keyed by the code it contains.
 *
 * @example
 * ```ts
 * import { connectWorker, createWorkers, loadConfig, resolveSecrets } from 'retryq/worker';
 *
 * // RETRYQ_CREDENTIALS='[{"id":"acme-prod","secretEnv":"ACME_PROD_KEY"}]' ACME_PROD_KEY=sk_live_… TEMPORAL_ADDRESS=…
 * const config = loadConfig();
 * const connection = await connectWorker(config.temporal);
 * const workers = await createWorkers({ config, connection, secrets: resolveSecrets(config.credentials) });
 * process.once('SIGTERM', () => workers.shutdown()); // drains: in-flight attempts finish
 * await workers.run();
 * await connection.close();
 * ```
 *
 * @module
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { Runtime, Worker } from '@temporalio/worker';
import type { NativeConnection, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { Agent } from 'undici';
import type { Dispatcher } from 'undici';
import { createActivities } from './activities/index.js';
import { HEARTBEAT_EVERY_MS } from './activities/heartbeat.js';
import type { CredentialStore } from './activities/index.js';
import { budgetOf, credentialSchema, withTuningDefaults, workerTuningSchema } from './config.js';
import { ConfigError, problemsFromZod } from './errors.js';
import type { Problem } from './errors.js';
import type { CredentialConfig, RetryqConfig, WorkerTuning } from './config.js';
import { CredentialGates } from './load-control/credential-gates.js';
import type { LoadMetrics } from './load-control/metrics.js';
import { cachedWorkflowBundle, cachedWorkflowBundleFile } from './temporal/workflow-bundle.js';
import { releaseHeapAfterBursts } from './temporal/heap-release.js';
import { withWorkflowThreadHeap } from './temporal/workflow-thread-memory.js';
import { taskQueues } from './task-queues.js';
import { retryqWords } from './validation-words.js';

/** Validation messages in retryq's words; the value found is in each problem's `received`. */
const wordsBesideReceived = retryqWords({ sayFound: false });

export { CONFIG_SETTINGS, CONFIG_VARIABLES, loadConfig, resolveSecrets } from './config.js';
export type { Setting } from './settings.js';
export type { CredentialConfig, RetryqConfig, TemporalConfig, WorkerTuning } from './config.js';
export { defaultWorkerTuning } from './config.js';
export { ConfigError, TemporalUnreachableError } from './errors.js';
export type { Problem } from './errors.js';
export { connectWorker } from './temporal/connect.js';
export { taskQueues } from './task-queues.js';
export type { TaskQueues } from './task-queues.js';

/**
 * The heap of the credentials' entity thread: a few small workflows (one per credential) need neither the 16 MB
 * young generation V8 would grow to nor an old generation the size of the machine's.
 */
const ENTITY_THREAD_HEAP = { semiSpaceMb: 1, oldSpaceMb: 128 } as const;

/** The folder of this module: `src/` when run from the sources, `dist/` in the built package. */
const codeDir = path.dirname(fileURLToPath(import.meta.url));

/**
 * The intent workflows' bundle, cached on disk and keyed by the code it contains. Works from the sources
 * (`src/workflows/worker-entry.ts`) and from the built package (`dist/workflows/worker-entry.js`). The entry is
 * `retryq/workflows` plus the workflow thread's setting that only retryq's own workers make (one stack frame per error;
 * see src/workflows/worker-entry.ts).
 */
export function intentWorkflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  return cachedWorkflowBundle(bundleOptions('worker-entry'));
}

/**
 * A bundle of retryq's own workflows: `name` in src/workflows (or dist/workflows), with its modules preloaded. The
 * intents' (`worker-entry`) or the credentials' entities' (`credential`: the entity worker's workflow thread loads this
 * alone, not the intents' code, so the thread stays small).
 */
function bundleOptions(name: 'worker-entry' | 'credential') {
  const entry = path.join(codeDir, 'workflows', `${name}${path.extname(fileURLToPath(import.meta.url))}`);
  // retryq's workflow modules hold no per-workflow state at module level (constants, pure functions, message
  // definitions; the state of a run lives in the run's own objects), so they are loaded once per workflow thread and
  // shared by every intent instead of once per intent: less CPU per new intent and less memory per cached one.
  return { workflowsPath: entry, inputs: [codeDir], preloadModules: [entry] };
}

/** Builds the headers that authenticate a credential, from secrets resolved at worker start. */
export function credentialStore(
  credentials: readonly CredentialConfig[],
  secrets: ReadonlyMap<string, string>,
): CredentialStore {
  const byId = new Map(credentials.map((c) => [c.id, c]));
  return {
    authHeaders(id) {
      const c = byId.get(id);
      const secret = secrets.get(id);
      if (!c || secret === undefined) throw new Error(`this worker has no secret for credential "${id}"`);
      return { [c.authHeader.toLowerCase()]: c.authScheme ? `${c.authScheme} ${secret}` : secret };
    },
  };
}

/**
 * One credential an application gives in code (read from its own file or secret store) instead of
 * `RETRYQ_CREDENTIALS`: the same fields and defaults as an entry there, with the secret itself in place of
 * `secretEnv`.
 */
export type CredentialInCode = Omit<Partial<CredentialConfig>, 'id' | 'secretEnv'> & {
  /** The credential id intents name, e.g. `acme-prod`. */
  id: string;
  /** The API key (or token) itself; sent in `authHeader` after `authScheme`, never written anywhere else. */
  secret: string;
};

/** What {@link credentialsInCode} returns: the two fields of {@link WorkerSetup} that describe credentials. */
export interface CredentialsInCode {
  credentials: CredentialConfig[];
  secrets: Map<string, string>;
}

/** `secretEnv` of a credential given in code: its secret is in {@link CredentialsInCode.secrets}, not in a variable. */
const SECRET_GIVEN_IN_CODE = 'RETRYQ_SECRET_GIVEN_IN_CODE';

/**
 * Credentials for {@link createWorkers} from the application's code rather than from `RETRYQ_CREDENTIALS` and
 * environment variables: each entry is checked like an entry of `RETRYQ_CREDENTIALS` (same fields, defaults and
 * rules). Throws {@link ConfigError} listing every problem, at `credentials[i].<field>`; a secret is never part of a
 * message.
 *
 * @example
 * ```ts
 * const { credentials, secrets } = credentialsInCode([{ id: 'acme-prod', secret: 'sk_live_…', requestsPerMinute: 60 }]);
 * const workers = await createWorkers({ config: { ...loadConfig(), credentials }, connection, secrets });
 * ```
 */
export function credentialsInCode(entries: readonly CredentialInCode[]): CredentialsInCode {
  const problems: Problem[] = [];
  const credentials: CredentialConfig[] = [];
  const secrets = new Map<string, string>();
  if (!Array.isArray(entries))
    throw new ConfigError([{ path: 'credentials', message: 'must be an array of credentials like [{ id, secret }]' }]);
  entries.forEach((entry: unknown, i) => {
    const at = `credentials[${i}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      problems.push({ path: at, message: 'must be an object like { id, secret }' });
      return;
    }
    const { secret, ...settings } = entry as Record<string, unknown>;
    if (typeof secret !== 'string' || secret.trim() === '')
      problems.push({ path: `${at}.secret`, message: "must be the credential's secret, a non-empty string" });
    const parsed = credentialSchema.safeParse(
      { ...settings, secretEnv: SECRET_GIVEN_IN_CODE },
      { error: wordsBesideReceived },
    );
    if (!parsed.success) {
      problems.push(...problemsFromZod(parsed.error, { input: settings, received: true, prefix: at }));
      return;
    }
    if (credentials.some((c) => c.id === parsed.data.id))
      problems.push({ path: `${at}.id`, message: 'must be unique', received: parsed.data.id });
    else if (typeof secret === 'string') {
      credentials.push(parsed.data);
      secrets.set(parsed.data.id, secret);
    }
  });
  if (problems.length > 0) throw new ConfigError(problems);
  return { credentials, secrets };
}

export interface WorkerSetup {
  /** `worker` (cache size, workflow-task concurrency) defaults to {@link defaultWorkerTuning}. */
  config: Pick<RetryqConfig, 'taskQueuePrefix' | 'credentials' | 'temporal'> & { worker?: Partial<WorkerTuning> };
  connection: NativeConnection;
  /** Credential id → secret (see `resolveSecrets`, or {@link credentialsInCode}). */
  secrets: ReadonlyMap<string, string>;
  /** HTTP pool for provider calls. @default a keep-alive undici Agent */
  http?: Dispatcher;
  /** @default Date.now */
  clock?: () => number;
  /**
   * The bundle the intents' workflow thread runs. The credentials' entity thread always runs its own
   * (`bundleOptions('credential')`). @default the bundle of {@link intentWorkflowBundle} (retryq/workflows, one stack
   * frame per error), handed to the SDK as a file (see `cachedWorkflowBundleFile`)
   */
  workflowBundle?: WorkflowBundleWithSourceMap;
  /** Which roles to run. @default all three */
  roles?: { workflows?: boolean; actions?: boolean; inspect?: boolean };
  /**
   * Load control per credential (shared budget, gate and block across all processes). `false` turns it off: each
   * intent then retries on its own, paced only by Temporal's task-queue rate limits (the benchmark's baseline).
   * @default true
   */
  loadControl?: boolean;
  /** Where load control counts (Prometheus). @default none */
  metrics?: LoadMetrics;
}

export interface RetryqWorkers {
  readonly workers: readonly Worker[];
  /** This process's load control, when on. */
  readonly gates: CredentialGates | undefined;
  /** Runs every worker until {@link shutdown}; rejects if any worker fails. */
  run(): Promise<void>;
  /** Starts a graceful shutdown: stop polling, let in-flight calls finish (drain); calls still waiting for a send slot are held, unsent. */
  shutdown(): void;
}

/**
 * How long a graceful shutdown lets provider calls in flight finish before the SDK cancels them (a cancelled call's
 * outcome is unknown, so its intent inspects before any resend). Calls still waiting for a send slot are released
 * at once (nothing was sent). Equal to the default attempt timeout.
 */
export const DRAIN_GRACE_MS = 30_000;

/** The workflow worker's sizing: defaults filled in, every field checked (throws {@link ConfigError}). */
export function workerTuningOf(tuning: Partial<WorkerTuning> = {}): WorkerTuning {
  const parsed = workerTuningSchema.safeParse(withTuningDefaults(tuning), { error: wordsBesideReceived });
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    parsed.error.issues.map((issue) => {
      const field = String(issue.path[0] ?? '');
      const value = (tuning as Record<string, unknown>)[field];
      return { path: `worker.${field}`, message: issue.message, ...(value === undefined ? {} : { received: value }) };
    }),
  );
}

/** Creates (but does not run) the workers for `config`. */
export async function createWorkers(setup: WorkerSetup): Promise<RetryqWorkers> {
  const { config, connection } = setup;
  const tuning = workerTuningOf(config.worker);
  const namespace = config.temporal.namespace;
  const queues = taskQueues(config.taskQueuePrefix);
  const http = setup.http ?? new Agent({ keepAliveTimeout: 10_000, connections: 64 });
  const loadControl = setup.loadControl ?? true;
  const roles = { workflows: true, actions: true, inspect: true, ...setup.roles };
  const gates = loadControl
    ? new CredentialGates({
        client: new Client({ connection, namespace }),
        prefix: config.taskQueuePrefix,
        budgets: new Map(config.credentials.map((c) => [c.id, budgetOf(c)])),
        learning: new Map(config.credentials.map((c) => [c.id, { learn: c.learn, bucketHeader: c.bucketHeader }])),
        ...(setup.clock ? { clock: setup.clock } : {}),
        metrics: setup.metrics,
        // Bounds the wake-ups this process's workflow worker is handed; a process without one holds no intents.
        ...(roles.workflows ? { wakeUpsPerSecond: tuning.wakeUpsPerSecond } : {}),
      })
    : undefined;
  const activities = createActivities({
    http,
    credentials: credentialStore(config.credentials, setup.secrets),
    clock: setup.clock ?? Date.now,
    loadControl: gates,
  });
  const workers: Worker[] = [];
  if (roles.workflows) {
    // Both bundles at once (each is webpack in a process of its own on a machine's first start; cached after).
    const [workflowBundle, entityBundle] = await Promise.all([
      // As files: the SDK then keeps no copy of the code in this thread (see cachedWorkflowBundleFile).
      setup.workflowBundle ?? cachedWorkflowBundleFile(bundleOptions('worker-entry')),
      loadControl ? cachedWorkflowBundleFile(bundleOptions('credential')) : undefined,
    ]);
    workers.push(
      // The workflow thread's young generation is bounded (tuning.workflowThreadSemiSpaceMb): V8 would grow it to
      // 32 MB after the first burst and keep it, more than a hundred cached intents weigh (docs/operations.md).
      await withWorkflowThreadHeap(
        { semiSpaceMb: tuning.workflowThreadSemiSpaceMb, oldSpaceMb: tuning.workflowThreadOldSpaceMb },
        () =>
          Worker.create({
            connection,
            namespace,
            taskQueue: queues.workflows,
            workflowBundle,
            // Set, not derived from the heap: memory stays bounded however many intents sleep (docs/operations.md).
            maxCachedWorkflows: tuning.maxCachedWorkflows,
            maxConcurrentWorkflowTaskExecutions: tuning.workflowTaskConcurrency,
            // A dead worker's intents move to another worker this long after their next task landed on its sticky
            // queue (docs/operations.md, "Behaviour under faults"; Temporal's default is 10 s).
            stickyQueueScheduleToStartTimeout: tuning.stickyQueueTimeoutMs,
            // This queue carries no activities: the worker does not poll it for any.
            enableNonLocalActivities: false,
          }),
      ),
    );
    // The credentials' entity workflows, on their own queue: a burst of intent tasks never delays a send slot. One
    // entity per credential, each running one task at a time: sized to them, not to the SDK's defaults (a cache
    // derived from the heap, 40 task slots, 10 pollers). They run in a workflow thread of their own that loads only
    // the entity's code (`bundleOptions('credential')`), with a small heap. Not on the main thread (the SDK's `debugMode`,
    // as before): there the SDK installs a promise hook for the whole thread, so every promise of the dispatch
    // activities, the SDK's own plumbing and load control paid for it — 17 % of the worker's CPU per held intent
    // (docs/benchmarks.md, "Volume"). In a thread, the entity code also runs under the SDK's 5 s limit per
    // activation, as every workflow should.
    if (loadControl && entityBundle) {
      const entities = Math.max(2, config.credentials.length);
      workers.push(
        await withWorkflowThreadHeap(ENTITY_THREAD_HEAP, () =>
          Worker.create({
            connection,
            namespace,
            taskQueue: queues.credentials,
            workflowBundle: entityBundle,
            maxCachedWorkflows: entities,
            maxConcurrentWorkflowTaskExecutions: entities,
            maxConcurrentWorkflowTaskPolls: Math.min(entities, 4),
            stickyQueueScheduleToStartTimeout: tuning.stickyQueueTimeoutMs,
          }),
        ),
      );
    }
  }
  // One activity worker per credential and kind: its concurrency caps the credential's calls in this process.
  for (const c of config.credentials) {
    const budget = budgetOf(c);
    // [task queue, activities, concurrency, budget per minute]
    const kinds: Array<false | [string, object, number, number]> = [
      roles.actions && [
        queues.actions(c.id),
        { dispatch: activities.dispatch },
        c.concurrency,
        budget.dispatchPerMinute,
      ],
      roles.inspect && [
        queues.inspect(c.id),
        { inspect: activities.inspect },
        c.inspectConcurrency,
        budget.inspectPerMinute,
      ],
    ];
    for (const kind of kinds) {
      if (!kind) continue;
      const [taskQueue, fns, concurrency, perMinute] = kind;
      workers.push(
        await Worker.create({
          connection,
          namespace,
          taskQueue,
          activities: fns,
          maxConcurrentActivityTaskExecutions: concurrency,
          // A drain lets calls in flight finish (up to the default attempt timeout) before the SDK cancels them;
          // without it the SDK cancels every running call the moment shutdown starts.
          shutdownGraceTime: DRAIN_GRACE_MS,
          maxHeartbeatThrottleInterval: HEARTBEAT_EVERY_MS,
          // Without load control: Temporal's task-queue rate limit (applied per partition: rate ÷ partitions).
          ...(loadControl ? {} : { maxTaskQueueActivitiesPerSecond: perMinute / 60 }),
        }),
      );
    }
  }
  return {
    workers,
    gates,
    run: async () => {
      // The workflow worker's main-thread heap, grown by a burst of workflow tasks, is given back once it idles.
      const workflowWorker = roles.workflows ? workers[0] : undefined;
      const release =
        workflowWorker && tuning.heapReleaseAfterBurstMb > 0
          ? releaseHeapAfterBursts({
              busy: () => workflowWorker.getStatus().numInFlightWorkflowActivations > 0,
              growthMb: tuning.heapReleaseAfterBurstMb,
              onRelease: (before, after) => {
                Runtime.instance().logger.debug(
                  `retryq: gave back the main thread's heap after a burst of workflow tasks (${Math.round(before)} → ${Math.round(after)} MB)`,
                );
              },
            })
          : undefined;
      await Promise.all(workers.map((w) => w.run())).finally(() => release?.stop());
      if (!setup.http) await http.close();
    },
    shutdown: () => {
      // First release the activities waiting for a send slot (they send nothing and are held): their credential's
      // entity may stop answering as the workflow workers stop, and the drain would wait for them forever.
      gates?.close();
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    },
  };
}
