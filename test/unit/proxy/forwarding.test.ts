import { once } from 'node:events';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { rawExchange, scripted, startTestProxy, startUpstream } from './proxy-harness.js';

describe('routing', () => {
  it('forwards /NAME/path?query to the upstream URL/path?query, keeping its base path', async () => {
    const up = await scripted({ status: 200, headers: { 'content-type': 'application/json' }, body: '{"id":42}' });
    const proxy = await startTestProxy({ upstreams: { acme: `${up.url}/v1` } });
    const res = await proxy.call('/acme/users/42?expand=orders&x=%2F');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ id: 42 });
    expect(res.headers['content-type']).toBe('application/json');
    expect(up.received.map((r) => r.url)).toEqual(['/v1/users/42?expand=orders&x=%2F']);
  });

  it('forwards /NAME and /NAME?query to the base URL itself', async () => {
    const up = await scripted({ status: 204 });
    const proxy = await startTestProxy({ upstreams: { root: up.url, api: `${up.url}/api/` } });
    await proxy.call('/root');
    await proxy.call('/api');
    await proxy.call('/api?q=1');
    expect(up.received.map((r) => r.url)).toEqual(['/', '/api', '/api?q=1']);
  });

  it('answers 404 with a JSON error listing the configured names for an unknown upstream', async () => {
    const up = await scripted({ status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/nope/users');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.json.error).toMatchObject({ code: 'unknown_upstream', allowed: ['acme'] });
    expect(up.received).toHaveLength(0);
  });

  it('refuses dot segments (plain or percent-encoded) that would leave the base path', async () => {
    const up = await scripted({ status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: `${up.url}/v1` } });
    for (const path of ['/acme/../admin', '/acme/a/%2E%2e/admin', '/acme/./x', '/acme/.%2e']) {
      const res = await proxy.call(path);
      expect(res.status, path).toBe(400);
      expect(res.json.error?.['code']).toBe('invalid_path');
    }
    expect(up.received).toHaveLength(0);
  });

  it('serves a liveness answer at /healthz', async () => {
    const up = await scripted({ status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/healthz');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true });
  });
});

describe('headers', () => {
  it('drops hop-by-hop fields, fields named by Connection and Retryq-* in both directions', async () => {
    const up = await startUpstream((_req, _i, res) => {
      res.writeHead(200, [
        ['Connection', 'keep-alive, X-Hop-Res'],
        ['Keep-Alive', 'timeout=5'],
        ['X-Hop-Res', 'drop me'],
        ['X-End-Res', 'keep me'],
        ['Set-Cookie', 'a=1'],
        ['Set-Cookie', 'b=2'],
      ] as unknown as string[]);
      res.end('ok');
      return 'handled';
    });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const answer = await rawExchange(
      proxy.port,
      [
        'GET /acme/x HTTP/1.1',
        'Host: proxy.local',
        'Connection: close, X-Hop',
        'X-Hop: drop me',
        'TE: trailers',
        'Keep-Alive: timeout=5',
        'Upgrade: websocket',
        'Proxy-Authorization: Basic cHJveHk6c2VjcmV0',
        'Retryq-Max-Retries: 1',
        'X-End: one',
        'X-End: two',
        'Accept: application/json',
        '',
        '',
      ].join('\r\n'),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    const sent = up.received[0]?.rawHeaders ?? [];
    const names = sent.filter((_v, i) => i % 2 === 0).map((n) => n.toLowerCase());
    for (const dropped of ['x-hop', 'te', 'keep-alive', 'upgrade', 'proxy-authorization', 'retryq-max-retries']) {
      expect(names).not.toContain(dropped);
    }
    expect(sent[sent.indexOf('host') + 1] ?? sent[sent.indexOf('Host') + 1]).toBe(`127.0.0.1:${up.port}`);
    expect(sent.filter((_v, i) => i % 2 === 1 && sent[i - 1] === 'X-End')).toEqual(['one', 'two']);
    expect(sent).toContain('application/json');
    const head = answer.slice(0, answer.indexOf('\r\n\r\n')).toLowerCase();
    expect(head).not.toContain('x-hop-res');
    expect(head).not.toContain('keep-alive: timeout=5');
    expect(head).toContain('x-end-res: keep me');
    expect(head).toContain('set-cookie: a=1\r\nset-cookie: b=2');
  });

  it('forwards Authorization unchanged and reports attempts, wait, gate and outcome on every response', async () => {
    const up = await scripted({ status: 200, body: 'fine' });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/x', { headers: { authorization: 'Bearer sk_test_secret' } });
    expect(res.text).toBe('fine');
    expect(up.received[0]?.rawHeaders).toContain('Bearer sk_test_secret');
    expect(res.headers['retryq-attempts']).toBe('1');
    expect(res.headers['retryq-wait-ms']).toBe('0');
    expect(res.headers['retryq-gated']).toBe('false');
    expect(res.headers['retryq-outcome']).toBe('returned');
  });

  it('forwards Idempotency-Key byte for byte, bytes above 0x7F included', async () => {
    const up = await scripted({ status: 201, body: 'created' });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const key = Buffer.from('order-1042-\u00e9\u00ff-charge  ~!', 'latin1');
    const head = Buffer.concat([
      Buffer.from(
        `POST /acme/charges HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\nIdempotency-Key: `,
      ),
      key,
      Buffer.from('\r\n\r\n{}'),
    ]);
    const answer = await rawExchange(proxy.port, head);
    expect(answer).toMatch(/^HTTP\/1\.1 201/);
    const raw = up.received[0]?.rawHeaders ?? [];
    const value = raw[raw.findIndex((v, i) => i % 2 === 0 && v.toLowerCase() === 'idempotency-key') + 1] ?? '';
    expect(Buffer.from(value, 'latin1').equals(key)).toBe(true);
  });
});

describe('bodies', () => {
  it('streams a large request body of a write upstream and a large response body back', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 'abcdefghij');
    const up = await startUpstream((req) => ({ status: 200, body: Buffer.concat([req.body, req.body]) }));
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/upload', { method: 'PUT', body: big });
    expect(res.status).toBe(200);
    expect(up.received[0]?.body.equals(big)).toBe(true);
    expect(res.text.length).toBe(big.length * 2);
  });

  it('replays a GET body on a retry, and answers 413 when it exceeds the replay limit', async () => {
    const up = await scripted({ status: 503 }, { status: 200, body: 'ok' });
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, maxReplayBodyBytes: 16 });
    const res = await proxy.call('/acme/search', { body: '{"q":"x"}' });
    expect(res.status).toBe(200);
    expect(up.received.map((r) => r.body.toString())).toEqual(['{"q":"x"}', '{"q":"x"}']);

    const tooBig = await proxy.call('/acme/search', { body: 'x'.repeat(17) });
    expect(tooBig.status).toBe(413);
    expect(tooBig.json.error).toMatchObject({ code: 'request_body_too_large', limitBytes: 16 });
    expect(up.received).toHaveLength(2);
  });

  it('streams a GET body larger than the replay limit once when retries are off', async () => {
    const up = await scripted({ status: 200, body: 'ok' });
    const proxy = await startTestProxy({ upstreams: { acme: up.url }, maxReplayBodyBytes: 16 });
    const res = await proxy.call('/acme/search', { body: 'x'.repeat(100), headers: { 'retryq-max-retries': '0' } });
    expect(res.status).toBe(200);
    expect(up.received[0]?.body.length).toBe(100);
  });

  it('drops a read whose caller breaks off the body mid-way, quietly and without an upstream request', async () => {
    const up = await scripted({ status: 200 });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const socket = connect(proxy.port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write('GET /acme/search HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789', () =>
      socket.destroy(),
    );
    await once(socket, 'close');
    await expect.poll(async () => (await proxy.call('/metrics')).text).toContain('# TYPE');
    expect(up.received).toHaveLength(0);
    expect(proxy.logs).toEqual([]);
  });

  it('answers HEAD without a body and keeps the upstream Content-Length', async () => {
    const up = await startUpstream((_req, _i, res) => {
      res.writeHead(200, { 'content-length': '1234', 'content-type': 'text/plain' });
      res.end();
      return 'handled';
    });
    const proxy = await startTestProxy({ upstreams: { acme: up.url } });
    const res = await proxy.call('/acme/file', { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers['content-length']).toBe('1234');
    expect(res.text).toBe('');
  });
});
