import { Worker as Thread } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { withWorkflowThreadSemiSpace } from '../../src/temporal/workflow-thread-memory.js';
import { workerTuningOf } from '../../src/worker.js';

/** The heap limit (old + young generation) of a thread started now, in MB. */
async function heapLimitOfNewThreadMb(): Promise<number> {
  const thread = new Thread(
    "require('node:worker_threads').parentPort.postMessage(require('node:v8').getHeapStatistics().heap_size_limit)",
    { eval: true },
  );
  const limit = await new Promise<number>((resolve, reject) => {
    thread.once('message', resolve);
    thread.once('error', reject);
  });
  await thread.terminate();
  return limit / 2 ** 20;
}

describe('the workflow thread young generation', () => {
  it('is bounded for a thread started inside withWorkflowThreadSemiSpace, and left as it was for threads after', async () => {
    const before = await heapLimitOfNewThreadMb();
    const inside = await withWorkflowThreadSemiSpace(1, heapLimitOfNewThreadMb);
    const after = await heapLimitOfNewThreadMb();
    // V8's default semi-space on 64-bit is 16 MB (the young generation is three semi-spaces): 1 MB takes ≥ 30 MB off.
    expect(before - inside).toBeGreaterThanOrEqual(30);
    expect(after).toBe(before);
  });

  it('changes nothing with 0 (V8 sizes it itself)', async () => {
    const before = await heapLimitOfNewThreadMb();
    expect(await withWorkflowThreadSemiSpace(0, heapLimitOfNewThreadMb)).toBe(before);
  });

  it('puts the setting back when creating the worker fails', async () => {
    const before = await heapLimitOfNewThreadMb();
    await expect(
      withWorkflowThreadSemiSpace(1, () => Promise.reject(new Error('the worker could not start'))),
    ).rejects.toThrow('the worker could not start');
    expect(await heapLimitOfNewThreadMb()).toBe(before);
  });
});

describe('workerTuningOf', () => {
  it('fills in the defaults, a bounded workflow thread young generation among them', () => {
    expect(workerTuningOf({ maxCachedWorkflows: 20 })).toEqual({
      maxCachedWorkflows: 20,
      workflowTaskConcurrency: 10,
      stickyQueueTimeoutMs: 5_000,
      workflowThreadSemiSpaceMb: 2,
      wakeUpsPerSecond: 10,
    });
  });

  it('names the field, the rule and the value found for a bad workflowThreadSemiSpaceMb or wakeUpsPerSecond', () => {
    const problems = (tuning: object) => {
      try {
        workerTuningOf(tuning);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as ConfigError).problems;
      }
      throw new Error('expected a ConfigError');
    };
    expect(problems({ workflowThreadSemiSpaceMb: 1.5 })).toEqual([
      { path: 'worker.workflowThreadSemiSpaceMb', message: 'must be a whole number of MB', received: 1.5 },
    ]);
    expect(problems({ workflowThreadSemiSpaceMb: 512 })).toEqual([
      { path: 'worker.workflowThreadSemiSpaceMb', message: 'must be at most 256 (MB)', received: 512 },
    ]);
    expect(problems({ wakeUpsPerSecond: 0.5 })).toEqual([
      { path: 'worker.wakeUpsPerSecond', message: 'must be a whole number of intents per second', received: 0.5 },
    ]);
  });
});
