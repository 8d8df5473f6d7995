/**
 * A worker process of `npm run bench:scale`, forked by bench/scale.ts so that its memory and CPU are measured on
 * their own. One message starts it (`WorkerSpec`), `'stop'` drains and ends it. Its Temporal metrics are served in
 * Prometheus format on `metricsPort` (workflow tasks run, workflows completed, cache hits and misses).
 *
 * - `retryq`: retryq's production workers (`createWorkers`: workflows, dispatch and inspection queues of one
 *   credential), with the given worker tuning or the defaults.
 * - `bare`: one plain Temporal worker with the baseline workflows (bench/scale-workflows.ts) and their one
 *   activity, SDK defaults except the activity slots, which match the credential's concurrency.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, NativeConnection, Runtime, Worker, makeTelemetryFilterString } from '@temporalio/worker';
import type { CredentialConfig, WorkerTuning } from '../src/config.js';
import { cachedWorkflowBundle } from '../src/temporal/workflow-bundle.js';
import { createWorkers } from '../src/worker.js';
import { createBareActivities } from './scale-activities.js';

export interface WorkerSpec {
  mode: 'retryq' | 'bare';
  address: string;
  namespace: string;
  metricsPort: number;
  /** retryq: the task-queue prefix. bare: the task queue. */
  queue: string;
  credential: CredentialConfig;
  tuning?: Partial<WorkerTuning> | undefined;
}

const here = path.dirname(fileURLToPath(import.meta.url));

async function start(spec: WorkerSpec): Promise<{ run: Promise<void>; stop: () => void }> {
  Runtime.install({
    logger: new DefaultLogger('WARN'),
    shutdownSignals: [],
    telemetryOptions: {
      logging: { filter: makeTelemetryFilterString({ core: 'ERROR', other: 'WARN' }) },
      metrics: { prometheus: { bindAddress: `127.0.0.1:${spec.metricsPort}` } },
    },
  });
  const connection = await NativeConnection.connect({ address: spec.address });
  if (spec.mode === 'retryq') {
    const workers = await createWorkers({
      config: {
        taskQueuePrefix: spec.queue,
        credentials: [spec.credential],
        temporal: {
          external: true,
          address: spec.address,
          namespace: spec.namespace,
          connect: { connectionOptions: { address: spec.address } },
        },
        ...(spec.tuning ? { worker: spec.tuning } : {}),
      },
      connection,
      secrets: new Map([[spec.credential.id, 'bench-secret']]),
    });
    return { run: workers.run(), stop: () => workers.shutdown() };
  }
  const workflowBundle = await cachedWorkflowBundle({
    workflowsPath: path.join(here, 'scale-workflows.ts'),
    inputs: [path.join(here, 'scale-workflows.ts'), path.join(here, 'scale-activities.ts')],
  });
  const worker = await Worker.create({
    connection,
    namespace: spec.namespace,
    taskQueue: spec.queue,
    workflowBundle,
    activities: createBareActivities(),
    maxConcurrentActivityTaskExecutions: spec.credential.concurrency,
  });
  return { run: worker.run(), stop: () => worker.shutdown() };
}

let running: { run: Promise<void>; stop: () => void } | undefined;
process.on('message', (msg: WorkerSpec | 'stop') => {
  if (msg === 'stop') {
    running?.stop();
    void (running?.run ?? Promise.resolve()).finally(() => process.exit(0));
    return;
  }
  start(msg).then(
    (r) => {
      running = r;
      r.run.catch((err: unknown) => {
        process.send?.({ failed: String(err) });
        process.exit(1);
      });
      process.send?.({ ready: true });
    },
    (err: unknown) => {
      process.send?.({ failed: String(err) });
      process.exit(1);
    },
  );
});
process.on('disconnect', () => process.exit(0));
