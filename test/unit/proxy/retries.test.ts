import { describe, expect, it } from 'vitest';
import { closedPort, imfFixdate, scripted, startTestProxy, startUpstream, T0 } from './proxy-harness.js';

describe('which requests are retried', () => {
  it.each([408, 429, 502, 503, 504])('retries a GET answered %i, then returns the success', async (status) => {
    const up = await scripted({ status }, { status: 200, body: 'ok' });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x');
    expect(res.status).toBe(200);
    expect(res.text).toBe('ok');
    expect(up.received).toHaveLength(2);
    expect(res.attempts).toBe(2);
    expect(res.outcome).toBe('returned');
  });

  it.each(['HEAD', 'OPTIONS'])('retries %s like GET', async (method) => {
    const up = await scripted({ status: 503 }, { status: 503 }, { status: 204 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x', { method });
    expect(res.status).toBe(204);
    expect(up.received.map((r) => r.method)).toEqual([method, method, method]);
  });

  it.each([400, 401, 403, 404, 409, 500, 501, 505])('returns %i at once, body included', async (status) => {
    const up = await scripted({ status, body: `status ${status}` });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x');
    expect(res.status).toBe(status);
    expect(res.text).toBe(`status ${status}`);
    expect(up.received).toHaveLength(1);
    expect(res.outcome).toBe('returned');
    expect(proxy.time.waits).toEqual([]);
  });

  it.each(['POST', 'PUT', 'PATCH', 'DELETE'])(
    'never retries %s, even when Retryq-Max-Retries asks for it, and forwards Idempotency-Key unchanged',
    async (method) => {
      const up = await scripted({ status: 503, headers: { 'retry-after': '1' }, body: 'busy' });
      const proxy = await startTestProxy({ upstreams: { acme: up.url } });
      const res = await proxy.call('/acme/charges', {
        method,
        headers: {
          'idempotency-key': 'order-1042-charge',
          'retryq-max-retries': '5',
          'content-type': 'application/json',
        },
        body: '{"amount":1200}',
      });
      expect(res.status).toBe(503);
      expect(res.text).toBe('busy');
      expect(res.headers['retry-after']).toBe('1');
      expect(res.outcome).toBe('method_not_retried');
      expect(res.attempts).toBe(1);
      expect(up.received).toHaveLength(1);
      expect(up.received[0]?.rawHeaders).toContain('order-1042-charge');
      expect(up.received[0]?.body.toString()).toBe('{"amount":1200}');
    },
  );
});

describe('when every attempt fails', () => {
  it('returns the last upstream response, body and headers included, after 4 attempts by default', async () => {
    const up = await startUpstream((_req, i) => ({
      status: 503,
      headers: { 'x-attempt': String(i + 1) },
      body: `attempt ${i + 1}`,
    }));
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x');
    expect(res.status).toBe(503);
    expect(res.text).toBe('attempt 4');
    expect(res.headers['x-attempt']).toBe('4');
    expect(res.attempts).toBe(4);
    expect(res.outcome).toBe('retries_exhausted');
    expect(proxy.time.waits).toEqual([250, 500, 1000]);
    expect(res.waitMs).toBe(1750);
  });

  it('drains failed attempts so their keep-alive connection is reused', async () => {
    const up = await startUpstream(() => ({ status: 502, body: 'x'.repeat(50_000) }));
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    await proxy.call('/acme/x');
    expect(up.received).toHaveLength(4);
    expect(new Set(up.received.map((r) => r.remotePort)).size).toBe(1);
  });
});

describe('Retryq-Max-Retries', () => {
  it('0 turns retries off', async () => {
    const up = await scripted({ status: 503 }, { status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x', { headers: { 'retryq-max-retries': '0' } });
    expect(res.status).toBe(503);
    expect(res.attempts).toBe(1);
    expect(res.outcome).toBe('retries_exhausted');
    expect(up.received).toHaveLength(1);
  });

  it('5 allows six attempts', async () => {
    const up = await scripted({ status: 503 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x', { headers: { 'retryq-max-retries': '5' } });
    expect(res.attempts).toBe(6);
    expect(up.received).toHaveLength(6);
    expect(proxy.time.waits).toEqual([250, 500, 1000, 2000, 4000]);
  });

  it('a value above the ceiling is clamped to it, and the response says so', async () => {
    const up = await scripted({ status: 503 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, maxRetriesCeiling: 4 });
    const res = await proxy.call('/acme/x', { headers: { 'retryq-max-retries': '50' } });
    expect(res.attempts).toBe(5);
    expect(res.headers['retryq-max-retries-clamped']).toBe('4');
    expect(up.received).toHaveLength(5);
  });

  it.each(['abc', '-1', '1.5', '', '+2', '0x3', '2, 3'])(
    'answers 400 with a JSON error naming the header for %j, without an upstream request',
    async (value) => {
      const up = await scripted({ status: 200 });
      const proxy = await startTestProxy({ upstreams: { acme: up.url } });
      const res = await proxy.call('/acme/x', { headers: { 'retryq-max-retries': value } });
      expect(res.status).toBe(400);
      expect(res.json.error).toMatchObject({ code: 'invalid_header', header: 'Retryq-Max-Retries', got: value });
      expect(String(res.json.error?.['allowed'])).toMatch(/whole number of retries ≥ 0/);
      expect(up.received).toHaveLength(0);
    },
  );

  it('answers 400 for a misspelt Retryq-* header instead of ignoring it', async () => {
    const up = await scripted({ status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x', { headers: { 'retryq-max-retry': '2' } });
    expect(res.status).toBe(400);
    expect(res.json.error?.['allowed']).toMatch(/Retryq-Max-Retries, Retryq-Deadline-Ms/);
  });

  it('uses the configured default when the header is absent', async () => {
    const up = await scripted({ status: 503 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, maxRetries: 1 });
    expect((await proxy.call('/acme/x')).attempts).toBe(2);
  });
});

describe('waits without a usable Retry-After', () => {
  it('backs off about 250 ms, 500 ms, 1 s, 2 s, 4 s', async () => {
    const up = await scripted({ status: 503 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    await proxy.call('/acme/x', { headers: { 'retryq-max-retries': '5' } });
    expect(proxy.time.waits).toEqual([250, 500, 1000, 2000, 4000]);
  });

  it('keeps every backoff within ±20 % of its base with real randomness', async () => {
    const up = await scripted({ status: 503 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } }, { random: Math.random });
    for (let i = 0; i < 10; i++) await proxy.call('/acme/x', { headers: { 'retryq-max-retries': '5' } });
    const bases = [250, 500, 1000, 2000, 4000];
    expect(proxy.time.waits).toHaveLength(50);
    proxy.time.waits.forEach((wait, i) => {
      const base = bases[i % 5] as number;
      expect(wait).toBeGreaterThanOrEqual(Math.round(base * 0.8));
      expect(wait).toBeLessThanOrEqual(Math.round(base * 1.2));
    });
  });

  it.each(['soon', '-1', '1.5', '12abc', '', 'Sun, 15 Jun 2025 12:00:03 UTC'])(
    'ignores the malformed Retry-After %j and backs off',
    async (value) => {
      const up = await scripted({ status: 503, headers: { 'retry-after': value } }, { status: 200 });
      const proxy = await startTestProxy({ upstreams: { acme: up.url } });
      const res = await proxy.call('/acme/x');
      expect(res.status).toBe(200);
      expect(proxy.time.waits).toEqual([250]);
    },
  );

  it('never retries at once for Retry-After: 0 or a past date: the backoff floor applies', async () => {
    const up = await scripted(
      { status: 429, headers: { 'retry-after': '0' } },
      { status: 503, headers: { 'retry-after': imfFixdate(T0 - 60_000) } },
      { status: 200 },
    );
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, gate: false });
    await proxy.call('/acme/x');
    expect(proxy.time.waits).toEqual([250, 500]);
  });
});

describe('waits with Retry-After', () => {
  it('waits the delay-seconds the server asks for', async () => {
    const up = await scripted({ status: 429, headers: { 'retry-after': '3' } }, { status: 200, body: 'ok' });
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, gate: false });
    const res = await proxy.call('/acme/x');
    expect(res.status).toBe(200);
    expect(proxy.time.waits).toEqual([3000]);
    expect(res.waitMs).toBe(3000);
  });

  it.each([
    ['IMF-fixdate', 'Sun, 15 Jun 2025 13:00:04 GMT'],
    ['RFC 850', 'Sunday, 15-Jun-25 13:00:04 GMT'],
    ['asctime', 'Sun Jun 15 13:00:04 2025'],
  ])('reads an %s date, measured on the upstream clock (its Date header is an hour ahead)', async (_form, date) => {
    const up = await scripted(
      { status: 503, headers: { 'retry-after': date, date: 'Sun, 15 Jun 2025 13:00:00 GMT' } },
      { status: 200 },
    );
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x');
    expect(res.status).toBe(200);
    expect(proxy.time.waits).toEqual([4000]);
  });

  it('measures a date against the proxy clock when the upstream sends no Date', async () => {
    const up = await scripted({ status: 503, headers: { 'retry-after': imfFixdate(T0 + 7000) } }, { status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    await proxy.call('/acme/x');
    expect(proxy.time.waits).toEqual([7000]);
  });

  it('takes the backoff when it is longer than the Retry-After', async () => {
    const up = await scripted(
      { status: 503 },
      { status: 503 },
      { status: 503 },
      { status: 503, headers: { 'retry-after': '1' } },
    );
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    await proxy.call('/acme/x', { headers: { 'retryq-max-retries': '4' } });
    expect(proxy.time.waits).toEqual([250, 500, 1000, 2000]);
  });

  it('returns at once, Retry-After passed through, when the server asks for longer than the cap', async () => {
    const up = await scripted({ status: 503, headers: { 'retry-after': '16' }, body: 'maintenance' }, { status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x');
    expect(res.status).toBe(503);
    expect(res.text).toBe('maintenance');
    expect(res.headers['retry-after']).toBe('16');
    expect(res.outcome).toBe('retry_after_over_cap');
    expect(up.received).toHaveLength(1);
    expect(proxy.time.waits).toEqual([]);
  });

  it('waits exactly the cap when the server asks for exactly the cap', async () => {
    const up = await scripted({ status: 503, headers: { 'retry-after': '5' } }, { status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, maxWait: '5s' });
    await proxy.call('/acme/x');
    expect(proxy.time.waits).toEqual([5000]);
  });

  it('cuts the local backoff to the cap (it is the proxy’s own choice, not the server’s)', async () => {
    const up = await scripted({ status: 503 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, maxWait: '600ms' });
    await proxy.call('/acme/x');
    expect(proxy.time.waits).toEqual([250, 500, 600]);
  });
});

describe('Retryq-Deadline-Ms', () => {
  it('returns at once, Retry-After passed through, when the server’s wait would pass the caller’s budget', async () => {
    const up = await scripted({ status: 429, headers: { 'retry-after': '5' }, body: 'slow down' }, { status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, gate: false });
    const res = await proxy.call('/acme/x', { headers: { 'retryq-deadline-ms': '4000' } });
    expect(res.status).toBe(429);
    expect(res.text).toBe('slow down');
    expect(res.headers['retry-after']).toBe('5');
    expect(res.outcome).toBe('deadline');
    expect(up.received).toHaveLength(1);
  });

  it('retries while the waits fit in the budget, then returns the last response', async () => {
    const up = await scripted({ status: 503 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x', { headers: { 'retryq-deadline-ms': '1000' } });
    expect(proxy.time.waits).toEqual([250, 500]);
    expect(res.attempts).toBe(3);
    expect(res.outcome).toBe('deadline');
  });

  it.each(['0', 'soon', '-5', '2147483648', '1e3'])('answers 400 for %j', async (value) => {
    const up = await scripted({ status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x', { headers: { 'retryq-deadline-ms': value } });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: 'invalid_header', header: 'Retryq-Deadline-Ms' });
    expect(up.received).toHaveLength(0);
  });
});

describe('upstreams that do not answer', () => {
  it('counts an attempt that gets no response headers within the attempt timeout as 408, and retries it', async () => {
    const up = await startUpstream((_req, i) =>
      i < 2 ? { status: 0, hang: true } : { status: 200, body: 'late but fine' },
    );
    // Long enough that the answering attempt gets its headers in time on a busy machine; the hanging ones never do.
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, attemptTimeout: '1s' });
    const res = await proxy.call('/acme/x');
    expect(res.status).toBe(200);
    expect(res.text).toBe('late but fine');
    expect(res.attempts).toBe(3);
    expect(proxy.time.waits).toEqual([250, 500]);
  });

  it('answers 408 with a JSON error when every attempt times out', async () => {
    const up = await startUpstream(() => ({ status: 0, hang: true }));
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, attemptTimeout: '100ms' });
    const res = await proxy.call('/acme/x', { headers: { 'retryq-max-retries': '1' } });
    expect(res.status).toBe(408);
    expect(res.json.error).toMatchObject({ code: 'upstream_timeout', upstream: 'acme', transport: 'timeout' });
    expect(res.attempts).toBe(2);
    expect(res.outcome).toBe('retries_exhausted');
  });

  it('answers 502 with a JSON error when the upstream cannot be reached, after retrying', async () => {
    const port = await closedPort();
    const proxy = await startTestProxy({ upstreams: { gone: `http://127.0.0.1:${port}` } });
    const res = await proxy.call('/gone/x');
    expect(res.status).toBe(502);
    expect(res.json.error).toMatchObject({
      code: 'upstream_unreachable',
      upstream: 'gone',
      transport: 'refused',
      sent: 'no',
      cause: 'ECONNREFUSED',
    });
    expect(res.attempts).toBe(4);
    expect(proxy.time.waits).toEqual([250, 500, 1000]);
  });

  it('forwards a write to an unreachable upstream once and says it was not sent', async () => {
    const port = await closedPort();
    const proxy = await startTestProxy({ upstreams: { gone: `http://127.0.0.1:${port}` } });
    const res = await proxy.call('/gone/x', { method: 'POST', body: '{}' });
    expect(res.status).toBe(502);
    expect(res.json.error).toMatchObject({ code: 'upstream_unreachable', sent: 'no' });
    expect(res.attempts).toBe(1);
    expect(res.outcome).toBe('method_not_retried');
  });

  it('answers 502 upstream_connection_failed when the upstream drops the connection', async () => {
    const up = await startUpstream((_req, _i, res) => {
      res.socket?.destroy();
      return 'handled';
    });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x', { headers: { 'retryq-max-retries': '1' } });
    expect(res.status).toBe(502);
    expect(res.json.error).toMatchObject({ code: 'upstream_connection_failed', transport: 'reset' });
    expect(up.received).toHaveLength(2);
  });
});

describe('a caller that hangs up', () => {
  it('cancels the wait and makes no further upstream request', async () => {
    const up = await scripted({ status: 503 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    proxy.time.hang = true;
    const ac = new AbortController();
    const pending = fetch(`${proxy.url}/acme/x`, { signal: ac.signal });
    await expect.poll(() => proxy.time.waits.length).toBe(1);
    ac.abort();
    await expect(pending).rejects.toThrow();
    await expect.poll(() => proxy.time.signals[0]?.aborted).toBe(true);
    expect(up.received).toHaveLength(1);
  });
});

describe('stopping', () => {
  it('answers a request waiting for a retry with 503 proxy_stopping at once', async () => {
    const up = await scripted({ status: 503 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    proxy.time.hang = true;
    const pending = proxy.call('/acme/x');
    await expect.poll(() => proxy.time.waits.length).toBe(1);
    const closed = proxy.close();
    const res = await pending;
    await closed;
    expect(res.status).toBe(503);
    expect(res.json.error?.['code']).toBe('proxy_stopping');
    expect(res.outcome).toBe('stopping');
    expect(up.received).toHaveLength(1);
  });
});
