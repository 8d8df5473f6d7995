#!/usr/bin/env node
// Makes a fresh clone runnable; fast when everything is already there. Uses only Node builtins, because it runs
// before `npm ci`. What it does:
//   1. `npm ci` when node_modules is missing or was installed from another package-lock.json;
//   2. with --build: builds dist/ (scripts/build.mjs) when src/ or the TypeScript configuration changed since the
//      last build, so the package entry points (`import … from 'retryq'`) serve the current code;
//   3. with --browser: installs Debian's chromium (for the UI test) when /usr/bin/chromium is missing.
// The Temporal binaries are installed by the resolver itself (src/temporal/binaries.ts) on first use.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = new Set(process.argv.slice(2));

function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { stdio: 'inherit', cwd: root, ...opts });
  if (r.status !== 0) {
    console.error(`bootstrap: \`${cmd} ${argv.join(' ')}\` failed (exit ${r.status ?? r.signal}).`);
    process.exit(r.status ?? 1);
  }
}

// 1. node_modules in step with the lock file.
const lock = readFileSync(path.join(root, 'package-lock.json'));
const want = createHash('sha256').update(lock).digest('hex');
const stamp = path.join(root, 'node_modules', '.retryq-lock-sha256');
const have = existsSync(stamp) ? readFileSync(stamp, 'utf8').trim() : '';
if (have !== want) {
  console.error('bootstrap: installing npm dependencies (npm ci)…');
  run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error']);
  writeFileSync(stamp, want + '\n');
}

// 2. dist/ in step with src/.
if (args.has('--build')) {
  const { buildInputsHash, buildStamp } = await import('./build-inputs.mjs');
  const built = existsSync(buildStamp) ? readFileSync(buildStamp, 'utf8').trim() : '';
  if (built !== buildInputsHash() || !existsSync(path.join(root, 'dist', 'index.js'))) {
    console.error('bootstrap: building dist/ (npm run build)…');
    run(process.execPath, [path.join(root, 'scripts', 'build.mjs')]);
  }
}

// 3. Chromium for the browser test.
if (args.has('--browser') && !existsSync('/usr/bin/chromium')) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const sudo = isRoot ? [] : ['sudo', '-n'];
  console.error('bootstrap: installing chromium (apt-get) for the browser test…');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const [cmd, ...pre] = sudo.length ? sudo : ['apt-get'];
  const apt = sudo.length ? [...pre, 'apt-get'] : [];
  run(cmd, [...apt, 'update', '-qq'], { env });
  run(cmd, [...apt, 'install', '-y', '-qq', '--no-install-recommends', 'chromium'], { env });
}
