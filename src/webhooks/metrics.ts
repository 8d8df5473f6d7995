/**
 * The receiver's Prometheus metrics (`prom-client`, one registry per receiver), served at `GET /metrics`.
 *
 * | metric | type | labels | meaning |
 * | --- | --- | --- | --- |
 * | `retryq_webhook_deliveries_total` | counter | `source`, `outcome` | deliveries answered, by {@link DeliveryOutcome} |
 * | `retryq_webhook_store_seconds` | histogram | `source` | time to store a delivery in Temporal (the intent's update, or the orphan record) |
 *
 * Labels hold configured source names and the fixed outcomes only (an unknown source is counted as `source=""`),
 * so cardinality stays bounded whatever is posted.
 *
 * @example
 * ```ts
 * const metrics = new WebhookMetrics();
 * metrics.delivery('acme', 'stored');
 * await metrics.render(); // '# HELP retryq_webhook_deliveries_total …'
 * ```
 */
import { Counter, Histogram, Registry } from 'prom-client';

/** What became of one delivery. */
export const DeliveryOutcome = {
  /** Recorded by a running intent: its `webhook` update was accepted (2xx). */
  stored: 'stored',
  /** No intent has the key: recorded as a `webhookOrphanWorkflow` (2xx). */
  orphan: 'orphan',
  /** A redelivery the intent had already recorded (its update rejected), or of a recorded orphan (2xx, nothing written). */
  duplicate: 'duplicate',
  /** The intent had already ended: nothing to change, nothing written (2xx). */
  late: 'late',
  /** An event type that is not evidence, or no idempotency key (2xx, nothing stored). */
  ignored: 'ignored',
  /** Signature missing, forged, or timestamp outside the tolerance (401). */
  unauthorized: 'unauthorized',
  /** Malformed JSON or a body that fails the mapping (400). */
  invalid: 'invalid',
  /** Body over the limit (413). */
  tooLarge: 'too_large',
  /** Temporal could not be reached or did not confirm in time (503): the provider should redeliver. */
  unavailable: 'unavailable',
  /** No such source, wrong method or media type (404, 405, 415). */
  rejected: 'rejected',
} as const;
export type DeliveryOutcome = (typeof DeliveryOutcome)[keyof typeof DeliveryOutcome];

export class WebhookMetrics {
  /** The registry holding only this receiver's metrics; add it to your own with `Registry.merge`. */
  readonly registry = new Registry();
  readonly #deliveries: Counter<'source' | 'outcome'>;
  readonly #store: Histogram<'source'>;
  readonly #counts = new Map<DeliveryOutcome, number>();

  constructor() {
    this.#deliveries = new Counter({
      name: 'retryq_webhook_deliveries_total',
      help: 'Webhook deliveries answered, by source and outcome.',
      labelNames: ['source', 'outcome'],
      registers: [this.registry],
    });
    this.#store = new Histogram({
      name: 'retryq_webhook_store_seconds',
      help: 'Time to store a webhook delivery in Temporal (intent update or orphan record), in seconds.',
      labelNames: ['source'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [this.registry],
    });
  }

  delivery(source: string, outcome: DeliveryOutcome): void {
    this.#deliveries.inc({ source, outcome });
    this.#counts.set(outcome, (this.#counts.get(outcome) ?? 0) + 1);
  }

  stored(source: string, seconds: number): void {
    this.#store.observe({ source }, seconds);
  }

  /** Deliveries by outcome, over every source (for summaries such as the demo's). */
  counts(): Record<DeliveryOutcome, number> {
    const out = {} as Record<DeliveryOutcome, number>;
    for (const o of Object.values(DeliveryOutcome)) out[o] = this.#counts.get(o) ?? 0;
    return out;
  }

  /** The Prometheus text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
