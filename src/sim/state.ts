/**
 * What the simulated provider knows at a moment: the scenario and its keys, the rule positions, the
 * operation store, the admission windows and spending, the metrics, the webhook sender, and the two
 * clocks (the simulator's, and the server's, skewed by the scenario). Shared by the API, the admin
 * endpoints and the server around them.
 */
import type { IncomingMessage } from 'node:http';
import { SlidingWindowLimiter, SpendingLedger } from './admission.js';
import type { Answer, Exchange } from './exchange.js';
import { hold, resetSocket, send } from './exchange.js';
import { MetricsRecorder } from './metrics.js';
import { WriteLimits } from './write-limits.js';
import type { RequestCounters } from './metrics.js';
import { OperationStore } from './operation-store.js';
import { RuleBook } from './rules.js';
import { parseScenario } from './scenario.js';
import type { ApiKeyConfig, Scenario, ScenarioInput } from './scenario.js';
import { sleepUnlessAborted } from './sleep.js';
import { WebhookSender } from './webhooks.js';

/** A configured API key with its id filled in. */
export type ResolvedKey = ApiKeyConfig & { id: string };

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

/** One answered request, as the simulator's `onAnswer` option sees it. */
export interface AnsweredRequest {
  /** Simulator clock (ms) when the answer was sent. */
  atMs: number;
  method: string;
  path: string;
  /** The authenticated key's id. */
  keyId: string | undefined;
  /** The request's `Idempotency-Key` header, if any. */
  idempotencyKey: string | undefined;
  status: number;
  /** The `Retry-After` header sent, if any. */
  retryAfter: string | undefined;
}

/** The provider's state; one per simulator. */
export class ProviderState {
  scenario: Scenario;
  keys = new Map<string, ResolvedKey>();
  rules: RuleBook;
  store: OperationStore;
  metrics = new MetricsRecorder();
  /** When scenario time (bursts, outages) started, on the simulator clock. */
  epochMs: number;
  /** Status-endpoint reads per key (a sliding window). */
  readonly limiter = new SlidingWindowLimiter(60_000);
  /** Writes per key and per route bucket, by the scenario's algorithm. */
  readonly writeLimits = new WriteLimits();
  readonly ledger = new SpendingLedger();
  readonly webhooks = new WebhookSender();
  /** Aborts when the simulator closes: delays end at once. */
  readonly lifetime = new AbortController();

  constructor(
    input: ScenarioInput,
    /** The simulator's clock, epoch ms. */
    readonly now: () => number,
    /** Called for every answer sent (see {@link AnsweredRequest}). */
    readonly onAnswer?: (answered: AnsweredRequest) => void,
  ) {
    this.scenario = parseScenario(input);
    this.rules = new RuleBook(this.scenario.rules);
    this.store = new OperationStore(this.scenario.maxOperations);
    this.epochMs = now();
    this.#indexKeys();
  }

  /** The server's clock: the simulator clock plus the scenario's skew. */
  serverNow(): number {
    return this.now() + this.scenario.clockOffsetMs;
  }

  /** Resolves `true` after `ms`, or `false` as soon as the simulator closes. */
  sleep(ms: number): Promise<boolean> {
    return sleepUnlessAborted(ms, this.lifetime.signal);
  }

  /** Takes a validated scenario; restarts rule sequences and/or scenario time as asked. */
  apply(scenario: Scenario, restart: { rules: boolean; time: boolean }): void {
    this.scenario = scenario;
    this.#indexKeys();
    this.store.maxOperations = scenario.maxOperations;
    if (restart.rules) this.rules = new RuleBook(scenario.rules);
    if (restart.time) this.epochMs = this.now();
  }

  /** Forgets operations, metrics, windows, spending and rule positions; keeps the scenario. */
  reset(): void {
    this.store = new OperationStore(this.scenario.maxOperations);
    this.metrics = new MetricsRecorder();
    this.limiter.clear();
    this.writeLimits.clear();
    this.ledger.clear();
    this.rules = new RuleBook(this.scenario.rules);
    this.epochMs = this.now();
  }

  #indexKeys(): void {
    this.keys = new Map(this.scenario.keys.map((k) => [k.key, { ...k, id: k.id ?? k.key }]));
  }

  /** The key named by `Authorization: Bearer <key>`, if it is configured. */
  authenticate(req: IncomingMessage): ResolvedKey | undefined {
    const header = req.headers.authorization;
    if (typeof header !== 'string') return undefined;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return match?.[1] === undefined ? undefined : this.keys.get(match[1]);
  }

  /** The burst window scenario time is in, if any. */
  activeBurst(): Scenario['bursts'][number] | undefined {
    const elapsed = this.now() - this.epochMs;
    return this.scenario.bursts.find((b) => elapsed >= b.afterMs && elapsed < b.afterMs + b.durationMs);
  }

  send(exchange: Exchange, answer: Answer): void {
    if (!send(exchange, answer, this.serverNow(), this.metrics) || !this.onAnswer) return;
    const key = exchange.req.headers['idempotency-key'];
    this.onAnswer({
      atMs: this.now(),
      method: exchange.method,
      path: exchange.path,
      keyId: exchange.keyId,
      idempotencyKey: typeof key === 'string' ? key : undefined,
      status: answer.status,
      retryAfter: Object.entries(answer.headers ?? {}).find(([name]) => name.toLowerCase() === 'retry-after')?.[1],
    });
  }

  hold(exchange: Exchange): void {
    hold(exchange, this.metrics);
  }

  resetSocket(exchange: Exchange): void {
    resetSocket(exchange, this.metrics);
  }

  /** The metrics snapshot, per key with its configured limits. */
  snapshot(listening: boolean): SimMetrics {
    const nowMs = this.now();
    const snapshot = this.metrics.snapshot(nowMs);
    const keys: Record<string, KeyMetrics> = {};
    const configured = new Map([...this.keys.values()].map((k) => [k.id, k]));
    const ids = new Set([...configured.keys(), ...snapshot.keys.keys()]);
    for (const id of ids) {
      const key = configured.get(id);
      keys[id] = {
        ...(snapshot.keys.get(id) ?? MetricsRecorder.empty()),
        configured: key !== undefined,
        workspace: key?.workspace ?? null,
        rateLimitPerMinute: key ? (key.rateLimitPerMinute ?? this.scenario.rateLimitPerMinute) : null,
        inspectPerMinute: key ? (key.inspectPerMinute ?? this.scenario.inspectPerMinute) : null,
        spendLimit: key?.spendLimit ?? null,
        billableOperations: this.ledger.usedByKey(id),
      };
    }
    return {
      at: new Date(nowMs).toISOString(),
      listening,
      totals: snapshot.totals,
      unauthenticated: snapshot.unauthenticated,
      keys,
      operations: this.store.stats(),
      webhooks: { pending: this.webhooks.pending },
    };
  }
}
