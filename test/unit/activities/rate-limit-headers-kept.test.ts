/** Which response headers the provider call keeps for load control (src/activities/provider-call.ts). */
import { describe, expect, it } from 'vitest';
import { rateLimitHeadersOf } from '../../../src/activities/provider-call.js';

describe('rateLimitHeadersOf', () => {
  it('keeps both rate-limit header families and Date, by lower-case name, and nothing else', () => {
    expect(
      rateLimitHeadersOf({
        'RateLimit-Policy': '"default";q=60;w=60',
        ratelimit: '"default";r=0;t=12',
        'x-ratelimit-remaining': '0',
        'X-RateLimit-Bucket': 'abc',
        date: 'Thu, 03 Dec 2026 12:00:00 GMT',
        'set-cookie': 'session=secret',
        authorization: 'Bearer sk_live',
        'content-type': 'application/json',
      }),
    ).toEqual({
      'ratelimit-policy': '"default";q=60;w=60',
      ratelimit: '"default";r=0;t=12',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-bucket': 'abc',
      date: 'Thu, 03 Dec 2026 12:00:00 GMT',
    });
  });

  it("keeps the credential's configured bucket header, compared case-insensitively", () => {
    expect(rateLimitHeadersOf({ 'x-shopify-bucket': 'orders', 'x-other': '1' }, 'X-Shopify-Bucket')).toEqual({
      'x-shopify-bucket': 'orders',
    });
  });

  it('joins repeated values (a parser then ignores a malformed pair) and bounds their number and length', () => {
    expect(rateLimitHeadersOf({ 'x-ratelimit-remaining': ['5', '0'] })).toEqual({ 'x-ratelimit-remaining': '5, 0' });
    const many = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`x-ratelimit-h${i}`, 'y'.repeat(1000)]));
    const kept = rateLimitHeadersOf(many);
    expect(Object.keys(kept).length).toBeLessThanOrEqual(24);
    expect(Object.values(kept).every((v) => v.length <= 256)).toBe(true);
  });
});
