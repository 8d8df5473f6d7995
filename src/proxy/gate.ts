/**
 * The gate: after an upstream answered 429 with a `Retry-After`, later requests for the same upstream
 * and credential are answered locally (429 with the remaining `Retry-After`) until the permitted time,
 * instead of spending the provider's limit on requests bound to fail.
 *
 * @module
 */

import { createHash } from 'node:crypto';
import { secretHeaderNames } from '../intent.js';

/** Options of {@link Gate}. */
export interface GateOptions {
  /**
   * The longest the gate stays closed after one 429, in ms, whatever the `Retry-After` says: a safety
   * bound against an absurd value (a `Retry-After` of a year).
   * @default 3_600_000 (1 hour)
   */
  maxClosedMs?: number | undefined;
  /**
   * The most keys (upstream × credential) remembered at once; past it, expired keys are swept and then
   * the oldest closures dropped, so callers sending ever new credentials cannot grow memory without bound.
   * @default 10_000
   */
  maxKeys?: number | undefined;
}

/** Default of {@link GateOptions.maxClosedMs}: 1 hour, in ms. */
export const defaultGateMaxClosedMs = 3_600_000;

/**
 * Closed gates by key (see {@link gateKey}), each with the time it opens. In memory, per process.
 *
 * @example
 * const gate = new Gate();
 * gate.close('acme', Date.now() + 30_000, Date.now());
 * gate.opensAt('acme', Date.now()); // ≈ now + 30 s
 */
export class Gate {
  readonly #opensAt = new Map<string, number>();
  readonly #maxClosedMs: number;
  readonly #maxKeys: number;

  constructor(options: GateOptions = {}) {
    this.#maxClosedMs = options.maxClosedMs ?? defaultGateMaxClosedMs;
    this.#maxKeys = options.maxKeys ?? 10_000;
    if (!Number.isFinite(this.#maxClosedMs) || this.#maxClosedMs < 0) {
      throw new RangeError(`Gate: maxClosedMs must be a finite number of ms ≥ 0 (got ${String(options.maxClosedMs)})`);
    }
    if (!Number.isSafeInteger(this.#maxKeys) || this.#maxKeys < 1) {
      throw new RangeError(`Gate: maxKeys must be an integer ≥ 1 (got ${String(options.maxKeys)})`);
    }
  }

  /**
   * When the gate for `key` opens, in ms since the epoch, or `undefined` when it is open at `nowMs`.
   *
   * @param key - see {@link gateKey}
   * @param nowMs - the current time, in ms since the epoch
   */
  opensAt(key: string, nowMs: number): number | undefined {
    const at = this.#opensAt.get(key);
    if (at === undefined) return undefined;
    if (at <= nowMs) {
      this.#opensAt.delete(key);
      return undefined;
    }
    return at;
  }

  /**
   * Closes the gate for `key` until `untilMs` (bounded by `nowMs + maxClosedMs`). Never shortens a
   * closure already in place; a time at or before `nowMs` changes nothing.
   *
   * @param key - see {@link gateKey}
   * @param untilMs - the server-permitted time, in ms since the epoch
   * @param nowMs - the current time, in ms since the epoch
   * @returns whether the gate is now closed longer than before
   */
  close(key: string, untilMs: number, nowMs: number): boolean {
    const until = Math.min(untilMs, nowMs + this.#maxClosedMs);
    if (!(until > nowMs)) return false;
    const current = this.#opensAt.get(key);
    if (current !== undefined && current >= until) return false;
    this.#opensAt.delete(key); // re-insert, so Map order stays "least recently closed first"
    this.#opensAt.set(key, until);
    if (this.#opensAt.size > this.#maxKeys) this.#evict(nowMs);
    return true;
  }

  /** How many keys are closed or remembered (expired keys are dropped lazily). */
  get size(): number {
    return this.#opensAt.size;
  }

  #evict(nowMs: number): void {
    for (const [key, at] of this.#opensAt) if (at <= nowMs) this.#opensAt.delete(key);
    for (const key of this.#opensAt.keys()) {
      if (this.#opensAt.size <= this.#maxKeys) break;
      this.#opensAt.delete(key);
    }
  }
}

/**
 * The gate key of a request: the upstream plus a fingerprint of the request's credential headers
 * (`Authorization`, `X-Api-Key`, … — the names retryq treats as secrets). The fingerprint is a
 * truncated SHA-256 kept in memory only; it is never logged or exported, not even as a metric label.
 *
 * @param upstream - the upstream's name (proxy) or origin (`retryingFetch`)
 * @param rawHeaders - the request headers as a flat `[name, value, name, value, …]` list
 * @returns `upstream` when the request carries no credential, else `upstream` + `#` + fingerprint
 * @example
 * gateKey('acme', ['Authorization', 'Bearer k1']); // 'acme#3b0c…' (16 hex digits)
 * gateKey('acme', ['Accept', 'application/json']); // 'acme'
 */
export function gateKey(upstream: string, rawHeaders: readonly string[]): string {
  let hash: ReturnType<typeof createHash> | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = (rawHeaders[i] as string).toLowerCase();
    if (!secretHeaderNames.has(name)) continue;
    hash ??= createHash('sha256');
    hash
      .update(name)
      .update('\0')
      .update(rawHeaders[i + 1] as string, 'latin1')
      .update('\0');
  }
  return hash === undefined ? upstream : `${upstream}#${hash.digest('hex').slice(0, 16)}`;
}
