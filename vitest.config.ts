import { defineConfig } from 'vitest/config';

/**
 * Two groups. The light files (pure units, store contracts, deploy files, the browser page) share no
 * process or port and run two at a time, first. Then the integration and fault files, one at a time:
 * they spawn several daemons each and judge leases on a 2-core machine, so they must not run side by side.
 */
const shared = { testTimeout: 120_000, hookTimeout: 120_000 };

export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      {
        test: {
          ...shared,
          name: 'light',
          include: ['test/unit/**/*.test.ts', 'test/contract/**/*.test.ts', 'test/deploy/**/*.test.ts', 'test/browser/**/*.test.ts'],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...shared,
          name: 'daemons',
          include: ['test/integration/**/*.test.ts', 'test/fault/**/*.test.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
