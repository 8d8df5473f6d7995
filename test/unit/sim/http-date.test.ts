import { describe, expect, it } from 'vitest';
import {
  admissionRetryAfter,
  formatAsctimeDate,
  formatHttpDate,
  formatImfFixdate,
  formatRfc850Date,
  renderRetryAfter,
} from '../../../src/sim/index.js';

// RFC 9110 §5.6.7's example instant, plus 400 ms that every form drops.
const rfcExample = Date.UTC(1994, 10, 6, 8, 49, 37) + 400;

describe('HTTP-date formatting', () => {
  it("writes RFC 9110's three example forms for the same instant", () => {
    expect(formatImfFixdate(rfcExample)).toBe('Sun, 06 Nov 1994 08:49:37 GMT');
    expect(formatRfc850Date(rfcExample)).toBe('Sunday, 06-Nov-94 08:49:37 GMT');
    expect(formatAsctimeDate(rfcExample)).toBe('Sun Nov  6 08:49:37 1994');
  });

  it('pads two-digit days in asctime and two-digit years in RFC 850 correctly', () => {
    const t = Date.UTC(2005, 0, 23, 1, 2, 3);
    expect(formatAsctimeDate(t)).toBe('Sun Jan 23 01:02:03 2005');
    expect(formatRfc850Date(t)).toBe('Sunday, 23-Jan-05 01:02:03 GMT');
    expect(formatHttpDate(t)).toBe('Sun, 23 Jan 2005 01:02:03 GMT');
  });
});

describe('Retry-After values', () => {
  const server = Date.UTC(2026, 0, 1, 12, 0, 0, 250);

  it('renders scripted specs relative to the server clock and passes raw strings through', () => {
    expect(renderRetryAfter(30, server)).toBe('30');
    expect(renderRetryAfter('http-date:+90s', server)).toBe('Thu, 01 Jan 2026 12:01:30 GMT');
    expect(renderRetryAfter('http-date:-1h', server)).toBe('Thu, 01 Jan 2026 11:00:00 GMT');
    expect(renderRetryAfter({ httpDate: 'asctime', inSeconds: 60 }, server)).toBe('Thu Jan  1 12:01:00 2026');
    expect(renderRetryAfter('garbage', server)).toBe('garbage');
  });

  it('rounds the admission wait up to whole seconds and never below 1', () => {
    expect(admissionRetryAfter(1, server, 'seconds')).toBe('1');
    expect(admissionRetryAfter(1_001, server, 'seconds')).toBe('2');
    expect(admissionRetryAfter(60_000, server, 'seconds')).toBe('60');
  });

  it('writes an admission HTTP-date no earlier than the admit time and at least 1 s after the Date header', () => {
    expect(admissionRetryAfter(10, server, 'http-date')).toBe('Thu, 01 Jan 2026 12:00:01 GMT');
    expect(admissionRetryAfter(1_800, server, 'http-date')).toBe('Thu, 01 Jan 2026 12:00:03 GMT');
  });
});
