import { describe, expect, it } from 'vitest';
import { formatDurationMs, parseDurationMs } from '../../src/duration.js';

describe('parseDurationMs', () => {
  it.each([
    ['250ms', 250],
    ['30s', 30_000],
    ['5m', 300_000],
    ['24h', 86_400_000],
    ['7d', 604_800_000],
    ['1.5h', 5_400_000],
    [' 2 m ', 120_000],
    ['1500', 1500],
    [1500, 1500],
    [0, 0],
  ])('reads %j as %d ms', (input, ms) => expect(parseDurationMs(input)).toBe(ms));

  it.each([['soon'], ['-5s'], ['5 weeks'], ['.5s'], ['5.s'], ['1.2.3s'], [''], [-1], [Number.NaN], [Infinity], [null]])(
    'rejects %j',
    (input) => expect(parseDurationMs(input)).toBeUndefined(),
  );
});

describe('formatDurationMs', () => {
  it.each([
    [850, '850ms'],
    [120_000, '2m 0s'],
    [3_900_000, '1h 5m'],
    [3 * 86_400_000, '3d 0h'],
  ])('formats %d ms as %s', (ms, text) => expect(formatDurationMs(ms)).toBe(text));
});
