/**
 * Benchmark of the synchronous retrying proxy (`retryq proxy`). Prints one JSON object to stdout.
 *
 * Four processes on loopback: the upstream (`bench/proxy-upstream.ts`), two proxies started through
 * the real `retryq proxy` command (`bench/proxy-server.ts`, gate on and gate off), and the load
 * generator (autocannon in a forked child, `bench/proxy-load.ts`). This process only orchestrates.
 *
 * Scenarios, each with its baseline in the same run:
 *
 * 1. **throughput**: a fast upstream (`GET /fast`, small JSON) driven as hard as autocannon can, direct
 *    and through the proxy, alternating (direct, proxy, direct, …) over `rounds` rounds; medians and
 *    ratios (proxy / direct).
 * 2. **latency at a fixed rate**: the same at a fixed request rate well below saturation, so latency is
 *    the per-request cost rather than queueing; `addedMedianMs` = proxy p50 − direct p50.
 * 3. **gate**: an upstream limiting at 600 requests/min (scaled down to 20 per 2 s fixed windows so the
 *    run is short) answering 429 + `Retry-After`, offered 10× that rate through the proxy with the gate
 *    on and off; reported: upstream requests per successful response and wasted upstream calls
 *    (requests − successes). Three pairs: paced open-loop arrivals with callers using the proxy's
 *    default retries, the same with retries off (`Retryq-Max-Retries: 0`), and autocannon's bursty
 *    closed-loop arrivals with retries off.
 *
 * Run: `npm run bench:proxy` (about 85 s on 2 cores).
 */
import { fork, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LoadResult, LoadSpec } from './proxy-load.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const tsx = ['--import', 'tsx'];

const config = {
  rounds: 3,
  throughput: { connections: 32, durationS: 3 },
  fixedRate: { connections: 8, overallRate: 2000, durationS: 3 },
  gate: { windowMs: 2_000, limit: 20, connections: 20, overallRate: 200, durationS: 6 },
};

const children: ChildProcess[] = [];

/** Starts a service process and resolves with the first capture of `ready` in its stdout. */
async function startService(
  file: string,
  args: string[],
  ready: RegExp,
): Promise<{ child: ChildProcess; value: string }> {
  const child = spawn(process.execPath, [...tsx, path.join(here, file), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const m = ready.exec(out);
      if (m?.[1] !== undefined) resolve({ child, value: m[1] });
    });
    child.once('exit', (code) => reject(new Error(`${file} exited (${String(code)}) before it was ready: ${err}`)));
  });
}

const loader = fork(path.join(here, 'proxy-load.ts'), [], {
  execArgv: tsx,
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
children.push(loader);

async function load(spec: LoadSpec): Promise<LoadResult> {
  loader.send(spec);
  const [reply] = (await once(loader, 'message')) as [{ ok: true; result: LoadResult } | { ok: false; error: string }];
  if (!reply.ok) throw new Error(`load generator: ${reply.error}`);
  return reply.result;
}

async function http(method: string, url: string): Promise<string> {
  const res = await fetch(url, { method });
  return res.text();
}

/** CPU time (user + system) of a process so far, in µs, from /proc (Linux); `undefined` elsewhere. */
function cpuMicros(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
    return (ticks * 1e6) / 100; // USER_HZ is 100 on Linux
  } catch {
    return undefined;
  }
}

/** Runs `fn` and returns, with its result, the CPU µs each of `pids` spent meanwhile. */
async function withCpu<T>(
  pids: Record<string, number | undefined>,
  fn: () => Promise<T>,
): Promise<[T, Record<string, number>]> {
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuMicros(pid)]));
  const result = await fn();
  const spent: Record<string, number> = {};
  for (const [k, pid] of Object.entries(pids)) {
    const a = before[k];
    const b = cpuMicros(pid);
    if (a !== undefined && b !== undefined) spent[k] = b - a;
  }
  return [result, spent];
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};
const r2 = (n: number): number => Math.round(n * 100) / 100;
const r3 = (n: number): number => Math.round(n * 1000) / 1000;

interface Side {
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

function summarise(runs: LoadResult[]): Side {
  return {
    requestsPerSec: median(runs.map((r) => r.requestsPerSec)),
    p50Ms: r3(median(runs.map((r) => r.latencyMs.p50))),
    p99Ms: r3(median(runs.map((r) => r.latencyMs.p99))),
    errors: runs.reduce((n, r) => n + r.errors + r.timeouts + (r.requests - (r.statuses['200'] ?? 0)), 0),
  };
}

interface Processes {
  upstream: number | undefined;
  proxy: number | undefined;
}

async function sideBySide(
  direct: string,
  proxied: string,
  spec: Omit<LoadSpec, 'url'>,
  pids: Processes,
): Promise<{
  direct: Side;
  proxy: Side;
  rounds: { direct: number[]; proxy: number[] };
  cpuMicrosPerRequest: { upstreamDirect: number; upstreamProxied: number; proxy: number } | undefined;
}> {
  const runs: { direct: LoadResult[]; proxy: LoadResult[] } = { direct: [], proxy: [] };
  const cpu = { upstreamDirect: [] as number[], upstreamProxied: [] as number[], proxy: [] as number[] };
  for (let round = 0; round < config.rounds; round++) {
    const order: ('direct' | 'proxy')[] = round % 2 === 0 ? ['direct', 'proxy'] : ['proxy', 'direct'];
    for (const which of order) {
      const [result, spent] = await withCpu({ ...pids }, () =>
        load({ ...spec, url: which === 'direct' ? direct : proxied }),
      );
      runs[which].push(result);
      const n = Math.max(1, result.requests);
      if (spent['upstream'] !== undefined) {
        (which === 'direct' ? cpu.upstreamDirect : cpu.upstreamProxied).push(spent['upstream'] / n);
      }
      if (which === 'proxy' && spent['proxy'] !== undefined) cpu.proxy.push(spent['proxy'] / n);
    }
  }
  return {
    direct: summarise(runs.direct),
    proxy: summarise(runs.proxy),
    rounds: { direct: runs.direct.map((r) => r.requestsPerSec), proxy: runs.proxy.map((r) => r.requestsPerSec) },
    cpuMicrosPerRequest:
      cpu.proxy.length === 0
        ? undefined
        : {
            upstreamDirect: r2(median(cpu.upstreamDirect)),
            upstreamProxied: r2(median(cpu.upstreamProxied)),
            proxy: r2(median(cpu.proxy)),
          },
  };
}

interface GateRun {
  upstreamRequests: number;
  successes: number;
  upstreamRequestsPerSuccess: number;
  wastedUpstreamCalls: number;
  callerResponses: number;
  callerStatuses: Record<string, number>;
}

async function gateRun(
  upstream: string,
  proxyUrl: string,
  headers: Record<string, string>,
  mode: 'paced' | 'autocannon',
): Promise<GateRun> {
  const { windowMs, limit, connections, overallRate, durationS } = config.gate;
  await http('POST', `${upstream}/__reset?windowMs=${windowMs}&limit=${limit}`);
  const result = await load({ url: `${proxyUrl}/up/limited`, mode, connections, overallRate, durationS, headers });
  // Requests still waiting in the proxy were cancelled when the load generator hung up; let them settle.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const stats = JSON.parse(await http('GET', `${upstream}/__stats`)) as { requests: number; ok: number };
  return {
    upstreamRequests: stats.requests,
    successes: stats.ok,
    upstreamRequestsPerSuccess: r2(stats.requests / Math.max(1, stats.ok)),
    wastedUpstreamCalls: stats.requests - stats.ok,
    callerResponses: result.requests,
    callerStatuses: result.statuses,
  };
}

async function main(): Promise<void> {
  const started = performance.now();
  const loadAverageAtStart = os.loadavg().map(r2);
  const upstreamService = await startService('proxy-upstream.ts', [], /listening (\d+)/);
  const upstreamPort = upstreamService.value;
  const upstream = `http://127.0.0.1:${upstreamPort}`;
  const proxyArgs = ['--upstream', `up=${upstream}`, '--port', '0'];
  const [gateOn, gateOff] = await Promise.all([
    startService('proxy-server.ts', proxyArgs, /listening on (\S+)/),
    startService('proxy-server.ts', [...proxyArgs, '--no-gate'], /listening on (\S+)/),
  ]);

  // Warm-up: JIT, connection pools.
  await load({ url: `${upstream}/fast`, connections: 8, durationS: 1 });
  await load({ url: `${gateOn.value}/up/fast`, connections: 8, durationS: 1 });

  const direct = `${upstream}/fast`;
  const proxied = `${gateOn.value}/up/fast`;
  const pids = { upstream: upstreamService.child.pid, proxy: gateOn.child.pid };
  const throughput = await sideBySide(direct, proxied, config.throughput, pids);
  const fixedRate = await sideBySide(direct, proxied, config.fixedRate, pids);

  const retriesOff = { 'retryq-max-retries': '0' };
  const pair = async (headers: Record<string, string>, mode: 'paced' | 'autocannon') => ({
    gateOn: await gateRun(upstream, gateOn.value, headers, mode),
    gateOff: await gateRun(upstream, gateOff.value, headers, mode),
  });
  const gate = {
    pacedDefaultRetries: await pair({}, 'paced'),
    pacedRetriesOff: await pair(retriesOff, 'paced'),
    burstsRetriesOff: await pair(retriesOff, 'autocannon'),
  };
  const wasteCut = (g: { gateOn: GateRun; gateOff: GateRun }): number =>
    r2(g.gateOff.wastedUpstreamCalls / Math.max(1, g.gateOn.wastedUpstreamCalls));
  const perSuccessCut = (g: { gateOn: GateRun; gateOff: GateRun }): number =>
    r2(g.gateOff.upstreamRequestsPerSuccess / g.gateOn.upstreamRequestsPerSuccess);

  const throughputRatio = r2(throughput.proxy.requestsPerSec / throughput.direct.requestsPerSec);
  const addedMedianMs = r3(fixedRate.proxy.p50Ms - fixedRate.direct.p50Ms);
  const scenarios = Object.keys(gate) as (keyof typeof gate)[];
  const wastedCallsCut = Object.fromEntries(scenarios.map((k) => [k, wasteCut(gate[k])]));
  const upstreamRequestsPerSuccessCut = Object.fromEntries(scenarios.map((k) => [k, perSuccessCut(gate[k])]));

  const report = {
    benchmark: 'retryq proxy: direct vs through the proxy, and the 429 gate on vs off',
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    cpus: os.cpus().length,
    method:
      'loopback; upstream, two proxies (real `retryq proxy` command) and autocannon each in their own process; ' +
      'direct and proxied runs alternate; medians over rounds; latency per response in fractional ms; ' +
      'cpuMicrosPerRequest from /proc (user + system time of each process during a run / responses), which ' +
      'other load on the machine does not inflate the way it does throughput',
    loadAverage: { atStart: loadAverageAtStart, atEnd: os.loadavg().map(r2), note: 'other processes on the machine' },
    config,
    throughput: {
      ...throughput,
      ratio: { requestsPerSec: throughputRatio, p50: r2(throughput.proxy.p50Ms / throughput.direct.p50Ms) },
    },
    latencyAtFixedRate: {
      ...fixedRate,
      addedMedianMs,
      addedP99Ms: r3(fixedRate.proxy.p99Ms - fixedRate.direct.p99Ms),
    },
    gate: {
      upstreamLimit: `600/min, scaled down to ${config.gate.limit} per ${config.gate.windowMs} ms fixed windows (same rate, short windows so the run is short)`,
      offeredLoad: `${config.gate.overallRate} req/s (10× the limit) for ${config.gate.durationS} s`,
      arrivals: {
        paced: 'open loop, one request every 5 ms (many independent callers)',
        bursts: `autocannon closed loop over ${config.gate.connections} connections; each connection's per-second quota is released at once, so requests arrive ${config.gate.connections} at a time`,
      },
      callers: {
        DefaultRetries: 'no Retryq-* header: the proxy retries 429s after their Retry-After (up to 3 times)',
        RetriesOff: 'Retryq-Max-Retries: 0: every caller request is one upstream attempt at most',
      },
      ...gate,
      wastedCallsCut,
      upstreamRequestsPerSuccessCut,
    },
    targets: {
      throughputAtLeastHalfOfDirect: { measured: throughputRatio, met: throughputRatio >= 0.5 },
      addedMedianLatencyUnder1ms: { measuredMs: addedMedianMs, met: addedMedianMs < 1 },
      gateCutsWastedCallsAtLeast10x: {
        measured: wastedCallsCut,
        met: Object.fromEntries(scenarios.map((k) => [k, (wastedCallsCut[k] ?? 0) >= 10])),
      },
    },
    durationMs: Math.round(performance.now() - started),
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}

async function stopAll(): Promise<void> {
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = once(child, 'exit');
    if (child === loader) child.disconnect();
    else child.kill('SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

try {
  await main();
} catch (err) {
  process.stderr.write(`bench:proxy: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
} finally {
  await stopAll();
}
