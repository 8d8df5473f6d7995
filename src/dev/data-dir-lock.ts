/**
 * One `retryq dev` per data dir. Two Temporal servers on one SQLite file answer `Namespace not found` and take
 * each other's work, so the second `retryq dev` is refused with the first one's pid and ports.
 *
 * The lock is a listening Unix socket named after the data dir's real path: on Linux in the abstract namespace
 * (the kernel frees it the moment its process dies, even by SIGKILL: no stale lock, no race), elsewhere a socket
 * file in the data dir (a stale one, which nobody answers on, is removed). Whoever connects is told who holds it.
 *
 * Next to it, `retryq-dev.json` records the holder and the Temporal server it started (pid, start time, command
 * line). If that server outlived its `retryq dev` (which the watchdog of server-process.ts should prevent), the
 * next start recognises it by all three and stops it; a process that merely reuses the pid is never touched.
 *
 * @example
 * ```ts
 * import { lockDataDir } from './data-dir-lock.js';
 * const lock = await lockDataDir({ dir: '.data', address: '127.0.0.1:7233', uiPort: 8233, log: console.error });
 * await lock.recordServer(serverPid);
 * await lock.release();
 * ```
 */
import { createHash } from 'node:crypto';
import { readFile, realpath, rename, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { dataDirError, osErrorCode } from './data-dir.js';
import { DataDirInUseError } from '../errors.js';
import type { DataDirHolder } from '../errors.js';
import { processIdentity } from './process-identity.js';

/** The file in the data dir that records the holder and its server. */
export const DEV_STATE_FILE = 'retryq-dev.json';

const identitySchema = z.object({ pid: z.number().int().positive(), startTime: z.string(), args: z.string() });
const holderSchema = z.object({
  pid: z.number().int().positive(),
  address: z.string(),
  uiPort: z.number().int().optional(),
  startedAt: z.string(),
});
const stateSchema = holderSchema.extend({ server: identitySchema.optional() });
type DevState = z.infer<typeof stateSchema>;

export interface DataDirLock {
  /** The data dir (absolute). */
  readonly dir: string;
  /** Records the server now running (or none), so that a later start can recognise it if it outlives us. */
  recordServer(pid: number | undefined): Promise<void>;
  /** Frees the lock; the state file stays with no server in it. Idempotent. */
  release(): Promise<void>;
}

export interface LockOptions {
  dir: string;
  /** The Temporal gRPC address this `retryq dev` serves, told to whoever finds the dir locked. */
  address: string;
  uiPort?: number | undefined;
  /** Where to say that an orphaned server was stopped. */
  log: (line: string) => void;
}

/** The socket's name: abstract on Linux (freed by the kernel), a file in the data dir elsewhere. */
async function socketName(dir: string): Promise<{ name: string; file: string | undefined }> {
  if (process.platform === 'linux') {
    const hash = createHash('sha256')
      .update(await realpath(dir))
      .digest('hex')
      .slice(0, 40);
    return { name: `\0retryq-dev-${hash}`, file: undefined };
  }
  const file = path.join(dir, '.retryq-dev.sock');
  return { name: file, file };
}

/** Asks whoever holds the socket who it is; `undefined` when nobody listens (a stale socket file). */
function askHolder(name: string): Promise<{ answered: boolean; holder: DataDirHolder | undefined }> {
  return new Promise((resolve) => {
    const sock = net.connect(name);
    let text = '';
    let connected = false;
    const done = () => {
      sock.destroy();
      let holder: DataDirHolder | undefined;
      try {
        const parsed = holderSchema.safeParse(JSON.parse(text.trim()));
        if (parsed.success) holder = parsed.data;
      } catch {
        /* it answered nothing readable: still a holder */
      }
      resolve({ answered: connected, holder });
    };
    sock.setTimeout(3000, done);
    sock.on('connect', () => (connected = true));
    sock.on('data', (d: Buffer) => (text += d.toString('utf8')));
    sock.on('end', done);
    sock.on('error', done);
  });
}

function listen(server: net.Server, name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(name, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function readState(dir: string): Promise<DevState | undefined> {
  try {
    const parsed = stateSchema.safeParse(JSON.parse(await readFile(path.join(dir, DEV_STATE_FILE), 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

async function writeState(dir: string, state: DevState): Promise<void> {
  const file = path.join(dir, DEV_STATE_FILE);
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    await writeFile(tmp, JSON.stringify(state, null, 2) + '\n');
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw dataDirError(dir, `write ${DEV_STATE_FILE} in`, err);
  }
}

/** Takes the data dir's lock or throws {@link DataDirInUseError}; then stops an orphaned server of ours. */
export async function lockDataDir(opts: LockOptions): Promise<DataDirLock> {
  const { dir } = opts;
  const holder: DataDirHolder = {
    pid: process.pid,
    address: opts.address,
    ...(opts.uiPort !== undefined ? { uiPort: opts.uiPort } : {}),
    startedAt: new Date().toISOString(),
  };
  const { name, file } = await socketName(dir);
  const server = net.createServer((sock) => sock.end(JSON.stringify(holder) + '\n'));
  for (let attempt = 0; ; attempt++) {
    try {
      await listen(server, name);
      break;
    } catch (err) {
      if (osErrorCode(err) !== 'EADDRINUSE') throw dataDirError(dir, 'lock', err);
      const asked = await askHolder(name);
      if (asked.answered || file === undefined || attempt > 0) throw new DataDirInUseError(dir, asked.holder);
      await rm(file, { force: true }); // a socket file nobody answers on: its process is gone
    }
  }
  server.unref();

  await stopOrphanServer(dir, opts.log);
  const state: DevState = { ...holder };
  await writeState(dir, state);

  let released = false;
  return {
    dir,
    async recordServer(pid) {
      if (released) return;
      delete state.server;
      const identity = pid === undefined ? undefined : await processIdentity(pid);
      if (pid !== undefined && identity) state.server = { pid, startTime: identity.startTime, args: identity.args };
      await writeState(dir, state);
    },
    async release() {
      if (released) return;
      released = true;
      delete state.server;
      await writeState(dir, state).catch(() => undefined);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Stops the Temporal server an earlier `retryq dev` on this data dir recorded, if that very process still runs
 * (same pid, start time and command line). Returns its pid when it stopped one.
 */
export async function stopOrphanServer(dir: string, log: (line: string) => void): Promise<number | undefined> {
  const previous = await readState(dir);
  const recorded = previous?.server;
  if (!recorded) return undefined;
  const now = await processIdentity(recorded.pid);
  if (!now || now.startTime !== recorded.startTime || now.args !== recorded.args) return undefined;
  log(
    `retryq: stopping the Temporal server (pid ${recorded.pid}) that an earlier retryq dev (pid ${previous.pid}) ` +
      `left running on ${dir}.`,
  );
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-recorded.pid, sig); // it leads its own process group
    } catch {
      try {
        process.kill(recorded.pid, sig);
      } catch {
        /* gone */
      }
    }
  };
  signal('SIGCONT'); // a stopped process cannot act on SIGTERM
  signal('SIGTERM');
  for (let waited = 0; waited < 10_000; waited += 100) {
    const still = await processIdentity(recorded.pid);
    if (!still || still.startTime !== recorded.startTime) return recorded.pid;
    await new Promise((r) => setTimeout(r, 100));
  }
  signal('SIGKILL');
  for (let waited = 0; waited < 5_000; waited += 100) {
    if (!(await processIdentity(recorded.pid))) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return recorded.pid;
}
