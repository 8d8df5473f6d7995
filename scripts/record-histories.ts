/**
 * (Re)records the intent workflow histories that the replay test replays: `npm run record-histories`.
 * Writes test/workflow/histories/*.json; see test/support/history-recording.ts for the scenarios.
 * `npm run record-histories -- --missing` records only scenarios that have no file yet.
 */
import { fileURLToPath } from 'node:url';
import { installRuntime } from '../src/temporal/runtime.js';
import { recordIntentHistories } from '../test/support/history-recording.js';

installRuntime({ level: 'WARN' });
const outDir = fileURLToPath(new URL('../test/workflow/histories', import.meta.url));
const written = await recordIntentHistories(outDir, { onlyMissing: process.argv.includes('--missing') });
console.log(`wrote ${written.length} histories to ${outDir}`);
