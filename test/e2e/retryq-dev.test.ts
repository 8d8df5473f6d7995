import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RetryqClient } from '../../src/client.js';
import { loadConfig } from '../../src/config.js';
import { resolveTemporalCli } from '../../src/temporal/binaries.js';
import { connectClient } from '../../src/temporal/connect.js';
import { freePort } from '../../src/temporal/server-process.js';

const execFileAsync = promisify(execFile);
const root = new URL('../../', import.meta.url).pathname;

let dataDir: string;
let env: NodeJS.ProcessEnv;
let cli: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'retryq-dev-'));
  const port = await freePort();
  const uiPort = await freePort();
  env = {
    ...process.env,
    RETRYQ_DATA_DIR: dataDir,
    RETRYQ_DEV_PORT: String(port),
    RETRYQ_UI_PORT: String(uiPort),
    // On by default in dev (9464): never a fixed port in tests.
    RETRYQ_METRICS_PORT: String(await freePort()),
  };
  delete env['TEMPORAL_ADDRESS'];
  cli = (await resolveTemporalCli()).path!;
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

/** Starts `retryq dev` as a user would and resolves once it says it is running. */
async function startDev(): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'dev', '--no-demo'], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (out.includes('retryq is running.')) {
        clearInterval(timer);
        resolve();
      }
    }, 100);
    child.once('exit', (code) => {
      clearInterval(timer);
      reject(new Error(`retryq dev exited early (${code}):\n${out}`));
    });
  });
  return { child, output: () => out };
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  child.kill('SIGTERM');
  return exited;
}

async function serverProcesses(): Promise<string[]> {
  const { stdout } = await execFileAsync('ps', ['-eo', 'pid,args']);
  return stdout.split('\n').filter((l) => l.includes('start-dev') && l.includes(dataDir));
}

describe('retryq dev with no Temporal address configured', () => {
  it('serves the Web UI, keeps intents across a restart, and leaves no process behind', async () => {
    const first = await startDev();
    const config = loadConfig(env);
    expect(first.output()).toContain(`Temporal UI:   http://localhost:${env['RETRYQ_UI_PORT']}`);
    const ui = await fetch(`http://localhost:${env['RETRYQ_UI_PORT']}/`);
    expect(ui.status).toBe(200);

    // An intent whose credential has no worker stays open: it must still be there after the restart.
    const key = `persist-${randomUUID()}`;
    const { client, close } = await connectClient(config.temporal);
    await new RetryqClient({ client }).submit(
      {
        idempotencyKey: key,
        credential: 'nobody',
        action: { method: 'GET', url: 'http://127.0.0.1:9/v1/ping' },
      },
      { requireServedCredential: false },
    );
    await close();

    expect(await stop(first.child)).toBe(0);
    expect(first.output()).toContain('Stopped.');
    expect(await serverProcesses()).toEqual([]);

    const second = await startDev();
    try {
      const { stdout } = await execFileAsync(cli, [
        'workflow',
        'list',
        '--address',
        config.temporal.address,
        '--query',
        `WorkflowId = "intent:${key}"`,
        '--output',
        'json',
      ]);
      const rows = JSON.parse(stdout) as { execution: { workflowId: string } }[];
      expect(rows.map((r) => r.execution.workflowId)).toEqual([`intent:${key}`]);
    } finally {
      expect(await stop(second.child)).toBe(0);
    }
    expect(await serverProcesses()).toEqual([]);
  });
});

describe('retryq dev when the port is taken', () => {
  it('exits with an error that names the port instead of attaching to the other server', async () => {
    const first = await startDev();
    try {
      const clash = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'dev', '--no-demo'], {
        cwd: root,
        env: { ...env, RETRYQ_DATA_DIR: path.join(dataDir, 'other'), RETRYQ_UI_PORT: String(await freePort()) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      clash.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise<number | null>((r) => clash.once('exit', r));
      expect(code).toBe(1);
      expect(out).toContain(`Port ${env['RETRYQ_DEV_PORT']} (Temporal gRPC)`);
    } finally {
      await stop(first.child);
    }
  });
});
