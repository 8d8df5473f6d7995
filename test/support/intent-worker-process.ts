/**
 * A retryq worker in its own process, for tests that kill a worker for real (SIGKILL): it connects to a running
 * Temporal server, runs `createWorkers` for the test credential on the given task-queue prefix, and prints `ready`
 * on stdout once polling. It never exits on its own.
 *
 * Usage: `node --import tsx test/support/intent-worker-process.ts <address> <namespace> <taskQueuePrefix> [roles]`
 * where `roles` is a comma-separated subset of `workflows,actions,inspect` (default: all three).
 */
import { NativeConnection } from '@temporalio/worker';
import { installRuntime } from '../../src/temporal/runtime.js';
import { createWorkers, intentWorkflowBundle } from '../../src/worker.js';
import { CREDENTIAL, SIM_SECRET, testCredential } from './intent-credential.js';

const [address, namespace, taskQueuePrefix, roleList] = process.argv.slice(2);
if (!address || !namespace || !taskQueuePrefix) {
  process.stderr.write('usage: intent-worker-process.ts <address> <namespace> <taskQueuePrefix> [roles]\n');
  process.exit(2);
}

const only = roleList?.split(',');
const roles = only
  ? { workflows: only.includes('workflows'), actions: only.includes('actions'), inspect: only.includes('inspect') }
  : undefined;

installRuntime({ level: 'ERROR' });
const connection = await NativeConnection.connect({ address });
const workers = await createWorkers({
  config: {
    taskQueuePrefix,
    credentials: [testCredential()],
    temporal: { external: true, address, namespace, connect: { connectionOptions: { address } } },
  },
  connection,
  secrets: new Map([[CREDENTIAL, SIM_SECRET]]),
  workflowBundle: await intentWorkflowBundle(),
  ...(roles ? { roles } : {}),
});
const running = workers.run();
process.stdout.write('ready\n');
await running;
