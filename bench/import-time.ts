/**
 * `npm run bench:import`: how long `import 'retryq'` (what an application loads) takes next to
 * `import 'retryq/worker'` (the Temporal worker: native bridge, webpack), each in a fresh plain-Node process on the
 * built package (dist/), alternating so both see the same machine load. Prints one JSON object: medians in ms
 * (the import alone, measured inside the process, and the whole process from spawn to exit) and their ratio.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const rounds = Number(process.env['ROUNDS'] ?? 11);
const entries = ['retryq', 'retryq/worker', 'retryq/proxy', 'retryq/policy'] as const;

execFileSync(process.execPath, ['scripts/bootstrap.mjs', '--build'], { cwd: root, stdio: 'inherit' });

const probe = (specifier: string) =>
  `const t = process.hrtime.bigint(); await import(${JSON.stringify(specifier)}); ` +
  `process.stdout.write(String(Number(process.hrtime.bigint() - t) / 1e6)); process.exit(0);`;

function once(specifier: string): { importMs: number; processMs: number } {
  const started = process.hrtime.bigint();
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe(specifier)], {
    cwd: root,
    encoding: 'utf8',
  });
  const processMs = Number(process.hrtime.bigint() - started) / 1e6;
  if (r.status !== 0) throw new Error(`import ${specifier} failed: ${r.stderr}`);
  return { importMs: Number(r.stdout), processMs };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.floor(s.length / 2)]! * 10) / 10;
};

// One warm-up each (file system cache), then alternating rounds.
for (const e of entries) once(e);
const samples = Object.fromEntries(entries.map((e) => [e, { importMs: [] as number[], processMs: [] as number[] }]));
for (let i = 0; i < rounds; i++)
  for (const e of entries) {
    const s = once(e);
    samples[e]!.importMs.push(s.importMs);
    samples[e]!.processMs.push(s.processMs);
  }

const result = Object.fromEntries(
  entries.map((e) => [e, { importMs: median(samples[e]!.importMs), processMs: median(samples[e]!.processMs) }]),
);
const client = result['retryq']!;
const worker = result['retryq/worker']!;
console.log(
  JSON.stringify(
    {
      benchmark: 'import-time',
      node: process.version,
      rounds,
      medians: result,
      workerOverClient: {
        importMs: Math.round((worker.importMs / client.importMs) * 100) / 100,
        processMs: Math.round((worker.processMs / client.processMs) * 100) / 100,
      },
    },
    null,
    2,
  ),
);
