/**
 * The reconciling sweep by fifths: each sweep reconciles one fifth of the jobs, in turn, so that each
 * job is looked at every 5 s; the first sweep looks at all of them (the catch-up after downtime). The
 * scheduler's own timers, with a recording reconciler in place of the store's.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { RECONCILE_SLICES, Scheduler } from '../../src/daemon/scheduler.js';
import type { Job } from '../../src/jobs/types.js';
import { validateJob } from '../../src/jobs/validate.js';
import type { PeriodRunner } from '../../src/run/period.js';

const silent = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function yearly(name: string): Job {
  const { job, problems } = validateJob(`jobs/${name}.mjs`, { name, schedule: '0 0 2 1 1 *', run: () => {} }, 'UTC');
  if (!job) throw new Error(problems.join('; '));
  return job;
}

describe('the reconciling sweep by fifths', () => {
  it('the first sweep reconciles every job, then each sweep one fifth in turn: every job once in any 5 sweeps', async () => {
    const jobs = Array.from({ length: 12 }, (_, i) => yearly(`j${i}`));
    const sweeps: string[][] = [];
    const reconciler = {
      declare: async () => {},
      reconcile: async (list: Job[]) => {
        sweeps.push(list.map((j) => j.name));
        return { ran: [], missed: 0, coalesced: 0 };
      },
      flush: async () => {}, forget: () => {}, restartAt: () => {},
    };
    const runner = { claimsBehindMs: () => 0, recentSlowestClaimMs: () => 0, stop: () => {} } as unknown as PeriodRunner;
    const takeover = { safeSweep: async () => [], lastErrorBusy: false, lastError: null };
    const executor = { size: 0, running: () => [], drain: async () => {}, abortAll: () => {}, limitWrites: () => {}, storeAnswered: () => {}, verifySettled: async () => {} };
    const scheduler = new Scheduler({ jobs, store: { storeHost: () => null } as never, runner, executor: executor as never, takeover: takeover as never, reconciler: reconciler as never, log: silent });
    await scheduler.start();
    try {
      const until = Date.now() + 15_000;
      while (sweeps.length < 2 + RECONCILE_SLICES && Date.now() < until) await sleep(100);
    } finally {
      await scheduler.stop(0);
    }
    expect(sweeps.length).toBeGreaterThanOrEqual(2 + RECONCILE_SLICES);
    expect([...sweeps[0]!].sort()).toEqual(jobs.map((j) => j.name).sort());
    const slices = sweeps.slice(1, 2 + RECONCILE_SLICES);
    // Fifths: none empty (12 jobs), none shared, together every job.
    for (const s of slices) expect(s.length).toBeGreaterThanOrEqual(2);
    for (let i = 0; i + RECONCILE_SLICES <= slices.length; i++) {
      const window = slices.slice(i, i + RECONCILE_SLICES).flat();
      expect([...window].sort(), `sweeps ${i + 1}..${i + RECONCILE_SLICES}`).toEqual(jobs.map((j) => j.name).sort());
    }
  }, 30_000);
});
