/**
 * Migration 0010_run_output on every backend (SQLite, MariaDB, PostgreSQL on fresh databases): a
 * command job's output tail written with its outcome (the plain UPDATE of a success and the owing
 * transaction of a failure) is read back on every read path, a full 64 KiB tail of multi-byte text
 * with a NUL in it is stored (over MySQL's TEXT, NUL refused by PostgreSQL), an outcome without one
 * leaves the column NULL, the views' read of only its end (`outputChars`) counts characters, and the
 * migration goes down and up.
 */
import { randomBytes } from 'node:crypto';
import knexFactory from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS_TABLE, RUNS_TABLE, migrationSource } from '../../src/store/migrations.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { NewRun, RunRecord } from '../../src/store/types.js';
import { OutputTail, TAIL_BYTES } from '../../src/run/command/output.js';
import { storeBackends, type StoreBackend } from '../helpers/databases.js';

const backends = storeBackends('cron_output');

const BASE = Date.UTC(2026, 11, 1, 2, 0, 0);
const uid = () => randomBytes(4).toString('hex');
const newRun = (job: string, at: number): NewRun => ({ job, scheduledAt: new Date(at), periodKey: `${job}@${new Date(at).toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'node-a', leaseMs: 30_000 });

for (const backend of backends) {
  describe(`${backend.name}: output`, () => {
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

    it('the tail is stored with the outcome, read back everywhere; none is NULL; 64 KiB of multi-byte text with a NUL fits', async () => {
      const job = `out-${uid()}`;
      const tail = new OutputTail();
      for (let i = 0; i < 4000; i++) tail.add(Buffer.from(`ligne ${i} — été €\n`));
      // A NUL that reaches the store (PostgreSQL refuses it in text) is stored as U+FFFD.
      const big = `${tail.text()}\u0000`;
      expect(Buffer.byteLength(big)).toBeGreaterThan(65_535 - 200);
      expect(Buffer.byteLength(big)).toBeLessThanOrEqual(TAIL_BYTES);

      const a = await claimed(job, BASE);
      expect((await store.endAttempt(a, 'node-a', { status: 'succeeded', result: { exitCode: 0 }, resultJson: '{"exitCode":0}', output: 'hello\n' }, null)).written).toBe(true);
      const b = await claimed(job, BASE + 60_000);
      expect((await store.endAttempt(b, 'node-a', { status: 'failed', error: 'exited with code 3', output: big }, { retries: 0, retryDelayMs: 0 })).written).toBe(true);
      const c = await claimed(job, BASE + 120_000);
      expect((await store.endAttempt(c, 'node-a', { status: 'succeeded', result: 1 }, null)).written).toBe(true);
      const d = await claimed(job, BASE + 180_000);
      expect((await store.endAttempt(d, 'node-a', { status: 'timed_out', error: 'timed out', reason: 'timeout', output: '' }, { retries: 0, retryDelayMs: 0 })).written).toBe(true);

      const rows = new Map((await store.history({ job })).map((r) => [r.scheduledAt.getTime(), r]));
      expect(rows.get(BASE)!.output).toBe('hello\n');
      expect(rows.get(BASE + 60_000)!.output).toBe(`${big.slice(0, -1)}\uFFFD`);
      expect(rows.get(BASE + 120_000)!.output).toBeNull();
      expect(rows.get(BASE + 180_000)!.output).toBe('');
      expect((await store.periodRuns(job, new Date(BASE)))[0]!.output).toBe('hello\n');
      expect((await store.lastRuns([job])).get(job)!.output).toBe('');

      // The views read only the end (outputChars + 1 characters, counted as characters, not bytes).
      const ends = new Map((await store.history({ job, outputChars: 10 })).map((r) => [r.scheduledAt.getTime(), r]));
      expect(ends.get(BASE)!.output).toBe('hello\n');
      expect(ends.get(BASE + 60_000)!.output).toBe(`${big.slice(0, -1)}\uFFFD`.slice(-11));
      expect(ends.get(BASE + 60_000)!.output).toBe('9 — été €\n\uFFFD');
      expect(ends.get(BASE + 120_000)!.output).toBeNull();
      expect(ends.get(BASE + 60_000)).toMatchObject({ status: 'failed', error: 'exited with code 3', attempt: 1, periodKey: b.periodKey });
    });

    it('0010_run_output is applied, and goes down and up again', async () => {
      const k = fresh.config.kind === 'sqlite'
        ? knexFactory({ client: 'better-sqlite3', connection: { filename: (fresh.config as { path: string }).path }, useNullAsDefault: true })
        : knexFactory({ client: fresh.config.kind === 'mysql' ? 'mysql2' : 'pg', connection: fresh.config.url, pool: { min: 0, max: 1 } });
      try {
        const names = (await k(MIGRATIONS_TABLE).select('name').orderBy('id')).map((r: { name: string }) => r.name);
        expect(names).toContain('0010_run_output');
        expect(await k.schema.hasColumn(RUNS_TABLE, 'output')).toBe(true);
        const config = { tableName: MIGRATIONS_TABLE, migrationSource };
        await k.migrate.down({ ...config, name: '0010_run_output' });
        expect(await k.schema.hasColumn(RUNS_TABLE, 'output')).toBe(false);
        await k.migrate.latest(config);
        expect(await k.schema.hasColumn(RUNS_TABLE, 'output')).toBe(true);
      } finally {
        await k.destroy();
      }
    });
  });
}
