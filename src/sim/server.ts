/**
 * The simulated provider: a real `node:http` server on loopback that behaves like a paid API with
 * per-key admission gates, idempotency keys, an operation status endpoint, scripted faults,
 * outages, webhooks and metrics. See docs/provider-sim.md for the HTTP contract. This file puts the
 * rooms together: the state (`state.ts`), the API (`api.ts`, `operations.ts`, `steps.ts`), the
 * admin endpoints (`admin.ts`) and the socket life (`listener.ts`).
 */
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { handleAdmin } from './admin.js';
import { handleApi } from './api.js';
import type { Exchange } from './exchange.js';
import { clientAborted, newExchange } from './exchange.js';
import { Listener } from './listener.js';
import type { OperationRecord } from './operation-store.js';
import { errorAnswer, errorBody, ProviderErrorCode, ProviderErrorType } from './provider-errors.js';
import { parseScenario, patchScenario } from './scenario.js';
import type { Scenario, ScenarioInput, ScenarioPatch } from './scenario.js';
import { ProviderState } from './state.js';
import type { AnsweredRequest, SimMetrics } from './state.js';

export type { AnsweredRequest, KeyMetrics, SimMetrics } from './state.js';

/** How to start the simulator. */
export interface ProviderSimOptions {
  /** TCP port; `0` picks a free one (read it back from `port`/`url`). @default 0 */
  port?: number;
  /** Interface to bind. @default '127.0.0.1' */
  host?: string;
  /** The scenario (validated; throws `ScenarioError`). @default all defaults: one key `sk_test_acme` */
  scenario?: ScenarioInput;
  /**
   * The simulator's clock in epoch ms: admission windows, bursts, request rates, `createdAt` and
   * `Date` all read it. Timers (delays, outages, webhook backoff) use real time.
   * @default Date.now
   */
  now?: () => number;
  /** Called with unexpected internal errors (answered as 500 `internal_error`). @default ignore */
  onError?: (error: unknown) => void;
  /** Called for every answer the simulator sends (see {@link AnsweredRequest}); benchmarks build request logs from it. */
  onAnswer?: (answered: AnsweredRequest) => void;
}

/** A running simulator. */
export interface ProviderSim {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  readonly port: number;
  readonly host: string;
  /** Whether the server currently accepts connections (false during an outage). */
  readonly listening: boolean;
  /** Same data as `GET /_sim/metrics`. */
  metrics(): SimMetrics;
  /** Recorded operations, oldest first (copies). */
  operations(filter?: { idempotencyKey?: string }): OperationRecord[];
  /** Side effects executed for an idempotency key (anything above 1 is a duplicate). */
  sideEffects(idempotencyKey: string): number;
  /** The current validated scenario. */
  scenario(): Scenario;
  /** Replaces the scenario (restarts scenario time and rule sequences). Throws `ScenarioError`. */
  setScenario(scenario: ScenarioInput): void;
  /** Replaces some top-level fields; rule sequences restart only if `rules` is given. Throws `ScenarioError`. */
  updateScenario(patch: ScenarioPatch): void;
  /** Forgets operations, metrics, windows, spending and rule positions; keeps the scenario. */
  reset(): void;
  /**
   * Stops listening now (clients get ECONNREFUSED; open sockets are destroyed) and listens again
   * on the same port after `durationMs`. Resolves once stopped; `resumed` settles on re-listen.
   */
  outage(durationMs: number): Promise<{ resumed: Promise<void> }>;
  /** Stops accepting connections and destroys open ones. */
  stopListening(): Promise<void>;
  /** Listens again on the same host and port. */
  resumeListening(): Promise<void>;
  /** Closes the server and destroys every socket, held ones included; cancels timers and webhooks. */
  close(): Promise<void>;
}

class SimulatedProvider implements ProviderSim {
  readonly #state: ProviderState;
  readonly #listener: Listener;
  readonly #onError: (error: unknown) => void;
  #closing: Promise<void> | undefined;

  constructor(options: ProviderSimOptions) {
    this.#onError = options.onError ?? (() => undefined);
    this.#state = new ProviderState(options.scenario ?? {}, options.now ?? Date.now, options.onAnswer);
    const server = createServer((req, res) => this.#onRequest(req, res));
    server.on('clientError', (_error: Error, socket: Socket) => {
      if (socket.writable) {
        const body = JSON.stringify(
          errorBody(ProviderErrorType.invalidRequest, ProviderErrorCode.invalidRequest, 'Malformed HTTP request.'),
        );
        socket.end(
          `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      } else {
        socket.destroy();
      }
    });
    this.#listener = new Listener(server, options.host ?? '127.0.0.1', options.port ?? 0, this.#onError);
  }

  get host(): string {
    return this.#listener.host;
  }

  get port(): number {
    return this.#listener.port;
  }

  get url(): string {
    const host = this.host.includes(':') ? `[${this.host}]` : this.host;
    return `http://${host}:${this.port}`;
  }

  get listening(): boolean {
    return this.#listener.listening;
  }

  /** First listen; also schedules the scenario's outages. */
  async start(): Promise<void> {
    await this.#listener.listen();
    this.#listener.scheduleOutages(this.#state.scenario.outages);
  }

  scenario(): Scenario {
    return structuredClone(this.#state.scenario);
  }

  setScenario(input: ScenarioInput): void {
    this.#apply(parseScenario(input), { rules: true, time: true });
  }

  updateScenario(patch: ScenarioPatch): void {
    const scenario = patchScenario(this.#state.scenario, patch);
    const touched = (field: string): boolean => Object.prototype.hasOwnProperty.call(patch, field);
    this.#apply(scenario, { rules: touched('rules'), time: touched('bursts') || touched('outages') });
  }

  #apply(scenario: Scenario, restart: { rules: boolean; time: boolean }): void {
    this.#state.apply(scenario, restart);
    if (restart.time) this.#listener.scheduleOutages(scenario.outages);
  }

  reset(): void {
    this.#state.reset();
    this.#listener.scheduleOutages(this.#state.scenario.outages);
  }

  operations(filter: { idempotencyKey?: string } = {}): OperationRecord[] {
    return this.#state.store.list(filter);
  }

  sideEffects(idempotencyKey: string): number {
    return this.#state.store.sideEffects(idempotencyKey);
  }

  metrics(): SimMetrics {
    return this.#state.snapshot(this.listening);
  }

  outage(durationMs: number): Promise<{ resumed: Promise<void> }> {
    return this.#listener.outage(durationMs);
  }

  stopListening(): Promise<void> {
    return this.#listener.stopListening();
  }

  resumeListening(): Promise<void> {
    return this.#listener.resumeListening();
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      const closed = this.#listener.close();
      this.#state.lifetime.abort();
      await closed;
      await this.#state.webhooks.close();
    })();
    return this.#closing;
  }

  #onRequest(req: IncomingMessage, res: ServerResponse): void {
    const exchange = newExchange(req, res);
    this.#route(exchange).catch((error: unknown) => {
      if (exchange.res.headersSent || exchange.res.destroyed) {
        exchange.res.destroy();
        return;
      }
      if (!(error instanceof Error && error.message === clientAborted)) this.#onError(error);
      try {
        this.#state.send(exchange, errorAnswer(ProviderErrorCode.internalError, 'The simulator failed unexpectedly.'));
      } catch {
        exchange.res.destroy();
      }
    });
  }

  async #route(exchange: Exchange): Promise<void> {
    let url: URL;
    try {
      url = new URL(exchange.req.url ?? '/', 'http://provider-sim.invalid');
    } catch {
      return this.#state.send(exchange, errorAnswer(ProviderErrorCode.invalidRequest, 'Malformed request target.'));
    }
    exchange.path = url.pathname;
    if (exchange.path === '/_sim' || exchange.path.startsWith('/_sim/'))
      return handleAdmin(this, this.#state, exchange, url, this.#onError);
    return handleApi(this.#state, exchange);
  }
}

/**
 * Starts a simulated provider on loopback.
 *
 * @example
 * ```ts
 * const sim = await startProviderSim({ scenario: { rateLimitPerMinute: 60 } });
 * const res = await fetch(`${sim.url}/v1/charges`, {
 *   method: 'POST',
 *   headers: { authorization: 'Bearer sk_test_acme', 'idempotency-key': 'order-1' },
 *   body: JSON.stringify({ amount: 100 }),
 * });
 * console.log(res.status, sim.sideEffects('order-1')); // 201 1
 * await sim.close();
 * ```
 */
export async function startProviderSim(options: ProviderSimOptions = {}): Promise<ProviderSim> {
  const sim = new SimulatedProvider(options);
  try {
    await sim.start();
  } catch (error) {
    await sim.close().catch(() => undefined);
    throw error;
  }
  return sim;
}
