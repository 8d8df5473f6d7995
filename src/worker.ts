/**
 * `retryq/worker`: retryq's workers for the task-queue topology, and the configuration they run from.
 *
 * - one worker on `<prefix>.workflows` for the intent workflows;
 * - per credential, one worker on `<prefix>.actions.<credential>` running the dispatch activity, rate-limited
 *   across all workers by Temporal's task-queue rate limit (`requestsPerMinute`), with `concurrency` slots;
 * - per credential, one worker on `<prefix>.inspect.<credential>` running the inspection activity, with its own
 *   rate limit and slots, so a pile of rejected dispatches can never starve the inspections that resolve them.
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
import { Worker } from '@temporalio/worker';
import type { NativeConnection, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { Agent } from 'undici';
import type { Dispatcher } from 'undici';
import { createActivities } from './activities/index.js';
import type { CredentialStore } from './activities/index.js';
import { ConfigError, defaultWorkerTuning, workerTuningSchema } from './config.js';
import type { CredentialConfig, RetryqConfig, WorkerTuning } from './config.js';
import { cachedWorkflowBundle } from './temporal/workflow-bundle.js';
import { taskQueues } from './task-queues.js';

export { ConfigError, CONFIG_VARIABLES, loadConfig, resolveSecrets } from './config.js';
export type { ConfigProblem, CredentialConfig, RetryqConfig, TemporalConfig, WorkerTuning } from './config.js';
export { defaultWorkerTuning } from './config.js';
export { TemporalUnreachable, connectWorker } from './temporal/connect.js';
export { taskQueues } from './task-queues.js';
export type { TaskQueues } from './task-queues.js';

/** The folder of this module: `src/` when run from the sources, `dist/` in the built package. */
const codeDir = path.dirname(fileURLToPath(import.meta.url));

/**
 * The intent workflows' bundle, cached on disk and keyed by the code it contains. Works from the sources
 * (`src/workflows/index.ts`) and from the built package (`dist/workflows/index.js`).
 */
export function intentWorkflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  const entry = path.join(codeDir, 'workflows', `index${path.extname(fileURLToPath(import.meta.url))}`);
  return cachedWorkflowBundle({ workflowsPath: entry, inputs: [codeDir] });
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

export interface WorkerSetup {
  /** `worker` (cache size, workflow-task concurrency) defaults to {@link defaultWorkerTuning}. */
  config: Pick<RetryqConfig, 'taskQueuePrefix' | 'credentials' | 'temporal'> & { worker?: Partial<WorkerTuning> };
  connection: NativeConnection;
  /** Credential id → secret (see `resolveSecrets`). */
  secrets: ReadonlyMap<string, string>;
  /** HTTP pool for provider calls. @default a keep-alive undici Agent */
  http?: Dispatcher;
  /** @default Date.now */
  clock?: () => number;
  /** @default the cached bundle of src/workflows */
  workflowBundle?: WorkflowBundleWithSourceMap;
  /** Which roles to run. @default all three */
  roles?: { workflows?: boolean; actions?: boolean; inspect?: boolean };
}

export interface RetryqWorkers {
  readonly workers: readonly Worker[];
  /** Runs every worker until {@link shutdown}; rejects if any worker fails. */
  run(): Promise<void>;
  /** Starts a graceful shutdown: stop polling, let in-flight tasks finish (drain). */
  shutdown(): void;
}

/** The workflow worker's sizing: defaults filled in, every field checked (throws {@link ConfigError}). */
export function workerTuningOf(tuning: Partial<WorkerTuning> = {}): WorkerTuning {
  const parsed = workerTuningSchema.safeParse({ ...defaultWorkerTuning, ...tuning });
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    parsed.error.issues.map((issue) => {
      const field = String(issue.path[0] ?? '');
      const value = (tuning as Record<string, unknown>)[field];
      return {
        variable: `worker.${field}`,
        value: value === undefined ? undefined : JSON.stringify(value),
        rule: issue.message,
      };
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
  const activities = createActivities({
    http,
    credentials: credentialStore(config.credentials, setup.secrets),
    clock: setup.clock ?? Date.now,
  });
  const roles = { workflows: true, actions: true, inspect: true, ...setup.roles };
  const workers: Worker[] = [];
  if (roles.workflows) {
    workers.push(
      await Worker.create({
        connection,
        namespace,
        taskQueue: queues.workflows,
        workflowBundle: setup.workflowBundle ?? (await intentWorkflowBundle()),
        // Set, not derived from the heap: memory stays bounded however many intents sleep (docs/operations.md).
        maxCachedWorkflows: tuning.maxCachedWorkflows,
        maxConcurrentWorkflowTaskExecutions: tuning.workflowTaskConcurrency,
      }),
    );
  }
  for (const c of config.credentials) {
    if (roles.actions)
      workers.push(
        await Worker.create({
          connection,
          namespace,
          taskQueue: queues.actions(c.id),
          activities: { dispatch: activities.dispatch },
          maxConcurrentActivityTaskExecutions: c.concurrency,
          // Server-side, across every worker polling this queue: the credential's request budget.
          maxTaskQueueActivitiesPerSecond: c.requestsPerMinute / 60,
        }),
      );
    if (roles.inspect)
      workers.push(
        await Worker.create({
          connection,
          namespace,
          taskQueue: queues.inspect(c.id),
          activities: { inspect: activities.inspect },
          maxConcurrentActivityTaskExecutions: c.inspectConcurrency,
          maxTaskQueueActivitiesPerSecond: c.inspectRequestsPerMinute / 60,
        }),
      );
  }
  return {
    workers,
    run: async () => {
      await Promise.all(workers.map((w) => w.run()));
      if (!setup.http) await http.close();
    },
    shutdown: () => {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    },
  };
}
