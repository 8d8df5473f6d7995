/**
 * When an activity sends its first heartbeat (src/activities/heartbeat.ts): not at once — a call answered quickly
 * then costs the server no heartbeat — but never so late that the heartbeat timeout, which the server counts from the
 * attempt's start (after its scheduling), could run out first.
 */
import { describe, expect, it } from 'vitest';
import { HEARTBEAT_EVERY_MS, firstHeartbeatDelayMs } from '../../../src/activities/heartbeat.js';

const scheduled = 1_000_000;

describe('firstHeartbeatDelayMs', () => {
  it.each([
    ['an attempt that started right after it was scheduled waits one heartbeat interval', 0, HEARTBEAT_EVERY_MS],
    ['one that reached the worker 2 s late heartbeats by half the timeout after scheduling', 2_000, 500],
    ['one that reached the worker 3 s late heartbeats at once', 3_000, 0],
    ['one whose scheduling lies ahead of this clock still waits at most one interval', -5_000, HEARTBEAT_EVERY_MS],
  ])('%s', (_, lateMs, expected) => {
    expect(
      firstHeartbeatDelayMs(
        { currentAttemptScheduledTimestampMs: scheduled, heartbeatTimeoutMs: 5_000 },
        scheduled + lateMs,
      ),
    ).toBe(expected);
  });

  it('leaves at least half the heartbeat timeout whatever the lateness', () => {
    for (let late = 0; late <= 6_000; late += 37) {
      const delay = firstHeartbeatDelayMs(
        { currentAttemptScheduledTimestampMs: scheduled, heartbeatTimeoutMs: 5_000 },
        scheduled + late,
      );
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(late + delay).toBeLessThanOrEqual(Math.max(late, 2_500));
    }
  });

  it('without a heartbeat timeout (heartbeats only carry cancellations) waits one interval', () => {
    expect(firstHeartbeatDelayMs({ currentAttemptScheduledTimestampMs: scheduled }, scheduled)).toBe(
      HEARTBEAT_EVERY_MS,
    );
  });
});
