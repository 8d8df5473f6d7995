/**
 * The rate-limit header reader (src/policy/rate-limit-headers.ts): each family and form, the reset's
 * delay/epoch rule, scopes, and what is ignored. Tables here; properties in rate-limit-properties.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { describeLearnedLimit, gateScopeOf, parseRateLimitHeaders } from '../../../src/policy/index.js';
import type { LearnedLimit } from '../../../src/policy/index.js';
import { at, imfFixdate } from './http-date-forms.js';

const now = at('2025-06-15T12:00:00Z');
const nowMs = now.getTime();
const nowS = nowMs / 1000;
const s = 1000;

const parse = (headers: Record<string, string>, extra: { bucketHeader?: string; maxDelayMs?: number } = {}) =>
  parseRateLimitHeaders(headers, { nowMs, ...extra });

function limitOf(r: LearnedLimit) {
  if (r.kind !== 'limit') throw new Error(`expected a limit, got ${JSON.stringify(r)}`);
  return r;
}

describe('parseRateLimitHeaders, given no rate-limit headers', () => {
  it.each([[{}], [{ 'retry-after': '30', date: imfFixdate(now) }], [{ 'content-type': 'application/json' }]])(
    'returns none for %j',
    (headers) => {
      expect(parse(headers)).toEqual({ kind: 'none', ignored: [] });
    },
  );

  it('returns none for undefined headers', () => {
    expect(parseRateLimitHeaders(undefined, { nowMs })).toEqual({ kind: 'none', ignored: [] });
  });
});

describe('parseRateLimitHeaders, given the current IETF form (Structured Fields)', () => {
  it('reads RateLimit-Policy and RateLimit of one policy', () => {
    expect(parse({ 'ratelimit-policy': '"default";q=100;w=60', ratelimit: '"default";r=50;t=30' })).toEqual({
      kind: 'limit',
      source: 'ietf',
      limit: { quota: 100, windowMs: 60 * s, policy: 'default', field: 'RateLimit-Policy' },
      remaining: 50,
      resetAtMs: nowMs + 30 * s,
      resetForm: 'delay',
      scope: { kind: 'credential' },
      global: false,
      ignored: [],
    });
  });

  it.each([
    ['"burst";q=100;w=60, "daily";q=1000;w=86400', 'daily', 1000],
    ['"permin";q=50;w=60,"perhr";q=1000;w=3600', 'perhr', 1000],
    ['"a";q=20;w=1, "b";q=600;w=60', 'b', 600],
  ])('takes the policy with the lowest rate from %s', (header, policy, quota) => {
    expect(limitOf(parse({ 'ratelimit-policy': header })).limit).toMatchObject({ policy, quota });
  });

  it('breaks a tie of equal rates toward the shorter window', () => {
    expect(limitOf(parse({ 'ratelimit-policy': '"long";q=60;w=60, "short";q=1;w=1' })).limit).toMatchObject({
      policy: 'short',
    });
  });

  it('reads a policy split over two fields (joined with a comma, as Node joins them)', () => {
    expect(limitOf(parse({ 'ratelimit-policy': '"a";q=100;w=60, "b";q=10;w=60' })).limit?.policy).toBe('b');
  });

  it('takes the smallest remaining, and on a tie the latest reset', () => {
    const r = limitOf(parse({ ratelimit: '"a";r=5;t=10, "b";r=0;t=3, "c";r=0;t=40' }));
    expect(r).toMatchObject({ remaining: 0, resetAtMs: nowMs + 40 * s });
  });

  it('keeps a policy without a window as a windowless quota', () => {
    expect(limitOf(parse({ 'ratelimit-policy': '"default";q=100' })).limit).toEqual({
      quota: 100,
      policy: 'default',
      field: 'RateLimit-Policy',
    });
  });

  it('reads partition keys and unknown parameters without acting on them', () => {
    const r = limitOf(
      parse({
        'ratelimit-policy': '"peruser";q=100;w=60;pk=:cHsdsRa894==:;acme-x=?1',
        ratelimit: '"peruser";r=3;pk=:QQ==:',
      }),
    );
    expect(r).toMatchObject({ limit: { quota: 100, windowMs: 60 * s }, remaining: 3, scope: { kind: 'credential' } });
    expect(r.resetAtMs).toBeUndefined();
  });

  it('ignores a policy counted in another unit than requests, keeping the others', () => {
    const r = limitOf(parse({ 'ratelimit-policy': '"bytes";q=65535;qu="content-bytes";w=10, "req";q=100;w=60' }));
    expect(r.limit?.policy).toBe('req');
    expect(r.ignored).toEqual([
      expect.objectContaining({ field: 'RateLimit-Policy', reason: expect.stringMatching(/unit/) as string }),
    ]);
  });

  it('accepts an explicit quota unit of requests', () => {
    expect(limitOf(parse({ 'ratelimit-policy': '"d";q=5;qu="requests";w=1' })).limit?.quota).toBe(5);
  });

  it.each([
    ['"d";q=-1;w=60', /q must be a non-negative Integer/],
    ['"d";w=60', /q must be a non-negative Integer/],
    ['"d";q=1.5;w=60', /q must be a non-negative Integer/],
    ['"d";q=100;w=0', /w must be an Integer ≥ 1/],
    ['"d";q=100;w="60"', /w must be an Integer ≥ 1/],
    ['d;q=100;w=60', /a quota policy is a non-negative Integer/],
    ['"d";q=100;w=60,', /trailing ","/],
    ['"d";Q=100', /not a Structured Field List/],
    ['"d" ;q=100', /not a Structured Field List/],
    ['"d";q=1000000000000000', /at most 15 digits/],
    ['("d");q=1', /Inner Lists/],
    ['"unterminated;q=1', /unterminated String/],
  ])('ignores the malformed policy %j, saying why', (header, reason) => {
    const r = parse({ 'ratelimit-policy': header });
    expect(r.kind).toBe('none');
    expect(r.ignored).toEqual([
      expect.objectContaining({ field: 'RateLimit-Policy', reason: expect.stringMatching(reason) as string }),
    ]);
  });

  it.each([
    ['"d";r=-1;t=5', /r must be a non-negative Integer/],
    ['"d";t=5', /r must be a non-negative Integer/],
    ['"d";r=lots', /r must be a non-negative Integer/],
    ['"d";r=0;t=-3', /t must be a non-negative Integer/],
    ['"d";r=0;t=2.5', /t must be a non-negative Integer/],
  ])('ignores the malformed service limit %j: a malformed remaining is not plenty, it is absent', (header, reason) => {
    const r = parse({ ratelimit: header });
    expect(r).toEqual({
      kind: 'none',
      ignored: [expect.objectContaining({ field: 'RateLimit', reason: expect.stringMatching(reason) as string })],
    });
  });

  it('keeps the valid service limits beside a malformed one', () => {
    const r = limitOf(parse({ ratelimit: '"bad";r=-1, "good";r=2;t=9' }));
    expect(r).toMatchObject({ remaining: 2, resetAtMs: nowMs + 9 * s });
    expect(r.ignored).toHaveLength(1);
  });

  it('cuts a reset past maxDelayMs to it', () => {
    expect(limitOf(parse({ ratelimit: '"d";r=0;t=999999999999999' }, { maxDelayMs: 3_600_000 })).resetAtMs).toBe(
      nowMs + 3_600_000,
    );
  });

  it('reads t=0 as a reset now (the gate still applies its floor: see learnedGate)', () => {
    expect(limitOf(parse({ ratelimit: '"d";r=0;t=0' })).resetAtMs).toBe(nowMs);
  });
});

describe('parseRateLimitHeaders, given the earlier drafts’ forms', () => {
  it('reads RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (delay-seconds)', () => {
    expect(parse({ 'ratelimit-limit': '100', 'ratelimit-remaining': '0', 'ratelimit-reset': '7' })).toEqual({
      kind: 'limit',
      source: 'ietf-draft',
      limit: { quota: 100, field: 'RateLimit-Limit' },
      remaining: 0,
      resetAtMs: nowMs + 7 * s,
      resetForm: 'delay',
      scope: { kind: 'credential' },
      global: false,
      ignored: [],
    });
  });

  it('reads the first drafts’ RateLimit-Limit with quota policies (100, 100;w=60)', () => {
    expect(limitOf(parse({ 'ratelimit-limit': '100, 100;w=60' })).limit).toEqual({
      quota: 100,
      windowMs: 60 * s,
      field: 'RateLimit-Limit',
    });
  });

  it('reads RateLimit as a Dictionary and RateLimit-Policy as Integer items with a window', () => {
    expect(parse({ ratelimit: 'limit=100, remaining=50, reset=30', 'ratelimit-policy': '100;w=60' })).toMatchObject({
      kind: 'limit',
      source: 'ietf-draft',
      limit: { quota: 100, windowMs: 60 * s, field: 'RateLimit-Policy' },
      remaining: 50,
      resetAtMs: nowMs + 30 * s,
    });
  });

  it('takes the lowest-rate draft policy (10;w=1, 50;w=60)', () => {
    expect(limitOf(parse({ 'ratelimit-policy': '10;w=1, 50;w=60' })).limit).toMatchObject({
      quota: 50,
      windowMs: 60 * s,
    });
  });

  it('prefers a windowed policy to the bare limit of the Dictionary', () => {
    expect(limitOf(parse({ ratelimit: 'limit=10, remaining=1', 'ratelimit-policy': '100;w=60' })).limit?.field).toBe(
      'RateLimit-Policy',
    );
  });

  it.each([
    [{ ratelimit: 'limit=100, remaining=-5' }, /remaining must be a non-negative Integer/],
    [{ ratelimit: 'limit=100, remaining="5"' }, /remaining must be a non-negative Integer/],
    [{ ratelimit: 'limit=100 remaining=5' }, /not a Structured Field Dictionary/],
    [{ 'ratelimit-policy': '100;w=0' }, /w must be an Integer ≥ 1/],
    [{ 'ratelimit-policy': '100' }, /w must be an Integer ≥ 1/],
    [{ 'ratelimit-remaining': '5.0' }, /digits only/],
    [{ 'ratelimit-reset': 'soon' }, /expected seconds/],
    [{ 'ratelimit-limit': '"100"' }, /non-negative Integer first/],
  ])('ignores the malformed %j, saying why', (headers, reason) => {
    const r = parse(headers);
    expect(r.ignored).toEqual(
      expect.arrayContaining([expect.objectContaining({ reason: expect.stringMatching(reason) as string })]),
    );
    if (r.kind === 'limit') expect(r.remaining === undefined || r.remaining >= 0).toBe(true);
  });
});

describe('parseRateLimitHeaders, given X-RateLimit-*', () => {
  it('reads limit, remaining and a reset in delay-seconds', () => {
    expect(parse({ 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '3', 'x-ratelimit-reset': '20' })).toEqual({
      kind: 'limit',
      source: 'x-ratelimit',
      limit: { quota: 60, field: 'X-RateLimit-Limit' },
      remaining: 3,
      resetAtMs: nowMs + 20 * s,
      resetForm: 'delay',
      scope: { kind: 'credential' },
      global: false,
      ignored: [],
    });
  });

  describe('the reset: delay-seconds below 10^9, epoch seconds from 10^9, epoch ms from 10^12', () => {
    it.each([
      ['0', nowMs, 'delay'],
      ['59', nowMs + 59 * s, 'delay'],
      ['1.5', nowMs + 1500, 'delay'],
      ['0.0001', nowMs + 1, 'delay'],
      ['999999', nowMs + 999_999 * s, 'delay'],
      [String(nowS + 30), nowMs + 30 * s, 'epoch-seconds'],
      [String(nowS + 30) + '.250', nowMs + 30_250, 'epoch-seconds'],
      [String(nowMs + 4500), nowMs + 4500, 'epoch-ms'],
      [String(nowS), nowMs, 'epoch-seconds'],
    ])('reads %s as reset at %i (%s)', (value, resetAtMs, resetForm) => {
      expect(limitOf(parse({ 'x-ratelimit-reset': value }))).toMatchObject({ resetAtMs, resetForm });
    });

    it('measures an epoch on the server’s clock (the Date header), cancelling skew', () => {
      // The server's clock runs 100 s behind ours: its epoch reset 30 s after its Date is 30 s from now.
      const serverNow = new Date(nowMs - 100 * s);
      const r = limitOf(
        parse({ 'x-ratelimit-reset': String(serverNow.getTime() / 1000 + 30), date: imfFixdate(serverNow) }),
      );
      expect(r.resetAtMs).toBe(nowMs + 30 * s);
    });

    it('falls back to now when the Date header is malformed', () => {
      expect(limitOf(parse({ 'x-ratelimit-reset': String(nowS + 30), date: 'yesterday' })).resetAtMs).toBe(
        nowMs + 30 * s,
      );
    });

    it.each([
      [String(nowS - 30), {}],
      [String(nowMs - 5000), {}],
      // In the future by our clock, but 10 s before the server's Date: still in the past.
      [String(nowS + 20), { date: imfFixdate(new Date(nowMs + 30 * s)) }],
    ])('ignores an epoch %s in the past: a reset in the past is not now', (value, extra) => {
      const r = parse({ 'x-ratelimit-reset': value, ...extra });
      expect(r.kind).toBe('none');
      expect(r.ignored).toEqual([
        expect.objectContaining({
          field: 'X-RateLimit-Reset',
          reason: expect.stringMatching(/lies \d+ s before/) as string,
        }),
      ]);
    });

    it('cuts an epoch beyond maxDelayMs to it', () => {
      expect(limitOf(parse({ 'x-ratelimit-reset': String(nowS + 86_400) }, { maxDelayMs: 60_000 })).resetAtMs).toBe(
        nowMs + 60_000,
      );
    });

    it('cuts absurd values (epoch ms in the year 33,000, 16 digits) to the default of 365 days', () => {
      expect(limitOf(parse({ 'x-ratelimit-reset': '9999999999999999' })).resetAtMs).toBe(nowMs + 365 * 86_400 * s);
    });
  });

  it('reads X-RateLimit-Reset-After (Discord: seconds with a fraction)', () => {
    expect(limitOf(parse({ 'x-ratelimit-reset-after': '64.57' }))).toMatchObject({
      resetAtMs: nowMs + 64_570,
      resetForm: 'delay',
    });
  });

  it.each([
    [String(nowS + 10), '30', nowMs + 30 * s],
    [String(nowS + 40), '30', nowMs + 40 * s],
  ])('takes the later of X-RateLimit-Reset %s and Reset-After %s', (reset, after, resetAtMs) => {
    expect(limitOf(parse({ 'x-ratelimit-reset': reset, 'x-ratelimit-reset-after': after })).resetAtMs).toBe(resetAtMs);
  });

  it.each([
    ['x-ratelimit-remaining', 'lots', /digits only/],
    ['x-ratelimit-remaining', '-1', /digits only/],
    ['x-ratelimit-remaining', '1e3', /digits only/],
    ['x-ratelimit-remaining', '', /empty/],
    ['x-ratelimit-remaining', '1234567890123456', /more than 15 digits/],
    ['x-ratelimit-limit', '60/min', /digits only/],
    ['x-ratelimit-reset', '-5', /expected seconds/],
    ['x-ratelimit-reset', '1,5', /expected seconds/],
    ['x-ratelimit-reset', 'Sun, 15 Jun 2025 12:00:30 GMT', /expected seconds/],
    ['x-ratelimit-reset-after', '.5', /expected seconds/],
    ['x-ratelimit-reset-after', '5.', /expected seconds/],
  ])('ignores %s: %j', (name, value, reason) => {
    const r = parse({ [name]: value });
    expect(r).toEqual({
      kind: 'none',
      ignored: [expect.objectContaining({ raw: value, reason: expect.stringMatching(reason) as string })],
    });
  });

  it('keeps a malformed header’s raw value to 128 characters', () => {
    const r = parse({ 'x-ratelimit-remaining': 'x'.repeat(10_000) });
    expect(r.ignored[0]?.raw).toHaveLength(128);
  });

  it('trims optional whitespace around values', () => {
    expect(limitOf(parse({ 'x-ratelimit-remaining': ' \t0 ', 'x-ratelimit-reset': ' 5 ' }))).toMatchObject({
      remaining: 0,
      resetAtMs: nowMs + 5 * s,
    });
  });
});

describe('parseRateLimitHeaders, which family wins', () => {
  it('prefers the current IETF form, then the earlier drafts, then X-RateLimit-*', () => {
    const all = {
      'ratelimit-policy': '"d";q=10;w=60',
      'ratelimit-limit': '20',
      'x-ratelimit-limit': '30',
    };
    expect(limitOf(parse(all)).source).toBe('ietf');
    expect(limitOf(parse({ 'ratelimit-limit': '20', 'x-ratelimit-limit': '30' })).source).toBe('ietf-draft');
  });

  it('falls through to the next family when the first is wholly malformed', () => {
    const r = limitOf(parse({ 'ratelimit-policy': '"d";q=oops', 'x-ratelimit-limit': '30' }));
    expect(r).toMatchObject({ source: 'x-ratelimit', limit: { quota: 30 } });
    expect(r.ignored).toHaveLength(1);
  });

  it('finds headers whatever the case of their names', () => {
    expect(limitOf(parse({ 'X-RateLimit-Remaining': '0' })).remaining).toBe(0);
  });
});

describe('parseRateLimitHeaders, the scope', () => {
  it.each([
    [{ 'x-ratelimit-bucket': 'abcd1234' }, { kind: 'bucket', name: 'abcd1234', from: 'X-RateLimit-Bucket' }],
    [{ 'x-ratelimit-resource': 'search' }, { kind: 'bucket', name: 'search', from: 'X-RateLimit-Resource' }],
    [
      { 'x-ratelimit-bucket': 'b1', 'x-ratelimit-resource': 'core' },
      { kind: 'bucket', name: 'b1', from: 'X-RateLimit-Bucket' },
    ],
  ])('names the bucket from %j', (headers, scope) => {
    expect(limitOf(parse({ 'x-ratelimit-remaining': '1', ...headers })).scope).toEqual(scope);
  });

  it('prefers the bucket header set in the credential’s config', () => {
    const r = limitOf(
      parse({ 'x-acme-bucket': 'orders', 'x-ratelimit-bucket': 'b1' }, { bucketHeader: 'X-Acme-Bucket' }),
    );
    expect(r.scope).toEqual({ kind: 'bucket', name: 'orders', from: 'X-Acme-Bucket' });
  });

  it('returns a scope-only limit when a 429 names only its bucket', () => {
    expect(parse({ 'x-ratelimit-bucket': 'b1' })).toEqual({
      kind: 'limit',
      source: 'x-ratelimit',
      scope: { kind: 'bucket', name: 'b1', from: 'X-RateLimit-Bucket' },
      global: false,
      ignored: [],
    });
  });

  it.each([
    [{ 'x-ratelimit-global': 'true' }, true],
    [{ 'x-ratelimit-global': 'True' }, true],
    [{ 'x-ratelimit-global': 'false' }, false],
    [{ 'x-ratelimit-scope': 'global' }, true],
    [{ 'x-ratelimit-scope': 'user' }, false],
    [{ 'x-ratelimit-scope': 'shared' }, false],
  ])('reads global from %j as %s', (headers, global) => {
    const r = limitOf(parse({ 'x-ratelimit-bucket': 'b1', ...headers }));
    expect(r.global).toBe(global);
    expect(gateScopeOf(r)).toEqual(
      global ? { kind: 'credential' } : { kind: 'bucket', name: 'b1', from: 'X-RateLimit-Bucket' },
    );
  });

  it('keeps the provider’s scope word', () => {
    expect(limitOf(parse({ 'x-ratelimit-scope': 'shared' })).providerScope).toBe('shared');
  });

  it.each([
    [{ 'x-ratelimit-bucket': '' }],
    [{ 'x-ratelimit-bucket': 'two words' }],
    [{ 'x-ratelimit-bucket': 'b'.repeat(129) }],
    [{ 'x-ratelimit-bucket': 'b1', 'x-ratelimit-global': 'yes' }],
    [{ 'x-ratelimit-bucket': 'b1', 'x-ratelimit-scope': 'a b' }],
    // The first bucket header present decides; a malformed one does not fall through to a narrower name.
    [{ 'x-ratelimit-bucket': 'bad name', 'x-ratelimit-resource': 'core' }],
  ])('leaves the limit on the whole credential when a scope header is malformed: %j', (headers) => {
    const r = parse({ 'x-ratelimit-remaining': '0', ...headers });
    expect(limitOf(r).scope).toEqual({ kind: 'credential' });
    expect(r.ignored.length).toBeGreaterThan(0);
  });

  it('gateScopeOf a none is the credential', () => {
    expect(gateScopeOf({ kind: 'none', ignored: [] })).toEqual({ kind: 'credential' });
  });
});

describe('parseRateLimitHeaders, given invalid options', () => {
  it.each([Number.NaN, Number.POSITIVE_INFINITY])('throws RangeError for nowMs %s', (bad) => {
    expect(() => parseRateLimitHeaders({}, { nowMs: bad })).toThrow(RangeError);
  });

  it.each([-1, Number.NaN])('throws RangeError for maxDelayMs %s', (bad) => {
    expect(() => parseRateLimitHeaders({}, { nowMs, maxDelayMs: bad })).toThrow(RangeError);
  });
});

describe('describeLearnedLimit', () => {
  it.each([
    [{ 'ratelimit-policy': '"default";q=60;w=60' }, 'learned from RateLimit-Policy: 60 per 60 s ("default")'],
    [{ 'ratelimit-policy': '60;w=60' }, 'learned from RateLimit-Policy: 60 per 60 s'],
    [
      {
        'x-ratelimit-limit': '60',
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset': '30',
        'x-ratelimit-bucket': 'abc',
      },
      'learned from X-RateLimit-Limit: 60 per window, 0 remaining, resets in 30 s, bucket abc (X-RateLimit-Bucket)',
    ],
    [{ ratelimit: '"d";r=0;t=12' }, 'learned from RateLimit: 0 remaining, resets in 12 s'],
    [{ 'x-ratelimit-global': 'true' }, 'learned from X-RateLimit-*: global (the whole credential)'],
    [{}, 'no limit learned from headers'],
  ])('describes %j as %j', (headers, sentence) => {
    expect(describeLearnedLimit(parse(headers), nowMs)).toBe(sentence);
  });

  it('gives the reset as an instant without nowMs', () => {
    expect(describeLearnedLimit(parse({ ratelimit: '"d";r=0;t=12' }))).toBe(
      'learned from RateLimit: 0 remaining, resets at 2025-06-15T12:00:12.000Z',
    );
  });
});
