/**
 * Intent size limits and the validation messages of `submit`: the field, its size and the limit, in retryq's words.
 */
import { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { RetryqClient } from '../../src/client.js';
import { ConfigError, IntentValidationError } from '../../src/errors.js';
import type { IntentInput } from '../../src/intent.js';
import { defaultIntentLimits, describeBytes, limitProblems, sizeProblems } from '../../src/intent-limits.js';

/** A client that is never connected: `prepare` validates without a server. */
const client = (options: Partial<ConstructorParameters<typeof RetryqClient>[0]> = {}) =>
  new RetryqClient({ client: Object.create(Client.prototype) as Client, ...options });

const intent = (action: Record<string, unknown>): IntentInput => ({
  idempotencyKey: 'order-1',
  credential: 'acme-prod',
  action: { method: 'POST', url: 'https://api.example.com/v1/charges', ...action },
  inspection: { url: 'https://api.example.com/v1/operations/{idempotencyKey}' },
});

function problemsOf(rq: RetryqClient, input: unknown) {
  try {
    rq.prepare(input as IntentInput);
  } catch (err) {
    expect(err).toBeInstanceOf(IntentValidationError);
    return (err as IntentValidationError).problems;
  }
  throw new Error('expected an IntentValidationError');
}

describe('intent size limits', () => {
  it('rejects a body above the limit, naming the field, its size and the limit', () => {
    const body = { blob: 'x'.repeat(3 * 1024 * 1024) };
    const problems = problemsOf(client(), intent({ body }));
    expect(problems).toHaveLength(1);
    expect(problems[0]?.path).toBe('action.body');
    const size = Buffer.byteLength(JSON.stringify(body));
    expect(problems[0]?.message).toContain(`is ${describeBytes(size)} of JSON`);
    expect(problems[0]?.message).toContain('at most 262,144 bytes (256 KiB)');
    expect(problems[0]?.message).toContain('RETRYQ_MAX_BODY_BYTES');
  });

  it('rejects headers and URLs above their limits, and the inspection URL too', () => {
    const headers = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`X-Trace-${i}`, 'v'.repeat(500)]));
    const longUrl = `https://api.example.com/v1/charges?q=${'a'.repeat(9000)}`;
    const input = intent({ headers, url: longUrl });
    (input as { inspection: { url: string } }).inspection.url =
      `https://api.example.com/v1/operations/{idempotencyKey}?p=${'b'.repeat(9000)}`;
    const problems = problemsOf(client(), input);
    expect(problems.map((p) => p.path).sort()).toEqual(['action.headers', 'action.url', 'inspection.url']);
    for (const p of problems) expect(p.message).toMatch(/^is [\d,]+ bytes .*; at most [\d,]+ bytes/);
  });

  it('accepts an intent at the limit and applies raised limits', () => {
    const body = 'y'.repeat(defaultIntentLimits.maxBodyBytes - 2); // JSON adds the two quotes
    expect(() => client().prepare(intent({ body }))).not.toThrow();
    expect(() => client().prepare(intent({ body: `${body}z` }))).toThrow(IntentValidationError);
    expect(() => client({ limits: { maxBodyBytes: 512 * 1024 } }).prepare(intent({ body: `${body}z` }))).not.toThrow();
  });

  it('refuses limits beyond what Temporal can carry', () => {
    expect(limitProblems({ maxBodyBytes: 4 * 1024 * 1024 })[0]?.message).toBe(
      'must be a whole number of bytes from 1 to 1,048,576 bytes (1 MiB)',
    );
    expect(() => client({ limits: { maxBodyBytes: 0 } })).toThrow(ConfigError);
    expect(() => client({ limits: { maxBodyBytes: 0 } })).toThrow(/limits\.maxBodyBytes/);
    expect(sizeProblems('not an intent', defaultIntentLimits)).toEqual([]);
  });
});

describe('validation messages', () => {
  it("say which field, what is wrong and what is allowed, never the library's words", () => {
    const problems = problemsOf(client(), {
      credential: 5,
      action: { method: 'FETCH', url: 'https://api.example.com/v1', extra: true },
      policy: { maxAttempts: Number.NaN },
      deadline: {},
    });
    const byPath = Object.fromEntries(problems.map((p) => [p.path, p.message]));
    expect(byPath['idempotencyKey']).toBe('is required: text (a string)');
    expect(byPath['credential']).toBe('must be text (a string) (got the number 5)');
    expect(byPath['action.method']).toBe(
      'must be one of "GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE" (got the text "FETCH")',
    );
    expect(byPath['action']).toContain('has a field retryq does not know: "extra"');
    expect(byPath['policy.maxAttempts']).toBe('must be a finite number (got NaN, not a number)');
    expect(byPath['deadline']).toContain('must be an ISO 8601 time, a Date, or a duration such as');
    for (const p of problems) expect(p.message).not.toMatch(/expected \w+, received|Invalid input/);
  });
});
