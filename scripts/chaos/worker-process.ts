/**
 * One retryq worker process for the chaos suite: production `createWorkers` (default options) for the chaos
 * credential, connected to the suite's Temporal dev server. Prints `ready` once polling; never exits on its own
 * (the suite SIGKILLs it, or stops it with SIGTERM, which drains).
 *
 * Usage: `node --import tsx scripts/chaos/worker-process.ts <address> <taskQueuePrefix> <simKey> <roles>`, roles a
 * comma-separated subset of `workflows,actions,inspect`.
 */
import { NativeConnection } from '@temporalio/worker';
import { credentialSchema } from '../../src/config.js';
import { installRuntime } from '../../src/temporal/runtime.js';
import { createWorkers, intentWorkflowBundle } from '../../src/worker.js';
import { CHAOS_CREDENTIAL } from './world.js';

const [address, taskQueuePrefix, simKey, roleList = 'workflows,actions,inspect'] = process.argv.slice(2);
const roles = roleList.split(',');
if (!address || !taskQueuePrefix || !simKey) {
  process.stderr.write('usage: worker-process.ts <address> <taskQueuePrefix> <simKey>\n');
  process.exit(2);
}

installRuntime({ level: 'ERROR' });
const connection = await NativeConnection.connect({ address });
const workers = await createWorkers({
  config: {
    taskQueuePrefix,
    credentials: [
      credentialSchema.parse({
        id: CHAOS_CREDENTIAL,
        secretEnv: 'CHAOS_KEY',
        requestsPerMinute: 6_000,
        // Every intent of a scenario in flight at once: a kill cuts off all of their calls.
        concurrency: 64,
        inspectConcurrency: 16,
      }),
    ],
    temporal: { external: true, address, namespace: 'default', connect: { connectionOptions: { address } } },
  },
  connection,
  secrets: new Map([[CHAOS_CREDENTIAL, simKey]]),
  workflowBundle: await intentWorkflowBundle(),
  roles: {
    workflows: roles.includes('workflows'),
    actions: roles.includes('actions'),
    inspect: roles.includes('inspect'),
  },
});
process.once('SIGTERM', () => workers.shutdown());
const running = workers.run();
process.stdout.write('ready\n');
await running;
await connection.close();
