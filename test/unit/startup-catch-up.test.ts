/**
 * The start-up catch-up: at start, every period up to the tick's cursor is planned in one reconcile
 * (not the sweeps' "3 s before now", which left the last seconds before the start to later sweeps,
 * planned apart from the rest of the outage), the first tick waits for its claims, and for the first
 * seconds the nodes ranked third and further step in too. The scheduler's own timers, with recording
 * parts in place of the store's.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { RECONCILE_MARGIN_MS, STARTUP_CATCH_UP_LEAD_MS, Scheduler } from '../../src/daemon/scheduler.js';
import { STEP_IN_AFTER_MS, type Racers } from '../../src/claim/racers.js';
import type { Job } from '../../src/jobs/types.js';
import { validateJob } from '../../src/jobs/validate.js';
import type { PeriodRunner } from '../../src/run/period.js';
import { planReconcile, periodsToCheck, type ReconcileOptions } from '../../src/run/reconcile.js';
import { nextPeriodAfter } from '../../src/time/schedule.js';

const silent = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function jobOf(name: string, extra: Record<string, unknown> = {}): Job {
  const { job, problems } = validateJob(`jobs/${name}.mjs`, { name, schedule: '* * * * * *', catchUp: '1m', run: () => {}, ...extra }, 'UTC');
  if (!job) throw new Error(problems.join('; '));
  return job;
}

const takeover = { safeSweep: async () => [], lastErrorBusy: false, lastError: null };
const executor = { size: 0, running: () => [], drain: async () => {}, abortAll: () => {}, limitWrites: () => {} };

interface Recorded {
  reconciles: Array<{ jobs: string[]; options: ReconcileOptions; calledAt: number }>;
  claims: Array<{ job: string; at: number; trigger: string; calledAt: number }>;
}

/** A scheduler over recording parts; `claimsFor` ms after the start-up reconcile, the runner has a claim in progress. */
function scheduler(jobs: Job[], { claimsFor = 0, racers, store = {} }: { claimsFor?: number; racers?: Racers; store?: object } = {}): { s: Scheduler; rec: Recorded } {
  const rec: Recorded = { reconciles: [], claims: [] };
  let claimingUntil = 0;
  const reconciler = {
    declare: async () => {},
    reconcile: async (list: Job[], options: ReconcileOptions) => {
      if (rec.reconciles.length === 0) claimingUntil = Date.now() + claimsFor;
      rec.reconciles.push({ jobs: list.map((j) => j.name), options, calledAt: Date.now() });
      return { ran: [], missed: 0, coalesced: 0 };
    },
    flush: async () => {}, forget: () => {}, restartAt: () => {},
  };
  const runner = {
    runPeriod: async (job: Job, at: Date, trigger: string) => {
      rec.claims.push({ job: job.name, at: at.getTime(), trigger, calledAt: Date.now() });
      return { claim: 'won', attempts: [] };
    },
    claimsBehindMs: () => (Date.now() < claimingUntil ? 1 : 0),
    recentSlowestClaimMs: () => 0,
    stop: () => {},
  } as unknown as PeriodRunner;
  const s = new Scheduler({ jobs, store: store as never, runner, executor: executor as never, takeover: takeover as never, reconciler: reconciler as never, log: silent, ...(racers ? { racers } : {}) });
  return { s, rec };
}

describe('the start-up catch-up', () => {
  it('is one reconcile of every job up to the tick\'s cursor, at start: the tick claims from the next period on, none between them, none twice', async () => {
    const jobs = [jobOf('a'), jobOf('b'), jobOf('c')];
    const { s, rec } = scheduler(jobs);
    const before = Date.now();
    await s.start();
    try {
      const until = Date.now() + 5000;
      while (rec.claims.length < 6 && Date.now() < until) await sleep(50);
    } finally {
      await s.stop(0);
    }
    const first = rec.reconciles[0]!;
    expect(first.jobs.sort()).toEqual(['a', 'b', 'c']);
    // Up to the start itself, not 3 s before it (the sweeps' margin), and judged from then.
    expect(first.options.upTo.getTime()).toBeGreaterThanOrEqual(before);
    expect(first.options.now.getTime()).toBe(first.options.upTo.getTime());
    expect(first.options.latestTrigger).toBeUndefined();
    // The tick's first period of each job is the first one after that instant.
    const next = nextPeriodAfter(jobs[0]!.schedule, first.options.upTo)!.getTime();
    for (const name of ['a', 'b', 'c']) expect(Math.min(...rec.claims.filter((c) => c.job === name).map((c) => c.at))).toBe(next);
    expect(rec.claims.every((c) => c.calledAt >= first.calledAt)).toBe(true);
    // The sweeps after it go by slices, from 3 s before now: nothing the start-up plan covered.
    for (const r of rec.reconciles.slice(1)) expect(r.options.upTo.getTime()).toBeLessThanOrEqual(r.calledAt - RECONCILE_MARGIN_MS + 5);
  });

  it(`the first tick waits for the start-up catch-up's claims to answer, at most ${STARTUP_CATCH_UP_LEAD_MS} ms`, async () => {
    for (const claimsFor of [200, 5000]) {
      const { s, rec } = scheduler([jobOf('a')], { claimsFor });
      const t0 = Date.now();
      await s.start();
      const waited = Date.now() - t0;
      await s.stop(0);
      expect(waited, `claims answering after ${claimsFor} ms`).toBeGreaterThanOrEqual(Math.min(claimsFor, STARTUP_CATCH_UP_LEAD_MS) - 5);
      expect(waited).toBeLessThan(Math.min(claimsFor, STARTUP_CATCH_UP_LEAD_MS) + 300);
      expect(rec.reconciles.length).toBeGreaterThanOrEqual(1);
    }
  });

  it('just after the start, a node ranked third steps in for periods with no row, 2 x STEP_IN_AFTER_MS after the instant (the nodes ranked above it may have died before it started)', async () => {
    const racers = { refresh: async () => {}, size: 3, rank: () => 2, unsure: true, firstProven: () => true } as unknown as Racers;
    const checks: Array<{ at: number; checkedAt: number }> = [];
    const store = { jobsWithRowAt: async (at: Date) => { checks.push({ at: at.getTime(), checkedAt: Date.now() }); return new Set<string>(); } };
    const { s, rec } = scheduler([jobOf('a')], { racers, store });
    await s.start();
    try {
      const until = Date.now() + 5000;
      while (rec.claims.length < 2 && Date.now() < until) await sleep(50);
    } finally {
      await s.stop(0);
    }
    expect(rec.claims.length).toBeGreaterThanOrEqual(2);
    for (const c of checks) expect(c.checkedAt - c.at).toBeGreaterThanOrEqual(2 * STEP_IN_AFTER_MS - 5);
    for (const c of rec.claims) expect(c.trigger).toBe('schedule');
  });

  it('just after the start, a node ranked third leaves a period to the nodes ahead of it once one of them has been seen beating', async () => {
    const racers = { refresh: async () => {}, size: 3, rank: () => 2, unsure: true, firstProven: () => false } as unknown as Racers;
    const checks: number[] = [];
    const store = { jobsWithRowAt: async (at: Date) => { checks.push(at.getTime()); return new Set<string>(); } };
    const { s } = scheduler([jobOf('a')], { racers, store });
    await s.start();
    await sleep(2600);
    await s.stop(0);
    expect(checks).toEqual([]);
  });
});

describe('why one plan: the outage planned up to the start, or in two parts', () => {
  // Every 2 s, catchUp 1m, coalesce: nodes down from 10:00:00, one back at 10:00:09.
  const job = jobOf('coal', { schedule: '*/2 * * * * *', coalesce: true });
  const at = (s: number) => Date.parse('2026-12-06T10:00:00.000Z') + s * 1000;
  const plan = (from: number, upTo: number, now: number, rows: number[]) => {
    const w = { fromExclusive: from, upTo, now };
    return planReconcile(job, w, periodsToCheck(job, w), new Set(rows));
  };

  it('one plan up to the start runs exactly the latest missed period and records the rest coalesced', () => {
    const p = plan(at(0), at(9), at(9), [at(0)]);
    expect(p.run.map((d) => d.getTime())).toEqual([at(8)]);
    expect(p.coalesced.map((d) => d.getTime())).toEqual([at(2), at(4), at(6)]);
  });

  it('in two parts (3 s before the start, then a sweep later), two periods run, the first not the latest; or the latest is coalesced behind a period the tick ran', () => {
    const first = plan(at(0), at(9) - RECONCILE_MARGIN_MS, at(9), [at(0)]);
    expect(first.run.map((d) => d.getTime())).toEqual([at(6)]);
    // The next sweep of the job, a second later: 10:00:08 is 3 s old, alone in its window.
    const later = plan(first.through, at(11.5) - RECONCILE_MARGIN_MS, at(11.5), [at(0), at(2), at(4), at(6)]);
    expect(later.run.map((d) => d.getTime())).toEqual([at(8)]);
    // ...or, when that sweep comes after the tick ran 10:00:10: 10:00:08 is recorded coalesced, never run.
    const withTick = plan(first.through, at(14) - RECONCILE_MARGIN_MS, at(14), [at(0), at(2), at(4), at(6), at(10)]);
    expect(withTick.run).toEqual([]);
    expect(withTick.coalesced.map((d) => d.getTime())).toEqual([at(8)]);
  });
});
