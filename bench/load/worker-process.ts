/**
 * A second retryq worker process for bench:load scenario (c): connects to the benchmark's Temporal server and runs
 * `createWorkers` with the configuration given as one JSON argument; prints `ready` once polling, and drains and
 * exits on SIGTERM.
 *
 * Usage: `node --import tsx bench/load/worker-process.ts '<json>'` with
 * `{ address, namespace, prefix, credential: CredentialConfig, secret }`.
 */
import { NativeConnection } from '@temporalio/worker';
import type { CredentialConfig } from '../../src/config.js';
import { installRuntime } from '../../src/temporal/runtime.js';
import { createWorkers, intentWorkflowBundle } from '../../src/worker.js';

const arg = process.argv[2];
if (!arg) {
  process.stderr.write('usage: worker-process.ts <json>\n');
  process.exit(2);
}
const { address, namespace, prefix, credential, secret } = JSON.parse(arg) as {
  address: string;
  namespace: string;
  prefix: string;
  credential: CredentialConfig;
  secret: string;
};
installRuntime({ level: 'ERROR' });
const connection = await NativeConnection.connect({ address });
const workers = await createWorkers({
  config: {
    taskQueuePrefix: prefix,
    credentials: [credential],
    temporal: { external: true, address, namespace, connect: { connectionOptions: { address } } },
  },
  connection,
  secrets: new Map([[credential.id, secret]]),
  workflowBundle: await intentWorkflowBundle(),
});
const running = workers.run();
process.once('SIGTERM', () => workers.shutdown());
process.stdout.write('ready\n');
await running;
await connection.close();
process.exit(0);
