/**
 * Shards through the machinery that runs them (PeriodRunner, Reconciler, runManual's rules) over a
 * real store (SQLite, on a temp file; the store's own shard rules are in _run-store.ts on every
 * backend): two runners in one process stand for two nodes. What the bodies did is counted from
 * their own record, not from the rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Claimer } from '../../src/claim/claim.js';
import { NoLockProvider } from '../../src/claim/no-lock.js';
import type { Job, JobContext } from '../../src/jobs/types.js';
import { Executor } from '../../src/run/execute.js';
import { manualShards } from '../../src/run/pass.js';
import { PeriodRunner, firstShard } from '../../src/run/period.js';
import { Reconciler } from '../../src/run/reconcile.js';
import { Database } from '../../src/store/database.js';
import { KnexJobStore } from '../../src/store/jobs.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { RunRecord } from '../../src/store/types.js';
import { RefusedError } from '../../src/errors.js';
import { compileSchedule, periodKey } from '../../src/time/schedule.js';

const silent = pino({ level: 'silent' });
const SECOND = 1000;

let dir: string;
let db: Database;
let store: KnexRunStore;
let jobStore: KnexJobStore;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cron-shard-runs-'));
  const path = join(dir, 'store.db');
  db = await Database.open({ kind: 'sqlite', path, url: `sqlite:${path}` });
  await db.migrate();
  store = new KnexRunStore(db);
  jobStore = new KnexJobStore(db);
});

afterAll(async () => {
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

let seq = 0;
/** A job of `shards` shards whose body records (shard, node, attempt) and may fail once on a shard. */
function shardJob(shards: number, seen: string[], over: Partial<Job> = {}): Job {
  const name = `sharded-${++seq}-${Date.now()}`;
  return {
    name, file: `/jobs/${name}.mjs`, schedule: compileSchedule('* * * * * *', 'UTC'), timezone: 'UTC', timeoutMs: null, lockTtlMs: 5000,
    overlap: 'skip', catchUpMs: 60 * SECOND, coalesce: true, retries: 0, retryDelayMs: 0, enabled: true, shards,
    run: (ctx: JobContext) => {
      seen.push(`${ctx.periodKey} ${ctx.shard.index}/${ctx.shard.count} ${ctx.nodeId} ${ctx.attempt} ${ctx.trigger}`);
    },
    ...over,
  };
}

function node(id: string) {
  const claimer = new Claimer(store, new NoLockProvider(), id, silent, jobStore);
  const executor = new Executor(store, id, silent);
  const runner = new PeriodRunner(store, claimer, executor, silent);
  const reconciler = new Reconciler(store, jobStore, runner, id, silent);
  return { claimer, executor, runner, reconciler };
}

const shardsOf = async (job: Job, at: Date): Promise<RunRecord[][]> =>
  Promise.all(Array.from({ length: job.shards ?? 1 }, (_, i) => store.periodRuns(job.name, at, i)));

describe('shards: running a period', () => {
  it('a lone node runs every shard of a period, each once, each its own row; ctx.shard and the period key', async () => {
    const seen: string[] = [];
    const job = shardJob(4, seen);
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 5000);
    const result = await node('solo').runner.runPeriod(job, at, 'schedule');
    expect(result.claim).toBe('won');
    expect(result.shards!.map((s) => [s.shard, s.claim])).toEqual([[0, 'won'], [1, 'won'], [2, 'won'], [3, 'won']]);
    expect(result.attempts.map((a) => [a.shard, a.status])).toEqual([0, 1, 2, 3].map((s) => [s, 'succeeded']));
    const key = periodKey(job.name, at);
    expect(seen.sort()).toEqual([0, 1, 2, 3].map((s) => `${key} ${s}/4 solo 1 schedule`));
    for (const rows of await shardsOf(job, at)) expect(rows.map((r) => [r.periodKey, r.status, r.nodeId])).toEqual([[key, 'succeeded', 'solo']]);
  });

  it('two nodes at the same tick: each wins a shard at once, the others are shared, none runs twice', async () => {
    const seen: string[] = [];
    const job = shardJob(4, seen);
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 3000);
    // Two node ids whose first shards differ for this period (found, not assumed).
    const key = periodKey(job.name, at);
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'].map((x) => `node-${x}`);
    const a = ids[0]!;
    const b = ids.find((id) => firstShard(id, key, 4) !== firstShard(a, key, 4))!;
    const [ra, rb] = await Promise.all([node(a).runner.runPeriod(job, at, 'schedule'), node(b).runner.runPeriod(job, at, 'schedule')]);
    const ran = [...ra.attempts, ...rb.attempts].map((x) => x.shard).sort();
    expect(ran).toEqual([0, 1, 2, 3]);
    expect(seen).toHaveLength(4);
    // Each node won at least the shard it started at.
    expect(ra.attempts.map((x) => x.shard)).toContain(firstShard(a, key, 4));
    expect(rb.attempts.map((x) => x.shard)).toContain(firstShard(b, key, 4));
  });

  it('overlap skip is per shard: shard 1 of the next period is skipped while shard 1 of this one runs; the other shards run', async () => {
    const seen: string[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const job = shardJob(3, seen, {
      run: async (ctx: JobContext) => {
        seen.push(`${ctx.scheduledAt.getTime()} ${ctx.shard.index}`);
        if (ctx.shard.index === 1 && seen.length <= 3) await gate;
      },
    });
    const n = node('ov');
    const p0 = new Date(Math.floor(Date.now() / 1000) * 1000 - 10_000);
    const p1 = new Date(p0.getTime() + 1000);
    const first = n.runner.runPeriod(job, p0, 'schedule');
    // Shard 1 of p0 is held; once the others of p0 ended (their outcomes in the store: a body's end
    // is written a moment later, with the other outcomes of that moment), p1 comes.
    await expect.poll(() => seen.length, { timeout: 5000 }).toBe(3);
    await expect.poll(async () => (await Promise.all([0, 2].map((shard) => store.periodRuns(job.name, p0, shard)))).map((rows) => rows[0]?.status), { timeout: 5000 })
      .toEqual(['succeeded', 'succeeded']);
    const second = await n.runner.runPeriod(job, p1, 'schedule');
    release();
    await first;
    expect(second.shards!.map((s) => [s.shard, s.claim])).toEqual([[0, 'won'], [1, 'skipped-overlap'], [2, 'won']]);
    expect((await store.periodRuns(job.name, p1, 1))[0]).toMatchObject({ status: 'skipped', reason: 'overlap' });
  });
});

describe('shards: the reconciler judges a period by every shard', () => {
  it('a period with shard 2 missing: within catchUp shard 2 alone is run (catch-up), older than catchUp shard 2 alone is recorded missed', async () => {
    const seen: string[] = [];
    const job = shardJob(4, seen, { catchUpMs: 20 * SECOND, coalesce: false });
    const now = Math.floor(Date.now() / 1000) * 1000;
    const old = new Date(now - 40 * SECOND);
    const recent = new Date(now - 10 * SECOND);
    // Shards 0, 1 and 3 of both periods ran on a node now gone; shard 2 never got a row.
    for (const at of [old, recent]) {
      for (const shard of [0, 1, 3]) {
        const ins = await store.insertRun({ job: job.name, scheduledAt: at, periodKey: periodKey(job.name, at), attempt: 1, trigger: 'schedule', nodeId: 'gone', leaseMs: 5000, shard });
        if (ins.outcome !== 'inserted') throw new Error('insert');
        await store.finishRun(ins.run.id, 'gone', { status: 'succeeded' });
      }
    }
    const n = node('rec');
    // Anchored before both periods: every second since `old` - 1 s is looked at.
    await jobStore.declare([{ name: job.name, reconciledThrough: old.getTime() - 1000 }]);
    await n.reconciler.declare([job], new Date(now), 'next');
    const result = await n.reconciler.reconcile([job], { upTo: new Date(now - 3000), now: new Date(now) });
    const ran = (await Promise.all(result.ran)).flat();
    // The other seconds of the window had no row at all (run or recorded missed, every shard); of the
    // two periods set up above, shard 2 alone was written.
    const oldRows = await shardsOf(job, old);
    expect(oldRows.map((rows) => rows.map((r) => [r.status, r.reason]))).toEqual([
      [['succeeded', null]], [['succeeded', null]], [['skipped', 'missed']], [['succeeded', null]],
    ]);
    const recentRows = await shardsOf(job, recent);
    expect(recentRows.map((rows) => rows.map((r) => [r.status, r.nodeId]))).toEqual([
      [['succeeded', 'gone']], [['succeeded', 'gone']], [['succeeded', 'rec']], [['succeeded', 'gone']],
    ]);
    const recentRun = ran.find((r) => r.scheduledAt.getTime() === recent.getTime())!;
    expect(recentRun.attempts.map((a) => [a.shard, a.trigger])).toEqual([[2, 'catch-up']]);
    expect(seen.filter((s) => s.startsWith(periodKey(job.name, recent)))).toEqual([`${periodKey(job.name, recent)} 2/4 rec 1 catch-up`]);
    // Swept again: nothing more to do for either period.
    const again = await n.reconciler.reconcile([job], { upTo: new Date(now - 3000), now: new Date(now) });
    expect((await Promise.all(again.ran)).flat().filter((r) => [old.getTime(), recent.getTime()].includes(r.scheduledAt.getTime()))).toEqual([]);
  });
});

describe('shards: pause and coalesce', () => {
  it('a paused job: every shard of the period is recorded skipped (paused), no body runs', async () => {
    const seen: string[] = [];
    const job = shardJob(3, seen);
    await jobStore.setPaused(job.name, true, 'maintenance');
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 2000);
    const result = await node('p').runner.runPeriod(job, at, 'schedule');
    expect(result.shards!.map((s) => s.claim)).toEqual(['skipped-paused', 'skipped-paused', 'skipped-paused']);
    expect((await shardsOf(job, at)).map((rows) => rows.map((r) => [r.status, r.reason]))).toEqual([0, 1, 2].map(() => [['skipped', 'paused']]));
    expect(seen).toEqual([]);
  });

  it('coalesce: of two periods each missing a shard, the earlier one\'s missing shard is recorded coalesced, the latest\'s is run', async () => {
    const seen: string[] = [];
    const job = shardJob(2, seen, { catchUpMs: 30 * SECOND, coalesce: true });
    const now = Math.floor(Date.now() / 1000) * 1000;
    const upTo = now - 3000;
    const earlier = new Date(upTo - 1000);
    const latest = new Date(upTo);
    for (const at of [earlier, latest]) {
      const ins = await store.insertRun({ job: job.name, scheduledAt: at, periodKey: periodKey(job.name, at), attempt: 1, trigger: 'schedule', nodeId: 'gone', leaseMs: 5000, shard: 0 });
      if (ins.outcome !== 'inserted') throw new Error('insert');
      await store.finishRun(ins.run.id, 'gone', { status: 'succeeded' });
    }
    const n = node('co');
    await jobStore.declare([{ name: job.name, reconciledThrough: earlier.getTime() - 1 }]);
    await n.reconciler.declare([job], new Date(now), 'next');
    const result = await n.reconciler.reconcile([job], { upTo: new Date(upTo), now: new Date(now) });
    const ran = (await Promise.all(result.ran)).flat();
    expect(ran.map((r) => [r.scheduledAt.getTime(), r.attempts.map((a) => [a.shard, a.trigger])])).toEqual([[latest.getTime(), [[1, 'catch-up']]]]);
    expect((await store.periodRuns(job.name, earlier, 1)).map((r) => [r.status, r.reason])).toEqual([['skipped', 'coalesced']]);
    expect((await store.periodRuns(job.name, latest, 1)).map((r) => [r.status, r.nodeId])).toEqual([['succeeded', 'co']]);
    expect(result.coalesced).toBe(1);
  });
});

describe('shards: manual runs of a period', () => {
  const row = (index: number, status: RunRecord['status'], attempt = 1) => ({ periodKey: 'j@x', attempt, status, nodeId: 'n', runAt: null }) as unknown as RunRecord;

  it('runs the shards whose last attempt did not succeed, each at its next attempt; --force all; refused when all succeeded or one is in flight', () => {
    const perShard = [
      { index: 0, runs: [row(0, 'succeeded')] },
      { index: 1, runs: [row(1, 'failed'), row(1, 'failed', 2)] },
      { index: 2, runs: [] },
    ];
    expect(manualShards(perShard, false)).toEqual([{ index: 1, attempt: 3 }, { index: 2, attempt: 1 }]);
    expect(manualShards(perShard, true)).toEqual([{ index: 0, attempt: 2 }, { index: 1, attempt: 3 }, { index: 2, attempt: 1 }]);
    expect(() => manualShards([{ index: 0, runs: [row(0, 'succeeded')] }, { index: 1, runs: [row(1, 'succeeded')] }], false)).toThrow(/already succeeded on every shard \(2\)/);
    expect(() => manualShards([...perShard, { index: 3, runs: [row(3, 'running')] }], false)).toThrow(RefusedError);
    expect(() => manualShards([...perShard, { index: 3, runs: [row(3, 'running')] }], false)).toThrow(/^shard 3: period j@x is in flight/);
  });

  it('a manual run (no period) runs every shard on this node, each its own row', async () => {
    const seen: string[] = [];
    const job = shardJob(3, seen);
    const at = new Date();
    const result = await node('by-hand').runner.runPeriod(job, at, 'manual', { checkOverlap: 'none' });
    expect(result.attempts.map((a) => [a.shard, a.status, a.trigger])).toEqual([[0, 'succeeded', 'manual'], [1, 'succeeded', 'manual'], [2, 'succeeded', 'manual']]);
    expect(seen).toHaveLength(3);
  });
});
