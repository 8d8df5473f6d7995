import { describe, expect, it } from 'vitest';
import { readRequestControls } from '../../../src/proxy/request-controls.js';
import { ProxyConfigError, resolveProxyOptions, resolveRetryOptions } from '../../../src/proxy/index.js';
import { forwardedRequestHeaders, forwardedResponseHeaders } from '../../../src/proxy/headers.js';
import { hasDotSegment } from '../../../src/proxy/handler.js';

function issuesOf(options: unknown): { path: string; message: string }[] {
  try {
    resolveProxyOptions(options);
  } catch (err) {
    if (err instanceof ProxyConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('proxy configuration', () => {
  it('fills in the documented defaults', () => {
    const s = resolveProxyOptions({ upstreams: { acme: 'https://api.acme.test/v1/' } });
    expect(s).toMatchObject({
      host: '127.0.0.1',
      port: 8787,
      maxRetries: 3,
      maxRetriesCeiling: 10,
      maxWaitMs: 15_000,
      attemptTimeoutMs: 10_000,
      maxReplayBodyBytes: 1_048_576,
      backoff: { baseDelayMs: 250, maxBackoffMs: 10_000, multiplier: 2, jitter: 0.2 },
      gate: { enabled: true, maxClosedMs: 3_600_000 },
    });
    expect(s.upstreams.get('acme')).toEqual({
      name: 'acme',
      origin: 'https://api.acme.test',
      basePath: '/v1',
      url: 'https://api.acme.test/v1/',
    });
  });

  it('reads durations as strings or ms, and gate as a boolean or an object', () => {
    const s = resolveProxyOptions({
      upstreams: { a: 'http://127.0.0.1:9' },
      maxWait: '2.5s',
      attemptTimeout: 750,
      gate: { maxClosed: '10m' },
      backoff: { base: '100ms', max: '1s' },
    });
    expect(s.maxWaitMs).toBe(2500);
    expect(s.attemptTimeoutMs).toBe(750);
    expect(s.gate).toEqual({ enabled: true, maxClosedMs: 600_000 });
    expect(s.backoff).toMatchObject({ baseDelayMs: 100, maxBackoffMs: 1000 });
    expect(resolveProxyOptions({ upstreams: { a: 'http://x' }, gate: false }).gate.enabled).toBe(false);
  });

  it('lists every problem with the option path, what is wrong and what is allowed', () => {
    const issues = issuesOf({
      upstreams: {
        metrics: 'http://x',
        'bad name': 'http://x',
        ftp: 'ftp://x',
        creds: 'https://user:pw@x',
        query: 'https://x/?a=1',
        rel: '/v1',
      },
      port: 70_000,
      maxWait: 'soon',
      attemptTimeout: 0,
      maxRetries: 1.5,
      backoff: { jitter: 2, extra: 1 },
      colour: 'blue',
    });
    const byPath = Object.fromEntries(issues.map((i) => [i.path, i.message]));
    expect(byPath['upstreams.metrics']).toMatch(/reserved/);
    expect(byPath['upstreams.bad name']).toMatch(/A-Z a-z 0-9/);
    expect(byPath['upstreams.ftp']).toMatch(/must use http or https/);
    expect(byPath['upstreams.creds']).toMatch(/user:password/);
    expect(byPath['upstreams.query']).toMatch(/query string/);
    expect(byPath['upstreams.rel']).toMatch(/absolute http/);
    expect(byPath['port']).toMatch(/integer from 0 to 65535/);
    expect(byPath['maxWait']).toMatch(/a duration such as/);
    expect(byPath['attemptTimeout']).toMatch(/greater than zero/);
    expect(byPath['maxRetries']).toMatch(/integer from 0 to 100/);
    expect(byPath['backoff.jitter']).toMatch(/fraction from 0 to 1/);
    expect(byPath['backoff']).toMatch(/unknown option\(s\) "extra"/);
    expect(byPath['']).toMatch(/unknown option\(s\) "colour"/);
  });

  it('requires at least one upstream, and a default no larger than the ceiling', () => {
    expect(issuesOf({ upstreams: {} })).toEqual([
      { path: 'upstreams', message: expect.stringMatching(/at least one/) as string },
    ]);
    expect(issuesOf({})).toEqual([{ path: 'upstreams', message: 'is required' }]);
    expect(issuesOf({ upstreams: { a: 'http://x' }, maxRetries: 5, maxRetriesCeiling: 2 })).toEqual([
      { path: 'maxRetries', message: 'must not exceed maxRetriesCeiling (2)' },
    ]);
  });

  it('validates retryingFetch options the same way', () => {
    expect(resolveRetryOptions({}).maxRetries).toBe(3);
    expect(() => resolveRetryOptions({ maxWait: -1 })).toThrow(/maxWait: must be a duration/);
    expect(() => resolveRetryOptions({ upstreams: {} })).toThrow(/unknown option\(s\) "upstreams"/);
  });
});

describe('readRequestControls', () => {
  const defaults = { maxRetries: 3, ceiling: 10 };

  it('takes the default without headers, and reads both headers case-insensitively with spaces trimmed', () => {
    expect(readRequestControls([], defaults)).toEqual({
      ok: true,
      controls: { maxRetries: 3, clampedFrom: undefined, budgetMs: undefined },
    });
    expect(readRequestControls(['RETRYQ-MAX-RETRIES', ' 0 ', 'retryq-deadline-ms', '\t2500'], defaults)).toEqual({
      ok: true,
      controls: { maxRetries: 0, clampedFrom: undefined, budgetMs: 2500 },
    });
  });

  it('clamps to the ceiling and keeps what was asked, even for a number too large for a double', () => {
    const huge = '9'.repeat(400);
    const read = readRequestControls(['Retryq-Max-Retries', huge], defaults);
    expect(read).toMatchObject({ ok: true, controls: { maxRetries: 10 } });
    if (read.ok) expect(read.controls.clampedFrom).toHaveLength(65);
  });

  it('rejects a header given twice', () => {
    const read = readRequestControls(['Retryq-Max-Retries', '1', 'Retryq-Max-Retries', '2'], defaults);
    expect(read).toEqual({
      ok: false,
      problem: { path: 'Retryq-Max-Retries', received: '2', message: 'must appear at most once' },
    });
  });
});

describe('hop-by-hop headers', () => {
  it('keeps order and duplicates of end-to-end request fields', () => {
    expect(
      forwardedRequestHeaders([
        'Host',
        'proxy',
        'A',
        '1',
        'Connection',
        'close, X-Gone',
        'X-Gone',
        'x',
        'A',
        '2',
        'Expect',
        '100-continue',
        'Retryq-Deadline-Ms',
        '5',
      ]),
    ).toEqual(['A', '1', 'A', '2']);
  });

  it('drops response fields named by Connection and flattens repeated ones', () => {
    expect(
      forwardedResponseHeaders({
        connection: 'x-gone',
        'x-gone': '1',
        'transfer-encoding': 'chunked',
        trailer: 'x',
        'set-cookie': ['a', 'b'],
        'content-length': '3',
      }),
    ).toEqual(['set-cookie', 'a', 'set-cookie', 'b', 'content-length', '3']);
  });
});

describe('dot segments', () => {
  it.each([
    ['/a/../b', true],
    ['/..', true],
    ['/a/%2E/b', true],
    ['/a/.%2e/b', true],
    ['/a/b?x=/../', false],
    ['/a/...', false],
    ['/a/.well-known/x', false],
    ['', false],
  ])('%j → %s', (path, expected) => {
    expect(hasDotSegment(path)).toBe(expected);
  });
});
