/**
 * Counters behind `GET /_sim/metrics`: totals and per API key (by its `id`). Request rates come
 * from one-second buckets on the simulator's clock, so an injected clock drives them too.
 */

/** Webhook delivery counters. */
export interface WebhookCounters {
  /** HTTP attempts made (first sends, retries and deliberate redeliveries). */
  attempts: number;
  /** Attempts the receiver answered 2xx. */
  delivered: number;
  /** Attempts that failed (non-2xx, network error or timeout). */
  failed: number;
  /** Deliberate redeliveries started (`webhookRedeliveries` per event). */
  redeliveries: number;
  /** Deliveries that gave up after `webhookMaxAttempts` without a 2xx. */
  exhausted: number;
  /** Events never sent because 10 000 deliveries were already in progress. */
  dropped: number;
  /** Deliberately forged or stale deliveries sent (`webhookForged`, `webhookStale`): a receiver must reject them. */
  faultsSent: number;
  /** Forged or stale deliveries the receiver answered 2xx (should stay 0). */
  faultsAccepted: number;
}

/** Counters for one API key or for everything. */
export interface RequestCounters {
  /** `/v1` requests received. */
  requests: number;
  /** Requests in the last 10 s divided by 10. */
  requestsPerSecond: number;
  /** Requests in the last 60 s. */
  requestsLastMinute: number;
  /** Operation requests (POST/PUT/PATCH/DELETE). */
  writes: number;
  /** Operation status lookups (`GET /v1/operations/{key}`). */
  inspections: number;
  /** 429 answers (write limit, inspection budget and scripted 429s). */
  rateLimited: number;
  /** Other non-2xx answers by status. */
  errorsByStatus: Record<string, number>;
  /** Answers replayed from an idempotency key. */
  replays: number;
  /** Operations executed. */
  sideEffects: number;
  /** Side effects beyond the first for the same idempotency key (must stay 0 for a correct client of an honest provider). */
  duplicates: number;
  /** Answers deliberately never sent: `held` sockets and `reset` sockets. */
  droppedResponses: { held: number; reset: number };
  webhookDeliveries: WebhookCounters;
}

const rateBuckets = 60;

class Counters {
  requests = 0;
  writes = 0;
  inspections = 0;
  rateLimited = 0;
  errorsByStatus = new Map<number, number>();
  replays = 0;
  sideEffects = 0;
  duplicates = 0;
  held = 0;
  reset = 0;
  webhooks: WebhookCounters = {
    attempts: 0,
    delivered: 0,
    failed: 0,
    redeliveries: 0,
    exhausted: 0,
    dropped: 0,
    faultsSent: 0,
    faultsAccepted: 0,
  };
  /** Request counts per whole second, in a ring indexed by second mod 60. */
  readonly bucketSecond = new Array<number>(rateBuckets).fill(-1);
  readonly bucketCount = new Array<number>(rateBuckets).fill(0);

  countRequest(nowMs: number): void {
    this.requests++;
    const second = Math.floor(nowMs / 1_000);
    const slot = ((second % rateBuckets) + rateBuckets) % rateBuckets;
    if (this.bucketSecond[slot] !== second) {
      this.bucketSecond[slot] = second;
      this.bucketCount[slot] = 0;
    }
    this.bucketCount[slot] = (this.bucketCount[slot] ?? 0) + 1;
  }

  requestsSince(nowMs: number, seconds: number): number {
    const current = Math.floor(nowMs / 1_000);
    let sum = 0;
    for (let slot = 0; slot < rateBuckets; slot++) {
      const second = this.bucketSecond[slot] ?? -1;
      if (second > current - seconds && second <= current) sum += this.bucketCount[slot] ?? 0;
    }
    return sum;
  }

  snapshot(nowMs: number): RequestCounters {
    const errorsByStatus: Record<string, number> = {};
    for (const [status, n] of [...this.errorsByStatus].sort((a, b) => a[0] - b[0])) errorsByStatus[String(status)] = n;
    return {
      requests: this.requests,
      requestsPerSecond: this.requestsSince(nowMs, 10) / 10,
      requestsLastMinute: this.requestsSince(nowMs, 60),
      writes: this.writes,
      inspections: this.inspections,
      rateLimited: this.rateLimited,
      errorsByStatus,
      replays: this.replays,
      sideEffects: this.sideEffects,
      duplicates: this.duplicates,
      droppedResponses: { held: this.held, reset: this.reset },
      webhookDeliveries: { ...this.webhooks },
    };
  }
}

/** Which counter an event bumps. */
export type CountedEvent = 'write' | 'inspection' | 'replay' | 'held' | 'reset';

/** Records events in the totals and, when the key is known, for that key. */
export class MetricsRecorder {
  readonly #totals = new Counters();
  readonly #byKey = new Map<string, Counters>();
  #unauthenticated = 0;

  #each(keyId: string | undefined, apply: (c: Counters) => void): void {
    apply(this.#totals);
    if (keyId === undefined) return;
    let counters = this.#byKey.get(keyId);
    if (!counters) {
      counters = new Counters();
      this.#byKey.set(keyId, counters);
    }
    apply(counters);
  }

  /** A `/v1` request arrived (`keyId` undefined when it failed authentication). */
  request(keyId: string | undefined, nowMs: number): void {
    this.#each(keyId, (c) => c.countRequest(nowMs));
  }

  /** An answer with this status was sent. */
  answer(keyId: string | undefined, status: number): void {
    if (status < 400) return;
    if (status === 401) this.#unauthenticated++;
    this.#each(keyId, (c) => {
      if (status === 429) c.rateLimited++;
      else c.errorsByStatus.set(status, (c.errorsByStatus.get(status) ?? 0) + 1);
    });
  }

  /** Bumps one event counter. */
  event(keyId: string | undefined, event: CountedEvent): void {
    this.#each(keyId, (c) => {
      if (event === 'write') c.writes++;
      else if (event === 'inspection') c.inspections++;
      else if (event === 'replay') c.replays++;
      else if (event === 'held') c.held++;
      else c.reset++;
    });
  }

  /** An operation executed. */
  sideEffect(keyId: string, duplicate: boolean): void {
    this.#each(keyId, (c) => {
      c.sideEffects++;
      if (duplicate) c.duplicates++;
    });
  }

  /** A webhook event for `keyId`'s operation. */
  webhook(keyId: string, event: keyof WebhookCounters): void {
    this.#each(keyId, (c) => {
      c.webhooks[event]++;
    });
  }

  /** Totals, per-key counters and the number of 401 answers. */
  snapshot(nowMs: number): { totals: RequestCounters; keys: Map<string, RequestCounters>; unauthenticated: number } {
    const keys = new Map<string, RequestCounters>();
    for (const [id, counters] of this.#byKey) keys.set(id, counters.snapshot(nowMs));
    return { totals: this.#totals.snapshot(nowMs), keys, unauthenticated: this.#unauthenticated };
  }

  /** Zero counters for a key that has not been seen yet. */
  static empty(): RequestCounters {
    return new Counters().snapshot(0);
  }
}
