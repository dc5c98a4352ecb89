/**
 * The pure rules behind owed work: what an ended attempt owes (decideEnd, with backoff and the cap on
 * attempts ended without an outcome), and what a reconciling sweep records, runs, and where it moves
 * the anchor (periodsToCheck, planReconcile, rangesOf), on real schedules.
 */
import { describe, expect, it } from 'vitest';
import type { Job } from '../../src/jobs/types.js';
import { MAX_RETRY_DELAY_MS, MAX_UNFINISHED, decideEnd, retryDelayMs } from '../../src/run/owed.js';
import { MISSED_PER_SWEEP, RECENT_PER_SWEEP, pausePlan, periodsToCheck, planReconcile, rangesOf, type ReconcileWindow } from '../../src/run/reconcile.js';
import type { RunStatus } from '../../src/store/types.js';
import { compileSchedule, periodsBetween } from '../../src/time/schedule.js';

const SECOND = 1_000;
const MINUTE = 60_000;
const HOUR = 3_600_000;
/** A whole hour: a period of every schedule below. */
const T = Date.UTC(2026, 2, 10, 12, 0, 0);
const iso = (ds: Date[]): string[] => ds.map((d) => d.toISOString());
const at = (ms: number): string => new Date(ms).toISOString();

function job(over: Partial<Job> & { expression?: string } = {}): Job {
  const { expression = '*/5 * * * *', ...rest } = over;
  return {
    name: 'report', file: '/jobs/report.ts', schedule: compileSchedule(expression, 'UTC'), timezone: 'UTC', timeoutMs: null,
    lockTtlMs: 30_000, overlap: 'skip', catchUpMs: 15 * MINUTE, coalesce: false, retries: 0, retryDelayMs: 30_000, enabled: true,
    run: () => undefined,
    ...rest,
  };
}

/** periodsToCheck then planReconcile, with rows at the given instants. */
function plan(j: Job, w: ReconcileWindow, rows: number[]) {
  const periods = periodsToCheck(j, w);
  return { periods, plan: planReconcile(j, w, periods, new Set(rows)) };
}

describe('decideEnd: what an ended attempt owes', () => {
  const policy = { retries: 2, retryDelayMs: 1_000 };

  it('an outcome of its own that is not a failure owes nothing', () => {
    for (const status of ['succeeded', 'skipped'] as const) {
      expect(decideEnd(status, [], policy)).toEqual({ status, next: null });
      expect(decideEnd(status, ['failed', 'abandoned', 'interrupted'], policy)).toEqual({ status, next: null });
    }
  });

  it('a failure with retries left owes attempt n + 1 after retryDelay, doubled for each further retry', () => {
    expect(decideEnd('failed', [], policy)).toEqual({ status: 'failed', next: { delayMs: 1_000 } });
    expect(decideEnd('timed_out', [], policy)).toEqual({ status: 'timed_out', next: { delayMs: 1_000 } });
    expect(decideEnd('failed', ['failed'], policy)).toEqual({ status: 'failed', next: { delayMs: 2_000 } });
    expect(decideEnd('timed_out', ['timed_out'], policy)).toEqual({ status: 'timed_out', next: { delayMs: 2_000 } });
    expect(decideEnd('failed', ['failed', 'failed', 'failed'], { retries: 5, retryDelayMs: 1_000 })).toEqual({ status: 'failed', next: { delayMs: 8_000 } });
  });

  it('retries exhausted, retries 0, no policy (unknown job), or nobody to run it: nothing owed', () => {
    expect(decideEnd('failed', ['failed', 'timed_out'], policy)).toEqual({ status: 'failed', next: null });
    expect(decideEnd('timed_out', ['failed', 'failed', 'failed'], policy)).toEqual({ status: 'timed_out', next: null });
    expect(decideEnd('failed', [], { retries: 0, retryDelayMs: 1_000 })).toEqual({ status: 'failed', next: null });
    expect(decideEnd('failed', [], null)).toEqual({ status: 'failed', next: null });
    expect(decideEnd('failed', [], policy, false)).toEqual({ status: 'failed', next: null });
  });

  it('only failures count as retries: attempts ended without an outcome (and the pending/running ones) do not use them up', () => {
    const earlier: RunStatus[] = ['abandoned', 'interrupted'];
    expect(decideEnd('failed', earlier, policy)).toEqual({ status: 'failed', next: { delayMs: 1_000 } });
    expect(decideEnd('failed', ['abandoned', 'failed', 'interrupted'], policy)).toEqual({ status: 'failed', next: { delayMs: 2_000 } });
    expect(decideEnd('failed', ['succeeded', 'skipped'], policy)).toEqual({ status: 'failed', next: { delayMs: 1_000 } });
  });

  it('backoff is capped at an hour', () => {
    expect(MAX_RETRY_DELAY_MS).toBe(HOUR);
    const slow = { retries: 20, retryDelayMs: 20 * MINUTE };
    expect(decideEnd('failed', [], slow).next).toEqual({ delayMs: 20 * MINUTE });
    expect(decideEnd('failed', ['failed'], slow).next).toEqual({ delayMs: 40 * MINUTE });
    expect(decideEnd('failed', ['failed', 'failed'], slow).next).toEqual({ delayMs: HOUR });
    expect(decideEnd('failed', Array<RunStatus>(15).fill('failed'), slow).next).toEqual({ delayMs: HOUR });
    // A delay over the cap on its own, and a huge exponent: still an hour, a finite number.
    expect(decideEnd('failed', [], { retries: 3, retryDelayMs: 2 * HOUR }).next).toEqual({ delayMs: HOUR });
    expect(retryDelayMs({ retries: 5000, retryDelayMs: 1 }, 5000)).toBe(HOUR);
    expect(retryDelayMs({ retries: 1, retryDelayMs: 500 }, 1)).toBe(500);
    expect(retryDelayMs({ retries: 1, retryDelayMs: 500 }, 0)).toBe(500);
  });

  it('abandoned or interrupted owes attempt n + 1 at once, whatever the policy', () => {
    for (const status of ['abandoned', 'interrupted'] as const) {
      expect(decideEnd(status, [], policy)).toEqual({ status, next: { delayMs: 0 } });
      expect(decideEnd(status, [], null)).toEqual({ status, next: { delayMs: 0 } });
      expect(decideEnd(status, [], { retries: 0, retryDelayMs: 1_000 })).toEqual({ status, next: { delayMs: 0 } });
      // Failures before do not count towards the cap.
      expect(decideEnd(status, ['failed', 'timed_out', 'failed'], policy)).toEqual({ status, next: { delayMs: 0 } });
      // Nobody to run it: nothing owed (below the cap the status stays).
      expect(decideEnd(status, [], policy, false)).toEqual({ status, next: null });
    }
  });

  it(`the ${MAX_UNFINISHED}rd attempt ended without an outcome is recorded failed with a reason, and owes nothing`, () => {
    expect(MAX_UNFINISHED).toBe(3);
    expect(decideEnd('interrupted', ['abandoned'], policy)).toEqual({ status: 'interrupted', next: { delayMs: 0 } });
    for (const earlier of [['abandoned', 'interrupted'], ['interrupted', 'interrupted'], ['abandoned', 'failed', 'abandoned'], ['abandoned', 'abandoned', 'abandoned']] as RunStatus[][]) {
      for (const status of ['abandoned', 'interrupted'] as const) {
        const d = decideEnd(status, earlier, policy);
        expect(d.status, earlier.join()).toBe('failed');
        expect(d.next, earlier.join()).toBeNull();
        expect(d.reason, earlier.join()).toMatch(/attempts ended without an outcome/);
      }
    }
    // The cap applies when nothing is owed as well (a takeover with owe false).
    expect(decideEnd('abandoned', ['abandoned', 'abandoned'], null, false)).toMatchObject({ status: 'failed', next: null });
  });
});

describe('periodsToCheck / planReconcile: what a sweep records and runs, and the anchor', () => {
  // Every 5 minutes, catchUp 15 minutes; now = T, upTo = T.
  const w = (fromExclusive: number, upTo = T, now = T): ReconcileWindow => ({ fromExclusive, upTo, now });

  it('nothing missing: nothing recorded or run, the anchor goes to upTo', () => {
    const j = job();
    const win = w(T - 30 * MINUTE, T + 2 * MINUTE, T + 2 * MINUTE + 3 * SECOND);
    const periods = periodsToCheck(j, win);
    const all = [...periods.old, ...periods.recent].map((d) => d.getTime());
    expect(all).toEqual(Array.from({ length: 6 }, (_, i) => T - 25 * MINUTE + i * 5 * MINUTE));
    expect(periods.truncated).toBe(false);
    expect(planReconcile(j, win, periods, new Set(all))).toEqual({ missed: [], coalesced: [], run: [], calendar: [], through: T + 2 * MINUTE });
    // No period in the window at all: the anchor goes to upTo as well.
    const empty = w(T, T + 4 * MINUTE, T + 4 * MINUTE);
    expect(periodsToCheck(j, empty)).toEqual({ old: [], recent: [], truncated: false, recentTruncated: false });
    expect(planReconcile(j, empty, periodsToCheck(j, empty), new Set())).toEqual({ missed: [], coalesced: [], run: [], calendar: [], through: T + 4 * MINUTE });
  });

  it('the window: (anchor, upTo], split at now - catchUp (a period exactly catchUp old is still run)', () => {
    const j = job();
    const { old, recent } = periodsToCheck(j, w(T - 40 * MINUTE));
    expect(iso(old)).toEqual([35, 30, 25, 20].map((m) => at(T - m * MINUTE)));
    expect(iso(recent)).toEqual([15, 10, 5, 0].map((m) => at(T - m * MINUTE)));
    expect(rangesOf('report', { old, recent })).toEqual([
      { job: 'report', fromMs: T - 35 * MINUTE, toMs: T - 20 * MINUTE },
      { job: 'report', fromMs: T - 15 * MINUTE, toMs: T },
    ]);
    expect(rangesOf('report', { old: [], recent })).toEqual([{ job: 'report', fromMs: T - 15 * MINUTE, toMs: T }]);
    expect(rangesOf('report', { old: [], recent: [] })).toEqual([]);
  });

  it('an orphan in the window, coalesce false: it is run, and the anchor stops before it', () => {
    const j = job({ coalesce: false });
    const { plan: p } = plan(j, w(T - 15 * MINUTE), [T - 10 * MINUTE, T]);
    expect(iso(p.run)).toEqual([at(T - 5 * MINUTE)]);
    expect(p.missed).toEqual([]);
    expect(p.coalesced).toEqual([]);
    expect(p.through).toBe(T - 10 * MINUTE);
    // Several orphans: all run, oldest first; the anchor stays at the anchor when the first is owed.
    const { plan: q } = plan(j, w(T - 15 * MINUTE), [T - 5 * MINUTE]);
    expect(iso(q.run)).toEqual([at(T - 10 * MINUTE), at(T)]);
    expect(q.through).toBe(T - 15 * MINUTE);
  });

  it('an orphan, coalesce true, with a later row: recorded coalesced, nothing run, the anchor goes to upTo', () => {
    const j = job({ coalesce: true });
    const { plan: p } = plan(j, w(T - 15 * MINUTE), [T]);
    expect(iso(p.coalesced)).toEqual([at(T - 10 * MINUTE), at(T - 5 * MINUTE)]);
    expect(p.run).toEqual([]);
    expect(p.missed).toEqual([]);
    expect(p.through).toBe(T);
  });

  it('coalesce true and the orphan is the latest period: it is run, the earlier orphans are coalesced', () => {
    const j = job({ coalesce: true });
    const { plan: p } = plan(j, w(T - 15 * MINUTE), [T - 10 * MINUTE, T - 5 * MINUTE]);
    expect(iso(p.run)).toEqual([at(T)]);
    expect(p.coalesced).toEqual([]);
    expect(p.through).toBe(T - 5 * MINUTE);
    const { plan: q } = plan(j, w(T - 15 * MINUTE), []);
    expect(iso(q.run)).toEqual([at(T)]);
    expect(iso(q.coalesced)).toEqual([at(T - 10 * MINUTE), at(T - 5 * MINUTE)]);
    expect(q.through).toBe(T - 5 * MINUTE);
  });

  it('periods older than catchUp without rows are recorded missed (coalesce or not); the others as above', () => {
    for (const coalesce of [false, true]) {
      const j = job({ coalesce });
      const { plan: p } = plan(j, w(T - 40 * MINUTE), [T - 30 * MINUTE, T - 15 * MINUTE, T - 10 * MINUTE, T - 5 * MINUTE, T]);
      expect(iso(p.missed), `coalesce ${coalesce}`).toEqual([35, 25, 20].map((m) => at(T - m * MINUTE)));
      expect(p.run).toEqual([]);
      expect(p.coalesced).toEqual([]);
      expect(p.through).toBe(T);
    }
    // Missed, then a period still owed: the anchor stops just before it.
    const { plan: q } = plan(job(), w(T - 40 * MINUTE), [T - 15 * MINUTE]);
    expect(q.missed).toHaveLength(4);
    expect(iso(q.run)).toEqual([10, 5, 0].map((m) => at(T - m * MINUTE)));
    expect(q.through).toBe(T - 15 * MINUTE);
  });

  it(`more than MISSED_PER_SWEEP (${MISSED_PER_SWEEP}) old periods: truncated, the oldest recorded, the anchor stops at the chunk`, () => {
    const j = job({ expression: '* * * * *', coalesce: false });
    const from = T - 3 * 24 * HOUR;
    const win = w(from);
    const periods = periodsToCheck(j, win);
    expect(periods.truncated).toBe(true);
    expect(periods.old).toHaveLength(MISSED_PER_SWEEP);
    expect(periods.old[0]!.getTime()).toBe(from + MINUTE);
    expect(periods.old[MISSED_PER_SWEEP - 1]!.getTime()).toBe(from + MISSED_PER_SWEEP * MINUTE);
    expect(periods.recent).toHaveLength(16);
    const p = planReconcile(j, win, periods, new Set([from + 5 * MINUTE]));
    expect(p.missed).toHaveLength(MISSED_PER_SWEEP - 1);
    expect(p.through).toBe(from + MISSED_PER_SWEEP * MINUTE);
    // The next sweep goes on from there; exactly MISSED_PER_SWEEP left is not truncated.
    const next = periodsToCheck(j, w(T - 15 * MINUTE - 1 - MISSED_PER_SWEEP * MINUTE));
    expect(next.truncated).toBe(false);
    expect(next.old).toHaveLength(MISSED_PER_SWEEP);
  });

  it(`more than RECENT_PER_SWEEP (${RECENT_PER_SWEEP}) periods within catchUp: the oldest share is looked at, the anchor stops at its end, none is lost`, () => {
    // Every second, catchUp 6 h: 3 h of missing periods (10,800) within catchUp.
    const base = { expression: '* * * * * *', catchUpMs: 6 * HOUR };
    const from = T - 3 * HOUR;
    const win = w(from);
    for (const coalesce of [true, false]) {
      const j = job({ ...base, coalesce });
      const periods = periodsToCheck(j, win);
      expect(periods.recentTruncated).toBe(true);
      expect(periods.recent).toHaveLength(RECENT_PER_SWEEP);
      expect(periods.recent[0]!.getTime()).toBe(from + SECOND);
      const p = planReconcile(j, win, periods, new Set());
      const last = from + RECENT_PER_SWEEP * SECOND;
      expect(p.through, 'the anchor never passes a period it did not look at').toBeLessThanOrEqual(last);
      if (coalesce) {
        // The latest due period is beyond this share: every one of the share is coalesced, none run.
        expect(p.run).toEqual([]);
        expect(p.coalesced).toHaveLength(RECENT_PER_SWEEP);
        expect(p.through).toBe(last);
        // The next sweep's share ends at upTo: it runs the latest.
        const rest = periodsToCheck(j, w(last));
        expect(rest.recentTruncated).toBe(false);
        const p2 = planReconcile(j, w(last), rest, new Set());
        expect(p2.run.map((d) => d.getTime())).toEqual([T]);
        expect(p2.coalesced).toHaveLength(3 * 3600 - RECENT_PER_SWEEP - 1);
      } else {
        expect(p.run).toHaveLength(RECENT_PER_SWEEP);
        expect(p.through).toBe(from);
      }
    }
  });

  it('the anchor stops at the first period still owed, and goes to upTo once every period is accounted for', () => {
    const j = job({ coalesce: false });
    const win = w(T - 40 * MINUTE, T + 3 * MINUTE, T + 3 * MINUTE);
    const all = periodsBetween(j.schedule, new Date(T - 40 * MINUTE), new Date(T + 3 * MINUTE)).map((d) => d.getTime());
    // Owed: T - 10 min (recent, no row). The missed ones before it are recorded, so the anchor passes them.
    const rows = all.filter((t) => t !== T - 10 * MINUTE && t !== T - 35 * MINUTE);
    const { plan: p } = plan(j, win, rows);
    expect(iso(p.missed)).toEqual([at(T - 35 * MINUTE)]);
    expect(iso(p.run)).toEqual([at(T - 10 * MINUTE)]);
    expect(p.through).toBe(T - 15 * MINUTE);
    // Once it has its row: upTo (past the last period).
    const { plan: q } = plan(j, win, [...rows, T - 10 * MINUTE]);
    expect(q.through).toBe(T + 3 * MINUTE);
    expect(q).toMatchObject({ run: [], coalesced: [] });
  });

  it('a paused job: nothing runs; what would run or be coalesced, and missed periods from the pause on, are recorded paused; older missed stay missed', () => {
    const { plan: p } = plan(job({ coalesce: true }), w(T - 40 * MINUTE), [T - 15 * MINUTE]);
    expect(iso(p.missed)).toEqual([35, 30, 25, 20].map((m) => at(T - m * MINUTE)));
    expect(iso(p.coalesced)).toEqual([10, 5].map((m) => at(T - m * MINUTE)));
    expect(iso(p.run)).toEqual([at(T)]);
    const q = pausePlan(p, T - 27 * MINUTE);
    expect(iso(q.missed)).toEqual([35, 30].map((m) => at(T - m * MINUTE)));
    expect(iso(q.paused)).toEqual([25, 20, 10, 5, 0].map((m) => at(T - m * MINUTE)));
    expect(q).toMatchObject({ run: [], coalesced: [], through: p.through });
  });
});
