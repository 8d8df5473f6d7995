import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTemporalCli } from '../../src/temporal/binaries.js';
import { PortInUseError, ServerExitedError, ServerStartTimeoutError } from '../../src/errors.js';
import { freePort, startDevServer, startTestServer } from '../../src/temporal/server-process.js';
import { registerSearchAttributes } from '../../src/temporal/register-search-attributes.js';
import { credentialKey, retryPhaseKey, retryqSearchAttributes } from '../../src/search-attributes.js';

let scratch: string;
let cliPath: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'retryq-srv-'));
  cliPath = (await resolveTemporalCli()).path!;
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('starting a server on a port another process holds', () => {
  it('refuses with PortInUseError naming the port, and starts nothing', async () => {
    const squatter = net.createServer((s) => s.end());
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
    const port = (squatter.address() as net.AddressInfo).port;
    try {
      const err = await startDevServer({ cliPath, port }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PortInUseError);
      expect((err as PortInUseError).port).toBe(port);
      expect((err as Error).message).toContain(`Port ${port} (Temporal gRPC)`);
    } finally {
      await new Promise((r) => squatter.close(r));
    }
  });
});

describe('starting a server whose process exits during start-up', () => {
  it('reports the exit code and what it printed instead of waiting for a timeout', async () => {
    const crasher = path.join(scratch, 'crasher');
    await writeFile(crasher, '#!/bin/sh\necho "fatal: database is locked" >&2\nexit 3\n');
    await chmod(crasher, 0o755);
    const err = await startDevServer({ cliPath: crasher, readyTimeoutMs: 60_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServerExitedError);
    expect((err as ServerExitedError).exitCode).toBe(3);
    expect((err as Error).message).toContain('database is locked');
    // It noticed the exit: the readiness timeout would have been a ServerStartTimeoutError after 60 s.
    expect(err).not.toBeInstanceOf(ServerStartTimeoutError);
  });
});

describe('a started dev server', () => {
  it('answers gRPC when start resolves and leaves no process behind after stop', async () => {
    const server = await startDevServer({ cliPath });
    const conn = await Connection.connect({ address: server.address });
    const info = await conn.workflowService.getSystemInfo({});
    expect(info.serverVersion).toMatch(/^\d+\.\d+/);
    await conn.close();
    await server.stop();
    expect(alive(server.pid)).toBe(false);
    const [, port] = server.address.split(':');
    await expect(freePort()).resolves.toBeGreaterThan(0);
    await expect(startTestServer({ path: '/bin/false', port: Number(port) })).rejects.toBeInstanceOf(ServerExitedError);
  });
});

describe("the dev server's search attributes", () => {
  /** Starts a workflow (no worker needed) carrying two of retryq's attributes; rejects when the server refuses them. */
  const startWithAttributes = (client: Client, id: string) =>
    client.workflow.start('anyWorkflow', {
      taskQueue: 'nobody-polls',
      workflowId: id,
      typedSearchAttributes: [
        { key: retryPhaseKey, value: 'scheduled' },
        { key: credentialKey, value: 'acme' },
      ],
    });

  it("are registered at start: usable from the server's first answer, with nothing for registerSearchAttributes to add", async () => {
    const server = await startDevServer({ cliPath });
    const connection = await Connection.connect({ address: server.address });
    try {
      await startWithAttributes(new Client({ connection }), 'at-start');
      await expect(registerSearchAttributes(connection, 'default')).resolves.toEqual([]);
    } finally {
      await connection.close();
      await server.stop();
    }
  });

  it('added later are usable as soon as registerSearchAttributes returns, although the server caches their definitions', async () => {
    // Nothing registered at start, and the cache on (the default): an attribute added through the operator API is
    // refused until the cache refreshes, which registerSearchAttributes waits for.
    const server = await startDevServer({ cliPath, searchAttributes: [] });
    const connection = await Connection.connect({ address: server.address });
    try {
      const client = new Client({ connection });
      // Something that reads the cache first, as a running server would have.
      await expect(startWithAttributes(client, 'before')).rejects.toThrow();
      const added = await registerSearchAttributes(connection, 'default');
      expect(added).toEqual(retryqSearchAttributes.map((k) => k.name));
      await startWithAttributes(client, 'after');
      const desc = await client.workflow.getHandle('after').describe();
      expect(desc.typedSearchAttributes.get(retryPhaseKey)).toBe('scheduled');
    } finally {
      await connection.close();
      await server.stop();
    }
  });
});
