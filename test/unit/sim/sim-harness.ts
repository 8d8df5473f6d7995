/**
 * Shared test harness for the provider simulator: starts real simulators on port 0, talks to
 * them over real HTTP (undici, one agent per test file), drives their clock, and closes every
 * server and connection in teardown.
 */
import { afterAll, afterEach, vi } from 'vitest';
import { Agent, request } from 'undici';
import { startProviderSim } from '../../../src/sim/index.js';
import type { ProviderSim, ProviderSimOptions } from '../../../src/sim/index.js';

/** 2026-01-01T00:00:00Z: a whole second, so `Date` headers are exact. */
export const epochMs = Date.UTC(2026, 0, 1, 0, 0, 0);

/** A clock the test moves by hand. */
export class FakeClock {
  constructor(public t = epochMs) {}
  readonly now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
}

/** What a test sees of an answer. */
export interface SimResponse {
  status: number;
  headers: Record<string, string>;
  json: { error?: { type: string; code: string; message: string }; [field: string]: unknown };
  text: string;
}

/** One request to the simulator. */
export interface Call {
  method?: string;
  path?: string;
  /** API key secret; `null` sends no Authorization header. @default 'sk_test_acme' */
  key?: string | null;
  idempotencyKey?: string;
  /** JSON body. @default {} for writes */
  body?: unknown;
  /** Sent as is instead of `body`. */
  rawBody?: string;
  headers?: Record<string, string>;
  /** Client gives up after this long without response headers. */
  timeoutMs?: number;
}

const writeMethods = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Per-file harness: `start()` simulators and `call()` them; everything closes after each test. */
export function useSimHarness() {
  const agent = new Agent({ keepAliveTimeout: 1_000 });
  const closers: Array<() => Promise<void>> = [];

  afterEach(async () => {
    await Promise.all(closers.splice(0).map((close) => close()));
  });
  afterAll(async () => {
    await agent.close();
  });

  async function start(options: ProviderSimOptions = {}): Promise<ProviderSim> {
    const sim = await startProviderSim({ ...options, onError: options.onError ?? ((e) => console.error(e)) });
    closers.push(() => sim.close());
    return sim;
  }

  async function call(sim: { url: string }, c: Call = {}): Promise<SimResponse> {
    const method = c.method ?? 'POST';
    const headers: Record<string, string> = { ...c.headers };
    const key = c.key === undefined ? 'sk_test_acme' : c.key;
    if (key !== null) headers['authorization'] = `Bearer ${key}`;
    if (c.idempotencyKey !== undefined) headers['idempotency-key'] = c.idempotencyKey;
    let body: string | undefined = c.rawBody;
    if (body === undefined && writeMethods.has(method)) body = JSON.stringify(c.body ?? {});
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const response = await request(`${sim.url}${c.path ?? '/v1/charges'}`, {
      method: method as 'POST',
      headers,
      ...(body === undefined ? {} : { body }),
      dispatcher: agent,
      ...(c.timeoutMs === undefined ? {} : { headersTimeout: c.timeoutMs }),
    });
    const text = await response.body.text();
    const flat: Record<string, string> = {};
    for (const [name, value] of Object.entries(response.headers)) {
      if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    let json: SimResponse['json'] = {};
    try {
      json = JSON.parse(text) as SimResponse['json'];
    } catch {
      // not JSON; tests look at `text`
    }
    return { status: response.statusCode, headers: flat, json, text };
  }

  /** Registers something else to close after the test (a receiver server, …). */
  function track(close: () => Promise<void>): void {
    closers.push(close);
  }

  return { start, call, track, agent };
}

/** The error code of a failed request (`ECONNREFUSED`, `UND_ERR_SOCKET`, `UND_ERR_HEADERS_TIMEOUT`, …). */
export async function failureCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? code : String(error);
  }
  throw new Error('expected the request to fail, but it got an answer');
}

/** Polls `check` until it returns true (bounded by `timeoutMs`). */
export async function waitFor(check: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  await vi.waitFor(
    () => {
      if (!check()) throw new Error(`timed out waiting for ${what}`);
    },
    { timeout: timeoutMs, interval: 5 },
  );
}
