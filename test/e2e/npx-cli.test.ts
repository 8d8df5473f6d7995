/**
 * `npx retryq` in the repository, as the docs tell people to call it: `--json` puts exactly one JSON document on
 * stdout (scripts pipe it into a parser), and everything meant for people goes to stderr. The same command from an
 * installed package is exercised by test/e2e/consumer-package.test.ts.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/temporal/server-process.js';

const execFileAsync = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

async function npx(args: string[], env: NodeJS.ProcessEnv = {}) {
  try {
    const { stdout, stderr } = await execFileAsync('npx', ['--offline', 'retryq', ...args], {
      cwd: root,
      env: { ...process.env, ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('npx retryq', () => {
  it('doctor --json writes one JSON document to stdout and nothing else', async () => {
    const run = await npx(['doctor', '--json']);
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout) as { temporalCli: { version: string }; node: string };
    expect(report.node).toBe(process.version);
    expect(report.temporalCli.version).toContain('1.9.1');
  });

  it('status --json when Temporal is unreachable: nothing on stdout, the reason and the fix on stderr, exit 1', async () => {
    const nobody = await freePort();
    const run = await npx(['status', 'order-1', '--json'], { TEMPORAL_ADDRESS: `127.0.0.1:${nobody}` });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`Cannot reach Temporal at 127.0.0.1:${nobody}`);
    expect(run.stderr).toContain('TEMPORAL_ADDRESS');
  });

  it('--version prints the package version and nothing else', async () => {
    const pkg = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as { version: string };
    const run = await npx(['--version']);
    expect(run).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
  });

  it('an unknown command: usage on stderr, exit 2', async () => {
    const run = await npx(['frobnicate']);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('unknown command "frobnicate"');
  });
});
