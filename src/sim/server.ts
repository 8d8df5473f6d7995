/**
 * The simulated provider: a real `node:http` server on loopback that behaves like a paid API with
 * per-key admission gates, idempotency keys, an operation status endpoint, scripted faults,
 * outages, webhooks and metrics. See docs/provider-sim.md for the HTTP contract.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import YAML from 'yaml';
import { SlidingWindowLimiter, SpendingLedger } from './admission.js';
import { formatImfFixdate } from './http-date.js';
import { MetricsRecorder } from './metrics.js';
import type { RequestCounters } from './metrics.js';
import { canonicalJson, OperationStore } from './operation-store.js';
import type { OperationError, OperationRecord, StoredOperation } from './operation-store.js';
import { defaultErrorFor, errorBody, ProviderErrorCode, ProviderErrorType } from './provider-errors.js';
import { admissionRetryAfter, renderRetryAfter } from './retry-after.js';
import type { RetryAfterSpec } from './retry-after.js';
import { RuleBook } from './rules.js';
import { isScenarioError, parseScenario, patchScenario, writeMethods } from './scenario.js';
import type { ApiKeyConfig, Scenario, ScenarioInput, ScenarioPatch, Step } from './scenario.js';
import { WebhookSender } from './webhooks.js';
import { sleepUnlessAborted } from './sleep.js';

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
}

/** Metrics for one API key: its counters plus its configured limits. */
export interface KeyMetrics extends RequestCounters {
  /** Whether the key is in the current scenario. */
  configured: boolean;
  workspace: string | null;
  rateLimitPerMinute: number | null;
  inspectPerMinute: number | null;
  /** `null`: unlimited (or not configured). */
  spendLimit: number | null;
  /** Billable operations (executions) charged to the key. */
  billableOperations: number;
}

/** What `GET /_sim/metrics` and `metrics()` return. */
export interface SimMetrics {
  /** The simulator clock (unskewed), ISO. */
  at: string;
  listening: boolean;
  totals: RequestCounters;
  /** Answers with 401 (requests that named no known key). */
  unauthenticated: number;
  /** Per API key, by key `id`. */
  keys: Record<string, KeyMetrics>;
  operations: { stored: number; pending: number; evicted: number };
  webhooks: { pending: number };
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

/** A JSON answer about to be sent. */
interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Server-clock time for the `Date` header when it must agree with another header. */
  serverNowMs?: number;
}

/** One request/response pair in flight. */
interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  method: string;
  path: string;
  /** The authenticated key's id, for per-key metrics; undefined before/without auth. */
  keyId: string | undefined;
  /** Whether this is a `/v1` request (counted in metrics). */
  counted: boolean;
}

/** A parsed, admitted operation request. */
interface OperationRequest {
  key: ApiKeyConfig & { id: string };
  idempotencyKey: string | undefined;
  method: string;
  path: string;
  request: unknown;
  canonicalRequest: string;
}

type ResolvedKey = ApiKeyConfig & { id: string };

const maxBodyBytes = 1024 * 1024;
const writeMethodSet: ReadonlySet<string> = new Set(writeMethods);

function randomId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}

function errorAnswer(
  status: number,
  type: string,
  code: string,
  message: string,
  headers?: Record<string, string>,
): Answer {
  return headers
    ? { status, body: errorBody(type, code, message), headers }
    : { status, body: errorBody(type, code, message) };
}

const notFound = (what: string): Answer =>
  errorAnswer(404, ProviderErrorType.invalidRequest, ProviderErrorCode.notFound, `No route for ${what}.`);

/**
 * Reads a request body up to `limit` bytes; `null` if it is larger. An oversize body is drained
 * (discarded) to its end, up to `drainLimit` bytes in all, so the client can read the 413 answer
 * instead of failing on a write; beyond that the answer goes out at once.
 */
function readBody(req: IncomingMessage, limit: number, drainLimit = 16 * limit): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let overflow = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (overflow) {
        if (size > drainLimit) resolve(null);
        return;
      }
      if (size > limit) {
        overflow = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(overflow ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
    req.on('close', () => {
      if (!req.complete) reject(new Error('request aborted by the client'));
    });
  });
}

class SimulatedProvider implements ProviderSim {
  readonly host: string;
  #port: number;
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #now: () => number;
  readonly #onError: (error: unknown) => void;
  readonly #lifetime = new AbortController();
  readonly #webhooks = new WebhookSender();
  readonly #limiter = new SlidingWindowLimiter(60_000);
  readonly #ledger = new SpendingLedger();
  #scenario: Scenario;
  #keys = new Map<string, ResolvedKey>();
  #rules: RuleBook;
  #store: OperationStore;
  #metrics = new MetricsRecorder();
  #epochMs: number;
  readonly #outageTimers = new Set<NodeJS.Timeout>();
  #resume:
    { timer: NodeJS.Timeout; promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } | undefined;
  #listenChain: Promise<unknown> = Promise.resolve();
  #closing: Promise<void> | undefined;

  constructor(options: ProviderSimOptions) {
    this.host = options.host ?? '127.0.0.1';
    this.#port = options.port ?? 0;
    this.#now = options.now ?? Date.now;
    this.#onError = options.onError ?? (() => undefined);
    this.#scenario = parseScenario(options.scenario ?? {});
    this.#rules = new RuleBook(this.#scenario.rules);
    this.#store = new OperationStore(this.#scenario.maxOperations);
    this.#epochMs = this.#now();
    this.#indexKeys();
    this.#server = createServer((req, res) => this.#onRequest(req, res));
    this.#server.on('connection', (socket: Socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    this.#server.on('clientError', (_error: Error, socket: Socket) => {
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
  }

  get port(): number {
    return this.#port;
  }

  get url(): string {
    const host = this.host.includes(':') ? `[${this.host}]` : this.host;
    return `http://${host}:${this.#port}`;
  }

  get listening(): boolean {
    return this.#server.listening;
  }

  /** First listen; also schedules the scenario's outages. */
  async start(): Promise<void> {
    await this.#listen();
    this.#scheduleOutages();
  }

  // ---------------------------------------------------------------- scenario and state

  scenario(): Scenario {
    return structuredClone(this.#scenario);
  }

  setScenario(input: ScenarioInput): void {
    const scenario = parseScenario(input);
    this.#apply(scenario, { rules: true, time: true });
  }

  updateScenario(patch: ScenarioPatch): void {
    const scenario = patchScenario(this.#scenario, patch);
    const touched = (field: string): boolean => Object.prototype.hasOwnProperty.call(patch, field);
    this.#apply(scenario, { rules: touched('rules'), time: touched('bursts') || touched('outages') });
  }

  #apply(scenario: Scenario, restart: { rules: boolean; time: boolean }): void {
    this.#scenario = scenario;
    this.#indexKeys();
    this.#store.maxOperations = scenario.maxOperations;
    if (restart.rules) this.#rules = new RuleBook(scenario.rules);
    if (restart.time) {
      this.#epochMs = this.#now();
      this.#scheduleOutages();
    }
  }

  #indexKeys(): void {
    this.#keys = new Map(this.#scenario.keys.map((k) => [k.key, { ...k, id: k.id ?? k.key }]));
  }

  reset(): void {
    this.#store = new OperationStore(this.#scenario.maxOperations);
    this.#metrics = new MetricsRecorder();
    this.#limiter.clear();
    this.#ledger.clear();
    this.#rules = new RuleBook(this.#scenario.rules);
    this.#epochMs = this.#now();
    this.#scheduleOutages();
  }

  operations(filter: { idempotencyKey?: string } = {}): OperationRecord[] {
    return this.#store.list(filter);
  }

  sideEffects(idempotencyKey: string): number {
    return this.#store.sideEffects(idempotencyKey);
  }

  metrics(): SimMetrics {
    const nowMs = this.#now();
    const snapshot = this.#metrics.snapshot(nowMs);
    const keys: Record<string, KeyMetrics> = {};
    const configured = new Map([...this.#keys.values()].map((k) => [k.id, k]));
    const ids = new Set([...configured.keys(), ...snapshot.keys.keys()]);
    for (const id of ids) {
      const key = configured.get(id);
      keys[id] = {
        ...(snapshot.keys.get(id) ?? MetricsRecorder.empty()),
        configured: key !== undefined,
        workspace: key?.workspace ?? null,
        rateLimitPerMinute: key ? (key.rateLimitPerMinute ?? this.#scenario.rateLimitPerMinute) : null,
        inspectPerMinute: key ? (key.inspectPerMinute ?? this.#scenario.inspectPerMinute) : null,
        spendLimit: key?.spendLimit ?? null,
        billableOperations: this.#ledger.usedByKey(id),
      };
    }
    return {
      at: new Date(nowMs).toISOString(),
      listening: this.listening,
      totals: snapshot.totals,
      unauthenticated: snapshot.unauthenticated,
      keys,
      operations: this.#store.stats(),
      webhooks: { pending: this.#webhooks.pending },
    };
  }

  /** The server's clock: the simulator clock plus the scenario's skew. */
  #serverNow(): number {
    return this.#now() + this.#scenario.clockOffsetMs;
  }

  // ---------------------------------------------------------------- listening and outages

  #serial<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#listenChain.then(task, task);
    this.#listenChain = run.catch(() => undefined);
    return run;
  }

  #listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error): void => {
        this.#server.off('listening', onListening);
        reject(error);
      };
      const onListening = (): void => {
        this.#server.off('error', onError);
        const address = this.#server.address();
        if (address && typeof address === 'object') this.#port = address.port;
        resolve();
      };
      this.#server.once('error', onError);
      this.#server.once('listening', onListening);
      this.#server.listen(this.#port, this.host);
    });
  }

  #destroySockets(): void {
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
  }

  stopListening(): Promise<void> {
    return this.#serial(async () => {
      if (this.#server.listening) {
        const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
        this.#destroySockets();
        await closed;
      }
      this.#destroySockets();
    });
  }

  resumeListening(): Promise<void> {
    return this.#serial(async () => {
      if (this.#closing) throw new Error('the provider simulator is closed');
      if (!this.#server.listening) await this.#listen();
    });
  }

  async outage(durationMs: number): Promise<{ resumed: Promise<void> }> {
    if (!Number.isFinite(durationMs) || durationMs < 0)
      throw new RangeError(`outage duration must be ≥ 0 ms, got ${durationMs}`);
    if (this.#closing) throw new Error('the provider simulator is closed');
    await this.stopListening();
    let resume = this.#resume;
    if (resume) {
      clearTimeout(resume.timer);
    } else {
      let resolve!: () => void;
      let reject!: (e: Error) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      promise.catch(() => undefined);
      resume = { timer: setTimeout(() => undefined, 0), promise, resolve, reject };
      this.#resume = resume;
    }
    const current = resume;
    current.timer = setTimeout(() => {
      this.#resume = undefined;
      this.resumeListening().then(current.resolve, current.reject);
    }, durationMs);
    return { resumed: current.promise };
  }

  #scheduleOutages(): void {
    for (const timer of this.#outageTimers) clearTimeout(timer);
    this.#outageTimers.clear();
    if (this.#closing) return;
    for (const { afterMs, durationMs } of this.#scenario.outages) {
      const timer = setTimeout(() => {
        this.#outageTimers.delete(timer);
        this.outage(durationMs).catch((error: unknown) => this.#onError(error));
      }, afterMs);
      this.#outageTimers.add(timer);
    }
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const timer of this.#outageTimers) clearTimeout(timer);
      this.#outageTimers.clear();
      if (this.#resume) {
        clearTimeout(this.#resume.timer);
        this.#resume.reject(new Error('the provider simulator closed during an outage'));
        this.#resume = undefined;
      }
      this.#lifetime.abort();
      await this.stopListening();
      await this.#webhooks.close();
    })();
    return this.#closing;
  }

  /** Resolves `true` after `ms`, or `false` as soon as the simulator closes. */
  #sleep(ms: number): Promise<boolean> {
    return sleepUnlessAborted(ms, this.#lifetime.signal);
  }

  // ---------------------------------------------------------------- answering

  #onRequest(req: IncomingMessage, res: ServerResponse): void {
    const exchange: Exchange = {
      req,
      res,
      requestId: randomId('req'),
      method: req.method ?? 'GET',
      path: '/',
      keyId: undefined,
      counted: false,
    };
    this.#route(exchange).catch((error: unknown) => {
      if (exchange.res.headersSent || exchange.res.destroyed) {
        exchange.res.destroy();
        return;
      }
      if (!(error instanceof Error && error.message === 'request aborted by the client')) this.#onError(error);
      try {
        this.#send(
          exchange,
          errorAnswer(
            500,
            ProviderErrorType.api,
            ProviderErrorCode.internalError,
            'The simulator failed unexpectedly.',
          ),
        );
      } catch {
        exchange.res.destroy();
      }
    });
  }

  #send(exchange: Exchange, answer: Answer): void {
    const { res } = exchange;
    if (res.headersSent || res.destroyed || res.writableEnded) return;
    const payload = JSON.stringify(answer.body) ?? 'null';
    res.sendDate = false;
    res.statusCode = answer.status;
    res.setHeader('Content-Type', 'application/json');
    res.setHeader('Date', formatImfFixdate(answer.serverNowMs ?? this.#serverNow()));
    res.setHeader('Request-Id', exchange.requestId);
    for (const [name, value] of Object.entries(answer.headers ?? {})) res.setHeader(name, value);
    res.setHeader('Content-Length', Buffer.byteLength(payload));
    res.end(payload);
    if (exchange.counted) this.#metrics.answer(exchange.keyId, answer.status);
  }

  /** Deliberately never answers: the socket stays open until the client gives up or the simulator closes. */
  #hold(exchange: Exchange): void {
    this.#metrics.event(exchange.keyId, 'held');
  }

  /** Destroys the connection without an answer. */
  #resetSocket(exchange: Exchange): void {
    this.#metrics.event(exchange.keyId, 'reset');
    exchange.req.socket.destroy();
  }

  async #route(exchange: Exchange): Promise<void> {
    let url: URL;
    try {
      url = new URL(exchange.req.url ?? '/', 'http://provider-sim.invalid');
    } catch {
      this.#send(
        exchange,
        errorAnswer(
          400,
          ProviderErrorType.invalidRequest,
          ProviderErrorCode.invalidRequest,
          'Malformed request target.',
        ),
      );
      return;
    }
    exchange.path = url.pathname;
    const { method, path } = exchange;
    if (path === '/_sim' || path.startsWith('/_sim/')) {
      await this.#admin(exchange, url);
      return;
    }
    if (!path.startsWith('/v1/') || path === '/v1/') {
      this.#send(exchange, notFound(`${method} ${path}`));
      return;
    }
    exchange.counted = true;
    const key = this.#authenticate(exchange.req);
    this.#metrics.request(key?.id, this.#now());
    if (!key) {
      this.#send(
        exchange,
        errorAnswer(
          401,
          ProviderErrorType.authentication,
          ProviderErrorCode.invalidApiKey,
          'Missing or unknown API key; send Authorization: Bearer <key>.',
        ),
      );
      return;
    }
    exchange.keyId = key.id;
    if (key.permission === 'denied') {
      this.#send(
        exchange,
        errorAnswer(
          403,
          ProviderErrorType.permission,
          ProviderErrorCode.permissionDenied,
          'This API key is not permitted to perform this request.',
        ),
      );
      return;
    }
    const inspectPrefix = '/v1/operations/';
    if (method === 'GET' && path.startsWith(inspectPrefix) && path.length > inspectPrefix.length) {
      await this.#inspect(exchange, key, path.slice(inspectPrefix.length));
      return;
    }
    if (writeMethodSet.has(method)) {
      await this.#operation(exchange, key);
      return;
    }
    if (method === 'GET') {
      this.#send(exchange, notFound(`${method} ${path}`));
      return;
    }
    this.#send(
      exchange,
      errorAnswer(
        405,
        ProviderErrorType.invalidRequest,
        ProviderErrorCode.methodNotAllowed,
        `Method ${method} is not allowed here.`,
        {
          Allow: 'GET, POST, PUT, PATCH, DELETE',
        },
      ),
    );
  }

  #authenticate(req: IncomingMessage): ResolvedKey | undefined {
    const header = req.headers.authorization;
    if (typeof header !== 'string') return undefined;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return match?.[1] === undefined ? undefined : this.#keys.get(match[1]);
  }

  #rateLimited(limit: number, waitMs: number, what: string): Answer {
    const serverNowMs = this.#serverNow();
    const retryAfter = admissionRetryAfter(waitMs, serverNowMs, this.#scenario.retryAfterFormat);
    const seconds = Math.max(1, Math.ceil(waitMs / 1_000));
    return {
      ...errorAnswer(
        429,
        ProviderErrorType.rateLimit,
        ProviderErrorCode.rateLimitExceeded,
        `${what} of ${limit} requests per minute exceeded for this API key; retry in ${seconds} s.`,
        { 'Retry-After': retryAfter },
      ),
      serverNowMs,
    };
  }

  #scripted(step: {
    status: number;
    code?: string | undefined;
    type?: string | undefined;
    message?: string | undefined;
    body?: Record<string, unknown> | undefined;
    retryAfter?: RetryAfterSpec | undefined;
    headers?: Record<string, string> | undefined;
  }): { answer: Answer; error: OperationError } {
    const defaults = defaultErrorFor(step.status);
    const code = step.code ?? defaults.code;
    const message = step.message ?? defaults.message;
    const serverNowMs = this.#serverNow();
    const headers: Record<string, string> = { ...step.headers };
    if (step.retryAfter !== undefined) headers['Retry-After'] = renderRetryAfter(step.retryAfter, serverNowMs);
    return {
      answer: {
        status: step.status,
        body: step.body ?? errorBody(step.type ?? defaults.type, code, message),
        headers,
        serverNowMs,
      },
      error: { status: step.status, code, message },
    };
  }

  /**
   * Carries out a rule step around `process` (the normal handling, given extra delay):
   * scripted errors and resets skip it; `commitThen` runs it and then loses the answer.
   */
  async #applyStep(
    exchange: Exchange,
    step: Step,
    process: (delayMs: number) => Promise<Answer>,
    recordFailure: (error: OperationError, answer: Answer) => void,
  ): Promise<void> {
    if (step === 'normal') {
      this.#send(exchange, await process(0));
    } else if ('status' in step) {
      if (step.delayMs !== undefined && !(await this.#sleep(step.delayMs))) return;
      const { answer, error } = this.#scripted(step);
      if (step.record === true) recordFailure(error, answer);
      this.#send(exchange, answer);
    } else if ('reset' in step) {
      this.#resetSocket(exchange);
    } else if ('delayMs' in step) {
      this.#send(exchange, await process(step.delayMs));
    } else {
      await process(0);
      const lose = step.commitThen;
      if (lose === 'timeout') this.#hold(exchange);
      else if (lose === 'reset') this.#resetSocket(exchange);
      else this.#send(exchange, this.#scripted({ status: lose }).answer);
    }
  }

  // ---------------------------------------------------------------- operations

  async #operation(exchange: Exchange, key: ResolvedKey): Promise<void> {
    const { req, method, path } = exchange;
    this.#metrics.event(key.id, 'write');
    const rawKey = req.headers['idempotency-key'];
    let idempotencyKey: string | undefined;
    if (typeof rawKey === 'string') {
      idempotencyKey = rawKey.trim();
      if (idempotencyKey.length === 0 || idempotencyKey.length > 255) {
        this.#send(
          exchange,
          errorAnswer(
            400,
            ProviderErrorType.invalidRequest,
            ProviderErrorCode.invalidIdempotencyKey,
            'Idempotency-Key must be 1 to 255 characters.',
          ),
        );
        return;
      }
    }
    const text = await readBody(req, maxBodyBytes);
    if (text === null) {
      this.#send(
        exchange,
        errorAnswer(
          413,
          ProviderErrorType.invalidRequest,
          ProviderErrorCode.requestTooLarge,
          `Request bodies are limited to ${maxBodyBytes} bytes.`,
          {
            Connection: 'close',
          },
        ),
      );
      return;
    }
    const limit = key.rateLimitPerMinute ?? this.#scenario.rateLimitPerMinute;
    const admission = this.#limiter.take(`write\u0000${key.id}`, limit, this.#now());
    if (!admission.admitted) {
      this.#send(exchange, this.#rateLimited(limit, admission.waitMs, 'Rate limit'));
      return;
    }
    let request: unknown = null;
    if (text.trim() !== '') {
      try {
        request = JSON.parse(text);
      } catch {
        this.#send(
          exchange,
          errorAnswer(
            400,
            ProviderErrorType.invalidRequest,
            ProviderErrorCode.invalidJson,
            'The request body is not valid JSON.',
          ),
        );
        return;
      }
    }
    const burst = this.#activeBurst();
    if (burst) {
      this.#send(exchange, this.#scripted(burst).answer);
      return;
    }
    const step = this.#rules.next({ method, path, idempotencyKey, apiKey: key.key, apiKeyId: key.id });
    const op: OperationRequest = {
      key,
      idempotencyKey,
      method,
      path,
      request,
      canonicalRequest: canonicalJson(request),
    };
    await this.#applyStep(
      exchange,
      step,
      (delayMs) => this.#execute(op, delayMs),
      (error, answer) => this.#recordFailure(op, error, answer),
    );
  }

  #activeBurst(): Scenario['bursts'][number] | undefined {
    const elapsed = this.#now() - this.#epochMs;
    return this.#scenario.bursts.find((b) => elapsed >= b.afterMs && elapsed < b.afterMs + b.durationMs);
  }

  /** The normal handling of an admitted write: idempotency, spending gates, execution. */
  async #execute(op: OperationRequest, extraDelayMs: number): Promise<Answer> {
    const scenario = this.#scenario;
    const store = this.#store;
    const metrics = this.#metrics;
    const { key, idempotencyKey } = op;
    const honor = scenario.honorIdempotencyKeys && idempotencyKey !== undefined;
    if (honor) {
      const existing = store.find(idempotencyKey);
      if (existing) return this.#replay(existing, op);
    }
    const refusal = this.#ledger.check(key, scenario.workspaceAllowance);
    if (refusal?.kind === 'spend_limit') {
      return errorAnswer(
        402,
        ProviderErrorType.billing,
        ProviderErrorCode.spendingLimitExceeded,
        `This API key reached its spending limit of ${refusal.limit} billable operations.`,
      );
    }
    if (refusal?.kind === 'workspace_allowance') {
      return errorAnswer(
        403,
        ProviderErrorType.billing,
        ProviderErrorCode.workspaceAllowanceExhausted,
        `Workspace ${refusal.workspace} used its allowance of ${refusal.allowance} billable operations.`,
      );
    }
    this.#ledger.charge(key);
    const stored = store.begin({
      operationId: randomId('op'),
      idempotencyKey,
      apiKeyId: key.id,
      method: op.method,
      path: op.path,
      request: op.request,
      canonicalRequest: op.canonicalRequest,
      createdAt: new Date(this.#serverNow()).toISOString(),
    });
    const delayMs = extraDelayMs + scenario.latencyMs;
    if (delayMs > 0 && !(await this.#sleep(delayMs))) {
      store.abandon(stored);
      return errorAnswer(503, ProviderErrorType.api, 'service_unavailable', 'The simulator is shutting down.');
    }
    const completedAt = new Date(this.#serverNow()).toISOString();
    const status = op.method === 'POST' ? 201 : 200;
    const result = {
      object: 'operation_result',
      method: op.method,
      path: op.path,
      request: op.request,
      executedAt: completedAt,
    };
    const body = { id: stored.record.operationId, idempotencyKey: idempotencyKey ?? null, status: 'succeeded', result };
    const { duplicate } = store.commit(stored, { result, response: { status, body }, completedAt });
    metrics.sideEffect(key.id, duplicate);
    this.#sendWebhook(stored, metrics);
    return { status, body };
  }

  #replay(existing: StoredOperation, op: OperationRequest): Answer {
    const { record } = existing;
    if (record.status === 'pending' || !existing.response) {
      return errorAnswer(
        409,
        ProviderErrorType.idempotency,
        ProviderErrorCode.idempotencyKeyInUse,
        'A request with this Idempotency-Key is still being processed; retry later.',
      );
    }
    if (record.method !== op.method || record.path !== op.path || existing.canonicalRequest !== op.canonicalRequest) {
      return errorAnswer(
        422,
        ProviderErrorType.idempotency,
        ProviderErrorCode.idempotencyKeyReused,
        'This Idempotency-Key was already used with a different request (method, path or body).',
      );
    }
    this.#metrics.event(op.key.id, 'replay');
    return {
      status: existing.response.status,
      body: existing.response.body,
      headers: { 'Idempotent-Replayed': 'true' },
    };
  }

  #recordFailure(op: OperationRequest, error: OperationError, answer: Answer): void {
    if (!this.#scenario.honorIdempotencyKeys || op.idempotencyKey === undefined) return;
    if (this.#store.find(op.idempotencyKey)) return;
    this.#store.recordFailure(
      {
        operationId: randomId('op'),
        idempotencyKey: op.idempotencyKey,
        apiKeyId: op.key.id,
        method: op.method,
        path: op.path,
        request: op.request,
        canonicalRequest: op.canonicalRequest,
        createdAt: new Date(this.#serverNow()).toISOString(),
      },
      error,
      { status: answer.status, body: answer.body },
    );
  }

  #sendWebhook(stored: StoredOperation, metrics: MetricsRecorder): void {
    const scenario = this.#scenario;
    if (scenario.webhookUrl === undefined) return;
    const { record } = stored;
    this.#webhooks.deliver(
      {
        url: scenario.webhookUrl,
        redeliveries: scenario.webhookRedeliveries,
        maxAttempts: scenario.webhookMaxAttempts,
        backoffMs: scenario.webhookBackoffMs,
        timeoutMs: scenario.webhookTimeoutMs,
        secret: scenario.webhookSecret,
        forged: scenario.webhookForged,
        stale: scenario.webhookStale,
        outOfOrder: scenario.webhookOutOfOrder,
      },
      {
        deliveryId: randomId('dlv'),
        type: 'operation.succeeded',
        status: 'succeeded',
        idempotencyKey: record.idempotencyKey,
        operationId: record.operationId,
        createdAt: record.createdAt,
        result: record.result ?? null,
      },
      (outcome) => metrics.webhook(record.apiKeyId, outcome),
    );
  }

  // ---------------------------------------------------------------- inspection

  async #inspect(exchange: Exchange, key: ResolvedKey, encodedKey: string): Promise<void> {
    let idempotencyKey: string;
    try {
      idempotencyKey = decodeURIComponent(encodedKey);
    } catch {
      this.#send(
        exchange,
        errorAnswer(
          400,
          ProviderErrorType.invalidRequest,
          ProviderErrorCode.invalidRequest,
          'Malformed idempotency key in the path.',
        ),
      );
      return;
    }
    const limit = key.inspectPerMinute ?? this.#scenario.inspectPerMinute;
    const admission = this.#limiter.take(`inspect\u0000${key.id}`, limit, this.#now());
    if (!admission.admitted) {
      this.#send(exchange, this.#rateLimited(limit, admission.waitMs, 'Inspection budget'));
      return;
    }
    this.#metrics.event(key.id, 'inspection');
    const step = this.#rules.next({
      method: 'GET',
      path: exchange.path,
      idempotencyKey,
      apiKey: key.key,
      apiKeyId: key.id,
    });
    await this.#applyStep(
      exchange,
      step,
      async (delayMs) => {
        await this.#sleep(delayMs);
        return this.#lookup(idempotencyKey);
      },
      () => undefined,
    );
  }

  #lookup(idempotencyKey: string): Answer {
    const stored = this.#store.find(idempotencyKey);
    if (!stored) {
      return errorAnswer(
        404,
        ProviderErrorType.invalidRequest,
        ProviderErrorCode.operationNotFound,
        'No operation was saved under this idempotency key.',
      );
    }
    const { record } = stored;
    const body: Record<string, unknown> = {
      idempotencyKey,
      status: record.status,
      operationId: record.operationId,
      createdAt: record.createdAt,
    };
    if (record.result !== undefined) body['result'] = record.result;
    if (record.error !== undefined) body['error'] = record.error;
    return { status: 200, body };
  }

  // ---------------------------------------------------------------- admin

  async #admin(exchange: Exchange, url: URL): Promise<void> {
    if (!this.#scenario.admin) {
      this.#send(exchange, notFound(`${exchange.method} ${exchange.path}`));
      return;
    }
    const { method, path } = exchange;
    const routes: Record<string, readonly string[]> = {
      '/_sim/metrics': ['GET'],
      '/_sim/operations': ['GET'],
      '/_sim/scenario': ['GET', 'PUT', 'PATCH'],
      '/_sim/reset': ['POST'],
      '/_sim/outage': ['POST'],
    };
    const allowed = routes[path];
    if (!allowed) {
      this.#send(exchange, notFound(`${method} ${path}`));
      return;
    }
    if (!allowed.includes(method)) {
      this.#send(
        exchange,
        errorAnswer(
          405,
          ProviderErrorType.invalidRequest,
          ProviderErrorCode.methodNotAllowed,
          `Use ${allowed.join(' or ')} for ${path}.`,
          {
            Allow: allowed.join(', '),
          },
        ),
      );
      return;
    }
    if (method === 'GET') {
      if (path === '/_sim/metrics') this.#send(exchange, { status: 200, body: this.metrics() });
      else if (path === '/_sim/scenario') this.#send(exchange, { status: 200, body: this.#scenario });
      else this.#send(exchange, { status: 200, body: this.#listOperations(url) });
      return;
    }
    if (path === '/_sim/reset') {
      this.reset();
      this.#send(exchange, { status: 200, body: { reset: true } });
      return;
    }
    const text = await readBody(exchange.req, maxBodyBytes);
    if (text === null) {
      this.#send(
        exchange,
        errorAnswer(413, ProviderErrorType.invalidRequest, ProviderErrorCode.requestTooLarge, 'Body too large.'),
      );
      return;
    }
    let data: unknown;
    try {
      const yaml = /yaml/i.test(exchange.req.headers['content-type'] ?? '');
      data = text.trim() === '' ? {} : yaml ? YAML.parse(text) : JSON.parse(text);
    } catch {
      this.#send(
        exchange,
        errorAnswer(
          400,
          ProviderErrorType.invalidRequest,
          ProviderErrorCode.invalidJson,
          'The request body is not valid JSON (or YAML with a yaml content type).',
        ),
      );
      return;
    }
    if (path === '/_sim/outage') {
      const durationMs = (data as { durationMs?: unknown } | null)?.durationMs;
      if (typeof durationMs !== 'number' || !Number.isFinite(durationMs) || durationMs < 0) {
        this.#send(
          exchange,
          errorAnswer(
            400,
            ProviderErrorType.invalidRequest,
            ProviderErrorCode.invalidRequest,
            'Expected {"durationMs": <number ≥ 0>}.',
          ),
        );
        return;
      }
      exchange.res.once('finish', () => {
        setImmediate(() => {
          this.outage(durationMs).catch((error: unknown) => this.#onError(error));
        });
      });
      this.#send(exchange, { status: 202, body: { outage: { durationMs } } });
      return;
    }
    try {
      if (method === 'PUT') this.setScenario(data as ScenarioInput);
      else this.updateScenario(data as ScenarioPatch);
    } catch (error) {
      if (!isScenarioError(error)) throw error;
      this.#send(exchange, {
        status: 400,
        body: {
          error: {
            type: ProviderErrorType.invalidRequest,
            code: ProviderErrorCode.invalidScenario,
            message: error.message,
            issues: error.issues,
          },
        },
      });
      return;
    }
    this.#send(exchange, { status: 200, body: this.#scenario });
  }

  #listOperations(url: URL): { operations: OperationRecord[] } {
    const idempotencyKey = url.searchParams.get('idempotencyKey') ?? undefined;
    const limit = Math.min(10_000, Math.max(1, Number(url.searchParams.get('limit') ?? 1_000) || 1_000));
    const all = this.#store.list(idempotencyKey === undefined ? {} : { idempotencyKey });
    return { operations: all.slice(-limit) };
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
