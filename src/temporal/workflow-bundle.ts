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
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
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

/** Returns the bundle for `workflowsPath`, from the disk cache when its inputs are unchanged. */
export async function cachedWorkflowBundle(opts: CachedBundleOptions): Promise<WorkflowBundleWithSourceMap> {
  const entry = path.resolve(opts.workflowsPath);
  const inputs = opts.inputs ?? [path.dirname(entry)];
  const dir = opts.cacheDir ?? path.join(stateRoot, 'node_modules', '.cache', 'retryq', 'bundles');
  const preloadModules = opts.preloadModules ?? [];
  const file = path.join(dir, `${await cacheKey(entry, inputs, preloadModules)}.json`);
  try {
    const cached = JSON.parse(await readFile(file, 'utf8')) as WorkflowBundleWithSourceMap;
    if (typeof cached.code === 'string') return cached;
  } catch {
    /* not cached yet */
  }
  const bundle = await bundleWorkflowCode({
    workflowsPath: entry,
    logger: quietLogger,
    ...(preloadModules.length > 0 ? { preloadModules } : {}),
  });
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    await mkdir(dir, { recursive: true });
    await writeFile(tmp, JSON.stringify(bundle));
    await rename(tmp, file);
  } catch (err) {
    // A read-only install still works; it only bundles again at the next start.
    console.warn(`retryq: could not cache the workflow bundle in ${dir} (${(err as Error).message}); continuing.`);
  }
  return bundle;
}

/** webpack's progress chatter is noise in test and CLI output; warnings and errors still show. */
const quietLogger = {
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  log: () => undefined,
  warn: (message: string, meta?: Record<string, unknown>) => console.warn(message, meta ?? ''),
  error: (message: string, meta?: Record<string, unknown>) => console.error(message, meta ?? ''),
};
