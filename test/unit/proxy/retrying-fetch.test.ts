import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import type { RetryingFetch, RetryingFetchOptions } from '../../../src/proxy/index.js';
import { ProxyConfigError, ProxyMetrics, createRetryingFetch, retryingFetch } from '../../../src/proxy/index.js';
import { FakeTime, closedPort, scripted, startUpstream } from './proxy-harness.js';

const clients: RetryingFetch[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
});

function client(options: RetryingFetchOptions = {}): { fetch: RetryingFetch; time: FakeTime } {
  const time = new FakeTime();
  const fetch = createRetryingFetch({ now: time.now, sleep: time.sleep, random: () => 0.5, ...options });
  clients.push(fetch);
  return { fetch, time };
}

describe('retryingFetch', () => {
  it('retries a GET by the proxy rules and returns a fetch Response with the report', async () => {
    const up = await scripted(
      { status: 503 },
      { status: 429, headers: { 'retry-after': '2' } },
      { status: 200, headers: { 'content-type': 'application/json' }, body: '{"ok":true}' },
    );
    const { fetch, time } = client({ gate: false });
    const res = await fetch(`${up.url}/v1/things?id=7`, { headers: { accept: 'application/json' } });
    expect(res.ok).toBe(true);
    expect(await res.json()).toEqual({ ok: true });
    expect(res.retryq).toEqual({ attempts: 3, waitedMs: 2250, gated: false, outcome: 'returned', maxRetries: 3 });
    expect(res.headers.get('retryq-attempts')).toBe('3');
    expect(time.waits).toEqual([250, 2000]);
    expect(up.received.map((r) => r.url)).toEqual(['/v1/things?id=7', '/v1/things?id=7', '/v1/things?id=7']);
  });

  it('never retries a write and forwards its Idempotency-Key and body unchanged', async () => {
    const up = await scripted({ status: 503, body: 'busy' });
    const { fetch } = client();
    const res = await fetch(`${up.url}/charges`, {
      method: 'post',
      headers: [['Idempotency-Key', 'order-7']],
      body: '{"amount":1}',
      maxRetries: 5,
    });
    expect(res.status).toBe(503);
    expect(await res.text()).toBe('busy');
    expect(res.retryq.outcome).toBe('method_not_retried');
    expect(up.received).toHaveLength(1);
    expect(up.received[0]?.rawHeaders).toContain('order-7');
    expect(up.received[0]?.body.toString()).toBe('{"amount":1}');
  });

  it('answers an unreachable upstream with a 502 Response carrying the JSON error', async () => {
    const port = await closedPort();
    const { fetch, time } = client();
    const res = await fetch(`http://127.0.0.1:${port}/x`, { maxRetries: 1 });
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ error: { code: 'upstream_unreachable', transport: 'refused' } });
    expect(time.waits).toEqual([250]);
  });

  it('returns at once when the Retry-After does not fit the deadline', async () => {
    const up = await scripted({ status: 503, headers: { 'retry-after': '3' } }, { status: 200 });
    const { fetch } = client();
    const res = await fetch(up.url, { deadlineMs: 2000 });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('3');
    expect(res.retryq.outcome).toBe('deadline');
  });

  it('answers from its gate after a 429 with Retry-After for the same origin and credential', async () => {
    const up = await scripted({ status: 429, headers: { 'retry-after': '60' } }, { status: 200 });
    const metrics = new ProxyMetrics();
    const { fetch } = client({ metrics });
    const headers = { authorization: 'Bearer k' };
    expect((await fetch(up.url, { headers })).status).toBe(429);
    const gated = await fetch(up.url, { headers });
    expect(gated.status).toBe(429);
    expect(gated.retryq.gated).toBe(true);
    expect(gated.headers.get('retry-after')).toBe('60');
    expect(up.received).toHaveLength(1);
    expect(metrics.render()).toContain(`retryq_proxy_gated_responses_total{upstream="${up.url}"} 1`);
  });

  it('rejects with the signal’s reason when aborted during a wait, without another attempt', async () => {
    const up = await scripted({ status: 503 });
    const { fetch, time } = client();
    time.hang = true;
    const ac = new AbortController();
    const pending = fetch(up.url, { signal: ac.signal });
    await expect.poll(() => time.waits.length).toBe(1);
    ac.abort(new Error('caller gave up'));
    await expect(pending).rejects.toThrow('caller gave up');
    expect(up.received).toHaveLength(1);
  });

  it('lets go of a long-lived signal once each body is read, so shared signals collect no listeners', async () => {
    const up = await scripted({ status: 200, body: 'ok' });
    const { fetch } = client();
    const shared = new AbortController().signal;
    for (let i = 0; i < 20; i++) expect(await (await fetch(up.url, { signal: shared })).text()).toBe('ok');
    await expect.poll(() => getEventListeners(shared, 'abort').length).toBe(0);
  });

  it('handles HEAD and 204 without a body', async () => {
    const up = await startUpstream((req) => (req.method === 'HEAD' ? { status: 200 } : { status: 204 }));
    const { fetch } = client();
    expect(await (await fetch(up.url, { method: 'HEAD' })).text()).toBe('');
    expect((await fetch(up.url, { method: 'DELETE' })).status).toBe(204);
  });

  it('rejects invalid input with errors that name it', async () => {
    const { fetch } = client();
    await expect(fetch('/relative')).rejects.toThrow(TypeError);
    await expect(fetch('ftp://x/')).rejects.toThrow(/must use http or https/);
    await expect(fetch('http://u:p@127.0.0.1/')).rejects.toThrow(/user:password/);
    await expect(fetch('http://127.0.0.1/', { maxRetries: -1 })).rejects.toThrow(/init.maxRetries must be an integer/);
    await expect(fetch('http://127.0.0.1/', { deadlineMs: 0 })).rejects.toThrow(/init.deadlineMs/);
    await expect(fetch('http://127.0.0.1/', { method: 'GE T' })).rejects.toThrow(/is not a method/);
    expect(() => createRetryingFetch({ maxWait: 'later' as '1s' })).toThrow(ProxyConfigError);
  });

  it('works with the default shared client', async () => {
    const up = await scripted({ status: 200, body: 'hi' });
    const res = await retryingFetch(`${up.url}/x`);
    expect(await res.text()).toBe('hi');
    expect(res.retryq.attempts).toBe(1);
  });
});
