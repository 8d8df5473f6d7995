/**
 * The webhook receiver: `POST /webhooks/<source>` → verify → map → store in Temporal → acknowledge.
 *
 * A 2xx means Temporal has durably stored what the delivery needs, or that nothing needs storing (invariant 10):
 * - a delivery for a key whose intent runs is sent as the `webhook` **update** to `intent:<key>`
 *   (`webhookUpdate`, waiting for its result). The intent's validator rejects a delivery id it has already recorded,
 *   and a rejected update is not written to history: a redelivery, through any receiver process, is answered
 *   `duplicate` and changes nothing. An accepted one is in history before the answer (`stored`);
 * - a delivery for a key with no intent never starts one: it is **recorded** as a `webhookOrphanWorkflow` whose
 *   workflow id `webhook-orphan:<source>:<deliveryId>` deduplicates it, searchable as `WebhookKey = "<key>"`;
 * - a delivery for an intent that has ended changes nothing and is acknowledged (`late`).
 *
 * Temporal unreachable, or not confirming within `temporalTimeoutMs` (an update also needs a workflow worker to
 * validate it) → 503, and the provider redelivers later. Forged or stale → 401; body over `maxBodyBytes` → 413; a
 * body that is not UTF-8, malformed JSON, or a body that fails the mapping → 400 naming the field path. Unknown
 * event types and events without a key → 200, ignored, counted and told to `onIgnored`.
 *
 * Embeddable: {@link WebhookReceiver.handle} is a `node:http` request handler, and {@link WebhookReceiver.receive}
 * takes a raw body for frameworks that read it themselves.
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * import { WebhookReceiver } from 'retryq/webhooks';
 * const receiver = new WebhookReceiver({ client, sources: config.webhooks.sources, secrets });
 * createServer((req, res) => {
 *   if (req.url?.startsWith('/webhooks/')) return void receiver.handle(req, res);
 *   res.writeHead(404).end();
 * }).listen(3000);
 * ```
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
} from '@temporalio/common';
import { workflowIdOf } from '../workflow-ids.js';
import { WebhookRejection } from '../failures.js';
import type { WebhookAck, WebhookDelivery } from '../intent.js';
import { retryPhaseKey, webhookKeyKey } from '../search-attributes.js';
import { taskQueues } from '../task-queues.js';
import { webhookOrphanWorkflow, webhookUpdate } from '../workflows/index.js';
import { mapDelivery } from './mapping.js';
import type { Problem } from '../errors.js';
import { DeliveryOutcome, WebhookMetrics } from './metrics.js';
import type { WebhookSource } from '../webhook-config.js';
import { verifierFor } from './verify.js';
import type { Verifier } from './verify.js';
import { WebhookNotStoredError, describeProblem } from '../errors.js';

/** @default 1 MiB */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** Stable codes of the receiver's error answers (`{ error: { code, message, problems? } }`). */
export const WebhookErrorCode = {
  unknownSource: 'webhook_unknown_source',
  methodNotAllowed: 'webhook_method_not_allowed',
  unauthorized: 'webhook_unauthorized',
  bodyTooLarge: 'webhook_body_too_large',
  invalidJson: 'webhook_invalid_json',
  invalidDelivery: 'webhook_invalid_delivery',
  temporalUnavailable: 'webhook_temporal_unavailable',
  internal: 'webhook_internal_error',
} as const;
export type WebhookErrorCode = (typeof WebhookErrorCode)[keyof typeof WebhookErrorCode];

/** The receiver's answer to one delivery. */
export interface WebhookAnswer {
  status: number;
  headers: Record<string, string>;
  body:
    | { outcome: DeliveryOutcome; deliveryId: string; workflowId?: string; detail?: string }
    | { error: { code: WebhookErrorCode; message: string; problems?: Problem[] } };
}

export interface WebhookReceiverOptions {
  /** A Temporal client for the namespace the intents run in. */
  client: Client;
  sources: readonly WebhookSource[];
  /** Signing secrets by source name (see `resolveWebhookSecrets`); several during a rotation. */
  secrets: ReadonlyMap<string, readonly string[]>;
  /** @default 'retryq' */
  taskQueuePrefix?: string;
  /** Largest body accepted, bytes. @default 1 MiB */
  maxBodyBytes?: number;
  /** How long storing one delivery in Temporal may take before the answer is 503, ms. @default 5000 */
  temporalTimeoutMs?: number;
  /** Path prefix of {@link WebhookReceiver.handle}. @default '/webhooks' */
  basePath?: string;
  /** @default Date.now */
  clock?: () => number;
  /** Told about unexpected failures (never secrets or bodies). @default silent */
  onError?: (message: string, err: unknown) => void;
  /**
   * Told one line per verified delivery acknowledged without being stored because it is not evidence for an intent
   * (an event type the mapping does not list, or no idempotency key); never bodies. @default silent
   */
  onIgnored?: (line: string) => void;
}

/** The workflow id that records (and deduplicates) a delivery whose key has no intent. */
export function orphanWorkflowId(source: string, deliveryId: string): string {
  return `webhook-orphan:${source}:${deliveryId}`;
}

function errorAnswer(
  status: number,
  code: WebhookErrorCode,
  message: string,
  problems?: Problem[],
  headers: Record<string, string> = {},
): WebhookAnswer {
  return { status, headers, body: { error: { code, message, ...(problems ? { problems } : {}) } } };
}

/** Verifies, maps and stores webhook deliveries. */
export class WebhookReceiver {
  readonly metrics = new WebhookMetrics();
  readonly maxBodyBytes: number;
  readonly basePath: string;
  readonly #client: Client;
  readonly #sources: Map<string, { source: WebhookSource; verify: Verifier }>;
  readonly #workflowsQueue: string;
  readonly #timeoutMs: number;
  readonly #clock: () => number;
  readonly #onError: (message: string, err: unknown) => void;
  readonly #onIgnored: (line: string) => void;

  constructor(options: WebhookReceiverOptions) {
    this.#client = options.client;
    this.#sources = new Map();
    for (const source of options.sources) {
      const secrets = options.secrets.get(source.name) ?? [];
      let verify: Verifier;
      try {
        verify = verifierFor(source.verify, secrets);
      } catch (err) {
        throw new Error(
          `Webhook source "${source.name}": ${(err as Error).message}; set ${source.verify.secretEnv} to its signing secret.`,
          { cause: err },
        );
      }
      this.#sources.set(source.name, { source, verify });
    }
    this.#workflowsQueue = taskQueues(options.taskQueuePrefix ?? 'retryq').workflows;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.#timeoutMs = options.temporalTimeoutMs ?? 5000;
    this.basePath = (options.basePath ?? '/webhooks').replace(/\/+$/, '');
    this.#clock = options.clock ?? Date.now;
    this.#onError = options.onError ?? (() => undefined);
    this.#onIgnored = options.onIgnored ?? (() => undefined);
  }

  /** The configured source names. */
  get sourceNames(): string[] {
    return [...this.#sources.keys()];
  }

  /**
   * Handles one delivery whose body was already read. `headers`: names in any case; repeated values joined.
   * Never throws: every outcome is an answer.
   */
  async receive(request: {
    source: string;
    headers: Readonly<Record<string, string | readonly string[] | undefined>>;
    body: Buffer;
  }): Promise<WebhookAnswer> {
    const entry = this.#sources.get(request.source);
    if (!entry) {
      this.metrics.delivery('', DeliveryOutcome.rejected);
      return errorAnswer(
        404,
        WebhookErrorCode.unknownSource,
        `No webhook source "${request.source.slice(0, 100)}" is configured here; configured: ${this.sourceNames.join(', ') || 'none'}.`,
      );
    }
    const name = entry.source.name;
    if (request.body.length > this.maxBodyBytes) return this.#tooLarge(name);
    const headers: Record<string, string | undefined> = {};
    for (const [k, v] of Object.entries(request.headers))
      headers[k.toLowerCase()] = typeof v === 'string' ? v : v === undefined ? undefined : v.join(', ');

    // Before the signature: the Standard Webhooks package signs the body as text, so bytes that are not UTF-8
    // would otherwise be answered 401 (no signature matches) although they were signed.
    if (!isUtf8(request.body)) {
      this.metrics.delivery(name, DeliveryOutcome.invalid);
      return errorAnswer(400, WebhookErrorCode.invalidJson, 'The body is not UTF-8 text; nothing was stored.', [
        { path: '$', message: 'must be JSON in UTF-8 (RFC 8259); the body holds bytes that are not valid UTF-8' },
      ]);
    }

    const verified = entry.verify({ headers, body: request.body, nowMs: this.#clock() });
    if (!verified.ok) {
      this.metrics.delivery(name, DeliveryOutcome.unauthorized);
      return errorAnswer(
        401,
        WebhookErrorCode.unauthorized,
        `Delivery not verified: ${verified.reason}. Nothing was stored; check the source's signing secret (${entry.source.verify.secretEnv}) and the sender's clock.`,
      );
    }

    let json: unknown;
    try {
      json = JSON.parse(request.body.toString('utf8'));
    } catch (err) {
      this.metrics.delivery(name, DeliveryOutcome.invalid);
      const why = (err as Error).message.slice(0, 200);
      return errorAnswer(400, WebhookErrorCode.invalidJson, 'The body is not JSON; nothing was stored.', [
        { path: '$', message: `must be JSON: ${why}` },
      ]);
    }

    const mapped = mapDelivery(entry.source, headers, json, new Date(this.#clock()));
    if (mapped.kind === 'invalid') {
      this.metrics.delivery(name, DeliveryOutcome.invalid);
      return errorAnswer(
        400,
        WebhookErrorCode.invalidDelivery,
        `The delivery does not fit the mapping of source "${name}"; nothing was stored:\n` +
          mapped.problems.map((p) => `  - ${describeProblem(p)}`).join('\n'),
        mapped.problems,
      );
    }
    if (mapped.kind === 'ignored') {
      this.metrics.delivery(name, DeliveryOutcome.ignored);
      this.#onIgnored(`webhook ${mapped.deliveryId} from ${name} ignored: ${mapped.reason}`);
      return {
        status: 200,
        headers: {},
        body: { outcome: 'ignored', deliveryId: mapped.deliveryId, detail: mapped.reason },
      };
    }

    const started = performance.now();
    try {
      const stored = await this.#store(mapped.key, mapped.delivery);
      this.metrics.stored(name, (performance.now() - started) / 1000);
      this.metrics.delivery(name, stored.outcome);
      return { status: 200, headers: {}, body: { deliveryId: mapped.delivery.deliveryId, ...stored } };
    } catch (err) {
      this.metrics.delivery(name, DeliveryOutcome.unavailable);
      if (!(err instanceof WebhookNotStoredError)) this.#onError('storing a webhook delivery failed unexpectedly', err);
      return errorAnswer(
        503,
        WebhookErrorCode.temporalUnavailable,
        `Temporal did not confirm the delivery (${err instanceof WebhookNotStoredError ? err.message : 'unexpected failure'}); it may not be stored. Deliver it again later: a redelivery of a delivery already stored changes nothing.`,
        undefined,
        { 'retry-after': '5' },
      );
    }
  }

  /**
   * Sends the delivery to the running intent as an update and waits for its result, or records the orphan, or
   * notes that the intent has ended. Waiting for the result rather than for acceptance costs nothing more: the
   * handler is synchronous, so acceptance and completion are written by the same workflow task.
   */
  async #store(
    key: string,
    delivery: WebhookDelivery,
  ): Promise<{ outcome: DeliveryOutcome; workflowId: string; detail?: string }> {
    const deadline = Date.now() + this.#timeoutMs;
    const inTime = <T>(fn: () => Promise<T>): Promise<T> =>
      this.#client.connection.withDeadline(deadline, fn).catch((err: unknown) => {
        if (
          err instanceof WorkflowNotFoundError ||
          err instanceof WorkflowExecutionAlreadyStartedError ||
          err instanceof WorkflowUpdateFailedError
        )
          throw err;
        throw new WebhookNotStoredError(
          err instanceof WorkflowUpdateRPCTimeoutOrCancelledError ? 'no answer in time' : temporalReason(err),
        );
      });
    const workflowId = workflowIdOf(key);
    const handle = this.#client.workflow.getHandle(workflowId);
    for (let tries = 0; tries < 2; tries++) {
      try {
        const ack = await inTime(() => handle.executeUpdate(webhookUpdate, { args: [delivery] }));
        return { outcome: DeliveryOutcome.stored, workflowId, detail: describeAck(ack) };
      } catch (err) {
        const refused = refusalOf(err);
        if (refused?.type === WebhookRejection.DeliverySeen)
          return { outcome: DeliveryOutcome.duplicate, workflowId, detail: 'already recorded by the intent' };
        if (refused?.type === WebhookRejection.IntentEnded)
          return {
            outcome: DeliveryOutcome.late,
            workflowId,
            detail: `the intent has already ended (${refused.phase ?? 'ended'})`,
          };
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      // No running intent under the key: ended, or never there.
      let ended: string | undefined;
      try {
        const desc = await inTime(() => handle.describe());
        if (desc.status.name === 'RUNNING') continue; // started in between: send it there
        ended = desc.typedSearchAttributes.get(retryPhaseKey) ?? desc.status.name.toLowerCase();
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      if (ended !== undefined)
        return { outcome: DeliveryOutcome.late, workflowId, detail: `the intent has already ended (${ended})` };
      break;
    }
    const orphanId = orphanWorkflowId(delivery.source, delivery.deliveryId);
    try {
      await inTime(() =>
        this.#client.workflow.start(webhookOrphanWorkflow, {
          workflowId: orphanId,
          taskQueue: this.#workflowsQueue,
          args: [{ idempotencyKey: key, delivery }],
          workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
          workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
          typedSearchAttributes: [{ key: webhookKeyKey, value: key }],
          staticSummary: `webhook ${delivery.deliveryId} from ${delivery.source}: ${delivery.state} for key ${key}, which has no intent`,
        }),
      );
      return { outcome: DeliveryOutcome.orphan, workflowId: orphanId, detail: 'no intent has this key; recorded' };
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError)
        return { outcome: DeliveryOutcome.duplicate, workflowId: orphanId, detail: 'already recorded' };
      throw err;
    }
  }

  #tooLarge(source: string): WebhookAnswer {
    this.metrics.delivery(source, DeliveryOutcome.tooLarge);
    return errorAnswer(
      413,
      WebhookErrorCode.bodyTooLarge,
      `The body is larger than ${this.maxBodyBytes} bytes; nothing was stored. Raise RETRYQ_WEBHOOK_MAX_BODY if the provider's events are this large.`,
    );
  }

  /**
   * A `node:http` request handler for `POST <basePath>/<source>` (other paths: 404). Reads the body up to the
   * limit, then answers; never throws.
   */
  readonly handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    let answer: WebhookAnswer;
    try {
      answer = await this.#route(req);
    } catch (err) {
      this.#onError('the webhook receiver failed on a request', err);
      answer = errorAnswer(500, WebhookErrorCode.internal, 'The receiver failed unexpectedly; nothing was stored.');
    }
    if (res.headersSent || res.destroyed) return;
    const text = JSON.stringify(answer.body);
    res.writeHead(answer.status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(text),
      ...answer.headers,
    });
    res.end(text);
  };

  async #route(req: IncomingMessage): Promise<WebhookAnswer> {
    const path = (req.url ?? '/').split('?')[0]!;
    const prefix = `${this.basePath}/`;
    const rawName = path.startsWith(prefix) ? path.slice(prefix.length) : undefined;
    let name: string | undefined;
    try {
      name =
        rawName !== undefined && rawName !== '' && !rawName.includes('/') ? decodeURIComponent(rawName) : undefined;
    } catch {
      name = undefined;
    }
    if (name === undefined || !this.#sources.has(name)) {
      req.resume();
      this.metrics.delivery('', DeliveryOutcome.rejected);
      return errorAnswer(
        404,
        WebhookErrorCode.unknownSource,
        `No webhook source at ${path.slice(0, 200)}; deliveries go to POST ${prefix}<source> (configured: ${this.sourceNames.join(', ') || 'none'}).`,
      );
    }
    if (req.method !== 'POST') {
      req.resume();
      this.metrics.delivery(name, DeliveryOutcome.rejected);
      return errorAnswer(405, WebhookErrorCode.methodNotAllowed, 'Webhook deliveries are POST requests.', undefined, {
        allow: 'POST',
      });
    }
    const body = await readBody(req, this.maxBodyBytes);
    if (body === 'close') {
      const answer = this.#tooLarge(name);
      return { ...answer, headers: { ...answer.headers, connection: 'close' } };
    }
    if (body === 'too-large') return this.#tooLarge(name);
    return this.receive({ source: name, headers: req.headers, body });
  }
}

/**
 * Reads a request body; `undefined` when it is larger than `max`. An oversized body is drained without being kept,
 * so the client reads the 413 rather than a reset connection (the server's request timeout bounds the time). A
 * declared length beyond {@link DRAIN_LIMIT_BYTES} is answered at once and the connection closed.
 */
async function readBody(req: IncomingMessage, max: number): Promise<Buffer | 'too-large' | 'close'> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > Math.max(DRAIN_LIMIT_BYTES, max)) {
    req.resume();
    return 'close';
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= max) chunks.push(chunk);
    else chunks.length = 0;
  }
  return size > max ? 'too-large' : Buffer.concat(chunks, size);
}

/** Bodies declared larger than this are not drained: the 413 closes the connection. */
const DRAIN_LIMIT_BYTES = 16 * 1024 * 1024;

/** The intent's reason for turning a delivery away, when `err` is that rejection (recognised by its `type`). */
function refusalOf(err: unknown): { type: WebhookRejection; phase?: string } | undefined {
  if (!(err instanceof WorkflowUpdateFailedError)) return undefined;
  const cause = err.cause as { type?: unknown; details?: unknown } | undefined;
  const type = cause?.type;
  if (type !== WebhookRejection.DeliverySeen && type !== WebhookRejection.IntentEnded) return undefined;
  const first: unknown = Array.isArray(cause?.details) ? (cause.details as unknown[])[0] : undefined;
  const phase = (first as { phase?: unknown } | undefined)?.phase;
  return { type, ...(typeof phase === 'string' ? { phase: phase.slice(0, 40) } : {}) };
}

/** What the intent did with a delivery it recorded, for the answer's `detail`. */
function describeAck(ack: WebhookAck): string {
  switch (ack.effect) {
    case 'settles':
      return 'recorded; it settles the intent';
    case 'logged':
      return `recorded; the intent stays ${ack.phase}`;
    case 'late':
      return 'recorded; an earlier delivery already settled the intent';
  }
}

/** What went wrong talking to Temporal, in a few words (no addresses with credentials, no stack). */
function temporalReason(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (code === 4 || (err as Error).name === 'TimeoutError') return 'no answer in time';
  if (code === 14) return 'Temporal is unreachable';
  const message = err instanceof Error ? err.message.split('\n')[0]!.slice(0, 200) : String(err);
  return message || 'unknown failure';
}
