// Real local upstreams (node:http, port 0), a proxy on port 0 with injected time, and a client. Every
// server and connection made here is closed in afterEach.
import { createServer } from 'node:http';
import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { Agent } from 'undici';
import { afterEach } from 'vitest';
import type { ProxyOptions, ProxyRuntime, RunningProxy } from '../../../src/proxy/index.js';
import { startProxy } from '../../../src/proxy/index.js';

/** 2025-06-15T12:00:00Z: the fake clock's start. */
export const T0 = Date.UTC(2025, 5, 15, 12, 0, 0);

/** Fake time: `sleep` records the wait asked for and advances `now` instead of waiting. */
export class FakeTime {
  t = T0;
  readonly waits: number[] = [];
  /** Signals passed to `sleep`, to check that waits can be cancelled. */
  readonly signals: (AbortSignal | undefined)[] = [];
  /** When set, `sleep` does not resolve until its signal aborts (a caller hanging up mid-wait). */
  hang = false;
  /** When set, `sleep` resolves only on {@link FakeTime.release} (time advances then). */
  hold = false;
  readonly #held: (() => void)[] = [];

  readonly now = (): number => this.t;

  readonly sleep = (ms: number, signal?: AbortSignal): Promise<void> => {
    signal?.throwIfAborted();
    this.waits.push(ms);
    this.signals.push(signal);
    if (this.hang) {
      return new Promise((_resolve, reject) => {
        signal?.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
      });
    }
    if (this.hold) {
      return new Promise((resolve) =>
        this.#held.push(() => {
          this.t += ms;
          resolve();
        }),
      );
    }
    this.t += ms;
    // Resolve on a later turn of the event loop, as a real timer would.
    return new Promise((resolve) => setImmediate(resolve));
  };

  /** Ends every held wait. */
  release(): void {
    this.hold = false;
    for (const resume of this.#held.splice(0)) resume();
  }

  advance(ms: number): void {
    this.t += ms;
  }
}

/** One request the upstream received. */
export interface Received {
  method: string;
  url: string;
  rawHeaders: string[];
  body: Buffer;
  remotePort: number;
}

/** What a scripted upstream answers. */
export interface Reply {
  status: number;
  headers?: OutgoingHttpHeaders;
  body?: string | Buffer;
  /** Never answer (to provoke the proxy's attempt timeout). */
  hang?: boolean;
}

export interface Upstream {
  url: string;
  port: number;
  received: Received[];
  close(): Promise<void>;
}

const toClose: (() => Promise<void>)[] = [];

afterEach(async () => {
  const closers = toClose.splice(0).reverse();
  for (const close of closers) await close();
});

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/**
 * An upstream on 127.0.0.1:0. `handler` gets each request (body read in full) and its index; answers
 * with its reply. Node's automatic `Date` header is off: tests that need one set it.
 */
export async function startUpstream(
  handler: (req: Received, index: number, res: ServerResponse) => Reply | 'handled',
): Promise<Upstream> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = {
        method: req.method ?? '',
        url: req.url ?? '',
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks),
        remotePort: req.socket.remotePort ?? 0,
      };
      const index = received.push(r) - 1;
      res.sendDate = false;
      const reply = handler(r, index, res);
      if (reply === 'handled' || reply.hang === true) return;
      res.writeHead(reply.status, reply.headers ?? {});
      res.end(reply.body ?? '');
    });
  });
  const port = await listen(server);
  const close = async (): Promise<void> => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  toClose.push(close);
  return { url: `http://127.0.0.1:${port}`, port, received, close };
}

/** An upstream that answers the replies in order, then repeats the last one. */
export function scripted(...replies: Reply[]): Promise<Upstream> {
  return startUpstream((_req, index) => replies[Math.min(index, replies.length - 1)] as Reply);
}

/**
 * A port on 127.0.0.1 that refuses connections, and that no other test takes while this one uses it: one from 20000
 * to 29999, below the ephemeral range (32768 and up) from which every test server gets its port, seen to refuse a
 * connection now. (A port bound and then released, as before, could be handed straight to a test running in parallel,
 * which then answered instead of refusing.)
 */
export async function closedPort(): Promise<number> {
  for (let tries = 0; tries < 20; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
    });
    if (refused) return port;
  }
  throw new Error('closedPort: 20 ports from 20000 to 29999 all accepted connections on 127.0.0.1');
}

export interface TestProxy extends RunningProxy {
  time: FakeTime;
  logs: string[];
  /** Sends a request to the proxy and reads the whole response. */
  call(
    path: string,
    init?: { method?: string; headers?: Record<string, string> | string[]; body?: string | Buffer },
  ): Promise<Answer>;
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: { error?: Record<string, unknown> } & Record<string, unknown>;
  /** The `Retryq-*` headers, parsed. */
  attempts: number;
  waitMs: number;
  gated: string | undefined;
  outcome: string | undefined;
}

/**
 * A proxy on 127.0.0.1:0 with fake time and `random() = 0.5` (no jitter) unless given, logging into
 * `logs`.
 */
export async function startTestProxy(
  options: Omit<ProxyOptions, 'port' | 'host'> & { port?: number },
  runtime: ProxyRuntime = {},
): Promise<TestProxy> {
  const time = new FakeTime();
  const logs: string[] = [];
  const proxy = await startProxy(
    { port: 0, ...options, host: '127.0.0.1' },
    { now: time.now, sleep: time.sleep, random: () => 0.5, log: (line) => logs.push(line), ...runtime },
  );
  const client = new Agent({ keepAliveTimeout: 1_000 });
  toClose.push(async () => {
    await client.close();
    await proxy.close();
  });
  const call: TestProxy['call'] = async (path, init = {}) => {
    // origin + path: undici sends the path as is (no dot-segment normalisation by a URL parser).
    const res = await client.request({
      origin: proxy.url,
      path,
      method: init.method ?? 'GET',
      headers: init.headers ?? {},
      body: init.body ?? null,
    });
    const text = await res.body.text();
    let json: Answer['json'] = {};
    try {
      json = JSON.parse(text) as Answer['json'];
    } catch {
      // not JSON
    }
    const header = (name: string): string | undefined => {
      const v = res.headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    };
    return {
      status: res.statusCode,
      headers: res.headers,
      text,
      json,
      attempts: Number(header('retryq-attempts')),
      waitMs: Number(header('retryq-wait-ms')),
      gated: header('retryq-gated'),
      outcome: header('retryq-outcome'),
    };
  };
  return Object.assign(proxy, { time, logs, call });
}

/** `Sun, 15 Jun 2025 12:00:00 GMT` forms of a time. */
export function imfFixdate(ms: number): string {
  return new Date(ms).toUTCString();
}

/**
 * Sends raw bytes to a server on 127.0.0.1 (for what an HTTP client would not send: its own
 * `Connection` tokens, non-ASCII header bytes) and returns the raw answer, read until the server closes.
 * The request should say `Connection: close`.
 */
export function rawExchange(port: number, bytes: Buffer | string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let data = '';
    socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
  });
}
