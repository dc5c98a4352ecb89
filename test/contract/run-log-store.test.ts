/**
 * RunLogStore conformance (`scheduler_run_logs`) on every backend, on real servers (SQLite on a temp
 * file, MariaDB and PostgreSQL on a fresh database each): lines in order, pages after a seq, a batch
 * sent again after a lost answer changes nothing, a cut deletes the middle, and prune deletes a
 * run's log with its row, never a kept row's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/store/database.js';
import { RUN_LOGS_TABLE, RUNS_TABLE } from '../../src/store/migrations.js';
import { KnexRunLogStore } from '../../src/store/run-logs.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { RunLogLine } from '../../src/runlog/types.js';
import type { RunRecord } from '../../src/store/types.js';
import { storeBackends, type StoreBackend } from '../helpers/databases.js';

for (const backend of storeBackends('cron_runlog')) {
  describe(`RunLogStore contract: ${backend.name}`, () => {
    let fresh: Awaited<ReturnType<StoreBackend['fresh']>>;
    let db: Database;
    let runs: KnexRunStore;
    let logs: KnexRunLogStore;
    let period = Date.UTC(2026, 0, 1);

    const runRow = async (job = 'report'): Promise<RunRecord> => {
      period += 1000;
      const r = await runs.insertRun({ job, scheduledAt: new Date(period), periodKey: `${job}@${new Date(period).toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'node-a', leaseMs: 30_000 });
      if (r.outcome !== 'inserted') throw new Error('claim lost');
      return r.run;
    };
    const line = (runId: string, seq: number, text = `line ${seq}`, extra: Partial<RunLogLine> = {}): RunLogLine => ({ runId, seq, at: period + seq, level: 'info', stream: 'log', line: text, fields: null, ...extra });

    beforeAll(async () => {
      fresh = await backend.fresh();
      db = await Database.open(fresh.config);
      await db.migrate();
      runs = new KnexRunStore(db);
      logs = new KnexRunLogStore(db);
    });

    afterAll(async () => {
      await db?.close();
      await fresh?.drop();
    });

    it('stores lines with their time, level, stream and fields, and reads them in seq order, a page after a seq', async () => {
      const r = await runRow();
      await logs.write({ lines: [line(r.id, 2, 'second', { level: 'warn', stream: 'stderr' }), line(r.id, 1, 'first ünïcødé ✓', { fields: '{"n":1}' })], cuts: [] });
      await logs.write({ lines: [line(r.id, 3, 'third')], cuts: [] });
      const all = await logs.read(r.id);
      expect(all.map((l) => [l.seq, l.line, l.level, l.stream, l.fields])).toEqual([
        [1, 'first ünïcødé ✓', 'info', 'log', '{"n":1}'], [2, 'second', 'warn', 'stderr', null], [3, 'third', 'info', 'log', null],
      ]);
      expect(all[0]!.at).toBe(period + 1);
      expect(all[0]!.runId).toBe(r.id);
      expect((await logs.read(r.id, { afterSeq: 1 })).map((l) => l.seq)).toEqual([2, 3]);
      expect((await logs.read(r.id, { afterSeq: 1, limit: 1 })).map((l) => l.seq)).toEqual([2]);
      expect(await logs.read(r.id, { afterSeq: 3 })).toEqual([]);
    });

    it("one run's lines never show in another's; an id that is not a run's reads nothing", async () => {
      const a = await runRow();
      const b = await runRow();
      await logs.write({ lines: [line(a.id, 1, 'of a'), line(b.id, 1, 'of b')], cuts: [] });
      expect((await logs.read(a.id)).map((l) => l.line)).toEqual(['of a']);
      expect((await logs.read(b.id)).map((l) => l.line)).toEqual(['of b']);
      expect(await logs.read('dry-run-x')).toEqual([]);
      expect(await logs.read('999999999')).toEqual([]);
    });

    it('a batch sent again (its answer lost) leaves the stored lines as they were, and the new ones are added', async () => {
      const r = await runRow();
      const batch = { lines: [line(r.id, 1, 'one'), line(r.id, 2, 'two')], cuts: [] };
      await logs.write(batch);
      await logs.write({ lines: [...batch.lines.map((l) => ({ ...l, line: `${l.line} again` })), line(r.id, 3, 'three')], cuts: [] });
      expect((await logs.read(r.id)).map((l) => l.line)).toEqual(['one', 'two', 'three']);
    });

    it('a cut deletes the lines of its range before the batch\'s lines are added: its note takes the first cut seq', async () => {
      const r = await runRow();
      await logs.write({ lines: Array.from({ length: 10 }, (_, i) => line(r.id, i + 1)), cuts: [] });
      await logs.write({ lines: [line(r.id, 4, '6 lines cut here', { stream: 'note', level: 'warn' }), line(r.id, 11)], cuts: [{ runId: r.id, fromSeq: 4, toSeq: 9 }] });
      expect((await logs.read(r.id)).map((l) => [l.seq, l.line])).toEqual([[1, 'line 1'], [2, 'line 2'], [3, 'line 3'], [4, '6 lines cut here'], [10, 'line 10'], [11, 'line 11']]);
    });

    it('1,200 lines in one batch (more than one INSERT) are all stored', async () => {
      const r = await runRow();
      await logs.write({ lines: Array.from({ length: 1200 }, (_, i) => line(r.id, i + 1)), cuts: [] });
      const read = await logs.read(r.id);
      expect(read).toHaveLength(1200);
      expect(read.map((l) => l.seq)).toEqual(Array.from({ length: 1200 }, (_, i) => i + 1));
    });

    it("prune deletes a run's log with its row, and keeps the log of a row it keeps (the job's newest)", async () => {
      const job = `pruned-${backend.name}`;
      const old = await runRow(job);
      const newest = await runRow(job);
      for (const r of [old, newest]) expect(await runs.finishRun(r.id, 'node-a', { status: 'succeeded' })).toBe(true);
      await logs.write({ lines: [line(old.id, 1, 'old'), line(newest.id, 1, 'newest')], cuts: [] });
      // Both rows started an hour ago by the store's clock.
      await db.knex(RUNS_TABLE).whereIn('id', [old.id, newest.id]).update({ started_at: db.knex.raw(`${db.dialect.nowMs} - ?`, [3_600_000]) });
      const result = await runs.prune({ olderThanMs: 60_000 });
      expect(result.outcome).toBe('pruned');
      expect(await runs.runById(old.id)).toBeNull();
      expect(await logs.read(old.id)).toEqual([]);
      expect((await logs.read(newest.id)).map((l) => l.line)).toEqual(['newest']);
      const left = await db.knex(RUN_LOGS_TABLE).where('run_id', Number(old.id)).count({ n: '*' }).first();
      expect(Number((left as { n: number | string }).n)).toBe(0);
    });

    it('runById reads an attempt by its id, null for an unknown or malformed id', async () => {
      const r = await runRow('by-id');
      expect((await runs.runById(r.id))?.periodKey).toBe(r.periodKey);
      expect(await runs.runById('999999999')).toBeNull();
      expect(await runs.runById('x1')).toBeNull();
    });
  });
}
