/**
 * The start-up catch-up of nodes started together leaves a job's one period to the node that ranks
 * ahead (ReconcileOptions.leave): nothing runs here, the anchor stays before the period, and the next
 * sweep runs it if that node did not (the real reconciler on a SQLite store; the runner records).
 */
import { afterAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { Reconciler } from '../../src/run/reconcile.js';
import { compileSchedule } from '../../src/time/schedule.js';
import type { Job } from '../../src/jobs/types.js';
import type { PeriodRunner } from '../../src/run/period.js';
import { removeTempDirs, sqliteStores } from './_fixtures.js';

const log = pino({ level: 'silent' });
afterAll(() => removeTempDirs());

describe('reconcile with leave (the start-up catch-up of nodes started together)', () => {
  it('a left period is not run here; the anchor stays before it, and a later sweep without leave runs it', async () => {
    const stores = await sqliteStores();
    try {
      const ran: string[] = [];
      const runner = { runPeriod: async (job: Job, at: Date) => { ran.push(`${job.name}@${at.toISOString()}`); return { claim: 'won', attempts: [] }; } } as unknown as PeriodRunner;
      const reconciler = new Reconciler(stores.store, stores.jobStore, runner, 'n1', log);
      const every2 = (name: string) => ({ name, schedule: compileSchedule('*/2 * * * * *', 'UTC'), timezone: 'UTC', catchUpMs: 60_000, coalesce: false, enabled: true, lockTtlMs: 30_000, overlap: 'allow', retries: 0, shards: 1 }) as unknown as Job;
      const left = every2('left');
      const mine = every2('mine');
      // Declared 3 s before an even second: one period of each job to run at `ready`.
      const even = Math.ceil(Date.now() / 2000) * 2000 + 2000;
      await reconciler.declare([left, mine], new Date(even - 1500), 'next');
      const ready = new Date(even + 100);
      const first = await reconciler.reconcile([left, mine], { upTo: ready, now: ready, leave: (job, periods) => job.name === 'left' && periods.length === 1 });
      await Promise.all(first.ran);
      expect(ran).toEqual([`mine@${new Date(even).toISOString()}`]);
      // The next sweep (no leave): the left period still has no row, so it runs here. (So does
      // mine's again: this runner writes no row, and an anchor stays before a period with none.)
      ran.length = 0;
      const later = await reconciler.reconcile([left, mine], { upTo: ready, now: new Date(even + 3500) });
      await Promise.all(later.ran);
      expect(ran).toContain(`left@${new Date(even).toISOString()}`);
    } finally {
      await stores.close();
    }
  });
});
