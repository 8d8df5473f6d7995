/**
 * The provider's memory of operations: every executed (or recorded-as-failed) operation, the
 * idempotency index (key → the operation saved under it) and the side-effect count per
 * idempotency key, which is what makes duplicate side effects detectable. Memory is bounded:
 * beyond `maxOperations` the oldest settled operations are forgotten.
 */

/** Where an operation is. */
export type OperationStatus = 'pending' | 'succeeded' | 'failed';

/** The error saved for a failed operation. */
export interface OperationError {
  status: number;
  code: string;
  message: string;
}

/** One operation as the provider recorded it. */
export interface OperationRecord {
  /** `op_…`. */
  operationId: string;
  /** The request's `Idempotency-Key`, or `null`. */
  idempotencyKey: string | null;
  /** The `id` of the API key that made it. */
  apiKeyId: string;
  method: string;
  path: string;
  /** The parsed JSON request body (`null` when empty). */
  request: unknown;
  status: OperationStatus;
  /** Whether it was executed (a side effect happened). */
  sideEffect: boolean;
  /** A side effect beyond the first one for the same idempotency key. */
  duplicate: boolean;
  /** HTTP status of the answer that was (or would have been) sent. */
  httpStatus: number | null;
  /** ISO time on the server's (skewed) clock. */
  createdAt: string;
  completedAt: string | null;
  result?: Record<string, unknown>;
  error?: OperationError;
}

/** An operation plus what the store needs for replays. */
export interface StoredOperation {
  record: OperationRecord;
  /** Canonical JSON of the request body, for replay comparison. */
  canonicalRequest: string;
  /** The full answer, replayed verbatim for the same key and body. */
  response: { status: number; body: unknown } | undefined;
}

/** What a new operation starts from. */
export interface NewOperation {
  operationId: string;
  idempotencyKey: string | undefined;
  apiKeyId: string;
  method: string;
  path: string;
  request: unknown;
  canonicalRequest: string;
  createdAt: string;
}

/** The provider's operation memory. */
export class OperationStore {
  readonly #operations = new Map<string, StoredOperation>();
  readonly #byIdempotencyKey = new Map<string, StoredOperation>();
  readonly #sideEffectsByKey = new Map<string, number>();
  #evicted = 0;
  #pending = 0;

  /** Operations kept; the oldest settled ones are forgotten beyond it. */
  constructor(public maxOperations: number) {}

  /** The operation saved under an idempotency key (the first one, in careless mode). */
  find(idempotencyKey: string): StoredOperation | undefined {
    return this.#byIdempotencyKey.get(idempotencyKey);
  }

  /** Starts a pending operation and saves it under its key if the key is still free. */
  begin(op: NewOperation): StoredOperation {
    const stored: StoredOperation = {
      record: {
        operationId: op.operationId,
        idempotencyKey: op.idempotencyKey ?? null,
        apiKeyId: op.apiKeyId,
        method: op.method,
        path: op.path,
        request: op.request,
        status: 'pending',
        sideEffect: false,
        duplicate: false,
        httpStatus: null,
        createdAt: op.createdAt,
        completedAt: null,
      },
      canonicalRequest: op.canonicalRequest,
      response: undefined,
    };
    this.#pending++;
    this.#insert(stored);
    return stored;
  }

  /** Marks a pending operation executed; returns whether its side effect is a duplicate. */
  commit(
    stored: StoredOperation,
    outcome: { result: Record<string, unknown>; response: { status: number; body: unknown }; completedAt: string },
  ): { duplicate: boolean } {
    const { record } = stored;
    if (record.status === 'pending') this.#pending--;
    record.status = 'succeeded';
    record.sideEffect = true;
    record.result = outcome.result;
    record.httpStatus = outcome.response.status;
    record.completedAt = outcome.completedAt;
    stored.response = outcome.response;
    let duplicate = false;
    const key = record.idempotencyKey;
    if (key !== null) {
      const before = this.#sideEffectsByKey.get(key) ?? 0;
      duplicate = before >= 1;
      this.#sideEffectsByKey.delete(key);
      this.#sideEffectsByKey.set(key, before + 1);
      this.#trimCounts();
    }
    record.duplicate = duplicate;
    return { duplicate };
  }

  /** Forgets a pending operation that never executed (the simulator closed meanwhile). */
  abandon(stored: StoredOperation): void {
    if (stored.record.status !== 'pending') return;
    this.#pending--;
    this.#remove(stored);
  }

  /** Saves an error as the settled outcome of an idempotency key (status `failed`, no side effect). */
  recordFailure(op: NewOperation, error: OperationError, response: { status: number; body: unknown }): StoredOperation {
    const stored = this.begin(op);
    this.#pending--;
    stored.record.status = 'failed';
    stored.record.error = error;
    stored.record.httpStatus = response.status;
    stored.record.completedAt = op.createdAt;
    stored.response = response;
    return stored;
  }

  /** Side effects executed for an idempotency key (more than 1 means duplicates). */
  sideEffects(idempotencyKey: string): number {
    return this.#sideEffectsByKey.get(idempotencyKey) ?? 0;
  }

  /** Copies of the recorded operations, oldest first. */
  list(filter: { idempotencyKey?: string } = {}): OperationRecord[] {
    const out: OperationRecord[] = [];
    for (const { record } of this.#operations.values()) {
      if (filter.idempotencyKey !== undefined && record.idempotencyKey !== filter.idempotencyKey) continue;
      out.push(structuredClone(record));
    }
    return out;
  }

  /** Sizes for metrics. */
  stats(): { stored: number; pending: number; evicted: number } {
    return { stored: this.#operations.size, pending: this.#pending, evicted: this.#evicted };
  }

  #insert(stored: StoredOperation): void {
    this.#operations.set(stored.record.operationId, stored);
    const key = stored.record.idempotencyKey;
    if (key !== null && !this.#byIdempotencyKey.has(key)) this.#byIdempotencyKey.set(key, stored);
    if (this.#operations.size > this.maxOperations) {
      for (const candidate of this.#operations.values()) {
        if (candidate.record.status === 'pending') continue;
        this.#remove(candidate);
        this.#evicted++;
        break;
      }
    }
  }

  #remove(stored: StoredOperation): void {
    this.#operations.delete(stored.record.operationId);
    const key = stored.record.idempotencyKey;
    if (key !== null && this.#byIdempotencyKey.get(key) === stored) this.#byIdempotencyKey.delete(key);
  }

  #trimCounts(): void {
    while (this.#sideEffectsByKey.size > this.maxOperations) {
      const oldest = this.#sideEffectsByKey.keys().next();
      if (oldest.done) break;
      this.#sideEffectsByKey.delete(oldest.value);
    }
  }
}
