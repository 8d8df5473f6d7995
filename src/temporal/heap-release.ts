/**
 * Gives back the heap a burst of workflow tasks grew on the worker's main thread. V8 keeps a heap it grew (a young
 * generation at its largest, old-generation pages holding garbage) while the process idles; the workflow thread
 * shrinks its own within seconds, the main thread does not (docs/operations.md, worker sizing).
 * Once the worker has been idle for a moment after it was busy, and the heap holds more than a threshold beyond
 * what was live after the last collection, one full garbage collection runs on the main thread: V8 then shrinks the
 * young generation and frees the old generation's empty pages. At most one every 10 s, and none while nothing ran.
 *
 * @example
 * ```ts
 * const release = releaseHeapAfterBursts({ busy: () => worker.getStatus().numInFlightWorkflowActivations > 0 });
 * await worker.run();
 * release.stop();
 * ```
 */
import v8 from 'node:v8';
import vm from 'node:vm';

export interface HeapReleaseOptions {
  /** Whether the worker is busy now (a workflow activation in flight). */
  busy: () => boolean;
  /**
   * How much more the main thread's heap must hold than was live after the last full collection (its garbage and the
   * young generation it grew) for one to be worth it, MB.
   */
  growthMb: number;
  /** How often the worker's state is looked at, ms. @default 250 */
  everyMs?: number;
  /**
   * How many looks in a row must find the worker idle: 8 looks 250 ms apart, so a burst whose tasks wait on a slow
   * server (none in flight at one look) is not taken for its end. @default 8
   */
  idleLooks?: number;
  /** The least time between two collections, ms. @default 10000 */
  minIntervalMs?: number;
  /** Told after each collection: the heap before and after, MB. */
  onRelease?: (beforeMb: number, afterMb: number) => void;
}

let collector: (() => void) | undefined;

/**
 * A full garbage collection of this thread's heap. Node runs one on request only with `--expose-gc`; the flag is
 * set just while one context is created to fetch V8's `gc` function from it, and put back (contexts created later,
 * the workflows' among them, do not see it).
 */
export function fullGarbageCollection(): void {
  if (!collector) {
    const own = (globalThis as { gc?: () => void }).gc;
    if (own) collector = own;
    else {
      v8.setFlagsFromString('--expose-gc');
      try {
        collector = vm.runInNewContext('gc') as () => void;
      } finally {
        v8.setFlagsFromString('--no-expose-gc');
      }
    }
  }
  collector();
}

const mb = (bytes: number) => bytes / 2 ** 20;

/** Starts watching; `stop()` ends it. The timer never keeps the process alive. */
export function releaseHeapAfterBursts(options: HeapReleaseOptions): { stop(): void } {
  const { busy, growthMb, everyMs = 250, idleLooks = 8, minIntervalMs = 10_000, onRelease } = options;
  // What was live after the last full collection (at the start: what is in use now, garbage included).
  let liveMb = mb(v8.getHeapStatistics().used_heap_size);
  let busySince = false;
  let idle = 0;
  let lastAt = Number.NEGATIVE_INFINITY;
  const timer = setInterval(() => {
    if (busy()) {
      busySince = true;
      idle = 0;
      return;
    }
    idle += 1;
    const now = performance.now();
    const before = mb(v8.getHeapStatistics().total_heap_size);
    if (!busySince || idle < idleLooks || now - lastAt < minIntervalMs || before - liveMb < growthMb) return;
    fullGarbageCollection();
    const after = v8.getHeapStatistics();
    liveMb = mb(after.used_heap_size);
    busySince = false;
    lastAt = now;
    onRelease?.(before, mb(after.total_heap_size));
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
