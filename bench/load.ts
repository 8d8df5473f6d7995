/**
 * bench:load — load control per credential against naive retriers, measured side by side in one run on one
 * Temporal dev server. Prints one JSON object to stdout (progress goes to stderr).
 *
 * Provider: the simulator, one API key limited to L writes per sliding minute (429 + `Retry-After` over it), careless
 * about idempotency keys (so a duplicate side effect would show). N intents are submitted at once on that credential;
 * the ideal makespan is N / L. Scenarios:
 *
 * - `a` retryq configured at L (load control on);
 * - `b` retryq configured at 10 × L (the limit unknown, or the key shared with another application);
 * - `c` retryq at L in two worker processes (this one and a child);
 * - `d` baseline: a plain Temporal workflow per intent whose activity throws on 429, default activity retry policy;
 * - `e` baseline: retryq at 10 × L with load control off (per-intent retry honouring Retry-After, no coordination;
 *   paced only by Temporal's task-queue rate limit).
 *
 * Limits the provider states in headers (issue: load control that learns the provider's limits), each at 10 × L:
 * - `f`, `g`, `h`: sliding window, with IETF `RateLimit` headers, `X-RateLimit-*` with the reset in seconds, and with
 *   the reset as an epoch;
 * - `i`, `j`, `k`: the same three header families against a token bucket (continuous refill, a burst of 10);
 * - `l`: today's behaviour against that token bucket (no headers), and `m`: the plain Temporal workflow against it;
 * - `n`: two route buckets on one key (`/v1/charges` and `/v1/refunds`, L each, the key 10 × L, `X-RateLimit-Bucket`,
 *   reset as an epoch): half the intents on each route, and one refund answered 429 `Retry-After: 60` at first.
 *   Reported apart: the makespan of each route.
 *
 * Reported per scenario: makespan / ideal, provider calls, 429 answers, the most 429s in any 60 s window, calls an
 * intent made before the time the provider permitted it, calls any intent made before a permitted time the provider
 * had already given the credential, duplicate side effects, and (retryq) history events per intent.
 *
 * Run: `npm run bench:load` (about 12 minutes: five scenarios of about two minutes, one after another).
 * Options: `--intents N` (120), `--limit L` per minute (60), `--scenarios a,b,c,d,e`, `--parallel` (run the
 * scenarios at once: faster, but they share the two cores and disturb each other's timing).
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { Agent } from 'undici';
import { RetryqClient } from '../src/client.js';
import { credentialSchema } from '../src/config.js';
import { resolveTemporalCli } from '../src/temporal/binaries.js';
import { registerSearchAttributes } from '../src/temporal/register-search-attributes.js';
import { installRuntime } from '../src/temporal/runtime.js';
import { startDevServer } from '../src/temporal/server-process.js';
import { createWorkers, intentWorkflowBundle } from '../src/worker.js';
import { credentialStateQuery, credentialWorkflowId } from '../src/workflows/index.js';
import type { RetryqWorkers } from '../src/worker.js';
import { startProviderSim } from '../src/sim/index.js';
import type { AnsweredRequest, ScenarioInput } from '../src/sim/index.js';
import { startWorkerProcess } from '../scripts/support/worker-process.js';
import { plainActivities } from './load/plain-activities.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const CREDENTIAL = 'bench-key';
const SECRET = 'sk_bench_load_7d2e';

const { values } = parseArgs({
  options: {
    intents: { type: 'string', default: '120' },
    limit: { type: 'string', default: '60' },
    scenarios: { type: 'string', default: 'a,b,c,d,e' },
    parallel: { type: 'boolean', default: false },
  },
});
const N = Number(values.intents);
const L = Number(values.limit);
const chosen = values.scenarios.split(',').map((s) => s.trim());
if (!(N > 0 && L >= 2) || chosen.some((s) => !'abcdefghijklmn'.includes(s) || s.length !== 1)) {
  process.stderr.write('usage: bench/load.ts [--intents N] [--limit L] [--scenarios a,b,…,n] [--parallel]\n');
  process.exit(2);
}
const idealMs = (N / L) * 60_000;
const log = (line: string) => process.stderr.write(`[bench:load] ${line}\n`);

type Headers = 'none' | 'ietf' | 'x-ratelimit-seconds' | 'x-ratelimit-epoch';

interface Scenario {
  id: string;
  name: string;
  kind: 'retryq' | 'plain';
  configuredPerMinute?: number;
  loadControl?: boolean;
  processes?: number;
  /** How the simulator limits writes. @default 'sliding-window' */
  limiter?: 'sliding-window' | 'token-bucket';
  /** The rate-limit headers it sends. @default 'none' */
  headers?: Headers;
  /** Two route buckets on one key (scenario `n`). */
  buckets?: boolean;
}

const learned = (id: string, limiter: 'sliding-window' | 'token-bucket', headers: Headers): Scenario => ({
  id,
  name: `retryq at 10 × L, ${limiter}, headers ${headers}`,
  kind: 'retryq',
  configuredPerMinute: 10 * L,
  loadControl: true,
  limiter,
  headers,
});

const scenarios: Record<string, Scenario> = {
  a: { id: 'a', name: 'retryq configured at L', kind: 'retryq', configuredPerMinute: L, loadControl: true },
  b: { id: 'b', name: 'retryq configured at 10 × L', kind: 'retryq', configuredPerMinute: 10 * L, loadControl: true },
  c: {
    id: 'c',
    name: 'retryq at L, two worker processes',
    kind: 'retryq',
    configuredPerMinute: L,
    loadControl: true,
    processes: 2,
  },
  d: { id: 'd', name: 'plain Temporal workflow, default activity retries', kind: 'plain' },
  e: {
    id: 'e',
    name: 'retryq at 10 × L, load control off (per-intent Retry-After, no coordination)',
    kind: 'retryq',
    configuredPerMinute: 10 * L,
    loadControl: false,
  },
  f: learned('f', 'sliding-window', 'ietf'),
  g: learned('g', 'sliding-window', 'x-ratelimit-seconds'),
  h: learned('h', 'sliding-window', 'x-ratelimit-epoch'),
  i: learned('i', 'token-bucket', 'ietf'),
  j: learned('j', 'token-bucket', 'x-ratelimit-seconds'),
  k: learned('k', 'token-bucket', 'x-ratelimit-epoch'),
  l: learned('l', 'token-bucket', 'none'),
  m: {
    id: 'm',
    name: 'plain Temporal workflow, default activity retries, token-bucket',
    kind: 'plain',
    limiter: 'token-bucket',
  },
  n: {
    id: 'n',
    name: 'retryq at 10 × L, two route buckets of L on one key, one 429 (Retry-After 60) in one',
    kind: 'retryq',
    configuredPerMinute: 10 * L,
    loadControl: true,
    headers: 'x-ratelimit-epoch',
    buckets: true,
  },
};

/** The simulator's scenario for `s`. */
function simScenario(s: Scenario): ScenarioInput {
  const base: ScenarioInput = {
    keys: [{ key: SECRET, id: CREDENTIAL, rateLimitPerMinute: s.buckets ? 10 * L : L }],
    honorIdempotencyKeys: false,
    retryAfterFormat: 'seconds',
  };
  if (s.buckets)
    return {
      ...base,
      rateLimit: {
        algorithm: 'sliding-window',
        headers: s.headers ?? 'none',
        bucketHeader: 'X-RateLimit-Bucket',
        buckets: [
          { name: 'charges', pathPrefix: '/v1/charges', perMinute: L },
          { name: 'refunds', pathPrefix: '/v1/refunds', perMinute: L },
        ],
      },
      rules: [
        {
          match: { idempotencyKeyPrefix: 'bucket-first-' },
          steps: [{ status: 429, code: 'rate_limit_exceeded', retryAfter: 60 }],
          then: 'normal',
        },
      ],
    };
  if (s.limiter === undefined && s.headers === undefined) return base;
  return {
    ...base,
    rateLimit: {
      algorithm: s.limiter ?? 'sliding-window',
      headers: s.headers ?? 'none',
      ...(s.limiter === 'token-bucket' ? { burst: 10 } : {}),
    },
  };
}

interface Result {
  scenario: string;
  name: string;
  configuredPerMinute: number | null;
  workerProcesses: number;
  succeeded: number;
  makespanMs: number;
  makespanOverIdeal: number;
  /** From the first provider call to the last success, over (N − 1) / L: the pacing alone, without start-up. */
  pacedOverIdeal: number;
  providerCalls: number;
  inspections: number;
  rateLimited: number;
  max429sPerWindow: number;
  callsBeforePermittedTime: number;
  callsBeforeCredentialPermittedTime: number;
  duplicates: number;
  /** Where the time went: submit → first provider call, the longest pause between calls, 429 times (ms from start). */
  firstCallAfterMs: number;
  longestPauseMs: number;
  longestPauseAtMs: number;
  rateLimitedAtMs: number[];
}

/** The figures, from the simulator's own log of answers. */
function analyse(
  s: Scenario,
  answers: AnsweredRequest[],
  startedMs: number,
  succeeded: number,
  duplicates: number,
): Result {
  const writes = answers.filter((a) => a.method !== 'GET').sort((x, y) => x.atMs - y.atMs);
  const permitted = new Map<string, number>();
  let credentialPermitted = 0;
  let early = 0;
  let credentialEarly = 0;
  const limited: number[] = [];
  let lastSuccess = startedMs;
  for (const w of writes) {
    const key = w.idempotencyKey ?? '';
    if ((permitted.get(key) ?? 0) > w.atMs) early++;
    if (credentialPermitted > w.atMs) credentialEarly++;
    if (w.status === 429) {
      limited.push(w.atMs);
      const seconds = Number(w.retryAfter);
      const until = w.atMs + (Number.isFinite(seconds) ? seconds * 1000 : 0);
      permitted.set(key, until);
      credentialPermitted = Math.max(credentialPermitted, until);
    }
    if (w.status >= 200 && w.status < 300) lastSuccess = Math.max(lastSuccess, w.atMs);
  }
  let maxInWindow = 0;
  for (let i = 0, j = 0; i < limited.length; i++) {
    while ((limited[i] ?? 0) - (limited[j] ?? 0) >= 60_000) j++;
    maxInWindow = Math.max(maxInWindow, i - j + 1);
  }
  const makespanMs = lastSuccess - startedMs;
  let longestPauseMs = 0;
  let longestPauseAtMs = 0;
  for (let i = 1; i < writes.length; i++) {
    const gap = (writes[i]?.atMs ?? 0) - (writes[i - 1]?.atMs ?? 0);
    if (gap > longestPauseMs) [longestPauseMs, longestPauseAtMs] = [gap, (writes[i - 1]?.atMs ?? 0) - startedMs];
  }
  return {
    scenario: s.id,
    name: s.name,
    configuredPerMinute: s.configuredPerMinute ?? null,
    workerProcesses: s.processes ?? 1,
    succeeded,
    makespanMs,
    makespanOverIdeal: Math.round((makespanMs / idealMs) * 1000) / 1000,
    pacedOverIdeal:
      Math.round(((lastSuccess - (writes[0]?.atMs ?? startedMs)) / (((N - 1) / L) * 60_000)) * 1000) / 1000,
    providerCalls: writes.length,
    inspections: answers.length - writes.length,
    rateLimited: limited.length,
    max429sPerWindow: maxInWindow,
    callsBeforePermittedTime: early,
    callsBeforeCredentialPermittedTime: credentialEarly,
    duplicates,
    firstCallAfterMs: (writes[0]?.atMs ?? startedMs) - startedMs,
    longestPauseMs,
    longestPauseAtMs,
    rateLimitedAtMs: limited.slice(0, 20).map((t) => t - startedMs),
  };
}

/** History events per intent: the median, the 90th percentile and the largest, over every intent of a scenario. */
interface HistoryEvents {
  median: number;
  p90: number;
  max: number;
}

async function historyLengths(client: Client, workflowIds: string[]): Promise<HistoryEvents> {
  const lengths: number[] = [];
  for (const id of workflowIds) {
    const history = await client.workflow.getHandle(id).fetchHistory();
    lengths.push(history.events?.length ?? 0);
  }
  lengths.sort((a, b) => a - b);
  const at = (q: number) => lengths[Math.min(lengths.length - 1, Math.floor(q * lengths.length))] ?? 0;
  return { median: at(0.5), p90: at(0.9), max: lengths[lengths.length - 1] ?? 0 };
}

async function runScenario(s: Scenario, address: string, client: Client): Promise<Result & { submitTookMs: number }> {
  const answers: AnsweredRequest[] = [];
  const sim = await startProviderSim({ scenario: simScenario(s), onAnswer: (a) => answers.push(a) });
  const prefix = `bench-${s.id}-${randomUUID().slice(0, 6)}`;
  // Scenario n: odd intents are refunds, and the first refund meets a 429 with Retry-After 60.
  const routeOf = (i: number) => (s.buckets && i % 2 === 1 ? 'refunds' : 'charges');
  const keys = Array.from({ length: N }, (_, i) =>
    s.buckets && i === 1 ? `bucket-first-${prefix}` : `${prefix}-${routeOf(i)}-${String(i).padStart(4, '0')}`,
  );
  const connection = await NativeConnection.connect({ address });
  const http = new Agent({ keepAliveTimeout: 10_000, connections: 64 });
  const children: ChildProcess[] = [];
  let workers: RetryqWorkers | Worker | undefined;
  let running: Promise<void> | undefined;
  try {
    let succeeded = 0;
    let startedMs: number;
    let submitted: Promise<number> = Promise.resolve(0);
    let entity: unknown;
    let historyEvents: HistoryEvents | undefined;
    if (s.kind === 'retryq') {
      const credential = credentialSchema.parse({
        id: CREDENTIAL,
        secretEnv: 'BENCH_KEY',
        requestsPerMinute: s.configuredPerMinute,
        concurrency: 4,
      });
      const config = {
        taskQueuePrefix: prefix,
        credentials: [credential],
        temporal: { external: true, address, namespace: 'default', connect: { connectionOptions: { address } } },
      };
      for (let p = 1; p < (s.processes ?? 1); p++)
        children.push(
          await startWorkerProcess({
            address,
            namespace: 'default',
            taskQueuePrefix: prefix,
            credentials: [credential],
            secrets: { [credential.id]: SECRET },
          }),
        );
      const w = await createWorkers({
        config,
        connection,
        secrets: new Map([[CREDENTIAL, SECRET]]),
        http,
        workflowBundle: await intentWorkflowBundle(),
        loadControl: s.loadControl ?? true,
      });
      workers = w;
      running = w.run();
      const rq = new RetryqClient({ client, taskQueuePrefix: prefix, requireServedCredential: false });
      log(`${s.id}: submitting ${N} intents (${s.name})`);
      startedMs = Date.now();
      submitted = Promise.all(
        keys.map((key, i) =>
          rq.submit({
            idempotencyKey: key,
            credential: CREDENTIAL,
            action: { method: 'POST', url: `${sim.url}/v1/${routeOf(i)}`, body: { amount: 100 + i, currency: 'eur' } },
            inspection: { url: `${sim.url}/v1/operations/{idempotencyKey}` },
            deadline: '1h',
            policy: { maxAttempts: 100, attemptTimeout: '10s' },
          }),
        ),
      ).then(() => Date.now() - startedMs);
      await submitted;
      for (const key of keys) if ((await rq.result(key)).phase === 'succeeded') succeeded++;
      historyEvents = await historyLengths(
        client,
        keys.map((k) => `intent:${k}`),
      );
      if (s.loadControl)
        entity = (await client.workflow.getHandle(credentialWorkflowId(CREDENTIAL, prefix)).query(credentialStateQuery))
          .counters;
    } else {
      const taskQueue = `${prefix}.plain`;
      const w = await Worker.create({
        connection,
        namespace: 'default',
        taskQueue,
        workflowsPath: path.join(here, 'load', 'plain-workflow.ts'),
        activities: plainActivities(http, SECRET),
        maxConcurrentActivityTaskExecutions: 4,
      });
      workers = w;
      running = w.run();
      log(`${s.id}: starting ${N} plain workflows (${s.name})`);
      startedMs = Date.now();
      const starting = Promise.all(
        keys.map((key, i) =>
          client.workflow.start('plainIntentWorkflow', {
            taskQueue,
            workflowId: `plain:${key}`,
            args: [`${sim.url}/v1/charges`, key, { amount: 100 + i, currency: 'eur' }],
          }),
        ),
      );
      submitted = starting.then(() => Date.now() - startedMs);
      const handles = await starting;
      for (const h of handles) {
        await h.result();
        succeeded++;
      }
    }
    const routes = s.buckets
      ? Object.fromEntries(
          (['charges', 'refunds'] as const).map((route) => {
            const done = answers.filter((a) => a.path.startsWith(`/v1/${route}`) && a.status >= 200 && a.status < 300);
            const last = Math.max(startedMs, ...done.map((a) => a.atMs));
            return [
              route,
              {
                succeeded: done.length,
                makespanMs: last - startedMs,
                makespanOverIdeal: Math.round(((last - startedMs) / ((N / 2 / L) * 60_000)) * 1000) / 1000,
                rateLimited: answers.filter((a) => a.path.startsWith(`/v1/${route}`) && a.status === 429).length,
              },
            ];
          }),
        )
      : undefined;
    const result = {
      ...analyse(s, answers, startedMs, succeeded, sim.metrics().totals.duplicates),
      ...(routes ? { routes } : {}),
      submitTookMs: await submitted,
      ...(historyEvents ? { historyEventsPerIntent: historyEvents } : {}),
      ...(entity ? { loadControl: entity } : {}),
    };
    log(`${s.id}: done in ${Math.round(result.makespanMs / 1000)} s, ${result.rateLimited} × 429`);
    return result;
  } finally {
    if (workers instanceof Worker) workers.shutdown();
    else workers?.shutdown();
    await running?.catch(() => undefined);
    for (const child of children) {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode === null ? child.once('exit', r) : r(undefined)));
    }
    await connection.close();
    await http.close();
    await sim.close();
  }
}

installRuntime({ level: 'ERROR' });
const cli = await resolveTemporalCli({ log });
if (!cli.path) throw new Error('bench:load needs the local Temporal CLI; run `npx tsx src/cli.ts doctor`');
const server = await startDevServer({ cliPath: cli.path, logLevel: 'error' });
try {
  const connection = await Connection.connect({ address: server.address });
  await registerSearchAttributes(connection, 'default');
  const client = new Client({ connection, namespace: 'default' });
  const list = chosen.map((id) => scenarios[id]!);
  const results = values.parallel
    ? await Promise.all(list.map((s) => runScenario(s, server.address, client)))
    : await (async () => {
        const out: Array<Result & { submitTookMs: number }> = [];
        for (const s of list) out.push(await runScenario(s, server.address, client));
        return out;
      })();
  const by = Object.fromEntries(results.map((r) => [r.scenario, r]));
  const ratio = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? null : y === 0 ? (x === 0 ? 1 : null) : Math.round((x / y) * 100) / 100;
  console.log(
    JSON.stringify(
      {
        bench: 'load',
        intents: N,
        providerLimitPerMinute: L,
        idealMakespanMs: idealMs,
        concurrencyPerProcess: 4,
        scenariosRan: values.parallel ? 'in parallel' : 'one after another',
        scenarios: by,
        comparisons: {
          rateLimitedPlainOverMisconfigured: ratio(by['d']?.rateLimited, by['b']?.rateLimited),
          rateLimitedUncoordinatedOverMisconfigured: ratio(by['e']?.rateLimited, by['b']?.rateLimited),
        },
      },
      null,
      2,
    ),
  );
} finally {
  await server.stop();
}
process.exit(0);
