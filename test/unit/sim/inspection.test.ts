import { describe, expect, it } from 'vitest';
import { FakeClock, useSimHarness, waitFor } from './sim-harness.js';

const { start, call } = useSimHarness();

const inspect = (key: string): { method: string; path: string } => ({
  method: 'GET',
  path: `/v1/operations/${encodeURIComponent(key)}`,
});

describe('the operation status endpoint GET /v1/operations/{idempotencyKey}', () => {
  it('reports a succeeded operation with its result, operation id and creation time', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario: { clockOffsetMs: 5_000 } });
    const created = await call(sim, { idempotencyKey: 'order-1', body: { amount: 7 } });
    const res = await call(sim, inspect('order-1'));
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      idempotencyKey: 'order-1',
      status: 'succeeded',
      operationId: created.json['id'],
      createdAt: new Date(clock.t + 5_000).toISOString(),
      result: (created.json as { result: unknown }).result,
    });
  });

  it('answers 404 operation_not_found for a key nothing was saved under', async () => {
    const sim = await start();
    const res = await call(sim, inspect('never-sent'));
    expect(res.status).toBe(404);
    expect(res.json.error?.code).toBe('operation_not_found');
  });

  it('decodes percent-encoded keys and answers 400 for malformed encodings', async () => {
    const sim = await start();
    await call(sim, { idempotencyKey: 'intent:a/b c' });
    expect((await call(sim, inspect('intent:a/b c'))).json['status']).toBe('succeeded');
    const bad = await call(sim, { method: 'GET', path: '/v1/operations/%E0%A4%A' });
    expect(bad.status).toBe(400);
    expect(bad.json.error?.code).toBe('invalid_request');
  });

  it('reports pending while the operation is still in flight', async () => {
    const sim = await start({ scenario: { latencyMs: 300 } });
    const write = call(sim, { idempotencyKey: 'slow' });
    await waitFor(() => sim.operations().length === 1, 'the operation to start');
    const res = await call(sim, inspect('slow'));
    expect(res.json).toMatchObject({ status: 'pending' });
    expect(res.json['result']).toBeUndefined();
    await write;
  });

  it('reports failed with the error for a scripted error recorded against the key, and replays that error', async () => {
    const sim = await start({
      scenario: {
        rules: [
          {
            match: { idempotencyKey: 'bad-*' },
            steps: [{ status: 400, code: 'amount_too_small', message: 'Amount must be ≥ 50.', record: true }],
          },
        ],
      },
    });
    const first = await call(sim, { idempotencyKey: 'bad-1', body: { amount: 1 } });
    expect(first.status).toBe(400);
    const res = await call(sim, inspect('bad-1'));
    expect(res.json).toMatchObject({
      status: 'failed',
      error: { status: 400, code: 'amount_too_small', message: 'Amount must be ≥ 50.' },
    });
    expect(sim.sideEffects('bad-1')).toBe(0);
    sim.updateScenario({ rules: [] });
    const replay = await call(sim, { idempotencyKey: 'bad-1', body: { amount: 1 } });
    expect(replay.status).toBe(400);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json.error?.code).toBe('amount_too_small');
  });

  it('requires the same authentication as writes', async () => {
    const sim = await start();
    expect((await call(sim, { ...inspect('x'), key: null })).status).toBe(401);
  });

  it('has its own read budget: inspections still work when the write limit is exhausted', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario: { rateLimitPerMinute: 1, inspectPerMinute: 5 } });
    await call(sim, { idempotencyKey: 'k' });
    expect((await call(sim, { idempotencyKey: 'k2' })).status).toBe(429);
    expect((await call(sim, inspect('k'))).status).toBe(200);
  });

  it('answers 429 rate_limit_exceeded with Retry-After when the inspection budget is used, while writes still pass', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario: { inspectPerMinute: 2 } });
    await call(sim, { idempotencyKey: 'k' });
    expect((await call(sim, inspect('k'))).status).toBe(200);
    clock.advance(12_000);
    expect((await call(sim, inspect('k'))).status).toBe(200);
    const limited = await call(sim, inspect('k'));
    expect(limited.status).toBe(429);
    expect(limited.json.error?.code).toBe('rate_limit_exceeded');
    expect(limited.headers['retry-after']).toBe('48');
    expect((await call(sim, { idempotencyKey: 'k3' })).status).toBe(201);
    expect(sim.metrics().keys['acme-prod']).toMatchObject({ inspections: 2, rateLimited: 1 });
  });

  it('honours a key-level inspectPerMinute', async () => {
    const sim = await start({ scenario: { keys: [{ key: 'sk_test_acme', inspectPerMinute: 1 }] } });
    expect((await call(sim, inspect('a'))).status).toBe(404);
    expect((await call(sim, inspect('a'))).status).toBe(429);
  });

  it('applies rules that name GET, so inspection failures can be scripted too', async () => {
    const sim = await start({
      scenario: {
        rules: [
          {
            match: { method: 'GET', pathPrefix: '/v1/operations/' },
            steps: [{ status: 503, retryAfter: 2 }],
            then: 'normal',
          },
        ],
      },
    });
    await call(sim, { idempotencyKey: 'k' });
    const failing = await call(sim, inspect('k'));
    expect(failing.status).toBe(503);
    expect(failing.headers['retry-after']).toBe('2');
    expect((await call(sim, inspect('k'))).status).toBe(200);
  });
});
