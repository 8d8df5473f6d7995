import { describe, expect, it } from 'vitest';
import { inspectionFailure, inspectionVerdict, retryAfterText } from '../../../src/policy/index.js';

const now = new Date('2025-06-15T12:00:00Z');
const ctx = { method: 'POST', permittedAtMs: undefined, now };

describe('inspectionVerdict: what the state found under the idempotency key means', () => {
  it('an operation that succeeded took effect', () => {
    expect(inspectionVerdict({ kind: 'succeeded', result: { id: 'op_1' } }, ctx)).toEqual({
      kind: 'took_effect',
      result: { id: 'op_1' },
    });
  });

  it('no operation means re-dispatch after the backoff when the server set no floor', () => {
    expect(inspectionVerdict({ kind: 'absent' }, ctx)).toEqual({
      kind: 'redispatch',
      decision: {
        kind: 'transient',
        reason: 'the attempt of unknown outcome did not take effect',
        retryAfter: { kind: 'absent' },
      },
    });
  });

  it("no operation keeps the server's earlier floor for the re-dispatch (invariant 2)", () => {
    const floor = now.getTime() + 30_000;
    const verdict = inspectionVerdict({ kind: 'absent' }, { ...ctx, permittedAtMs: floor });
    expect(verdict).toEqual({
      kind: 'redispatch',
      decision: {
        kind: 'transient',
        reason: 'the attempt of unknown outcome did not take effect',
        retryAfter: { kind: 'delay', delayMs: 30_000, notBefore: new Date(floor), clamped: false },
      },
    });
  });

  it('a pending operation is inspected again, naming its state', () => {
    expect(inspectionVerdict({ kind: 'pending', state: 'processing' }, ctx)).toEqual({
      kind: 'inspect_again',
      decision: { kind: 'transient', reason: 'operation processing', retryAfter: { kind: 'absent' } },
    });
  });

  it('a recorded failure is classified as the answer the provider recorded, 500 when it names no status', () => {
    const recorded = inspectionVerdict({ kind: 'failed', error: { status: 402, code: 'insufficient_quota' } }, ctx);
    expect(recorded).toEqual({
      kind: 'recorded_failure',
      evidence: { method: 'POST', sent: 'yes', status: 402, code: 'insufficient_quota' },
      decision: { kind: 'permanent', reason: 'quota', code: 'insufficient_quota' },
    });
    const bare = inspectionVerdict({ kind: 'failed', error: {} }, ctx);
    expect(bare).toMatchObject({ kind: 'recorded_failure', evidence: { status: 500 } });
  });
});

describe('inspectionFailure: when the inspection call itself fails', () => {
  it('keeps a permanent failure and a rate limit, and inspects again after anything else', () => {
    expect(inspectionFailure({ kind: 'permanent', reason: 'permission' })).toEqual({
      kind: 'permanent',
      reason: 'permission',
    });
    const limited = { kind: 'rate_limited', retryAfter: { kind: 'absent' } } as const;
    expect(inspectionFailure(limited)).toBe(limited);
    const again = { kind: 'transient', reason: 'inspection failed', retryAfter: { kind: 'absent' } };
    expect(inspectionFailure({ kind: 'success' })).toEqual(again);
    expect(inspectionFailure({ kind: 'unknown_outcome', reason: 'transport:timeout after sending' })).toEqual(again);
  });
});

describe('retryAfterText', () => {
  it('gives delay-seconds their unit and leaves dates and malformed values as sent', () => {
    expect(retryAfterText('120')).toBe('120 s');
    expect(retryAfterText('Sun, 15 Jun 2025 12:02:00 GMT')).toBe('Sun, 15 Jun 2025 12:02:00 GMT');
    expect(retryAfterText('soon')).toBe('soon');
    expect(retryAfterText('1.5')).toBe('1.5');
  });
});
