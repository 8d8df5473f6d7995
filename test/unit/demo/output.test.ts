import { describe, expect, it } from 'vitest';
import { DEMO_LEGEND, DEMO_LINE_WIDTH, formatSummary, progressLines, wrapText } from '../../../src/demo/run.js';
import type { DemoProgress, DemoSummary } from '../../../src/demo/run.js';

const busy: DemoProgress = {
  done: 1234,
  total: 10000,
  elapsedS: 98765,
  counts: {
    scheduled: 1000,
    dispatching: 2000,
    waiting: 3000,
    inspecting: 1000,
    succeeded: 1000,
    failed: 1000,
    expired: 500,
    cancelled: 500,
  },
  nextWake: '2026-12-03T12:03:07.000Z',
  requestsPerSecond: 12.3456,
  limitPerSecond: 0.33,
  rateLimited: 123456,
  duplicates: 0,
  control:
    'demo-acme: 20/min · gate closed until 12:03:07 UTC · BLOCKED (HTTP 402 spending_limit_exceeded) · 4 in flight, 9000 waiting',
};

const widest = (lines: readonly string[]) => Math.max(...lines.map((l) => l.length));

describe('the demo’s progress', () => {
  it('never prints a line wider than 100 characters, on a terminal or in a log, even with every count large', () => {
    expect(DEMO_LINE_WIDTH).toBe(100);
    expect(widest(progressLines(busy, true))).toBeLessThanOrEqual(100);
    expect(widest(progressLines(busy, false))).toBeLessThanOrEqual(100);
  });

  it('prints one line per refresh in a log, and leaves out phases with no intent', () => {
    const lines = progressLines({ ...busy, counts: { waiting: 3, succeeded: 2 }, control: undefined }, false);
    expect(lines).toEqual(['1234/10000 done, 98765 s · waiting 3 · succeeded 2 · 429s 123456 · duplicates 0']);
  });

  it('shows the bar, the phases, the provider’s counts and load control on a terminal', () => {
    const lines = progressLines({ ...busy, done: 5, total: 10, counts: { waiting: 5, succeeded: 5 } }, true);
    expect(lines[0]).toBe(`[${'#'.repeat(15)}${'-'.repeat(15)}] 5/10 done  98765 s`);
    expect(lines[1]).toBe('waiting 5 · succeeded 5');
    expect(lines[2]).toBe(
      'next wake-up 12:03:07 UTC · provider 12.35 req/s (limit 0.33/s) · 429s 123456 · duplicates 0',
    );
    expect(lines[3]).toMatch(/^load control demo-acme: 20\/min · gate closed until 12:03:07 UTC · .*…$/);
  });

  it('explains once, before the progress, what the phases and the provider’s counts mean', () => {
    const legend = DEMO_LEGEND.join(' ');
    expect(legend).toContain('expired (the provider’s permitted time lies past its deadline)');
    expect(legend).toContain('a duplicate is a second side effect for one idempotency key');
    expect(widest(DEMO_LEGEND)).toBeLessThanOrEqual(100);
  });
});

describe('the demo’s summary', () => {
  const summary: DemoSummary = {
    rows: [
      {
        key: 'demo-261203-143000-lost-1',
        phase: 'succeeded',
        attempts: 1,
        inspections: 0,
        outcome: 'resolved by webhook (no inspection)',
      },
      {
        key: 'demo-261203-143000-far-1',
        phase: 'expired',
        attempts: 1,
        inspections: 0,
        outcome: 'permits 13:39:41 UTC, past the deadline',
      },
      { key: 'demo-261203-143000-flaky-1', phase: 'succeeded', attempts: 3, inspections: 0, outcome: 'x'.repeat(200) },
    ],
    elapsedMs: 123_000,
    totals: {
      intents: 24,
      succeeded: 22,
      failed: 1,
      expired: 1,
      cancelled: 0,
      providerCalls: 58,
      inspections: 3,
      rateLimited: 12,
      sideEffects: 23,
      duplicates: 0,
    },
    webhooks: { deliveries: 30, duplicatesIgnored: 5, late: 2, rejected: 44, faultsAccepted: 0, intentsResolved: 1 },
  };
  const text = formatSummary(summary);

  it('keeps every line within 100 characters, whole rows included', () => {
    expect(widest(text.split('\n'))).toBeLessThanOrEqual(100);
    expect(text).toMatch(/demo-261203-143000-far-1 +expired +1 +0 +permits 13:39:41 UTC, past the deadline/);
    expect(text).toMatch(/demo-261203-143000-lost-1 +succeeded +1 +0 +resolved by webhook \(no inspection\)/);
  });

  it('says what the refused webhook deliveries were: the simulator’s forged and stale copies', () => {
    const flat = text.replace(/\s+/g, ' ');
    expect(flat).toContain('Demo finished in 123 s: 24 intents — 22 succeeded, 1 failed, 1 expired, 0 cancelled.');
    expect(flat).toContain(
      '44 forged or stale refused (0 accepted): the simulator also sends copies with a forged signature or an old ' +
        'timestamp, and each must be refused with 401.',
    );
  });
});

describe('wrapText', () => {
  it('breaks between words and cuts a word longer than the line', () => {
    expect(wrapText('aaa bbb ccc', 7)).toEqual(['aaa bbb', 'ccc']);
    expect(wrapText('abcdefghij', 5)).toEqual(['abcd…']);
  });
});
