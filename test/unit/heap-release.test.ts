import v8 from 'node:v8';
import { describe, expect, it } from 'vitest';
import { fullGarbageCollection, releaseHeapAfterBursts } from '../../src/temporal/heap-release.js';

const heapUsedMb = () => v8.getHeapStatistics().used_heap_size / 2 ** 20;

/**
 * Leaves about `mb` of unreachable objects in this thread's old generation: they stay reachable while they are made
 * (so scavenges promote them), and none is once this returns.
 */
let held: unknown[] | undefined;
function leaveGarbage(mb: number): void {
  holdObjects(mb);
  held = undefined;
}

/** Makes about `mb` of objects and keeps them reachable (in `held`) until the caller drops them. */
function holdObjects(mb: number): void {
  held = [];
  for (let i = 0; i < mb * 16; i++) held.push(Array.from({ length: 1024 }, (_, j) => ({ i, j })));
}

describe('fullGarbageCollection', () => {
  it('collects the garbage of this thread without --expose-gc, and leaves gc hidden from code run later', async () => {
    fullGarbageCollection();
    const live = heapUsedMb();
    leaveGarbage(64);
    const before = heapUsedMb();
    fullGarbageCollection();
    const after = heapUsedMb();
    // The garbage was there (V8 may have collected part of it on its own) and is gone.
    expect(before - live).toBeGreaterThanOrEqual(16);
    expect(after - live).toBeLessThan(8);
    const vm = await import('node:vm');
    expect(vm.runInNewContext('typeof gc')).toBe('undefined');
  });
});

describe('releaseHeapAfterBursts', () => {
  it('collects once the worker has been idle for the looks asked after its heap grew, not while it is busy', async () => {
    fullGarbageCollection();
    let looks = 0;
    const busyLooks = 5;
    const released = new Promise<{ look: number; before: number; after: number }>((resolve) => {
      const release = releaseHeapAfterBursts({
        busy: () => {
          looks += 1;
          // The burst's objects become garbage with its last busy look, so V8 has only the idle looks (a few ms)
          // to collect and shrink them on its own before the watcher does (a busy machine gave it more).
          if (looks === busyLooks) held = undefined;
          return looks <= busyLooks;
        },
        growthMb: 8,
        everyMs: 5,
        idleLooks: 2,
        minIntervalMs: 0,
        onRelease: (before, after) => {
          release.stop();
          resolve({ look: looks, before, after });
        },
      });
      // The burst: the heap grows by far more than the threshold while the worker is busy.
      holdObjects(64);
    });
    const { look, before, after } = await released;
    expect(look).toBe(busyLooks + 2);
    expect(before - after).toBeGreaterThanOrEqual(8);
  });

  /** Runs the watcher for `totalLooks` looks with `busyAt(look)` telling whether the worker is busy; the releases. */
  async function releasesOver(
    totalLooks: number,
    busyAt: (look: number) => boolean,
    options: { growthMb: number; idleLooks?: number; minIntervalMs?: number },
  ): Promise<number> {
    let looks = 0;
    let releases = 0;
    await new Promise<void>((resolve) => {
      const release = releaseHeapAfterBursts({
        busy: () => {
          looks += 1;
          if (looks === totalLooks) {
            release.stop();
            resolve();
          }
          if (!busyAt(looks)) return false;
          leaveGarbage(32);
          return true;
        },
        everyMs: 5,
        minIntervalMs: 0,
        onRelease: () => (releases += 1),
        ...options,
      });
    });
    return releases;
  }

  it('does not collect while the heap holds less than the threshold beyond what was live', async () => {
    fullGarbageCollection();
    expect(await releasesOver(20, (look) => look % 2 === 1, { growthMb: 4096, idleLooks: 1 })).toBe(0);
  });

  it('does not collect when the worker ran nothing since the last look, however much garbage there is', async () => {
    leaveGarbage(64);
    expect(await releasesOver(20, () => false, { growthMb: 1 })).toBe(0);
  });

  it('collects at most once within minIntervalMs, however often the heap grows again', async () => {
    fullGarbageCollection();
    // A burst every fourth look, idle in between.
    const releases = await releasesOver(40, (look) => look % 4 === 1, {
      growthMb: 8,
      idleLooks: 1,
      minIntervalMs: 3_600_000,
    });
    expect(releases).toBe(1);
  });

  it('collects after every burst when the interval allows it', async () => {
    fullGarbageCollection();
    const releases = await releasesOver(40, (look) => look % 4 === 1, { growthMb: 8, idleLooks: 1 });
    expect(releases).toBeGreaterThanOrEqual(5);
  });
});
