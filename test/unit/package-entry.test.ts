/**
 * The package's entry points, checked on the built output (dist/, as an installed copy would load it): what each
 * one loads, that every `exports` entry resolves to JavaScript with types, and the shape of each entry module.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

const execFileAsync = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

interface PackageJson {
  exports: Record<string, string | { types: string; default: string }>;
  bin: Record<string, string>;
  files: string[];
  dependencies: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}
let pkg: PackageJson;

beforeAll(async () => {
  // dist/ in step with src/ (a no-op when nothing changed since the last build).
  await execFileAsync(process.execPath, ['scripts/bootstrap.mjs', '--build'], { cwd: root });
  pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as PackageJson;
}, 120_000);

/** The module files that `import(specifier)` loads in a fresh plain-Node process, resolved from the repository. */
async function modulesLoadedBy(specifier: string): Promise<string[]> {
  const { stdout } = await execFileAsync(process.execPath, ['test/fixtures/loaded-modules.mjs', specifier], {
    cwd: root,
  });
  return (JSON.parse(stdout) as string[]).map((u) => u.replace(`file://${root}/`, ''));
}

const packageOf = (file: string) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1];

describe('importing the package', () => {
  it('`retryq` loads the client but neither @temporalio/worker (nor webpack, swc) nor the proxy', async () => {
    const loaded = await modulesLoadedBy('retryq');
    const packages = new Set(loaded.map(packageOf).filter(Boolean));
    expect(loaded).toContain('dist/client.js');
    expect(packages).toContain('@temporalio/client');
    for (const heavy of [
      '@temporalio/worker',
      '@temporalio/core-bridge',
      '@temporalio/testing',
      'webpack',
      '@swc/core',
      'tsx',
      'undici',
    ])
      expect(packages, `importing retryq loaded ${heavy}`).not.toContain(heavy);
    expect(loaded.filter((f) => f.startsWith('dist/proxy/') || f.startsWith('dist/activities/'))).toEqual([]);
    expect(loaded.filter((f) => f.startsWith('src/'))).toEqual([]);
  });

  it('`retryq/worker` does load @temporalio/worker: the probe sees what it claims to miss above', async () => {
    const packages = new Set((await modulesLoadedBy('retryq/worker')).map(packageOf));
    expect(packages).toContain('@temporalio/worker');
  });

  it('`retryq/proxy`, `retryq/policy` and `retryq/webhooks` load no Temporal worker either', async () => {
    for (const entry of ['retryq/proxy', 'retryq/policy', 'retryq/webhooks']) {
      const packages = new Set((await modulesLoadedBy(entry)).map(packageOf));
      expect(packages, entry).not.toContain('@temporalio/worker');
    }
  });
});

describe('package.json', () => {
  it('serves every entry point from dist/ with its types, and each file exists', () => {
    expect(Object.keys(pkg.exports).sort()).toEqual(
      ['.', './package.json', './policy', './proxy', './testing', './webhooks', './worker', './workflows'].sort(),
    );
    for (const [name, target] of Object.entries(pkg.exports)) {
      if (name === './package.json') continue;
      expect(typeof target, name).toBe('object');
      const { types, default: js } = target as { types: string; default: string };
      expect(Object.keys(target as object)[0], `${name}: "types" comes first`).toBe('types');
      expect(js, name).toMatch(/^\.\/dist\/.+\.js$/);
      expect(types, name).toBe(js.replace(/\.js$/, '.d.ts'));
      expect(existsSync(path.join(root, js)), js).toBe(true);
      expect(existsSync(path.join(root, types)), types).toBe(true);
      expect(existsSync(path.join(root, `${js}.map`)), `${js}.map`).toBe(true);
    }
  });

  it('does not need tsx or @temporalio/testing at run time (the latter is an optional peer of retryq/testing)', () => {
    expect(Object.keys(pkg.dependencies)).not.toContain('tsx');
    expect(Object.keys(pkg.dependencies)).not.toContain('@temporalio/testing');
    expect(pkg.peerDependenciesMeta?.['@temporalio/testing']?.optional).toBe(true);
    expect(pkg.bin['retryq']).toBe('bin/retryq.js');
    expect(pkg.files).toContain('bin/retryq.js');
  });
});

describe('entry modules', () => {
  const sources: Record<string, string> = {
    retryq: 'src/index.ts',
    'retryq/worker': 'src/worker.ts',
    'retryq/workflows': 'src/workflows/index.ts',
    'retryq/proxy': 'src/proxy/index.ts',
    'retryq/policy': 'src/policy/index.ts',
    'retryq/testing': 'src/testing.ts',
    'retryq/webhooks': 'src/webhooks/index.ts',
  };

  it('are the sources of the exports map', () => {
    for (const [entry, file] of Object.entries(sources)) {
      const key = entry === 'retryq' ? '.' : `./${entry.slice('retryq/'.length)}`;
      const target = pkg.exports[key] as { default: string };
      expect(target.default, entry).toBe(`./${file.replace(/^src\//, 'dist/').replace(/\.ts$/, '.js')}`);
    }
  });

  it('open with module TSDoc and an @example that imports its own entry point, and export by name only', async () => {
    for (const [entry, file] of Object.entries(sources)) {
      const text = await readFile(path.join(root, file), 'utf8');
      const doc = /^\/\*\*[\s\S]*?\*\//.exec(text)?.[0] ?? '';
      expect(doc, `${file} opens with TSDoc`).not.toBe('');
      expect(doc, `${file} has an @example`).toContain('@example');
      expect(doc, `${file}'s example imports ${entry}`).toContain(`from '${entry}'`);
      expect(text, `${file} has no export *`).not.toMatch(/^export \*/m);
    }
  });
});
