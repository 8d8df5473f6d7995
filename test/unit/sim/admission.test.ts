import { describe, expect, it } from 'vitest';
import { formatImfFixdate } from '../../../src/sim/index.js';
import { FakeClock, useSimHarness } from './sim-harness.js';

const { start, call } = useSimHarness();

describe('authentication', () => {
  it('answers 401 invalid_api_key as JSON when the Authorization header is missing', async () => {
    const sim = await start();
    const res = await call(sim, { key: null });
    expect(res.status).toBe(401);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.json.error).toMatchObject({ type: 'authentication_error', code: 'invalid_api_key' });
  });

  it('answers 401 invalid_api_key for a key the scenario does not list', async () => {
    const sim = await start();
    const res = await call(sim, { key: 'sk_live_nope' });
    expect(res.status).toBe(401);
    expect(res.json.error?.code).toBe('invalid_api_key');
    expect(sim.metrics().unauthenticated).toBe(1);
  });

  it('answers 403 permission_denied for a key marked denied, without executing anything', async () => {
    const sim = await start({
      scenario: { keys: [{ key: 'sk_test_acme' }, { key: 'sk_test_ro', permission: 'denied' }] },
    });
    const res = await call(sim, { key: 'sk_test_ro', idempotencyKey: 'k1' });
    expect(res.status).toBe(403);
    expect(res.json.error).toMatchObject({ type: 'permission_error', code: 'permission_denied' });
    expect(sim.sideEffects('k1')).toBe(0);
  });
});

describe('every response', () => {
  it('carries a Date header on the skewed server clock and a Request-Id, errors included', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario: { clockOffsetMs: -90_000 } });
    for (const res of [await call(sim), await call(sim, { key: null }), await call(sim, { path: '/nowhere' })]) {
      expect(res.headers['date']).toBe(formatImfFixdate(clock.t - 90_000));
      expect(res.headers['request-id']).toMatch(/^req_[0-9a-f]{24}$/);
      expect(res.headers['content-type']).toBe('application/json');
    }
  });
});

describe('the per-key rate limit (sliding 60 s window)', () => {
  it('admits up to the limit, then answers 429 rate_limit_exceeded with Retry-After in seconds', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario: { rateLimitPerMinute: 3 } });
    for (let i = 0; i < 3; i++) expect((await call(sim)).status).toBe(201);
    const limited = await call(sim);
    expect(limited.status).toBe(429);
    expect(limited.json.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
    expect(limited.headers['retry-after']).toBe('60');
  });

  it('counts down Retry-After as the window slides and admits again once the oldest request leaves it', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario: { rateLimitPerMinute: 2 } });
    expect((await call(sim)).status).toBe(201);
    clock.advance(20_000);
    expect((await call(sim)).status).toBe(201);
    clock.advance(10_000);
    expect((await call(sim)).headers['retry-after']).toBe('30');
    clock.advance(30_000);
    expect((await call(sim)).status).toBe(201);
    expect((await call(sim)).headers['retry-after']).toBe('20');
  });

  it('does not count rejected requests against the window', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario: { rateLimitPerMinute: 1 } });
    expect((await call(sim)).status).toBe(201);
    for (let i = 0; i < 5; i++) expect((await call(sim)).status).toBe(429);
    clock.advance(60_000);
    expect((await call(sim)).status).toBe(201);
  });

  it('never sends a Retry-After below 1 s, even when the slot frees in a few ms', async () => {
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario: { rateLimitPerMinute: 1 } });
    await call(sim);
    clock.advance(59_990);
    expect((await call(sim)).headers['retry-after']).toBe('1');
    sim.updateScenario({ retryAfterFormat: 'http-date' });
    const res = await call(sim);
    expect(Date.parse(res.headers['retry-after'] ?? '')).toBeGreaterThanOrEqual(
      Date.parse(res.headers['date'] ?? '') + 1_000,
    );
  });

  it('writes Retry-After as an IMF-fixdate computed on the skewed server clock when asked to', async () => {
    const clock = new FakeClock();
    const sim = await start({
      now: clock.now,
      scenario: { rateLimitPerMinute: 1, retryAfterFormat: 'http-date', clockOffsetMs: 300_000 },
    });
    await call(sim);
    clock.advance(15_000);
    const res = await call(sim);
    expect(res.status).toBe(429);
    expect(res.headers['date']).toBe(formatImfFixdate(clock.t + 300_000));
    expect(res.headers['retry-after']).toBe(formatImfFixdate(clock.t + 300_000 + 45_000));
  });

  it('keeps a separate window per API key and honours a key-level limit over the default', async () => {
    const clock = new FakeClock();
    const sim = await start({
      now: clock.now,
      scenario: { rateLimitPerMinute: 1, keys: [{ key: 'sk_a' }, { key: 'sk_b', rateLimitPerMinute: 3 }] },
    });
    expect((await call(sim, { key: 'sk_a' })).status).toBe(201);
    expect((await call(sim, { key: 'sk_a' })).status).toBe(429);
    for (let i = 0; i < 3; i++) expect((await call(sim, { key: 'sk_b' })).status).toBe(201);
    expect((await call(sim, { key: 'sk_b' })).status).toBe(429);
    const metrics = sim.metrics();
    expect(metrics.keys['sk_a']?.rateLimited).toBe(1);
    expect(metrics.keys['sk_b']?.rateLimitPerMinute).toBe(3);
    expect(metrics.totals.rateLimited).toBe(2);
  });
});

describe('the spending gate (separate from the rate limit)', () => {
  it('answers 402 spending_limit_exceeded, never 429, once the key used its spend limit', async () => {
    const sim = await start({ scenario: { keys: [{ key: 'sk_test_acme', spendLimit: 2 }] } });
    expect((await call(sim)).status).toBe(201);
    expect((await call(sim)).status).toBe(201);
    const refused = await call(sim);
    expect(refused.status).toBe(402);
    expect(refused.json.error).toMatchObject({ type: 'billing_error', code: 'spending_limit_exceeded' });
    expect(refused.headers['retry-after']).toBeUndefined();
    expect(sim.metrics().totals).toMatchObject({ rateLimited: 0, sideEffects: 2, errorsByStatus: { '402': 1 } });
  });

  it('answers 403 workspace_allowance_exhausted when the workspace allowance is used up by any of its keys', async () => {
    const sim = await start({
      scenario: {
        workspaceAllowance: 2,
        keys: [
          { key: 'sk_a', workspace: 'acme' },
          { key: 'sk_b', workspace: 'acme' },
          { key: 'sk_c', workspace: 'globex' },
        ],
      },
    });
    expect((await call(sim, { key: 'sk_a' })).status).toBe(201);
    expect((await call(sim, { key: 'sk_b' })).status).toBe(201);
    const refused = await call(sim, { key: 'sk_a' });
    expect(refused.status).toBe(403);
    expect(refused.json.error).toMatchObject({ type: 'billing_error', code: 'workspace_allowance_exhausted' });
    expect((await call(sim, { key: 'sk_c' })).status).toBe(201);
  });

  it('still replays an executed operation after the spend limit is reached (replays are not billable)', async () => {
    const sim = await start({ scenario: { keys: [{ key: 'sk_test_acme', spendLimit: 1 }] } });
    const first = await call(sim, { idempotencyKey: 'pay-1', body: { amount: 5 } });
    const replay = await call(sim, { idempotencyKey: 'pay-1', body: { amount: 5 } });
    expect(replay.status).toBe(first.status);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect((await call(sim, { idempotencyKey: 'pay-2' })).status).toBe(402);
    expect(sim.metrics().keys['sk_test_acme']?.billableOperations).toBe(1);
  });
});
