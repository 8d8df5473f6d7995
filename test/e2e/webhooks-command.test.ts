/**
 * `retryq webhooks` as a user runs it: it starts while Temporal is unreachable and answers deliveries 503 (the
 * provider redelivers later), serves Prometheus metrics, stops cleanly on SIGTERM, and a missing signing secret is a
 * configuration error naming the variable, never a value.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it, vi } from 'vitest';
import { freePort } from '../../src/temporal/server-process.js';
import { SOURCE_SECRET, deliver, simEvent } from '../support/webhooks.js';

const root = new URL('../../', import.meta.url).pathname;
// Each test starts the CLI under tsx: slow on a busy machine.
vi.setConfig({ testTimeout: 180_000 });
const SOURCES = JSON.stringify([
  {
    name: 'acme',
    verify: { scheme: 'standard-webhooks', secretEnv: 'ACME_WEBHOOK_SECRET' },
    mapping: { key: 'idempotencyKey', state: 'status', result: 'result' },
  },
]);

function run(args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'webhooks', ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => ({ stdout, stderr }) };
}

describe('retryq webhooks', () => {
  it('starts without Temporal, answers 503 until it can store, serves metrics, and stops on SIGTERM', async () => {
    const closedPort = await freePort();
    const p = run(['--port', '0'], {
      TEMPORAL_ADDRESS: `127.0.0.1:${closedPort}`,
      RETRYQ_WEBHOOK_SOURCES: SOURCES,
      ACME_WEBHOOK_SECRET: SOURCE_SECRET,
      RETRYQ_WEBHOOK_TEMPORAL_TIMEOUT: '1s',
    });
    try {
      const url = await vi
        .waitFor(
          () => {
            const found = /^(http:\/\/\S+)$/m.exec(p.output().stdout)?.[1];
            if (!found) throw new Error('the receiver has not printed its address yet');
            return found;
          },
          { timeout: 90_000, interval: 100 },
        )
        .catch(() => '');
      expect(url, p.output().stderr).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const answer = await deliver(`${url}/webhooks/acme`, 'msg_1', simEvent('order-1', 'succeeded'));
      expect(answer.status).toBe(503);
      expect(answer.json).toMatchObject({ error: { code: 'webhook_temporal_unavailable' } });
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(metrics).toContain('retryq_webhook_deliveries_total{source="acme",outcome="unavailable"} 1');
    } finally {
      p.child.kill('SIGTERM');
    }
    expect(await p.exited).toBe(0);
    const { stdout, stderr } = p.output();
    expect(stderr).toContain('POST /webhooks/acme');
    expect(stdout + stderr).not.toContain(SOURCE_SECRET);
  });

  it('exits 78 naming the unset secret variable', async () => {
    const p = run([], { RETRYQ_WEBHOOK_SOURCES: SOURCES, ACME_WEBHOOK_SECRET: '' });
    expect(await p.exited).toBe(78);
    expect(p.output().stderr).toContain('ACME_WEBHOOK_SECRET: must hold the signing secret of webhook source acme');
  });

  it('exits 78 when no source is configured', async () => {
    const p = run([], { RETRYQ_WEBHOOK_SOURCES: '' });
    expect(await p.exited).toBe(78);
    expect(p.output().stderr).toContain('RETRYQ_WEBHOOK_SOURCES: must name at least one webhook source');
  });
});
