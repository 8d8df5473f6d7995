/**
 * The proxy's metrics, rendered in the Prometheus text exposition format (version 0.0.4) at `/metrics`.
 *
 * | metric | type | labels | meaning |
 * | --- | --- | --- | --- |
 * | `retryq_proxy_requests_total` | counter | `upstream`, `outcome` | caller requests answered, by {@link Outcome} |
 * | `retryq_proxy_upstream_requests_total` | counter | `upstream`, `status` | real upstream requests (every retry is one); `status` is the HTTP status, or `timeout` / `unreachable` / `reset` / `other` when none arrived |
 * | `retryq_proxy_retries_total` | counter | `upstream` | retries (upstream requests after the first of a caller request) |
 * | `retryq_proxy_retry_wait_seconds_total` | counter | `upstream` | time spent waiting before retries |
 * | `retryq_proxy_gated_responses_total` | counter | `upstream` | caller requests answered locally by the gate (no upstream request) |
 * | `retryq_proxy_gate_closures_total` | counter | `upstream` | times a 429 with `Retry-After` closed (or extended) a gate |
 * | `retryq_proxy_attempts` | histogram | `upstream` | upstream requests per caller request that reached the upstream |
 *
 * Labels hold upstream names from the configuration and status codes only: never credentials, paths
 * or query strings, so cardinality stays bounded.
 *
 * @module
 */

import type { Outcome } from './rules.js';

/** Bucket bounds of the `retryq_proxy_attempts` histogram (attempts per caller request). */
export const attemptBuckets: readonly number[] = [1, 2, 3, 4, 5, 6, 8, 11];

/** The counters of one upstream; label strings are built once, at render time. */
interface UpstreamCounters {
  /** `upstream="…"`, escaped. */
  label: string;
  requests: Map<Outcome, number>;
  upstreamRequests: Map<string, number>;
  retries: number;
  waitSeconds: number;
  gated: number;
  gateClosures: number;
  attemptBuckets: number[];
  attemptSum: number;
  attemptCount: number;
}

/**
 * Counters and the attempts histogram of one proxy (or one `retryingFetch` client). Cheap to update:
 * a map lookup and an addition per event; label strings are only built by {@link ProxyMetrics.render}.
 *
 * @example
 * const metrics = new ProxyMetrics();
 * metrics.upstreamRequest('acme', 200);
 * metrics.requestAnswered('acme', 'returned', 1);
 * metrics.render(); // '# HELP retryq_proxy_requests_total …'
 */
export class ProxyMetrics {
  readonly #upstreams = new Map<string, UpstreamCounters>();

  #of(upstream: string): UpstreamCounters {
    let c = this.#upstreams.get(upstream);
    if (c === undefined) {
      c = {
        label: `upstream="${escapeLabel(upstream)}"`,
        requests: new Map(),
        upstreamRequests: new Map(),
        retries: 0,
        waitSeconds: 0,
        gated: 0,
        gateClosures: 0,
        attemptBuckets: attemptBuckets.map(() => 0),
        attemptSum: 0,
        attemptCount: 0,
      };
      this.#upstreams.set(upstream, c);
    }
    return c;
  }

  /**
   * Counts one real upstream request.
   *
   * @param upstream - the upstream's name
   * @param status - the response status, or why none arrived (`timeout`, `unreachable`, `reset`, `other`)
   */
  upstreamRequest(upstream: string, status: number | string): void {
    const map = this.#of(upstream).upstreamRequests;
    const key = typeof status === 'number' ? String(status) : status;
    map.set(key, (map.get(key) ?? 0) + 1);
  }

  /**
   * Counts one retry and the wait before it.
   *
   * @param upstream - the upstream's name
   * @param waitMs - the wait before the retry, in ms
   */
  retry(upstream: string, waitMs: number): void {
    const c = this.#of(upstream);
    c.retries += 1;
    c.waitSeconds += waitMs / 1000;
  }

  /**
   * Counts one gate closure (or extension) after a 429 with `Retry-After`.
   *
   * @param upstream - the upstream's name
   */
  gateClosed(upstream: string): void {
    this.#of(upstream).gateClosures += 1;
  }

  /**
   * Counts one answered caller request.
   *
   * @param upstream - the upstream's name
   * @param outcome - why the proxy answered what it did
   * @param attempts - upstream requests made for it (0 when the gate answered)
   */
  requestAnswered(upstream: string, outcome: Outcome, attempts: number): void {
    const c = this.#of(upstream);
    c.requests.set(outcome, (c.requests.get(outcome) ?? 0) + 1);
    if (outcome === 'gated') c.gated += 1;
    if (attempts < 1) return;
    for (let i = 0; i < attemptBuckets.length; i++) {
      if (attempts <= (attemptBuckets[i] as number)) c.attemptBuckets[i] = (c.attemptBuckets[i] as number) + 1;
    }
    c.attemptSum += attempts;
    c.attemptCount += 1;
  }

  /** The metrics in the Prometheus text format, ending with a newline. */
  render(): string {
    const all = [...this.#upstreams.values()];
    const out: string[] = [];
    const family = (name: string, type: string, help: string, lines: (c: UpstreamCounters) => string[]): void => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const c of all) out.push(...lines(c));
    };
    family('retryq_proxy_requests_total', 'counter', 'Caller requests answered, by outcome.', (c) =>
      [...c.requests].map(([outcome, n]) => `retryq_proxy_requests_total{${c.label},outcome="${outcome}"} ${n}`),
    );
    family(
      'retryq_proxy_upstream_requests_total',
      'counter',
      'Real upstream requests, retries included, by response status or transport failure.',
      (c) =>
        [...c.upstreamRequests].map(
          ([status, n]) => `retryq_proxy_upstream_requests_total{${c.label},status="${escapeLabel(status)}"} ${n}`,
        ),
    );
    const scalar = (
      name: string,
      help: string,
      value: (c: UpstreamCounters) => number,
      only: (c: UpstreamCounters) => boolean,
    ) => family(name, 'counter', help, (c) => (only(c) ? [`${name}{${c.label}} ${value(c)}`] : []));
    scalar(
      'retryq_proxy_retries_total',
      'Retries: upstream requests after the first.',
      (c) => c.retries,
      (c) => c.retries > 0,
    );
    scalar(
      'retryq_proxy_retry_wait_seconds_total',
      'Seconds waited before retries.',
      (c) => Math.round(c.waitSeconds * 1000) / 1000,
      (c) => c.retries > 0,
    );
    scalar(
      'retryq_proxy_gated_responses_total',
      'Caller requests answered locally with 429 by the gate, without an upstream request.',
      (c) => c.gated,
      (c) => c.gated > 0,
    );
    scalar(
      'retryq_proxy_gate_closures_total',
      'Gate closures after a 429 with Retry-After.',
      (c) => c.gateClosures,
      (c) => c.gateClosures > 0,
    );
    family(
      'retryq_proxy_attempts',
      'histogram',
      'Upstream requests per caller request that reached the upstream.',
      (c) =>
        c.attemptCount === 0
          ? []
          : [
              ...attemptBuckets.map(
                (le, i) => `retryq_proxy_attempts_bucket{${c.label},le="${le}"} ${c.attemptBuckets[i]}`,
              ),
              `retryq_proxy_attempts_bucket{${c.label},le="+Inf"} ${c.attemptCount}`,
              `retryq_proxy_attempts_sum{${c.label}} ${c.attemptSum}`,
              `retryq_proxy_attempts_count{${c.label}} ${c.attemptCount}`,
            ],
    );
    return out.join('\n') + '\n';
  }
}

/** A label value escaped as the text format requires (backslash, newline, double quote). */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}
