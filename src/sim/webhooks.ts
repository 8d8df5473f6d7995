/**
 * Completion webhooks: after each executed operation the provider POSTs an event to the
 * scenario's `webhookUrl`, retrying with doubling backoff while the receiver does not answer 2xx
 * (at most `webhookMaxAttempts` attempts per delivery), then deliberately redelivers the same
 * delivery id `webhookRedeliveries` more times.
 */
import { Agent, request } from 'undici';
import { sleepUnlessAborted } from './sleep.js';

/** The JSON body of a webhook. */
export interface WebhookEvent {
  /** `dlv_…`; the same on every redelivery of this event. */
  deliveryId: string;
  type: 'operation.succeeded';
  idempotencyKey: string | null;
  operationId: string;
  createdAt: string;
}

/** Delivery settings, captured from the scenario when the operation executed. */
export interface WebhookSettings {
  url: string;
  redeliveries: number;
  maxAttempts: number;
  backoffMs: number;
  timeoutMs: number;
}

/** What the sender reports to metrics. */
export type WebhookOutcome = 'attempts' | 'delivered' | 'failed' | 'redeliveries' | 'exhausted' | 'dropped';

const maxBackoffMs = 30_000;
/** Deliveries in progress at most; beyond it new events are dropped (and counted), bounding memory. */
export const maxPendingDeliveries = 10_000;

/** Sends webhooks in the background; `close()` cancels everything still going. */
export class WebhookSender {
  readonly #agent = new Agent({ keepAliveTimeout: 1_000, connections: 16 });
  readonly #closing = new AbortController();
  #inFlight = 0;

  /** Deliveries still being sent or waiting to retry. */
  get pending(): number {
    return this.#inFlight;
  }

  /** Starts delivering `event` (fire and forget; outcomes only go to `report`). */
  deliver(settings: WebhookSettings, event: WebhookEvent, report: (outcome: WebhookOutcome) => void): void {
    if (this.#closing.signal.aborted) return;
    if (this.#inFlight >= maxPendingDeliveries) {
      report('dropped');
      return;
    }
    this.#inFlight++;
    void this.#run(settings, event, report)
      .catch(() => undefined)
      .finally(() => {
        this.#inFlight--;
      });
  }

  async #run(settings: WebhookSettings, event: WebhookEvent, report: (outcome: WebhookOutcome) => void): Promise<void> {
    for (let round = 0; round <= settings.redeliveries; round++) {
      if (round > 0) {
        report('redeliveries');
        if (!(await this.#sleep(settings.backoffMs))) return;
      }
      let delivered = false;
      for (let attempt = 1; attempt <= settings.maxAttempts && !delivered; attempt++) {
        if (attempt > 1) {
          const backoff = Math.min(maxBackoffMs, settings.backoffMs * 2 ** (attempt - 2));
          if (!(await this.#sleep(backoff))) return;
        }
        if (this.#closing.signal.aborted) return;
        report('attempts');
        delivered = await this.#post(settings, event, attempt);
        report(delivered ? 'delivered' : 'failed');
      }
      if (!delivered) report('exhausted');
    }
  }

  async #post(settings: WebhookSettings, event: WebhookEvent, attempt: number): Promise<boolean> {
    try {
      const response = await request(settings.url, {
        method: 'POST',
        dispatcher: this.#agent,
        headers: {
          'content-type': 'application/json',
          'webhook-delivery-id': event.deliveryId,
          'webhook-attempt': String(attempt),
        },
        body: JSON.stringify(event),
        headersTimeout: settings.timeoutMs,
        bodyTimeout: settings.timeoutMs,
        signal: this.#closing.signal,
      });
      await response.body.dump();
      return response.statusCode >= 200 && response.statusCode < 300;
    } catch {
      return false;
    }
  }

  /** Resolves `true` after `ms`, or `false` at once if the sender closes first. */
  #sleep(ms: number): Promise<boolean> {
    return sleepUnlessAborted(ms, this.#closing.signal);
  }

  /** Cancels pending deliveries and closes the sender's connections. */
  async close(): Promise<void> {
    this.#closing.abort();
    await this.#agent.destroy().catch(() => undefined);
  }
}
