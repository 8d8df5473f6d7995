/**
 * Completion webhooks: after each executed operation the provider POSTs an event to the
 * scenario's `webhookUrl`, signed with the Standard Webhooks scheme (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature`, HMAC-SHA256 with `webhookSecret`), retrying with
 * doubling backoff while the receiver does not answer 2xx (at most `webhookMaxAttempts` attempts per
 * delivery), then deliberately redelivers the same delivery id `webhookRedeliveries` more times.
 *
 * Faults for testing receivers: `webhookForged` deliveries signed with another secret and
 * `webhookStale` ones with a timestamp 10 minutes old go out before each event (a receiver must
 * answer them 401); `webhookOutOfOrder` sends an older `operation.pending` event after it.
 */
import { setMaxListeners } from 'node:events';
import { Agent, request } from 'undici';
import { Webhook } from 'standardwebhooks';
import { sleepUnlessAborted } from './sleep.js';

/** The simulator's default signing secret (a test value; configure your receiver's source with it). */
export const DEFAULT_WEBHOOK_SECRET = 'whsec_cmV0cnlxLXNpbXVsYXRvci13ZWJob29rLXNlY3JldA==';

/** The JSON body of a webhook. */
export interface WebhookEvent {
  /** `dlv_…`; the same on every redelivery of this event (and the `webhook-id` header). */
  deliveryId: string;
  type: 'operation.succeeded' | 'operation.pending' | 'operation.failed';
  /** The operation's state. */
  status: 'succeeded' | 'pending' | 'failed';
  idempotencyKey: string | null;
  operationId: string;
  createdAt: string;
  /** The operation's result, on `operation.succeeded`. */
  result?: unknown;
}

/** Delivery settings, captured from the scenario when the operation executed. */
export interface WebhookSettings {
  url: string;
  redeliveries: number;
  maxAttempts: number;
  backoffMs: number;
  timeoutMs: number;
  /** Standard Webhooks secret. */
  secret: string;
  forged: number;
  stale: number;
  outOfOrder: boolean;
}

/** What the sender reports to metrics. */
export type WebhookOutcome =
  'attempts' | 'delivered' | 'failed' | 'redeliveries' | 'exhausted' | 'dropped' | 'faultsSent' | 'faultsAccepted';

/** Another secret, for forged deliveries. */
const FORGER_SECRET = 'whsec_bm90LXRoZS1wcm92aWRlcnMtc2VjcmV0LWF0LWFsbA==';
const STALE_BY_MS = 10 * 60_000;

const maxBackoffMs = 30_000;
/** Deliveries in progress at most; beyond it new events are dropped (and counted), bounding memory. */
export const maxPendingDeliveries = 10_000;

/** Sends webhooks in the background; `close()` cancels everything still going. */
export class WebhookSender {
  readonly #agent = new Agent({ keepAliveTimeout: 1_000, connections: 16 });
  readonly #closing = new AbortController();
  #inFlight = 0;

  constructor() {
    // Every delivery in progress listens to the one closing signal (up to maxPendingDeliveries at once).
    setMaxListeners(0, this.#closing.signal);
  }

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
    const faults = [
      ...Array.from({ length: settings.forged }, () => 'forged' as const),
      ...Array.from({ length: settings.stale }, () => 'stale' as const),
    ];
    for (const fault of faults) {
      if (this.#closing.signal.aborted) return;
      report('faultsSent');
      // A forger claims the operation failed; a replayer resends the real event with an old timestamp.
      const forged: WebhookEvent =
        fault === 'forged' ? { ...event, type: 'operation.failed', status: 'failed', result: undefined } : event;
      if (await this.#post(settings, forged, 1, fault)) report('faultsAccepted');
    }
    await this.#deliverWithRedeliveries(settings, event, report);
    if (settings.outOfOrder) {
      const older: WebhookEvent = {
        ...event,
        deliveryId: `${event.deliveryId}_pending`,
        type: 'operation.pending',
        status: 'pending',
        result: undefined,
      };
      await this.#deliverWithRedeliveries({ ...settings, redeliveries: 0 }, older, report);
    }
  }

  async #deliverWithRedeliveries(
    settings: WebhookSettings,
    event: WebhookEvent,
    report: (outcome: WebhookOutcome) => void,
  ): Promise<void> {
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

  async #post(
    settings: WebhookSettings,
    event: WebhookEvent,
    attempt: number,
    fault?: 'forged' | 'stale',
  ): Promise<boolean> {
    try {
      const body = JSON.stringify(event);
      const at = new Date(Date.now() - (fault === 'stale' ? STALE_BY_MS : 0));
      const signer = new Webhook(fault === 'forged' ? FORGER_SECRET : settings.secret);
      const response = await request(settings.url, {
        method: 'POST',
        dispatcher: this.#agent,
        headers: {
          'content-type': 'application/json',
          'webhook-id': event.deliveryId,
          'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
          'webhook-signature': signer.sign(event.deliveryId, at, body),
          'webhook-delivery-id': event.deliveryId,
          'webhook-attempt': String(attempt),
        },
        body,
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
