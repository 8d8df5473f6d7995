/**
 * The load generator of `npm run bench:proxy`: a forked child process that runs autocannon (its
 * programmatic API) once per message and answers with a summary. Latency is taken per response from
 * autocannon's client events in fractional milliseconds (its own histogram rounds to whole ms).
 *
 * Message in: {@link LoadSpec}. Message out: {@link LoadResult}.
 */
import { createRequire } from 'node:module';

/** One load run. */
export interface LoadSpec {
  url: string;
  connections: number;
  durationS: number;
  /** Requests per second over all connections; open throttle when absent. */
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

function run(spec: LoadSpec): Promise<LoadResult> {
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
        const sorted = Float64Array.from(latencies).sort();
        const mean = latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length);
        resolve({
          requests: latencies.length,
          durationS: result.duration,
          requestsPerSec: Math.round(latencies.length / result.duration),
          latencyMs: {
            p50: round3(percentile(sorted, 50)),
            p90: round3(percentile(sorted, 90)),
            p99: round3(percentile(sorted, 99)),
            mean: round3(mean),
          },
          statuses,
          errors: result.errors,
          timeouts: result.timeouts,
        });
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
