import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cachedWorkflowBundle, createTimeSkippingEnvironment } from '../../src/testing.js';
import type { sleeper } from '../fixtures/smoke-workflows.js';

let env: TestWorkflowEnvironment;
let workflowBundle: Awaited<ReturnType<typeof cachedWorkflowBundle>>;

beforeAll(async () => {
  env = await createTimeSkippingEnvironment();
  workflowBundle = await cachedWorkflowBundle({
    workflowsPath: new URL('../fixtures/smoke-workflows.ts', import.meta.url).pathname,
    inputs: [new URL('../fixtures', import.meta.url).pathname, new URL('../../src', import.meta.url).pathname],
  });
});
afterAll(async () => {
  await env?.teardown();
});

describe('the time-skipping environment', () => {
  it('completes a workflow that sleeps 6 hours by skipping time, not by waiting', async () => {
    const taskQueue = `smoke-${randomUUID()}`;
    const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle });
    const before = await env.currentTimeMs();
    const wallStart = performance.now();
    const elapsed = await worker.runUntil(
      env.client.workflow.execute<typeof sleeper>('sleeper', {
        args: [6 * 3_600_000],
        taskQueue,
        workflowId: `sleeper-${randomUUID()}`,
      }),
    );
    const wallMs = performance.now() - wallStart;
    // Workflow time moved 6 h while the test ran: only possible by skipping.
    expect(elapsed).toBeGreaterThanOrEqual(6 * 3_600_000);
    expect((await env.currentTimeMs()) - before).toBeGreaterThanOrEqual(6 * 3_600_000);
    console.log(JSON.stringify({ smoke: 'sleep-6h-time-skipping', wallMs: Math.round(wallMs) }));
  });
});
