import { Worker as Thread } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { withWorkflowThreadHeap, withWorkflowThreadSemiSpace } from '../../src/temporal/workflow-thread-memory.js';
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

describe('the workflow thread old generation', () => {
  it('is bounded for a thread started inside withWorkflowThreadHeap, and left as it was for threads after', async () => {
    const before = await heapLimitOfNewThreadMb();
    const inside = await withWorkflowThreadHeap({ semiSpaceMb: 2, oldSpaceMb: 128 }, heapLimitOfNewThreadMb);
    const after = await heapLimitOfNewThreadMb();
    // The limit is the old generation plus the young one (three semi-spaces of 2 MB).
    expect(inside).toBeGreaterThanOrEqual(128);
    expect(inside).toBeLessThanOrEqual(128 + 3 * 2 + 1);
    expect(before).toBeGreaterThan(1024);
    expect(after).toBe(before);
  });

  it('changes only the young generation when the old generation bound is 0', async () => {
    const young = await withWorkflowThreadSemiSpace(1, heapLimitOfNewThreadMb);
    expect(await withWorkflowThreadHeap({ semiSpaceMb: 1, oldSpaceMb: 0 }, heapLimitOfNewThreadMb)).toBe(young);
  });
});

describe('workerTuningOf', () => {
  it("fills in the defaults, with the workflow-task slots brought down to a smaller cache and the thread's heap bounded", () => {
    expect(workerTuningOf({ maxCachedWorkflows: 20 })).toEqual({
      maxCachedWorkflows: 20,
      workflowTaskConcurrency: 20,
      stickyQueueTimeoutMs: 5_000,
      workflowThreadSemiSpaceMb: 2,
      workflowThreadOldSpaceMb: 512,
      heapReleaseAfterBurstMb: 16,
      wakeUpsPerSecond: 10,
    });
    expect(workerTuningOf({}).workflowTaskConcurrency).toBe(40);
  });

  it('rejects a concurrency set above the cache, naming the field', () => {
    expect(() => workerTuningOf({ maxCachedWorkflows: 20, workflowTaskConcurrency: 30 })).toThrow(
      /worker\.workflowTaskConcurrency/,
    );
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
