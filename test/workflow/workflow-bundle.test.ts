/**
 * The intent workflow bundle stays light (DESIGN.md "Workflow code stays light"): the SDK loads a workflow's
 * modules once per cached workflow, so a schema library or retryq's client-side modules in the bundle would be paid
 * by every cached intent. These checks read the webpack bundle the workers run and fail when such a module creeps
 * back in through any import chain.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  BUNDLE_CACHE_STALE_AFTER_MS,
  cachedWorkflowBundle,
  cachedWorkflowBundleFile,
} from '../../src/temporal/workflow-bundle.js';
import { intentWorkflowBundle } from '../../src/worker.js';

/** A workflow that imports retryq's zod schemas: what the checks below must catch. */
const schemaImporting = fileURLToPath(new URL('./fixtures/schema-importing-workflow.ts', import.meta.url));

/** Runs `body` with a fresh temporary folder, removed afterwards. */
async function inTempDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'retryq-bundle-'));
  try {
    await body(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The packages a bundle holds modules of (webpack names each module by its path). */
function packagesIn(code: string): Set<string> {
  return new Set([...code.matchAll(/"\.\/node_modules\/((?:@[^/"]+\/)?[^/"]+)\//g)].map((m) => m[1]!));
}

/** retryq's own source files in a bundle. */
function sourcesIn(code: string): Set<string> {
  return new Set([...code.matchAll(/"\.\/(src\/[^"]+\.ts)"/g)].map((m) => m[1]!));
}

/** The packages workflow code may pull in: the SDK's workflow side and what it depends on. */
const allowedPackages = ['@temporalio/common', '@temporalio/workflow', 'long', 'ms', 'nexus-rpc'];
/** retryq modules that build schemas or tables at load, or belong to clients, activities or workers. */
const forbiddenSources = [
  'src/intent.ts',
  'src/config.ts',
  'src/client.ts',
  'src/duration.ts',
  'src/worker.ts',
  'src/index.ts',
  'src/policy/index.ts',
  'src/policy/transport-failure.ts',
];

describe('the intent workflow bundle', () => {
  it('holds no zod and no package beyond the SDK workflow side', async () => {
    const { code } = await intentWorkflowBundle();
    const packages = packagesIn(code);
    expect(packages.size).toBeGreaterThan(0);
    expect(packages.has('zod')).toBe(false);
    expect([...packages].filter((p) => !allowedPackages.includes(p))).toEqual([]);
  });

  it('holds none of retryq’s schema, client or worker modules', async () => {
    const sources = sourcesIn((await intentWorkflowBundle()).code);
    expect(sources.has('src/workflows/intent.ts')).toBe(true);
    expect([...sources].filter((s) => forbiddenSources.includes(s) || s.startsWith('src/activities/'))).toEqual([]);
  });

  it('loads the workflow modules once per workflow thread, shared by every intent (preloaded), not once per intent', async () => {
    const { code } = await intentWorkflowBundle();
    // The SDK's entry runs `preloadModules()` when it creates a workflow thread's context, before any workflow.
    const preload = /preloadModules = function preloadModules\(\) \{([^}]*)\}/.exec(code);
    expect(preload?.[1]).toMatch(/"\.\/src\/workflows\/worker-entry\.ts"/);
    const control = await cachedWorkflowBundle({
      workflowsPath: schemaImporting,
      inputs: [schemaImporting, 'src'],
    });
    expect(/preloadModules = function preloadModules\(\) \{([^}]*)\}/.exec(control.code)?.[1]?.trim()).toBe('');
  });

  it('would be caught importing the schemas (control case)', async () => {
    const { code } = await cachedWorkflowBundle({
      workflowsPath: schemaImporting,
      inputs: [schemaImporting, 'src'],
    });
    expect(packagesIn(code).has('zod')).toBe(true);
    expect(sourcesIn(code).has('src/intent.ts')).toBe(true);
  });
});

describe('building a workflow bundle', () => {
  /** webpack's own modules loaded into this process (the SDK loads only webpack's small entry on import). */
  const webpackModulesHere = () =>
    Object.keys(createRequire(import.meta.url).cache).filter((k) => k.includes('/node_modules/webpack/lib/')).length;

  it('runs webpack in a process of its own, so the worker keeps none of its memory, and caches the result', async () => {
    await inTempDir(async (dir) => {
      const before = webpackModulesHere();
      const bundle = await cachedWorkflowBundle({ workflowsPath: schemaImporting, cacheDir: path.join(dir, 'cache') });
      expect(sourcesIn(bundle.code).has('src/intent.ts')).toBe(true);
      expect(webpackModulesHere()).toBe(before);
      expect((await readdir(path.join(dir, 'cache'))).filter((f) => f.endsWith('.json'))).toHaveLength(1);
    });
  });

  it('gives a long-running worker the bundle as a file holding the same code, so the SDK keeps no copy of it', async () => {
    await inTempDir(async (dir) => {
      const cacheDir = path.join(dir, 'cache');
      const asFile = await cachedWorkflowBundleFile({ workflowsPath: schemaImporting, cacheDir });
      if (!('codePath' in asFile)) throw new Error(`expected a path, got the code itself`);
      expect(path.dirname(asFile.codePath)).toBe(cacheDir);
      const { code } = await cachedWorkflowBundle({ workflowsPath: schemaImporting, cacheDir });
      expect(await readFile(asFile.codePath, 'utf8')).toBe(code);
      // The source map stays inline, so workflow stack traces still point at the sources.
      expect(code).toMatch(/\/\/# sourceMappingURL=data:application\/json;[^,]*base64,/);
      // Once written, the file is found again by the same inputs: one bundle, one file.
      expect(await cachedWorkflowBundleFile({ workflowsPath: schemaImporting, cacheDir })).toEqual(asFile);
      const files = await readdir(cacheDir);
      expect(files.filter((f) => f.endsWith('.json'))).toHaveLength(1);
      expect(files.filter((f) => f.endsWith('.js'))).toHaveLength(1);
    });
  });

  it('hands over the code itself when the cache folder cannot be written', async () => {
    await inTempDir(async (dir) => {
      // A cache "folder" below a plain file: no folder can be made there (whatever the user's rights).
      await writeFile(path.join(dir, 'a-file'), '');
      const bundle = await cachedWorkflowBundleFile({
        workflowsPath: schemaImporting,
        cacheDir: path.join(dir, 'a-file', 'cache'),
      });
      expect('code' in bundle && sourcesIn(bundle.code).has('src/intent.ts')).toBe(true);
    });
  });

  it('removes cache entries unused for 30 days when it caches a new bundle, and keeps the ones in use', async () => {
    await inTempDir(async (dir) => {
      const cacheDir = path.join(dir, 'cache');
      await mkdir(cacheDir);
      const longAgo = new Date(Date.now() - BUNDLE_CACHE_STALE_AFTER_MS - 24 * 60 * 60 * 1000);
      const lately = new Date(Date.now() - BUNDLE_CACHE_STALE_AFTER_MS / 2);
      const entry = async (name: string, time: Date) => {
        await writeFile(path.join(cacheDir, name), '{}');
        await utimes(path.join(cacheDir, name), time, time);
      };
      await entry('aaaaaaaaaaaaaaaaaaaaaaaa.json', longAgo);
      await entry('aaaaaaaaaaaaaaaaaaaaaaaa.js', longAgo);
      await entry('bbbbbbbbbbbbbbbbbbbbbbbb.json', lately);
      await entry('notes.txt', longAgo); // not an entry: left alone
      const asFile = await cachedWorkflowBundleFile({ workflowsPath: schemaImporting, cacheDir });
      if (!('codePath' in asFile)) throw new Error('expected a path, got the code itself');
      const key = path.basename(asFile.codePath, '.js');
      expect((await readdir(cacheDir)).sort()).toEqual(
        ['bbbbbbbbbbbbbbbbbbbbbbbb.json', `${key}.js`, `${key}.json`, 'notes.txt'].sort(),
      );
      // Using an entry marks it as used: a worker that starts from it keeps it from being pruned.
      await utimes(asFile.codePath, longAgo, longAgo);
      await cachedWorkflowBundleFile({ workflowsPath: schemaImporting, cacheDir });
      expect(Date.now() - (await stat(asFile.codePath)).mtimeMs).toBeLessThan(60_000);
    });
  });

  it('says which workflow code could not be bundled, with webpack’s reason', async () => {
    await inTempDir(async (dir) => {
      const workflowsPath = path.join(dir, 'missing.ts');
      await expect(cachedWorkflowBundle({ workflowsPath, cacheDir: path.join(dir, 'cache') })).rejects.toThrow(
        `could not bundle the workflow code in ${workflowsPath}`,
      );
    });
  });
});
