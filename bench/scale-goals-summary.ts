/**
 * The verdict of `npm run bench:scale:goals` (bench/scale-goals.ts) from the JSON of several `bench:scale` runs: pure
 * functions, so that the rule that turns runs into a verdict is tested (test/unit/bench-scale-goals.test.ts).
 *
 * A ratio goal (settle, `submit`, throughput) is judged on the median of the runs' ratios: each ratio was measured
 * side by side within its run, and one run's ratio is known to about ±15 % on this kind of machine (two sides
 * running the same retryq code measured 15 % apart in one run), so the median of three is the figure that says where retryq stands, and every run's figure
 * is printed next to it. A bound that is not a ratio (memory) is judged on the worst run, and the wake-up storm's
 * goal must hold in every run.
 */

/** The fields of one `bench:scale` run's JSON that the goals read (everything else is passed through untouched). */
export interface ScaleRun {
  a_sleeping?: {
    retryq?: { workerRssMb: { settled: number }; n: number };
    settleRatioVsBareTimer?: number;
    submitP50RatioVsWorkflowStart?: number;
    settleRatioVsBareTimerRecorded?: number;
    submitP50RatioVsRecordedStart?: number;
    recordedSettleRatioVsBareTimer?: number;
  };
  b_throughput?: {
    ratioMedian: number;
    pairRatioMedian?: number;
    decomposition?: Record<string, { retryqPairRatioMedian?: number } | undefined>;
  };
  c_wake?: { n: number; workflowTaskTimeouts: number; withinBudget: boolean };
}

/** A goal over several runs: each run's figure, the figure judged, and in how many runs the goal held on its own. */
export interface GoalOverRuns {
  perRun: number[];
  /** `median` for a ratio, `worst` for a bound, `every` for a goal each run must meet. */
  judgedOn: 'median' | 'worst' | 'every';
  figure: number;
  heldInRuns: number;
  runs: number;
  held: boolean;
}

/** The median: the middle value, or the mean of the two middle ones for an even count (rounded to 0.01). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((x, y) => x - y);
  const mid = Math.floor(sorted.length / 2);
  const m = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return Math.round(m * 100) / 100;
}

const defined = (values: (number | undefined)[]): number[] => values.filter((v): v is number => v !== undefined);

/** A ratio goal: `ok(ratio)` says whether one ratio meets it; the verdict is `ok(median)`. */
function ratioGoal(perRun: number[], ok: (ratio: number) => boolean): GoalOverRuns | undefined {
  if (perRun.length === 0) return undefined;
  const figure = median(perRun);
  return {
    perRun,
    judgedOn: 'median',
    figure,
    heldInRuns: perRun.filter(ok).length,
    runs: perRun.length,
    held: ok(figure),
  };
}

/** The median of the figures the runs have, or undefined when none has it (a side not run). */
function medianOf(perRun: (number | undefined)[]): { perRun: number[]; median: number } | undefined {
  const values = defined(perRun);
  return values.length === 0 ? undefined : { perRun: values, median: median(values) };
}

/**
 * The goals of issue #9 over the runs given: part a and b runs (each with its baselines in the same run) and part c
 * runs, in any mix. A goal none of the runs measured is left out.
 */
export function goalsOverRuns(runs: readonly ScaleRun[]) {
  const a = runs.flatMap((r) => (r.a_sleeping ? [r.a_sleeping] : []));
  const b = runs.flatMap((r) => (r.b_throughput ? [r.b_throughput] : []));
  const c = runs.flatMap((r) => (r.c_wake ? [r.c_wake] : []));
  const rss = defined(a.map((x) => x.retryq?.workerRssMb.settled));
  const wakeHeld = c.map((x) => x.workflowTaskTimeouts === 0 && x.withinBudget);
  const goals = {
    workerRssBelow300Mb:
      rss.length === 0
        ? undefined
        : ({
            perRun: rss,
            judgedOn: 'worst',
            figure: Math.max(...rss),
            heldInRuns: rss.filter((mb) => mb < 300).length,
            runs: rss.length,
            held: Math.max(...rss) < 300,
          } satisfies GoalOverRuns),
    settleWithin1_2xBare: ratioGoal(defined(a.map((x) => x.settleRatioVsBareTimer)), (r) => r <= 1.2),
    submitP50Within1_2xStart: ratioGoal(defined(a.map((x) => x.submitP50RatioVsWorkflowStart)), (r) => r <= 1.2),
    throughputAtLeast0_8xBare: ratioGoal(
      b.map((x) => x.ratioMedian),
      (r) => r >= 0.8,
    ),
    wakeNoTaskTimeoutsWithinBudget:
      c.length === 0
        ? undefined
        : ({
            perRun: c.map((x) => x.workflowTaskTimeouts),
            judgedOn: 'every',
            figure: Math.max(...c.map((x) => x.workflowTaskTimeouts)),
            heldInRuns: wakeHeld.filter(Boolean).length,
            runs: c.length,
            held: wakeHeld.every(Boolean),
          } satisfies GoalOverRuns),
  };
  const measured = Object.fromEntries(Object.entries(goals).filter(([, g]) => g !== undefined)) as {
    [K in keyof typeof goals]?: GoalOverRuns;
  };
  return {
    goals: measured,
    allHeld: Object.values(measured).length > 0 && Object.values(measured).every((g) => g.held),
    // Not goals: retryq against the sides that pay what DESIGN.md requires of an intent, over the same runs.
    likeForLike: Object.fromEntries(
      Object.entries({
        settleRatioVsBareTimerRecorded: medianOf(a.map((x) => x.settleRatioVsBareTimerRecorded)),
        submitP50RatioVsRecordedStart: medianOf(a.map((x) => x.submitP50RatioVsRecordedStart)),
        recordedSettleRatioVsBareTimer: medianOf(a.map((x) => x.recordedSettleRatioVsBareTimer)),
        throughputPairRatioVsBare: medianOf(b.map((x) => x.pairRatioMedian)),
        throughputPairRatioVsBareOwnQueueUpserts: medianOf(
          b.map((x) => x.decomposition?.['bareOwnQueueUpserts']?.retryqPairRatioMedian),
        ),
      }).filter(([, v]) => v !== undefined),
    ),
  };
}
