import { describe, expect, it } from 'vitest';
import { useSimHarness, waitFor } from './sim-harness.js';

const { start, call } = useSimHarness();

describe('an honest provider (honorIdempotencyKeys: true)', () => {
  it('executes a POST with an Idempotency-Key once and answers 201 with the operation', async () => {
    const sim = await start();
    const res = await call(sim, { idempotencyKey: 'order-1', body: { amount: 100 } });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({
      idempotencyKey: 'order-1',
      status: 'succeeded',
      result: { request: { amount: 100 } },
    });
    expect(res.json['id']).toMatch(/^op_/);
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect(sim.sideEffects('order-1')).toBe(1);
  });

  it('replays the original status and body with Idempotent-Replayed: true for the same key and an equal body', async () => {
    const sim = await start();
    const first = await call(sim, {
      idempotencyKey: 'order-1',
      body: { amount: 100, currency: 'eur', meta: { a: 1, b: 2 } },
    });
    const replay = await call(sim, {
      idempotencyKey: 'order-1',
      body: { meta: { b: 2, a: 1 }, currency: 'eur', amount: 100 },
    });
    expect(replay.status).toBe(201);
    expect(replay.text).toBe(first.text);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(sim.sideEffects('order-1')).toBe(1);
    expect(sim.metrics().totals).toMatchObject({ replays: 1, sideEffects: 1, duplicates: 0 });
  });

  it('answers 200 (not 201) for PUT, PATCH and DELETE operations and replays them the same way', async () => {
    const sim = await start();
    for (const method of ['PUT', 'PATCH', 'DELETE']) {
      const res = await call(sim, { method, path: '/v1/things/1', idempotencyKey: `k-${method}` });
      expect(res.status).toBe(200);
      const replay = await call(sim, { method, path: '/v1/things/1', idempotencyKey: `k-${method}` });
      expect(replay.status).toBe(200);
      expect(replay.headers['idempotent-replayed']).toBe('true');
    }
  });

  it('answers 422 idempotency_key_reused for the same key with a different body, and executes nothing', async () => {
    const sim = await start();
    await call(sim, { idempotencyKey: 'order-1', body: { amount: 100 } });
    const res = await call(sim, { idempotencyKey: 'order-1', body: { amount: 200 } });
    expect(res.status).toBe(422);
    expect(res.json.error).toMatchObject({ type: 'idempotency_error', code: 'idempotency_key_reused' });
    expect(sim.sideEffects('order-1')).toBe(1);
  });

  it('answers 422 idempotency_key_reused for the same key on a different path', async () => {
    const sim = await start();
    await call(sim, { idempotencyKey: 'order-1', path: '/v1/charges' });
    const res = await call(sim, { idempotencyKey: 'order-1', path: '/v1/refunds' });
    expect(res.status).toBe(422);
    expect(res.json.error?.code).toBe('idempotency_key_reused');
  });

  it('answers 409 idempotency_key_in_use to a replay that arrives while the first request is still in flight', async () => {
    const sim = await start({
      scenario: { rules: [{ match: { idempotencyKey: 'slow-*' }, steps: [{ delayMs: 400 }] }] },
    });
    const first = call(sim, { idempotencyKey: 'slow-1', body: { n: 1 } });
    await waitFor(
      () => sim.operations({ idempotencyKey: 'slow-1' })[0]?.status === 'pending',
      'the first request to be pending',
    );
    const concurrent = await call(sim, { idempotencyKey: 'slow-1', body: { n: 1 } });
    expect(concurrent.status).toBe(409);
    expect(concurrent.json.error).toMatchObject({ type: 'idempotency_error', code: 'idempotency_key_in_use' });
    expect((await first).status).toBe(201);
    const after = await call(sim, { idempotencyKey: 'slow-1', body: { n: 1 } });
    expect(after.headers['idempotent-replayed']).toBe('true');
    expect(sim.sideEffects('slow-1')).toBe(1);
  });

  it('executes every request without an Idempotency-Key and counts no duplicates for them', async () => {
    const sim = await start();
    await call(sim, { body: { a: 1 } });
    await call(sim, { body: { a: 1 } });
    expect(sim.metrics().totals).toMatchObject({ sideEffects: 2, duplicates: 0 });
    expect(sim.operations().map((o) => o.idempotencyKey)).toEqual([null, null]);
  });

  it('answers 400 invalid_idempotency_key for an Idempotency-Key longer than 255 characters', async () => {
    const sim = await start();
    const res = await call(sim, { idempotencyKey: 'x'.repeat(256) });
    expect(res.status).toBe(400);
    expect(res.json.error?.code).toBe('invalid_idempotency_key');
  });
});

describe('a careless provider (honorIdempotencyKeys: false)', () => {
  it('executes every replay and counts the extra side effects as duplicates, per key and in total', async () => {
    const sim = await start({ scenario: { honorIdempotencyKeys: false } });
    for (let i = 0; i < 3; i++) {
      const res = await call(sim, { idempotencyKey: 'order-1', body: { amount: 100 } });
      expect(res.status).toBe(201);
      expect(res.headers['idempotent-replayed']).toBeUndefined();
    }
    await call(sim, { idempotencyKey: 'order-2' });
    expect(sim.sideEffects('order-1')).toBe(3);
    expect(sim.operations({ idempotencyKey: 'order-1' }).map((o) => o.duplicate)).toEqual([false, true, true]);
    const metrics = sim.metrics();
    expect(metrics.totals).toMatchObject({ sideEffects: 4, duplicates: 2 });
    expect(metrics.keys['acme-prod']?.duplicates).toBe(2);
  });

  it('executes even a different body under a reused key instead of answering 422', async () => {
    const sim = await start({ scenario: { honorIdempotencyKeys: false } });
    await call(sim, { idempotencyKey: 'order-1', body: { amount: 1 } });
    expect((await call(sim, { idempotencyKey: 'order-1', body: { amount: 2 } })).status).toBe(201);
    expect(sim.metrics().totals.duplicates).toBe(1);
  });
});
