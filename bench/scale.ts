/**
 * Volume benchmark of retryq against bare Temporal on the same machine (`npm run bench:scale`). Prints one JSON
 * object to stdout; progress goes to stderr.
 *
 * Every part runs against its own Temporal dev server (in memory, free ports) started by this process; workers run
 * in forked child processes (bench/scale-worker.mjs: plain `node` on the built dist/, as `retryq worker` runs in
 * production) so their memory and CPU are measured per process; the provider
 * is a small HTTP server in this process. Parts, each with its baseline in the same run:
 *
 * a. **sleeping**: `--intents` intents submitted (`--in-flight` at a time) against a provider that answers
 *    429 `Retry-After: 3600`, so each dispatches once and sleeps. Reported: time until all sleep, `submit` latency,
 *    worker and dev-server RSS once settled, CPU per intent. Baselines: a bare workflow that starts and blocks on a
 *    timer (`workflow.start` latency, the goal's baseline) and a bare workflow that makes the same HTTP call in one
 *    activity and then sleeps (the like-for-like path), and `bareTimerRecorded`: the bare timer recording what
 *    DESIGN.md requires of a held intent on its way to sleep (a patch with the version upsert the SDK adds, one local
 *    activity's answer, the visible phase at the start and one upsert to `waiting`), so that retryq's ratio to it is
 *    what retryq costs beyond its required recording (`settleRatioVsBareTimerRecorded`) and its ratio to the bare
 *    timer is what that recording costs (`recordedSettleRatioVsBareTimer`). Every side runs all the time, and they
 *    take turns in `--a-batches` batches (alternating which goes first), so a machine that gets busier during the run
 *    weighs on each side alike; a side's settle time is the sum of its batches' (`batchSettleS`), and retryq's batches
 *    are also compared with each bare timer's pair by pair (`settlePairRatiosVsBareTimer`,
 *    `settlePairRatiosVsBareTimerRecorded` and their medians).
 * b. **throughput**: `--complete` intents against a provider that answers 200 at once, retryq and a bare workflow
 *    with one activity making the same HTTP call, interleaved over `--rounds` rounds; completed per second and
 *    worker CPU per completed intent. `--b-sides retryq,bare,bareOwnQueue,bareUpserts,bareOwnQueueUpserts` adds the
 *    decomposition sides: the bare workflow with its activity on a task queue of its own (as retryq's dispatch runs on
 *    its credential's queue, so it is not handed out eagerly with the workflow task), the bare workflow with a
 *    successful intent's two search-attribute upserts, and both at once (`bareOwnQueueUpserts`: the bare workflow
 *    paying the two costs DESIGN.md requires of an intent); `bareWatchedUpserts` adds the dispatch's two further
 *    required timeouts (schedule-to-start, heartbeat: a server timer each). Each is reported as a ratio to bare, pair by
 *    pair, and each round reports the dev server's work per intent (`devServerWorkPerIntent`: persistence calls and
 *    history tasks by operation, from the server's own metrics; tasks a round caused may be counted in the next).
 * c. **wake-up storm**: `--wake` intents put to sleep until one common time (Retry-After pointing at it), then
 *    woken together, with the credential's budget set to `--wake-budget` requests per minute. Reported: time until
 *    all are dispatched and completed, workflow-task latency p50/p99 (from the histories), workflow-task timeouts
 *    and failures (counted in every history), the most dispatches in any 60 s and 1 s window against the budget,
 *    and the worker's cache hits and misses (replays).
 *
 * Each part reports the CPU each process used (in cores) while it ran: what is near 1.0 (or the machine's total
 * near its core count) is what limits the figure.
 *
 * Flags: `--intents N` (default 1000; 10000 for the goal measurement), `--complete N` (500), `--rounds N` (2),
 * `--a-batches N` (part a; default one per 1,000 intents, at most 10), `--wake N` (default: --intents),
 * `--wake-budget N` (requests/min, default 3000), `--in-flight N` (50), `--cache N` (retryq's maxCachedWorkflows),
 * `--task-concurrency N` (its workflow-task concurrency) and `--sticky-timeout MS` (its sticky-queue schedule-to-start
 * timeout), `--semi-space MB` (its workflow thread's young-generation semi-space), `--old-space MB` (its workflow
 * thread's old-generation limit), `--heap-release MB` (the main-thread heap growth after which an idle worker collects
 * garbage), `--wake-rate N` (its wake-ups per second, `wakeUpsPerSecond`), all defaulting to retryq's defaults,
 * `--wake-after S` (part c: the common wake time, seconds after the first submit; default: from the settle rate),
 * `--only a,b,c`,
 * `--sides retryq,bareTimer,bareTimerRecorded,bareCallThenTimer[,bareDelayedStart]` (part a; the first four by
 * default; `bareDelayedStart` is the bare sleeper started with a one-hour start delay and the phase `waiting`: no
 * workflow task until then, what holding an intent at `submit` instead of in its first workflow task would cost),
 * `--b-sides retryq,bare[,bareOwnQueue][,bareUpserts][,bareOwnQueueUpserts][,bareWatchedUpserts]` (part b).
 * `BENCH_SERVER_ARGS="…"`: further arguments for the bench's dev servers (e.g. `--dynamic-config-value K=V`).
 * `BENCH_SA_REFRESH_ON_READ=1`: the dev servers read search-attribute definitions from their database on every start
 * and upsert (the Temporal CLI's default; `retryq dev` caches them, as production servers do).
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import { RetryqClient, workflowIdOf } from '../src/client.js';
import { credentialSchema, defaultWorkerTuning } from '../src/config.js';
import type { CredentialConfig, WorkerTuning } from '../src/config.js';
import type { IntentInput } from '../src/intent.js';
import { nextAttemptAtKey, retryPhaseKey } from '../src/search-attributes.js';
import { resolveTemporalCli } from '../src/temporal/binaries.js';
import { registerSearchAttributes } from '../src/temporal/register-search-attributes.js';
import { freePort, startDevServer } from '../src/temporal/server-process.js';
import type { ManagedServer } from '../src/temporal/server-process.js';
// The median (mean of the two middle values for an even count; not `percentile`'s lower middle), shared with the
// goals runner's verdict.
import { median } from './scale-goals-summary.js';

const here = path.dirname(fileURLToPath(import.meta.url));

// ---- flags ------------------------------------------------------------------------------------------------------

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 0) {
    console.error(`--${name} must be a whole number (got ${process.argv[i + 1] ?? 'nothing'})`);
    process.exit(2);
  }
  return v;
}

/** A worker-tuning flag: its value when given (retryq's default if it has none), else undefined (the worker's own). */
function tuningFlag(name: string, field: keyof typeof defaultWorkerTuning): number | undefined {
  return process.argv.includes(`--${name}`) ? flag(name, defaultWorkerTuning[field]) : undefined;
}
const onlyAt = process.argv.indexOf('--only');
const only = new Set((onlyAt >= 0 ? (process.argv[onlyAt + 1] ?? '') : 'a,b,c').split(','));
const opts = {
  intents: flag('intents', 1000),
  complete: flag('complete', 500),
  rounds: flag('rounds', 2),
  wake: flag('wake', flag('intents', 1000)),
  wakeBudget: flag('wake-budget', 3000),
  inFlight: flag('in-flight', 50),
  cache: tuningFlag('cache', 'maxCachedWorkflows'),
  taskConcurrency: tuningFlag('task-concurrency', 'workflowTaskConcurrency'),
  stickyTimeoutMs: tuningFlag('sticky-timeout', 'stickyQueueTimeoutMs'),
  semiSpaceMb: tuningFlag('semi-space', 'workflowThreadSemiSpaceMb'),
  oldSpaceMb: tuningFlag('old-space', 'workflowThreadOldSpaceMb'),
  heapReleaseMb: tuningFlag('heap-release', 'heapReleaseAfterBurstMb'),
  wakeRate: tuningFlag('wake-rate', 'wakeUpsPerSecond'),
  /** Part a: batches taking turns between the sides (default: one per 1,000 intents, at most 10). */
  aBatches: flag('a-batches', Math.min(10, Math.max(1, Math.round(flag('intents', 1000) / 1000)))),
  /** Part c: seconds from the first submit to the common wake time (default: estimated from the settle rate). */
  wakeAfterS: process.argv.includes('--wake-after') ? flag('wake-after', 0) : undefined,
};
/** Part b's sides: retryq and bare always; the decomposition sides on request (`--b-sides`). */
const bSidesAt = process.argv.indexOf('--b-sides');
const allBSides = [
  'retryq',
  'bare',
  'bareOwnQueue',
  'bareUpserts',
  'bareOwnQueueUpserts',
  'bareWatchedUpserts',
] as const;
type BSide = (typeof allBSides)[number];
const bSides: BSide[] = (() => {
  const asked = bSidesAt < 0 ? ['retryq', 'bare'] : (process.argv[bSidesAt + 1] ?? '').split(',');
  const unknown = asked.filter((x) => !(allBSides as readonly string[]).includes(x));
  if (unknown.length > 0 || !asked.includes('retryq') || !asked.includes('bare')) {
    console.error(
      `--b-sides takes retryq and bare plus any of ${allBSides.slice(2).join(', ')}, comma-separated (got ${asked.join(',')})`,
    );
    process.exit(2);
  }
  return allBSides.filter((x) => asked.includes(x));
})();
const sidesAt = process.argv.indexOf('--sides');
const allSides = ['bareTimer', 'retryq', 'bareTimerRecorded', 'bareCallThenTimer', 'bareDelayedStart'] as const;
/** Sides run only when `--sides` names them. */
const onRequestSides: readonly string[] = ['bareDelayedStart'];
const sides = allSides.filter((side) =>
  sidesAt < 0 ? !onRequestSides.includes(side) : (process.argv[sidesAt + 1] ?? '').split(',').includes(side),
);
/** The worker tuning the flags set (undefined when none: the worker's own defaults). */
const givenTuning: Partial<WorkerTuning> = Object.fromEntries(
  Object.entries({
    maxCachedWorkflows: opts.cache,
    workflowTaskConcurrency: opts.taskConcurrency,
    stickyQueueTimeoutMs: opts.stickyTimeoutMs,
    workflowThreadSemiSpaceMb: opts.semiSpaceMb,
    workflowThreadOldSpaceMb: opts.oldSpaceMb,
    heapReleaseAfterBurstMb: opts.heapReleaseMb,
    wakeUpsPerSecond: opts.wakeRate,
  }).filter(([, value]) => value !== undefined),
);
const tuning = Object.keys(givenTuning).length > 0 ? givenTuning : undefined;
const log = (msg: string) => process.stderr.write(`[bench:scale ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

// ---- measuring processes ----------------------------------------------------------------------------------------

const pageSize = 4096;
const ticksPerSecond = 100;
/** Resident set size of a process, in MB. */
function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m
    ? Math.round(Number(m[1]) / 1024)
    : Math.round((Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) * pageSize) / 2 ** 20);
}
/** CPU seconds (user + system) a process has used. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}
/** CPU use of several processes over a stretch of wall time, in cores. */
function cpuMeter(pids: Record<string, number>) {
  const start = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
  const t0 = performance.now();
  const load0 = os.loadavg()[0]!;
  return () => {
    const wallS = (performance.now() - t0) / 1000;
    const cores = Object.fromEntries(
      Object.entries(pids).map(([k, pid]) => [k, round2((cpuSeconds(pid) - start[k]!) / wallS)]),
    );
    const seconds = Object.fromEntries(
      Object.entries(pids).map(([k, pid]) => [k, round2(cpuSeconds(pid) - start[k]!)]),
    );
    return { cores, cpuSeconds: seconds, machineLoad1m: round2(Math.max(load0, os.loadavg()[0]!)) };
  };
}

const round2 = (x: number) => Math.round(x * 100) / 100;
function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return round2(sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!);
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- the provider -----------------------------------------------------------------------------------------------

/**
 * What the provider answers: `/sleep-<side>/…` 429 Retry-After 3600 (each side of part a on its own path, so that
 * each side's calls are counted while the sides take turns), `/ok/…` 200, `/wake/…` 429 until `wakeAtMs`, then 200.
 */
class Provider {
  wakeAtMs = Number.POSITIVE_INFINITY;
  readonly counts = new Map<string, number>();
  /** Receive times of `/wake` requests answered 200. */
  readonly wakeDispatches: number[] = [];
  private server!: http.Server;
  url = '';

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const now = Date.now();
        const kind = (req.url ?? '/').split('/')[1] ?? '';
        this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
        const answer = (status: number, headers: Record<string, string> = {}) => {
          res.writeHead(status, { 'content-type': 'application/json', ...headers });
          res.end(status === 200 ? '{"id":"op_1","status":"succeeded"}' : '{"error":{"code":"rate_limited"}}');
        };
        if (kind.startsWith('sleep-')) return answer(429, { 'retry-after': '3600' });
        if (kind === 'wake') {
          if (now < this.wakeAtMs)
            return answer(429, { 'retry-after': String(Math.ceil((this.wakeAtMs - now) / 1000)) });
          this.wakeDispatches.push(now);
          return answer(200);
        }
        if (kind === 'ok') return answer(200);
        // Inspections (`/ops/<key>`, after an attempt whose answer was lost): the operation did not happen.
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":{"code":"not_found"}}');
      });
    });
    this.server.keepAliveTimeout = 30_000;
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  count(kind: string): number {
    return this.counts.get(kind) ?? 0;
  }
  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

// ---- servers and workers ----------------------------------------------------------------------------------------

interface Env {
  server: ManagedServer;
  connection: Connection;
  client: Client;
  /** The dev server's own Prometheus metrics (persistence calls and history tasks, by operation). */
  serverMetricsPort: number;
}

const children = new Set<ChildProcess>();
const servers = new Set<ManagedServer>();

async function startEnv(): Promise<Env> {
  const cli = await resolveTemporalCli();
  if (!cli.path) throw new Error('no Temporal CLI: run `npx tsx src/cli.ts doctor` first');
  const serverMetricsPort = await freePort();
  const server = await startDevServer({
    cliPath: cli.path,
    logLevel: 'error',
    // What `retryq dev` runs: search-attribute definitions cached, as on a production server. `BENCH_SA_REFRESH_ON_READ=1`:
    // read from the database on every start and upsert, the Temporal CLI's own dev-server default.
    refreshSearchAttributesOnRead: process.env['BENCH_SA_REFRESH_ON_READ'] === '1',
    extraArgs: [
      '--metrics-port',
      String(serverMetricsPort),
      ...(process.env['BENCH_SERVER_ARGS'] ?? '').split(' ').filter(Boolean),
    ],
  });
  servers.add(server);
  const connection = await Connection.connect({ address: server.address });
  await registerSearchAttributes(connection, 'default');
  return { server, connection, client: new Client({ connection, namespace: 'default' }), serverMetricsPort };
}

async function stopEnv(env: Env): Promise<void> {
  await env.connection.close();
  await env.server.stop();
  servers.delete(env.server);
}

/** What a forked worker (bench/scale-worker.mjs) is told to run. */
export interface WorkerSpec {
  mode: 'retryq' | 'bare';
  address: string;
  namespace: string;
  metricsPort: number;
  /** retryq: the task-queue prefix. bare: the task queue. */
  queue: string;
  credential: CredentialConfig;
  tuning?: Partial<WorkerTuning> | undefined;
  /** bare: also serve the activity on `<queue>-activities` (part b's `bareOwnQueue` side). */
  ownActivityQueue?: boolean;
}

interface WorkerChild {
  pid: number;
  /** Each thread's V8 heap next to the RSS, with `BENCH_WORKER_MEMORY=1` (bench/scale-memory-probe.mjs); else undefined. */
  memory: (afterGc?: boolean) => Promise<unknown>;
  metrics: () => Promise<Metrics>;
  stop: () => Promise<void>;
}

async function startWorker(
  env: Env,
  spec: Omit<WorkerSpec, 'address' | 'namespace' | 'metricsPort'>,
): Promise<WorkerChild> {
  const metricsPort = await freePort();
  const child = fork(path.join(here, 'scale-worker.mjs'), [], {
    // Extra node flags for the worker processes only (e.g. `--cpu-prof --cpu-prof-dir=…` to see where their CPU goes).
    execArgv: (process.env['BENCH_WORKER_NODE_ARGS'] ?? '').split(' ').filter(Boolean),
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  children.add(child);
  child.send({ ...spec, address: env.server.address, namespace: 'default', metricsPort } satisfies WorkerSpec);
  const [reply] = (await once(child, 'message')) as [{ ready?: true; failed?: string }];
  if (!reply.ready) throw new Error(`the ${spec.mode} worker did not start: ${reply.failed ?? 'no reason'}`);
  return {
    pid: child.pid!,
    metrics: () => scrapeWorker(metricsPort),
    memory: async (afterGc = false) => {
      if (process.env['BENCH_WORKER_MEMORY'] !== '1') return undefined;
      const answer = new Promise<unknown>((resolve) => {
        const onMessage = (msg: { memory?: unknown }) => {
          if (!('memory' in msg)) return;
          child.off('message', onMessage);
          resolve(msg.memory);
        };
        child.on('message', onMessage);
      });
      child.send(afterGc ? 'memory-after-gc' : 'memory');
      return answer;
    },
    stop: async () => {
      const exited = once(child, 'exit');
      child.send('stop');
      await exited;
      children.delete(child);
    },
  };
}

/** The worker's Temporal metrics, summed over labels. */
type Metrics = Map<string, number>;
/**
 * A process's Prometheus metrics, each summed over its labels; the metrics named in `byOperation` are also summed by
 * their `operation` label, as `<prefix>:<operation>`.
 */
async function scrape(port: number, byOperation: Readonly<Record<string, string>>): Promise<Metrics> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out: Metrics = new Map();
  const add = (key: string, value: number) => out.set(key, (out.get(key) ?? 0) + value);
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (!m) continue;
    add(m[1]!, Number(m[3]));
    const prefix = byOperation[m[1]!];
    const op = prefix ? /[{,]operation="([A-Za-z]+)"/.exec(m[2] ?? '') : null;
    if (op) add(`${prefix}:${op[1]!}`, Number(m[3]));
  }
  return out;
}

/** A worker's metrics: its calls to the server by operation (`rpc:PollWorkflowTaskQueue`), from the SDK's counters. */
const scrapeWorker = (port: number) => scrape(port, { temporal_request: 'rpc', temporal_long_request: 'rpc' });

/**
 * The dev server's metrics: its persistence calls (`db:<operation>`, every service) and the history tasks it
 * processed (`task:<operation>`: transfer, timer and visibility queues).
 */
const scrapeServer = (port: number) => scrape(port, { persistence_requests: 'db', task_requests: 'task' });

/** How much each counter whose key `name` accepts grew between two scrapes, per completed workflow, under that name. */
function grownPer(
  before: Metrics,
  after: Metrics,
  n: number,
  name: (key: string) => string | undefined,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of [...after].sort(([x], [y]) => x.localeCompare(y))) {
    const as = name(k);
    const grown = v - (before.get(k) ?? 0);
    if (as !== undefined && grown > 0) out[as] = round2(grown / n);
  }
  return out;
}

/** Server calls a worker made between two scrapes, per completed workflow, by operation (polls left out). */
const rpcsPer = (before: Metrics, after: Metrics, n: number) =>
  grownPer(before, after, n, (k) => (k.startsWith('rpc:') && !k.startsWith('rpc:Poll') ? k.slice(4) : undefined));

/** What the dev server did between two scrapes, per completed workflow, by kind and operation. */
const serverWorkPer = (before: Metrics, after: Metrics, n: number) =>
  grownPer(before, after, n, (k) => (k.startsWith('db:') || k.startsWith('task:') ? k : undefined));

const metric = (m: Metrics, name: string) => m.get(`temporal_${name}`) ?? m.get(name) ?? 0;
const wftDone = (m: Metrics) => metric(m, 'workflow_task_execution_latency_count');
const completed = (m: Metrics) => metric(m, 'workflow_completed');
/** retryq intents that went to sleep held by load control or answered 429 (the intent workflow's own counters). */
const asleepCounted = (m: Metrics) =>
  // The bench worker's exporter names counters without Prometheus's `_total` suffix (bench/scale-worker.mjs).
  metric(m, 'retryq_dispatches_held') + metric(m, 'retryq_rate_limited_answers');

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<number> {
  const t0 = performance.now();
  while (!(await check())) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
  return performance.now();
}

/** Runs `count` calls with at most `inFlight` at once; returns each call's latency in ms. */
async function pool(count: number, inFlight: number, call: (i: number) => Promise<unknown>): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(inFlight, count) }, async () => {
      while (next < count) {
        const i = next++;
        const t = performance.now();
        await call(i);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return latencies;
}

function credential(requestsPerMinute: number): CredentialConfig {
  return credentialSchema.parse({
    id: 'bench',
    secretEnv: 'BENCH_KEY',
    requestsPerMinute,
    concurrency: 50,
    inspectConcurrency: 4,
  });
}

function intent(provider: Provider, kind: string, key: string): IntentInput {
  return {
    idempotencyKey: key,
    credential: 'bench',
    action: {
      method: 'POST',
      url: `${provider.url}/${kind}/${key}`,
      body: { amount: 1200, currency: 'eur', order: key },
    },
    inspection: { url: `${provider.url}/ops/{idempotencyKey}` },
    deadline: '2h',
  };
}

// ---- a. sleeping ------------------------------------------------------------------------------------------------

type Side = (typeof allSides)[number];

/**
 * One side of part a, set up and kept running so that its batches can interleave with the other sides' (see
 * {@link sleeping}): its own dev server and worker, and what it has measured so far.
 */
async function sleepingSide(side: Side, provider: Provider) {
  const env = await startEnv();
  const queue = `scale-a-${side}`;
  let worker: WorkerChild;
  try {
    worker = await startWorker(env, {
      mode: side === 'retryq' ? 'retryq' : 'bare',
      queue,
      credential: credential(1_000_000),
      tuning,
    });
  } catch (err) {
    await stopEnv(env);
    throw err;
  }
  await sleep(2000);
  const idle = { workerMb: rssMb(worker.pid), devServerMb: rssMb(env.server.pid) };
  const idleMemory = await worker.memory();
  const wft0 = wftDone(await worker.metrics());
  const retryq = new RetryqClient({ client: env.client, taskQueuePrefix: queue, requireServedCredential: false });
  const calls0 = provider.count(`sleep-${side}`);
  const seen0 = side === 'retryq' ? asleepCounted(await worker.metrics()) : 0;
  // The bare sleepers make no provider call; asleep = every workflow task up to the timer has run: 1 per bare sleeper
  // (the recorded one's local activity runs within its task), 2 per workflow with a call first.
  const timerOnly = side === 'bareTimer' || side === 'bareTimerRecorded' || side === 'bareDelayedStart';
  // A delayed start runs no workflow task before its time: it sleeps once the server has recorded its start.
  const tasksPerWorkflow = side === 'bareDelayedStart' ? 0 : timerOnly ? 1 : 2;
  const latencies: number[] = [];
  const cpuSeconds: Record<string, number> = {};
  let settledMs = 0;
  /** Each batch's settle time, in the order the batches ran (for the pair ratios between sides). */
  const batchSettleS: number[] = [];
  let workerSettledMs = 0;
  let submittedMs = 0;
  let asleep = 0;
  /** retryq intents `submit` held (their credential's gate was closed): asleep on the server, no task of theirs. */
  let heldAtSubmit = 0;
  return {
    side,
    /** Puts `count` more to sleep (keys `from`…) and waits until they all sleep; adds to the side's totals. */
    async batch(from: number, count: number): Promise<void> {
      const cpu = cpuMeter({ worker: worker.pid, devServer: env.server.pid, bench: process.pid });
      const t0 = performance.now();
      log(`a/${side}: putting ${count} to sleep (${asleep} asleep)`);
      latencies.push(
        ...(await pool(count, opts.inFlight, async (j) => {
          const key = `a-${side}-${from + j}`;
          if (side === 'retryq') {
            const submitted = await retryq.submit(intent(provider, `sleep-${side}`, key));
            if (submitted.heldAtSubmit) heldAtSubmit++;
            return submitted;
          }
          if (side === 'bareTimer') return env.client.workflow.start('sleeper', { taskQueue: queue, workflowId: key });
          if (side === 'bareDelayedStart')
            // Held at the start, as an intent could be if `submit` knew its credential's gate closed: the server
            // records the start with the phase `waiting` and its wake-up time, and no workflow task runs until then.
            return env.client.workflow.start('sleeper', {
              taskQueue: queue,
              workflowId: key,
              startDelay: '1h',
              typedSearchAttributes: [
                { key: retryPhaseKey, value: 'waiting' },
                { key: nextAttemptAtKey, value: new Date(Date.now() + 3_600_000) },
              ],
            });
          if (side === 'bareTimerRecorded')
            return env.client.workflow.start('sleeperRecorded', {
              taskQueue: queue,
              workflowId: key,
              // The phase is visible from the start, as an intent's is (set by `submit`).
              typedSearchAttributes: [{ key: retryPhaseKey, value: 'scheduled' }],
            });
          const args = [`${provider.url}/sleep-${side}/${key}`, key];
          return env.client.workflow.start('callThenSleep', { taskQueue: queue, workflowId: key, args });
        })),
      );
      submittedMs += performance.now() - t0;
      const target = asleep + count;
      // retryq: first the worker's own counters (each intent is held by load control or answered 429 once on its way
      // to sleep), then visibility (every intent `waiting`, upserted in the task that starts its timer); a count query
      // every 100 ms over thousands of rows would load the dev server's SQLite on this side only (the bare sides read
      // the worker's metrics alone). With load control only the first calls reach the provider: the 429 closes the
      // credential's gate and the rest are held, asleep without a call of their own.
      // retryq: when the worker had counted them all (the rest of the settle time is visibility catching up).
      let workerCountedAt: number | undefined;
      const settledAt = await waitFor(`${side}: ${target} asleep`, 600_000 + count * 200, async () => {
        if (side === 'retryq') {
          if (workerCountedAt === undefined && asleepCounted(await worker.metrics()) - seen0 + heldAtSubmit >= target)
            workerCountedAt = performance.now();
          return (
            workerCountedAt !== undefined &&
            (await env.client.workflow.count(`TaskQueue = "${queue}.workflows" AND RetryPhase = "waiting"`)).count >=
              target
          );
        }
        const calls = timerOnly || provider.count(`sleep-${side}`) - calls0 >= target;
        return calls && wftDone(await worker.metrics()) - wft0 >= target * tasksPerWorkflow;
      });
      settledMs += settledAt - t0;
      batchSettleS.push(round2((settledAt - t0) / 1000));
      workerSettledMs += (workerCountedAt ?? settledAt) - t0;
      asleep = target;
      for (const [k, v] of Object.entries(cpu().cpuSeconds)) cpuSeconds[k] = round2((cpuSeconds[k] ?? 0) + v);
    },
    /** Measures memory with everything asleep, stops the side, and returns its figures. */
    async finish() {
      try {
        await sleep(5000);
        const workerMb = rssMb(worker.pid);
        const devServerMb = rssMb(env.server.pid);
        const settledMemory = await worker.memory();
        // The same 30 s later, and then after a full GC (with --expose-gc): what V8 gives back by itself, what is live.
        if (settledMemory) await sleep(30_000);
        const laterMemory = settledMemory ? await worker.memory() : undefined;
        const afterGcMemory = settledMemory ? await worker.memory(true) : undefined;
        const m = await worker.metrics();
        // 200 spread over every batch: their histories say where the way to sleep went.
        const step = Math.max(1, Math.floor(asleep / 200));
        const sample = Array.from({ length: Math.min(200, asleep) }, (_, i) => `a-${side}-${i * step}`).map((key) =>
          side === 'retryq' ? workflowIdOf(key) : key,
        );
        const stagesMs = await sleepStages(env.client, sample);
        const waiting =
          side === 'retryq'
            ? await env.client.workflow.count(`TaskQueue = "${queue}.workflows" AND RetryPhase = "waiting"`)
            : undefined;
        await worker.stop();
        return {
          n: asleep,
          settleS: round2(settledMs / 1000),
          batchSettleS,
          submitAllS: round2(submittedMs / 1000),
          // retryq: the part of settleS until the worker had counted every intent asleep; the rest is visibility.
          ...(side === 'retryq' ? { workerSettleS: round2(workerSettledMs / 1000), heldAtSubmit } : {}),
          providerCalls: provider.count(`sleep-${side}`) - calls0,
          startLatencyMs: { p50: percentile(latencies, 50), p99: percentile(latencies, 99) },
          workerRssMb: {
            idle: idle.workerMb,
            settled: workerMb,
            perSleepingKb: Math.round(((workerMb - idle.workerMb) * 1024) / Math.max(asleep, 1)),
          },
          devServerRssMb: { idle: idle.devServerMb, settled: devServerMb },
          ...(settledMemory
            ? { workerMemory: { idle: idleMemory, settled: settledMemory, later: laterMemory, afterGc: afterGcMemory } }
            : {}),
          workerCache: {
            size: metric(m, 'sticky_cache_size'),
            forcedEvictions: metric(m, 'sticky_cache_total_forced_eviction'),
          },
          ...(waiting ? { visibilityWaiting: waiting.count } : {}),
          stagesMs,
          // CPU used while this side's batches ran (each process's, summed over the batches), and per intent.
          cpuSeconds,
          cpuMsPerIntent: Object.fromEntries(
            Object.entries(cpuSeconds).map(([k, v]) => [k, round2((v * 1000) / Math.max(asleep, 1))]),
          ),
        };
      } finally {
        await stopEnv(env);
      }
    },
  };
}

/**
 * Batch by batch, retryq's settle time over the bare timer's: the two batches of a pair ran one right after the other
 * on the same machine, so a pair's ratio carries less of the machine's drift than the ratio of the sums (the goal's
 * figure), and their median less of one slow batch.
 */
function settlePairs(
  retryq: number[] | undefined,
  bare: number[] | undefined,
  baseline: string,
): Record<string, number[] | number> {
  if (!retryq || !bare || retryq.length !== bare.length || retryq.length === 0) return {};
  const pairs = retryq.map((r, i) => round2(r / bare[i]!));
  return { [`settlePairRatiosVs${baseline}`]: pairs, [`settlePairRatioMedianVs${baseline}`]: median(pairs) };
}

/**
 * Part a: `n` intents (or workflows) put to sleep on every side, in `--a-batches` batches that take turns between the
 * sides (the order alternating from batch to batch), so that a machine that gets busier or quieter during the run
 * weighs on every side alike. Each side's settle time is the sum of its batches' times (first submit to all asleep).
 */
async function sleeping(provider: Provider, n: number) {
  const batches = Math.max(1, Math.min(opts.aBatches, n));
  const running: Awaited<ReturnType<typeof sleepingSide>>[] = [];
  const out: Partial<Record<Side, Awaited<ReturnType<(typeof running)[number]['finish']>>>> = {};
  try {
    for (const side of sides) running.push(await sleepingSide(side, provider));
    let done = 0;
    for (let b = 0; b < batches; b++) {
      const count = Math.round(((b + 1) * n) / batches) - done;
      const order = b % 2 === 0 ? running : [...running].reverse();
      for (const s of order) await s.batch(done, count);
      done += count;
    }
    for (const s of running.splice(0)) out[s.side] = await s.finish();
  } finally {
    for (const s of running) await s.finish().catch(() => undefined);
  }
  return { batches, ...out };
}

// ---- b. throughput ----------------------------------------------------------------------------------------------

async function throughput(provider: Provider) {
  const env = await startEnv();
  try {
    const retryqWorker = await startWorker(env, {
      mode: 'retryq',
      queue: 'scale-b',
      credential: credential(1_000_000),
      tuning,
    });
    const bareWorker = await startWorker(env, {
      mode: 'bare',
      queue: 'scale-b-bare',
      credential: credential(1_000_000),
      ownActivityQueue: bSides.some((x) => x.startsWith('bareOwnQueue') || x === 'bareWatchedUpserts'),
    });
    const bareWorkflow: Record<Exclude<BSide, 'retryq'>, string> = {
      bare: 'callOnce',
      bareOwnQueue: 'callOnceOwnQueue',
      bareUpserts: 'callOnceWithUpserts',
      bareOwnQueueUpserts: 'callOnceOwnQueueWithUpserts',
      bareWatchedUpserts: 'callOnceWatchedWithUpserts',
    };
    const retryq = new RetryqClient({
      client: env.client,
      taskQueuePrefix: 'scale-b',
      requireServedCredential: false,
    });
    const rounds: Record<string, unknown>[] = [];
    const m = opts.complete;
    for (let r = 0; r < opts.rounds; r++) {
      // Each round starts one side later than the one before (two sides: they alternate which goes first).
      const order = bSides.map((_, i) => bSides[(i + r) % bSides.length]!);
      for (const side of order) {
        const worker = side === 'retryq' ? retryqWorker : bareWorker;
        await sleep(1000);
        const m0 = await worker.metrics();
        const s0 = await scrapeServer(env.serverMetricsPort);
        const done0 = completed(m0);
        const cpu = cpuMeter({ worker: worker.pid, devServer: env.server.pid, bench: process.pid });
        const t0 = performance.now();
        log(`b/round ${r}/${side}: ${m} intents`);
        await pool(m, opts.inFlight, async (i) => {
          const key = `b-${r}-${side}-${i}`;
          if (side === 'retryq') return retryq.submit(intent(provider, 'ok', key));
          return env.client.workflow.start(bareWorkflow[side], {
            taskQueue: 'scale-b-bare',
            workflowId: key,
            args: [`${provider.url}/ok/${key}`, key],
          });
        });
        const doneAt = await waitFor(
          `b/${side}: ${m} completed`,
          600_000,
          async () => completed(await worker.metrics()) - done0 >= m,
        );
        const usage = cpu();
        const s = (doneAt - t0) / 1000;
        const ids = Array.from({ length: m }, (_, i) =>
          side === 'retryq' ? workflowIdOf(`b-${r}-${side}-${i}`) : `b-${r}-${side}-${i}`,
        );
        rounds.push({
          round: r,
          side,
          completedPerS: round2(m / s),
          seconds: round2(s),
          workerCpuMsPerIntent: round2((usage.cpuSeconds['worker']! * 1000) / m),
          devServerCpuMsPerIntent: round2((usage.cpuSeconds['devServer']! * 1000) / m),
          serverCallsPerIntent: rpcsPer(m0, await worker.metrics(), m),
          devServerWorkPerIntent: serverWorkPer(s0, await scrapeServer(env.serverMetricsPort), m),
          stagesMs: await stages(env.client, ids),
          cpu: usage,
        });
      }
    }
    const rate = (side: string) => rounds.filter((x) => x['side'] === side).map((x) => x['completedPerS'] as number);
    /** Rate by rate, `side` over `baseline` (the two batches of a round ran back to back). */
    const pairs = (side: string, baseline = 'bare') => rate(side).map((x, i) => x / rate(baseline)[i]!);
    // Part b's medians are the lower middle value of an even count (percentile 50), so that figures from
    // different runs stay comparable; part a's `median` takes the mean of the two middle values.
    const lowerMedian = (xs: number[]) => percentile(xs, 50);
    const sample = retryq.client.workflow.getHandle(workflowIdOf('b-0-retryq-0'));
    const bareSample = env.client.workflow.getHandle('b-0-bare-0');
    const events = async (h: WorkflowHandle) => (await h.fetchHistory()).events?.length ?? 0;
    // The history's size in bytes as the server counts it (payloads included): what it stores and sends per intent.
    const bytes = async (h: WorkflowHandle) => (await h.describe()).historySize ?? 0;
    // Load control's share: the credential entity's history (every run: it continues as new), per retryq intent.
    let entityEvents = 0;
    for await (const w of env.client.workflow.list({ query: `TaskQueue = "scale-b.credentials"` }))
      // Visibility records the length of closed runs only: describe the running one.
      entityEvents += w.closeTime
        ? w.historyLength
        : (await env.client.workflow.getHandle(w.workflowId, w.runId).describe()).historyLength;
    const decomposition: Record<string, unknown> = {};
    for (const side of bSides.filter((x) => x !== 'retryq' && x !== 'bare'))
      decomposition[side] = {
        perS: rate(side),
        pairRatiosVsBare: pairs(side).map(round2),
        pairRatioMedianVsBare: round2(lowerMedian(pairs(side))),
        // retryq against this side, pair by pair: for `bareOwnQueueUpserts`, what retryq costs beyond what DESIGN.md
        // requires of an intent (its own dispatch queue, the two upserts).
        retryqPairRatios: pairs('retryq', side).map(round2),
        retryqPairRatioMedian: round2(lowerMedian(pairs('retryq', side))),
        historyEvents: await events(env.client.workflow.getHandle(`b-0-${side}-0`)),
        historyBytes: await bytes(env.client.workflow.getHandle(`b-0-${side}-0`)),
      };
    const result = {
      n: m,
      loadControlEntityEventsPerIntent: round2(entityEvents / (m * opts.rounds)),
      rounds,
      retryqPerS: rate('retryq'),
      barePerS: rate('bare'),
      ratioMedian: round2(lowerMedian(rate('retryq')) / lowerMedian(rate('bare'))),
      // Each round's two sides ran back to back (in alternating order), so the drift of a long run (the dev server's
      // store filling up, other load) cancels within a pair: the pairs' ratios and their median.
      pairRatios: pairs('retryq').map(round2),
      pairRatioMedian: round2(lowerMedian(pairs('retryq'))),
      historyEvents: { retryq: await events(sample), bare: await events(bareSample) },
      historyBytes: { retryq: await bytes(sample), bare: await bytes(bareSample) },
      // The bare workflow with one of retryq's costs added: what each costs, as a share of bare's throughput.
      ...(Object.keys(decomposition).length > 0 ? { decomposition } : {}),
    };
    await retryqWorker.stop();
    await bareWorker.stop();
    return result;
  } finally {
    await stopEnv(env);
  }
}

// ---- c. wake-up storm -------------------------------------------------------------------------------------------

async function wakeStorm(provider: Provider, k: number, settleRatePerS: number | undefined) {
  const env = await startEnv();
  try {
    const cred = credential(opts.wakeBudget);
    const worker = await startWorker(env, { mode: 'retryq', queue: 'scale-c', credential: cred, tuning });
    const retryq = new RetryqClient({ client: env.client, taskQueuePrefix: 'scale-c', requireServedCredential: false });
    const estimateS = k / (settleRatePerS ?? 4);
    provider.wakeAtMs =
      Date.now() +
      (opts.wakeAfterS !== undefined ? opts.wakeAfterS * 1000 : Math.ceil(estimateS * 1.5 * 1000) + 20_000);
    const before = await worker.metrics();
    const done0 = completed(before);
    log(`c: ${k} intents to sleep until ${new Date(provider.wakeAtMs).toISOString()}`);
    const t0 = performance.now();
    const seen0 = asleepCounted(before);
    let heldAtSubmit = 0;
    await pool(k, opts.inFlight, async (i) => {
      const submitted = await retryq.submit(intent(provider, 'wake', `c-${i}`));
      if (submitted.heldAtSubmit) heldAtSubmit++;
    });
    // Asleep: held by load control (in the first workflow task when the worker knows the gate is closed, else after
    // a dispatch load control held) or answered 429 itself; then the workflow task that starts its timer has run.
    const settledAt = await waitFor('c: all asleep', 600_000 + k * 200, async () => {
      // Or held at submit: asleep on the server from its start.
      return asleepCounted(await worker.metrics()) - seen0 + heldAtSubmit >= k;
    });
    const settledBeforeWake = Date.now() < provider.wakeAtMs;
    const m0 = await worker.metrics();
    await sleep(Math.max(0, provider.wakeAtMs - Date.now()));
    log(`c: waking ${k} intents (budget ${opts.wakeBudget}/min)`);
    const cpu = cpuMeter({ worker: worker.pid, devServer: env.server.pid, bench: process.pid });
    const wakeAt = provider.wakeAtMs;
    // The slower of the budget and this one worker's wake-up rate sets how long the wake-up takes; allow twice that.
    const wakeRate = opts.wakeRate ?? defaultWorkerTuning.wakeUpsPerSecond;
    const wakeMs = Math.max((k / opts.wakeBudget) * 60_000, wakeRate > 0 ? (k / wakeRate) * 1000 : 0);
    await waitFor('c: all completed', 600_000 + wakeMs * 2, async () => completed(await worker.metrics()) - done0 >= k);
    const allCompletedS = (Date.now() - wakeAt) / 1000;
    const usage = cpu();
    const m1 = await worker.metrics();
    const dispatches = [...provider.wakeDispatches].sort((a, b) => a - b);
    const dispatchedOverS = ((dispatches.at(-1) ?? wakeAt) - wakeAt) / 1000;
    const maxIn = (windowMs: number) => {
      let best = 0;
      for (let i = 0, j = 0; i < dispatches.length; i++) {
        while (dispatches[i]! - dispatches[j]! >= windowMs) j++;
        best = Math.max(best, i - j + 1);
      }
      return best;
    };
    log(`c: reading ${k} histories`);
    const wft = await wakeHistories(env.client, k);
    await worker.stop();
    return {
      n: k,
      settleS: round2((settledAt - t0) / 1000),
      settledBeforeWake,
      heldAtSubmit,
      budgetPerMin: opts.wakeBudget,
      allDispatchedS: round2(dispatchedOverS),
      allCompletedS: round2(allCompletedS),
      dispatched: dispatches.length,
      dispatchedPerS: round2(dispatches.length / Math.max(0.001, dispatchedOverS)),
      maxDispatchesIn60s: maxIn(60_000),
      maxDispatchesIn1s: maxIn(1000),
      withinBudget: maxIn(60_000) <= opts.wakeBudget,
      ...wft,
      cache: {
        size: opts.cache ?? defaultWorkerTuning.maxCachedWorkflows,
        hitsDuringWake: metric(m1, 'sticky_cache_hit') - metric(m0, 'sticky_cache_hit'),
        missesDuringWake: metric(m1, 'sticky_cache_miss') - metric(m0, 'sticky_cache_miss'),
        replayTasks:
          metric(m1, 'workflow_task_replay_latency_count') - metric(m0, 'workflow_task_replay_latency_count'),
      },
      cpu: usage,
    };
  } finally {
    await stopEnv(env);
  }
}

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

/** A history event's time, in ms since the epoch. */
function eventMs(e: HistoryEvent): number {
  return Number(e.eventTime?.seconds ?? 0) * 1000 + Math.round((e.eventTime?.nanos ?? 0) / 1e6);
}

/**
 * Where a completed workflow's time went, from its history (p50 / p90 over the workflows, ms): waiting for its first
 * workflow task, the task's run, the activity waiting in its queue (schedule-to-start), running (for retryq: the
 * wait for a send slot plus the HTTP call), then the last workflow task's wait and the rest until it closed.
 */
async function stages(client: Client, ids: string[]) {
  const parts: Record<string, number[]> = {
    firstTaskWait: [],
    firstTaskRun: [],
    activityQueueWait: [],
    activityRun: [],
    lastTaskWait: [],
    lastTaskRun: [],
    total: [],
  };
  await pool(ids.length, 16, async (i) => {
    const events = (await client.workflow.getHandle(ids[i]!).fetchHistory()).events ?? [];
    const at = (pred: (e: (typeof events)[number]) => unknown, from = 0, last = false) => {
      const found = last ? events.findLastIndex(pred) : events.findIndex((e, j) => j >= from && pred(e));
      return found;
    };
    const wfts = at((e) => e.workflowTaskScheduledEventAttributes);
    const wftst = at((e) => e.workflowTaskStartedEventAttributes);
    const wftc = at((e) => e.workflowTaskCompletedEventAttributes);
    const as = at((e) => e.activityTaskScheduledEventAttributes);
    const ast = at((e) => e.activityTaskStartedEventAttributes);
    const ac = at((e) => e.activityTaskCompletedEventAttributes);
    const lwfts = at((e) => e.workflowTaskScheduledEventAttributes, 0, true);
    const lwftst = at((e) => e.workflowTaskStartedEventAttributes, 0, true);
    const end = events.length - 1;
    if ([wfts, wftst, wftc, as, ast, ac, lwfts, lwftst].some((x) => x < 0)) return;
    const t = (j: number) => eventMs(events[j]!);
    parts['firstTaskWait']!.push(t(wftst) - t(wfts));
    parts['firstTaskRun']!.push(t(wftc) - t(wftst));
    parts['activityQueueWait']!.push(t(ast) - t(as));
    parts['activityRun']!.push(t(ac) - t(ast));
    parts['lastTaskWait']!.push(t(lwftst) - t(lwfts));
    parts['lastTaskRun']!.push(t(end) - t(lwftst));
    parts['total']!.push(t(end) - t(0));
  });
  return Object.fromEntries(
    Object.entries(parts).map(([k, xs]) => [k, { p50: percentile(xs, 50), p90: percentile(xs, 90) }]),
  );
}

/**
 * Part a: where a sample's way to sleep went, from their histories: the first workflow task's wait on the queue and
 * its run (poll to completion: the worker's share), the workflow tasks until the timer started, and start to asleep.
 */
async function sleepStages(client: Client, ids: string[]) {
  const parts: Record<string, number[]> = { firstTaskWait: [], firstTaskRun: [], toAsleep: [] };
  const tasks: number[] = [];
  await pool(ids.length, 16, async (i) => {
    const events = (await client.workflow.getHandle(ids[i]!).fetchHistory()).events ?? [];
    const timer = events.findIndex((e) => e.timerStartedEventAttributes);
    const scheduled = events.findIndex((e) => e.workflowTaskScheduledEventAttributes);
    const started = events.findIndex((e) => e.workflowTaskStartedEventAttributes);
    const completed = events.findIndex((e) => e.workflowTaskCompletedEventAttributes);
    if ([timer, scheduled, started, completed].some((x) => x < 0)) return;
    const untilTimer = events.slice(0, timer);
    const asleep = untilTimer.findLastIndex((e) => e.workflowTaskCompletedEventAttributes);
    parts['firstTaskWait']!.push(eventMs(events[started]!) - eventMs(events[scheduled]!));
    parts['firstTaskRun']!.push(eventMs(events[completed]!) - eventMs(events[started]!));
    parts['toAsleep']!.push(eventMs(events[asleep]!) - eventMs(events[0]!));
    tasks.push(untilTimer.filter((e) => e.workflowTaskCompletedEventAttributes).length);
  });
  return {
    sampled: tasks.length,
    workflowTasksToAsleep: round2(tasks.reduce((a, b) => a + b, 0) / Math.max(tasks.length, 1)),
    ...Object.fromEntries(
      Object.entries(parts).map(([k, xs]) => [k, { p50: percentile(xs, 50), p90: percentile(xs, 90) }]),
    ),
  };
}

/** Workflow-task latency of the tasks after each intent's timer fired, and every task timeout or failure. */
async function wakeHistories(client: Client, k: number) {
  const scheduleToStart: number[] = [];
  const startToComplete: number[] = [];
  const timeouts = { scheduleToStart: 0, startToClose: 0 };
  let failures = 0;
  await pool(k, 32, async (i) => {
    const history = await client.workflow.getHandle(workflowIdOf(`c-${i}`)).fetchHistory();
    const events = history.events ?? [];
    let woke = false;
    let scheduledAt: number | undefined;
    let startedAt: number | undefined;
    for (const e of events) {
      // Woken by its timer, or by the end of its start delay (held at submit: every workflow task is a wake-up's).
      if (e.timerFiredEventAttributes || e.workflowExecutionStartedEventAttributes?.firstWorkflowTaskBackoff)
        woke = true;
      const timedOut = e.workflowTaskTimedOutEventAttributes;
      // TimeoutType 2 = SCHEDULE_TO_START (a task left too long on a worker's sticky queue), 1 = START_TO_CLOSE.
      if (timedOut) timeouts[Number(timedOut.timeoutType) === 2 ? 'scheduleToStart' : 'startToClose']++;
      if (e.workflowTaskFailedEventAttributes) failures++;
      if (!woke) continue;
      if (e.workflowTaskScheduledEventAttributes) scheduledAt = eventMs(e);
      if (e.workflowTaskStartedEventAttributes && scheduledAt !== undefined) {
        startedAt = eventMs(e);
        scheduleToStart.push(startedAt - scheduledAt);
      }
      if (e.workflowTaskCompletedEventAttributes && startedAt !== undefined) {
        startToComplete.push(eventMs(e) - startedAt);
        startedAt = undefined;
      }
    }
  });
  return {
    workflowTaskTimeouts: timeouts.scheduleToStart + timeouts.startToClose,
    workflowTaskTimeoutsByType: timeouts,
    workflowTaskFailures: failures,
    wakeWorkflowTasks: scheduleToStart.length,
    workflowTaskScheduleToStartMs: {
      p50: percentile(scheduleToStart, 50),
      p90: percentile(scheduleToStart, 90),
      p99: percentile(scheduleToStart, 99),
    },
    workflowTaskStartToCompleteMs: { p50: percentile(startToComplete, 50), p99: percentile(startToComplete, 99) },
  };
}

// ---- main -------------------------------------------------------------------------------------------------------

async function main() {
  const provider = new Provider();
  await provider.start();
  const out: Record<string, unknown> = {
    bench: 'scale',
    machine: {
      cpus: os.cpus().length,
      totalMemGb: Math.round(os.totalmem() / 2 ** 30),
      loadavg1mAtStart: round2(os.loadavg()[0]!),
    },
    // The retryq worker's tuning as run: the defaults with the flags given.
    options: { ...opts, ...defaultWorkerTuning, ...tuning },
  };
  const t0 = performance.now();
  let settleRate: number | undefined;
  try {
    if (only.has('a')) {
      const a = await sleeping(provider, opts.intents);
      if (a['retryq']) settleRate = opts.intents / a['retryq'].settleS;
      const ratio = (x: number | undefined, y: number | undefined) =>
        x !== undefined && y !== undefined ? round2(x / y) : undefined;
      out['a_sleeping'] = {
        ...a,
        settleRatioVsBareTimer: ratio(a['retryq']?.settleS, a['bareTimer']?.settleS),
        settleRatioVsBareCallThenTimer: ratio(a['retryq']?.settleS, a['bareCallThenTimer']?.settleS),
        submitP50RatioVsWorkflowStart: ratio(a['retryq']?.startLatencyMs.p50, a['bareTimer']?.startLatencyMs.p50),
        ...settlePairs(a['retryq']?.batchSettleS, a['bareTimer']?.batchSettleS, 'BareTimer'),
        // Against the bare timer that records what DESIGN.md requires of a held intent (a patch, a local activity's
        // answer, the visible phase): what retryq costs beyond its required recording.
        settleRatioVsBareTimerRecorded: ratio(a['retryq']?.settleS, a['bareTimerRecorded']?.settleS),
        submitP50RatioVsRecordedStart: ratio(
          a['retryq']?.startLatencyMs.p50,
          a['bareTimerRecorded']?.startLatencyMs.p50,
        ),
        ...settlePairs(a['retryq']?.batchSettleS, a['bareTimerRecorded']?.batchSettleS, 'BareTimerRecorded'),
        // And that side against the bare timer: what the required recording alone costs.
        recordedSettleRatioVsBareTimer: ratio(a['bareTimerRecorded']?.settleS, a['bareTimer']?.settleS),
        // A start held by the server (start delay) against the bare timer and retryq: what holding an intent at
        // `submit` would cost instead of in its first workflow task (`--sides …,bareDelayedStart`).
        delayedStartSettleRatioVsBareTimer: ratio(a['bareDelayedStart']?.settleS, a['bareTimer']?.settleS),
        delayedStartP50RatioVsWorkflowStart: ratio(
          a['bareDelayedStart']?.startLatencyMs.p50,
          a['bareTimer']?.startLatencyMs.p50,
        ),
      };
    }
    if (out['a_sleeping']) log(`a: ${JSON.stringify(out['a_sleeping'])}`);
    if (only.has('b') && opts.complete > 0) {
      out['b_throughput'] = await throughput(provider);
      log(`b: ${JSON.stringify(out['b_throughput'])}`);
    }
    if (only.has('c') && opts.wake > 0) out['c_wake'] = await wakeStorm(provider, opts.wake, settleRate);
    out['goals'] = goals(out);
  } finally {
    out['totalS'] = round2((performance.now() - t0) / 1000);
    await provider.close();
  }
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
}

function goals(out: Record<string, unknown>) {
  const a = out['a_sleeping'] as
    | (Partial<Record<Side, { workerRssMb: { settled: number }; n: number }>> & {
        settleRatioVsBareTimer?: number;
        submitP50RatioVsWorkflowStart?: number;
      })
    | undefined;
  const b = out['b_throughput'] as { ratioMedian: number } | undefined;
  const c = out['c_wake'] as { workflowTaskTimeouts: number; withinBudget: boolean; n: number } | undefined;
  return {
    ...(a?.retryq
      ? {
          workerRssBelow300Mb: {
            measuredAt: a.retryq.n,
            mb: a.retryq.workerRssMb.settled,
            held: a.retryq.workerRssMb.settled < 300,
          },
        }
      : {}),
    ...(a?.settleRatioVsBareTimer !== undefined
      ? { settleWithin1_2xBare: { ratio: a.settleRatioVsBareTimer, held: a.settleRatioVsBareTimer <= 1.2 } }
      : {}),
    ...(a?.submitP50RatioVsWorkflowStart !== undefined
      ? {
          submitP50Within1_2xStart: {
            ratio: a.submitP50RatioVsWorkflowStart,
            held: a.submitP50RatioVsWorkflowStart <= 1.2,
          },
        }
      : {}),
    ...(b ? { throughputAtLeast0_8xBare: { ratio: b.ratioMedian, held: b.ratioMedian >= 0.8 } } : {}),
    ...(c
      ? {
          wakeNoTaskTimeoutsWithinBudget: {
            measuredAt: c.n,
            timeouts: c.workflowTaskTimeouts,
            withinBudget: c.withinBudget,
            held: c.workflowTaskTimeouts === 0 && c.withinBudget,
          },
        }
      : {}),
  };
}

async function cleanup() {
  for (const child of children) child.kill('SIGKILL');
  for (const server of servers) await server.stop(2000);
}

main().then(
  () => cleanup(),
  async (err: unknown) => {
    console.error(err);
    await cleanup();
    process.exitCode = 1;
  },
);
