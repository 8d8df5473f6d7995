/**
 * retryq as an application gets it: the packed tarball (`npm pack`, as it would be published) installed into an
 * application folder outside the repository, offline, with every other package taken from the npm cache that the
 * repository's own `npm ci` filled. Used by the consumer test and by the example application's test.
 *
 * @example
 * ```ts
 * const tarball = await packRetryq(tmp);
 * await installPacked(appDir, tarball); // appDir holds a package.json that depends on retryq
 * ```
 */
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** The repository's root. */
export const repo = path.resolve(import.meta.dirname, '../..');
export const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

interface LockEntry {
  version?: string;
  dev?: boolean;
  link?: boolean;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  [k: string]: unknown;
}
interface Lock {
  packages: Record<string, LockEntry>;
}

interface AppPackage {
  name: string;
  version: string;
  dependencies: Record<string, string>;
  overrides?: Record<string, string>;
  [k: string]: unknown;
}

/** Runs a command in `cwd` (environment: this process's plus `extraEnv`). */
export async function sh(cmd: string, args: string[], cwd: string, extraEnv: NodeJS.ProcessEnv = {}) {
  return execFileAsync(cmd, args, { cwd, env: { ...process.env, ...extraEnv }, maxBuffer: 64 * 1024 * 1024 });
}

/** Packs the package into `dir` (`npm pack` runs `prepack`, which builds dist/ when it is stale); the tarball's path. */
export async function packRetryq(dir: string): Promise<string> {
  const { stdout } = await sh(npm, ['pack', '--json', '--pack-destination', dir], repo);
  const packed = (JSON.parse(stdout) as { filename: string }[])[0]!;
  return path.join(dir, packed.filename);
}

/**
 * The application's package-lock.json: retryq from the tarball, and for its dependencies (and the application's
 * `extra` packages, such as the optional peer @temporalio/testing) exactly the versions the repository's lock pins,
 * so `npm ci --offline` finds every tarball in the cache without asking the registry for package metadata.
 */
function appLock(repoLock: Lock, tgz: string, app: AppPackage, extra: string[]): Lock {
  const self = repoLock.packages['']!;
  const packages: Record<string, LockEntry> = {};
  const wanted = new Set<string>();
  const visit = (from: string, name: string) => {
    // Node's resolution: the nearest node_modules/<name> from the requiring package upwards.
    for (let dir = from; ; dir = dir.slice(0, Math.max(0, dir.lastIndexOf('/node_modules/')))) {
      const candidate = `${dir ? `${dir}/` : ''}node_modules/${name}`;
      if (repoLock.packages[candidate]) {
        if (wanted.has(candidate)) return;
        wanted.add(candidate);
        const e = repoLock.packages[candidate];
        for (const dep of Object.keys({ ...e.dependencies, ...e.optionalDependencies })) visit(candidate, dep);
        return;
      }
      if (!dir) return;
    }
  };
  for (const dep of [...Object.keys(self.dependencies ?? {}), ...extra]) visit('', dep);
  for (const p of [...wanted].sort()) {
    const { dev: _dev, ...entry } = repoLock.packages[p]!;
    packages[p] = entry;
  }
  return {
    packages: {
      '': { name: app.name, version: app.version, dependencies: app.dependencies },
      'node_modules/retryq': {
        version: self.version!,
        resolved: `file:${tgz}`,
        dependencies: self.dependencies!,
        bin: self['bin'],
        engines: self['engines'],
        peerDependencies: self['peerDependencies'],
        peerDependenciesMeta: self['peerDependenciesMeta'],
      },
      ...packages,
    },
    ...{ name: app.name, version: app.version, lockfileVersion: 3, requires: true },
  };
}

/**
 * Installs the packed retryq into the application in `appDir`, as `npm install <tarball>` would: its package.json
 * then depends on `file:<tarball>`. Its other dependencies must be packages the repository's lock holds (retryq's
 * own, or its development dependencies such as @temporalio/testing) at the versions the repository pins; they come
 * from the npm cache (`npm ci --offline`), so the install needs no network.
 */
export async function installPacked(appDir: string, tarball: string): Promise<void> {
  const app = JSON.parse(await readFile(path.join(appDir, 'package.json'), 'utf8')) as AppPackage;
  const repoPkg = JSON.parse(await readFile(path.join(repo, 'package.json'), 'utf8')) as {
    version: string;
    overrides?: Record<string, string>;
    dependencies: Record<string, string>;
    devDependencies: Record<string, string>;
  };
  const extra = Object.keys(app.dependencies).filter((d) => d !== 'retryq');
  for (const dep of extra) {
    const pinned = repoPkg.dependencies[dep] ?? repoPkg.devDependencies[dep];
    if (app.dependencies[dep] !== pinned)
      throw new Error(`${appDir}/package.json: ${dep} must be ${pinned ?? 'one of the repository packages'}`);
  }
  app.dependencies = { ...app.dependencies, retryq: `file:${tarball}` };
  // The repository's lock was resolved under its overrides; the app pins the same versions.
  app.overrides = { ...app.overrides, protobufjs: repoPkg.overrides?.['protobufjs'] ?? '' };
  await writeFile(path.join(appDir, 'package.json'), JSON.stringify(app, null, 2) + '\n');
  const repoLock = JSON.parse(await readFile(path.join(repo, 'package-lock.json'), 'utf8')) as Lock;
  await writeFile(
    path.join(appDir, 'package-lock.json'),
    JSON.stringify(appLock(repoLock, tarball, app, extra), null, 2) + '\n',
  );
  await sh(npm, ['ci', '--offline', '--no-audit', '--no-fund', '--loglevel=error'], appDir);
}
