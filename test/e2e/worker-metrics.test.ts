/**
 * The workers' metrics, scraped the way Prometheus does after a small run: a real `retryq worker` process (its own
 * Temporal runtime, with the SDK's Prometheus exporter) against a real dev server and the simulated provider. One
 * endpoint (`RETRYQ_METRICS_PORT`) carries retryq's counters (emitted through the SDK's metric meter), the SDK's
 * own worker metrics and the load-control metrics.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RetryqClient } from '../../src/client.js';
import { credentialServing } from '../../src/served-credentials.js';
import { startProviderSim } from '../../src/sim/index.js';
import type { ProviderSim } from '../../src/sim/index.js';
import { createDevServerEnvironment } from '../../src/testing.js';
import { freePort } from '../../src/temporal/server-process.js';

const root = new URL('../../', import.meta.url).pathname;
const prefix = `metrics-${randomUUID().slice(0, 8)}`;
const credential = 'metrics-cred';
/** How the test polls a status: every 100 ms, for up to 20 s. */
const poll = { timeout: 20_000, interval: 100 };

let env: TestWorkflowEnvironment;
let sim: ProviderSim;
let worker: ChildProcess;
let output = '';
let metricsPort: number;

beforeAll(async () => {
  env = await createDevServerEnvironment();
  sim = await startProviderSim({
    scenario: {
      keys: [{ key: 'sk_test_metrics', id: credential }],
      rules: [
        { match: { idempotencyKeyPrefix: 'lost-' }, steps: [{ commitThen: 'timeout' }], then: 'normal' },
        { match: { idempotencyKeyPrefix: 'hold-' }, steps: [{ status: 429, retryAfter: '3600' }] },
      ],
    },
  });
  metricsPort = await freePort();
  worker = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'worker'], {
    cwd: root,
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: env.address,
      RETRYQ_TASK_QUEUE_PREFIX: prefix,
      RETRYQ_CREDENTIALS: JSON.stringify([{ id: credential, secretEnv: 'METRICS_TEST_SECRET' }]),
      METRICS_TEST_SECRET: 'sk_test_metrics',
      RETRYQ_METRICS_PORT: String(metricsPort),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  worker.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  worker.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  await vi.waitFor(
    () => {
      if (worker.exitCode !== null) throw new Error(`retryq worker exited:\n${output}`);
      expect(output, output).toContain('retryq workers polling');
    },
    { timeout: 60_000, interval: 100 },
  );
});

afterAll(async () => {
  if (worker && worker.exitCode === null) {
    const exited = new Promise((r) => worker.once('exit', r));
    worker.kill('SIGTERM');
    await exited;
  }
  await sim?.close();
  await env?.teardown();
});

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text page. */
function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of `name`'s samples whose labels include `labels`. */
function total(all: Sample[], name: string, labels: Record<string, string> = {}): number {
  return all
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

async function scrape(): Promise<{ text: string; all: Sample[] }> {
  const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return { text, all: samples(text) };
}

describe('the workers metrics endpoint', () => {
  it("serves retryq's counters, the SDK's worker metrics and load control's after a small run", async () => {
    const rq = new RetryqClient({ client: env.client, taskQueuePrefix: prefix });
    await expect.poll(async () => (await credentialServing(env.client, prefix, credential)).served, poll).toBe(true);
    const intent = (key: string) => ({
      idempotencyKey: key,
      credential,
      action: { method: 'POST', url: `${sim.url}/v1/charges`, body: { amount: 100 } },
      inspection: { url: `${sim.url}/v1/operations/{idempotencyKey}` },
      deadline: '3h',
      policy: { attemptTimeout: '2s', jitter: 0 },
    });
    const ok = `ok-${randomUUID()}`;
    const lost = `lost-${randomUUID()}`;
    await rq.submit(intent(ok));
    await rq.submit(intent(lost));
    expect((await rq.result(ok)).phase).toBe('succeeded');
    expect((await rq.result(lost)).phase).toBe('succeeded'); // the inspection found it took effect
    // A 429 with an hour's Retry-After closes the credential's gate: the next intent's dispatch is held.
    const hold = `hold-${randomUUID()}`;
    await rq.submit(intent(hold));
    await expect.poll(async () => (await rq.status(hold)).phase, poll).toBe('waiting');
    const held = `ok-${randomUUID()}`;
    await rq.submit(intent(held));
    await expect.poll(async () => (await rq.status(held)).held?.reason, poll).toBe('rate_limited');
    await rq.cancel(hold, 'test over');
    await rq.cancel(held, 'test over');
    expect((await rq.result(hold)).phase).toBe('cancelled');
    expect((await rq.result(held)).phase).toBe('cancelled');

    // The workflow counters are emitted as the workflow tasks complete: wait for the last one to show.
    const { all, text } = await vi.waitFor(
      async () => {
        const page = await scrape();
        expect(total(page.all, 'retryq_intents_ended_total', { phase: 'cancelled' })).toBeGreaterThanOrEqual(2);
        return page;
      },
      { timeout: 10_000, interval: 200 },
    );
    const mine = { credential };
    expect(total(all, 'retryq_attempts_total', { ...mine, decision: 'success' })).toBe(1);
    expect(total(all, 'retryq_attempts_total', { ...mine, decision: 'unknown_outcome' })).toBe(1);
    expect(total(all, 'retryq_attempts_total', { ...mine, decision: 'rate_limited' })).toBe(1);
    expect(total(all, 'retryq_rate_limited_answers_total', { ...mine, kind: 'dispatch' })).toBe(1);
    expect(total(all, 'retryq_inspections_total', { ...mine, result: 'succeeded' })).toBe(1);
    expect(total(all, 'retryq_intents_ended_total', { ...mine, phase: 'succeeded' })).toBe(2);
    expect(total(all, 'retryq_intents_ended_total', { ...mine, phase: 'cancelled' })).toBe(2);
    expect(total(all, 'retryq_dispatches_held_total', { ...mine, reason: 'rate_limited' })).toBeGreaterThanOrEqual(1);
    // retryq's workflow counters carry the SDK's own labels.
    const attempt = all.find((s) => s.name === 'retryq_attempts_total');
    expect(attempt?.labels, JSON.stringify(attempt?.labels)).toMatchObject({
      namespace: 'default',
      taskQueue: `${prefix}.workflows`,
      workflowType: 'intentWorkflow',
    });
    // The SDK's own worker metrics, in Prometheus form.
    expect(total(all, 'temporal_workflow_completed_total')).toBeGreaterThanOrEqual(2);
    expect(total(all, 'temporal_activity_execution_latency_seconds_count')).toBeGreaterThanOrEqual(4);
    expect(all.some((s) => s.name === 'temporal_worker_task_slots_available')).toBe(true);
    // Load control's, from the same page.
    expect(total(all, 'retryq_credential_sends_total', { credential, kind: 'dispatch' })).toBeGreaterThanOrEqual(3);
    expect(text).toContain('# TYPE retryq_attempts_total counter');
  });

  it("starts without the SDK's warnings about its single-role workers, which are so by design", () => {
    // By now every worker has run (the test above): the SDK logged its notes when each started polling.
    expect(output).toContain('retryq workers polling');
    expect(output, output).not.toMatch(/not polling for \w+ tasks/);
  });
});
