import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Three tiers, one after the other (sequence.groupOrder):
 * - unit: pure code and in-process fakes, files in parallel workers;
 * - workflow: the time-skipping test server, one file at a time (each starts its own server);
 * - e2e (and the UI): real dev servers, worker processes, Chromium; one file at a time, so Temporal servers and
 *   workers of two files never starve each other on a small machine, and the wall-clock waits they still have
 *   (Retry-After of a few seconds, gates that open at a time) keep their margins.
 */
export default defineConfig({
  test: {
    // The Temporal core bridge is a native addon: run test files in child processes.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 180_000,
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // No Temporal runtime: no unit test starts a worker or a server, and loading @temporalio/worker for
          // the quiet runtime cost about 0.7 s per unit file on a quiet machine (31 s in all), several on a busy one.
          fileParallelism: true,
          // One process per worker for many files: modules (zod, undici, the sources) load once per worker, not per file.
          isolate: false,
          // At least two even where one core is reported: most unit files wait on I/O (servers on port 0, children).
          maxWorkers: Math.max(2, availableParallelism() - 1),
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'workflow',
          include: ['test/workflow/**/*.test.ts'],
          setupFiles: ['test/support/setup.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts', 'test/ui/**/*.test.ts'],
          setupFiles: ['test/support/setup.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
