import { describe, expect, it } from 'vitest';
import { transportFailureOf } from '../../../src/policy/index.js';

const withCode = (code: string) => Object.assign(new Error(code), { code });

describe('transportFailureOf', () => {
  it.each([
    ['ECONNREFUSED', 'refused', 'no'],
    ['EHOSTUNREACH', 'refused', 'no'],
    ['ENOTFOUND', 'dns', 'no'],
    ['EAI_AGAIN', 'dns', 'no'],
    ['UND_ERR_CONNECT_TIMEOUT', 'timeout', 'no'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'tls', 'no'],
    ['CERT_HAS_EXPIRED', 'tls', 'no'],
    ['UND_ERR_HEADERS_TIMEOUT', 'timeout', 'unknown'],
    ['UND_ERR_BODY_TIMEOUT', 'timeout', 'unknown'],
    ['ECONNRESET', 'reset', 'unknown'],
    ['UND_ERR_SOCKET', 'reset', 'unknown'],
    ['EPIPE', 'reset', 'unknown'],
    ['SOMETHING_NEW', 'other', 'unknown'],
  ])('maps %s to %s, sent %s', (code, transport, sent) => {
    expect(transportFailureOf(withCode(code))).toEqual({ transport, sent, code });
  });

  it('finds the code along the cause chain (undici wraps socket errors)', () => {
    const err = new TypeError('fetch failed', { cause: withCode('ECONNREFUSED') });
    expect(transportFailureOf(err)).toMatchObject({ transport: 'refused', sent: 'no' });
  });

  it('treats an abort or timeout signal as "may have been sent": it can fire after the request left', () => {
    const abort = Object.assign(new Error('The operation was aborted'), { name: 'TimeoutError' });
    expect(transportFailureOf(abort)).toEqual({ transport: 'timeout', sent: 'unknown', code: 'ABORT_ERR' });
  });

  it('never claims "not sent" for something it does not recognise', () => {
    for (const err of [undefined, null, 'boom', 42, {}, new Error('no code')])
      expect(transportFailureOf(err)).toEqual({ transport: 'other', sent: 'unknown', code: undefined });
  });
});
