import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { proxyCommand } from '../../../src/proxy/index.js';
import { scripted } from './proxy-harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (s: string) => out.push(s), err: (s: string) => err.push(s) }, out, err };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempFile(name: string, text: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'retryq-proxy-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, name);
  await writeFile(file, text);
  return file;
}

/** Runs the command in-process until it prints its address; returns a stop function and the output. */
async function run(argv: string[]) {
  const { io, out, err } = capture();
  const stop = new AbortController();
  const done = proxyCommand(argv, io, { signal: stop.signal });
  await expect.poll(() => out.length > 0 || err.length > 0).toBe(true);
  const url = /listening on (\S+)/.exec(out[0] ?? '')?.[1];
  const finish = async (): Promise<number> => {
    stop.abort();
    return done;
  };
  cleanups.push(async () => void (await finish()));
  return { url, out, err, finish, done };
}

describe('retryq proxy usage', () => {
  it('prints the help and exits 0 for --help', async () => {
    const { io, out } = capture();
    expect(await proxyCommand(['--help'], io)).toBe(0);
    expect(out.join('\n')).toMatch(/^Usage: retryq proxy --upstream NAME=URL/);
  });

  it.each([
    [[], /no upstream given: add --upstream NAME=URL/],
    [['--upstream', 'acme'], /--upstream must be NAME=URL/],
    [['--upstream', 'acme=https://x', '--colour'], /Unknown option '--colour'/],
    [['--upstream', 'acme=https://x', 'extra'], /unexpected argument "extra"/],
    [['--upstream', 'acme=https://x', '--max-wait', 'soon'], /--max-wait: must be a duration such as/],
    [['--upstream', 'acme=https://x', '--port', '99999'], /--port: must be an integer from 0 to 65535/],
    [['--upstream', 'acme=https://x', '--max-retries', 'many'], /--max-retries: must be an integer from 0 to 100/],
    [['--upstream', 'acme=ftp://x'], /--upstream \(upstreams.acme\): must use http or https/],
    [['--upstream', 'metrics=http://x'], /--upstream \(upstreams.metrics\): name is reserved/],
    [['--config', '/nonexistent/retryq.yaml'], /--config \/nonexistent\/retryq.yaml: cannot read the file \(ENOENT\)/],
  ])('exits 2 with a message naming the problem for %j', async (argv, message) => {
    const { io, err } = capture();
    expect(await proxyCommand(argv, io)).toBe(2);
    expect(err.join('\n')).toMatch(message);
    expect(err.at(-1)).toBe('Run `retryq proxy --help` for usage.');
  });

  it('exits 2 naming the file and option path for an invalid config file', async () => {
    const file = await tempFile('proxy.yaml', 'upstreams:\n  acme: https://api.acme.test\nbackoff:\n  jitter: 3\n');
    const { io, err } = capture();
    expect(await proxyCommand(['--config', file], io)).toBe(2);
    expect(err.join('\n')).toContain(`${file}: backoff.jitter: must be a fraction from 0 to 1`);
  });

  it('exits 1 when the port is taken', async () => {
    const blocker = createServer();
    blocker.listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    cleanups.push(() => new Promise((resolve) => blocker.close(() => resolve())));
    const port = (blocker.address() as { port: number }).port;
    const { io, err } = capture();
    expect(await proxyCommand(['--upstream', 'a=http://127.0.0.1:9', '--port', String(port)], io)).toBe(1);
    expect(err.join('\n')).toMatch(new RegExp(`cannot listen on 127.0.0.1:${port} \\(EADDRINUSE\\)`));
  });
});

describe('retryq proxy running', () => {
  it('prints where it listens, forwards, and stops cleanly with exit code 0', async () => {
    const up = await scripted({ status: 200, body: 'through' });
    const proxy = await run(['--upstream', `acme=${up.url}/v1`, '--port', '0', '--max-wait', '5s']);
    expect(proxy.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(proxy.out).toContain(`  ${proxy.url}/acme/… → ${up.url}/v1/…`);
    const res = await fetch(`${proxy.url}/acme/ping`);
    expect(await res.text()).toBe('through');
    expect(up.received[0]?.url).toBe('/v1/ping');
    expect(await proxy.finish()).toBe(0);
    expect(proxy.err).toEqual(['retryq proxy: stopping (stop requested)…', 'retryq proxy: stopped']);
  });

  it('reads a YAML config file and lets flags win', async () => {
    const up = await scripted({ status: 503 });
    const file = await tempFile(
      'proxy.yaml',
      `upstreams:\n  acme: ${up.url}\nmaxRetries: 1\ngate:\n  maxClosed: 10m\nport: 1\n`,
    );
    const proxy = await run(['--config', file, '--port', '0', '--no-gate', '--max-wait', '1ms']);
    const res = await fetch(`${proxy.url}/acme/x`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retryq-attempts')).toBe('2');
    expect(await proxy.finish()).toBe(0);
  });

  it('stops on SIGTERM as its own process, exiting 0', async () => {
    const up = await scripted({ status: 200, body: 'ok' });
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(here, 'fixtures/run-proxy-command.ts'),
        '--upstream',
        `acme=${up.url}`,
        '--port',
        '0',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    await expect.poll(() => /listening on (\S+)/.exec(stdout)?.[1], { timeout: 30_000 }).toBeDefined();
    const url = /listening on (\S+)/.exec(stdout)?.[1] ?? '';
    expect(await (await fetch(`${url}/acme/x`)).text()).toBe('ok');
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    expect(code).toBe(0);
    expect(stderr).toContain('retryq proxy: stopping (SIGTERM)…');
    expect(stderr).toContain('retryq proxy: stopped');
  });
});
