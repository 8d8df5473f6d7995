import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEV_STATE_FILE, lockDataDir, stopOrphanServer } from '../../../src/dev/data-dir-lock.js';
import { DataDirInUseError } from '../../../src/errors.js';
import { processIdentity } from '../../../src/dev/process-identity.js';

const root = new URL('../../../', import.meta.url).pathname;
let dir: string;
const started: ChildProcess[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'retryq-lock-'));
});
afterEach(async () => {
  for (const child of started.splice(0)) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await rm(dir, { recursive: true, force: true });
});

/** A process standing in for a server: its own process group, as retryq starts the Temporal server. */
function startSleeper(): ChildProcess {
  const child = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
  started.push(child);
  return child;
}

/** Whether the process is gone within `withinMs` (polled). */
async function gone(pid: number, withinMs = 10_000): Promise<boolean> {
  return vi
    .waitFor(
      async () => {
        if (await processIdentity(pid)) throw new Error(`pid ${pid} still runs`);
      },
      { timeout: withinMs, interval: 50 },
    )
    .then(
      () => true,
      () => false,
    );
}

describe('the data dir lock', () => {
  it('refuses a second holder, naming the first one’s pid, Temporal address and UI port', async () => {
    const first = await lockDataDir({ dir, address: '127.0.0.1:17233', uiPort: 18233, log: () => undefined });
    try {
      const err = await lockDataDir({ dir, address: '127.0.0.1:27233', log: () => undefined }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DataDirInUseError);
      const inUse = err as DataDirInUseError;
      expect(inUse.code).toBe('data_dir_in_use');
      expect(inUse.holder).toMatchObject({ pid: process.pid, address: '127.0.0.1:17233', uiPort: 18233 });
      expect(inUse.message).toContain(`pid ${process.pid}`);
      expect(inUse.message).toContain('127.0.0.1:17233');
      expect(inUse.message).toContain('RETRYQ_DATA_DIR');
    } finally {
      await first.release();
    }
    const again = await lockDataDir({ dir, address: '127.0.0.1:27233', log: () => undefined });
    await again.release();
  });

  it('is free again the moment its holder is SIGKILLed', async () => {
    const holder = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/hold-data-dir-lock.ts', dir], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    });
    started.push(holder);
    await new Promise<void>((resolve, reject) => {
      holder.stdout.on('data', (d: Buffer) => d.toString().includes('locked') && resolve());
      holder.once('exit', (code) => reject(new Error(`the holder exited (${code})`)));
    });
    const err = await lockDataDir({ dir, address: 'x:1', log: () => undefined }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DataDirInUseError);
    expect((err as DataDirInUseError).holder?.pid).toBe(holder.pid);

    const exited = new Promise((r) => holder.once('exit', r));
    holder.kill('SIGKILL');
    await exited;
    const lock = await lockDataDir({ dir, address: 'x:1', log: () => undefined });
    await lock.release();
  });

  it('records the server it runs, and forgets it on release', async () => {
    const lock = await lockDataDir({ dir, address: 'x:1', log: () => undefined });
    const server = startSleeper();
    await lock.recordServer(server.pid);
    const state = JSON.parse(await readFile(path.join(dir, DEV_STATE_FILE), 'utf8')) as Record<string, unknown>;
    expect(state).toMatchObject({ pid: process.pid, address: 'x:1', server: { pid: server.pid, args: 'sleep 60' } });
    await lock.release();
    const after = JSON.parse(await readFile(path.join(dir, DEV_STATE_FILE), 'utf8')) as Record<string, unknown>;
    expect(after['server']).toBeUndefined();
  });
});

describe('a server an earlier retryq dev left running', () => {
  it('is stopped by the next start when pid, start time and command line all match', async () => {
    const orphan = startSleeper();
    const identity = (await processIdentity(orphan.pid!))!;
    await writeFile(
      path.join(dir, DEV_STATE_FILE),
      JSON.stringify({
        pid: 999_999,
        address: 'x:1',
        startedAt: new Date().toISOString(),
        server: { pid: orphan.pid, ...identity },
      }),
    );
    const said: string[] = [];
    const lock = await lockDataDir({ dir, address: 'x:1', log: (l) => said.push(l) });
    await lock.release();
    expect(await gone(orphan.pid!)).toBe(true);
    expect(said.join('\n')).toContain(`stopping the Temporal server (pid ${orphan.pid})`);
  });

  it('is never a foreign process that merely has the recorded pid (other start time or command line)', async () => {
    const foreign = startSleeper();
    const identity = (await processIdentity(foreign.pid!))!;
    for (const recorded of [
      { ...identity, startTime: String(Number(identity.startTime) - 1) },
      { ...identity, args: 'temporal server start-dev --db-filename /elsewhere/temporal.db' },
    ]) {
      await writeFile(
        path.join(dir, DEV_STATE_FILE),
        JSON.stringify({ pid: 999_999, address: 'x:1', startedAt: '', server: { pid: foreign.pid, ...recorded } }),
      );
      const said: string[] = [];
      expect(await stopOrphanServer(dir, (l) => said.push(l))).toBeUndefined();
      expect(said).toEqual([]);
      expect(await processIdentity(foreign.pid!)).toEqual(identity);
    }
  });
});
