import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { ProxyMetrics } from '../../../src/proxy/index.js';
import { closedPort, scripted, startTestProxy, startUpstream } from './proxy-harness.js';

describe('/metrics', () => {
  it('counts every retry as a real upstream request, and the attempts per caller request', async () => {
    const up = await scripted({ status: 503 }, { status: 502 }, { status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    await proxy.call('/acme/x');
    await proxy.call('/acme/x');
    const res = await proxy.call('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    const lines = res.text.split('\n');
    expect(lines).toEqual(
      expect.arrayContaining([
        'retryq_proxy_requests_total{upstream="acme",outcome="returned"} 2',
        'retryq_proxy_upstream_requests_total{upstream="acme",status="503"} 1',
        'retryq_proxy_upstream_requests_total{upstream="acme",status="502"} 1',
        'retryq_proxy_upstream_requests_total{upstream="acme",status="200"} 2',
        'retryq_proxy_retries_total{upstream="acme"} 2',
        'retryq_proxy_retry_wait_seconds_total{upstream="acme"} 0.75',
        'retryq_proxy_attempts_bucket{upstream="acme",le="1"} 1',
        'retryq_proxy_attempts_bucket{upstream="acme",le="2"} 1',
        'retryq_proxy_attempts_bucket{upstream="acme",le="3"} 2',
        'retryq_proxy_attempts_bucket{upstream="acme",le="+Inf"} 2',
        'retryq_proxy_attempts_sum{upstream="acme"} 4',
        'retryq_proxy_attempts_count{upstream="acme"} 2',
        '# TYPE retryq_proxy_attempts histogram',
      ]),
    );
  });

  it('labels transport failures by kind, never by address', async () => {
    const port = await closedPort();
    const proxy = await startTestProxy({ upstreams: { gone: `http://127.0.0.1:${port}` } });
    await proxy.call('/gone/x', { headers: { 'retryq-max-retries': '0' } });
    const text = (await proxy.call('/metrics')).text;
    expect(text).toContain('retryq_proxy_upstream_requests_total{upstream="gone",status="unreachable"} 1');
    expect(text).not.toContain(String(port));
  });

  it('is not forwarded as a path of an upstream', async () => {
    const up = await scripted({ status: 200, body: 'upstream metrics' });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    expect((await proxy.call('/acme/metrics')).text).toBe('upstream metrics');
    expect((await proxy.call('/metrics')).text).toContain('# HELP retryq_proxy_requests_total');
  });
});

describe('ProxyMetrics.render', () => {
  it('escapes label values as the text format requires', () => {
    const m = new ProxyMetrics();
    m.upstreamRequest('a"b\\c\nd', 200);
    expect(m.render()).toContain('retryq_proxy_upstream_requests_total{upstream="a\\"b\\\\c\\nd",status="200"} 1');
  });

  it('declares every metric family even before any request', () => {
    const text = new ProxyMetrics().render();
    for (const name of [
      'retryq_proxy_requests_total',
      'retryq_proxy_upstream_requests_total',
      'retryq_proxy_retries_total',
      'retryq_proxy_retry_wait_seconds_total',
      'retryq_proxy_gated_responses_total',
      'retryq_proxy_gate_closures_total',
      'retryq_proxy_attempts',
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
  });
});

describe('secrets', () => {
  it('never appear in logs, metrics or error bodies, whatever goes wrong', async () => {
    const secret = 'sk_live_DO_NOT_LOG_9f8e7d';
    const port = await closedPort();
    const up = await startUpstream((_req, i, res) => {
      if (i % 3 === 0) {
        res.socket?.destroy();
        return 'handled';
      }
      return i % 3 === 1 ? { status: 429, headers: { 'retry-after': '60' } } : { status: 500 };
    });
    const proxy = await startTestProxy({
      upstreams: { acme: up.url, gone: `http://127.0.0.1:${port}` },
      attemptTimeout: '100ms',
    });
    const headers = {
      authorization: `Bearer ${secret}`,
      'x-api-key': secret,
      cookie: `session=${secret}`,
      'proxy-authorization': `Basic ${secret}`,
    };
    const bodies: string[] = [];
    for (const path of ['/acme/x', '/acme/y?token=' + secret, '/gone/x', '/nope/x', '/acme/x']) {
      bodies.push((await proxy.call(path, { headers })).text);
    }
    bodies.push((await proxy.call('/acme/x', { headers: { ...headers, 'retryq-max-retries': secret } })).text);
    bodies.push((await proxy.call('/acme/x', { method: 'POST', headers, body: secret })).text);
    const metrics = (await proxy.call('/metrics')).text;
    for (const text of [...proxy.logs, metrics, ...bodies.slice(0, -2)]) expect(text).not.toContain(secret);
  });

  it('logs an internal error with method and upstream only, and answers 500', async () => {
    // A dispatcher whose response carries a header value node refuses to write: an internal error.
    const body = Object.assign(Readable.from([]), { dump: () => Promise.resolve() });
    const broken = {
      request: () => Promise.resolve({ statusCode: 200, statusText: 'OK', headers: { 'x-bad': 'a\nb' }, body }),
      close: () => Promise.resolve(),
    } as unknown as Dispatcher;
    const up = await scripted({ status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } }, { dispatcher: broken });
    const res = await proxy.call('/acme/private/path?token=abc', { headers: { authorization: 'Bearer s3cr3t' } });
    expect(res.status).toBe(500);
    expect(res.json.error).toMatchObject({ code: 'internal_error' });
    expect(proxy.logs).toHaveLength(1);
    expect(proxy.logs[0]).toMatch(/^retryq proxy: internal error on GET \/acme: /);
    expect(proxy.logs.join('\n')).not.toMatch(/s3cr3t|private|token/);
  });
});
