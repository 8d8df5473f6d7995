// @ts-check
/**
 * A worker process of `npm run bench:scale`, forked by bench/scale.ts so that its memory and CPU are measured on
 * their own. Plain JavaScript run by plain `node` on the built package (dist/), as `retryq worker` runs in
 * production: no TypeScript loader thread or transpile cache in the measured process. One message starts it (a
 * `WorkerSpec`, see bench/scale.ts), `'stop'` drains and ends it. Its Temporal metrics are served in Prometheus format
 * on `metricsPort` (workflow tasks run, workflows completed, cache hits and misses).
 *
 * - `retryq`: retryq's production workers (`createWorkers` from dist/worker.js: workflows, credentials, dispatch and
 *   inspection queues of one credential), with the given worker tuning or the defaults.
 * - `bare`: one plain Temporal worker with the baseline workflows (bench/scale-workflows.ts, bundled by the SDK) and
 *   their one activity (the same HTTP request retryq sends), SDK defaults except the activity slots, which match the
 *   credential's concurrency; with `ownActivityQueue`, a second worker serves the activity on `<queue>-activities`
 *   (part b's `bareOwnQueue` side).
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NativeConnection, Runtime, Worker, makeTelemetryFilterString } from '@temporalio/worker';
import { Agent, request } from 'undici';
import { RetryqLogger } from '../dist/temporal/runtime.js';
import { cachedWorkflowBundle } from '../dist/temporal/workflow-bundle.js';
import { createWorkers } from '../dist/worker.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** `BENCH_WORKER_MEMORY=1`: each thread's V8 heap on request (bench/scale-memory-probe.mjs); off, nothing is loaded. */
const memoryProbe = process.env['BENCH_WORKER_MEMORY'] === '1' ? await import('./scale-memory-probe.mjs') : undefined;
memoryProbe?.install();

/** The bare baseline's one activity: POST, JSON body, Idempotency-Key, through a keep-alive pool. */
function createBareActivities() {
  const dispatcher = new Agent({ keepAliveTimeout: 10_000, connections: 64 });
  return {
    /** @param {string} url @param {string} key */
    async call(url, key) {
      const res = await request(url, {
        method: 'POST',
        dispatcher,
        headers: { 'content-type': 'application/json', 'idempotency-key': key, authorization: 'Bearer bench' },
        body: JSON.stringify({ amount: 1200, currency: 'eur', order: key }),
      });
      await res.body.text();
      return res.statusCode;
    },
    /** Part a's like-for-like sleeper's gate check: an answer from memory, as retryq's `gateHint` gives. */
    async heldHint() {
      return 'held';
    },
  };
}

/** @param {any} spec */
async function start(spec) {
  Runtime.install({
    // retryq worker's logger: the SDK's notes about single-role workers (by design here) stay out of the bench's output.
    logger: new RetryqLogger('WARN'),
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
    inputs: [path.join(here, 'scale-workflows.ts')],
  });
  /** @param {string} taskQueue @param {object} [more] */
  const bareWorker = (taskQueue, more) =>
    Worker.create({
      connection,
      namespace: spec.namespace,
      taskQueue,
      activities: createBareActivities(),
      maxConcurrentActivityTaskExecutions: spec.credential.concurrency,
      ...more,
    });
  const workers = [await bareWorker(spec.queue, { workflowBundle })];
  // Part b's own-queue sides: the activity also served on a task queue of its own.
  if (spec.ownActivityQueue) workers.push(await bareWorker(`${spec.queue}-activities`));
  return {
    run: Promise.all(workers.map((w) => w.run())).then(() => undefined),
    stop: () => workers.forEach((w) => w.shutdown()),
  };
}

/** @type {{ run: Promise<void>; stop: () => void } | undefined} */
let running;
process.on('message', (/** @type {any} */ msg) => {
  if (msg === 'memory' || msg === 'memory-after-gc') {
    // 'memory-after-gc' with `--expose-gc` in BENCH_WORKER_NODE_ARGS: after a full GC in every thread (what is live).
    void (async () => {
      const memory = await memoryProbe?.probe(msg === 'memory-after-gc');
      // BENCH_WORKER_SNAPSHOT=<dir>: the main thread's heap snapshot at each probe, for a closer look.
      const dir = process.env['BENCH_WORKER_SNAPSHOT'];
      if (memory && dir) (await import('node:v8')).writeHeapSnapshot(path.join(dir, `main-${Date.now()}.heapsnapshot`));
      process.send?.({ memory });
    })();
    return;
  }
  if (msg === 'stop') {
    running?.stop();
    void (running?.run ?? Promise.resolve()).finally(() => process.exit(0));
    return;
  }
  start(msg).then(
    (r) => {
      running = r;
      r.run.catch((/** @type {unknown} */ err) => {
        process.send?.({ failed: String(err) });
        process.exit(1);
      });
      process.send?.({ ready: true });
    },
    (/** @type {unknown} */ err) => {
      process.send?.({ failed: String(err) });
      process.exit(1);
    },
  );
});
process.on('disconnect', () => process.exit(0));
