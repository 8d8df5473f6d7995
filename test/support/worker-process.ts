/**
 * Runs retryq's workers in a child process (test/support/intent-worker-process.ts) so a test can kill them for
 * real. Every child started here is SIGKILLed after the test if it is still alive.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';

const workerScript = fileURLToPath(new URL('./intent-worker-process.ts', import.meta.url));

/** Registers the cleanup hook; returns `start`, which resolves once the child's workers poll. */
export function useWorkerProcesses(): {
  start(address: string, namespace: string, taskQueuePrefix: string, roles?: string): Promise<ChildProcess>;
  kill(child: ChildProcess): Promise<void>;
} {
  const children: ChildProcess[] = [];
  const alive = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;
  afterEach(() => {
    for (const child of children.splice(0)) if (alive(child)) child.kill('SIGKILL');
  });
  return {
    async start(address, namespace, taskQueuePrefix, roles) {
      const args = [workerScript, address, namespace, taskQueuePrefix, ...(roles ? [roles] : [])];
      const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString()).slice(-4000);
      });
      const lines = createInterface({ input: child.stdout });
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`worker process not ready after 60 s:\n${stderr}`)), 60_000);
        lines.on('line', (line) => {
          if (line.trim() === 'ready') {
            clearTimeout(timer);
            resolve();
          }
        });
        child.once('exit', (code, signal) => {
          clearTimeout(timer);
          reject(new Error(`worker process exited (${code ?? signal}) before it was ready:\n${stderr}`));
        });
      });
      return child;
    },
    /** SIGKILL: no drain, no goodbye to the server. */
    async kill(child) {
      if (!alive(child)) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}
