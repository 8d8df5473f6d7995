/**
 * The write limits of the simulated provider: three algorithms a real provider uses (a sliding-window
 * log, a fixed window, and a token bucket with continuous refill, GCRA-style), per key and per route
 * bucket, and the rate-limit headers a provider sends about them (the IETF fields, their earlier draft
 * form, or `X-RateLimit-*` with the reset in seconds or as an epoch). All time comes from the caller.
 */
import type { RuleMethod } from './scenario.js';

/** How a limit counts. */
export type LimitAlgorithm = 'sliding-window' | 'fixed-window' | 'token-bucket';
/** Which rate-limit headers the provider sends, if any. */
export type LimitHeaders = 'none' | 'ietf' | 'ietf-draft' | 'x-ratelimit-seconds' | 'x-ratelimit-epoch';

/** The window every write limit counts over (`perMinute`). */
export const limitWindowMs = 60_000;

/** One limit: `perMinute` writes per 60 s, counted by `algorithm`; `burst` is a token bucket's capacity. */
export interface LimitSpec {
  algorithm: LimitAlgorithm;
  perMinute: number;
  /** Token bucket only: how many writes may come at once. @default perMinute */
  burst?: number | undefined;
}

/**
 * What a limit says about one write. `remaining`: writes left after this one (0 when refused);
 * `resetMs`: ms until more quota comes — when none is left, until the next write would be admitted;
 * otherwise until the quota is whole again (the oldest write leaves a sliding window, a fixed window
 * ends, a token bucket is full); `waitMs` (refused only): until this write would be admitted.
 */
export type LimitVerdict =
  | { admitted: true; remaining: number; resetMs: number }
  | { admitted: false; remaining: 0; resetMs: number; waitMs: number };

interface SlidingState {
  kind: 'sliding-window';
  log: number[];
  head: number;
}
interface FixedState {
  kind: 'fixed-window';
  windowStartMs: number;
  count: number;
}
interface BucketState {
  kind: 'token-bucket';
  /** GCRA's theoretical arrival time of the next write. */
  tatMs: number;
}
type State = SlidingState | FixedState | BucketState;

/** Limits by name (`write\0<key id>\0<bucket>`), each with the state of its algorithm. */
export class WriteLimits {
  readonly #states = new Map<string, State>();

  /** What admitting one write now would give, without recording it. */
  check(name: string, spec: LimitSpec, nowMs: number): LimitVerdict {
    return this.#run(name, spec, nowMs, false);
  }

  /** Admits (records) one write; call only after {@link check} admitted it at the same `nowMs`. */
  commit(name: string, spec: LimitSpec, nowMs: number): LimitVerdict {
    return this.#run(name, spec, nowMs, true);
  }

  /** Forgets every limit's state. */
  clear(): void {
    this.#states.clear();
  }

  #state(name: string, algorithm: LimitAlgorithm): State {
    const key = `${algorithm}\u0000${name}`;
    let state = this.#states.get(key);
    if (!state) {
      state =
        algorithm === 'sliding-window'
          ? { kind: algorithm, log: [], head: 0 }
          : algorithm === 'fixed-window'
            ? { kind: algorithm, windowStartMs: -Infinity, count: 0 }
            : { kind: algorithm, tatMs: -Infinity };
      this.#states.set(key, state);
    }
    return state;
  }

  #run(name: string, spec: LimitSpec, nowMs: number, record: boolean): LimitVerdict {
    const state = this.#state(name, spec.algorithm);
    const limit = spec.perMinute;
    if (state.kind === 'sliding-window') {
      while (state.head < state.log.length && (state.log[state.head] ?? 0) + limitWindowMs <= nowMs) state.head++;
      if (state.head > 1_024 && state.head * 2 > state.log.length) {
        state.log = state.log.slice(state.head);
        state.head = 0;
      }
      const size = state.log.length - state.head;
      if (size >= limit) {
        const waitMs = Math.max(1, (state.log[state.head + size - limit] ?? nowMs) + limitWindowMs - nowMs);
        return { admitted: false, remaining: 0, resetMs: waitMs, waitMs };
      }
      if (record) state.log.push(nowMs);
      const used = size + 1;
      const oldest = state.log[state.head] ?? nowMs;
      return { admitted: true, remaining: limit - used, resetMs: Math.max(1, oldest + limitWindowMs - nowMs) };
    }
    if (state.kind === 'fixed-window') {
      const windowStartMs = Math.floor(nowMs / limitWindowMs) * limitWindowMs;
      const count = state.windowStartMs === windowStartMs ? state.count : 0;
      const resetMs = windowStartMs + limitWindowMs - nowMs;
      if (count >= limit) return { admitted: false, remaining: 0, resetMs, waitMs: resetMs };
      if (record) {
        state.windowStartMs = windowStartMs;
        state.count = count + 1;
      }
      return { admitted: true, remaining: limit - count - 1, resetMs };
    }
    // GCRA: one write every `interval`, up to `burst` at once.
    const interval = limitWindowMs / limit;
    const burst = spec.burst ?? limit;
    const tolerance = (burst - 1) * interval;
    const tat = Math.max(state.tatMs, nowMs);
    if (tat - nowMs > tolerance) {
      const waitMs = Math.max(1, Math.ceil(tat - tolerance - nowMs));
      return { admitted: false, remaining: 0, resetMs: waitMs, waitMs };
    }
    const next = tat + interval;
    if (record) state.tatMs = next;
    const remaining = Math.min(burst - 1, Math.max(0, Math.floor((nowMs + tolerance - next) / interval + 1e-9) + 1));
    const resetMs = remaining === 0 ? next - tolerance - nowMs : next - nowMs;
    return { admitted: true, remaining, resetMs: Math.max(1, Math.ceil(resetMs)) };
  }
}

/** A route bucket: writes whose path starts with `pathPrefix` (and, if given, of `method`) share `perMinute`. */
export interface RouteBucket {
  name: string;
  pathPrefix: string;
  method?: RuleMethod | RuleMethod[] | undefined;
  perMinute: number;
  burst?: number | undefined;
}

/** The first bucket a write falls in, if any. */
export function bucketOf(buckets: readonly RouteBucket[], method: string, path: string): RouteBucket | undefined {
  return buckets.find((b) => {
    if (!path.startsWith(b.pathPrefix)) return false;
    if (b.method === undefined) return true;
    return Array.isArray(b.method) ? b.method.includes(method as RuleMethod) : b.method === method;
  });
}

/** One limit as a header reports it. */
export interface ReportedLimit {
  /** The policy's name (IETF) — the bucket's, or `default` for the key's own limit. */
  name: string;
  perMinute: number;
  remaining: number;
  resetMs: number;
}

const seconds = (ms: number): number => Math.max(0, Math.ceil(ms / 1_000));

/**
 * The rate-limit headers for one answer. `limits[0]` is the limit the answer is about (the bucket's
 * when the write fell in one); the IETF forms list every limit, `X-RateLimit-*` only the first.
 * Resets are whole seconds rounded up, so they never say "sooner" than the limit allows; an epoch is
 * on the server's (skewed) clock, like the `Date` header.
 */
export function limitHeaders(
  format: LimitHeaders,
  limits: readonly ReportedLimit[],
  serverNowMs: number,
): Record<string, string> {
  const first = limits[0];
  if (format === 'none' || first === undefined) return {};
  const windowS = limitWindowMs / 1_000;
  switch (format) {
    case 'ietf':
      return {
        'RateLimit-Policy': limits.map((l) => `"${l.name}";q=${l.perMinute};w=${windowS}`).join(', '),
        RateLimit: limits.map((l) => `"${l.name}";r=${l.remaining};t=${seconds(l.resetMs)}`).join(', '),
      };
    case 'ietf-draft': {
      // One set of numbers: the binding limit (the fewest left; on a tie, the later reset).
      const b = limits.reduce((a, l) =>
        l.remaining < a.remaining || (l.remaining === a.remaining && l.resetMs > a.resetMs) ? l : a,
      );
      return {
        'RateLimit-Limit': String(b.perMinute),
        'RateLimit-Remaining': String(b.remaining),
        'RateLimit-Reset': String(seconds(b.resetMs)),
        'RateLimit-Policy': limits.map((l) => `${l.perMinute};w=${windowS}`).join(', '),
      };
    }
    case 'x-ratelimit-seconds':
    case 'x-ratelimit-epoch':
      return {
        'X-RateLimit-Limit': String(first.perMinute),
        'X-RateLimit-Remaining': String(first.remaining),
        'X-RateLimit-Reset':
          format === 'x-ratelimit-seconds'
            ? String(seconds(first.resetMs))
            : String(Math.ceil((serverNowMs + first.resetMs) / 1_000)),
      };
  }
}
