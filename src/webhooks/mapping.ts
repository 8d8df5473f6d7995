/**
 * From a verified delivery's JSON to evidence for an intent, by the source's mapping: the delivery id, the event
 * type, the operation's idempotency key, its state, and its result or error. Every value read is validated with
 * zod; a problem names the JSON path (or header) it was found at, what is wrong, and what was received.
 *
 * @example
 * ```ts
 * import { mapDelivery } from './mapping.js';
 * const mapped = mapDelivery(source, { 'webhook-id': 'msg_1' }, { idempotencyKey: 'order-1', status: 'succeeded' }, new Date());
 * if (mapped.kind === 'evidence') console.log(mapped.key, mapped.delivery.state); // order-1 succeeded
 * ```
 */
import { z } from 'zod';
import { idempotencyKeySchema } from '../intent.js';
import type { Problem } from '../errors.js';
import type { JsonValue, WebhookDelivery, WebhookState } from '../intent.js';
import { formatJsonPath, readJsonPath, webhookStates } from '../webhook-config.js';
import type { JsonPath, WebhookSource } from '../webhook-config.js';

export type MappedDelivery =
  | { kind: 'evidence'; key: string; delivery: WebhookDelivery }
  | { kind: 'ignored'; deliveryId: string; reason: string }
  | { kind: 'invalid'; problems: Problem[] };

/** Largest result kept with an intent (serialized JSON); a larger one is replaced by a note. */
export const MAX_RESULT_BYTES = 64 * 1024;

const deliveryIdSchema = z.union([z.string(), z.number().int().nonnegative().transform(String)]).pipe(
  z
    .string()
    .min(1, 'must not be empty')
    .max(200, 'must be at most 200 characters')
    .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces'),
);

const errorSchema = z.union([
  z.string().transform((message) => ({ message: message.slice(0, 500) })),
  z.object({
    status: z.number().int().min(100).max(599).optional().catch(undefined),
    code: z
      .union([z.string(), z.number()])
      .transform((c) => String(c).slice(0, 200))
      .optional()
      .catch(undefined),
    message: z
      .string()
      .transform((m) => m.slice(0, 500))
      .optional()
      .catch(undefined),
  }),
]);

function shown(value: unknown): string {
  let text: string;
  try {
    text = value === undefined ? 'nothing' : (JSON.stringify(value) ?? typeof value);
  } catch {
    text = typeof value;
  }
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
}

/** What was there: the value itself, or its JSON cut to 80 characters when it is longer; absent for nothing. */
function problem(path: string, message: string, value: unknown): Problem {
  if (value === undefined) return { path, message };
  const text = shown(value);
  return { path, message, received: text.endsWith('…') ? text : value };
}

/** Maps one verified delivery; `headers` have lower-cased names. */
export function mapDelivery(
  source: WebhookSource,
  headers: Readonly<Record<string, string | undefined>>,
  body: unknown,
  receivedAt: Date,
): MappedDelivery {
  const m = source.mapping;
  const problems: Problem[] = [];
  const at = (path: JsonPath) => readJsonPath(body, path);

  // The delivery id first: even an ignored event is acknowledged by it.
  const idWhere = 'header' in m.deliveryId ? `headers.${m.deliveryId.header}` : formatJsonPath(m.deliveryId.path);
  const idValue = 'header' in m.deliveryId ? headers[m.deliveryId.header] : at(m.deliveryId.path);
  const id = deliveryIdSchema.safeParse(idValue);
  if (!id.success)
    problems.push(
      problem(idWhere, idValue === undefined ? 'is missing: the delivery id' : id.error.issues[0]!.message, idValue),
    );

  let eventType: string | undefined;
  let state: WebhookState | 'from-state' | undefined = m.events ? undefined : 'from-state';
  if (m.type) {
    const value = at(m.type);
    if (typeof value !== 'string' || value === '' || value.length > 200)
      problems.push(problem(formatJsonPath(m.type), 'must be the event type, a string of 1–200 characters', value));
    else {
      eventType = value;
      if (m.events) {
        state = Object.hasOwn(m.events, value) ? m.events[value] : undefined;
        if (state === undefined && id.success)
          return {
            kind: 'ignored',
            deliveryId: id.data,
            reason: `event type "${value.slice(0, 100)}" is not evidence for intents`,
          };
      }
    }
  }

  let providerState: string | undefined;
  if (state === 'from-state' && m.state) {
    const value = at(m.state);
    const found = typeof value === 'string' ? webhookStates.find((s) => m.states[s].includes(value)) : undefined;
    if (found === undefined) {
      const allowed = webhookStates.flatMap((s) => m.states[s]).map((v) => `"${v}"`);
      problems.push(problem(formatJsonPath(m.state), `must be one of ${allowed.join(', ')}`, value));
    } else {
      state = found;
      providerState = (value as string).slice(0, 100);
    }
  }

  // An event that names no idempotency key is not evidence for any intent, whatever its state says (or lacks):
  // acknowledged and ignored, so the provider does not redeliver it for days.
  const keyValue = at(m.key);
  let key: string | undefined;
  if (keyValue === undefined || keyValue === null) {
    if (id.success) return { kind: 'ignored', deliveryId: id.data, reason: 'the event names no idempotency key' };
  } else {
    const parsed = idempotencyKeySchema.safeParse(keyValue);
    if (parsed.success) key = parsed.data;
    else
      problems.push(
        problem(formatJsonPath(m.key), `must be an idempotency key: ${parsed.error.issues[0]!.message}`, keyValue),
      );
  }

  let error: WebhookDelivery['error'];
  if (m.error) {
    const value = at(m.error);
    if (value !== undefined && value !== null) {
      const parsed = errorSchema.safeParse(value);
      if (parsed.success) error = parsed.data;
      else
        problems.push(
          problem(formatJsonPath(m.error), 'must be an error object { status?, code?, message? } or a message', value),
        );
    }
  }

  if (problems.length > 0 || !id.success || key === undefined || state === undefined || state === 'from-state')
    return { kind: 'invalid', problems };

  let result: JsonValue | undefined;
  if (m.result && state === 'succeeded') {
    const value = at(m.result) as JsonValue | undefined;
    if (value !== undefined) {
      const size = Buffer.byteLength(JSON.stringify(value));
      result =
        size > MAX_RESULT_BYTES ? { omitted: `result of ${size} bytes, larger than ${MAX_RESULT_BYTES}` } : value;
    }
  }

  const delivery: WebhookDelivery = {
    source: source.name,
    deliveryId: id.data,
    state,
    receivedAt: receivedAt.toISOString(),
    ...(eventType !== undefined ? { eventType } : {}),
    ...(providerState !== undefined ? { providerState } : {}),
    ...(result !== undefined ? { result } : {}),
    ...(error !== undefined && state === 'failed' ? { error } : {}),
  };
  return { kind: 'evidence', key, delivery };
}
