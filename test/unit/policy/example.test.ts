import { describe, expect, it } from 'vitest';
import { classify, nextAttempt } from '../../../src/policy/index.js';

describe('the module example of src/policy/index.ts', () => {
  it('gives the results its comments state', () => {
    const now = new Date('2025-03-01T12:00:00Z');
    const decision = classify({ method: 'POST', status: 429, headers: { 'retry-after': '120' }, sent: 'yes' }, { now });
    expect(decision).toEqual({
      kind: 'rate_limited',
      retryAfter: { kind: 'delay', delayMs: 120_000, notBefore: new Date('2025-03-01T12:02:00Z'), clamped: false },
    });

    const schedule = nextAttempt({
      decision,
      attempt: 1,
      now,
      deadline: new Date('2025-03-01T13:00:00Z'),
      policy: { maxAttempts: 5, baseDelayMs: 1000, maxBackoffMs: 30_000, multiplier: 2, jitter: 0.2 },
      random: () => 0.5,
    });
    expect(schedule).toEqual({ kind: 'retry_at', at: new Date('2025-03-01T12:02:00.000Z'), floor: 'server' });
  });
});
