/**
 * The rule `npm run bench:scale:goals` judges issue #9's goals by, over several `bench:scale` runs: a ratio on the
 * median of the runs, memory on the worst run, the wake-up storm on every run.
 */
import { describe, expect, it } from 'vitest';
import { goalsOverRuns, median } from '../../bench/scale-goals-summary.js';
import type { ScaleRun } from '../../bench/scale-goals-summary.js';

const partA = (rss: number, settle: number, submit: number, recorded = 1): ScaleRun => ({
  a_sleeping: {
    retryq: { n: 10000, workerRssMb: { settled: rss } },
    settleRatioVsBareTimer: settle,
    submitP50RatioVsWorkflowStart: submit,
    settleRatioVsBareTimerRecorded: recorded,
    submitP50RatioVsRecordedStart: recorded,
    recordedSettleRatioVsBareTimer: settle / recorded,
  },
});
const partB = (ratio: number, vsOwnQueueUpserts?: number): ScaleRun => ({
  b_throughput: {
    ratioMedian: ratio,
    pairRatioMedian: Math.round((ratio - 0.05) * 100) / 100,
    ...(vsOwnQueueUpserts === undefined
      ? {}
      : { decomposition: { bareOwnQueueUpserts: { retryqPairRatioMedian: vsOwnQueueUpserts } } }),
  },
});
const partC = (timeouts: number, withinBudget = true): ScaleRun => ({
  c_wake: { n: 10000, workflowTaskTimeouts: timeouts, withinBudget },
});

describe('median', () => {
  it('takes the middle value of an odd count and the mean of the two middle values of an even one', () => {
    expect(median([1.3, 1.13, 1.15])).toBe(1.15);
    expect(median([0.78, 0.92, 0.88, 0.8])).toBe(0.84);
    expect(median([])).toBeNaN();
  });
});

describe('goalsOverRuns', () => {
  it('judges a ratio goal on the median of the runs and counts the runs in which it held alone', () => {
    const { goals, allHeld } = goalsOverRuns([
      partA(264, 1.3, 1.27),
      partB(0.92),
      partA(244, 1.13, 1.11),
      partB(0.88),
      partA(258, 1.15, 1.09),
      partB(0.78),
      partC(0),
    ]);
    expect(goals.settleWithin1_2xBare).toEqual({
      perRun: [1.3, 1.13, 1.15],
      judgedOn: 'median',
      figure: 1.15,
      heldInRuns: 2,
      runs: 3,
      held: true,
    });
    expect(goals.submitP50Within1_2xStart).toMatchObject({ figure: 1.11, heldInRuns: 2, held: true });
    expect(goals.throughputAtLeast0_8xBare).toMatchObject({ perRun: [0.92, 0.88, 0.78], figure: 0.88, held: true });
    expect(allHeld).toBe(true);
  });

  it('misses a ratio goal whose median misses, even when one run met it', () => {
    const { goals, allHeld } = goalsOverRuns([partA(250, 1.1, 1.1), partA(250, 1.25, 1.1), partA(250, 1.3, 1.1)]);
    expect(goals.settleWithin1_2xBare).toMatchObject({ figure: 1.25, heldInRuns: 1, held: false });
    expect(goals.submitP50Within1_2xStart?.held).toBe(true);
    expect(allHeld).toBe(false);
  });

  it('judges memory on the worst run: one run at 300 MB or more misses the bound', () => {
    const { goals } = goalsOverRuns([partA(240, 1, 1), partA(307, 1, 1), partA(250, 1, 1)]);
    expect(goals.workerRssBelow300Mb).toMatchObject({ judgedOn: 'worst', figure: 307, heldInRuns: 2, held: false });
  });

  it('holds the wake-up storm only when every run had no workflow-task timeout and kept within the budget', () => {
    expect(goalsOverRuns([partC(0), partC(0)]).goals.wakeNoTaskTimeoutsWithinBudget?.held).toBe(true);
    expect(goalsOverRuns([partC(0), partC(1)]).goals.wakeNoTaskTimeoutsWithinBudget).toMatchObject({
      judgedOn: 'every',
      figure: 1,
      heldInRuns: 1,
      held: false,
    });
    expect(goalsOverRuns([partC(0, false)]).goals.wakeNoTaskTimeoutsWithinBudget?.held).toBe(false);
  });

  it('leaves out what no run measured, and holds nothing when nothing was measured', () => {
    const onlyB = goalsOverRuns([partB(0.9, 0.85), partB(0.82, 0.8)]);
    expect(Object.keys(onlyB.goals)).toEqual(['throughputAtLeast0_8xBare']);
    expect(onlyB.likeForLike).toEqual({
      throughputPairRatioVsBare: { perRun: [0.85, 0.77], median: 0.81 },
      throughputPairRatioVsBareOwnQueueUpserts: { perRun: [0.85, 0.8], median: 0.83 },
    });
    expect(goalsOverRuns([]).allHeld).toBe(false);
  });

  it('reports retryq against the recorded timer over the same runs, next to the goals', () => {
    const { likeForLike } = goalsOverRuns([partA(250, 1.3, 1.27, 1.08), partA(250, 1.13, 1.11, 1.02)]);
    expect(likeForLike['settleRatioVsBareTimerRecorded']).toEqual({ perRun: [1.08, 1.02], median: 1.05 });
  });
});
