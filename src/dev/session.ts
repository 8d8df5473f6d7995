/**
 * `retryq dev`: the main job on a developer machine. Starts (or connects to) Temporal, registers retryq's search
 * attributes, runs the workers, and on SIGINT/SIGTERM drains the workers before stopping the server, leaving no
 * process behind.
 *
 * - No `TEMPORAL_ADDRESS` configured: starts the Temporal dev server from the resolved CLI binary, with SQLite
 *   persistence in `RETRYQ_DATA_DIR` (state survives restarts) and the Web UI on `RETRYQ_UI_PORT` (8233).
 * - `TEMPORAL_ADDRESS` configured: connects there and starts no server (a production cluster or Temporal Cloud).
 *
 * Around the embedded server (docs/operations.md, "How `retryq dev` behaves when…"): the data dir is checked
 * (every problem is a `DataDirError`, exit 78) and locked (a second `retryq dev` on it gets a
 * `DataDirInUseError`); the server is supervised (supervisor.ts: its death or hang is said in one
 * line and it is restarted from the same SQLite file, a bounded number of times); it cannot outlive this process
 * (a watchdog stops it; a server that did is recognised and stopped at the next start); and the SDK's logs, the
 * native core's included, go to `retryq-dev.log` in the data dir with the server's output.
 *
 * @example
 * ```ts
 * import { startDev } from './session.js';
 * const dev = await startDev({ config: loadConfig(), log: console.log });
 * await dev.stop();
 * ```
 */
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import type { RetryqConfig } from '../config.js';
import { resolveSecrets } from '../config.js';
import { dataDirError, prepareDataDir } from './data-dir.js';
import { lockDataDir } from './data-dir-lock.js';
import type { DataDirLock } from './data-dir-lock.js';
import type { ServerRestartsExhaustedError } from '../errors.js';
import { openJsonLog } from './log-file.js';
import type { JsonLog } from './log-file.js';
import { diskFullWords, superviseServer } from './supervisor.js';
import type { ServerSupervisor, SupervisorEvent, SupervisorOptions } from './supervisor.js';
import { resolveTemporalCli } from '../temporal/binaries.js';
import { connectClient, connectWorker } from '../temporal/connect.js';
import { registerSearchAttributes } from '../temporal/register-search-attributes.js';
import { installRuntime } from '../temporal/runtime.js';
import { startDevServer } from '../temporal/server-process.js';
import type { ManagedServer } from '../temporal/server-process.js';
import type { LoadMetrics } from '../load-control/metrics.js';
import { createWorkers } from '../worker.js';
import type { RetryqWorkers } from '../worker.js';

/** The log file's name in the data dir. */
export const DEV_LOG_FILE = 'retryq-dev.log';
/** The embedded server's SQLite file's name in the data dir. */
export const DEV_DB_FILE = 'temporal.db';

/** The data dir, checked and (with an embedded server) locked, and its log file, open. */
export interface DevDataDir {
  readonly dir: string;
  readonly log: JsonLog;
  /** Held when this process runs the embedded server. */
  readonly lock: DataDirLock | undefined;
  /** Releases the lock and closes the log. Idempotent. */
  release(): Promise<void>;
}

/**
 * Checks the data dir, takes its lock when the server is embedded (stopping a server an earlier, killed
 * `retryq dev` left behind), opens the log file and installs the SDK runtime to log there.
 *
 * @throws `DataDirError` when the data dir cannot be used; `DataDirInUseError` when another
 *   `retryq dev` holds it.
 */
export async function claimDataDir(
  config: RetryqConfig,
  say: (line: string) => void,
  /** Where the SDK's own Prometheus exporter listens, if anywhere (see `installRuntime`). */
  sdkMetricsAddress?: string,
): Promise<DevDataDir> {
  const dir = config.dev.dataDir;
  await prepareDataDir(dir, [DEV_DB_FILE, DEV_LOG_FILE]);
  const lock = config.temporal.external
    ? undefined
    : await lockDataDir({
        dir,
        address: `${config.dev.ip}:${config.dev.port}`,
        uiPort: config.dev.uiPort,
        log: say,
      });
  const log = openJsonLog(path.join(dir, DEV_LOG_FILE), say);
  installRuntime({ level: 'INFO', coreLevel: 'WARN', log, sdkMetricsAddress });
  let released: Promise<void> | undefined;
  return {
    dir,
    log,
    lock,
    release: () =>
      (released ??= (async () => {
        await lock?.release();
        await log.close();
      })()),
  };
}

export interface DevOptions {
  config: RetryqConfig;
  /** Secrets by credential id. @default read from each credential's `secretEnv` */
  secrets?: ReadonlyMap<string, string>;
  log: (line: string) => void;
  /** Load-control metrics of the workers. */
  metrics?: LoadMetrics;
  /** The data dir from {@link claimDataDir}. @default claimed here (and released by `stop()`) */
  dataDir?: DevDataDir;
  /** Supervision of the embedded server: restarts, health checks (tests and chaos scenarios shorten them). */
  supervision?: Pick<
    SupervisorOptions,
    'maxRestarts' | 'restartWindowMs' | 'healthIntervalMs' | 'healthTimeoutMs' | 'unresponsiveAfterMs' | 'onEvent'
  >;
}

export interface DevSession {
  client: Client;
  workers: RetryqWorkers;
  /** The embedded server running now, when one was started (a new one after each restart). */
  readonly server: ManagedServer | undefined;
  /** Its supervision, when the server is embedded. */
  supervisor: ServerSupervisor | undefined;
  uiUrl: string | undefined;
  /** The log file (SDK logs, native core included, and the server's output). */
  logFile: string;
  /** Resolves when the workers stop (after {@link stop}, or on a worker failure: it then rejects). */
  running: Promise<void>;
  /** Resolves if the embedded server kept dying and supervision gave up; never otherwise. */
  serverGaveUp: Promise<ServerRestartsExhaustedError>;
  /** Drains the workers, closes connections, stops the embedded server, frees the data dir. Idempotent. */
  stop(): Promise<void>;
}

/** Starts Temporal (unless external), the workers, and returns a handle to stop them in the right order. */
export async function startDev(opts: DevOptions): Promise<DevSession> {
  const { config, log } = opts;
  const secrets = opts.secrets ?? resolveSecrets(config.credentials);
  const dataDir = opts.dataDir ?? (await claimDataDir(config, log));
  let supervisor: ServerSupervisor | undefined;
  let connection: NativeConnection | undefined;
  let clientClose: (() => Promise<void>) | undefined;
  try {
    if (!config.temporal.external) {
      const cli = await resolveTemporalCli({ log });
      if (!cli.path) throw new Error('retryq dev needs a local Temporal CLI binary; see `retryq doctor`.');
      const dbFile = path.join(config.dev.dataDir, DEV_DB_FILE);
      log(`Starting Temporal dev server ${cli.version} (data: ${dbFile})…`);
      const onEvent = (event: SupervisorEvent) => {
        if (event.type === 'started') void dataDir.lock?.recordServer(event.pid).catch(() => undefined);
        opts.supervision?.onEvent?.(event);
      };
      supervisor = await superviseServer({
        ...opts.supervision,
        start: (onLine) =>
          startDevServer({
            cliPath: cli.path!,
            ip: config.dev.ip,
            port: config.dev.port,
            uiPort: config.dev.uiPort,
            dbFile,
            namespace: config.temporal.namespace,
            onLine,
          }),
        what: 'the Temporal server',
        dataPath: dbFile,
        logFile: dataDir.log.path,
        onServerLine: (line, pid) => dataDir.log.write({ source: 'temporal-server', pid, line }),
        say: log,
        onEvent,
      }).catch((err: unknown) => {
        // A full disk often stops the server while it creates or migrates its SQLite file: say so.
        const tail = (err as { logTail?: unknown }).logTail;
        const words = typeof tail === 'string' ? diskFullWords(tail) : undefined;
        if (!words) throw err;
        const full = Object.assign(new Error(`the Temporal server says "${words}"`), { code: 'ENOSPC' });
        throw dataDirError(config.dev.dataDir, 'start the Temporal server on', full);
      });
    } else {
      log(`Using Temporal at ${config.temporal.address} (namespace ${config.temporal.namespace}); no embedded server.`);
    }

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
        await supervisor?.stop();
        await dataDir.release();
      })());
    const sup = supervisor;
    return {
      client,
      workers,
      get server() {
        return sup?.server;
      },
      supervisor: sup,
      uiUrl: sup?.server.uiUrl,
      logFile: dataDir.log.path,
      running,
      serverGaveUp: sup?.gaveUp ?? new Promise(() => undefined),
      stop,
    };
  } catch (err) {
    await connection?.close().catch(() => undefined);
    await clientClose?.().catch(() => undefined);
    await supervisor?.stop();
    await dataDir.release();
    throw err;
  }
}
