import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/support/setup.ts'],
    // The Temporal core bridge is a native addon: run each file in its own child process.
    pool: 'forks',
    // Two cores: one file at a time keeps Temporal servers and workers from starving each other.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
