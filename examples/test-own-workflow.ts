import { Worker } from '@temporalio/worker';
import { cachedWorkflowBundle, createTimeSkippingEnvironment } from 'retryq/testing';

const env = await createTimeSkippingEnvironment(); // registers retryq's search attributes too
const workflowBundle = await cachedWorkflowBundle({ workflowsPath: 'src/workflows/index.ts', inputs: ['src'] });
const worker = await Worker.create({ connection: env.nativeConnection, taskQueue: 'test', workflowBundle });
const result = await worker.runUntil(
  env.client.workflow.execute<() => Promise<string>>('myWorkflow', { taskQueue: 'test', workflowId: 'wf-1' }),
); // a workflow that sleeps for days finishes in milliseconds
console.log(result);
await env.teardown(); // also stops the server process
