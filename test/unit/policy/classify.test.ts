import { describe, expect, it } from 'vitest';
import {
  classify,
  classifyInspection,
  defaultCodeTable,
  lookupCode,
  mergeCodeTables,
} from '../../../src/policy/index.js';
import type { CodeTable, Decision, Evidence } from '../../../src/policy/index.js';
import { at, imfFixdate, plus } from './http-date-forms.js';

const now = at('2025-06-15T12:00:00Z');

const read: Pick<Evidence, 'method' | 'sent'> = { method: 'GET', sent: 'yes' };
const writeSent: Pick<Evidence, 'method' | 'sent'> = { method: 'POST', sent: 'yes' };
const writeMaybeSent: Pick<Evidence, 'method' | 'sent'> = { method: 'POST', sent: 'unknown' };
const writeNotSent: Pick<Evidence, 'method' | 'sent'> = { method: 'POST', sent: 'no' };

const absent = { kind: 'absent' } as const;
const transient = (reason: string): Decision => ({ kind: 'transient', reason, retryAfter: absent });
const permanent = (reason: Extract<Decision, { kind: 'permanent' }>['reason'], code?: string): Decision =>
  code === undefined ? { kind: 'permanent', reason } : { kind: 'permanent', reason, code };
const unknownOutcome = (reason: string): Decision => ({ kind: 'unknown_outcome', reason });
const success: Decision = { kind: 'success' };
const rateLimited: Decision = { kind: 'rate_limited', retryAfter: absent };

describe('classify, given an HTTP status (rows: read · write that was sent · write not sent)', () => {
  it.each<[number, Decision, Decision, Decision]>([
    [200, success, success, success],
    [201, success, success, success],
    [204, success, success, success],
    [299, success, success, success],
    [301, permanent('other'), permanent('other'), permanent('other')],
    [303, permanent('other'), permanent('other'), permanent('other')],
    [304, permanent('other'), permanent('other'), permanent('other')],
    [308, permanent('other'), permanent('other'), permanent('other')],
    [400, permanent('invalid'), permanent('invalid'), permanent('invalid')],
    [401, permanent('permission'), permanent('permission'), permanent('permission')],
    [402, permanent('quota'), permanent('quota'), permanent('quota')],
    [403, permanent('permission'), permanent('permission'), permanent('permission')],
    [404, permanent('not_found'), permanent('not_found'), permanent('not_found')],
    [405, permanent('other'), permanent('other'), permanent('other')],
    [408, transient('status:408'), transient('status:408'), transient('status:408')],
    [409, permanent('conflict'), permanent('conflict'), permanent('conflict')],
    [410, permanent('not_found'), permanent('not_found'), permanent('not_found')],
    [413, permanent('invalid'), permanent('invalid'), permanent('invalid')],
    [418, permanent('other'), permanent('other'), permanent('other')],
    [422, permanent('invalid'), permanent('invalid'), permanent('invalid')],
    [429, rateLimited, rateLimited, rateLimited],
    [451, permanent('other'), permanent('other'), permanent('other')],
    [500, permanent('other'), unknownOutcome('status:500 after sending'), permanent('other')],
    [501, permanent('other'), permanent('other'), permanent('other')],
    [502, transient('status:502'), unknownOutcome('status:502 after sending'), transient('status:502')],
    [503, transient('status:503'), transient('status:503'), transient('status:503')],
    [504, transient('status:504'), unknownOutcome('status:504 after sending'), transient('status:504')],
    [505, permanent('other'), permanent('other'), permanent('other')],
    [507, permanent('other'), permanent('other'), permanent('other')],
    [511, permanent('other'), permanent('other'), permanent('other')],
    [509, permanent('other'), unknownOutcome('status:509 after sending'), permanent('other')],
    [520, permanent('other'), unknownOutcome('status:520 after sending'), permanent('other')],
    [524, permanent('other'), unknownOutcome('status:524 after sending'), permanent('other')],
    [599, permanent('other'), unknownOutcome('status:599 after sending'), permanent('other')],
  ])('status %i', (status, forRead, forWriteSent, forWriteNotSent) => {
    expect(classify({ ...read, status }, { now })).toEqual(forRead);
    expect(classify({ ...writeSent, status }, { now })).toEqual(forWriteSent);
    expect(classify({ ...writeMaybeSent, status }, { now })).toEqual(forWriteSent);
    expect(classify({ ...writeNotSent, status }, { now })).toEqual(forWriteNotSent);
  });

  it.each([0, 99, 100, 101, 199, 600, 999, 200.5, Number.NaN, -1])(
    'treats the unrecognisable status %s as no definite answer: a write is unknown_outcome, a read permanent',
    (status) => {
      expect(classify({ ...writeSent, status }, { now })).toEqual(
        unknownOutcome(`status:${String(status)} unrecognised after sending`),
      );
      expect(classify({ ...read, status }, { now })).toEqual(permanent('other'));
    },
  );

  it('attaches the provider code to a permanent decision', () => {
    expect(classify({ ...writeSent, status: 400, code: 'parameter_missing' })).toEqual(
      permanent('invalid', 'parameter_missing'),
    );
  });

  it('lets the status win when a transport failure is also reported', () => {
    expect(classify({ ...writeSent, status: 201, transport: 'reset' })).toEqual(success);
  });
});

describe('classify, given no HTTP response (transport failure)', () => {
  it.each(['refused', 'dns', 'tls', 'reset', 'timeout', 'other'] as const)(
    '%s: a read is transient, a write not sent is transient, a write maybe sent is unknown_outcome',
    (transport) => {
      expect(classify({ ...read, transport })).toEqual(transient(`transport:${transport}`));
      expect(classify({ ...writeNotSent, transport })).toEqual(transient(`transport:${transport}`));
      expect(classify({ ...writeSent, transport })).toEqual(unknownOutcome(`transport:${transport} after sending`));
      expect(classify({ ...writeMaybeSent, transport })).toEqual(
        unknownOutcome(`transport:${transport} after sending`),
      );
    },
  );

  it('counts evidence with neither status nor transport as a transport failure of kind other', () => {
    expect(classify({ method: 'GET', sent: 'no' })).toEqual(transient('transport:other'));
    expect(classify({ method: 'PUT', sent: 'unknown' })).toEqual(unknownOutcome('transport:other after sending'));
  });

  it('ignores a structured code when no response arrived', () => {
    expect(classify({ ...writeSent, transport: 'timeout', code: 'rate_limited' })).toEqual(
      unknownOutcome('transport:timeout after sending'),
    );
  });

  it('carries no Retry-After, since there was no response', () => {
    expect(classify({ ...read, transport: 'refused', headers: { 'retry-after': '5' } }, { now })).toEqual(
      transient('transport:refused'),
    );
  });
});

describe('classify, given the method (reads never produce unknown_outcome)', () => {
  it.each(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'get', 'Head'])('%s is a read', (method) => {
    expect(classify({ method, sent: 'unknown', transport: 'timeout' })).toEqual(transient('transport:timeout'));
    expect(classify({ method, sent: 'yes', status: 500 })).toEqual(permanent('other'));
  });

  it.each(['POST', 'PUT', 'PATCH', 'DELETE', 'post', 'PROPFIND', 'CUSTOM'])('%s is a write', (method) => {
    expect(classify({ method, sent: 'yes', status: 502 })).toEqual(unknownOutcome('status:502 after sending'));
  });

  it('treats an inspection as a read whatever its method', () => {
    expect(classify({ method: 'POST', purpose: 'inspect', sent: 'yes', transport: 'timeout' })).toEqual(
      transient('transport:timeout'),
    );
    expect(classify({ method: 'POST', purpose: 'inspect', sent: 'yes', status: 500 })).toEqual(permanent('other'));
  });

  it('treats an unrecognised `sent` value as unknown (the safe side)', () => {
    expect(classify({ method: 'POST', sent: 'maybe' as Evidence['sent'], transport: 'reset' })).toEqual(
      unknownOutcome('transport:reset after sending'),
    );
  });
});

describe('classify, given a structured error code (a code rule beats the status)', () => {
  it.each<[string, number, string, Decision]>([
    [
      'a quota code on a 429 is permanent quota, not a rate limit',
      429,
      'insufficient_quota',
      permanent('quota', 'insufficient_quota'),
    ],
    [
      'a spending limit is permanent quota',
      429,
      'spending_limit_exceeded',
      permanent('quota', 'spending_limit_exceeded'),
    ],
    [
      'an exhausted workspace allowance is permanent quota',
      429,
      'workspace_allowance_exhausted',
      permanent('quota', 'workspace_allowance_exhausted'),
    ],
    [
      'a billing hard limit is permanent quota',
      403,
      'billing_hard_limit_reached',
      permanent('quota', 'billing_hard_limit_reached'),
    ],
    ['a rate-limit code on a 403 is rate_limited', 403, 'rate_limited', rateLimited],
    ['a rate-limit code on a 400 is rate_limited', 400, 'rate_limit_exceeded', rateLimited],
    ['too_many_requests is rate_limited', 429, 'too_many_requests', rateLimited],
    [
      'a key still being processed is transient',
      409,
      'idempotency_key_in_use',
      transient('code:idempotency_key_in_use'),
    ],
    [
      'a key reused with other parameters is permanent conflict',
      400,
      'idempotency_key_reused',
      permanent('conflict', 'idempotency_key_reused'),
    ],
    [
      'an idempotency error is permanent conflict',
      409,
      'idempotency_error',
      permanent('conflict', 'idempotency_error'),
    ],
    ['a permission code beats a 400', 400, 'invalid_api_key', permanent('permission', 'invalid_api_key')],
    [
      'an overload code on a 529 is transient, even for a write',
      529,
      'overloaded_error',
      transient('code:overloaded_error'),
    ],
    [
      'an overload code on a 500 is a definite answer, not unknown_outcome',
      500,
      'overloaded',
      transient('code:overloaded'),
    ],
    ['codes match case-insensitively', 403, 'RATE_LIMITED', rateLimited],
    ['an unknown code falls back to the status and is kept', 404, 'weird_thing', permanent('not_found', 'weird_thing')],
    ['an empty code is no code', 404, '', permanent('not_found')],
  ])('%s', (_case, status, code, expected) => {
    expect(classify({ ...writeSent, status, code }, { now })).toEqual(expected);
  });

  it('ignores the code of a 2xx: a 2xx is never retried', () => {
    expect(classify({ ...writeSent, status: 200, code: 'rate_limited' })).toEqual(success);
  });

  it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'])(
    'never takes %j from Object.prototype for a rule',
    (code) => {
      expect(classify({ ...writeSent, status: 400, code })).toEqual(permanent('invalid', code));
    },
  );

  it('uses a table from options, e.g. the defaults extended from config', () => {
    const codes = mergeCodeTables(defaultCodeTable, {
      daily_limit_reached: { kind: 'permanent', reason: 'quota' },
      rate_limited: { kind: 'permanent', reason: 'other' },
    });
    expect(classify({ ...writeSent, status: 429, code: 'daily_limit_reached' }, { codes })).toEqual(
      permanent('quota', 'daily_limit_reached'),
    );
    expect(classify({ ...writeSent, status: 429, code: 'rate_limited' }, { codes })).toEqual(
      permanent('other', 'rate_limited'),
    );
    expect(classify({ ...writeSent, status: 429, code: 'insufficient_quota' }, { codes })).toEqual(
      permanent('quota', 'insufficient_quota'),
    );
  });

  it('ignores a malformed rule from unchecked configuration', () => {
    const codes = {
      bogus: { kind: 'retry_forever' },
      half: { kind: 'permanent', reason: 'nope' },
    } as unknown as CodeTable;
    expect(classify({ ...writeSent, status: 409, code: 'bogus' }, { codes })).toEqual(permanent('conflict', 'bogus'));
    expect(classify({ ...writeSent, status: 409, code: 'half' }, { codes })).toEqual(permanent('conflict', 'half'));
  });
});

describe('the code table', () => {
  it('is frozen', () => {
    expect(Object.isFrozen(defaultCodeTable)).toBe(true);
  });

  it('merges without modifying its inputs, lower-cases added keys, and freezes the result', () => {
    const extra: CodeTable = { Daily_Limit: { kind: 'permanent', reason: 'quota' } };
    const merged = mergeCodeTables(defaultCodeTable, extra);
    expect(Object.isFrozen(merged)).toBe(true);
    expect(merged['daily_limit']).toEqual({ kind: 'permanent', reason: 'quota' });
    expect(Object.keys(extra)).toEqual(['Daily_Limit']);
    expect(defaultCodeTable['daily_limit']).toBeUndefined();
    expect(lookupCode(merged, 'DAILY_LIMIT')).toEqual({ kind: 'permanent', reason: 'quota' });
  });

  it('stores a `__proto__` key from config as an ordinary code', () => {
    const extra = JSON.parse('{"__proto__": {"kind": "transient"}}') as CodeTable;
    const merged = mergeCodeTables(defaultCodeTable, extra);
    expect(lookupCode(merged, '__proto__')).toEqual({ kind: 'transient' });
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
  });

  it('finds nothing for an absent or empty code', () => {
    expect(lookupCode(defaultCodeTable, undefined)).toBeUndefined();
    expect(lookupCode(defaultCodeTable, '')).toBeUndefined();
  });
});

describe('classify, given a Retry-After header on a retryable response', () => {
  const retryAfter30 = { kind: 'delay', delayMs: 30_000, notBefore: plus(now, 30_000), clamped: false } as const;

  it('carries the parsed Retry-After on a 429', () => {
    expect(classify({ ...writeSent, status: 429, headers: { 'retry-after': '30' } }, { now })).toEqual({
      kind: 'rate_limited',
      retryAfter: retryAfter30,
    });
  });

  it.each([503, 408])('carries the floor on a %i (transient)', (status) => {
    expect(classify({ ...writeSent, status, headers: { 'retry-after': '30' } }, { now })).toEqual({
      kind: 'transient',
      reason: `status:${status}`,
      retryAfter: retryAfter30,
    });
  });

  it('carries the floor on a rate-limit code', () => {
    expect(classify({ ...read, status: 403, code: 'rate_limited', headers: { 'retry-after': '30' } }, { now })).toEqual(
      { kind: 'rate_limited', retryAfter: retryAfter30 },
    );
  });

  it('carries an invalid Retry-After as invalid (the scheduler keeps the backoff, invariant 4)', () => {
    expect(classify({ ...read, status: 429, headers: { 'retry-after': 'soon' } }, { now })).toMatchObject({
      kind: 'rate_limited',
      retryAfter: { kind: 'invalid', raw: 'soon' },
    });
  });

  it('finds the header whatever the case of its name', () => {
    expect(classify({ ...read, status: 429, headers: { 'Retry-After': '30' } }, { now })).toEqual({
      kind: 'rate_limited',
      retryAfter: retryAfter30,
    });
  });

  it('corrects clock skew with the response’s Date header', () => {
    const serverNow = plus(now, 600_000);
    const headers = { 'retry-after': imfFixdate(plus(serverNow, 30_000)), date: imfFixdate(serverNow) };
    expect(classify({ ...read, status: 503, headers }, { now })).toMatchObject({
      retryAfter: { kind: 'date', delayMs: 30_000, notBefore: plus(now, 30_000), skewCorrected: true },
    });
  });

  it('passes maxDelayMs on', () => {
    expect(
      classify({ ...read, status: 429, headers: { 'retry-after': '120' } }, { now, maxDelayMs: 60_000 }),
    ).toMatchObject({ retryAfter: { delayMs: 60_000, clamped: true } });
  });

  it('throws RangeError for an Invalid Date now (a programming error)', () => {
    expect(() =>
      classify({ ...read, status: 429, headers: { 'retry-after': '1' } }, { now: new Date(Number.NaN) }),
    ).toThrow(RangeError);
  });
});

describe('classify, given no `now` (the one-argument form)', () => {
  const headers = { 'retry-after': '30' };

  it('counts from evidence.receivedAtMs', () => {
    expect(classify({ ...read, status: 429, headers, receivedAtMs: now.getTime() })).toEqual({
      kind: 'rate_limited',
      retryAfter: { kind: 'delay', delayMs: 30_000, notBefore: plus(now, 30_000), clamped: false },
    });
  });

  it('prefers options.now over receivedAtMs', () => {
    const later = plus(now, 5_000);
    expect(classify({ ...read, status: 429, headers, receivedAtMs: now.getTime() }, { now: later })).toMatchObject({
      retryAfter: { notBefore: plus(later, 30_000) },
    });
  });

  it('falls back to the response’s Date header when receivedAtMs is absent or not a finite time', () => {
    for (const receivedAtMs of [undefined, Number.NaN, 1e20]) {
      expect(
        classify({ ...read, status: 429, headers: { ...headers, date: imfFixdate(now) }, receivedAtMs }),
      ).toMatchObject({ retryAfter: { kind: 'delay', notBefore: plus(now, 30_000) } });
    }
  });

  it('falls back to the Unix epoch last, which the scheduler sees as a past floor (invariant 4)', () => {
    expect(classify({ ...read, status: 429, headers })).toMatchObject({
      retryAfter: { kind: 'delay', delayMs: 30_000, notBefore: new Date(30_000) },
    });
  });
});

describe('classifyInspection (a 404 means "no such operation")', () => {
  it.each<[string, Partial<Evidence>, unknown]>([
    ['2xx: the operation exists', { status: 200 }, { kind: 'operation_found' }],
    ['404: no such operation', { status: 404 }, { kind: 'operation_absent' }],
    ['410: no such operation', { status: 410 }, { kind: 'operation_absent' }],
    ['a not-found code: no such operation', { status: 400, code: 'resource_missing' }, { kind: 'operation_absent' }],
    [
      'a 404 whose code says the key is wrong: the lookup failed',
      { status: 404, code: 'invalid_api_key' },
      { kind: 'inspection_failed', decision: permanent('permission', 'invalid_api_key') },
    ],
    ['429: the lookup was rate limited', { status: 429 }, { kind: 'inspection_failed', decision: rateLimited }],
    [
      '503: the lookup failed for now',
      { status: 503 },
      { kind: 'inspection_failed', decision: transient('status:503') },
    ],
    ['500: the lookup failed', { status: 500 }, { kind: 'inspection_failed', decision: permanent('other') }],
    [
      'a timeout: the lookup failed for now, never unknown_outcome',
      { transport: 'timeout' },
      { kind: 'inspection_failed', decision: transient('transport:timeout') },
    ],
  ])('%s', (_case, evidence, expected) => {
    // Inspections may use POST at some providers; they are reads all the same.
    expect(classifyInspection({ method: 'POST', sent: 'unknown', ...evidence }, { now })).toEqual(expected);
  });

  it('leaves classify’s own answer to a 404 on an inspection as permanent not_found', () => {
    expect(classify({ method: 'GET', purpose: 'inspect', sent: 'yes', status: 404 })).toEqual(permanent('not_found'));
  });
});
