import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import type { LogEntry } from '@temporalio/worker';
import { BY_DESIGN_SDK_MESSAGES, RetryqLogger } from '../../../src/temporal/runtime.js';

function collect(level: 'INFO' | 'DEBUG') {
  const entries: LogEntry[] = [];
  return { entries, logger: new RetryqLogger(level, (e) => entries.push(e)) };
}

describe("the worker runtime's logger", () => {
  it('logs the messages about single-role workers at DEBUG: hidden at INFO, kept at DEBUG', () => {
    const info = collect('INFO');
    const debug = collect('DEBUG');
    for (const message of BY_DESIGN_SDK_MESSAGES) {
      info.logger.warn(message, { taskQueue: 'q' });
      debug.logger.warn(message, { taskQueue: 'q' });
    }
    expect(info.entries).toEqual([]);
    expect(debug.entries.map((e) => [e.level, e.message, e.meta])).toEqual(
      [...BY_DESIGN_SDK_MESSAGES].map((m) => ['DEBUG', m, { taskQueue: 'q' }]),
    );
  });

  it('passes every other message at its own level', () => {
    const info = collect('INFO');
    info.logger.warn('No workflows registered, not polling for workflow tasks (and something else)');
    info.logger.info('Worker state changed', { state: 'RUNNING' });
    info.logger.error('Activity failed');
    info.logger.debug('below the level');
    expect(info.entries.map((e) => [e.level, e.message])).toEqual([
      ['WARN', 'No workflows registered, not polling for workflow tasks (and something else)'],
      ['INFO', 'Worker state changed'],
      ['ERROR', 'Activity failed'],
    ]);
  });

  it("matches the installed SDK's wording (an SDK upgrade that rewords a message fails here, not silently)", () => {
    const require = createRequire(import.meta.url);
    const workerCode = readFileSync(require.resolve('@temporalio/worker/lib/worker.js'), 'utf8');
    for (const message of BY_DESIGN_SDK_MESSAGES) expect(workerCode).toContain(`'${message}'`);
  });
});
