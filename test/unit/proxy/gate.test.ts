import { describe, expect, it } from 'vitest';
import { Gate, gateKey } from '../../../src/proxy/index.js';
import { scripted, startTestProxy, startUpstream, T0 } from './proxy-harness.js';

const key = { authorization: 'Bearer sk_test_one' };

describe('the gate in the proxy', () => {
  it('after a 429 with Retry-After, answers the same upstream and credential locally until the permitted time', async () => {
    const up = await scripted(
      { status: 429, headers: { 'retry-after': '30' }, body: 'limit' },
      { status: 200, body: 'ok' },
    );
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });

    const first = await proxy.call('/acme/x', { headers: key });
    expect(first.status).toBe(429);
    expect(first.outcome).toBe('retry_after_over_cap');
    expect(first.gated).toBe('false');

    proxy.time.advance(10_000);
    const second = await proxy.call('/acme/y', { headers: key });
    expect(second.status).toBe(429);
    expect(second.headers['retry-after']).toBe('20');
    expect(second.gated).toBe('true');
    expect(second.outcome).toBe('gated');
    expect(second.attempts).toBe(0);
    expect(second.json.error).toMatchObject({
      code: 'gated',
      upstream: 'acme',
      retryAfterMs: 20_000,
      permittedAt: new Date(T0 + 30_000).toISOString(),
    });
    expect(up.received).toHaveLength(1);

    proxy.time.advance(20_000);
    const third = await proxy.call('/acme/z', { headers: key });
    expect(third.status).toBe(200);
    expect(up.received).toHaveLength(2);
  });

  it('rounds the remaining Retry-After up to whole seconds, never 0', async () => {
    const up = await scripted({ status: 429, headers: { 'retry-after': '20' } });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    await proxy.call('/acme/x', { headers: key });
    proxy.time.advance(19_999);
    const res = await proxy.call('/acme/x', { headers: key });
    expect(res.headers['retry-after']).toBe('1');
  });

  it('keeps credentials apart: another API key still reaches the upstream', async () => {
    const up = await scripted({ status: 429, headers: { 'retry-after': '30' } }, { status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    await proxy.call('/acme/x', { headers: key });
    const other = await proxy.call('/acme/x', { headers: { authorization: 'Bearer sk_test_two' } });
    expect(other.status).toBe(200);
    expect((await proxy.call('/acme/x', { headers: { 'x-api-key': 'k3' } })).status).toBe(200);
    expect(up.received).toHaveLength(3);
  });

  it('keeps upstreams apart', async () => {
    const limited = await scripted({ status: 429, headers: { 'retry-after': '30' } });
    const fine = await scripted({ status: 200 });
    const proxy = await startTestProxy({ upstreams: { a: limited.url, b: fine.url } });
    await proxy.call('/a/x', { headers: key });
    expect((await proxy.call('/b/x', { headers: key })).status).toBe(200);
  });

  it('also answers writes locally while closed (nothing is sent, so nothing can have happened)', async () => {
    const up = await scripted({ status: 429, headers: { 'retry-after': '30' } });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    await proxy.call('/acme/x', { headers: key });
    const res = await proxy.call('/acme/charges', { method: 'POST', headers: key, body: '{}' });
    expect(res.status).toBe(429);
    expect(res.gated).toBe('true');
    expect(up.received).toHaveLength(1);
  });

  it('is not closed by a 429 without Retry-After, nor by a 503 with one', async () => {
    const up = await scripted(
      { status: 429 },
      { status: 429 },
      { status: 429 },
      { status: 429 },
      { status: 503, headers: { 'retry-after': '30' } },
      { status: 200 },
    );
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    expect((await proxy.call('/acme/x', { headers: key })).status).toBe(429);
    expect((await proxy.call('/acme/x', { headers: key })).status).toBe(503);
    expect((await proxy.call('/acme/x', { headers: key })).status).toBe(200);
  });

  it('holds a retry back until the gate opens when another request closed it for longer', async () => {
    // A's first attempt is answered 503 only after B's 429 closed the gate for 2 s: A waits 2 s, not 250 ms.
    let answerA: ((status: number) => void) | undefined;
    const up = await startUpstream((req, i, res) => {
      if (i === 0) {
        answerA = (status) => res.writeHead(status).end();
        return 'handled';
      }
      if (i === 1) return { status: 429, headers: { 'retry-after': '2' } };
      return { status: 200, body: req.url };
    });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const a = proxy.call('/acme/a', { headers: key });
    await expect.poll(() => answerA).toBeDefined();
    const b = await proxy.call('/acme/b', { headers: { ...key, 'retryq-max-retries': '0' } });
    expect(b.status).toBe(429);
    answerA?.(503);
    const res = await a;
    expect(res.status).toBe(200);
    expect(res.text).toBe('/a');
    expect(proxy.time.waits).toEqual([2000]);
  });

  it('answers a waiting retry locally when another request closed the gate past its planned time', async () => {
    const up = await scripted({ status: 503 }, { status: 429, headers: { 'retry-after': '30' } }, { status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    proxy.time.hold = true;
    const a = proxy.call('/acme/a', { headers: key });
    await expect.poll(() => proxy.time.waits).toEqual([250]);
    const b = await proxy.call('/acme/b', { headers: { ...key, 'retryq-max-retries': '0' } });
    expect(b.status).toBe(429);
    proxy.time.release();
    const res = await a;
    expect(res.status).toBe(429);
    expect(res.gated).toBe('true');
    expect(res.attempts).toBe(1);
    expect(up.received).toHaveLength(2);
  });

  it('does nothing when turned off: every request reaches the upstream', async () => {
    const up = await scripted({ status: 429, headers: { 'retry-after': '30' } });
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, gate: false });
    await proxy.call('/acme/x', { headers: key });
    const res = await proxy.call('/acme/x', { headers: key });
    expect(res.gated).toBe('false');
    expect(up.received).toHaveLength(2);
  });

  it('is counted in the metrics', async () => {
    const up = await scripted({ status: 429, headers: { 'retry-after': '30' } });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    await proxy.call('/acme/x', { headers: key });
    await proxy.call('/acme/x', { headers: key });
    await proxy.call('/acme/x', { headers: key });
    const text = (await proxy.call('/metrics')).text;
    expect(text).toContain('retryq_proxy_gated_responses_total{upstream="acme"} 2');
    expect(text).toContain('retryq_proxy_gate_closures_total{upstream="acme"} 1');
    expect(text).toContain('retryq_proxy_upstream_requests_total{upstream="acme",status="429"} 1');
  });
});

describe('Gate', () => {
  it('never shortens a closure, and opens at the permitted time', () => {
    const gate = new Gate();
    expect(gate.close('k', 1_000 + 30_000, 1_000)).toBe(true);
    expect(gate.close('k', 1_000 + 10_000, 1_000)).toBe(false);
    expect(gate.opensAt('k', 30_999)).toBe(31_000);
    expect(gate.opensAt('k', 31_000)).toBeUndefined();
    expect(gate.size).toBe(0);
  });

  it('ignores a permitted time that has already passed', () => {
    const gate = new Gate();
    expect(gate.close('k', 5, 10)).toBe(false);
    expect(gate.opensAt('k', 10)).toBeUndefined();
  });

  it('bounds one closure by maxClosedMs', () => {
    const gate = new Gate({ maxClosedMs: 60_000 });
    gate.close('k', 365 * 86_400_000, 0);
    expect(gate.opensAt('k', 0)).toBe(60_000);
  });

  it('remembers at most maxKeys keys, dropping expired ones first, then the oldest', () => {
    const gate = new Gate({ maxKeys: 2 });
    gate.close('expired', 5, 0);
    gate.close('old', 100, 0);
    gate.close('new', 100, 10); // 3 keys > 2: 'expired' is swept
    expect(gate.opensAt('old', 10)).toBe(100);
    gate.close('newest', 100, 10); // still 3: the oldest ('old') goes
    expect(gate.opensAt('old', 10)).toBeUndefined();
    expect(gate.opensAt('new', 10)).toBe(100);
    expect(gate.opensAt('newest', 10)).toBe(100);
  });

  it('rejects invalid options naming them', () => {
    expect(() => new Gate({ maxClosedMs: -1 })).toThrow(/maxClosedMs must be a finite number of ms ≥ 0/);
    expect(() => new Gate({ maxKeys: 0 })).toThrow(/maxKeys must be an integer ≥ 1/);
  });
});

describe('gateKey', () => {
  it('is the upstream alone when the request carries no credential', () => {
    expect(gateKey('acme', ['Accept', 'application/json'])).toBe('acme');
  });

  it('fingerprints credential headers without containing them', () => {
    const a = gateKey('acme', ['Authorization', 'Bearer sk_live_secret']);
    expect(a).toMatch(/^acme#[0-9a-f]{16}$/);
    expect(a).not.toContain('sk_live_secret');
    expect(gateKey('acme', ['authorization', 'Bearer sk_live_secret'])).toBe(a);
    expect(gateKey('acme', ['Authorization', 'Bearer sk_live_other'])).not.toBe(a);
    expect(gateKey('acme', ['X-Api-Key', 'Bearer sk_live_secret'])).not.toBe(a);
  });
});
