/**
 * `npm run chaos`: the fault suite (docs/operations.md, "Behaviour under faults"). Starts a real Temporal dev
 * server on a SQLite file and free ports, the provider simulator, and two retryq worker processes (one runs every
 * dispatch, the other serves workflows and inspections), then runs each scenario of scripts/chaos/scenarios.ts
 * against them and prints one JSON document on stdout. Exits 1 when any check fails.
 *
 * Options: `--short` (the CI size), `--only name,name`.
 */
import { parseArgs } from 'node:util';
import { installRuntime } from '../src/temporal/runtime.js';
import { runScenarios, scenarios, sizes } from './chaos/scenarios.js';
import { World } from './chaos/world.js';

const { values } = parseArgs({ options: { short: { type: 'boolean' }, only: { type: 'string' } } });
const only = values.only?.split(',').map((s) => s.trim());
const unknown = only?.filter((name) => !scenarios.some((sc) => sc.name === name)) ?? [];
if (unknown.length > 0) {
  process.stderr.write(
    `chaos: no scenario named ${unknown.join(', ')}; the scenarios are ${scenarios.map((s) => s.name).join(', ')}\n`,
  );
  process.exit(2);
}
installRuntime({ level: 'ERROR' });
const size = values.short ? sizes.short : sizes.full;
const startedAt = Date.now();
const world = await World.start();
try {
  await Promise.all([world.startWorker('workflows,actions,inspect'), world.startWorker('workflows,inspect')]);
  const reports = await runScenarios(world, size, only);
  const report = {
    size: values.short ? 'short' : 'full',
    ...size,
    elapsedMs: Date.now() - startedAt,
    ok: reports.every((r) => r.ok),
    scenarios: reports,
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  process.exitCode = report.ok ? 0 : 1;
} finally {
  await world.close();
}
