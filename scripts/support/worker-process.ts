/**
 * retryq's production workers (`createWorkers`) in a child process, for whatever must kill a worker for real
 * (SIGKILL) or run a second one beside the caller's: the tests (test/support/worker-process.ts adds the cleanup
 * hook), the chaos suite (scripts/chaos) and `bench:load` share this one launcher.
 *
 * The parent calls {@link startWorkerProcess}; it runs this same file as the child, with the {@link WorkerProcessSpec}
 * as one JSON argument. The child connects to the given Temporal server, runs the workers, prints `ready` on stdout
 * once they poll, and never exits on its own: SIGKILL stops it at once, SIGTERM drains its workers, closes the
 * connection and exits 0.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { CredentialConfig } from '../../src/config.js';

/** What the child runs: one worker set for `credentials` on `taskQueuePrefix`, against `address`/`namespace`. */
export interface WorkerProcessSpec {
  address: string;
  namespace: string;
  taskQueuePrefix: string;
  /** Worker-side config of each credential served (already parsed with `credentialSchema`). */
  credentials: CredentialConfig[];
  /** The secret of each credential, by id. */
  secrets: Record<string, string>;
  /** Which workers run (default: all three). */
  roles?: { workflows: boolean; actions: boolean; inspect: boolean };
}

const self = fileURLToPath(import.meta.url);

/** Parses a comma-separated subset of `workflows,actions,inspect` into worker roles. */
export function rolesFrom(list: string): NonNullable<WorkerProcessSpec['roles']> {
  const roles = list.split(',').map((r) => r.trim());
  const unknown = roles.filter((r) => !['workflows', 'actions', 'inspect'].includes(r));
  if (unknown.length > 0)
    throw new Error(`worker roles: unknown ${unknown.join(', ')}; allowed: workflows, actions, inspect`);
  return {
    workflows: roles.includes('workflows'),
    actions: roles.includes('actions'),
    inspect: roles.includes('inspect'),
  };
}

/**
 * Starts the child and resolves with it once its workers poll; rejects with the child's last output if it exits
 * first or is not ready within `readyTimeoutMs` (then it is SIGKILLed). The caller owns the child: kill it, or send
 * SIGTERM to drain it.
 */
export async function startWorkerProcess(spec: WorkerProcessSpec, readyTimeoutMs = 120_000): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', self, JSON.stringify(spec)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const lines = createInterface({ input: child.stdout });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`worker process not ready after ${readyTimeoutMs} ms:\n${stderr}`)),
        readyTimeoutMs,
      );
      lines.on('line', (line) => {
        if (line.trim() !== 'ready') return;
        clearTimeout(timer);
        resolve();
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`worker process exited (${code ?? signal}) before it was ready:\n${stderr}`));
      });
    });
  } catch (err) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw err;
  }
  return child;
}

/** SIGKILL: no drain, no goodbye to the server. Resolves once the child is gone. */
export async function killWorkerProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

async function main(arg: string | undefined): Promise<void> {
  if (!arg) {
    process.stderr.write('usage: node --import tsx scripts/support/worker-process.ts <WorkerProcessSpec as JSON>\n');
    process.exit(2);
  }
  const spec = JSON.parse(arg) as WorkerProcessSpec;
  // Loaded here, not at the top: the parent imports this file too and needs none of the worker.
  const { NativeConnection } = await import('@temporalio/worker');
  const { installRuntime } = await import('../../src/temporal/runtime.js');
  const { createWorkers, intentWorkflowBundle } = await import('../../src/worker.js');
  installRuntime({ level: 'ERROR' });
  const { address, namespace } = spec;
  const connection = await NativeConnection.connect({ address });
  const workers = await createWorkers({
    config: {
      taskQueuePrefix: spec.taskQueuePrefix,
      credentials: spec.credentials,
      temporal: { external: true, address, namespace, connect: { connectionOptions: { address } } },
    },
    connection,
    secrets: new Map(Object.entries(spec.secrets)),
    workflowBundle: await intentWorkflowBundle(),
    ...(spec.roles ? { roles: spec.roles } : {}),
  });
  process.once('SIGTERM', () => workers.shutdown());
  const running = workers.run();
  process.stdout.write('ready\n');
  await running;
  await connection.close();
  process.exit(0);
}

if (process.argv[1] === self) await main(process.argv[2]);
