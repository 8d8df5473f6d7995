/**
 * The simulator's write limits (src/sim/write-limits.ts, scenario `rateLimit`): the three algorithms,
 * the header families the answers carry, per-route buckets with the global flag, and the scenario's
 * validation. Real HTTP against a simulator on port 0, its clock moved by hand; the headers are read
 * back with retryq's own parser, so the two halves agree.
 */
import { describe, expect, it } from 'vitest';
import { parseRateLimitHeaders } from '../../../src/policy/index.js';
import { isScenarioError, loadScenarioFile, parseScenario } from '../../../src/sim/index.js';
import type { ScenarioInput } from '../../../src/sim/index.js';
import { WriteLimits } from '../../../src/sim/write-limits.js';
import { FakeClock, useSimHarness } from './sim-harness.js';
import type { SimResponse } from './sim-harness.js';

const { start, call } = useSimHarness();

async function simWith(rateLimit: ScenarioInput['rateLimit'], perMinute = 3, extra: ScenarioInput = {}) {
  const clock = new FakeClock();
  const sim = await start({ now: clock.now, scenario: { rateLimitPerMinute: perMinute, rateLimit, ...extra } });
  return { clock, sim };
}

const statuses = async (sim: { url: string }, n: number, path?: string): Promise<number[]> => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await call(sim, path === undefined ? {} : { path })).status);
  return out;
};

describe('the write limit by algorithm', () => {
  it('sliding window (the default): admits the limit in any 60 s, again as each write leaves the window', async () => {
    const { clock, sim } = await simWith({});
    expect(await statuses(sim, 1)).toEqual([201]);
    clock.advance(30_000);
    expect(await statuses(sim, 3)).toEqual([201, 201, 429]);
    clock.advance(30_000); // the first write leaves the window: one more fits, not three
    expect(await statuses(sim, 2)).toEqual([201, 429]);
  });

  it('fixed window: the count starts again at each whole minute of the clock', async () => {
    const { clock, sim } = await simWith({ algorithm: 'fixed-window' });
    clock.advance(59_000);
    expect(await statuses(sim, 4)).toEqual([201, 201, 201, 429]);
    clock.advance(1_000); // a new window: the full limit again, one second later
    expect(await statuses(sim, 4)).toEqual([201, 201, 201, 429]);
  });

  it('token bucket: a burst up to its capacity, then one write per interval as tokens refill continuously', async () => {
    const { clock, sim } = await simWith({ algorithm: 'token-bucket', burst: 2 }, 60);
    expect(await statuses(sim, 3)).toEqual([201, 201, 429]);
    clock.advance(999);
    expect(await statuses(sim, 1)).toEqual([429]);
    clock.advance(1); // 60 per minute: a token every second
    expect(await statuses(sim, 2)).toEqual([201, 429]);
    clock.advance(10_000); // refilled, but never past the capacity
    expect(await statuses(sim, 3)).toEqual([201, 201, 429]);
  });

  it('token bucket: Retry-After says when the next token comes, rounded up to a whole second', async () => {
    const { clock, sim } = await simWith({ algorithm: 'token-bucket' }, 6); // a token every 10 s, capacity 6
    await statuses(sim, 6);
    clock.advance(2_500);
    const limited = await call(sim);
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toBe('8');
  });
});

describe('WriteLimits, the token bucket', () => {
  it('reports remaining and the reset: until full while tokens are left, until the next token when none are', () => {
    const limits = new WriteLimits();
    const spec = { algorithm: 'token-bucket' as const, perMinute: 60 };
    expect(limits.commit('k', spec, 0)).toEqual({ admitted: true, remaining: 59, resetMs: 1_000 });
    for (let i = 0; i < 58; i++) limits.commit('k', spec, 0);
    expect(limits.commit('k', spec, 0)).toEqual({ admitted: true, remaining: 0, resetMs: 1_000 });
    expect(limits.check('k', spec, 400)).toEqual({ admitted: false, remaining: 0, resetMs: 600, waitMs: 600 });
    expect(limits.check('k', spec, 1_000)).toMatchObject({ admitted: true, remaining: 0 });
  });

  it('check records nothing', () => {
    const limits = new WriteLimits();
    const spec = { algorithm: 'sliding-window' as const, perMinute: 1 };
    for (let i = 0; i < 5; i++) expect(limits.check('k', spec, 0).admitted).toBe(true);
    limits.commit('k', spec, 0);
    expect(limits.check('k', spec, 0).admitted).toBe(false);
  });
});

describe('the rate-limit headers', () => {
  const learned = (res: SimResponse, nowMs: number) => parseRateLimitHeaders(res.headers, { nowMs });

  it('sends none by default', async () => {
    const { sim } = await simWith({});
    const res = await call(sim);
    expect(Object.keys(res.headers).filter((h) => h.includes('ratelimit'))).toEqual([]);
  });

  it('ietf: RateLimit-Policy and RateLimit in the current form, read back as the key’s limit', async () => {
    const { clock, sim } = await simWith({ headers: 'ietf' }, 60);
    const res = await call(sim);
    expect(res.headers['ratelimit-policy']).toBe('"default";q=60;w=60');
    expect(res.headers['ratelimit']).toBe('"default";r=59;t=60');
    expect(learned(res, clock.t)).toMatchObject({
      kind: 'limit',
      source: 'ietf',
      limit: { quota: 60, windowMs: 60_000 },
      remaining: 59,
      resetAtMs: clock.t + 60_000,
    });
  });

  it('ietf-draft: RateLimit-Limit, -Remaining and -Reset', async () => {
    const { clock, sim } = await simWith({ headers: 'ietf-draft', algorithm: 'fixed-window' }, 2);
    clock.advance(45_000);
    await call(sim);
    const res = await call(sim);
    expect(res.headers).toMatchObject({ 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '15' });
    expect(learned(res, clock.t)).toMatchObject({ source: 'ietf-draft', remaining: 0, resetAtMs: clock.t + 15_000 });
  });

  it.each([
    ['x-ratelimit-seconds' as const, 'delay'],
    ['x-ratelimit-epoch' as const, 'epoch-seconds'],
  ])('%s: the reset read back lands on the same instant (%s)', async (headers, resetForm) => {
    // The server's clock runs 5 s behind; an epoch reset is on that clock, the Date header too.
    const { clock, sim } = await simWith({ headers, algorithm: 'fixed-window' }, 1, { clockOffsetMs: -5_000 });
    clock.advance(20_000);
    const ok = await call(sim);
    expect(ok.headers['x-ratelimit-limit']).toBe('1');
    expect(ok.headers['x-ratelimit-remaining']).toBe('0');
    const limited = await call(sim);
    expect(limited.status).toBe(429);
    for (const res of [ok, limited]) {
      expect(learned(res, clock.t)).toMatchObject({
        source: 'x-ratelimit',
        remaining: 0,
        resetAtMs: clock.t + 40_000,
        resetForm,
      });
    }
  });

  it('carries the headers on every answer to an admitted write, scripted errors included', async () => {
    const { sim } = await simWith({ headers: 'x-ratelimit-seconds' }, 60, {
      rules: [{ match: { idempotencyKey: 'e-*' }, steps: [{ status: 503 }] }],
    });
    const res = await call(sim, { idempotencyKey: 'e-1' });
    expect(res.status).toBe(503);
    expect(res.headers['x-ratelimit-remaining']).toBe('59');
  });
});

describe('route buckets', () => {
  const twoBuckets = (headers: 'ietf' | 'x-ratelimit-seconds' = 'x-ratelimit-seconds') => ({
    headers,
    buckets: [
      { name: 'charges', pathPrefix: '/v1/charges', perMinute: 2 },
      { name: 'refunds', pathPrefix: '/v1/refunds', perMinute: 2 },
    ],
  });

  it('limits each bucket on its own: a full bucket leaves the other route flowing', async () => {
    const { sim } = await simWith(twoBuckets(), 100);
    expect(await statuses(sim, 3, '/v1/charges')).toEqual([201, 201, 429]);
    expect(await statuses(sim, 2, '/v1/refunds')).toEqual([201, 201]);
  });

  it('names the bucket on its answers and its 429, and says the 429 is not global', async () => {
    const { clock, sim } = await simWith(twoBuckets(), 100);
    await call(sim, { path: '/v1/charges' });
    await call(sim, { path: '/v1/charges' });
    const limited = await call(sim, { path: '/v1/charges' });
    expect(limited.headers['x-ratelimit-bucket']).toBe('charges');
    expect(limited.headers['x-ratelimit-global']).toBeUndefined();
    expect(parseRateLimitHeaders(limited.headers, { nowMs: clock.t })).toMatchObject({
      remaining: 0,
      scope: { kind: 'bucket', name: 'charges', from: 'X-RateLimit-Bucket' },
      global: false,
    });
  });

  it('flags the key’s own limit as global: its 429 holds every route', async () => {
    const { clock, sim } = await simWith(twoBuckets(), 3);
    expect(await statuses(sim, 2, '/v1/charges')).toEqual([201, 201]);
    expect(await statuses(sim, 1, '/v1/refunds')).toEqual([201]);
    const limited = await call(sim, { path: '/v1/refunds' });
    expect(limited.status).toBe(429);
    expect(limited.headers['x-ratelimit-global']).toBe('true');
    const learned = parseRateLimitHeaders(limited.headers, { nowMs: clock.t });
    expect(learned).toMatchObject({ global: true });
    // A write refused by its bucket does not use the key's limit; one refused by the key does not use its bucket's.
    clock.advance(60_000);
    expect(await statuses(sim, 3, '/v1/refunds')).toEqual([201, 201, 429]);
  });

  it('lists both policies in the IETF form; the reader takes the binding one', async () => {
    const { clock, sim } = await simWith(twoBuckets('ietf'), 100);
    const res = await call(sim, { path: '/v1/charges' });
    expect(res.headers['ratelimit-policy']).toBe('"charges";q=2;w=60, "default";q=100;w=60');
    expect(res.headers['ratelimit']).toBe('"charges";r=1;t=60, "default";r=99;t=60');
    expect(parseRateLimitHeaders(res.headers, { nowMs: clock.t })).toMatchObject({
      limit: { quota: 2, policy: 'charges' },
      remaining: 1,
      scope: { kind: 'bucket', name: 'charges' },
    });
  });

  it('names the bucket in X-RateLimit-Resource when asked, and in no header with none', async () => {
    const resource = await simWith({ ...twoBuckets(), bucketHeader: 'X-RateLimit-Resource' }, 100);
    expect((await call(resource.sim)).headers['x-ratelimit-resource']).toBe('charges');
    const none = await simWith({ ...twoBuckets(), bucketHeader: 'none' }, 100);
    const res = await call(none.sim);
    expect(res.headers['x-ratelimit-bucket']).toBeUndefined();
    expect(res.headers['x-ratelimit-resource']).toBeUndefined();
  });

  it('matches a bucket by method when it names one', async () => {
    const { sim } = await simWith(
      { buckets: [{ name: 'deletes', pathPrefix: '/v1/', method: 'DELETE', perMinute: 1 }] },
      100,
    );
    expect((await call(sim, { method: 'DELETE' })).status).toBe(200);
    expect((await call(sim, { method: 'DELETE' })).status).toBe(429);
    expect((await call(sim, { method: 'POST' })).status).toBe(201);
  });
});

describe('scenario validation of rateLimit', () => {
  function problems(input: unknown): string {
    try {
      parseScenario(input);
    } catch (error) {
      if (isScenarioError(error)) return error.message;
      throw error;
    }
    throw new Error('expected a ScenarioError');
  }

  it('fills in the defaults', () => {
    expect(parseScenario({}).rateLimit).toEqual({
      algorithm: 'sliding-window',
      headers: 'none',
      bucketHeader: 'X-RateLimit-Bucket',
      buckets: [],
    });
  });

  it.each([
    [{ algorithm: 'leaky' }, /rateLimit\.algorithm: expected one of sliding-window, fixed-window, token-bucket/],
    [
      { headers: 'x-ratelimit' },
      /rateLimit\.headers: expected one of none, ietf, ietf-draft, x-ratelimit-seconds, x-ratelimit-epoch/,
    ],
    [{ burst: 5 }, /rateLimit\.burst: burst applies only to algorithm 'token-bucket'/],
    [{ algorithm: 'token-bucket', burst: 0 }, /rateLimit\.burst/],
    [
      { buckets: [{ name: 'a b', pathPrefix: '/v1', perMinute: 1 }] },
      /rateLimit\.buckets\[0\]\.name: expected a bucket name/,
    ],
    [
      { buckets: [{ name: 'a', pathPrefix: 'v1', perMinute: 1 }] },
      /rateLimit\.buckets\[0\]\.pathPrefix: expected a path starting with '\/'/,
    ],
    [
      { buckets: [{ name: 'a', pathPrefix: '/v1' }] },
      /rateLimit\.buckets\[0\]\.perMinute: required: writes per minute/,
    ],
    [
      {
        buckets: [
          { name: 'a', pathPrefix: '/v1', perMinute: 1 },
          { name: 'a', pathPrefix: '/v2', perMinute: 1 },
        ],
      },
      /rateLimit\.buckets\[1\]\.name: duplicate bucket name/,
    ],
    [
      { bucketHeader: 'X-Bucket' },
      /rateLimit\.bucketHeader: expected one of X-RateLimit-Bucket, X-RateLimit-Resource, none/,
    ],
    [
      { windowMs: 1000 },
      /rateLimit\.windowMs: unknown field; allowed fields: algorithm, burst, headers, bucketHeader, buckets/,
    ],
  ])('refuses %j, naming the field and what is allowed', (rateLimit, message) => {
    expect(problems({ rateLimit })).toMatch(message);
  });
});

describe('the shipped scenarios', () => {
  it('learned-limits.yaml: a 60-per-minute token bucket of 10 that announces itself in IETF headers', async () => {
    const scenario = await loadScenarioFile(
      new URL('../../../src/sim/scenarios/learned-limits.yaml', import.meta.url).pathname,
    );
    const clock = new FakeClock();
    const sim = await start({ now: clock.now, scenario });
    expect(await statuses(sim, 11)).toEqual([...Array<number>(10).fill(201), 429]);
    const res = await call(sim);
    expect(parseRateLimitHeaders(res.headers, { nowMs: clock.t })).toMatchObject({
      source: 'ietf',
      limit: { quota: 60, windowMs: 60_000 },
      remaining: 0,
    });
  });

  it('route-buckets.yaml: two buckets of 60 on one key, named in X-RateLimit-Bucket', async () => {
    const scenario = await loadScenarioFile(
      new URL('../../../src/sim/scenarios/route-buckets.yaml', import.meta.url).pathname,
    );
    expect(scenario.rateLimit.buckets.map((b) => [b.name, b.perMinute])).toEqual([
      ['charges', 60],
      ['refunds', 60],
    ]);
    const sim = await start({ scenario });
    expect((await call(sim, { path: '/v1/refunds' })).headers['x-ratelimit-bucket']).toBe('refunds');
  });
});
