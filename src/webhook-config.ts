/**
 * The webhook receiver's configuration: its environment variables ({@link webhookSettings}) and the webhook
 * sources, how one provider's deliveries are verified and where its events say the operation's idempotency key,
 * state, result and error are. Validated with zod when the configuration is loaded (`RETRYQ_WEBHOOK_SOURCES`);
 * signing secrets are named by environment variable, never written into config. A leaf: `src/config.ts` and the
 * receiver (`src/webhooks/`) both import it.
 *
 * @example
 * ```ts
 * import { webhookSourceSchema } from './webhook-config.js';
 * const source = webhookSourceSchema.parse({
 *   name: 'acme',
 *   verify: { scheme: 'standard-webhooks', secretEnv: 'ACME_WEBHOOK_SECRET' },
 *   mapping: { key: 'data.idempotencyKey', state: 'data.status', result: 'data.result' },
 * });
 * source.mapping.key; // ['data', 'idempotencyKey']
 * ```
 */
import { z } from 'zod';
import { DURATION_HINT, parseDurationMs } from './duration.js';
import type { WebhookState } from './intent.js';
import { byteSize, duration, jsonArray, port, setting, text } from './settings.js';

/** A parsed JSON path: object keys and array indices, in order. */
export type JsonPath = readonly (string | number)[];

const JSON_PATH_HINT = 'a JSON path such as "data.object.status", "$.items[0].id" or "meta[\'idempotency-key\']"';

/**
 * Parses `a.b[0].c`, with an optional leading `$.` and bracketed quoted keys (`meta['a.b']`). Returns `undefined`
 * for anything else.
 */
export function parseJsonPath(text: string): JsonPath | undefined {
  let rest = text.trim();
  if (rest === '$') return [];
  if (rest.startsWith('$.')) rest = rest.slice(2);
  else if (rest.startsWith('$[')) rest = rest.slice(1);
  const out: (string | number)[] = [];
  let i = 0;
  let expectName = true;
  while (i < rest.length) {
    const c = rest[i]!;
    if (c === '[') {
      const close = rest.indexOf(']', i);
      if (close < 0) return undefined;
      const inner = rest.slice(i + 1, close);
      const quoted = /^'([^']*)'$|^"([^"]*)"$/.exec(inner);
      if (quoted) out.push(quoted[1] ?? quoted[2] ?? '');
      else if (/^\d{1,6}$/.test(inner)) out.push(Number(inner));
      else return undefined;
      i = close + 1;
      expectName = false;
      continue;
    }
    if (c === '.') {
      if (expectName) return undefined;
      i++;
      expectName = true;
      continue;
    }
    if (!expectName) return undefined;
    let j = i;
    while (j < rest.length && rest[j] !== '.' && rest[j] !== '[') j++;
    const name = rest.slice(i, j);
    if (!/^[A-Za-z0-9_$@:-]+$/.test(name)) return undefined;
    out.push(name);
    i = j;
    expectName = false;
  }
  if (expectName || out.length === 0) return undefined;
  return out;
}

/** `['data', 'items', 0, 'id']` → `data.items[0].id`, the way problems name a field. */
export function formatJsonPath(path: JsonPath): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (/^[A-Za-z0-9_$@:-]+$/.test(part)) out += out === '' ? part : `.${part}`;
    else out += `['${part}']`;
  }
  return out === '' ? '$' : out;
}

/** The value at `path`, or `undefined` when the path leaves the JSON (own properties only). */
export function readJsonPath(value: unknown, path: JsonPath): unknown {
  let v = value;
  for (const part of path) {
    if (typeof part === 'number') {
      if (!Array.isArray(v) || part >= v.length) return undefined;
      v = v[part] as unknown;
    } else {
      if (v === null || typeof v !== 'object' || Array.isArray(v) || !Object.hasOwn(v, part)) return undefined;
      v = (v as Record<string, unknown>)[part];
    }
  }
  return v;
}

const jsonPathSchema = z.string().transform((text, ctx) => {
  const path = parseJsonPath(text);
  if (!path) {
    ctx.addIssue({ code: 'custom', message: `must be ${JSON_PATH_HINT}` });
    return z.NEVER;
  }
  return path;
});

const durationSchema = (fallback: string) =>
  z
    .union([z.number(), z.string()])
    .default(fallback)
    .transform((v, ctx) => {
      const ms = parseDurationMs(v);
      if (ms === undefined || ms < 1000) {
        ctx.addIssue({ code: 'custom', message: `must be ${DURATION_HINT}, at least 1s` });
        return z.NEVER;
      }
      return ms;
    });

const envVarSchema = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable, like ACME_WEBHOOK_SECRET');
const headerNameSchema = z
  .string()
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name')
  .transform((h) => h.toLowerCase());

/** Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`), HMAC-SHA256. */
const standardWebhooksSchema = z.strictObject({
  scheme: z.literal('standard-webhooks'),
  /** Environment variable holding the signing secret (`whsec_…`); several, space-separated, during a rotation. */
  secretEnv: envVarSchema,
  /** How far `webhook-timestamp` may lie from now, either way. @default '5m' */
  tolerance: durationSchema('5m'),
});

/**
 * One header holding comma-separated `key=value` parts, e.g. `t=1700000000,v1=5257a8…` (Stripe style) or
 * `sha256=5257a8…` (GitHub style); HMAC-SHA256 over `signedPayload`.
 */
const hmacSchema = z.strictObject({
  scheme: z.literal('hmac-sha256'),
  /** Environment variable holding the signing secret (raw text); several, space-separated, during a rotation. */
  secretEnv: envVarSchema,
  /** The header with the signature, e.g. `Acme-Signature`. */
  header: headerNameSchema,
  /** Key of the signature part; it may repeat (rotation). @default 'v1' */
  signatureKey: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, 'must be a word like v1 or sha256')
    .default('v1'),
  /** Key of the Unix-seconds timestamp part; leave out when the provider signs no timestamp (no replay window). */
  timestampKey: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, 'must be a word like t or ts')
    .optional(),
  /** What is signed: `{timestamp}` and `{body}` are replaced. @default '{timestamp}.{body}', or '{body}' without a timestamp */
  signedPayload: z
    .string()
    .refine((t) => t.includes('{body}'), 'must contain {body}: the signature must cover the body')
    .optional(),
  /** How the signature is written. @default 'hex' */
  encoding: z.enum(['hex', 'base64']).default('hex'),
  /** How far the timestamp may lie from now, either way. @default '5m' */
  tolerance: durationSchema('5m'),
});

export const webhookStates: readonly WebhookState[] = ['succeeded', 'failed', 'pending'];

const stateListSchema = (fallback: string[]) => z.array(z.string().min(1).max(100)).min(1).default(fallback);

/** Where the event says what. Paths are JSON paths into the body. */
const mappingSchema = z.strictObject({
  /**
   * Where the delivery id is: `header:<name>` or a JSON path. It must stay the same on every redelivery of one
   * event. @default 'header:webhook-id' (Standard Webhooks)
   */
  deliveryId: z.string().min(1).optional(),
  /** JSON path of the event type. Needed with `events`. */
  type: jsonPathSchema.optional(),
  /**
   * Event types that are evidence, and the state each means (`from-state`: read it from `state`). Other types are
   * acknowledged and ignored (counted). Without `events`, every event is evidence and `state` says its state.
   */
  events: z.record(z.string().min(1).max(200), z.enum(['succeeded', 'failed', 'pending', 'from-state'])).optional(),
  /** JSON path of the operation's idempotency key (the intent's key). @default 'idempotencyKey' */
  key: jsonPathSchema.default(['idempotencyKey']),
  /** JSON path of the operation's state. */
  state: jsonPathSchema.optional(),
  /** Which state values mean what. */
  states: z
    .strictObject({
      succeeded: stateListSchema(['succeeded', 'completed', 'success']),
      failed: stateListSchema(['failed', 'canceled', 'cancelled', 'error']),
      pending: stateListSchema(['pending', 'processing', 'in_progress', 'queued', 'created']),
    })
    .default({
      succeeded: ['succeeded', 'completed', 'success'],
      failed: ['failed', 'canceled', 'cancelled', 'error'],
      pending: ['pending', 'processing', 'in_progress', 'queued', 'created'],
    }),
  /** JSON path of the operation's result (kept with a succeeded intent). */
  result: jsonPathSchema.optional(),
  /** JSON path of a failed operation's error `{ status?, code?, message? }`. */
  error: jsonPathSchema.optional(),
});

/** A delivery id location: a header (lower-cased name) or a JSON path. */
export type DeliveryIdLocation = { header: string } | { path: JsonPath };

/** One configured webhook source. */
export const webhookSourceSchema = z
  .strictObject({
    /** The path segment: deliveries go to `POST /webhooks/<name>`. */
    name: z
      .string()
      .regex(
        /^[a-z0-9][a-z0-9_-]{0,62}$/,
        'must be 1–63 chars of a-z, 0-9, "_" or "-", starting with a letter or digit',
      ),
    verify: z.discriminatedUnion('scheme', [standardWebhooksSchema, hmacSchema], {
      error: 'must name a scheme: "standard-webhooks" or "hmac-sha256"',
    }),
    mapping: mappingSchema.default({
      key: ['idempotencyKey'],
      states: {
        succeeded: ['succeeded', 'completed', 'success'],
        failed: ['failed', 'canceled', 'cancelled', 'error'],
        pending: ['pending', 'processing', 'in_progress', 'queued', 'created'],
      },
    }),
  })
  .superRefine((source, ctx) => {
    const m = source.mapping;
    if (m.deliveryId === undefined && source.verify.scheme !== 'standard-webhooks')
      ctx.addIssue({
        code: 'custom',
        path: ['mapping', 'deliveryId'],
        message: 'is required with the hmac-sha256 scheme: "header:<name>" or a JSON path to the delivery id',
      });
    if (
      m.deliveryId !== undefined &&
      (m.deliveryId.startsWith('header:')
        ? !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(m.deliveryId.slice('header:'.length).trim())
        : !parseJsonPath(m.deliveryId))
    )
      ctx.addIssue({
        code: 'custom',
        path: ['mapping', 'deliveryId'],
        message: `must be "header:<name>" or ${JSON_PATH_HINT}`,
      });
    if (m.events && !m.type)
      ctx.addIssue({ code: 'custom', path: ['mapping', 'type'], message: 'is required with mapping.events' });
    const needsState = !m.events || Object.values(m.events).includes('from-state');
    if (needsState && !m.state)
      ctx.addIssue({
        code: 'custom',
        path: ['mapping', 'state'],
        message: m.events
          ? 'is required when an event maps to "from-state"'
          : 'is required without mapping.events (every event must say its state)',
      });
    const seen = new Map<string, string>();
    for (const state of webhookStates)
      for (const value of m.states[state]) {
        const other = seen.get(value);
        if (other !== undefined && other !== state)
          ctx.addIssue({
            code: 'custom',
            path: ['mapping', 'states', state],
            message: `"${value}" is listed as both ${other} and ${state}`,
          });
        seen.set(value, state);
      }
  })
  .transform((source) => {
    const id = source.mapping.deliveryId ?? 'header:webhook-id';
    const deliveryId: DeliveryIdLocation = id.startsWith('header:')
      ? { header: id.slice('header:'.length).trim().toLowerCase() }
      : { path: parseJsonPath(id) ?? [] };
    const verify =
      source.verify.scheme === 'hmac-sha256'
        ? {
            ...source.verify,
            signedPayload:
              source.verify.signedPayload ?? (source.verify.timestampKey ? '{timestamp}.{body}' : '{body}'),
          }
        : source.verify;
    return { ...source, verify, mapping: { ...source.mapping, deliveryId } };
  });

/** A webhook source as written in configuration. */
export type WebhookSourceInput = z.input<typeof webhookSourceSchema>;
/** A validated webhook source. */
export type WebhookSource = z.output<typeof webhookSourceSchema>;
/** A source's verification settings. */
export type VerifySettings = WebhookSource['verify'];

/** The configured sources: names must be unique. */
export const webhookSourcesSchema = z.array(webhookSourceSchema).superRefine((sources, ctx) => {
  const seen = new Set<string>();
  sources.forEach((s, i) => {
    if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: 'must be unique' });
    seen.add(s.name);
  });
});

/** The webhook receiver (`retryq webhooks`, and `retryq dev` when sources are configured). */
export interface WebhookConfig {
  /** Configured sources; deliveries go to `POST /webhooks/<name>`. @default [] */
  sources: WebhookSource[];
  /** Address the receiver binds. @default '127.0.0.1' */
  ip: string;
  /** The receiver's port. @default 8788 */
  port: number;
  /** Largest delivery body, bytes. @default 1 MiB */
  maxBodyBytes: number;
  /** How long storing a delivery in Temporal may take before the answer is 503, ms. @default 5000 */
  temporalTimeoutMs: number;
}

const owner = 'Webhook receiver';

/** The webhook receiver's environment variables, one row each (see `src/settings.ts`). */
export const webhookSettings = {
  sources: setting({
    name: 'RETRYQ_WEBHOOK_SOURCES',
    owner,
    schema: jsonArray(
      webhookSourcesSchema,
      '[{"name":"acme","verify":{"scheme":"standard-webhooks","secretEnv":"ACME_WEBHOOK_SECRET"},' +
        '"mapping":{"key":"idempotencyKey","state":"status"}}]',
    ),
    default: '[]',
    doc: 'JSON array of sources: `name`, `verify` (scheme, `secretEnv`, tolerance), `mapping` (JSON paths) ([webhooks](webhooks.md#configuring-a-source))',
  }),
  ip: setting({
    name: 'RETRYQ_WEBHOOK_IP',
    owner,
    schema: text,
    default: '127.0.0.1',
    doc: 'address the receiver binds',
  }),
  port: setting({
    name: 'RETRYQ_WEBHOOK_PORT',
    owner,
    schema: port,
    default: '8788',
    doc: "the receiver's port (`retryq webhooks --port` overrides it)",
  }),
  maxBody: setting({
    name: 'RETRYQ_WEBHOOK_MAX_BODY',
    owner,
    schema: byteSize(
      1024,
      64 * 1024 * 1024,
      "must be a size between 1KiB and 64MiB, such as '1MiB', '512KiB' or 1048576",
    ),
    default: '1MiB',
    unit: 'bytes, `KiB`, `MiB`',
    doc: 'largest delivery body (1 KiB to 64 MiB); a larger one gets 413',
  }),
  temporalTimeout: setting({
    name: 'RETRYQ_WEBHOOK_TEMPORAL_TIMEOUT',
    owner,
    schema: duration,
    default: '5s',
    unit: 'duration',
    doc: 'how long Temporal may take to store a delivery before the answer is 503 (the provider redelivers)',
  }),
} as const;
