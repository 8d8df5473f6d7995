/**
 * Bundles workflow code once and keeps the bundle on disk, keyed by a hash of its inputs, so every worker, test
 * file and benchmark after the first starts without re-running webpack (seconds each on a 2-core machine).
 *
 * @example
 * ```ts
 * import { cachedWorkflowBundle } from './workflow-bundle.js';
 * const workflowBundle = await cachedWorkflowBundle({ workflowsPath: 'src/workflows/index.ts', inputs: ['src'] });
 * // Worker.create({ workflowBundle, … })
 * ```
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, readdir, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { WorkflowBundlePath, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { projectRoot, stateRoot } from './binaries.js';

export interface CachedBundleOptions {
  /** The bundle entry: a module that exports the workflow functions. */
  workflowsPath: string;
  /**
   * Files and folders whose contents feed the cache key (every file below a folder counts). Include everything
   * the workflows import. @default the entry's own folder
   */
  inputs?: string[];
  /** @default `node_modules/.cache/retryq/bundles` in the repository, or in the application that installed retryq */
  cacheDir?: string;
  /**
   * Modules evaluated once per workflow thread and shared by every workflow it runs, instead of once per workflow
   * (the SDK's `bundlerOptions.preloadModules`). Only for modules that hold no per-workflow state at module level:
   * their exports are frozen. @default none
   */
  preloadModules?: string[];
}

async function* filesBelow(p: string): AsyncGenerator<string> {
  const st = await stat(p).catch(() => undefined);
  if (!st) return;
  if (st.isFile()) {
    yield p;
    return;
  }
  const entries = await readdir(p, { withFileTypes: true });
  entries.sort((a, b) => a.name.localeCompare(b.name));
  for (const e of entries) {
    if (e.name === 'node_modules' || e.name.startsWith('.')) continue;
    yield* filesBelow(path.join(p, e.name));
  }
}

async function cacheKey(entry: string, inputs: string[], preload: string[]): Promise<string> {
  const hash = createHash('sha256');
  hash.update(entry);
  hash.update(JSON.stringify(preload));
  const lock = path.join(projectRoot, 'package-lock.json');
  for (const input of [...inputs, lock]) {
    for await (const file of filesBelow(path.resolve(input))) {
      hash.update(file);
      hash.update(await readFile(file));
    }
  }
  return hash.digest('hex').slice(0, 24);
}

/** Where a bundle for `opts` is cached: the folder and the key of its inputs. */
async function cacheSlot(opts: CachedBundleOptions) {
  const entry = path.resolve(opts.workflowsPath);
  const inputs = opts.inputs ?? [path.dirname(entry)];
  const dir = opts.cacheDir ?? path.join(stateRoot, 'node_modules', '.cache', 'retryq', 'bundles');
  const preloadModules = opts.preloadModules ?? [];
  return { entry, dir, preloadModules, key: await cacheKey(entry, inputs, preloadModules) };
}

/**
 * Cache entries not used for this long are removed whenever a new bundle is cached: each is 2–4 MB, and every change
 * of the code (an upgrade of retryq, a rebuild during development) adds one.
 */
export const BUNDLE_CACHE_STALE_AFTER_MS = 30 * 24 * 60 * 60 * 1000;

/** Marks a cache entry as used now (its modification time), so that pruning keeps it; a read-only cache stays as is. */
async function touch(file: string): Promise<void> {
  const now = new Date();
  await utimes(file, now, now).catch(() => undefined);
}

/** Removes the cache's entries (bundles and their code files) unused for {@link BUNDLE_CACHE_STALE_AFTER_MS}. */
async function pruneStale(dir: string): Promise<void> {
  const names = await readdir(dir).catch((): string[] => []);
  const now = Date.now();
  await Promise.all(
    names
      .filter((name) => /^[0-9a-f]{24}\.(json|js)$/.test(name))
      .map(async (name) => {
        const file = path.join(dir, name);
        const st = await stat(file).catch(() => undefined);
        if (st && now - st.mtimeMs > BUNDLE_CACHE_STALE_AFTER_MS) await unlink(file).catch(() => undefined);
      }),
  );
}

/** Returns the bundle for `workflowsPath`, from the disk cache when its inputs are unchanged. */
export async function cachedWorkflowBundle(opts: CachedBundleOptions): Promise<WorkflowBundleWithSourceMap> {
  return bundleIn(await cacheSlot(opts));
}

async function bundleIn(slot: Awaited<ReturnType<typeof cacheSlot>>): Promise<WorkflowBundleWithSourceMap> {
  const { entry, dir, preloadModules, key } = slot;
  const file = path.join(dir, `${key}.json`);
  try {
    const cached = JSON.parse(await readFile(file, 'utf8')) as WorkflowBundleWithSourceMap;
    if (typeof cached.code === 'string') {
      await touch(file);
      return cached;
    }
  } catch {
    /* not cached yet */
  }
  const bundle = await bundleInChildProcess(entry, preloadModules);
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(tmp, JSON.stringify(bundle));
    await rename(tmp, file);
    await pruneStale(dir);
  } catch (err) {
    // A read-only install still works; it only bundles again at the next start.
    console.warn(`retryq: could not cache the workflow bundle in ${dir} (${(err as Error).message}); continuing.`);
  }
  return bundle;
}

/**
 * The same bundle as {@link cachedWorkflowBundle}, as the path of a file that holds its code (with its inline source
 * map), for a long-running worker. Given the code itself, the SDK's `Worker` keeps it in its options for the worker's
 * lifetime: about 3.4–4.4 MB per bundle in the main thread's heap (the bundle is mostly its source map, and V8 stores
 * it as a two-byte string), which the workflow thread holds anyway. Given a path, the SDK reads the file, hands the
 * code to the thread and keeps nothing. Falls back to the code itself when the cache folder cannot be written.
 */
export async function cachedWorkflowBundleFile(
  opts: CachedBundleOptions,
): Promise<WorkflowBundlePath | WorkflowBundleWithSourceMap> {
  const slot = await cacheSlot(opts);
  const codePath = path.join(slot.dir, `${slot.key}.js`);
  const found = await stat(codePath).catch(() => undefined);
  if (found?.isFile()) {
    await touch(codePath);
    return { codePath };
  }
  const bundle = await bundleIn(slot);
  const tmp = `${codePath}.${process.pid}.tmp`;
  try {
    await mkdir(slot.dir, { recursive: true });
    await writeFile(tmp, bundle.code);
    await rename(tmp, codePath);
    return { codePath };
  } catch {
    // Read-only: bundleIn has said so already; the worker runs the code it holds.
    return bundle;
  }
}

/**
 * The process that runs webpack (the SDK's `bundleWorkflowCode`) and prints the bundle as JSON. webpack leaves
 * 60–110 MB behind in the process that runs it (heap, the SWC compiler, allocator arenas; measured: a thread of its own
 * still left 90 MB), so it runs in a short-lived process of its own, not in the worker that then runs for weeks.
 * webpack's progress chatter is left out; warnings and errors still show (stderr).
 */
const BUNDLER = `
const { sdk, workflowsPath, options } = JSON.parse(process.argv[1]);
const { bundleWorkflowCode } = require(sdk);
const quiet = {
  trace() {}, debug() {}, info() {}, log() {},
  warn: (message, meta) => console.warn(message, meta ?? ''),
  error: (message, meta) => console.error(message, meta ?? ''),
};
bundleWorkflowCode({ workflowsPath, logger: quiet, ...options }).then(
  (bundle) => process.stdout.write(JSON.stringify({ code: bundle.code, sourceMap: bundle.sourceMap })),
  (err) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  },
);
`;

/** Bundles `workflowsPath` with webpack in a process of its own (see {@link BUNDLER}). */
async function bundleInChildProcess(
  workflowsPath: string,
  preloadModules: string[],
): Promise<WorkflowBundleWithSourceMap> {
  const sdk = createRequire(import.meta.url).resolve('@temporalio/worker');
  const input = JSON.stringify({ sdk, workflowsPath, options: preloadModules.length > 0 ? { preloadModules } : {} });
  const child = spawn(process.execPath, ['-e', BUNDLER, input], { stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
  const [code] = (await once(child, 'close')) as [number | null];
  const stderr = Buffer.concat(err).toString('utf8').trim();
  if (code !== 0)
    throw new Error(`could not bundle the workflow code in ${workflowsPath}: ${stderr || `exit code ${code}`}`);
  if (stderr) process.stderr.write(`${stderr}\n`);
  return JSON.parse(Buffer.concat(out).toString('utf8')) as WorkflowBundleWithSourceMap;
}
