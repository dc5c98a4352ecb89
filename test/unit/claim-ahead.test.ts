/**
 * Claiming ahead of the instant: how far ahead a node claims (further when its claims are slow), and
 * overlap 'skip' judged at the body's start, not at the claim. On the real parts (SQLite store,
 * Claimer, Executor, PeriodRunner as the daemon builds them); the jobs' bodies are the test's.
 */
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { CLAIM_AHEAD_MAX_MS, CLAIM_AHEAD_MS, Scheduler, claimAheadMs } from '../../src/daemon/scheduler.js';
import { EventBus, RecordingObserver } from '../../src/events/events.js';
import type { Job } from '../../src/jobs/types.js';
import { validateJob } from '../../src/jobs/validate.js';
import { OVERLAP_SETTLE_MS, type PeriodRunner } from '../../src/run/period.js';
import { CLAIM_THROUGH_INCIDENT_MS } from '../../src/claim/claim.js';
import { openRuntime, type Runtime } from '../../src/runtime.js';
import { removeTempDirs, tempDir } from './_fixtures.js';

const silent = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function jobOf(name: string, run: Job['run'], extra: Record<string, unknown> = {}): Job {
  const { job, problems } = validateJob(`jobs/${name}.mjs`, { name, schedule: '* * * * * *', lockTtl: '30s', run, ...extra }, 'UTC');
  if (!job) throw new Error(problems.join('; '));
  return job;
}

afterAll(() => removeTempDirs());

describe('how far ahead a node claims', () => {
  it('100 ms while its claims are quick; half as long again as its slowest recent claim plus 20 ms when they are not; at most 450 ms', () => {
    expect(claimAheadMs(0)).toBe(CLAIM_AHEAD_MS);
    expect(claimAheadMs(50)).toBe(CLAIM_AHEAD_MS);
    expect(claimAheadMs(100)).toBe(170);
    expect(claimAheadMs(215)).toBe(343);
    expect(claimAheadMs(5000)).toBe(CLAIM_AHEAD_MAX_MS);
    expect(CLAIM_AHEAD_MAX_MS).toBeLessThan(500);
  });

  it("the tick wakes that far before the instant: a node whose claims took 300 ms claims 470 ms ahead", async () => {
    const calls: Array<{ job: string; at: number; calledAt: number }> = [];
    const runner = {
      runPeriod: async (job: Job, at: Date) => {
        calls.push({ job: job.name, at: at.getTime(), calledAt: Date.now() });
        return { claim: 'won', attempts: [] };
      },
      claimsBehindMs: () => 0,
      recentSlowestClaimMs: () => 300,
      stop: () => {},
    } as unknown as PeriodRunner;
    const reconciler = { declare: async () => {}, reconcile: async () => ({ ran: [] }), flush: async () => {}, forget: () => {}, restartAt: () => {} };
    const takeover = { safeSweep: async () => [], lastErrorBusy: false, lastError: null };
    const executor = { size: 0, running: () => [], drain: async () => {}, abortAll: () => {}, limitWrites: () => {} };
    const scheduler = new Scheduler({
      jobs: [jobOf('ahead', () => {})], store: {} as never, runner, executor: executor as never, takeover: takeover as never, reconciler: reconciler as never, log: silent,
    });
    await scheduler.start();
    try {
      const until = Date.now() + 5000;
      while (calls.length < 3 && Date.now() < until) await sleep(50);
    } finally {
      await scheduler.stop(0);
    }
    expect(calls.length).toBeGreaterThanOrEqual(3);
    // The timer is armed 470 ms before each instant; a busy machine only makes it later.
    for (const c of calls.slice(1)) {
      const ahead = c.at - c.calledAt;
      expect(ahead, `claimed ${ahead} ms before ${new Date(c.at).toISOString()}`).toBeLessThanOrEqual(claimAheadMs(300) + 5);
      expect(ahead).toBeGreaterThan(claimAheadMs(300) - 150);
    }
  });
});

describe("overlap 'skip' of a period claimed ahead: judged at its start", () => {
  let rt: Runtime;
  const seen = new RecordingObserver();

  beforeAll(async () => {
    const dir = tempDir('cron-claim-ahead-');
    const config = loadConfig({ env: { SCHEDULER_STORE: `sqlite:${join(dir, 'db.sqlite')}`, SCHEDULER_JOBS_DIR: dir, SCHEDULER_NODE_ID: 'n1' }, cwd: dir });
    const events = new EventBus(silent);
    events.add(seen);
    rt = await openRuntime(config, silent, events);
  });
  afterAll(async () => {
    await rt?.close();
  });

  /**
   * Period A's body runs `aMs` (it starts now); period B, one second later by its key, is claimed
   * now to start `aheadMs` from now, as a tick claims ahead of its instant. `outcomeDelayMs` holds
   * back the write of A's outcome (the store answering late), after its body has ended.
   */
  async function scenario(name: string, aMs: number, aheadMs: number, outcomeDelayMs = 0) {
    const bodies: string[] = [];
    const times: { aEnded?: number; aWritten?: number; bStarted?: number } = {};
    const job = jobOf(name, async (ctx) => {
      bodies.push(ctx.periodKey);
      if (bodies.length === 1) {
        await sleep(aMs);
        times.aEnded = Date.now();
      } else times.bStarted = Date.now();
    });
    const aAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 5000);
    const bAt = new Date(aAt.getTime() + 1000);
    const endAttempt = rt.store.endAttempt.bind(rt.store);
    rt.store.endAttempt = async (run, ...rest) => {
      if (run.job === name && run.scheduledAt.getTime() === aAt.getTime()) {
        await sleep(outcomeDelayMs);
        const ended = await endAttempt(run, ...rest);
        times.aWritten = Date.now();
        return ended;
      }
      return endAttempt(run, ...rest);
    };
    try {
      const a = rt.runner.runPeriod(job, aAt, 'schedule');
      while (bodies.length === 0) await sleep(5);
      // With A's outcome held back, B is claimed once A's body has ended (its row still running).
      if (outcomeDelayMs > 0) while (times.aEnded === undefined) await sleep(5);
      const liveReads = countCalls(rt, 'liveRunsOf');
      const b = await rt.runner.runPeriod(job, bAt, 'schedule', { notBefore: new Date(rt.executor.nowMs() + aheadMs) });
      await a;
      const rows = await rt.store.periodRuns(job.name, bAt);
      const claims = seen.of('claim').filter((e) => e.job === name && e.scheduledAt.getTime() === bAt.getTime()).map((e) => e.outcome);
      const skips = seen.of('skipped').filter((e) => e.job === name);
      return { bodies, b, rows, claims, skips, liveReads: liveReads.stop(), times };
    } finally {
      rt.store.endAttempt = endAttempt;
    }
  }

  it('an earlier run that ends before the start does not skip the period: it runs, counted won once', async () => {
    const r = await scenario('ends-before', 100, 400);
    expect(r.bodies).toHaveLength(2);
    expect(r.rows.map((x) => [x.attempt, x.status])).toEqual([[1, 'succeeded']]);
    expect(r.claims).toEqual(['won']);
    expect(r.skips).toEqual([]);
    // The claim's read beside the INSERT, and one more at the start.
    expect(r.liveReads).toBe(2);
  });

  it(`an earlier run still live at the start and ${OVERLAP_SETTLE_MS} ms after it skips the period: no body, recorded skipped (overlap) once, counted skipped, not won`, async () => {
    const r = await scenario('still-running', OVERLAP_SETTLE_MS + 900, 300);
    expect(r.bodies).toHaveLength(1);
    expect(r.rows.map((x) => [x.attempt, x.status, x.reason])).toEqual([[1, 'skipped', 'overlap']]);
    expect(r.b.attempts.map((x) => x.status)).toEqual(['skipped']);
    expect(r.claims).toEqual(['skipped']);
    expect(r.skips.map((s) => s.reason)).toEqual(['overlap']);
  });

  it('a claim that answers after its start, an earlier body of this node still running: skipped at once, no second read', async () => {
    const r = await scenario('claimed-late', 600, -50);
    expect(r.bodies).toHaveLength(1);
    expect(r.rows.map((x) => [x.status, x.reason])).toEqual([['skipped', 'overlap']]);
    expect(r.claims).toEqual(['skipped']);
    expect(r.liveReads).toBe(1);
  });

  it(`another node's young earlier row (not beaten since its claim) that ends within ${OVERLAP_SETTLE_MS} ms delays the period, never skips it; one still live after that skips it`, async () => {
    for (const endsAfterMs of [500, OVERLAP_SETTLE_MS + 800]) {
      const name = `other-node-${endsAfterMs}`;
      let bStarted: number | undefined;
      const job = jobOf(name, async () => {
        bStarted = Date.now();
      });
      const aAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 5000);
      const bAt = new Date(aAt.getTime() + 1000);
      // Period A is another node's: its row running, never beaten, its outcome written endsAfterMs later.
      const a = await rt.store.insertRun({ job: name, scheduledAt: aAt, periodKey: `${name}@${aAt.toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'other-node', leaseMs: 30_000 });
      if (a.outcome !== 'inserted') throw new Error('period A not inserted');
      let aWritten = 0;
      const ending = sleep(endsAfterMs).then(async () => {
        await rt.store.endAttempt(a.run, 'other-node', { status: 'succeeded' }, null);
        aWritten = Date.now();
      });
      const liveReads = countCalls(rt, 'liveRunsOf');
      const b = await rt.runner.runPeriod(job, bAt, 'schedule', { notBefore: new Date(rt.executor.nowMs() + 50) });
      await ending;
      const reads = liveReads.stop();
      const rows = await rt.store.periodRuns(name, bAt);
      if (endsAfterMs < OVERLAP_SETTLE_MS) {
        expect(b.attempts.map((x) => x.status), name).toEqual(['succeeded']);
        expect(rows.map((x) => [x.status, x.reason])).toEqual([['succeeded', null]]);
        // After A's outcome, never beside it; read again while A still looked live.
        expect(bStarted!).toBeGreaterThanOrEqual(aWritten);
        expect(reads).toBeGreaterThanOrEqual(3);
      } else {
        expect(bStarted, name).toBeUndefined();
        expect(rows.map((x) => [x.status, x.reason])).toEqual([['skipped', 'overlap']]);
      }
    }
  });

  it(`a claim that came through a store incident (it took ${CLAIM_THROUGH_INCIDENT_MS} ms or more), meeting another node's never-beaten row (maybe a claim in doubt), is not skipped: given back pending, it runs once that row has ended`, async () => {
    const name = 'through-incident';
    const starts: string[] = [];
    const job = jobOf(name, async (ctx) => {
      starts.push(ctx.periodKey);
    });
    const aAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 5000);
    const bAt = new Date(aAt.getTime() + 1000);
    const a = await rt.store.insertRun({ job: name, scheduledAt: aAt, periodKey: `${name}@${aAt.toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'other-node', leaseMs: 30_000 });
    if (a.outcome !== 'inserted') throw new Error('period A not inserted');
    // B's INSERT answers late, as through a failover.
    const insertRuns = rt.store.insertRuns.bind(rt.store);
    rt.store.insertRuns = async (runs) => {
      if (runs.some((r) => r.job === name)) await sleep(CLAIM_THROUGH_INCIDENT_MS + 200);
      return insertRuns(runs);
    };
    try {
      const b = await rt.runner.runPeriod(job, bAt, 'schedule', { notBefore: new Date(rt.executor.nowMs() + 50) });
      expect(b.claim).toBe('blocked-overlap');
      expect(b.attempts).toEqual([]);
      expect((await rt.store.periodRuns(name, bAt)).map((x) => [x.attempt, x.status])).toEqual([[1, 'pending']]);
    } finally {
      rt.store.insertRuns = insertRuns;
    }
    expect(starts).toEqual([]);
    // A ends (its node answered at last): the owed-work sweep runs B, once.
    await rt.store.endAttempt(a.run, 'other-node', { status: 'succeeded' }, null);
    const runs = await rt.takeover.sweep(new Map([[name, job]]));
    await Promise.all(runs);
    expect(starts).toEqual([`${name}@${bAt.toISOString()}`]);
    expect((await rt.store.periodRuns(name, bAt)).map((x) => [x.attempt, x.status])).toEqual([[1, 'succeeded']]);
  });

  it('an earlier attempt of this node whose body has ended, its outcome not yet written, is no overlap: the period starts on time, with no read at the start', async () => {
    const r = await scenario('outcome-late', 50, 200, 1500);
    expect(r.bodies).toHaveLength(2);
    expect(r.rows.map((x) => [x.status, x.reason])).toEqual([['succeeded', null]]);
    expect(r.claims).toEqual(['won']);
    // B started while A's row still said running (its outcome held back 1.5 s), after A's body.
    expect(r.times.bStarted!).toBeLessThan(r.times.aWritten!);
    expect(r.times.bStarted!).toBeGreaterThanOrEqual(r.times.aEnded!);
    // The claim's read saw A running; the start asked this node's executor, not the store.
    expect(r.liveReads).toBe(1);
  });
});

/** Counts calls of one RunStore method of the runtime's store until stop(). */
function countCalls(rt: Runtime, method: 'liveRunsOf'): { stop(): number } {
  const store = rt.store as unknown as Record<string, (...a: unknown[]) => unknown>;
  const orig = store[method]!;
  let n = 0;
  store[method] = function (this: unknown, ...a: unknown[]) {
    n++;
    return orig.apply(this, a);
  };
  return {
    stop() {
      store[method] = orig;
      return n;
    },
  };
}
