/**
 * The store loses an attempt's row while the attempt runs (a failover to an asynchronous replica
 * that had not received it): the node finds out at its next heartbeat or at its outcome write, says
 * so (one error line, the `row-lost` event behind scheduler_store_rows_lost_total and the
 * store_row_lost alert), and writes the row back, so that the period that ran is recorded once. The
 * real SQLite store; the loss is a DELETE of the row behind the executor's back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SchedulerEvent } from '../../src/events/events.js';
import type { Job } from '../../src/jobs/types.js';
import { Executor } from '../../src/run/execute.js';
import { RUNS_TABLE } from '../../src/store/migrations.js';
import { KnexRunStore } from '../../src/store/runs.js';

let dir: string;
let real: KnexRunStore;
let side: Knex;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'row-lost-'));
  const path = join(dir, 's.db');
  real = await KnexRunStore.open({ kind: 'sqlite', path, url: `sqlite:${path}` });
  await real.migrate();
  side = knexFactory({ client: 'better-sqlite3', connection: { filename: path }, useNullAsDefault: true });
});
afterAll(async () => {
  await side.destroy();
  await real.close();
  rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function attempt(name: string, lockTtlMs: number, bodyMs: number, loseAfterMs: number) {
  const scheduledAt = new Date(Date.UTC(2026, 0, 1, 0, 0, 0));
  const inserted = await real.insertRun({ job: name, scheduledAt, periodKey: `${name}@${scheduledAt.toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: lockTtlMs });
  if (inserted.outcome !== 'inserted') throw new Error('setup: the row was not inserted');
  const events: SchedulerEvent[] = [];
  const job = { name, timeoutMs: null, lockTtlMs, retries: 0, retryDelayMs: 1000, run: async () => { await sleep(bodyMs); return { done: true }; } } as unknown as Job;
  const executor = new Executor(real, 'n1', pino({ level: 'silent' }), { events: { emit: (e: SchedulerEvent) => events.push(e) } });
  const lostId = inserted.run.id;
  const done = executor.execute(job, inserted.run, null);
  await sleep(loseAfterMs);
  expect(await side(RUNS_TABLE).where({ id: Number(inserted.run.id) }).delete()).toBe(1);
  const result = await done;
  return { result, events, lostId, rows: await real.periodRuns(name, scheduledAt) };
}

/** Attempt 1 of `name` at `at`, claimed by n1 and run to its end by `executor` (the job's lease 30 s). */
async function ranOnce(executor: Executor, name: string, at: Date, run: (ctx: { attempt: number }) => unknown, retries = 0) {
  const inserted = await real.insertRun({ job: name, scheduledAt: at, periodKey: `${name}@${at.toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: 30_000 });
  if (inserted.outcome !== 'inserted') throw new Error('setup: the row was not inserted');
  const job = { name, timeoutMs: null, lockTtlMs: 30_000, retries, retryDelayMs: 1000, run } as unknown as Job;
  return { job, run: inserted.run, result: await executor.execute(job, inserted.run, null) };
}

describe('an attempt whose row the store lost', () => {
  it('found by a heartbeat: written back, the lease goes on under the new row, the outcome lands once', async () => {
    // lockTtl 1.5 s: beats every 500 ms; the row is lost 700 ms in, the body ends at 2 s.
    const { result, events, lostId, rows } = await attempt('lost-beat', 1500, 2000, 700);
    expect(result.status).toBe('succeeded');
    expect(result.recorded).toBe(true);
    expect(rows.map((r) => [r.attempt, r.status, r.nodeId])).toEqual([[1, 'succeeded', 'n1']]);
    // (SQLite, like MySQL's AUTO_INCREMENT after a failover, may give the new row the lost row's id.)
    expect(result.runId).toBe(rows[0]!.id);
    const lost = events.filter((e) => e.type === 'row-lost');
    expect(lost).toMatchObject([{ job: 'lost-beat', attempt: 1, runId: lostId, restored: true }]);
    expect(events.filter((e) => e.type === 'lease-lost')).toEqual([]);
  });

  it('found by the outcome write: written back with its outcome', async () => {
    // lockTtl 30 s: no heartbeat before the body ends (300 ms); the row is lost 100 ms in.
    const { result, events, rows } = await attempt('lost-outcome', 30_000, 300, 100);
    expect(result.status).toBe('succeeded');
    expect(result.recorded).toBe(true);
    expect(rows.map((r) => [r.attempt, r.status, r.nodeId])).toEqual([[1, 'succeeded', 'n1']]);
    expect(events.filter((e) => e.type === 'row-lost')).toMatchObject([{ job: 'lost-outcome', restored: true }]);
  });
});

describe('an attempt in flight whose row the store lost while another node recorded its period', () => {
  it('skipped (its catch-up found no row: coalesced): the skip becomes this attempt, with its outcome (the body ran once, under its own row)', async () => {
    const events: SchedulerEvent[] = [];
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), { events: { emit: (e: SchedulerEvent) => events.push(e) } });
    const at = new Date(Date.UTC(2026, 0, 10));
    const key = `fly-a@${at.toISOString()}`;
    const inserted = await real.insertRun({ job: 'fly-a', scheduledAt: at, periodKey: key, attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: 30_000 });
    if (inserted.outcome !== 'inserted') throw new Error('setup');
    const job = { name: 'fly-a', timeoutMs: null, lockTtlMs: 30_000, retries: 0, retryDelayMs: 1000, run: async () => { await sleep(300); return 'shipped'; } } as unknown as Job;
    const done = executor.execute(job, inserted.run, null);
    await sleep(100);
    // The failover lost the row; another node's catch-up found the period without one.
    await side(RUNS_TABLE).where({ id: Number(inserted.run.id) }).delete();
    expect(await real.insertSkipped([{ job: 'fly-a', scheduledAt: at, periodKey: key, trigger: 'catch-up', nodeId: 'n2', reason: 'coalesced' }])).toBe(1);
    const result = await done;
    expect(result).toMatchObject({ status: 'succeeded', recorded: true });
    expect((await real.periodRuns('fly-a', at)).map((r) => [r.attempt, r.nodeId, r.status, r.reason, r.trigger, r.result])).toEqual([[1, 'n1', 'succeeded', null, 'schedule', 'shipped']]);
    expect(events.filter((e) => e.type === 'row-lost')).toMatchObject([{ job: 'fly-a', restored: true }]);
  });

  it('running (another node claimed it again): reported, left to that node, nothing written over', async () => {
    const events: SchedulerEvent[] = [];
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), { events: { emit: (e: SchedulerEvent) => events.push(e) } });
    const at = new Date(Date.UTC(2026, 0, 11));
    const key = `fly-b@${at.toISOString()}`;
    const inserted = await real.insertRun({ job: 'fly-b', scheduledAt: at, periodKey: key, attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: 30_000 });
    if (inserted.outcome !== 'inserted') throw new Error('setup');
    const job = { name: 'fly-b', timeoutMs: null, lockTtlMs: 30_000, retries: 0, retryDelayMs: 1000, run: async () => { await sleep(300); return 1; } } as unknown as Job;
    const done = executor.execute(job, inserted.run, null);
    await sleep(100);
    await side(RUNS_TABLE).where({ id: Number(inserted.run.id) }).delete();
    expect((await real.insertRun({ job: 'fly-b', scheduledAt: at, periodKey: key, attempt: 1, trigger: 'catch-up', nodeId: 'n2', leaseMs: 30_000 })).outcome).toBe('inserted');
    expect((await done).recorded).toBe(false);
    expect((await real.periodRuns('fly-b', at)).map((r) => [r.attempt, r.nodeId, r.status])).toEqual([[1, 'n2', 'running']]);
    expect(events.filter((e) => e.type === 'row-lost')).toMatchObject([{ job: 'fly-b', restored: false }]);
  });
});

describe('a finished attempt whose row the store lost (written before the failover, forgotten by the store after it)', () => {
  it('the read-back after the store moved writes it again with its outcome and its times, once; rows still there are left alone', async () => {
    const events: SchedulerEvent[] = [];
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), { events: { emit: (e: SchedulerEvent) => events.push(e) } });
    const job = (name: string, result: unknown) => ({ name, timeoutMs: null, lockTtlMs: 30_000, retries: 0, retryDelayMs: 1000, run: async () => { await sleep(50); return result; } }) as unknown as Job;
    const at = (s: number) => new Date(Date.UTC(2026, 0, 2, 0, 0, s));
    const runs = [];
    for (const [name, s] of [['fin-a', 1], ['fin-a', 2], ['fin-b', 1]] as const) {
      const inserted = await real.insertRun({ job: name, scheduledAt: at(s), periodKey: `${name}@${at(s).toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: 30_000 });
      if (inserted.outcome !== 'inserted') throw new Error('setup: the row was not inserted');
      const result = await executor.execute(job(name, { n: s }), inserted.run, null);
      expect(result.status).toBe('succeeded');
      runs.push(inserted.run);
    }
    const before = await real.periodRuns('fin-a', at(2));
    // The "failover": two of the three rows are gone.
    expect(await side(RUNS_TABLE).whereIn('id', [Number(runs[1]!.id), Number(runs[2]!.id)]).delete()).toBe(2);
    await executor.verifySettled('test: the store moved');
    const a2 = await real.periodRuns('fin-a', at(2));
    expect(a2.map((r) => [r.attempt, r.status, r.nodeId, r.result])).toEqual([[1, 'succeeded', 'n1', { n: 2 }]]);
    // The body's own times, not the write-back's: within the clock's rounding of the first row's.
    expect(Math.abs(a2[0]!.startedAt.getTime() - before[0]!.startedAt.getTime())).toBeLessThan(1000);
    expect((await real.periodRuns('fin-b', at(1))).map((r) => [r.attempt, r.status])).toEqual([[1, 'succeeded']]);
    expect((await real.periodRuns('fin-a', at(1))).map((r) => r.id)).toEqual([runs[0]!.id]);
    expect(events.filter((e) => e.type === 'row-lost').map((e) => [e.job, e.periodKey, (e as { restored: boolean }).restored]).sort()).toEqual([
      ['fin-a', `fin-a@${at(2).toISOString()}`, true], ['fin-b', `fin-b@${at(1).toISOString()}`, true],
    ]);
    // A second read-back finds nothing missing and writes nothing.
    await executor.verifySettled('test: again');
    expect(events.filter((e) => e.type === 'row-lost')).toHaveLength(2);
    expect(await real.periodRuns('fin-a', at(2))).toHaveLength(1);
  });

  it('a row whose claim survived but whose outcome was lost (left running) gets its outcome written again', async () => {
    const events: SchedulerEvent[] = [];
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), { events: { emit: (e: SchedulerEvent) => events.push(e) } });
    const at = new Date(Date.UTC(2026, 0, 4));
    const inserted = await ranOnce(executor, 'fin-d', at, async () => 7);
    // The "failover": the claim had reached the replica, the outcome had not.
    await side(RUNS_TABLE).where({ id: Number(inserted.run.id) }).update({ status: 'running', finished_at: null, duration_ms: null, result: null });
    await executor.verifySettled('test');
    expect((await real.periodRuns('fin-d', at)).map((r) => [r.id, r.attempt, r.status, r.result])).toEqual([[inserted.run.id, 1, 'succeeded', 7]]);
    expect(events.filter((e) => e.type === 'row-lost')).toMatchObject([{ job: 'fin-d', restored: true }]);
  });

  it('a period another node claimed again meanwhile is reported, not written over', async () => {
    const events: SchedulerEvent[] = [];
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), { events: { emit: (e: SchedulerEvent) => events.push(e) } });
    const at = new Date(Date.UTC(2026, 0, 3));
    const key = `fin-c@${at.toISOString()}`;
    const inserted = await ranOnce(executor, 'fin-c', at, async () => undefined);
    await side(RUNS_TABLE).where({ id: Number(inserted.run.id) }).delete();
    const other = await real.insertRun({ job: 'fin-c', scheduledAt: at, periodKey: key, attempt: 1, trigger: 'catch-up', nodeId: 'n2', leaseMs: 30_000 });
    expect(other.outcome).toBe('inserted');
    await executor.verifySettled('test');
    expect((await real.periodRuns('fin-c', at)).map((r) => [r.attempt, r.nodeId, r.status])).toEqual([[1, 'n2', 'running']]);
    expect(events.filter((e) => e.type === 'row-lost')).toMatchObject([{ job: 'fin-c', restored: false }]);
    await executor.verifySettled('test: again');
    expect(events.filter((e) => e.type === 'row-lost'), 'said once').toHaveLength(1);
  });

  it('a period another node recorded skipped meanwhile (its catch-up found no row: coalesced) becomes the attempt that ran, with its outcome', async () => {
    const events: SchedulerEvent[] = [];
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), { events: { emit: (e: SchedulerEvent) => events.push(e) } });
    const at = new Date(Date.UTC(2026, 0, 5));
    const key = `fin-e@${at.toISOString()}`;
    const inserted = await ranOnce(executor, 'fin-e', at, async () => 'shipped');
    await side(RUNS_TABLE).where({ id: Number(inserted.run.id) }).delete();
    expect(await real.insertSkipped([{ job: 'fin-e', scheduledAt: at, periodKey: key, trigger: 'catch-up', nodeId: 'n2', reason: 'coalesced' }])).toBe(1);
    await executor.verifySettled('test');
    expect((await real.periodRuns('fin-e', at)).map((r) => [r.attempt, r.nodeId, r.status, r.reason, r.trigger, r.result])).toEqual([[1, 'n1', 'succeeded', null, 'schedule', 'shipped']]);
    expect(events.filter((e) => e.type === 'row-lost')).toMatchObject([{ job: 'fin-e', restored: true }]);
  });

  it('an attempt whose row was lost while the next attempt (owed by it) was written back first: written back too, with no further attempt owed', async () => {
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), {});
    const at = new Date(Date.UTC(2026, 0, 6));
    const key = `fin-f@${at.toISOString()}`;
    const { result } = await ranOnce(executor, 'fin-f', at, async () => { throw new Error('first fails'); }, 1);
    expect(result.next?.attempt).toBe(2);
    // The failover lost both rows; attempt 2's node wrote its own back (here: succeeded) first.
    await side(RUNS_TABLE).where({ job: 'fin-f' }).delete();
    const second = await real.insertRun({ job: 'fin-f', scheduledAt: at, periodKey: key, attempt: 2, trigger: 'schedule', nodeId: 'n2', leaseMs: 30_000 });
    if (second.outcome !== 'inserted') throw new Error('setup');
    await real.endAttempt(second.run, 'n2', { status: 'succeeded' }, null);
    await executor.verifySettled('test');
    expect((await real.periodRuns('fin-f', at)).map((r) => [r.attempt, r.nodeId, r.status])).toEqual([[1, 'n1', 'failed'], [2, 'n2', 'succeeded']]);
  });

  it('an owed attempt whose claim the store lost (its row pending again) is claimed back with the outcome this node has, not left for another node to run again', async () => {
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), {});
    const at = new Date(Date.UTC(2026, 0, 7));
    const key = `fin-g@${at.toISOString()}`;
    const first = await real.insertRun({ job: 'fin-g', scheduledAt: at, periodKey: key, attempt: 1, trigger: 'schedule', nodeId: 'n0', leaseMs: 30_000 });
    if (first.outcome !== 'inserted') throw new Error('setup');
    const owed = (await real.endAttempt(first.run, 'n0', { status: 'failed', error: 'first fails' }, { retries: 1, retryDelayMs: 0 })).next!;
    await sleep(5);
    const claimed = (await real.claimPending(owed.id, 'n1', 30_000))!;
    await executor.execute({ name: 'fin-g', timeoutMs: null, lockTtlMs: 30_000, retries: 1, retryDelayMs: 0, run: async () => 'second' } as unknown as Job, claimed, null);
    // The failover: the claim and the outcome lost, the row pending again.
    await side(RUNS_TABLE).where({ id: Number(owed.id) }).update({ status: 'pending', node_id: 'n0', finished_at: null, duration_ms: null, result: null, heartbeat_at: null, run_at: Date.now() - 1000 });
    await executor.verifySettled('test');
    expect((await real.periodRuns('fin-g', at)).map((r) => [r.attempt, r.nodeId, r.status, r.result])).toEqual([[1, 'n0', 'failed', null], [2, 'n1', 'succeeded', 'second']]);
  });

  it('both attempts of a period lost (the first failed, owing the second, which this node ran too): both written back, no third attempt and no pending one left to run again', async () => {
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), {});
    const at = new Date(Date.UTC(2026, 0, 8));
    const { job, result: r1 } = await ranOnce(executor, 'fin-h', at, async (ctx) => { if (ctx.attempt === 1) throw new Error('first fails'); return 'second'; }, 1);
    await sleep(1100);
    const second = (await real.claimPending(r1.next!.id, 'n1', 30_000))!;
    await executor.execute(job, second, null);
    // The failover lost both rows.
    await side(RUNS_TABLE).where({ job: 'fin-h' }).delete();
    await executor.verifySettled('test');
    expect((await real.periodRuns('fin-h', at)).map((r) => [r.attempt, r.nodeId, r.status])).toEqual([[1, 'n1', 'failed'], [2, 'n1', 'succeeded']]);
  });

  it('an outage longer than the ledger\'s window (a managed failover of 30-120 s) still reads back the outcomes written just before it', async () => {
    const executor = new Executor(real, 'n1', pino({ level: 'silent' }), {});
    const at = new Date(Date.UTC(2026, 0, 9));
    executor.storeAnswered(); // the last sweep before the outage
    const { run } = await ranOnce(executor, 'fin-i', at, async () => 'before the outage');
    await side(RUNS_TABLE).where({ id: Number(run.id) }).delete();
    // The first sweep that goes through, 90 s later (the store away meanwhile, or this process paused).
    const t = performance.now();
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => t + 90_000);
    try {
      executor.storeAnswered();
      expect(executor.settledKept, 'kept until it was read back').toBe(1);
      await executor.verifySettled('test: the store answered again after an outage');
    } finally {
      clock.mockRestore();
    }
    expect((await real.periodRuns('fin-i', at)).map((r) => [r.attempt, r.nodeId, r.status, r.result])).toEqual([[1, 'n1', 'succeeded', 'before the outage']]);
  });
});
