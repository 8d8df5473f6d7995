#!/usr/bin/env node
// `npm run build`: compiles src/ into dist/ (JavaScript, .d.ts, source maps) from a clean folder, copies the
// non-TypeScript files the code reads at run time, and records a hash of the inputs so that
// `scripts/bootstrap.mjs --build` rebuilds only when something changed. Node builtins and TypeScript only.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildInputsHash, buildStamp, root } from './build-inputs.mjs';

const dist = path.join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const r = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
if (r.status !== 0) {
  console.error(`build: tsc failed (exit ${r.status ?? r.signal}); dist/ is incomplete.`);
  process.exit(r.status ?? 1);
}
// Assets next to their code: the simulator's example scenario.
cpSync(path.join(root, 'src', 'sim', 'scenarios'), path.join(dist, 'sim', 'scenarios'), { recursive: true });
mkdirSync(path.dirname(buildStamp), { recursive: true });
writeFileSync(buildStamp, buildInputsHash() + '\n');
