/**
 * `retryq dev`: the main job on a developer machine. Starts (or connects to) Temporal, registers retryq's search
 * attributes, runs the workers, and on SIGINT/SIGTERM drains the workers before stopping the server, leaving no
 * process behind.
 *
 * - No `TEMPORAL_ADDRESS` configured: starts the Temporal dev server from the resolved CLI binary, with SQLite
 *   persistence in `RETRYQ_DATA_DIR` (state survives restarts) and the Web UI on `RETRYQ_UI_PORT` (8233).
 * - `TEMPORAL_ADDRESS` configured: connects there and starts no server (a production cluster or Temporal Cloud).
 *
 * @example
 * ```ts
 * import { startDev } from './dev.js';
 * const dev = await startDev({ config: loadConfig(), log: console.log });
 * await dev.stop();
 * ```
 */
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { RetryqConfig } from './config.js';
import { resolveSecrets } from './config.js';
import { resolveTemporalCli } from './temporal/binaries.js';
import { connectClient, connectWorker } from './temporal/connect.js';
import { registerSearchAttributes } from './temporal/register-search-attributes.js';
import { startDevServer } from './temporal/server-process.js';
import type { ManagedServer } from './temporal/server-process.js';
import type { LoadMetrics } from './load-control/metrics.js';
import { createWorkers } from './worker.js';
import type { RetryqWorkers } from './worker.js';

export interface DevOptions {
  config: RetryqConfig;
  /** Secrets by credential id. @default read from each credential's `secretEnv` */
  secrets?: ReadonlyMap<string, string>;
  log: (line: string) => void;
  /** Load-control metrics of the workers. */
  metrics?: LoadMetrics;
}

export interface DevSession {
  client: Client;
  workers: RetryqWorkers;
  /** The embedded server, when one was started. */
  server: ManagedServer | undefined;
  uiUrl: string | undefined;
  /** Resolves when the workers stop (after {@link stop}, or on a worker failure: it then rejects). */
  running: Promise<void>;
  /** Drains the workers, closes connections, stops the embedded server. Idempotent. */
  stop(): Promise<void>;
}

/** Starts Temporal (unless external), the workers, and returns a handle to stop them in the right order. */
export async function startDev(opts: DevOptions): Promise<DevSession> {
  const { config, log } = opts;
  const secrets = opts.secrets ?? resolveSecrets(config.credentials);
  let server: ManagedServer | undefined;
  if (!config.temporal.external) {
    const cli = await resolveTemporalCli({ log });
    if (!cli.path) throw new Error('retryq dev needs a local Temporal CLI binary; see `retryq doctor`.');
    const dbFile = path.join(config.dev.dataDir, 'temporal.db');
    log(`Starting Temporal dev server ${cli.version} (data: ${dbFile})…`);
    server = await startDevServer({
      cliPath: cli.path,
      ip: config.dev.ip,
      port: config.dev.port,
      uiPort: config.dev.uiPort,
      dbFile,
      namespace: config.temporal.namespace,
    });
  } else {
    log(`Using Temporal at ${config.temporal.address} (namespace ${config.temporal.namespace}); no embedded server.`);
  }

  let connection: NativeConnection | undefined;
  let clientClose: (() => Promise<void>) | undefined;
  try {
    const { client, connection: clientConnection, close } = await connectClient(config.temporal);
    clientClose = close;
    const added = await registerSearchAttributes(clientConnection, config.temporal.namespace);
    if (added.length > 0) log(`Registered search attributes: ${added.join(', ')}`);
    connection = await connectWorker(config.temporal);
    const workers = await createWorkers({
      config,
      connection,
      secrets,
      ...(opts.metrics ? { metrics: opts.metrics } : {}),
    });
    const running = workers.run();
    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        workers.shutdown();
        await running.catch(() => undefined);
        await connection?.close().catch(() => undefined);
        await clientClose?.().catch(() => undefined);
        await server?.stop();
      })());
    return { client, workers, server, uiUrl: server?.uiUrl, running, stop };
  } catch (err) {
    await connection?.close().catch(() => undefined);
    await clientClose?.().catch(() => undefined);
    await server?.stop();
    throw err;
  }
}
