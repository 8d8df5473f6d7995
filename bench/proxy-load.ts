/**
 * The load generator of `npm run bench:proxy`: a forked child process that runs one load per message
 * and answers with a summary.
 *
 * - `autocannon` (default): autocannon's programmatic API, closed loop over `connections`. Latency is
 *   taken per response from its client events in fractional milliseconds (its own histogram rounds to
 *   whole ms). With `overallRate`, each connection's quota is released at the start of every second,
 *   so arrivals come in bursts as wide as `connections`.
 * - `paced`: open loop: one request every `1000 / overallRate` ms whatever happens to earlier ones (many
 *   independent callers), on an undici keep-alive pool; requests still open at the end are aborted.
 *
 * Message in: {@link LoadSpec}. Message out: {@link LoadResult}.
 */
import { setMaxListeners } from 'node:events';
import { createRequire } from 'node:module';
import { Agent } from 'undici';

/** One load run. */
export interface LoadSpec {
  url: string;
  /** See the module notes. @default 'autocannon' */
  mode?: 'autocannon' | 'paced';
  connections: number;
  durationS: number;
  /** Requests per second over all connections; open throttle when absent (`paced` requires it). */
  overallRate?: number;
  headers?: Record<string, string>;
}

/** What one run measured. */
export interface LoadResult {
  requests: number;
  durationS: number;
  requestsPerSec: number;
  latencyMs: { p50: number; p90: number; p99: number; mean: number };
  statuses: Record<string, number>;
  errors: number;
  timeouts: number;
}

interface AutocannonClient {
  on(event: 'response', listener: (status: number, bytes: number, responseTimeMs: number) => void): void;
}
interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
}
type Autocannon = (
  opts: Record<string, unknown> & { setupClient?: (client: AutocannonClient) => void },
  done: (err: Error | null, result: AutocannonResult) => void,
) => unknown;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

const round3 = (n: number): number => Math.round(n * 1000) / 1000;

function summary(latencies: number[], statuses: Record<string, number>, durationS: number, errors: number): LoadResult {
  const sorted = Float64Array.from(latencies).sort();
  const mean = latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length);
  return {
    requests: latencies.length,
    durationS,
    requestsPerSec: Math.round(latencies.length / durationS),
    latencyMs: {
      p50: round3(percentile(sorted, 50)),
      p90: round3(percentile(sorted, 90)),
      p99: round3(percentile(sorted, 99)),
      mean: round3(mean),
    },
    statuses,
    errors,
    timeouts: 0,
  };
}

async function paced(spec: LoadSpec): Promise<LoadResult> {
  const rate = spec.overallRate ?? 0;
  if (!(rate > 0)) throw new Error('paced load needs overallRate > 0');
  const agent = new Agent({ keepAliveTimeout: 10_000 });
  const stop = new AbortController();
  setMaxListeners(0, stop.signal); // one listener per open request, by design
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  const open = new Set<Promise<void>>();
  const total = Math.round(rate * spec.durationS);
  const intervalMs = 1000 / rate;
  const started = performance.now();
  const one = async (): Promise<void> => {
    const t0 = performance.now();
    try {
      const res = await agent.request({
        origin: new URL(spec.url).origin,
        path: new URL(spec.url).pathname,
        method: 'GET',
        headers: spec.headers ?? {},
        signal: stop.signal,
      });
      await res.body.dump();
      latencies.push(performance.now() - t0);
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
    } catch {
      if (!stop.signal.aborted) errors += 1;
    }
  };
  let sent = 0;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(total, Math.floor((performance.now() - started) / intervalMs) + 1);
      while (sent < due) {
        sent += 1;
        const p = one();
        open.add(p);
        void p.finally(() => open.delete(p));
      }
      if (sent >= total) return resolve();
      setTimeout(tick, Math.max(0, sent * intervalMs - (performance.now() - started)));
    };
    tick();
  });
  const elapsedS = (performance.now() - started) / 1000;
  stop.abort();
  await Promise.allSettled([...open]);
  await agent.close();
  return summary(latencies, statuses, Math.max(spec.durationS, elapsedS), errors);
}

function run(spec: LoadSpec): Promise<LoadResult> {
  if (spec.mode === 'paced') return paced(spec);
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        duration: spec.durationS,
        pipelining: 1,
        timeout: 30,
        headers: spec.headers ?? {},
        ...(spec.overallRate === undefined ? {} : { overallRate: spec.overallRate }),
        setupClient: (client) => {
          client.on('response', (status, _bytes, ms) => {
            latencies.push(ms);
            statuses[status] = (statuses[status] ?? 0) + 1;
          });
        },
      },
      (err, result) => {
        if (err !== null) return reject(err);
        resolve({ ...summary(latencies, statuses, result.duration, result.errors), timeouts: result.timeouts });
      },
    );
  });
}

process.on('message', (spec: LoadSpec) => {
  run(spec).then(
    (result) => process.send?.({ ok: true, result }),
    (err: unknown) => process.send?.({ ok: false, error: err instanceof Error ? err.message : String(err) }),
  );
});
process.on('disconnect', () => process.exit(0));
