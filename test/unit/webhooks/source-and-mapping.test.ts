/**
 * Webhook sources at the configuration boundary (zod, every problem named by its path, secrets never shown),
 * JSON paths, the mapping from a delivery to evidence, and both signature schemes.
 */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig, resolveWebhookSecrets } from '../../../src/config.js';
import { ConfigError } from '../../../src/errors.js';
import { mapDelivery } from '../../../src/webhooks/mapping.js';
import { formatJsonPath, parseJsonPath, readJsonPath, webhookSourceSchema } from '../../../src/webhook-config.js';
import { standardWebhookHeaders, verifierFor } from '../../../src/webhooks/verify.js';

const SECRET = `whsec_${Buffer.from('unit-test-secret-of-some-length').toString('base64')}`;

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('RETRYQ_WEBHOOK_SOURCES', () => {
  it('parses a Standard Webhooks source with defaults and the receiver settings', () => {
    const config = loadConfig({
      RETRYQ_WEBHOOK_SOURCES: JSON.stringify([
        {
          name: 'acme',
          verify: { scheme: 'standard-webhooks', secretEnv: 'ACME_WEBHOOK_SECRET' },
          mapping: { key: 'data.idempotencyKey', state: '$.data.status', result: 'data.result' },
        },
      ]),
      RETRYQ_WEBHOOK_PORT: '9100',
      RETRYQ_WEBHOOK_MAX_BODY: '512KiB',
      RETRYQ_WEBHOOK_TEMPORAL_TIMEOUT: '2s',
    });
    expect(config.webhooks).toMatchObject({ port: 9100, maxBodyBytes: 512 * 1024, temporalTimeoutMs: 2000 });
    const [acme] = config.webhooks.sources;
    expect(acme).toMatchObject({
      name: 'acme',
      verify: { scheme: 'standard-webhooks', tolerance: 300_000 },
      mapping: { deliveryId: { header: 'webhook-id' }, key: ['data', 'idempotencyKey'], state: ['data', 'status'] },
    });
  });

  it('lists every problem with its path, what is allowed, and never a secret value', () => {
    const err = configError({
      RETRYQ_WEBHOOK_SOURCES: JSON.stringify([
        { name: 'Bad Name', verify: { scheme: 'hmac-sha256', secretEnv: 'X' }, mapping: { key: 'a..b' } },
        { name: 'ok', verify: { scheme: 'rot13', secretEnv: 'Y' } },
      ]),
      RETRYQ_WEBHOOK_MAX_BODY: 'lots',
    });
    const where = err.problems.map((p) => p.path);
    expect(where).toEqual(
      expect.arrayContaining([
        'RETRYQ_WEBHOOK_SOURCES[0].name',
        'RETRYQ_WEBHOOK_SOURCES[0].verify.header',
        'RETRYQ_WEBHOOK_SOURCES[0].mapping.key',
        'RETRYQ_WEBHOOK_SOURCES[1].verify.scheme',
        'RETRYQ_WEBHOOK_MAX_BODY',
      ]),
    );
    expect(err.message).toContain('must be a JSON path');
    expect(err.message).toContain('"standard-webhooks" or "hmac-sha256"');
  });

  it('requires a state path unless events fix the state, and a delivery id for hmac sources', () => {
    const err = configError({
      RETRYQ_WEBHOOK_SOURCES: JSON.stringify([
        { name: 'a', verify: { scheme: 'standard-webhooks', secretEnv: 'A' }, mapping: { key: 'k' } },
        {
          name: 'b',
          verify: { scheme: 'hmac-sha256', secretEnv: 'B', header: 'sig', signedPayload: '{timestamp}' },
          mapping: { type: 't', events: { done: 'succeeded' } },
        },
      ]),
    });
    expect(err.problems.map((p) => p.path)).toEqual(
      expect.arrayContaining([
        'RETRYQ_WEBHOOK_SOURCES[0].mapping.state',
        'RETRYQ_WEBHOOK_SOURCES[1].mapping.deliveryId',
        'RETRYQ_WEBHOOK_SOURCES[1].verify.signedPayload',
      ]),
    );
  });

  it('reads secrets from the named variables, and names a missing one without any value', () => {
    const sources = loadConfig({
      RETRYQ_WEBHOOK_SOURCES: JSON.stringify([
        { name: 'a', verify: { scheme: 'standard-webhooks', secretEnv: 'A_SECRET' }, mapping: { state: 's' } },
        { name: 'b', verify: { scheme: 'standard-webhooks', secretEnv: 'B_SECRET' }, mapping: { state: 's' } },
      ]),
    }).webhooks.sources;
    expect(resolveWebhookSecrets(sources, { A_SECRET: 'whsec_old whsec_new', B_SECRET: SECRET })).toEqual(
      new Map([
        ['a', ['whsec_old', 'whsec_new']],
        ['b', [SECRET]],
      ]),
    );
    let err: unknown;
    try {
      resolveWebhookSecrets(sources, { A_SECRET: SECRET });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain('B_SECRET: must hold the signing secret of webhook source b');
    expect((err as Error).message).not.toContain(SECRET);
  });
});

describe('JSON paths', () => {
  it.each([
    ['idempotencyKey', ['idempotencyKey']],
    ['$.data.object.status', ['data', 'object', 'status']],
    ['items[0].id', ['items', 0, 'id']],
    ["meta['idempotency key'].v", ['meta', 'idempotency key', 'v']],
  ])('parses %s', (text, path) => {
    expect(parseJsonPath(text)).toEqual(path);
    expect(parseJsonPath(formatJsonPath(path))).toEqual(path);
  });

  it.each(['', 'a..b', '.a', 'a.', 'a[x]', 'a[0', 'a b'])('rejects %j', (text) => {
    expect(parseJsonPath(text)).toBeUndefined();
  });

  it('reads own properties only', () => {
    expect(readJsonPath({ a: [{ b: 1 }] }, ['a', 0, 'b'])).toBe(1);
    expect(readJsonPath({}, ['constructor'])).toBeUndefined();
    expect(readJsonPath({ a: 'text' }, ['a', 'length'])).toBeUndefined();
  });
});

describe('mapping a delivery', () => {
  const source = webhookSourceSchema.parse({
    name: 'acme',
    verify: { scheme: 'standard-webhooks', secretEnv: 'S' },
    mapping: {
      type: 'type',
      events: { 'charge.updated': 'from-state', 'charge.refunded': 'failed' },
      key: 'data.key',
      state: 'data.status',
      result: 'data.result',
      error: 'data.error',
    },
  });
  const at = new Date('2026-01-01T00:00:00Z');
  const headers = { 'webhook-id': 'msg_1' };

  it('turns a known event into evidence with the provider’s state word and the result', () => {
    expect(
      mapDelivery(
        source,
        headers,
        { type: 'charge.updated', data: { key: 'order-1', status: 'completed', result: { id: 7 } } },
        at,
      ),
    ).toEqual({
      kind: 'evidence',
      key: 'order-1',
      delivery: {
        source: 'acme',
        deliveryId: 'msg_1',
        eventType: 'charge.updated',
        state: 'succeeded',
        providerState: 'completed',
        result: { id: 7 },
        receivedAt: at.toISOString(),
      },
    });
  });

  it('takes the state from the event type and keeps a failed operation’s error', () => {
    const mapped = mapDelivery(
      source,
      headers,
      { type: 'charge.refunded', data: { key: 'order-1', error: { status: 402, code: 'card_declined', extra: 1 } } },
      at,
    );
    expect(mapped).toMatchObject({
      kind: 'evidence',
      delivery: { state: 'failed', error: { status: 402, code: 'card_declined' } },
    });
  });

  it('ignores unknown event types and events without a key', () => {
    expect(mapDelivery(source, headers, { type: 'invoice.paid' }, at)).toMatchObject({ kind: 'ignored' });
    expect(
      mapDelivery(source, headers, { type: 'charge.updated', data: { key: null, status: 'succeeded' } }, at),
    ).toMatchObject({
      kind: 'ignored',
      reason: 'the event names no idempotency key',
    });
  });

  it('ignores an event with neither key nor state, or with no key and a state it cannot read', () => {
    const noKey = { kind: 'ignored', deliveryId: 'msg_1', reason: 'the event names no idempotency key' };
    expect(mapDelivery(source, headers, { type: 'charge.updated', data: {} }, at)).toEqual(noKey);
    expect(mapDelivery(source, headers, { type: 'charge.updated' }, at)).toEqual(noKey);
    expect(mapDelivery(source, headers, { type: 'charge.updated', data: { status: 'exploded' } }, at)).toEqual(noKey);
  });

  it('still refuses an event with no key when its delivery id is missing: it cannot be acknowledged by id', () => {
    const mapped = mapDelivery(source, {}, { type: 'charge.updated', data: {} }, at);
    expect(mapped.kind).toBe('invalid');
    expect(mapped.kind === 'invalid' ? mapped.problems.map((p) => p.path) : []).toContain('headers.webhook-id');
  });

  it('names every problem by its path, with what was received', () => {
    const mapped = mapDelivery(
      source,
      {},
      { type: 'charge.updated', data: { key: 'bad key!', status: 'exploded' } },
      at,
    );
    expect(mapped.kind).toBe('invalid');
    const problems = mapped.kind === 'invalid' ? mapped.problems : [];
    expect(problems.map((p) => p.path)).toEqual(['headers.webhook-id', 'data.status', 'data.key']);
    expect(problems[1]).toMatchObject({ received: 'exploded' });
    expect(problems[1]!.message).toContain('"succeeded"');
  });
});

describe('signature schemes', () => {
  const body = Buffer.from('{"a":1}');
  const now = Date.UTC(2026, 0, 1);

  it('Standard Webhooks: accepts any matching v1 signature among several and a rotated secret', () => {
    const source = webhookSourceSchema.parse({
      name: 's',
      verify: { scheme: 'standard-webhooks', secretEnv: 'S', tolerance: '10m' },
      mapping: { state: 's' },
    });
    const other = `whsec_${Buffer.from('another-secret-for-rotation-01').toString('base64')}`;
    const verify = verifierFor(source.verify, [other, SECRET]);
    const h = standardWebhookHeaders(SECRET, 'msg_1', body, new Date(now - 9 * 60_000));
    const headers = { ...h, 'webhook-signature': `v1,AAAA ${h['webhook-signature']}` };
    expect(verify({ headers, body, nowMs: now })).toEqual({ ok: true });
    expect(verify({ headers, body, nowMs: now + 2 * 60_000 })).toMatchObject({
      ok: false,
      reason: expect.stringContaining('stale') as unknown,
    });
    expect(() => verifierFor(source.verify, ['not base64 !!'])).toThrow(/not a Standard Webhooks secret/);
  });

  it('hmac-sha256: GitHub-style sha256=<hex> without a timestamp', () => {
    const source = webhookSourceSchema.parse({
      name: 'gh',
      verify: { scheme: 'hmac-sha256', secretEnv: 'S', header: 'X-Hub-Signature-256', signatureKey: 'sha256' },
      mapping: { deliveryId: 'header:x-github-delivery', state: 's' },
    });
    const verify = verifierFor(source.verify, ['gh-secret']);
    const sig = createHmac('sha256', 'gh-secret').update(body).digest('hex');
    expect(verify({ headers: { 'x-hub-signature-256': `sha256=${sig}` }, body, nowMs: now })).toEqual({ ok: true });
    expect(verify({ headers: { 'x-hub-signature-256': `sha256=${sig.slice(1)}0` }, body, nowMs: now })).toMatchObject({
      ok: false,
    });
    expect(verify({ headers: {}, body, nowMs: now })).toMatchObject({
      ok: false,
      reason: 'the x-hub-signature-256 header is missing',
    });
  });
});
