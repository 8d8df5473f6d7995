/**
 * Benchmark of `parseRetryAfter` against a naive `Date.parse`-based parser, measured side by side in
 * the same run. Prints one JSON object to stdout.
 *
 * Method: for each case, both parsers are warmed up, then run for `rounds` timed rounds, alternating
 * which goes first; each round runs a batch sized to take about `targetRoundMs`. Reported: the median
 * ops/s over the rounds, and `ratio` = ours / baseline (above 1: ours is faster).
 *
 * Run: `npm run bench:policy` (about 15 s).
 */
import { parseRetryAfter } from '../src/policy/index.js';

const now = new Date('2025-06-15T12:00:00Z');
const nowMs = now.getTime();

/** The baseline: what a parser written in a hurry does. */
function naiveRetryAfterMs(h: string): number {
  const n = Number(h);
  return isNaN(n) ? Date.parse(h) - nowMs : n * 1000;
}

/** Deterministic printable garbage (a linear congruential generator), so runs are comparable. */
function garbage(length: number): string {
  let state = 0x2545f491;
  let out = 'G'; // a letter first, so the value goes down the HTTP-date path rather than delay-seconds
  while (out.length < length) {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    out += String.fromCharCode(0x20 + ((state >>> 16) % 95));
  }
  return out;
}

const cases: Record<string, string> = {
  'delay-seconds': '120',
  'imf-fixdate': 'Sun, 15 Jun 2025 12:02:00 GMT',
  rfc850: 'Sunday, 15-Jun-25 12:02:00 GMT',
  asctime: 'Sun Jun 15 12:02:00 2025',
  'garbage-100kB': garbage(100_000),
  'digits-100kB': '9'.repeat(100_000),
};

const rounds = 7;
const targetRoundMs = 100;
const warmupMs = 150;

let sink = 0; // consumes every result, so no call can be optimised away

const ours = (h: string) => (): void => {
  const r = parseRetryAfter(h, { now });
  sink += r.kind === 'delay' || r.kind === 'date' ? r.delayMs : r.kind.length;
};
const baseline = (h: string) => (): void => {
  const ms = naiveRetryAfterMs(h);
  sink += Number.isNaN(ms) ? 1 : 2;
};

/** Runs `fn` `n` times and returns the elapsed ms. */
function timeBatch(fn: () => void, n: number): number {
  const start = performance.now();
  for (let i = 0; i < n; i++) fn();
  return performance.now() - start;
}

/** How many calls take about `ms` milliseconds (doubling until a batch is long enough to time). */
function calibrate(fn: () => void, ms: number): number {
  let n = 1;
  for (;;) {
    const elapsed = timeBatch(fn, n);
    if (elapsed >= ms / 4) return Math.max(1, Math.round((n * ms) / elapsed));
    n *= 2;
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

function measure(header: string): { ours: number; baseline: number } {
  const fns = { ours: ours(header), baseline: baseline(header) };
  const batch = {
    ours: calibrate(fns.ours, warmupMs) * (targetRoundMs / warmupMs),
    baseline: calibrate(fns.baseline, warmupMs) * (targetRoundMs / warmupMs),
  };
  const samples: { ours: number[]; baseline: number[] } = { ours: [], baseline: [] };
  for (let round = 0; round < rounds; round++) {
    const order: ('ours' | 'baseline')[] = round % 2 === 0 ? ['ours', 'baseline'] : ['baseline', 'ours'];
    for (const which of order) {
      const n = Math.max(1, Math.round(batch[which]));
      samples[which].push((n / timeBatch(fns[which], n)) * 1000);
    }
  }
  return { ours: median(samples.ours), baseline: median(samples.baseline) };
}

// Sanity: both parsers must agree on the valid cases, or the comparison is meaningless.
for (const name of ['delay-seconds', 'imf-fixdate', 'rfc850', 'asctime']) {
  const header = cases[name] ?? '';
  const r = parseRetryAfter(header, { now });
  const expected = naiveRetryAfterMs(header);
  if (!(r.kind === 'delay' || r.kind === 'date') || r.delayMs !== expected) {
    process.stderr.write(`bench:policy: ${name}: ours ${JSON.stringify(r)} disagrees with baseline ${expected}\n`);
    process.exit(1);
  }
}

const results: Record<
  string,
  { oursOpsPerSec: number; baselineOpsPerSec: number; ratio: number; oursNsPerOp: number }
> = {};
const started = performance.now();
for (const [name, header] of Object.entries(cases)) {
  const m = measure(header);
  results[name] = {
    oursOpsPerSec: Math.round(m.ours),
    baselineOpsPerSec: Math.round(m.baseline),
    ratio: Math.round((m.ours / m.baseline) * 100) / 100,
    oursNsPerOp: Math.round(1e9 / m.ours),
  };
}

process.stdout.write(
  `${JSON.stringify(
    {
      benchmark: 'parseRetryAfter vs naive Date.parse baseline',
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
      rounds,
      statistic: 'median ops/s over rounds',
      results,
      durationMs: Math.round(performance.now() - started),
      checksum: sink % 1000,
    },
    null,
    2,
  )}\n`,
);
