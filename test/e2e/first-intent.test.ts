/**
 * The README's "Your first intent", run verbatim against `retryq dev` started the way `npm run dev` starts it
 * (Temporal dev server, workers, the simulated provider and its demo batch). The only change: the ports. Tests
 * never take the fixed default ports, so the dev server, the UI and the simulator get free ones
 * (RETRYQ_DEV_PORT, RETRYQ_UI_PORT, RETRYQ_DEV_SIM_PORT) and the script's provider URL follows the simulator's
 * port; test/unit/readme.test.ts checks that the README's URL is the default of RETRYQ_DEV_SIM_PORT.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { connectClient } from '../../src/temporal/connect.js';
import { freePort } from '../../src/temporal/server-process.js';

const execFileAsync = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

let dataDir: string;
let env: NodeJS.ProcessEnv;
let dev: ChildProcess | undefined;
let output = '';
let script: string;

beforeAll(async () => {
  // `npm run dev` builds dist/ first (the script imports 'retryq', which resolves there); then `retryq dev`.
  await execFileAsync(process.execPath, ['scripts/bootstrap.mjs', '--build'], { cwd: root });
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'retryq-first-intent-'));
  env = {
    ...process.env,
    RETRYQ_DATA_DIR: dataDir,
    RETRYQ_DEV_PORT: String(await freePort()),
    RETRYQ_UI_PORT: String(await freePort()),
    RETRYQ_DEV_SIM_PORT: String(await freePort()),
    RETRYQ_METRICS_PORT: String(await freePort()),
  };
  delete env['TEMPORAL_ADDRESS'];
  dev = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'dev'], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  dev.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  dev.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (output.includes('retryq is running.')) {
        clearInterval(timer);
        resolve();
      }
    }, 100);
    dev!.once('exit', (code) => {
      clearInterval(timer);
      reject(new Error(`retryq dev exited early (${code}):\n${output}`));
    });
  });
  // "save this as first-intent.mjs in the repository": a git-ignored folder of the repository.
  await mkdir(path.join(root, 'test-results'), { recursive: true });
  script = path.join(root, 'test-results', `first-intent-${randomUUID()}.mjs`);
}, 240_000);

afterAll(async () => {
  if (dev && dev.exitCode === null) {
    const exited = new Promise((r) => dev!.once('exit', r));
    dev.kill('SIGTERM');
    await exited;
  }
  await rm(script, { force: true });
  await rm(dataDir, { recursive: true, force: true });
});

describe("the README's first intent", () => {
  it('succeeds against `npm run dev`, and its Current Details in the UI say so', async () => {
    const readme = await readFile(path.join(root, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Your first intent'));
    const code = /```js\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
    expect(code).toContain("'http://127.0.0.1:4010'");
    expect(output).toContain(`Simulated provider: http://127.0.0.1:${env['RETRYQ_DEV_SIM_PORT']}`);
    await writeFile(script, code.replaceAll('http://127.0.0.1:4010', `http://127.0.0.1:${env['RETRYQ_DEV_SIM_PORT']}`));

    const { stdout } = await execFileAsync(process.execPath, [script], { cwd: root, env, timeout: 170_000 });
    const [first = '', second = ''] = stdout.trim().split('\n');
    const key = /intent:(first-charge-\d+)/.exec(first)?.[1];
    expect(key, first).toBeDefined();
    expect(second).toMatch(/^succeeded \d+ /);

    const config = loadConfig(env);
    const { client, close } = await connectClient(config.temporal);
    try {
      const metadata = await client.workflow
        .getHandle(`intent:${key!}`)
        .query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      expect(metadata.currentDetails).toMatch(/^Succeeded after \d+ attempts?\.$/);
    } finally {
      await close();
    }
  }, 200_000);
});
