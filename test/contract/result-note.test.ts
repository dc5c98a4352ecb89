/**
 * Migration 0004_result_note and the result/error columns on every backend (SQLite, MariaDB,
 * PostgreSQL on fresh databases): a note written with an outcome is read back on every read path;
 * an outcome without pre-serialised JSON is serialised by the store with the default limit, and a
 * value it cannot store gets a note instead of a silent replacement; the migration goes down and up.
 */
import { randomBytes } from 'node:crypto';
import knexFactory from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS_TABLE, RUNS_TABLE, migrationSource } from '../../src/store/migrations.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { NewRun, RunRecord } from '../../src/store/types.js';
import { storeBackends, type StoreBackend } from '../helpers/databases.js';

const backends = storeBackends('cron_note');

const BASE = Date.UTC(2026, 10, 30, 18, 0, 0);
const uid = () => randomBytes(4).toString('hex');
const newRun = (job: string, at: number): NewRun => ({ job, scheduledAt: new Date(at), periodKey: `${job}@${new Date(at).toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'node-a', leaseMs: 30_000 });

for (const backend of backends) {
  describe(`${backend.name}: result_note`, () => {
    let fresh: Awaited<ReturnType<StoreBackend['fresh']>>;
    let store: KnexRunStore;
    beforeAll(async () => {
      fresh = await backend.fresh();
      store = await KnexRunStore.open(fresh.config);
      await store.migrate();
    });
    afterAll(async () => {
      await store?.close();
      await fresh?.drop();
    });

    async function claimed(job: string, at: number): Promise<RunRecord> {
      const r = await store.insertRun(newRun(job, at));
      if (r.outcome !== 'inserted') throw new Error('not inserted');
      return r.run;
    }

    it('a note written with an outcome (succeeded, and failed through the owing transaction) is read back; none is null', async () => {
      const job = `note-${uid()}`;
      const a = await claimed(job, BASE);
      const note = 'result not stored: its JSON is 3002 bytes, over the 2048-byte limit (maxResultSize)';
      expect((await store.endAttempt(a, 'node-a', { status: 'succeeded', result: null, resultJson: null, resultNote: note }, null)).written).toBe(true);
      const b = await claimed(job, BASE + 60_000);
      expect((await store.endAttempt(b, 'node-a', { status: 'succeeded', result: { ok: 1 }, resultJson: '{"ok":1}' }, null)).written).toBe(true);
      const c = await claimed(job, BASE + 120_000);
      expect((await store.endAttempt(c, 'node-a', { status: 'failed', error: 'thrown object: {"code":42}', errorStack: null }, { retries: 0, retryDelayMs: 0 })).written).toBe(true);
      expect(a.resultNote).toBeNull();

      const rows = new Map((await store.history({ job })).map((r) => [r.scheduledAt.getTime(), r]));
      expect(rows.get(BASE)).toMatchObject({ status: 'succeeded', result: null, resultNote: note });
      expect(rows.get(BASE + 60_000)).toMatchObject({ result: { ok: 1 }, resultNote: null });
      expect(rows.get(BASE + 120_000)).toMatchObject({ status: 'failed', error: 'thrown object: {"code":42}', errorStack: null, resultNote: null });
      expect((await store.periodRuns(job, new Date(BASE)))[0]!.resultNote).toBe(note);
      expect((await store.lastRuns([job])).get(job)!.resultNote).toBeNull();
    });

    it('an outcome with a bare result is serialised by the store: a BigInt or circular result is stored NULL with a note, not replaced silently', async () => {
      const job = `bare-${uid()}`;
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      const values = [{ n: 10n }, circular, 'x'.repeat(1024 * 1024 + 1), { fine: true }];
      for (const [i, result] of values.entries()) {
        const run = await claimed(job, BASE + i * 60_000);
        expect(await store.finishRun(run.id, 'node-a', { status: 'succeeded', result })).toBe(true);
      }
      const rows = new Map((await store.history({ job })).map((r) => [r.scheduledAt.getTime(), r]));
      expect(rows.get(BASE)).toMatchObject({ result: null, resultNote: expect.stringMatching(/not JSON-serialisable.*BigInt/) });
      expect(rows.get(BASE + 60_000)).toMatchObject({ result: null, resultNote: expect.stringMatching(/not JSON-serialisable.*circular/i) });
      expect(rows.get(BASE + 120_000)).toMatchObject({ result: null, resultNote: expect.stringMatching(/over the 1048576-byte limit/) });
      expect(rows.get(BASE + 180_000)).toMatchObject({ result: { fine: true }, resultNote: null });
    });

    it('0004_result_note is applied, and goes down and up again', async () => {
      const k = fresh.config.kind === 'sqlite'
        ? knexFactory({ client: 'better-sqlite3', connection: { filename: (fresh.config as { path: string }).path }, useNullAsDefault: true })
        : knexFactory({ client: fresh.config.kind === 'mysql' ? 'mysql2' : 'pg', connection: fresh.config.url, pool: { min: 0, max: 1 } });
      try {
        const names = (await k(MIGRATIONS_TABLE).select('name').orderBy('id')).map((r: { name: string }) => r.name);
        expect(names).toContain('0004_result_note');
        expect(await k.schema.hasColumn(RUNS_TABLE, 'result_note')).toBe(true);
        const config = { tableName: MIGRATIONS_TABLE, migrationSource };
        await k.migrate.down({ ...config, name: '0004_result_note' });
        expect(await k.schema.hasColumn(RUNS_TABLE, 'result_note')).toBe(false);
        await k.migrate.latest(config);
        expect(await k.schema.hasColumn(RUNS_TABLE, 'result_note')).toBe(true);
      } finally {
        await k.destroy();
      }
    });
  });
}
