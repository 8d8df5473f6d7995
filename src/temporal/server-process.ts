/**
 * Starts and stops the local Temporal servers (the dev server from the Temporal CLI and the time-skipping test
 * server) as child processes that retryq owns.
 *
 * Unlike the SDK's ephemeral-server helpers, which wait a fixed time and connect to whatever answers on the port,
 * this module:
 * - refuses to start when the port is already taken by another process, and says which port and what to do;
 * - notices a child that exits during start-up and reports its exit code and last log lines at once;
 * - waits for readiness with a real gRPC call, not a fixed delay;
 * - runs the child in its own process group, so a terminal's Ctrl-C reaches retryq first and retryq can drain
 *   its workers before it stops the server, and kills the group if retryq itself exits;
 * - gives the child a watchdog: a tiny `sh` that reads a pipe from retryq and, when that pipe closes because
 *   retryq died in any way (SIGKILL included, where no exit handler runs), stops the server's process group. A
 *   server can therefore not outlive the retryq process that started it.
 *
 * @example
 * ```ts
 * import { resolveTemporalCli } from './binaries.js';
 * import { startDevServer } from './server-process.js';
 * const cli = await resolveTemporalCli();
 * const server = await startDevServer({ cliPath: cli.path!, port: 7233, uiPort: 8233, dbFile: '.data/temporal.db' });
 * console.log(server.address); // 127.0.0.1:7233
 * await server.stop();
 * ```
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { SearchAttributeType } from '@temporalio/common';
import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes.js';
import { PortInUseError, ServerExitedError, ServerStartTimeoutError } from '../errors.js';
import { retryqSearchAttributes } from '../search-attributes.js';

/** A server process started and owned by retryq. */
export interface ManagedServer {
  /** gRPC address, `host:port`. */
  readonly address: string;
  /** The Web UI's URL, when the UI is enabled. */
  readonly uiUrl: string | undefined;
  readonly pid: number;
  /** Resolves when the process has exited, for any reason. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The last lines the process printed (stdout and stderr). */
  logTail(lines?: number): string;
  /** SIGTERM to the process group, SIGKILL after `graceMs`; resolves when the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * A TCP port that is free on `host` now, chosen below Linux's ephemeral range (32768–60999): a port the OS hands
 * out for port 0 is also what it hands out for outgoing connections, so between choosing it and a server binding
 * it, a client socket may take it. Falls back to asking the OS after 50 tries.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (!(await somethingListens(host, port)) && (await canBind(host, port))) return port;
  }
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** True when something accepts TCP connections on host:port. */
function somethingListens(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host, port });
    const done = (v: boolean) => {
      sock.destroy();
      resolve(v);
    };
    sock.setTimeout(1000, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

/** True when this process could bind host:port right now. */
function canBind(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** Throws {@link PortInUseError} when the port is taken. */
export async function assertPortFree(host: string, port: number, purpose: string): Promise<void> {
  if ((await somethingListens(host, port)) || !(await canBind(host, port)))
    throw new PortInUseError(host, port, purpose);
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function killAllOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Last resort when retryq exits without stopping its servers (a crash): never leave an orphan server behind.
  process.on('exit', () => {
    for (const child of live) {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  });
}

/**
 * Watches this process on behalf of the process group `pgid`: `sh` blocks reading a pipe whose other end only
 * this process holds (Node opens its pipes close-on-exec, so no other child inherits it). When this process
 * ends, however it ends, the kernel closes that end, `read` returns, and the watchdog sends the group SIGTERM,
 * then SIGKILL if it is still there 5 s later. The watchdog runs in its own session, so a terminal's Ctrl-C or hang-up does not end
 * it first. `dismiss()` ends it without touching the group (after the server stopped, or died on its own).
 */
function startWatchdog(pgid: number): { dismiss: () => void } {
  const script =
    'read _ignored; kill -s TERM -- "-$1" 2>/dev/null || exit 0; ' +
    'for _ in 1 2 3 4 5 6 7 8 9 10; do sleep 0.5; kill -s 0 -- "-$1" 2>/dev/null || exit 0; done; ' +
    'kill -s KILL -- "-$1" 2>/dev/null';
  let dog: ChildProcess;
  try {
    dog = spawn('/bin/sh', ['-c', script, 'retryq-server-watchdog', String(pgid)], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: true,
    });
  } catch {
    return { dismiss: () => undefined }; // no sh: the exit handler still covers every exit but SIGKILL
  }
  dog.on('error', () => undefined);
  dog.stdin?.on('error', () => undefined);
  dog.unref();
  (dog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return {
    dismiss: () => {
      if (dog.exitCode === null && dog.signalCode === null) dog.kill('SIGKILL');
    },
  };
}

interface LaunchSpec {
  what: string;
  command: string;
  args: string[];
  host: string;
  ports: { port: number; purpose: string }[];
  grpcPort: number;
  uiUrl: string | undefined;
  readyTimeoutMs: number;
  /** One readiness probe; resolve true when ready. */
  probe: (address: string) => Promise<boolean>;
  onLine?: ((line: string) => void) | undefined;
}

async function launch(spec: LaunchSpec): Promise<ManagedServer> {
  for (const { port, purpose } of spec.ports) await assertPortFree(spec.host, port, purpose);

  const tail: string[] = [];
  const remember = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      tail.push(line);
      if (tail.length > 200) tail.shift();
      spec.onLine?.(line);
    }
  };
  const logTail = (n = 20) => tail.slice(-n).join('\n');

  killAllOnExit();
  const child = spawn(spec.command, spec.args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  live.add(child);
  const watchdog = child.pid ? startWatchdog(child.pid) : undefined;
  child.once('exit', () => watchdog?.dismiss());
  child.stdout.on('data', remember);
  child.stderr.on('data', remember);

  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      live.delete(child);
      resolve({ code, signal });
    });
    child.once('error', (err) => {
      live.delete(child);
      tail.push(`spawn failed: ${err.message}`);
      resolve({ code: null, signal: null });
    });
  });

  const address = `${spec.host}:${spec.grpcPort}`;
  const stop = async (graceMs = 10_000) => {
    if (child.exitCode !== null || child.signalCode !== null || !child.pid) return void (await exited);
    const signalGroup = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        /* already gone */
      }
    };
    signalGroup('SIGTERM');
    const timer = setTimeout(() => signalGroup('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
    // The group may hold helper processes even after the leader exited.
    signalGroup('SIGKILL');
  };

  let exitedEarly: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void exited.then((r) => (exitedEarly = r));
  const startedAt = Date.now();
  for (;;) {
    if (exitedEarly) throw new ServerExitedError(spec.what, exitedEarly.code, exitedEarly.signal, logTail());
    if (Date.now() - startedAt > spec.readyTimeoutMs) {
      await stop(2000);
      throw new ServerStartTimeoutError(
        `${spec.what} did not become ready on ${address} within ${spec.readyTimeoutMs} ms; it was stopped.\n` +
          `Last output:\n${logTail()}`,
      );
    }
    if (await somethingListens(spec.host, spec.grpcPort)) {
      const ready = await spec.probe(address).catch(() => false);
      if (ready && !exitedEarly) break;
    }
    await new Promise((r) => setTimeout(r, 150));
  }

  return { address, uiUrl: spec.uiUrl, pid: child.pid!, exited, logTail, stop };
}

/** Ready when the frontend answers and the namespace is registered. */
async function namespaceReady(address: string, namespace: string): Promise<boolean> {
  const conn = await Connection.connect({ address, connectTimeout: 2000 });
  try {
    await conn.workflowService.describeNamespace({ namespace });
    return true;
  } finally {
    await conn.close();
  }
}

export interface DevServerOptions {
  /** Path to the `temporal` CLI. */
  cliPath: string;
  /** @default '127.0.0.1' */
  ip?: string;
  /** gRPC port. @default a free port */
  port?: number;
  /** Web UI port, or `false` for no UI. @default false */
  uiPort?: number | false;
  /** SQLite file for persistence; in-memory when absent. */
  dbFile?: string;
  /** @default 'default' */
  namespace?: string;
  /** Server log level. @default 'warn' */
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** @default 60_000 (ms) */
  readyTimeoutMs?: number;
  /**
   * Search attributes the server registers when it creates its database (no `dbFile`, or a new one), so that they are
   * usable from its first answer. An existing database keeps what it has (the CLI ignores these then):
   * `registerSearchAttributes` (src/temporal/register-search-attributes.ts) adds what is missing. @default retryq's own ({@link retryqSearchAttributes})
   */
  searchAttributes?: readonly SearchAttributeKey<SearchAttributeType>[];
  /**
   * Read the namespace's search-attribute definitions from the database on every request that carries search
   * attributes (every start, every upsert), as the CLI's dev server does by default. Off by default here, as on every
   * production server, where they are cached: the reads cost the dev server about 15 % of its CPU per intent
   * (docs/benchmarks.md, "Volume"). With the cache, an attribute added through the operator API is usable once
   * the cache refreshes, within seconds; `registerSearchAttributes` waits for that.
   * @default false
   */
  refreshSearchAttributesOnRead?: boolean;
  extraArgs?: string[];
  /** Receives every line the server prints. */
  onLine?: (line: string) => void;
}

/** Starts `temporal server start-dev` and waits until its namespace answers. */
export async function startDevServer(opts: DevServerOptions): Promise<ManagedServer> {
  const ip = opts.ip ?? '127.0.0.1';
  const port = opts.port ?? (await freePort(ip));
  const namespace = opts.namespace ?? 'default';
  const args = ['server', 'start-dev', '--ip', ip, '--port', String(port), '--log-level', opts.logLevel ?? 'warn'];
  const ports = [{ port, purpose: 'Temporal gRPC' }];
  let uiUrl: string | undefined;
  if (opts.uiPort === undefined || opts.uiPort === false) {
    args.push('--headless');
  } else {
    args.push('--ui-port', String(opts.uiPort), '--ui-ip', ip, '--ui-disable-news-fetch');
    ports.push({ port: opts.uiPort, purpose: 'Temporal Web UI' });
    uiUrl = `http://${ip === '127.0.0.1' || ip === '0.0.0.0' ? 'localhost' : ip}:${opts.uiPort}`;
  }
  if (opts.dbFile) {
    await mkdir(path.dirname(path.resolve(opts.dbFile)), { recursive: true });
    args.push('--db-filename', path.resolve(opts.dbFile));
  }
  if (namespace !== 'default') args.push('--namespace', namespace);
  for (const key of opts.searchAttributes ?? retryqSearchAttributes)
    args.push('--search-attribute', `${key.name}=${TypedSearchAttributes.toMetadataType(key.type)}`);
  args.push(
    '--dynamic-config-value',
    `system.forceSearchAttributesCacheRefreshOnRead=${opts.refreshSearchAttributesOnRead === true}`,
  );
  args.push(...(opts.extraArgs ?? []));
  return launch({
    what: `Temporal dev server (${opts.cliPath})`,
    command: opts.cliPath,
    args,
    host: ip,
    ports,
    grpcPort: port,
    uiUrl,
    readyTimeoutMs: opts.readyTimeoutMs ?? 60_000,
    probe: (address) => namespaceReady(address, namespace),
    onLine: opts.onLine,
  });
}

export interface TestServerOptions {
  /** Path to the time-skipping test server. */
  path: string;
  /** @default a free port */
  port?: number;
  /** @default 60_000 (ms) */
  readyTimeoutMs?: number;
}

/** Starts the time-skipping test server and waits until it answers. */
export async function startTestServer(opts: TestServerOptions): Promise<ManagedServer> {
  const host = '127.0.0.1';
  const port = opts.port ?? (await freePort(host));
  return launch({
    what: `Temporal time-skipping test server (${opts.path})`,
    command: opts.path,
    // Without --enable-time-skipping the server starts with skipping locked, as the TypeScript SDK expects: the
    // SDK's client unlocks it while a test awaits a workflow result or calls env.sleep().
    args: [String(port)],
    host,
    ports: [{ port, purpose: 'Temporal test server gRPC' }],
    grpcPort: port,
    uiUrl: undefined,
    readyTimeoutMs: opts.readyTimeoutMs ?? 60_000,
    probe: (address) => namespaceReady(address, 'default'),
  });
}
