/**
 * Prometheus metrics of load control, per worker process (prom-client, own registry). Served by
 * {@link serveMetrics} at `http://<host>:<port>/metrics` (`RETRYQ_METRICS_PORT`, see docs/load-control.md).
 *
 * | metric | type | labels | meaning |
 * | --- | --- | --- | --- |
 * | `retryq_credential_budget_per_minute` | gauge | `credential`, `share` | the budget split: `total`, `dispatch`, `inspect` |
 * | `retryq_credential_gate_closed` | gauge | `credential`, `kind` | 1 while this process sees the gate closed |
 * | `retryq_credential_gate_open_at_seconds` | gauge | `credential`, `kind` | when the gate opens (Unix seconds; 0 when open) |
 * | `retryq_credential_blocked` | gauge | `credential` | 1 while the credential is blocked (quota) |
 * | `retryq_credential_slot_waiters` | gauge | `credential`, `kind` | calls in this process waiting for a send slot |
 * | `retryq_credential_sends_total` | counter | `credential`, `kind` | calls let through (sent) |
 * | `retryq_credential_held_total` | counter | `credential`, `kind`, `reason` | calls held, not sent (`rate_limited`, `paced`, `blocked`) |
 * | `retryq_credential_rate_limited_total` | counter | `credential`, `kind` | rate-limit answers seen |
 * | `retryq_credential_learned_closures_total` | counter | `credential`, `kind`, `scope` | gates closed because the headers said none left, before a 429 |
 * | `retryq_credential_paced_per_minute` | gauge | `credential`, `from` | the total budget slots are paced at: `from` is `configured` or the header it was learned from (`RateLimit-Policy`, …); the other `from` values read 0 |
 *
 * Labels are credential ids from config (never secrets) and fixed words, so cardinality stays bounded.
 *
 * @example
 * ```ts
 * const metrics = new LoadMetrics();
 * const server = await serveMetrics(metrics, 9464);
 * ```
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { BudgetSplit } from '../policy/index.js';
import type { BlockState, SlotKind } from '../workflows/credential.js';

export class LoadMetrics {
  readonly registry = new Registry();
  readonly #budget = new Gauge({
    name: 'retryq_credential_budget_per_minute',
    help: "The credential's budget per minute: total (the provider's limit), dispatch and the inspection reserve",
    labelNames: ['credential', 'share'] as const,
    registers: [this.registry],
  });
  readonly #closed = new Gauge({
    name: 'retryq_credential_gate_closed',
    help: 'Whether this process sees the gate of the credential closed (after a rate-limit answer)',
    labelNames: ['credential', 'kind'] as const,
    registers: [this.registry],
  });
  readonly #openAt = new Gauge({
    name: 'retryq_credential_gate_open_at_seconds',
    help: 'When the gate opens, Unix seconds (0 when open)',
    labelNames: ['credential', 'kind'] as const,
    registers: [this.registry],
  });
  readonly #blocked = new Gauge({
    name: 'retryq_credential_blocked',
    help: 'Whether the credential is blocked after a quota or spending-limit answer (until resumed)',
    labelNames: ['credential'] as const,
    registers: [this.registry],
  });
  readonly #waiters = new Gauge({
    name: 'retryq_credential_slot_waiters',
    help: 'Calls in this process waiting for a send slot',
    labelNames: ['credential', 'kind'] as const,
    registers: [this.registry],
  });
  readonly #sends = new Counter({
    name: 'retryq_credential_sends_total',
    help: 'Calls let through to the provider',
    labelNames: ['credential', 'kind'] as const,
    registers: [this.registry],
  });
  readonly #held = new Counter({
    name: 'retryq_credential_held_total',
    help: 'Calls held by load control and not sent (not attempts)',
    labelNames: ['credential', 'kind', 'reason'] as const,
    registers: [this.registry],
  });
  readonly #rateLimited = new Counter({
    name: 'retryq_credential_rate_limited_total',
    help: 'Rate-limit answers seen from the provider',
    labelNames: ['credential', 'kind'] as const,
    registers: [this.registry],
  });

  readonly #learnedClosures = new Counter({
    name: 'retryq_credential_learned_closures_total',
    help: "Gates closed because the provider's rate-limit headers said no request is left (before a 429)",
    labelNames: ['credential', 'kind', 'scope'] as const,
    registers: [this.registry],
  });
  readonly #paced = new Gauge({
    name: 'retryq_credential_paced_per_minute',
    help: "The total budget slots are paced at, and where it came from (configured, or the provider's header)",
    labelNames: ['credential', 'from'] as const,
    registers: [this.registry],
  });
  /** The `from` label last set per credential, so a change zeroes the old series. */
  readonly #pacedFrom = new Map<string, string>();

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'retryq_worker_' });
  }

  budget(credential: string, b: BudgetSplit): void {
    this.#budget.set({ credential, share: 'total' }, b.totalPerMinute);
    this.#budget.set({ credential, share: 'dispatch' }, b.dispatchPerMinute);
    this.#budget.set({ credential, share: 'inspect' }, b.inspectPerMinute);
    this.#blocked.set({ credential }, 0);
    this.paced(credential, b.totalPerMinute, 'configured');
    for (const kind of ['dispatch', 'inspect'] as const) {
      this.#closed.set({ credential, kind }, 0);
      this.#openAt.set({ credential, kind }, 0);
      this.#waiters.set({ credential, kind }, 0);
      this.#sends.inc({ credential, kind }, 0);
      this.#rateLimited.inc({ credential, kind }, 0);
    }
  }

  view(
    credential: string,
    closedUntil: Record<SlotKind, number>,
    blocked: BlockState | undefined,
    nowMs: number,
  ): void {
    for (const kind of ['dispatch', 'inspect'] as const) {
      const closed = closedUntil[kind] > nowMs;
      this.#closed.set({ credential, kind }, closed ? 1 : 0);
      this.#openAt.set({ credential, kind }, closed ? Math.round(closedUntil[kind] / 1000) : 0);
    }
    this.#blocked.set({ credential }, blocked ? 1 : 0);
  }

  waiting(credential: string, kind: SlotKind, delta: number): void {
    this.#waiters.inc({ credential, kind }, delta);
  }
  granted(credential: string, kind: SlotKind): void {
    this.#sends.inc({ credential, kind });
  }
  held(credential: string, kind: SlotKind, reason: string): void {
    this.#held.inc({ credential, kind, reason });
  }
  rateLimited(credential: string, kind: SlotKind): void {
    this.#rateLimited.inc({ credential, kind });
  }
  learnedClosure(credential: string, kind: SlotKind, scope: 'credential' | 'bucket'): void {
    this.#learnedClosures.inc({ credential, kind, scope });
  }
  /** The total budget now paced at, `from` `configured` or the header field it was learned from. */
  paced(credential: string, totalPerMinute: number, from: string): void {
    const before = this.#pacedFrom.get(credential);
    if (before !== undefined && before !== from) this.#paced.set({ credential, from: before }, 0);
    this.#pacedFrom.set(credential, from);
    this.#paced.set({ credential, from }, totalPerMinute);
  }

  /** The Prometheus text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}

/**
 * The SDK's own Prometheus text, scraped from its exporter (`Runtime` telemetry, see `temporal/runtime.ts`) at
 * `address`; a comment line when it cannot be read, so the rest of the page still serves.
 */
export async function sdkMetricsText(address: string): Promise<string> {
  try {
    const res = await fetch(`http://${address}/metrics`, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) return `# the Temporal SDK's metrics answered HTTP ${res.status}\n`;
    return await res.text();
  } catch (err) {
    return `# the Temporal SDK's metrics could not be read: ${(err as Error).message.replace(/\s+/g, ' ')}\n`;
  }
}

/**
 * Serves `GET /metrics` on `host:port` (port 0: any free port): retryq's load-control and process metrics, followed
 * by the Temporal SDK's own (`sdkMetricsAddress`: where the runtime's Prometheus exporter listens), so one endpoint
 * carries every metric of the worker process. Resolves with the server once it listens.
 */
export async function serveMetrics(
  metrics: LoadMetrics,
  port: number,
  host = '0.0.0.0',
  options: { sdkMetricsAddress?: string | undefined } = {},
): Promise<Server> {
  const sdk = options.sdkMetricsAddress;
  const render = async () => (await metrics.render()) + (sdk ? await sdkMetricsText(sdk) : '');
  const server = createServer((req, res) => {
    if (req.method === 'GET' && (req.url === '/metrics' || req.url?.startsWith('/metrics?'))) {
      render().then(
        (text) => {
          res.writeHead(200, { 'content-type': metrics.registry.contentType });
          res.end(text);
        },
        () => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end('metrics could not be rendered\n');
        },
      );
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('retryq worker metrics are at /metrics\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
