import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { retryPhaseKey } from '../../src/search-attributes.js';
import { registerSearchAttributes } from '../../src/temporal/register-search-attributes.js';
import { cachedWorkflowBundle, createDevServerEnvironment } from '../../src/testing.js';
import type { echo, markPhase } from '../fixtures/smoke-workflows.js';

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
const taskQueue = `smoke-${randomUUID()}`;

beforeAll(async () => {
  env = await createDevServerEnvironment();
  const workflowBundle = await cachedWorkflowBundle({
    workflowsPath: new URL('../fixtures/smoke-workflows.ts', import.meta.url).pathname,
    inputs: [new URL('../fixtures', import.meta.url).pathname, new URL('../../src', import.meta.url).pathname],
  });
  worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle });
  running = worker.run();
});
afterAll(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
});

describe('the real dev server', () => {
  it('runs a workflow round-trip', async () => {
    const result = await env.client.workflow.execute<typeof echo>('echo', {
      args: ['hello'],
      taskQueue,
      workflowId: `echo-${randomUUID()}`,
    });
    expect(result.input).toBe('hello');
    expect(result.runId).toMatch(/[0-9a-f-]{36}/);
  });

  it('shows a search attribute written by a workflow through the visibility API', async () => {
    const workflowId = `mark-${randomUUID()}`;
    const phase = `phase-${randomUUID().slice(0, 8)}`;
    const handle = await env.client.workflow.start<typeof markPhase>('markPhase', {
      args: [phase],
      taskQueue,
      workflowId,
    });
    await handle.result();
    // Visibility is eventually consistent: poll the list until the workflow shows.
    const listed = async () => {
      const ids: string[] = [];
      for await (const wf of env.client.workflow.list({ query: `RetryPhase = "${phase}"` })) ids.push(wf.workflowId);
      return ids;
    };
    await expect.poll(listed, { timeout: 10_000, interval: 200 }).toEqual([workflowId]);
    const desc = await handle.describe();
    expect(desc.typedSearchAttributes.get(retryPhaseKey)).toBe(phase);
  });

  it('registers search attributes idempotently (a second registration adds nothing)', async () => {
    await expect(registerSearchAttributes(env.connection, 'default')).resolves.toEqual([]);
  });
});
