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

interface AttemptHistogram {
  buckets: number[];
  sum: number;
  count: number;
}

/**
 * Counters and the attempts histogram of one proxy (or one `retryingFetch` client). Cheap to update:
 * a map lookup and an addition per event.
 *
 * @example
 * const metrics = new ProxyMetrics();
 * metrics.upstreamRequest('acme', 200);
 * metrics.requestAnswered('acme', 'returned', 1);
 * metrics.render(); // '# HELP retryq_proxy_requests_total …'
 */
export class ProxyMetrics {
  readonly #requests = new Map<string, number>();
  readonly #upstreamRequests = new Map<string, number>();
  readonly #retries = new Map<string, number>();
  readonly #waitSeconds = new Map<string, number>();
  readonly #gated = new Map<string, number>();
  readonly #gateClosures = new Map<string, number>();
  readonly #attempts = new Map<string, AttemptHistogram>();

  /**
   * Counts one real upstream request.
   *
   * @param upstream - the upstream's name
   * @param status - the response status, or why none arrived (`timeout`, `unreachable`, `reset`, `other`)
   */
  upstreamRequest(upstream: string, status: number | string): void {
    increment(this.#upstreamRequests, labels({ upstream, status: String(status) }));
  }

  /**
   * Counts one retry and the wait before it.
   *
   * @param upstream - the upstream's name
   * @param waitMs - the wait before the retry, in ms
   */
  retry(upstream: string, waitMs: number): void {
    const key = labels({ upstream });
    increment(this.#retries, key);
    increment(this.#waitSeconds, key, waitMs / 1000);
  }

  /**
   * Counts one gate closure (or extension) after a 429 with `Retry-After`.
   *
   * @param upstream - the upstream's name
   */
  gateClosed(upstream: string): void {
    increment(this.#gateClosures, labels({ upstream }));
  }

  /**
   * Counts one answered caller request.
   *
   * @param upstream - the upstream's name
   * @param outcome - why the proxy answered what it did
   * @param attempts - upstream requests made for it (0 when the gate answered)
   */
  requestAnswered(upstream: string, outcome: Outcome, attempts: number): void {
    const key = labels({ upstream });
    increment(this.#requests, labels({ upstream, outcome }));
    if (outcome === 'gated') increment(this.#gated, key);
    if (attempts < 1) return;
    let histogram = this.#attempts.get(key);
    if (histogram === undefined) {
      histogram = { buckets: attemptBuckets.map(() => 0), sum: 0, count: 0 };
      this.#attempts.set(key, histogram);
    }
    for (let i = 0; i < attemptBuckets.length; i++) {
      if (attempts <= (attemptBuckets[i] as number)) histogram.buckets[i] = (histogram.buckets[i] as number) + 1;
    }
    histogram.sum += attempts;
    histogram.count += 1;
  }

  /** The metrics in the Prometheus text format, ending with a newline. */
  render(): string {
    const out: string[] = [];
    counter(out, 'retryq_proxy_requests_total', 'Caller requests answered, by outcome.', this.#requests);
    counter(
      out,
      'retryq_proxy_upstream_requests_total',
      'Real upstream requests, retries included, by response status or transport failure.',
      this.#upstreamRequests,
    );
    counter(out, 'retryq_proxy_retries_total', 'Retries: upstream requests after the first.', this.#retries);
    counter(out, 'retryq_proxy_retry_wait_seconds_total', 'Seconds waited before retries.', this.#waitSeconds);
    counter(
      out,
      'retryq_proxy_gated_responses_total',
      'Caller requests answered locally with 429 by the gate, without an upstream request.',
      this.#gated,
    );
    counter(out, 'retryq_proxy_gate_closures_total', 'Gate closures after a 429 with Retry-After.', this.#gateClosures);
    out.push('# HELP retryq_proxy_attempts Upstream requests per caller request that reached the upstream.');
    out.push('# TYPE retryq_proxy_attempts histogram');
    for (const [key, h] of this.#attempts) {
      attemptBuckets.forEach((le, i) => out.push(`retryq_proxy_attempts_bucket{${key},le="${le}"} ${h.buckets[i]}`));
      out.push(`retryq_proxy_attempts_bucket{${key},le="+Inf"} ${h.count}`);
      out.push(`retryq_proxy_attempts_sum{${key}} ${h.sum}`);
      out.push(`retryq_proxy_attempts_count{${key}} ${h.count}`);
    }
    return out.join('\n') + '\n';
  }
}

function increment(map: Map<string, number>, key: string, by = 1): void {
  map.set(key, (map.get(key) ?? 0) + by);
}

function counter(out: string[], name: string, help: string, values: Map<string, number>): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
  for (const [key, value] of values) out.push(`${name}{${key}} ${value}`);
}

/** `a="x",b="y"` with label values escaped as the text format requires. */
function labels(values: Record<string, string>): string {
  return Object.entries(values)
    .map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')}"`)
    .join(',');
}
