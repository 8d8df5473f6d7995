/**
 * retryq's workers in a child process for tests that kill a worker for real, through the launcher shared with the
 * benchmarks and the chaos suite (scripts/support/worker-process.ts), serving the test credential. Every child
 * started here is SIGKILLed after the test if it is still alive.
 */
import type { ChildProcess } from 'node:child_process';
import { afterEach } from 'vitest';
import { killWorkerProcess, rolesFrom, startWorkerProcess } from '../../scripts/support/worker-process.js';
import { CREDENTIAL, SIM_SECRET, testCredential } from './intent-credential.js';

/** Registers the cleanup hook; returns `start`, which resolves once the child's workers poll. */
export function useWorkerProcesses(): {
  /** `roles`: a comma-separated subset of `workflows,actions,inspect` (default: all three). */
  start(address: string, namespace: string, taskQueuePrefix: string, roles?: string): Promise<ChildProcess>;
  /** SIGKILL: no drain, no goodbye to the server. */
  kill(child: ChildProcess): Promise<void>;
} {
  const children: ChildProcess[] = [];
  afterEach(async () => {
    await Promise.all(children.splice(0).map(killWorkerProcess));
  });
  return {
    async start(address, namespace, taskQueuePrefix, roles) {
      const child = await startWorkerProcess({
        address,
        namespace,
        taskQueuePrefix,
        credentials: [testCredential()],
        secrets: { [CREDENTIAL]: SIM_SECRET },
        ...(roles ? { roles: rolesFrom(roles) } : {}),
      });
      children.push(child);
      return child;
    },
    kill: killWorkerProcess,
  };
}
