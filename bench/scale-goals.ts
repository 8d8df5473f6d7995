/**
 * Issue #9's goals over several runs of `bench:scale` (`npm run bench:scale:goals`). Prints one JSON object to stdout;
 * each run's progress goes to stderr, and each run's own JSON is kept in `--out` as it finishes.
 *
 * One run of part a or b measures retryq and its baselines side by side, and its ratio is known to about ±15 % on
 * this kind of machine; this script runs parts a and b `--runs` times, taking turns (a, b, a, b, …, each run its own
 * `bench:scale` process with its own dev server), then part c `--c-runs` times, and judges each ratio goal on the
 * median of the runs' ratios, memory on the worst run and the wake-up storm on every run
 * (bench/scale-goals-summary.ts). Every run's figure is printed next to the verdict.
 *
 * Flags (the goal measurement's sizes by default): `--runs N` (3), `--c-runs N` (1), `--only a,b,c`,
 * `--intents N` (10000), `--complete N` (300), `--rounds N` (6), `--wake N` (10000), `--wake-after S` (480),
 * `--sides …` (part a; default retryq,bareTimer,bareTimerRecorded), `--b-sides …` (part b; default
 * retryq,bare,bareOwnQueueUpserts), `--out DIR` (default: a new directory under the system's temporary directory).
 * Exit code 1 when a run failed (the verdict then covers the runs that finished), 0 otherwise: the verdict is data,
 * not an assertion.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { goalsOverRuns } from './scale-goals-summary.js';
import type { ScaleRun } from './scale-goals-summary.js';

const here = path.dirname(fileURLToPath(import.meta.url));

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
function count(name: string, fallback: number): number {
  const raw = arg(name);
  if (raw === undefined) return fallback;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < 0) {
    console.error(`--${name} must be a whole number (got ${raw})`);
    process.exit(2);
  }
  return v;
}

const only = new Set((arg('only') ?? 'a,b,c').split(','));
const unknownParts = [...only].filter((p) => !['a', 'b', 'c'].includes(p));
if (unknownParts.length > 0) {
  console.error(`--only takes parts a, b and c separated by commas (got ${[...only].join(',')})`);
  process.exit(2);
}
const opts = {
  runs: count('runs', 3),
  cRuns: count('c-runs', 1),
  intents: count('intents', 10000),
  complete: count('complete', 300),
  rounds: count('rounds', 6),
  wake: count('wake', 10000),
  wakeAfterS: count('wake-after', 480),
  sides: arg('sides') ?? 'retryq,bareTimer,bareTimerRecorded',
  bSides: arg('b-sides') ?? 'retryq,bare,bareOwnQueueUpserts',
};
const outDir =
  arg('out') ?? path.join(os.tmpdir(), `retryq-scale-goals-${new Date().toISOString().replace(/[:.]/g, '-')}`);
mkdirSync(outDir, { recursive: true });

/** The `bench:scale` arguments of one run of `part`. */
function partArgs(part: 'a' | 'b' | 'c'): string[] {
  if (part === 'a') return ['--only', 'a', '--intents', String(opts.intents), '--sides', opts.sides];
  if (part === 'b')
    return [
      '--only',
      'b',
      '--complete',
      String(opts.complete),
      '--rounds',
      String(opts.rounds),
      '--b-sides',
      opts.bSides,
    ];
  return ['--only', 'c', '--wake', String(opts.wake), '--wake-after', String(opts.wakeAfterS)];
}

/** Runs `bench:scale` once (as its own process: a dev server of its own, nothing left over from the run before). */
function runOnce(args: string[]): Promise<ScaleRun & Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'scale.ts'), ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`bench:scale ${args.join(' ')} exited with code ${code}`));
      try {
        resolve(JSON.parse(stdout) as ScaleRun & Record<string, unknown>);
      } catch {
        reject(new Error(`bench:scale ${args.join(' ')} printed no JSON object on stdout`));
      }
    });
  });
}

async function main() {
  const t0 = performance.now();
  const plan: ('a' | 'b' | 'c')[] = [];
  for (let i = 0; i < opts.runs; i++) for (const p of ['a', 'b'] as const) if (only.has(p)) plan.push(p);
  for (let i = 0; i < opts.cRuns; i++) if (only.has('c')) plan.push('c');
  const runs: { part: string; file: string; loadavg1mAtStart: number; totalS?: number | undefined }[] = [];
  const results: ScaleRun[] = [];
  const failed: { part: string; error: string }[] = [];
  for (const [i, part] of plan.entries()) {
    const args = partArgs(part);
    console.error(`[scale-goals] run ${i + 1} of ${plan.length}: bench:scale ${args.join(' ')}`);
    const loadavg1mAtStart = Math.round(os.loadavg()[0]! * 100) / 100;
    try {
      const result = await runOnce(args);
      const file = path.join(outDir, `${String(i + 1).padStart(2, '0')}-${part}.json`);
      writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
      runs.push({ part, file, loadavg1mAtStart, totalS: result['totalS'] as number | undefined });
      results.push(result);
      console.error(`[scale-goals] run ${i + 1}: ${JSON.stringify(result['goals'])}`);
    } catch (err) {
      failed.push({ part, error: err instanceof Error ? err.message : String(err) });
      console.error(`[scale-goals] run ${i + 1} failed: ${failed.at(-1)!.error}`);
    }
  }
  const out = {
    bench: 'scale-goals',
    machine: { cpus: os.cpus().length, totalMemGb: Math.round(os.totalmem() / 2 ** 30) },
    options: opts,
    ...goalsOverRuns(results),
    runs,
    ...(failed.length > 0 ? { failed } : {}),
    totalS: Math.round((performance.now() - t0) / 10) / 100,
  };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  if (failed.length > 0) process.exitCode = 1;
}

void main();
