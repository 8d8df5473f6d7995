/**
 * The demo of `retryq dev`: a simulated paid API with a tight rate limit and a few misbehaving operations, and a
 * batch of intents that exercises every path — rate limits with Retry-After (and the credential's gate), transient
 * outages, a permission error, a commit-then-timeout that inspection resolves, and a server delay past the deadline.
 *
 * The simulated provider does **not** honour idempotency keys (`honorIdempotencyKeys: false`), so the only thing
 * standing between a lost answer and a second paid operation is retryq's rule "inspect before re-dispatch":
 * the demo's duplicate counter proves it.
 *
 * @example
 * ```ts
 * import { demoIntents, demoScenario } from './scenario.js';
 * const scenario = demoScenario({ rateLimitPerMinute: 20 });
 * const intents = demoIntents({ simUrl: 'http://127.0.0.1:4010', runId: 'r1', charges: 18 });
 * ```
 */
import type { CredentialConfig } from '../config.js';
import type { IntentInput } from '../intent.js';
import { DEFAULT_WEBHOOK_SECRET } from '../sim/index.js';
import type { ScenarioInput } from '../sim/index.js';
import { webhookSourceSchema } from '../webhook-config.js';
import type { WebhookSource } from '../webhook-config.js';

/** The credential id the demo dispatches with. */
export const DEMO_CREDENTIAL = 'demo-acme';
/** The simulated provider's API key for it (lives only in the dev process's memory; it is a test value). */
export const DEMO_API_KEY = 'sk_demo_acme_4f1c';

export interface DemoSize {
  /** Plain charges submitted at once. @default 18 */
  charges: number;
  /** The provider's write limit per minute. @default 20 */
  rateLimitPerMinute: number;
  /** Deadline of the ordinary intents. @default '10m' */
  deadline: string;
}

export const defaultDemoSize: DemoSize = { charges: 18, rateLimitPerMinute: 20, deadline: '10m' };

/** The simulated provider's behaviour during the demo. */
export function demoScenario(size: Pick<DemoSize, 'rateLimitPerMinute'>): ScenarioInput {
  return {
    keys: [{ key: DEMO_API_KEY, id: DEMO_CREDENTIAL, rateLimitPerMinute: size.rateLimitPerMinute }],
    retryAfterFormat: 'seconds',
    honorIdempotencyKeys: false,
    // Webhooks (the URL is set once the receiver listens): each event is redelivered once, preceded by a forged and
    // a stale copy the receiver must refuse, and followed by an older "pending" event arriving out of order.
    webhookRedeliveries: 1,
    webhookBackoffMs: 500,
    webhookForged: 1,
    webhookStale: 1,
    webhookOutOfOrder: true,
    rules: [
      {
        name: 'permission denied',
        match: { idempotencyKey: '*-perm-*' },
        steps: [{ status: 403, code: 'permission_denied' }],
      },
      {
        name: 'transient outage: two 503s, then fine',
        match: { idempotencyKey: '*-flaky-*' },
        steps: [{ status: 503 }, { status: 503 }],
        then: 'normal',
      },
      {
        name: 'connection reset before the provider executed anything',
        match: { idempotencyKey: '*-reset-*' },
        steps: [{ reset: true }],
        then: 'normal',
      },
      {
        name: 'committed, but the answer never arrives',
        match: { idempotencyKey: '*-lost-*' },
        steps: [{ commitThen: 'timeout' }],
        then: 'normal',
      },
      {
        // A 503 (not a 429): a rate limit would close the whole credential's gate for the hour (load control).
        name: 'down for maintenance for an hour; the intent has two minutes',
        match: { idempotencyKey: '*-far-*' },
        steps: [{ status: 503, code: 'maintenance', retryAfter: '3600' }],
      },
    ],
  };
}

/** The webhook source the demo's simulator posts to (`POST /webhooks/demo-sim`). */
export const DEMO_WEBHOOK_SOURCE = 'demo-sim';
/** Its signing secret: the simulator's default (a test value, kept in the dev process's memory). */
export const DEMO_WEBHOOK_SECRET = DEFAULT_WEBHOOK_SECRET;

/** The demo's webhook source: Standard Webhooks, the simulator's event format. */
export function demoWebhookSource(): WebhookSource {
  return webhookSourceSchema.parse({
    name: DEMO_WEBHOOK_SOURCE,
    verify: { scheme: 'standard-webhooks', secretEnv: 'RETRYQ_DEMO_WEBHOOK_SECRET' },
    mapping: {
      type: 'type',
      events: { 'operation.succeeded': 'succeeded', 'operation.failed': 'failed', 'operation.pending': 'pending' },
      key: 'idempotencyKey',
      result: 'result',
      error: 'error',
    },
  });
}

/** The demo credential, as worker config (its secret is passed in memory, not through the environment). */
export function demoCredential(): CredentialConfig {
  return {
    id: DEMO_CREDENTIAL,
    secretEnv: 'RETRYQ_DEMO_SECRET',
    // retryq's own budget is deliberately above the provider's limit, so the demo shows the credential's gate at work:
    // the first 429 holds every other charge until the permitted time (docs/load-control.md).
    requestsPerMinute: 240,
    concurrency: 8,
    inspectReserve: 0.2,
    inspectConcurrency: 2,
    authHeader: 'authorization',
    authScheme: 'Bearer',
    learn: 'down',
  };
}

/** The batch of intents the demo submits; keys are unique per run so a restarted demo never attaches to old ones. */
export function demoIntents(opts: { simUrl: string; runId: string; size?: DemoSize }): IntentInput[] {
  const size = opts.size ?? defaultDemoSize;
  const intent = (name: string, amount: number, extra: Partial<IntentInput> = {}): IntentInput => ({
    idempotencyKey: `demo-${opts.runId}-${name}`,
    credential: DEMO_CREDENTIAL,
    action: {
      method: 'POST',
      url: `${opts.simUrl}/v1/charges`,
      body: { amount, currency: 'eur', description: `demo ${name}` },
    },
    inspection: { url: `${opts.simUrl}/v1/operations/{idempotencyKey}` },
    deadline: size.deadline,
    policy: { baseDelay: '1s', maxBackoff: '30s', maxAttempts: 10, attemptTimeout: '3s' },
    ...extra,
  });
  const list: IntentInput[] = [];
  for (let i = 1; i <= size.charges; i++) list.push(intent(`charge-${String(i).padStart(2, '0')}`, 100 * i));
  list.push(intent('flaky-1', 4200), intent('flaky-2', 4300));
  list.push(intent('reset-1', 5100));
  list.push(intent('perm-1', 6100));
  list.push(intent('lost-1', 7100));
  list.push(intent('far-1', 8100, { deadline: '2m' }));
  return list;
}
