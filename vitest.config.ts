import { defineConfig } from 'vitest/config';

/**
 * Two groups. First, two files at a time: the files that share no process or port (pure units, store
 * contracts, deploy files, the browser page, the packed package) and the integration files that drive the command line
 * and a daemon or two without judging a lease or a deadline to less than several seconds. Then the
 * files that do (clusters, faults, pauses, alerts, timing), one at a time: they start several daemons
 * each and judge leases on a 2-core machine, so they must not run side by side.
 */
const shared = { testTimeout: 120_000, hookTimeout: 120_000 };

/** Integration files with no bound tighter than several seconds: run beside another file. */
const PAIRED_INTEGRATION = [
  'run-once', 'http', 'nodes', 'example-jobs', 'job-loading', 'command-jobs', 'daemon-lifecycle',
  'prune', 'once', 'reload', 'terminal-output', 'idempotency-example-dry-run',
  'cluster-sqlite', 'cluster-mariadb', 'cluster-postgres', 'readme-commands', 'audit', 'run-logs', 'cancel', 'http-actions', 'watch', 'backfill', 'calendars',
].map((name) => `test/integration/${name}.test.ts`);

/**
 * Fault files on replicated stores the tests start (a PostgreSQL pair, a Galera cluster): they wait
 * on the servers (promotions, state transfers) far more than they compute, and judge no lease shorter
 * than the default 30 s, so they run beside another file too. So does `store-outage`: 60 of its 80 s
 * are the cut it proves, and it judges outcomes (succeeded once, abandoned then attempt 2, the
 * caught-up period once), not how soon they came.
 */
const PAIRED_FAULT = ['galera', 'pg-failover', 'pg-async-failover', 'store-outage'].map((name) => `test/fault/${name}.test.ts`);

/**
 * `npm run test:quick` (the unit and contract files alone) sets CRON_TEST_QUICK=1: three files side by
 * side instead of two. Most of those files wait on the database servers, the Redis masters they start
 * or their own timers far more than they compute. Each file keeps a fresh worker: workers kept from
 * file to file (isolate: false) saved about 25 s but leaked prom-client's process-wide state between
 * files (metrics-text.test.ts saw its CPU counter at 0). `npm test` keeps two at a time (docs/testing.md).
 */
const QUICK = process.env.CRON_TEST_QUICK === '1';

export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      {
        test: {
          ...shared,
          name: 'two-at-a-time',
          include: ['test/unit/**/*.test.ts', 'test/contract/**/*.test.ts', 'test/deploy/**/*.test.ts', 'test/browser/**/*.test.ts', 'test/package/**/*.test.ts', ...PAIRED_INTEGRATION, ...PAIRED_FAULT],
          maxWorkers: QUICK ? 3 : 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...shared,
          name: 'one-at-a-time',
          include: ['test/integration/**/*.test.ts', 'test/fault/**/*.test.ts'],
          exclude: [...PAIRED_INTEGRATION, ...PAIRED_FAULT],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
