/**
 * `retryq dev` under faults, as a user meets them: the real command, the real Temporal dev server, faults injected
 * with signals (SIGKILL, SIGSTOP), file modes, a read-only and a full file system (a tmpfs in a private mount
 * namespace of the command, so nothing is mounted on the machine). Free ports and temporary data dirs; every
 * process started is killed in teardown.
 */
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess, ChildProcessByStdio } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { RetryqClient } from '../../src/client.js';
import { loadConfig } from '../../src/config.js';
import { DEV_STATE_FILE } from '../../src/dev/data-dir-lock.js';
import { processIdentity } from '../../src/dev/process-identity.js';
import { resolveTemporalCli } from '../../src/temporal/binaries.js';
import { connectClient } from '../../src/temporal/connect.js';
import { freePort } from '../../src/temporal/server-process.js';

const execFileAsync = promisify(execFile);
const root = new URL('../../', import.meta.url).pathname;
const cliArgs = ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'dev', '--no-demo'];

let tmp: string;
let temporalCli: string;
const children: ChildProcess[] = [];
const serverPids = new Set<number>();

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'retryq-dev-faults-'));
  await chmod(tmp, 0o755);
  temporalCli = (await resolveTemporalCli()).path!;
});
afterEach(() => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const pid of serverPids) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  serverPids.clear();
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

interface Dev {
  child: ChildProcess;
  dataDir: string;
  env: NodeJS.ProcessEnv;
  output: () => string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  /** Resolves when the output contains `text` (after `from` characters), with the time it arrived. */
  waitFor: (text: string | RegExp, timeoutMs?: number, from?: number) => Promise<number>;
}

async function devEnv(dataDir: string): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    RETRYQ_DATA_DIR: dataDir,
    RETRYQ_DEV_PORT: String(await freePort()),
    RETRYQ_UI_PORT: String(await freePort()),
  };
  delete env['TEMPORAL_ADDRESS'];
  return env;
}

/**
 * Runs `retryq dev` as a user would. `mount` runs it in a private mount namespace with a tmpfs (options given)
 * mounted on the data dir's parent; `uid` runs it as that user (needs root), from a view of the clone that this
 * user can reach whatever folder the clone lives in (see {@link asUser}).
 */
async function runDev(
  dataDir: string,
  opts: { mount?: string; uid?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<Dev> {
  const env = opts.env ?? (await devEnv(dataDir));
  const child =
    opts.uid !== undefined
      ? await asUser(opts.uid, env)
      : opts.mount
        ? spawn(
            'unshare',
            [
              '--mount',
              'sh',
              '-c',
              `mount -t tmpfs -o ${opts.mount} tmpfs "$1" && shift && exec "$@"`,
              'sh',
              path.dirname(dataDir),
              process.execPath,
              ...cliArgs,
            ],
            { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] },
          )
        : spawn(process.execPath, cliArgs, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  const waiters = new Set<() => void>();
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of waiters) w();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const waitFor = (text: string | RegExp, timeoutMs = 90_000, from = 0) =>
    new Promise<number>((resolve, reject) => {
      const found = () => (typeof text === 'string' ? out.indexOf(text, from) >= 0 : text.test(out.slice(from)));
      const check = () => {
        if (!found()) return;
        cleanup();
        resolve(Date.now());
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`retryq dev did not print ${String(text)} within ${timeoutMs} ms:\n${out}`));
      }, timeoutMs);
      const onExit = () => {
        if (found()) return check();
        cleanup();
        reject(new Error(`retryq dev exited before printing ${String(text)}:\n${out}`));
      };
      const cleanup = () => {
        clearTimeout(timer);
        waiters.delete(check);
        child.off('exit', onExit);
      };
      waiters.add(check);
      child.once('exit', onExit);
      check();
    });
  return { child, dataDir, env, output: () => out, exited, waitFor };
}

/**
 * `retryq dev` as user `uid`. The clone may live inside a folder only root may enter (a `mktemp -d` folder,
 * `/root`), where that user cannot read the CLI or its node_modules. So it runs in a private mount namespace where
 * the clone is bind-mounted on a folder under this file's temporary folder (mode 755), and is started from there:
 * nothing on the machine changes, and the user reaches the clone without passing through its parent folders.
 */
async function asUser(uid: number, env: NodeJS.ProcessEnv): Promise<ChildProcessByStdio<null, Readable, Readable>> {
  const view = await mkdtemp(path.join(tmp, 'clone-'));
  await chmod(view, 0o755);
  const script = 'mount --bind "$1" "$2" && cd "$2" && shift 2 && exec setpriv "$@"';
  const setpriv = [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--'];
  const cli = ['--import', 'tsx', path.join(view, 'src/cli.ts'), ...cliArgs.slice(3)];
  return spawn('unshare', ['--mount', 'sh', '-c', script, 'sh', root, view, ...setpriv, process.execPath, ...cli], {
    cwd: tmp,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

interface DevState {
  pid: number;
  server?: { pid: number };
}
/** The pid of the server that came back last, as `retryq dev` said it; remembered for teardown. */
function backPid(output: string): number {
  const pids = [...output.matchAll(/the Temporal server is back \(pid (\d+)/g)].map((m) => Number(m[1]));
  const pid = pids.at(-1)!;
  serverPids.add(pid);
  return pid;
}

async function devState(dataDir: string): Promise<DevState> {
  const state = JSON.parse(await readFile(path.join(dataDir, DEV_STATE_FILE), 'utf8')) as DevState;
  if (state.server) serverPids.add(state.server.pid);
  return state;
}

function listening(port: string | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port: Number(port) });
    sock.setTimeout(1000, () => (sock.destroy(), resolve(false)));
    sock.once('connect', () => (sock.destroy(), resolve(true)));
    sock.once('error', () => resolve(false));
  });
}

/** Polls until neither port of the data dir's server accepts connections; the time it took, or -1. */
async function untilNothingListens(env: NodeJS.ProcessEnv, withinMs = 20_000): Promise<number> {
  const start = Date.now();
  return vi
    .waitFor(
      async () => {
        if ((await listening(env['RETRYQ_DEV_PORT'])) || (await listening(env['RETRYQ_UI_PORT'])))
          throw new Error('still listening');
      },
      { timeout: withinMs, interval: 50 },
    )
    .then(
      () => Date.now() - start,
      () => -1,
    );
}

async function serversOn(dataDir: string): Promise<string[]> {
  const { stdout } = await execFileAsync('ps', ['-eo', 'pid,args']);
  return stdout.split('\n').filter((l) => l.includes('start-dev') && l.includes(dataDir));
}

const noStackTrace = (text: string) => expect(text).not.toMatch(/\n\s+at .+:\d+:\d+/);

describe('retryq dev when its Temporal server dies or hangs', () => {
  it('says so in one line with the last output and the log file, restarts it from the same SQLite file, and gives up after 3 restarts with exit code 1', async () => {
    const dev = await runDev(path.join(tmp, `supervised-${randomUUID()}`));
    await dev.waitFor('retryq is running.');
    const logFile = path.join(dev.dataDir, 'retryq-dev.log');
    const config = loadConfig(dev.env);
    const first = (await devState(dev.dataDir)).server!.pid;

    // An intent with no worker for its credential stays open: it must outlive every restart.
    const key = `survives-${randomUUID()}`;
    const { client, close } = await connectClient(config.temporal);
    try {
      // Deliberately a credential no worker serves: opt out of submit's check for a served credential.
      const rq = new RetryqClient({ client, requireServedCredential: false });
      await rq.submit({
        idempotencyKey: key,
        credential: 'nobody',
        action: { method: 'GET', url: 'http://127.0.0.1:9/' },
      });

      // 1. SIGKILL.
      let from = dev.output().length;
      const killedAt = Date.now();
      process.kill(first, 'SIGKILL');
      const noticeAt = await dev.waitFor(`the Temporal server (pid ${first}) died (killed by SIGKILL)`, 30_000, from);
      const backAt = await dev.waitFor(/the Temporal server is back \(pid \d+/, 90_000, from);
      const died = dev.output().slice(from).split('\n');
      const notice = died.find((l) => l.includes(`(pid ${first}) died`))!;
      expect(notice).toMatch(/^retryq: /);
      expect(notice).toContain(`restarting it from ${path.join(dev.dataDir, 'temporal.db')} (restart 1 of 3)`);
      expect(notice).toContain(logFile);
      expect(died[died.indexOf(notice) + 1]).toMatch(/^ {2}\| \S/); // the server's last output, quoted
      const second = backPid(dev.output());
      expect(second).not.toBe(first);
      expect(['scheduled', 'dispatching']).toContain((await rq.status(key)).phase);

      // 2. SIGSTOP: alive, silent.
      from = dev.output().length;
      const stoppedAt = Date.now();
      process.kill(second, 'SIGSTOP');
      const hungAt = await dev.waitFor(`the Temporal server (pid ${second}) has not answered for`, 90_000, from);
      await dev.waitFor('it is stopped (SIGSTOP or a debugger)', 1000, from);
      const hungBackAt = await dev.waitFor(/the Temporal server is back \(pid \d+/, 90_000, from);
      expect(await processIdentity(second)).toBeUndefined();
      const third = backPid(dev.output());
      expect(['scheduled', 'dispatching']).toContain((await rq.status(key)).phase);

      // The native core's reconnect lines went to the log file, not to the terminal; the server's output too.
      expect(dev.output()).not.toMatch(/temporalio_client|tonic::|poll_workflow_task_queue/);
      const log = await readFile(logFile, 'utf8');
      expect(log).toContain('"source":"temporal-server"');
      expect(log).toContain('"sdkComponent":"worker"');

      console.log(
        JSON.stringify({
          measured: 'retryq dev supervision (test clock, output read as it arrives)',
          sigkillToNoticeMs: noticeAt - killedAt,
          sigkillToServerBackMs: backAt - killedAt,
          sigstopToNoticeMs: hungAt - stoppedAt,
          sigstopToServerBackMs: hungBackAt - stoppedAt,
        }),
      );

      // 3. Two more deaths: restart 3 of 3, then it gives up.
      from = dev.output().length;
      process.kill(third, 'SIGKILL');
      await dev.waitFor('(restart 3 of 3)', 30_000, from);
      await dev.waitFor(/the Temporal server is back \(pid \d+/, 90_000, from);
      const fourth = backPid(dev.output());
      from = dev.output().length;
      process.kill(fourth, 'SIGKILL');
      expect(await dev.exited).toBe(1);
    } finally {
      await close();
    }
    const end = dev.output();
    expect(end).toContain(`the Temporal server (pid `);
    expect(end).toMatch(
      /retryq: The Temporal server died 4 times within 5 min \(last: killed by SIGKILL\), so retryq dev gave up/,
    );
    expect(end).toContain('then start retryq dev again.');
    noStackTrace(end);
    expect(await untilNothingListens(dev.env)).toBeGreaterThanOrEqual(0);
    expect(await serversOn(dev.dataDir)).toEqual([]);
  }, 600_000);
});

describe('retryq dev and its data dir', () => {
  it('refuses a second retryq dev on the same data dir naming the holder; SIGKILLed, leaves nothing listening; the next start stops a server that outlived even the watchdog', async () => {
    const dataDir = path.join(tmp, `locked-${randomUUID()}`);
    const first = await runDev(dataDir);
    await first.waitFor('retryq is running.');
    const holder = await devState(dataDir);

    // A second one, other ports, same data dir: refused with exit code 78 before it starts anything.
    const second = await runDev(dataDir);
    expect(await second.exited).toBe(78);
    const refusal = second.output();
    expect(refusal).toContain(`RETRYQ_DATA_DIR: ${dataDir} is in use by another retryq dev (pid ${holder.pid}`);
    expect(refusal).toContain(`Temporal 127.0.0.1:${first.env['RETRYQ_DEV_PORT']}`);
    expect(refusal).toContain(`Web UI port ${first.env['RETRYQ_UI_PORT']}`);
    noStackTrace(refusal);
    expect(await listening(second.env['RETRYQ_DEV_PORT'])).toBe(false);
    expect(await listening(first.env['RETRYQ_DEV_PORT'])).toBe(true);

    // SIGKILL: no exit handler runs, yet its server goes.
    const killedAt = Date.now();
    first.child.kill('SIGKILL');
    const freedMs = await untilNothingListens(first.env);
    expect(freedMs).toBeGreaterThanOrEqual(0);
    expect(await serversOn(dataDir)).toEqual([]);
    console.log(
      JSON.stringify({ measured: 'SIGKILLed retryq dev: until its ports are free', ms: Date.now() - killedAt }),
    );

    // The next start on the same data dir and ports works (the lock died with its holder).
    const third = await runDev(dataDir, { env: first.env });
    await third.waitFor('retryq is running.');
    const state = await devState(dataDir);
    // Kill the watchdog too (as `kill -9` of everything might): the server is orphaned…
    const { stdout } = await execFileAsync('ps', ['-eo', 'pid,args']);
    const watchdog = stdout
      .split('\n')
      .find((l) => l.includes(`retryq-server-watchdog ${state.server!.pid}`))
      ?.trim()
      .split(/\s+/)[0];
    expect(watchdog).toBeDefined();
    // Stopped first, it cannot even die of its next write to the closed output pipe (SIGPIPE): a true orphan.
    process.kill(state.server!.pid, 'SIGSTOP');
    process.kill(Number(watchdog), 'SIGKILL');
    third.child.kill('SIGKILL');
    await third.exited;
    expect(await processIdentity(state.server!.pid)).toMatchObject({ stopped: true });
    expect(await listening(first.env['RETRYQ_DEV_PORT'])).toBe(true);

    // … and the next start recognises it as its own, stops it, and takes its place.
    const fourth = await runDev(dataDir, { env: first.env });
    await fourth.waitFor('retryq is running.');
    expect(fourth.output()).toContain(
      `retryq: stopping the Temporal server (pid ${state.server!.pid}) that an earlier retryq dev (pid ${state.pid}) left running on ${dataDir}.`,
    );
    expect(await processIdentity(state.server!.pid)).toBeUndefined();
    await devState(dataDir);
    fourth.child.kill('SIGTERM');
    expect(await fourth.exited, `${fourth.child.signalCode ?? ''}\n${fourth.output()}`).toBe(0);
    expect(await serversOn(dataDir)).toEqual([]);
  }, 400_000);

  it('that is a file exits with 78 naming RETRYQ_DATA_DIR, the path and the OS error', async () => {
    const file = path.join(tmp, `file-${randomUUID()}`);
    await writeFile(file, 'not a folder');
    const dev = await runDev(file);
    expect(await dev.exited).toBe(78);
    expect(dev.output()).toMatch(new RegExp(`^retryq: RETRYQ_DATA_DIR: retryq dev cannot .* ${file}: E(EXIST|NOTDIR)`));
    noStackTrace(dev.output());
  });

  it('on a read-only file system exits with 78 naming RETRYQ_DATA_DIR, the path and EROFS', async () => {
    const mountPoint = path.join(tmp, `ro-${randomUUID()}`);
    await mkdir(mountPoint);
    const dataDir = path.join(mountPoint, 'data');
    const dev = await runDev(dataDir, { mount: 'ro,size=1m' });
    expect(await dev.exited).toBe(78);
    expect(dev.output()).toContain(`RETRYQ_DATA_DIR: retryq dev cannot create the folder ${dataDir}: EROFS`);
    expect(dev.output()).toContain('read-only');
    noStackTrace(dev.output());
  });

  it('that this user may not write exits with 78 naming RETRYQ_DATA_DIR, the path and EACCES', async () => {
    const dataDir = path.join(tmp, `denied-${randomUUID()}`);
    await mkdir(dataDir);
    await chmod(dataDir, 0o555);
    // root may write anywhere: run it as an ordinary user then.
    const env = { ...(await devEnv(dataDir)), HOME: tmp };
    const dev = await runDev(dataDir, process.getuid?.() === 0 ? { uid: 65534, env } : { env });
    expect(await dev.exited).toBe(78);
    expect(dev.output()).toContain(`RETRYQ_DATA_DIR: retryq dev cannot write files in ${dataDir}: EACCES`);
    expect(dev.output()).toContain('write access');
    noStackTrace(dev.output());
  });

  it('on a full disk exits with 78 and the server’s own "database or disk is full" when the server cannot start', async () => {
    const mountPoint = path.join(tmp, `tiny-${randomUUID()}`);
    await mkdir(mountPoint);
    const dataDir = path.join(mountPoint, 'data');
    const dev = await runDev(dataDir, { mount: 'size=256k' });
    expect(await dev.exited).toBe(78);
    expect(dev.output()).toContain(
      `RETRYQ_DATA_DIR: retryq dev cannot start the Temporal server on ${dataDir}: the Temporal server says "database or disk is full"`,
    );
    noStackTrace(dev.output());
  }, 120_000);

  it('on a disk that fills up while it runs says the disk is full, with the server’s own words, and keeps running', async () => {
    const mountPoint = path.join(tmp, `fills-${randomUUID()}`);
    await mkdir(mountPoint);
    const dataDir = path.join(mountPoint, 'data');
    const dev = await runDev(dataDir, { mount: 'size=4m' });
    await dev.waitFor('retryq is running.');
    // The tmpfs is only in the command's mount namespace: reach it through /proc/<pid>/root.
    const inside = `/proc/${dev.child.pid}/root${dataDir}`;
    const state = JSON.parse(await readFile(path.join(inside, DEV_STATE_FILE), 'utf8')) as DevState;
    if (state.server) serverPids.add(state.server.pid);
    await execFileAsync('sh', ['-c', `dd if=/dev/zero of="${inside}/filler" bs=64k 2>/dev/null || true`]);
    const from = dev.output().length;
    // Anything the server must store now fails: start a few workflows (their answers do not matter).
    for (let i = 0; i < 3 && !dev.output().includes('is full', from); i++)
      await execFileAsync(
        temporalCli,
        [
          'workflow',
          'start',
          '--address',
          `127.0.0.1:${dev.env['RETRYQ_DEV_PORT']}`,
          '--task-queue',
          'q',
          '--type',
          't',
        ],
        { timeout: 15_000 },
      ).catch(() => undefined);
    await dev.waitFor(
      `retryq: the disk holding ${path.join(dataDir, 'temporal.db')} is full: the Temporal server says "database or disk is full"`,
      60_000,
      from,
    );
    expect(dev.child.exitCode).toBeNull();
    dev.child.kill('SIGTERM');
    expect(await dev.exited).toBe(0);
  }, 240_000);
});
