import { describe, expect, it } from 'vitest';
import { FakeClock, failureCode, useSimHarness, waitFor } from './sim-harness.js';

const { start, call } = useSimHarness();

describe('GET /_sim/metrics', () => {
  it('reports totals and per-key requests, 429s, other errors by status, side effects, duplicates and inspections', async () => {
    const clock = new FakeClock();
    const sim = await start({
      now: clock.now,
      scenario: {
        rateLimitPerMinute: 3,
        keys: [
          { key: 'sk_a', id: 'a' },
          { key: 'sk_b', id: 'b', spendLimit: 0 },
        ],
        rules: [{ match: { idempotencyKey: 'boom' }, steps: [{ status: 503 }] }],
      },
    });
    await call(sim, { key: 'sk_a', idempotencyKey: 'k1' });
    await call(sim, { key: 'sk_a', idempotencyKey: 'k1' });
    await call(sim, { key: 'sk_a', idempotencyKey: 'boom' });
    await call(sim, { key: 'sk_a' });
    await call(sim, { key: 'sk_a', method: 'GET', path: '/v1/operations/k1' });
    await call(sim, { key: 'sk_b' });
    await call(sim, { key: 'sk_nope' });
    const res = await call(sim, { key: null, method: 'GET', path: '/_sim/metrics' });
    expect(res.status).toBe(200);
    expect(res.json).toEqual(JSON.parse(JSON.stringify(sim.metrics())) as unknown);
    const metrics = sim.metrics();
    expect(metrics.totals).toMatchObject({
      requests: 7,
      writes: 5,
      inspections: 1,
      rateLimited: 1,
      errorsByStatus: { '401': 1, '402': 1, '503': 1 },
      replays: 1,
      sideEffects: 1,
      duplicates: 0,
    });
    expect(metrics.unauthenticated).toBe(1);
    expect(metrics.keys['a']).toMatchObject({
      requests: 5,
      writes: 4,
      rateLimited: 1,
      sideEffects: 1,
      configured: true,
    });
    expect(metrics.keys['b']).toMatchObject({
      requests: 1,
      errorsByStatus: { '402': 1 },
      spendLimit: 0,
      billableOperations: 0,
    });
    expect(metrics.operations).toEqual({ stored: 1, pending: 0, evicted: 0 });
    expect(metrics.at).toBe(new Date(clock.t).toISOString());
  });

  it('computes requests per second over the last 10 s and requests in the last minute on the simulator clock', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now });
    for (let i = 0; i < 20; i++) await call(sim);
    clock.advance(30_000);
    for (let i = 0; i < 5; i++) await call(sim);
    expect(sim.metrics().keys['acme-prod']).toMatchObject({
      requestsPerSecond: 0.5,
      requestsLastMinute: 25,
      requests: 25,
    });
    clock.advance(45_000);
    expect(sim.metrics().totals).toMatchObject({ requestsPerSecond: 0, requestsLastMinute: 5, requests: 25 });
    clock.advance(15_000);
    expect(sim.metrics().totals).toMatchObject({ requestsPerSecond: 0, requestsLastMinute: 0, requests: 25 });
  });

  it('lists configured keys with their limits even before they are used', async () => {
    const sim = await start({ scenario: { keys: [{ key: 'sk_x', id: 'x', rateLimitPerMinute: 7, workspace: 'w' }] } });
    expect(sim.metrics().keys['x']).toMatchObject({
      requests: 0,
      rateLimitPerMinute: 7,
      inspectPerMinute: 300,
      workspace: 'w',
    });
  });
});

describe('admin endpoints under /_sim/', () => {
  it('replace the scenario with PUT /_sim/scenario and answer 400 invalid_scenario naming the bad field', async () => {
    const sim = await start();
    const ok = await call(sim, { key: null, method: 'PUT', path: '/_sim/scenario', body: { rateLimitPerMinute: 1 } });
    expect(ok.status).toBe(200);
    expect(ok.json['rateLimitPerMinute']).toBe(1);
    expect(sim.scenario().rateLimitPerMinute).toBe(1);
    const bad = await call(sim, {
      key: null,
      method: 'PUT',
      path: '/_sim/scenario',
      body: { retryAfterFormat: 'minutes' },
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error?.code).toBe('invalid_scenario');
    expect(bad.json.error?.message).toContain('retryAfterFormat');
    expect((bad.json.error as unknown as { problems: unknown[] }).problems).toEqual([
      { path: 'retryAfterFormat', message: expect.stringContaining('"http-date"') as unknown, received: 'minutes' },
    ]);
    expect(sim.scenario().rateLimitPerMinute).toBe(1);
  });

  it('accept a YAML scenario body with a yaml content type', async () => {
    const sim = await start();
    const res = await call(sim, {
      key: null,
      method: 'PUT',
      path: '/_sim/scenario',
      rawBody: 'rateLimitPerMinute: 9\nkeys:\n  - key: sk_y\n',
      headers: { 'content-type': 'application/yaml' },
    });
    expect(res.status).toBe(200);
    expect(sim.scenario().keys.map((k) => k.key)).toEqual(['sk_y']);
  });

  it('merge top-level fields with PATCH /_sim/scenario and show the scenario with GET', async () => {
    const sim = await start({ scenario: { rateLimitPerMinute: 5, clockOffsetMs: 10 } });
    await call(sim, { key: null, method: 'PATCH', path: '/_sim/scenario', body: { clockOffsetMs: -10 } });
    const res = await call(sim, { key: null, method: 'GET', path: '/_sim/scenario' });
    expect(res.json).toMatchObject({ rateLimitPerMinute: 5, clockOffsetMs: -10 });
  });

  it('forget operations, metrics and windows with POST /_sim/reset but keep the scenario', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario: { rateLimitPerMinute: 1 } });
    await call(sim, { idempotencyKey: 'k' });
    expect((await call(sim, { idempotencyKey: 'k2' })).status).toBe(429);
    expect((await call(sim, { key: null, path: '/_sim/reset' })).json).toEqual({ reset: true });
    expect(sim.operations()).toEqual([]);
    expect(sim.metrics().totals.requests).toBe(0);
    expect((await call(sim, { idempotencyKey: 'k' })).headers['idempotent-replayed']).toBeUndefined();
    expect(sim.scenario().rateLimitPerMinute).toBe(1);
  });

  it('list recorded operations with GET /_sim/operations, filtered by idempotency key', async () => {
    const sim = await start();
    await call(sim, { idempotencyKey: 'a', body: { n: 1 } });
    await call(sim, { idempotencyKey: 'b' });
    const res = await call(sim, { key: null, method: 'GET', path: '/_sim/operations?idempotencyKey=a' });
    expect(res.json['operations']).toMatchObject([
      { idempotencyKey: 'a', request: { n: 1 }, status: 'succeeded', sideEffect: true },
    ]);
  });

  it('start an outage with POST /_sim/outage after answering 202', async () => {
    const sim = await start();
    const bad = await call(sim, { key: null, path: '/_sim/outage', body: { durationMs: 'long' } });
    expect(bad.status).toBe(400);
    const res = await call(sim, { key: null, path: '/_sim/outage', body: { durationMs: 300 } });
    expect(res.status).toBe(202);
    await waitFor(() => !sim.listening, 'the outage to start');
    expect(await failureCode(call(sim))).toBe('ECONNREFUSED');
    await waitFor(() => sim.listening, 'the outage to end');
    expect((await call(sim)).status).toBe(201);
  });

  it('answer 405 for a wrong method and 404 for an unknown admin path', async () => {
    const sim = await start();
    expect((await call(sim, { key: null, method: 'DELETE', path: '/_sim/metrics' })).status).toBe(405);
    expect((await call(sim, { key: null, method: 'GET', path: '/_sim/nothing' })).status).toBe(404);
  });

  it('do not exist when admin is false', async () => {
    const sim = await start({ scenario: { admin: false } });
    expect((await call(sim, { key: null, method: 'GET', path: '/_sim/metrics' })).status).toBe(404);
    expect((await call(sim, { key: null, path: '/_sim/reset' })).status).toBe(404);
    expect(sim.metrics().totals.requests).toBe(0);
  });
});

describe('scenario changes at runtime', () => {
  it('setScenario restarts rule sequences; updateScenario keeps them unless rules are replaced', async () => {
    const rules = [{ steps: [{ status: 500 }, 'normal' as const], then: 'normal' as const, per: 'rule' as const }];
    const sim = await start({ scenario: { rules } });
    expect((await call(sim)).status).toBe(500);
    sim.updateScenario({ clockOffsetMs: 1 });
    expect((await call(sim)).status).toBe(201);
    sim.setScenario({ rules });
    expect((await call(sim)).status).toBe(500);
    sim.updateScenario({ rules });
    expect((await call(sim)).status).toBe(500);
  });

  it('setScenario and updateScenario throw a ScenarioError and keep the old scenario on bad input', async () => {
    const sim = await start({ scenario: { rateLimitPerMinute: 5 } });
    expect(() => sim.updateScenario({ rateLimitPerMinute: -1 })).toThrow(/rateLimitPerMinute/);
    expect(() => sim.setScenario({ keys: [] })).toThrow(/keys: expected at least one API key/);
    expect(sim.scenario().rateLimitPerMinute).toBe(5);
  });
});
