/**
 * RunStore conformance: one suite, run against every backend on real servers (SQLite on a temp file,
 * MariaDB and PostgreSQL on a fresh database each). The store is the fence of the whole design, so
 * the races are run for real: several store instances with their own connections, all at once.
 * One file per backend (run-store-sqlite/-mariadb/-postgres.test.ts) calls describeRunStore, so that
 * the three run side by side rather than one after another.
 */
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import knexFactory, { type Knex } from 'knex';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { StoreConfig } from '../../src/config/config.js';
import { StoreUnavailableError } from '../../src/errors.js';
import { Database } from '../../src/store/database.js';
import { KnexRunStore } from '../../src/store/runs.js';
import { KnexJobStore } from '../../src/store/jobs.js';
import { MIGRATIONS_TABLE, RUNS_TABLE, migrationSource } from '../../src/store/migrations.js';
import type { NewRun, RunOutcome, RunRecord, RunStore, SkippedRun } from '../../src/store/types.js';
import { createMariaDb, createPostgresDb } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface FreshStore {
  config: StoreConfig;
  drop(): Promise<void>;
}

export interface Backend {
  name: string;
  /** A fresh, empty database (or SQLite file) nobody else uses. */
  fresh(): Promise<FreshStore>;
}

const tempDirs: string[] = [];
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

export const sqlite: Backend = {
  name: 'SQLite',
  async fresh() {
    const dir = mkdtempSync(join(tmpdir(), 'cron-store-'));
    tempDirs.push(dir);
    const path = join(dir, 'runs.db');
    return { config: { kind: 'sqlite', path, url: `sqlite:${path}` }, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  },
};

export const mariadb: Backend = {
  name: 'MariaDB',
  async fresh() {
    const db = await createMariaDb('cron_contract');
    return { config: { kind: 'mysql', url: db.url }, drop: () => db.drop() };
  },
};

export const postgres: Backend = {
  name: 'PostgreSQL',
  async fresh() {
    const db = await createPostgresDb('cron_contract');
    return { config: { kind: 'postgres', url: db.url }, drop: () => db.drop() };
  },
};

/** A knex of our own on the same database, to look at the schema behind the store's back. */
function inspector(config: StoreConfig): Knex {
  if (config.kind === 'sqlite') return knexFactory({ client: 'better-sqlite3', connection: { filename: config.path }, useNullAsDefault: true });
  if (config.kind === 'mysql') return knexFactory({ client: 'mysql2', connection: config.url, pool: { min: 0, max: 1 } });
  return knexFactory({ client: 'pg', connection: config.url, pool: { min: 0, max: 1 } });
}

async function countTables(k: Knex, config: StoreConfig, table: string): Promise<number> {
  if (config.kind === 'sqlite') {
    const rows = await k('sqlite_master').where({ type: 'table', name: table }).count<{ n: number }[]>({ n: '*' });
    return Number(rows[0]!.n);
  }
  if (config.kind === 'mysql') {
    const rows = await k('information_schema.tables').whereRaw('table_schema = DATABASE()').andWhere('table_name', table).count<{ n: number }[]>({ n: '*' });
    return Number(rows[0]!.n);
  }
  const rows = await k('information_schema.tables').whereRaw('table_catalog = current_database()').andWhere('table_name', table).count<{ n: number }[]>({ n: '*' });
  return Number(rows[0]!.n);
}

const uid = (): string => randomBytes(4).toString('hex');
const MINUTE = 60_000;
/** A whole-minute instant, far enough from other tests' instants. */
const BASE = Date.UTC(2026, 10, 30, 18, 0, 0);

function newRun(job: string, scheduledAt: Date, over: Partial<NewRun> = {}): NewRun {
  return {
    job,
    scheduledAt,
    periodKey: `${job}@${scheduledAt.toISOString()}`,
    attempt: 1,
    trigger: 'schedule',
    nodeId: 'node-a',
    leaseMs: 30_000,
    ...over,
  };
}

function skipped(job: string, scheduledAt: Date, over: Partial<SkippedRun> = {}): SkippedRun {
  return { job, scheduledAt, periodKey: `${job}@${scheduledAt.toISOString()}`, trigger: 'catch-up', nodeId: 'node-s', reason: 'coalesced', ...over };
}

async function inserted(store: RunStore, run: NewRun) {
  const res = await store.insertRun(run);
  if (res.outcome !== 'inserted') throw new Error(`expected an insert of ${run.periodKey} attempt ${run.attempt}, got ${res.outcome}`);
  return res.run;
}

/**
 * takeOver of one run from n processes at once (each its own store on the same file), released
 * together once all have opened the store; their results as JSON. Uses the built dist/.
 */
async function takeOverInProcesses(n: number, config: StoreConfig, run: RunRecord, reason = 'lease expired', owe = true): Promise<Array<Record<string, unknown> | null>> {
  const runs = pathToFileURL(join(ROOT, 'dist', 'store', 'runs.js')).href;
  if (!existsSync(fileURLToPath(runs))) throw new Error('dist/ is missing: run `npm run build` first');
  const script = `
    import { KnexRunStore } from ${JSON.stringify(runs)};
    const [config, raw, node, reason, owe] = JSON.parse(process.argv[1]);
    const run = { ...raw, scheduledAt: new Date(raw.scheduledAt), startedAt: new Date(raw.startedAt) };
    const store = await KnexRunStore.open(config);
    process.stdout.write('ready\\n');
    process.stdin.once('data', async () => {
      try {
        const res = await store.takeOver(run, node, reason, owe);
        process.stdout.write('result ' + JSON.stringify(res) + '\\n');
      } catch (err) {
        process.stdout.write('error ' + JSON.stringify(String(err)) + '\\n');
      } finally {
        await store.close();
      }
    });`;
  const children = Array.from({ length: n }, (_, i) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, JSON.stringify([config, run, `racer-${i}`, reason, owe])], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        out += d;
        if (out.includes('ready\n')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`racer ${i} exited (${code}) before it was ready: ${out}`)));
    });
    const done = new Promise<string>((resolve) => child.on('close', () => resolve(out)));
    return { child, ready, done };
  });
  await Promise.all(children.map((c) => c.ready));
  for (const c of children) c.child.stdin.end('go\n');
  const outs = await Promise.all(children.map((c) => c.done));
  return outs.map((o, i) => {
    const line = o.split('\n').find((l) => l.startsWith('result ') || l.startsWith('error '));
    if (!line?.startsWith('result ')) throw new Error(`racer ${i}: ${line ?? o}`);
    return JSON.parse(line.slice('result '.length)) as Record<string, unknown> | null;
  });
}

export function describeRunStore(backend: Backend): void {
  describe(`RunStore contract: ${backend.name}`, () => {
    let db: FreshStore;
    let store: KnexRunStore;
    const extra: KnexRunStore[] = [];
    const extraDbs: FreshStore[] = [];

    beforeAll(async () => {
      db = await backend.fresh();
      store = await KnexRunStore.open(db.config);
      await store.migrate();
    });

    afterAll(async () => {
      await Promise.allSettled(extra.map((s) => s.close()));
      await store?.close();
      await db?.drop();
      for (const d of extraDbs) await d.drop().catch(() => {});
    });

    /**
     * A database of the block's own (for cases that read or count the whole table), its store and an
     * inspector, handed to `set` before the block's cases; its runs table is emptied before each case.
     */
    function ownDatabase(set: (own: { pdb: FreshStore; ps: KnexRunStore; k: Knex }) => void): void {
      let own: { pdb: FreshStore; ps: KnexRunStore; k: Knex } | undefined;
      beforeAll(async () => {
        const pdb = await backend.fresh();
        extraDbs.push(pdb);
        const ps = await KnexRunStore.open(pdb.config);
        await ps.migrate();
        own = { pdb, ps, k: inspector(pdb.config) };
        set(own);
      });
      afterAll(async () => {
        await own?.k.destroy();
        await own?.ps.close();
      });
      beforeEach(async () => {
        await own!.k(RUNS_TABLE).del();
      });
    }

    /** n more store instances (each its own pool), closed when fn is done: PostgreSQL allows 100 connections. */
    async function withStores<T>(n: number, config: StoreConfig, fn: (stores: KnexRunStore[]) => Promise<T>): Promise<T> {
      const opened = await Promise.allSettled(Array.from({ length: n }, () => KnexRunStore.open(config)));
      const stores = opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      extra.push(...stores);
      try {
        const failed = opened.find((r) => r.status === 'rejected');
        if (failed) throw (failed as PromiseRejectedResult).reason;
        return await fn(stores);
      } finally {
        await Promise.allSettled(stores.map((s) => s.close()));
        extra.splice(0, extra.length, ...extra.filter((s) => !stores.includes(s)));
      }
    }

    it('reports its kind', () => {
      expect(store.kind).toBe(db.config.kind);
    });

    it('migrate() twice is idempotent and keeps the rows', async () => {
      const job = `mig-${uid()}`;
      await inserted(store, newRun(job, new Date(BASE)));
      await store.migrate();
      await store.migrate();
      expect(await store.periodRuns(job, new Date(BASE))).toHaveLength(1);
      const k = inspector(db.config);
      try {
        expect(await countTables(k, db.config, RUNS_TABLE)).toBe(1);
        const bundled = (await migrationSource.getMigrations([])).length;
        expect(await k(MIGRATIONS_TABLE).count<{ n: number }[]>({ n: '*' }).then((r) => Number(r[0]!.n))).toBe(bundled);
      } finally {
        await k.destroy();
      }
    });

    it('migrate() from 4 store instances at once on a fresh database: all resolve, one table, lock left free', async () => {
      const fresh = await backend.fresh();
      extraDbs.push(fresh);
      await withStores(4, fresh.config, async (stores) => {
        const started = Date.now();
        const results = await Promise.allSettled(stores.map((s) => s.migrate()));
        const elapsed = Date.now() - started;
        expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok', 'ok', 'ok']);
        // A race that only resolves through a driver's busy timeout is not a working lock.
        expect(elapsed).toBeLessThan(8_000);
        const k = inspector(fresh.config);
        try {
          expect(await countTables(k, fresh.config, RUNS_TABLE)).toBe(1);
          // Each bundled migration applied exactly once.
          const applied = (await k(MIGRATIONS_TABLE).select('name')).map((r: { name: string }) => r.name);
          const bundled = (await migrationSource.getMigrations([])).map((m) => migrationSource.getMigrationName(m));
          expect([...applied].sort()).toEqual([...bundled].sort());
          const lock = await k(`${MIGRATIONS_TABLE}_lock`).select('is_locked');
          expect(lock.map((r: { is_locked: number }) => Number(r.is_locked))).toEqual([0]);
        } finally {
          await k.destroy();
        }
        // Every one of them can use the table.
        const job = `migc-${uid()}`;
        const outcomes = await Promise.all(stores.map((s, i) => s.insertRun(newRun(job, new Date(BASE), { nodeId: `n${i}` }))));
        expect(outcomes.filter((o) => o.outcome === 'inserted')).toHaveLength(1);
      });
    });

    it('insertRun: inserted with the row, stamped by the store clock', async () => {
      const job = `ins-${uid()}`;
      const at = new Date(BASE);
      const before = await store.now();
      const res = await store.insertRun(newRun(job, at, { nodeId: 'node-a', leaseMs: 12_345, trigger: 'catch-up' }));
      const after = await store.now();
      expect(res.outcome).toBe('inserted');
      if (res.outcome !== 'inserted') return;
      const run = res.run;
      expect(run).toMatchObject({
        job, periodKey: `${job}@${at.toISOString()}`, shard: 0, attempt: 1, trigger: 'catch-up', status: 'running',
        reason: null, nodeId: 'node-a', finishedAt: null, durationMs: null, leaseMs: 12_345, result: null, error: null, errorStack: null,
      });
      expect(typeof run.id).toBe('string');
      expect(run.id).not.toBe('');
      expect(run.scheduledAt).toBeInstanceOf(Date);
      expect(run.scheduledAt.getTime()).toBe(at.getTime());
      expect(run.startedAt.getTime()).toBeGreaterThanOrEqual(before - 2);
      expect(run.startedAt.getTime()).toBeLessThanOrEqual(after + 2);
      expect(run.heartbeatAt).not.toBeNull();
      expect(Math.abs(run.heartbeatAt!.getTime() - run.startedAt.getTime())).toBeLessThanOrEqual(5);
      // What periodRuns reads back is the same record.
      expect(await store.periodRuns(job, at)).toEqual([run]);
    });

    it("insertRun: the same (job, period, attempt) again is 'duplicate', a value, and writes nothing", async () => {
      const job = `dup-${uid()}`;
      const at = new Date(BASE + MINUTE);
      const first = await inserted(store, newRun(job, at, { nodeId: 'node-a' }));
      await expect(store.insertRun(newRun(job, at, { nodeId: 'node-b' }))).resolves.toEqual({ outcome: 'duplicate' });
      await expect(store.insertRun(newRun(job, at, { nodeId: 'node-a', trigger: 'manual' }))).resolves.toEqual({ outcome: 'duplicate' });
      expect(await store.periodRuns(job, at)).toEqual([first]);
      // Another job with the same instant, and the same job at another instant, are other periods.
      expect((await store.insertRun(newRun(`${job}-other`, at))).outcome).toBe('inserted');
      expect((await store.insertRun(newRun(job, new Date(at.getTime() + MINUTE)))).outcome).toBe('inserted');
    });

    it('insertRun: attempt 2 of the same period inserts; periodRuns lists attempts oldest first', async () => {
      const job = `att-${uid()}`;
      const at = new Date(BASE + 2 * MINUTE);
      const a1 = await inserted(store, newRun(job, at));
      expect(await store.finishRun(a1.id, 'node-a', { status: 'failed', error: 'boom' })).toBe(true);
      const a2 = await inserted(store, newRun(job, at, { attempt: 2, nodeId: 'node-b' }));
      expect(a2.attempt).toBe(2);
      expect(a2.id).not.toBe(a1.id);
      expect((await store.insertRun(newRun(job, at, { attempt: 2, nodeId: 'node-c' }))).outcome).toBe('duplicate');
      const runs = await store.periodRuns(job, at);
      expect(runs.map((r) => [r.attempt, r.status, r.nodeId])).toEqual([[1, 'failed', 'node-a'], [2, 'running', 'node-b']]);
    });

    it('fuzz: 20 store instances race to insert the same period, exactly one inserted, period after period', async () => {
      await withStores(20, db.config, async (racers) => {
        const job = `race-${uid()}`;
        for (let p = 0; p < 6; p++) {
          const at = new Date(BASE + p * MINUTE);
          const attempt = 1 + (p % 2);
          // Shuffle who goes first so that no instance is favoured by the order of the calls.
          const order = racers.map((s, i) => ({ s, i, k: Math.random() })).sort((a, b) => a.k - b.k);
          const outcomes = await Promise.all(order.map(({ s, i }) => s.insertRun(newRun(job, at, { attempt, nodeId: `racer-${i}` }))));
          const winners = outcomes.flatMap((o, j) => (o.outcome === 'inserted' ? [{ run: o.run, node: `racer-${order[j]!.i}` }] : []));
          expect(winners, `period ${p}`).toHaveLength(1);
          expect(outcomes.filter((o) => o.outcome === 'duplicate')).toHaveLength(19);
          const rows = await store.periodRuns(job, at);
          expect(rows).toHaveLength(1);
          expect(rows[0]!.nodeId).toBe(winners[0]!.node);
          expect(rows[0]!.attempt).toBe(attempt);
        }
      });
    });

    it('fuzz: 10 instances race over a batch of periods and attempts at once: one row per key', async () => {
      // 10, not 20: each instance may open 4 connections here, and PostgreSQL allows 100 in all.
      await withStores(10, db.config, async (racers) => {
        const job = `race2-${uid()}`;
        const keys = Array.from({ length: 8 }, (_, i) => ({ at: new Date(BASE + (i % 4) * MINUTE), attempt: 1 + Math.floor(i / 4) }));
        const calls = racers.flatMap((s, i) => keys.map((k) => ({ s, i, k })));
        calls.sort(() => Math.random() - 0.5);
        const outcomes = await Promise.all(calls.map(({ s, i, k }) => s.insertRun(newRun(job, k.at, { attempt: k.attempt, nodeId: `racer-${i}` }))));
        expect(outcomes.filter((o) => o.outcome === 'inserted')).toHaveLength(keys.length);
        expect(outcomes.filter((o) => o.outcome === 'duplicate')).toHaveLength(calls.length - keys.length);
        const rows = await store.history({ job, limit: 1000 });
        expect(rows).toHaveLength(keys.length);
      });
    });

    it('finishRun is conditional on (run, node, running) and stores result, error, stack and duration', async () => {
      const job = `fin-${uid()}`;
      const at = new Date(BASE);
      const run = await inserted(store, newRun(job, at, { nodeId: 'node-a' }));
      // Wrong node: false, nothing written.
      expect(await store.finishRun(run.id, 'node-b', { status: 'succeeded', result: { hijacked: true } })).toBe(false);
      expect(await store.periodRuns(job, at)).toEqual([run]);
      // Unknown run: false.
      expect(await store.finishRun('987654321', 'node-a', { status: 'succeeded' })).toBe(false);

      await waitFor('the store clock to move on', async () => (await store.now()) >= run.startedAt.getTime() + 60);
      const result = { rows: 3, nested: { list: [1, 'two', null, true], unicode: 'Zürich — 東京' }, big: 2 ** 40 };
      expect(await store.finishRun(run.id, 'node-a', { status: 'failed', result, error: 'it broke', errorStack: 'Error: it broke\n    at job (x.ts:1:1)' })).toBe(true);
      const [done] = await store.periodRuns(job, at);
      expect(done).toMatchObject({ status: 'failed', result, error: 'it broke', errorStack: 'Error: it broke\n    at job (x.ts:1:1)', nodeId: 'node-a' });
      expect(done!.finishedAt).not.toBeNull();
      expect(done!.durationMs).not.toBeNull();
      expect(done!.durationMs!).toBeGreaterThanOrEqual(60);
      expect(Math.abs(done!.durationMs! - (done!.finishedAt!.getTime() - done!.startedAt.getTime()))).toBeLessThanOrEqual(2);

      // Already finished: false, the first outcome stays.
      expect(await store.finishRun(run.id, 'node-a', { status: 'succeeded', result: 'second' })).toBe(false);
      expect(await store.periodRuns(job, at)).toEqual([done]);
    });

    it('finishRun with other outcomes: a scalar result, no result, and a reason', async () => {
      const job = `fin2-${uid()}`;
      const a = await inserted(store, newRun(job, new Date(BASE)));
      const b = await inserted(store, newRun(job, new Date(BASE + MINUTE)));
      const c = await inserted(store, newRun(job, new Date(BASE + 2 * MINUTE)));
      expect(await store.finishRun(a.id, 'node-a', { status: 'succeeded', result: 'just a string' })).toBe(true);
      expect(await store.finishRun(b.id, 'node-a', { status: 'succeeded' })).toBe(true);
      expect(await store.finishRun(c.id, 'node-a', { status: 'abandoned', reason: 'lease expired' })).toBe(true);
      const byAt = new Map((await store.history({ job })).map((r) => [r.scheduledAt.getTime(), r]));
      expect(byAt.get(BASE)).toMatchObject({ status: 'succeeded', result: 'just a string', error: null });
      expect(byAt.get(BASE + MINUTE)).toMatchObject({ status: 'succeeded', result: null, error: null, errorStack: null });
      expect(byAt.get(BASE + 2 * MINUTE)).toMatchObject({ status: 'abandoned', reason: 'lease expired' });
    });

    it('finishRun records any outcome a job can produce: huge or odd error texts, unserialisable results', async () => {
      const job = `fin3-${uid()}`;
      const cases = [
        { name: 'a 100 KB message and stack', outcome: { status: 'failed' as const, error: `boom ${'e'.repeat(100_000)}`, errorStack: `Error: boom\n${'    at f (x.ts:1:1)\n'.repeat(5_000)}` } },
        { name: 'multi-byte text over the limit', outcome: { status: 'failed' as const, error: '東京💥'.repeat(30_000) } },
        { name: 'a NUL character', outcome: { status: 'failed' as const, error: 'bad\u0000byte', errorStack: 'Error: bad\u0000byte' } },
        { name: 'unicode', outcome: { status: 'failed' as const, error: 'Zürich 💥 東京' } },
        { name: 'a BigInt result', outcome: { status: 'succeeded' as const, result: { n: 10n } } },
        { name: 'a NUL in the result', outcome: { status: 'succeeded' as const, result: { s: 'a\u0000b' } } },
      ];
      for (const [i, c] of cases.entries()) {
        const at = new Date(BASE + i * MINUTE);
        const run = await inserted(store, newRun(job, at));
        await expect(store.finishRun(run.id, 'node-a', c.outcome), c.name).resolves.toBe(true);
        const [row] = await store.periodRuns(job, at);
        expect(row!.status, c.name).toBe(c.outcome.status);
        const error = (c.outcome as { error?: string }).error;
        if (error !== undefined) {
          expect(row!.error, c.name).not.toBeNull();
          // Kept whole when it fits; otherwise its beginning is kept.
          expect(row!.error!.slice(0, 3), c.name).toBe(error.slice(0, 3));
          expect(row!.error!.length, c.name).toBeGreaterThan(Math.min(error.length, 10_000) - 1);
        }
      }
      const rows = await store.history({ job, limit: 10 });
      const byAt = new Map(rows.map((r) => [r.scheduledAt.getTime(), r]));
      expect(byAt.get(BASE + 3 * MINUTE)!.error).toBe('Zürich 💥 東京');
      // Not replaced by a stand-in object any more: no result, and a note saying why.
      expect(byAt.get(BASE + 4 * MINUTE)).toMatchObject({ result: null, resultNote: expect.stringMatching(/not JSON-serialisable.*BigInt/) });
      expect(byAt.get(BASE + 5 * MINUTE)!.result).toEqual({ s: 'a\u0000b' });
    });

    it('heartbeat refreshes a running attempt of this node, and returns false once it is not ours', async () => {
      const job = `hb-${uid()}`;
      const at = new Date(BASE);
      const run = await inserted(store, newRun(job, at));
      await waitFor('the store clock to move on', async () => (await store.now()) > run.heartbeatAt!.getTime() + 20);
      expect(await store.heartbeat(run.id, 'node-a')).toBe(true);
      const [beaten] = await store.periodRuns(job, at);
      expect(beaten!.heartbeatAt!.getTime()).toBeGreaterThan(run.heartbeatAt!.getTime());
      expect(beaten!.startedAt.getTime()).toBe(run.startedAt.getTime());
      expect(await store.heartbeat(run.id, 'node-b')).toBe(false);
      expect(await store.finishRun(run.id, 'node-a', { status: 'succeeded' })).toBe(true);
      expect(await store.heartbeat(run.id, 'node-a')).toBe(false);
      expect(await store.heartbeat('987654321', 'node-a')).toBe(false);
    });

    it('liveRuns: only running rows of the job whose heartbeat is younger than their lease (store clock)', async () => {
      const job = `live-${uid()}`;
      const short = await inserted(store, newRun(job, new Date(BASE), { leaseMs: 400 }));
      const long = await inserted(store, newRun(job, new Date(BASE + MINUTE), { leaseMs: 60_000 }));
      const finished = await inserted(store, newRun(job, new Date(BASE + 2 * MINUTE), { leaseMs: 60_000 }));
      await store.finishRun(finished.id, 'node-a', { status: 'succeeded' });
      await store.insertSkipped([skipped(job, new Date(BASE + 3 * MINUTE))]);
      await inserted(store, newRun(`${job}-other`, new Date(BASE), { leaseMs: 60_000 }));

      const first = await store.liveRuns(job);
      expect(first.map((r) => r.id)).toEqual([short.id, long.id]);
      // The short lease runs out by the store clock.
      await waitFor('the short lease to run out', async () => {
        const ids = (await store.liveRuns(job)).map((r) => r.id);
        return ids.length === 1 && ids[0] === long.id;
      }, 10_000, 50);
      expect((await store.now()) - short.heartbeatAt!.getTime()).toBeGreaterThanOrEqual(400);
      // A late heartbeat of a still-running row makes it live again (the takeover logic judges it).
      expect(await store.heartbeat(short.id, 'node-a')).toBe(true);
      expect((await store.liveRuns(job)).map((r) => r.id)).toEqual([short.id, long.id]);
      expect(await store.liveRuns(`nojob-${uid()}`)).toEqual([]);
    });

    it('staleRuns: running rows whose lease ran out by the store clock; takeOver is a compare-and-set', async () => {
      const job = `stale-${uid()}`;
      const short = await inserted(store, newRun(job, new Date(BASE), { leaseMs: 300, nodeId: 'node-dead' }));
      const long = await inserted(store, newRun(job, new Date(BASE + MINUTE), { leaseMs: 60_000 }));
      const done = await inserted(store, newRun(job, new Date(BASE + 2 * MINUTE), { leaseMs: 300 }));
      await store.finishRun(done.id, 'node-a', { status: 'succeeded' });
      const mine = async () => (await store.staleRuns()).filter((r) => r.job === job).map((r) => r.id);
      // Live: not stale, and cannot be abandoned.
      expect(await mine()).toEqual([]);
      expect(await store.takeOver(short, 'node-x', 'lease expired', false)).toBeNull();
      await waitFor('the short lease to run out', async () => (await mine()).length === 1, 10_000, 50);
      expect(await mine()).toEqual([short.id]);
      expect(await store.takeOver(long, 'node-x', 'lease expired', false)).toBeNull();
      expect(await store.takeOver(done, 'node-x', 'lease expired', false)).toBeNull();

      // Several nodes race to take it over: exactly one wins (SQLite: one process each, see the race case below).
      const wins = db.config.kind === 'sqlite'
        ? await takeOverInProcesses(8, db.config, short, 'lease expired: node node-dead stopped heartbeating', false)
        : await withStores(8, db.config, (racers) => Promise.all(racers.map((s) => s.takeOver(short, 'node-x', 'lease expired: node node-dead stopped heartbeating', false))));
      expect(wins.filter((w) => w !== null)).toHaveLength(1);
      const [row] = await store.periodRuns(job, new Date(BASE));
      expect(row).toMatchObject({ status: 'abandoned', reason: 'lease expired: node node-dead stopped heartbeating', nodeId: 'node-dead' });
      expect(row!.finishedAt).not.toBeNull();
      expect(await mine()).toEqual([]);
      // The dead node coming back finds the attempt is no longer its own.
      expect(await store.heartbeat(short.id, 'node-dead')).toBe(false);
      expect(await store.finishRun(short.id, 'node-dead', { status: 'succeeded' })).toBe(false);
      expect((await store.periodRuns(job, new Date(BASE)))[0]!.status).toBe('abandoned');
      // The next attempt of that period can be claimed.
      expect((await store.insertRun(newRun(job, new Date(BASE), { attempt: 2 }))).outcome).toBe('inserted');
    });

    it('takeOver: a heartbeat in time keeps the attempt; once it lapses again the takeover owes attempt 2', async () => {
      const job = `stale2-${uid()}`;
      // A lease long enough that the takeover right after the heartbeat lands within it on a loaded machine.
      const run = await inserted(store, newRun(job, new Date(BASE), { leaseMs: 1000 }));
      await waitFor('the lease to run out', async () => (await store.staleRuns()).some((r) => r.id === run.id), 10_000, 50);
      // The owner heartbeats before anyone takes it over: live again, the CAS fails.
      expect(await store.heartbeat(run.id, 'node-a')).toBe(true);
      expect(await store.takeOver(run, 'node-x', 'x', true)).toBeNull();
      await waitFor('the lease to run out again', async () => (await store.staleRuns()).some((r) => r.id === run.id), 10_000, 50);
      const ended = await store.takeOver(run, 'node-x', 'lease expired', true);
      expect(ended).toMatchObject({ written: true, status: 'abandoned' });
      expect(ended!.next).toMatchObject({ attempt: 2, status: 'pending', nodeId: 'node-x' });
      const rows = await store.periodRuns(job, new Date(BASE));
      expect(rows.map((r) => [r.attempt, r.status, r.reason])).toEqual([[1, 'abandoned', 'lease expired'], [2, 'pending', null]]);
    });

    it('cancel: a request lands only on a running row; the holder reads it among its attempts; a stale cancelled row is taken over as cancelled, owing nothing', async () => {
      const job = `cancel-${uid()}`;
      const running = await inserted(store, newRun(job, new Date(BASE), { leaseMs: 600 }));
      const other = await inserted(store, newRun(job, new Date(BASE + MINUTE), { leaseMs: 60_000 }));
      const done = await inserted(store, newRun(job, new Date(BASE + 2 * MINUTE)));
      await store.finishRun(done.id, 'node-a', { status: 'succeeded' });
      expect(await store.cancelRequests([running.id, other.id, done.id])).toEqual(new Map());
      expect(await store.requestCancel(running.id, { actor: 'alice@web-1', reason: 'wrong input' })).toBe(true);
      expect(await store.requestCancel(done.id, { actor: 'alice@web-1', reason: null })).toBe(false);
      expect(await store.requestCancel('999999999', { actor: 'alice@web-1', reason: null })).toBe(false);
      expect(await store.cancelRequests([running.id, other.id, done.id, 'x'])).toEqual(new Map([[running.id, { actor: 'alice@web-1', reason: 'wrong input' }]]));
      // Its node went silent before reading it: the takeover ends it cancelled, with no attempt 2.
      await waitFor('the lease to run out', async () => (await store.staleRuns()).some((r) => r.id === running.id), 10_000, 50);
      const ended = await store.takeOver(running, 'node-x', 'lease expired', true);
      expect(ended).toMatchObject({ written: true, status: 'cancelled', next: null });
      const rows = await store.periodRuns(job, new Date(BASE));
      expect(rows.map((r) => [r.attempt, r.status, r.reason])).toEqual([[1, 'cancelled', 'cancelled']]);
      expect(rows[0]!.error).toContain('cancelled by alice@web-1: wrong input');
      expect(await store.cancelRequests([running.id])).toEqual(new Map());
      // The holder's own outcome of a cancelled attempt owes nothing, whatever its retries.
      expect(await store.requestCancel(other.id, { actor: 'bob@web-2', reason: null })).toBe(true);
      const end = await store.endAttempt(other, 'node-a', { status: 'cancelled', error: 'cancelled by bob@web-2', reason: 'cancelled' }, { retries: 3, retryDelayMs: 1000 });
      expect(end).toMatchObject({ written: true, status: 'cancelled', next: null });
    });

    it('insertSkipped writes skipped rows with their reason, and leaves existing rows untouched', async () => {
      const job = `skip-${uid()}`;
      const running = await inserted(store, newRun(job, new Date(BASE + MINUTE), { nodeId: 'node-a' }));
      const batch = [0, 1, 2, 3].map((i) => skipped(job, new Date(BASE + i * MINUTE), { reason: i === 3 ? 'overlap' : 'coalesced' }));
      const before = await store.now();
      // Only the rows inserted are counted: the running one stays and is not counted.
      await expect(store.insertSkipped(batch)).resolves.toBe(3);
      const rows = await store.history({ job, limit: 100 });
      const byAt = new Map(rows.map((r) => [r.scheduledAt.getTime(), r]));
      expect(rows).toHaveLength(4);
      expect(byAt.get(BASE + MINUTE)).toEqual(running);
      for (const i of [0, 2, 3]) {
        const r = byAt.get(BASE + i * MINUTE)!;
        expect(r).toMatchObject({
          job, periodKey: `${job}@${new Date(BASE + i * MINUTE).toISOString()}`, attempt: 1, status: 'skipped',
          reason: i === 3 ? 'overlap' : 'coalesced', trigger: 'catch-up', nodeId: 'node-s', durationMs: 0,
        });
        expect(r.startedAt.getTime()).toBeGreaterThanOrEqual(before - 2);
        expect(r.finishedAt).not.toBeNull();
      }
      // The same batch again, a batch that only conflicts, and an empty one: no error, nothing changes.
      await expect(store.insertSkipped(batch.map((b) => ({ ...b, nodeId: 'node-t', reason: 'paused' as const })))).resolves.toBe(0);
      await expect(store.insertSkipped([skipped(job, new Date(BASE + MINUTE), { nodeId: 'node-u' })])).resolves.toBe(0);
      await expect(store.insertSkipped([])).resolves.toBe(0);
      expect(await store.history({ job, limit: 100 })).toEqual(rows);
      // A skipped period blocks a first attempt at the row (that is what the marker is for).
      expect((await store.insertRun(newRun(job, new Date(BASE)))).outcome).toBe('duplicate');
      // The running attempt was not disturbed: it can still finish.
      expect(await store.finishRun(running.id, 'node-a', { status: 'succeeded' })).toBe(true);
    });

    it('insertSkipped: a large batch (chunked) with some rows existing', async () => {
      const job = `skipbig-${uid()}`;
      for (const i of [0, 150, 201, 449]) await inserted(store, newRun(job, new Date(BASE + i * MINUTE)));
      const batch = Array.from({ length: 450 }, (_, i) => skipped(job, new Date(BASE + i * MINUTE)));
      await expect(store.insertSkipped(batch)).resolves.toBe(446);
      const rows = await store.history({ job, limit: 1000 });
      expect(rows).toHaveLength(450);
      expect(rows.filter((r) => r.status === 'running')).toHaveLength(4);
      expect(rows.filter((r) => r.status === 'skipped')).toHaveLength(446);
    });

    it('insertSkippedEach: per input, whether this call inserted its row; several jobs and reasons at once, chunked, existing rows untouched', async () => {
      const [a, b] = [`skeach-a-${uid()}`, `skeach-b-${uid()}`];
      const running = await inserted(store, newRun(a, new Date(BASE + 3 * MINUTE), { nodeId: 'node-a' }));
      const batch = [
        ...Array.from({ length: 600 }, (_, i) => skipped(a, new Date(BASE + i * MINUTE), { reason: 'coalesced' })),
        skipped(b, new Date(BASE), { reason: 'missed', shard: 1 }),
        skipped(b, new Date(BASE), { reason: 'missed', shard: 0 }),
        // The same key twice in one call: the first one is inserted.
        skipped(b, new Date(BASE), { reason: 'paused', shard: 0 }),
      ];
      const result = await store.insertSkippedEach(batch);
      expect(result).toHaveLength(batch.length);
      expect(result.filter((x) => !x)).toHaveLength(2);
      expect(result[3]).toBe(false);
      expect(result.slice(600)).toEqual([true, true, false]);
      const rowsA = await store.history({ job: a, limit: 1000 });
      expect(rowsA).toHaveLength(600);
      expect(rowsA.find((r) => r.id === running.id)).toEqual(running);
      expect(rowsA.filter((r) => r.status === 'skipped' && r.reason === 'coalesced' && r.trigger === 'catch-up' && r.nodeId === 'node-s')).toHaveLength(599);
      expect((await store.history({ job: b })).map((r) => [r.shard, r.reason]).sort()).toEqual([[0, 'missed'], [1, 'missed']]);
      // Again: nothing inserted, nothing changed.
      expect(await store.insertSkippedEach(batch.slice(598))).toEqual([false, false, false, false, false]);
      expect(await store.insertSkippedEach([])).toEqual([]);
      expect(await store.finishRun(running.id, 'node-a', { status: 'succeeded' })).toBe(true);
    });

    it('insertSkipped racing insertRun on the same periods: each period ends with exactly one row', async () => {
      await withStores(2, db.config, async ([s1, s2]) => {
        const job = `skiprace-${uid()}`;
        const periods = Array.from({ length: 10 }, (_, i) => new Date(BASE + i * MINUTE));
        const [marks, ...runs] = await Promise.all([
          s1!.insertSkipped(periods.map((p) => skipped(job, p))),
          ...periods.map((p) => s2!.insertRun(newRun(job, p))),
        ]);
        const rows = await store.history({ job, limit: 100 });
        expect(rows).toHaveLength(10);
        const insertedCount = (runs as Awaited<ReturnType<RunStore['insertRun']>>[]).filter((r) => r.outcome === 'inserted').length;
        // Every period was inserted exactly once, by one side or the other, and counted by that side.
        expect(marks + insertedCount).toBe(10);
        expect(rows.filter((r) => r.status === 'running')).toHaveLength(insertedCount);
      });
    });

    it('periodsWithRows: the instants of the job that have any row, bounds inclusive', async () => {
      const job = `pwr-${uid()}`;
      await inserted(store, newRun(job, new Date(BASE)));
      await inserted(store, newRun(job, new Date(BASE), { attempt: 2 }));
      await store.insertSkipped([skipped(job, new Date(BASE + 2 * MINUTE))]);
      const r = await inserted(store, newRun(job, new Date(BASE + 4 * MINUTE)));
      await store.finishRun(r.id, 'node-a', { status: 'failed' });
      await inserted(store, newRun(`${job}-other`, new Date(BASE + MINUTE)));
      const all = await store.periodsWithRows(job, BASE, BASE + 4 * MINUTE);
      expect(all).toBeInstanceOf(Set);
      expect([...all].sort()).toEqual([BASE, BASE + 2 * MINUTE, BASE + 4 * MINUTE]);
      expect([...(await store.periodsWithRows(job, BASE + 1, BASE + 4 * MINUTE - 1))]).toEqual([BASE + 2 * MINUTE]);
      expect((await store.periodsWithRows(job, BASE + 5 * MINUTE, BASE + 10 * MINUTE)).size).toBe(0);
      expect((await store.periodsWithRows(`nojob-${uid()}`, 0, Number.MAX_SAFE_INTEGER)).size).toBe(0);
    });

    it('lastRuns: the latest run (by start) of each job named; jobs without runs are absent', async () => {
      const a = `last-a-${uid()}`;
      const b = `last-b-${uid()}`;
      const none = `last-none-${uid()}`;
      await inserted(store, newRun(a, new Date(BASE + 5 * MINUTE)));
      const aLatest = await inserted(store, newRun(a, new Date(BASE)));
      const bOnly = await inserted(store, newRun(b, new Date(BASE)));
      const last = await store.lastRuns([a, b, none]);
      expect(last).toBeInstanceOf(Map);
      expect([...last.keys()].sort()).toEqual([a, b].sort());
      expect(last.get(a)!.id).toBe(aLatest.id);
      expect(last.get(b)).toEqual(bOnly);
      expect((await store.lastRuns([])).size).toBe(0);
    });

    it('history: job, status and limit filters, newest first', async () => {
      const job = `hist-${uid()}`;
      const other = `hist-o-${uid()}`;
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) {
        const r = await inserted(store, newRun(job, new Date(BASE + i * MINUTE)));
        ids.push(r.id);
        if (i % 2 === 0) await store.finishRun(r.id, 'node-a', { status: i === 0 ? 'failed' : 'succeeded' });
      }
      await inserted(store, newRun(other, new Date(BASE)));

      const all = await store.history({ job });
      expect(all.map((r) => r.id)).toEqual([...ids].reverse());
      for (let i = 1; i < all.length; i++) expect(all[i - 1]!.startedAt.getTime()).toBeGreaterThanOrEqual(all[i]!.startedAt.getTime());
      expect((await store.history({ job, limit: 2 })).map((r) => r.id)).toEqual([ids[5], ids[4]]);
      expect((await store.history({ job, status: 'succeeded' })).map((r) => r.id)).toEqual([ids[4], ids[2]]);
      expect((await store.history({ job, status: 'failed' })).map((r) => r.id)).toEqual([ids[0]]);
      expect((await store.history({ job, status: 'running', limit: 1 })).map((r) => r.id)).toEqual([ids[5]]);
      expect(await store.history({ job, status: 'timed_out' })).toEqual([]);
      // Without a job: every job, newest first, limited.
      const newest = await store.history({ limit: 3 });
      expect(newest).toHaveLength(3);
      expect(newest[0]!.job).toBe(other);
      expect(newest.every((r, i) => i === 0 || newest[i - 1]!.startedAt.getTime() >= r.startedAt.getTime())).toBe(true);
      expect((await store.history({ status: 'failed', limit: 500 })).every((r) => r.status === 'failed')).toBe(true);
    });

    it('jobSummaries: ONE statement for every job of the jobs table: newest row, newest ended row, last success, failures with nothing owed and missed periods in the window, running', async () => {
      const database = await Database.open(db.config);
      try {
        const runs = new KnexRunStore(database);
        const jobs = new KnexJobStore(database);
        const [a, b, none, c] = [`sum-a-${uid()}`, `sum-b-${uid()}`, `sum-none-${uid()}`, `sum-c-${uid()}`];
        await jobs.declare([a, b, none, c].map((name) => ({ name, reconciledThrough: null })));
        const ok = await inserted(runs, newRun(a, new Date(BASE)));
        await runs.finishRun(ok.id, 'node-a', { status: 'succeeded' });
        // A failure with a retry owed is not (yet) a failed period; one with none left is.
        const retried = await inserted(runs, newRun(a, new Date(BASE + MINUTE)));
        expect((await runs.endAttempt(retried, 'node-a', { status: 'failed', error: 'boom' }, { retries: 1, retryDelayMs: 3_600_000 })).next).not.toBeNull();
        const failed = await inserted(runs, newRun(a, new Date(BASE + 2 * MINUTE)));
        await runs.finishRun(failed.id, 'node-a', { status: 'timed_out', error: 'took too long\nat stack' });
        await runs.insertSkipped([skipped(a, new Date(BASE + 3 * MINUTE), { reason: 'missed' }), skipped(a, new Date(BASE + 5 * MINUTE), { reason: 'overlap' })]);
        const live = await inserted(runs, newRun(a, new Date(BASE + 4 * MINUTE)));
        const bFail = await inserted(runs, newRun(b, new Date(BASE)));
        await runs.finishRun(bFail.id, 'node-a', { status: 'failed', error: 'nope' });
        // A job failing every period, its next attempt running: the newest row runs, the newest ended failed.
        const cFail = await inserted(runs, newRun(c, new Date(BASE)));
        await runs.finishRun(cFail.id, 'node-a', { status: 'failed', error: 'again' });
        const cLive = await inserted(runs, newRun(c, new Date(BASE + MINUTE)));
        // Rows of a job that no node declared are not summarised (the jobs table is the list).
        const undeclared = `sum-undeclared-${uid()}`;
        await inserted(runs, newRun(undeclared, new Date(BASE)));

        const statements: string[] = [];
        database.knex.on('query', (q: { sql: string }) => statements.push(q.sql));
        const now = await runs.now();
        statements.length = 0;
        const sums = await runs.jobSummaries(now - 3_600_000);
        expect(statements).toHaveLength(1);
        expect(sums.has(undeclared)).toBe(false);
        const sa = sums.get(a)!;
        expect(sa.last).toMatchObject({ scheduledAt: BASE + 5 * MINUTE, status: 'skipped', attempt: 1 });
        expect(sa.lastEnded).toMatchObject({ scheduledAt: BASE + 5 * MINUTE, status: 'skipped', attempt: 1 });
        expect(sums.get(c)).toMatchObject({ last: { scheduledAt: BASE + MINUTE, status: 'running' }, lastEnded: { scheduledAt: BASE, status: 'failed', attempt: 1, error: 'again' }, running: 1 });
        expect(sa.lastSuccessAt).toBeGreaterThan(now - 60_000);
        expect(sa.lastSuccessAt).toBeLessThanOrEqual(now + 1000);
        expect({ failures: sa.failures, missed: sa.missed, running: sa.running }).toEqual({ failures: 1, missed: 1, running: 1 });
        expect(sums.get(b)).toMatchObject({ job: b, last: { scheduledAt: BASE, status: 'failed', attempt: 1, error: 'nope' }, lastEnded: { scheduledAt: BASE, status: 'failed', attempt: 1, error: 'nope' }, lastSuccessAt: null, failures: 1, missed: 0, running: 0 });
        expect(sums.get(none)).toEqual({ job: none, last: null, lastEnded: null, lastSuccessAt: null, failures: 0, missed: 0, running: 0 });
        // A window that starts after every row: no failures or missed, the rest as before.
        const later = await runs.jobSummaries(now + 3_600_000);
        expect(later.get(a)).toMatchObject({ failures: 0, missed: 0, running: 1, lastSuccessAt: sa.lastSuccessAt });
        expect(later.get(b)).toMatchObject({ failures: 0, last: { status: 'failed' } });
        // Nothing left running for the cases after this one (a lapsed lease is a stale run to them).
        await runs.finishRun(live.id, 'node-a', { status: 'succeeded' });
        await runs.finishRun(cLive.id, 'node-a', { status: 'succeeded' });
      } finally {
        await database.close();
      }
    });

    it("now() is the store's clock: epoch ms, close to this machine's, not going backwards", async () => {
      const local = Date.now();
      const t1 = await store.now();
      expect(Number.isInteger(t1)).toBe(true);
      expect(Math.abs(t1 - local)).toBeLessThan(5_000);
      await new Promise((r) => setTimeout(r, 30));
      const t2 = await store.now();
      expect(t2).toBeGreaterThanOrEqual(t1 + 20);
    });

    it('errors other than unique violations are real errors', async () => {
      const job = `err-${uid()}`;
      // A NOT NULL column left empty is a broken write, not a lost race.
      await expect(store.insertRun(newRun(job, new Date(BASE), { trigger: null as unknown as 'schedule' }))).rejects.toThrow();
      await expect(store.insertRun(newRun(job, new Date(BASE), { nodeId: null as unknown as string }))).rejects.toThrow();
      expect(await store.periodRuns(job, new Date(BASE))).toEqual([]);
      // The same for skipped markers: only the conflict on the period is ignored.
      await expect(store.insertSkipped([skipped(job, new Date(BASE + MINUTE), { nodeId: null as unknown as string })])).rejects.toThrow();
      expect(await store.periodRuns(job, new Date(BASE + MINUTE))).toEqual([]);
      // A value the column cannot hold is refused or kept whole, never silently cut (a marker for another job).
      const long = `${job}-${'x'.repeat(120)}`;
      const wrote = await store.insertSkipped([skipped(long, new Date(BASE))]).then(() => true, () => false);
      const cut = await store.history({ job: long.slice(0, 100) });
      expect(cut).toEqual([]);
      if (wrote) expect((await store.history({ job: long })).map((r) => r.job)).toEqual([long]);
      // And the store still works afterwards.
      expect((await store.insertRun(newRun(job, new Date(BASE)))).outcome).toBe('inserted');
    });

    // ---------------------------------------------------------------------------------------------
    // Owed attempts: endAttempt, takeOver, the pending rows, and the reads of the reconciling sweep.

    /** Waits until the run's lease has run out by the store clock (it shows in staleRuns). */
    async function untilStale(s: RunStore, id: string): Promise<void> {
      await waitFor('the lease to run out', async () => (await s.staleRuns(10_000)).some((r) => r.id === id), 10_000, 50);
    }

    /** A running attempt n of a fresh period, as a node would hold it (inserted directly, as a claim of attempt n). */
    async function running(job: string, at: Date, over: Partial<NewRun> = {}) {
      return inserted(store, newRun(job, at, over));
    }

    const POLICY = { retries: 2, retryDelayMs: 400 };

    it('endAttempt: succeeded writes the one row and owes nothing (also with a policy)', async () => {
      const job = `end-ok-${uid()}`;
      const at = new Date(BASE);
      const run = await running(job, at);
      const res = await store.endAttempt(run, 'node-a', { status: 'succeeded', result: { n: 1 } }, POLICY);
      expect(res).toEqual({ written: true, status: 'succeeded', next: null });
      const rows = await store.periodRuns(job, at);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ status: 'succeeded', result: { n: 1 }, runAt: null });
      expect(rows[0]!.finishedAt).not.toBeNull();
    });

    it("endAttempt with the body's timing: startedAt and finishedAt are the body's own instants on the store's clock, durationMs its length; claimedAt stays the claim", async () => {
      for (const status of ['succeeded', 'failed'] as const) {
        const job = `end-timing-${status}-${uid()}`;
        const at = new Date(BASE);
        const run = await running(job, at);
        // (One statement's clock on every store now; PostgreSQL's clock_timestamp(), used before, moved within a statement.)
        expect(Math.abs(run.claimedAt!.getTime() - run.startedAt.getTime())).toBeLessThanOrEqual(1);
        const before = await store.now();
        // The body started 900 ms and ended 200 ms before this write was sent (the node's monotonic clock).
        const res = await store.endAttempt(run, 'node-a', { status, error: status === 'failed' ? 'x' : null, bodyMsAgo: { started: 900, ended: 200 } }, POLICY);
        const after = await store.now();
        expect(res.written).toBe(true);
        const row = (await store.periodRuns(job, at))[0]!;
        expect(row.durationMs).toBe(700);
        expect(row.startedAt.getTime()).toBeGreaterThanOrEqual(before - 900 - 1);
        expect(row.startedAt.getTime()).toBeLessThanOrEqual(after - 900 + 1);
        expect(row.finishedAt!.getTime() - row.startedAt.getTime()).toBe(700);
        expect(row.claimedAt?.getTime()).toBe(run.claimedAt?.getTime());
      }
    });

    it('endAttempt: failed with retries left writes failed and attempt n + 1 pending at store now + retryDelay, same job, period, trigger and lease', async () => {
      const job = `end-retry-${uid()}`;
      const at = new Date(BASE + MINUTE);
      const run = await running(job, at, { trigger: 'catch-up', leaseMs: 23_456, nodeId: 'node-a' });
      const before = await store.now();
      const res = await store.endAttempt(run, 'node-a', { status: 'failed', error: 'boom', errorStack: 'Error: boom' }, { retries: 3, retryDelayMs: 5_000 });
      const after = await store.now();
      expect(res.written).toBe(true);
      expect(res.status).toBe('failed');
      const next = res.next!;
      expect(next).toMatchObject({
        job, periodKey: run.periodKey, shard: 0, attempt: 2, trigger: 'catch-up', status: 'pending', nodeId: 'node-a', leaseMs: 23_456,
        finishedAt: null, heartbeatAt: null, error: null, reason: null,
      });
      expect(next.scheduledAt.getTime()).toBe(at.getTime());
      expect(next.id).not.toBe(run.id);
      // Due retryDelay after the store's now (the same statement stamps both).
      expect(next.startedAt.getTime()).toBeGreaterThanOrEqual(before - 2);
      expect(next.startedAt.getTime()).toBeLessThanOrEqual(after + 2);
      expect(Math.abs(next.runAt!.getTime() - next.startedAt.getTime() - 5_000)).toBeLessThanOrEqual(5);
      const rows = await store.periodRuns(job, at);
      expect(rows.map((r) => [r.attempt, r.status])).toEqual([[1, 'failed'], [2, 'pending']]);
      expect(rows[0]).toMatchObject({ error: 'boom', errorStack: 'Error: boom', nodeId: 'node-a' });
      expect(rows[1]).toEqual(next);
      // Not due yet: no node can claim it before run_at.
      expect((await store.duePending(10_000)).some((r) => r.id === next.id)).toBe(false);
      expect(await store.claimPending(next.id, 'node-b', 30_000)).toBeNull();
      expect((await store.periodRuns(job, at))[1]!.status).toBe('pending');
    });

    it('endAttempt: the end and the owed attempt are one transaction (a failed insert of n + 1 leaves the attempt running)', async () => {
      const job = `end-atomic-${uid()}`;
      const at = new Date(BASE);
      const run = await running(job, at);
      // The UPDATE of the row (by id) succeeds; the INSERT of attempt 2 breaks (trigger NOT NULL).
      const broken = { ...run, trigger: null as unknown as RunRecord['trigger'] };
      await expect(store.endAttempt(broken, 'node-a', { status: 'failed', error: 'boom' }, POLICY)).rejects.toThrow();
      expect(await store.periodRuns(job, at)).toEqual([run]);
      // ...and it can still end properly afterwards.
      expect((await store.endAttempt(run, 'node-a', { status: 'failed', error: 'boom' }, POLICY)).next?.attempt).toBe(2);
    });

    it('endAttempt: timed_out counts as a failure; backoff doubles (attempt 3 due 2 x retryDelay after attempt 2 ended); retries exhausted owes nothing', async () => {
      const job = `end-backoff-${uid()}`;
      const at = new Date(BASE + 2 * MINUTE);
      const a1 = await running(job, at);
      const e1 = await store.endAttempt(a1, 'node-a', { status: 'failed', error: 'one' }, POLICY);
      expect(Math.abs(e1.next!.runAt!.getTime() - e1.next!.startedAt.getTime() - POLICY.retryDelayMs)).toBeLessThanOrEqual(5);
      await waitFor('attempt 2 to be due', async () => (await store.now()) >= e1.next!.runAt!.getTime(), 10_000, 20);
      const a2 = await store.claimPending(e1.next!.id, 'node-b', 30_000);
      expect(a2).not.toBeNull();
      const e2 = await store.endAttempt(a2!, 'node-b', { status: 'timed_out', error: 'too slow' }, POLICY);
      expect(e2).toMatchObject({ written: true, status: 'timed_out' });
      expect(e2.next).toMatchObject({ attempt: 3, status: 'pending', nodeId: 'node-b' });
      expect(Math.abs(e2.next!.runAt!.getTime() - e2.next!.startedAt.getTime() - 2 * POLICY.retryDelayMs)).toBeLessThanOrEqual(5);
      await waitFor('attempt 3 to be due', async () => (await store.now()) >= e2.next!.runAt!.getTime(), 10_000, 20);
      const a3 = await store.claimPending(e2.next!.id, 'node-c', 30_000);
      // Two retries used: the third failure owes nothing.
      const e3 = await store.endAttempt(a3!, 'node-c', { status: 'failed', error: 'three' }, POLICY);
      expect(e3).toEqual({ written: true, status: 'failed', next: null });
      expect((await store.periodRuns(job, at)).map((r) => [r.attempt, r.status])).toEqual([[1, 'failed'], [2, 'timed_out'], [3, 'failed']]);
    });

    it('endAttempt: policy null (the job is unknown here) and retries 0 owe no retry', async () => {
      const job = `end-nopolicy-${uid()}`;
      const a = await running(job, new Date(BASE));
      expect(await store.endAttempt(a, 'node-a', { status: 'failed', error: 'x' }, null)).toEqual({ written: true, status: 'failed', next: null });
      const b = await running(job, new Date(BASE + MINUTE));
      expect(await store.endAttempt(b, 'node-a', { status: 'timed_out' }, { retries: 0, retryDelayMs: 1_000 })).toEqual({ written: true, status: 'timed_out', next: null });
      expect((await store.history({ job })).map((r) => r.status).sort()).toEqual(['failed', 'timed_out']);
    });

    it('endAttempt: interrupted or abandoned owes attempt n + 1 at once; the third attempt ended without an outcome is written failed with a reason and owes nothing', async () => {
      const job = `end-unfinished-${uid()}`;
      const at = new Date(BASE);
      const a1 = await running(job, at, { leaseMs: 7_000 });
      const e1 = await store.endAttempt(a1, 'node-a', { status: 'interrupted', reason: 'shutdown' }, POLICY);
      expect(e1).toMatchObject({ written: true, status: 'interrupted' });
      expect(e1.next).toMatchObject({ attempt: 2, status: 'pending', leaseMs: 7_000 });
      // Due at once: the store clock is at or past it already.
      expect(Math.abs(e1.next!.runAt!.getTime() - e1.next!.startedAt.getTime())).toBeLessThanOrEqual(5);
      expect((await store.duePending(10_000)).some((r) => r.id === e1.next!.id)).toBe(true);
      const a2 = (await store.claimPending(e1.next!.id, 'node-b', 7_000))!;
      // policy null: an attempt without an outcome is owed all the same (no definition needed to resume it).
      const e2 = await store.endAttempt(a2, 'node-b', { status: 'abandoned', reason: 'lease lost' }, null);
      expect(e2).toMatchObject({ written: true, status: 'abandoned', next: { attempt: 3, status: 'pending' } });
      const a3 = (await store.claimPending(e2.next!.id, 'node-c', 7_000))!;
      const e3 = await store.endAttempt(a3, 'node-c', { status: 'interrupted', reason: 'shutdown' }, POLICY);
      expect(e3).toEqual({ written: true, status: 'failed', next: null });
      const rows = await store.periodRuns(job, at);
      expect(rows.map((r) => [r.attempt, r.status])).toEqual([[1, 'interrupted'], [2, 'abandoned'], [3, 'failed']]);
      expect(rows[2]!.reason).toBe('shutdown');
      expect(rows[2]!.error).toMatch(/3 attempts ended without an outcome/);
      // Without a reason of its own, the cap's reason is the row's reason.
      const b = `${job}-b`;
      let r = await running(b, at);
      for (let i = 0; i < 2; i++) {
        const e = await store.endAttempt(r, 'node-a', { status: 'abandoned' }, POLICY);
        r = (await store.claimPending(e.next!.id, 'node-a', 30_000))!;
      }
      expect(await store.endAttempt(r, 'node-a', { status: 'abandoned' }, POLICY)).toEqual({ written: true, status: 'failed', next: null });
      const [, , last] = await store.periodRuns(b, at);
      expect(last!.reason).toMatch(/3 attempts ended without an outcome/);
      expect(last!.error).toMatch(/3 attempts ended without an outcome/);
    });

    it('endAttempt: not this node\'s attempt (another node, already finished, unknown) writes nothing and inserts nothing', async () => {
      const job = `end-notours-${uid()}`;
      const at = new Date(BASE);
      const run = await running(job, at, { nodeId: 'node-a' });
      for (const status of ['failed', 'interrupted', 'succeeded'] as const) {
        const res = await store.endAttempt(run, 'node-b', { status, error: 'hijack' }, POLICY);
        expect(res.written, status).toBe(false);
        expect(res.next, status).toBeNull();
      }
      expect(await store.periodRuns(job, at)).toEqual([run]);
      // Finished: ending it again with another outcome is not ours either, and owes nothing more.
      expect((await store.endAttempt(run, 'node-a', { status: 'succeeded' }, POLICY)).written).toBe(true);
      const done = await store.periodRuns(job, at);
      for (const status of ['failed', 'abandoned', 'interrupted'] as const) {
        expect(await store.endAttempt(run, 'node-a', { status }, POLICY), status).toMatchObject({ written: false, next: null });
      }
      expect(await store.periodRuns(job, at)).toEqual(done);
      // A pending attempt is not running: it cannot be ended either.
      const other = await running(`${job}-p`, at);
      const owed = (await store.endAttempt(other, 'node-a', { status: 'interrupted' }, POLICY)).next!;
      expect(await store.endAttempt(owed, 'node-a', { status: 'failed' }, POLICY)).toMatchObject({ written: false, next: null });
      expect((await store.periodRuns(`${job}-p`, at)).map((r) => r.status)).toEqual(['interrupted', 'pending']);
    });

    it('endAttempt again after its write committed (a retry whose answer was lost): recognised as written, with the same status and owed attempt; nothing is written twice; a takeover\'s end is not recognised', async () => {
      const job = `end-again-${uid()}`;
      const at = new Date(BASE);
      // Succeeded: one conditional UPDATE, then the retry finds its own outcome.
      const ok = await running(job, at);
      expect(await store.endAttempt(ok, 'node-a', { status: 'succeeded', result: { n: 1 } }, POLICY)).toEqual({ written: true, status: 'succeeded', next: null });
      const okRows = await store.periodRuns(job, at);
      expect(await store.endAttempt(ok, 'node-a', { status: 'succeeded', result: { n: 1 } }, POLICY)).toEqual({ written: true, status: 'succeeded', next: null });
      expect(await store.periodRuns(job, at)).toEqual(okRows);
      // Failed with a retry owed: the retry hears of the attempt its first try inserted, and no second one is inserted.
      const f = `${job}-f`;
      const failed = await running(f, at);
      const first = await store.endAttempt(failed, 'node-a', { status: 'failed', error: 'boom' }, POLICY);
      expect(first).toMatchObject({ written: true, status: 'failed', next: { attempt: 2, status: 'pending' } });
      const again = await store.endAttempt(failed, 'node-a', { status: 'failed', error: 'boom' }, POLICY);
      expect(again).toMatchObject({ written: true, status: 'failed', next: { id: first.next!.id, attempt: 2 } });
      expect((await store.periodRuns(f, at)).map((r) => [r.attempt, r.status])).toEqual([[1, 'failed'], [2, 'pending']]);
      // The cap: the third unfinished attempt was written failed; its retry hears failed, nothing owed.
      const c = `${job}-c`;
      let r = await running(c, at);
      for (let i = 0; i < 2; i++) {
        const e = await store.endAttempt(r, 'node-a', { status: 'interrupted', reason: 'shutdown' }, POLICY);
        r = (await store.claimPending(e.next!.id, 'node-a', 30_000))!;
      }
      expect(await store.endAttempt(r, 'node-a', { status: 'interrupted', reason: 'shutdown' }, POLICY)).toEqual({ written: true, status: 'failed', next: null });
      expect(await store.endAttempt(r, 'node-a', { status: 'interrupted', reason: 'shutdown' }, POLICY)).toEqual({ written: true, status: 'failed', next: null });
      expect(await store.periodRuns(c, at)).toHaveLength(3);
      // Taken over: the row is abandoned (or capped failed) by the takeover's own reason, not by this node's outcome.
      const t = `${job}-t`;
      const stale = await running(t, at, { leaseMs: 50 });
      await waitFor('the short lease to run out', async () => (await store.staleRuns()).some((s) => s.id === stale.id), 10_000, 50);
      const taken = await store.takeOver(stale, 'node-b', 'lease expired: node node-a stopped heartbeating', true);
      expect(taken).toMatchObject({ written: true, status: 'abandoned' });
      for (const outcome of [{ status: 'succeeded' }, { status: 'abandoned' }, { status: 'failed', error: 'late' }] as const) {
        expect(await store.endAttempt(stale, 'node-a', outcome, POLICY), outcome.status).toMatchObject({ written: false, next: null });
      }
      expect((await store.periodRuns(t, at)).map((x) => [x.attempt, x.status])).toEqual([[1, 'abandoned'], [2, 'pending']]);
    });

    it('takeOver: only a stale running row is taken; it becomes abandoned with the reason and attempt n + 1 pending is due at once', async () => {
      const job = `take-${uid()}`;
      const at = new Date(BASE);
      const run = await running(job, at, { leaseMs: 300, nodeId: 'node-dead', trigger: 'catch-up' });
      const live = await running(job, new Date(BASE + MINUTE), { leaseMs: 60_000 });
      const done = await running(job, new Date(BASE + 2 * MINUTE), { leaseMs: 300 });
      await store.finishRun(done.id, 'node-a', { status: 'succeeded' });
      // Not stale yet: nothing taken.
      expect(await store.takeOver(run, 'node-b', 'lease expired', true)).toBeNull();
      await untilStale(store, run.id);
      expect(await store.takeOver(live, 'node-b', 'lease expired', true)).toBeNull();
      expect(await store.takeOver(done, 'node-b', 'lease expired', true)).toBeNull();
      const before = await store.now();
      const res = await store.takeOver(run, 'node-b', 'lease expired: node-dead stopped heartbeating', true);
      expect(res).toMatchObject({ written: true, status: 'abandoned' });
      expect(res!.next).toMatchObject({ job, attempt: 2, status: 'pending', trigger: 'catch-up', nodeId: 'node-b', leaseMs: 300, periodKey: run.periodKey });
      expect(res!.next!.runAt!.getTime()).toBeGreaterThanOrEqual(before - 2);
      expect(res!.next!.runAt!.getTime()).toBeLessThanOrEqual((await store.now()) + 2);
      const rows = await store.periodRuns(job, at);
      expect(rows.map((r) => [r.attempt, r.status])).toEqual([[1, 'abandoned'], [2, 'pending']]);
      expect(rows[0]).toMatchObject({ reason: 'lease expired: node-dead stopped heartbeating', nodeId: 'node-dead', error: null });
      expect(rows[0]!.finishedAt).not.toBeNull();
      // Taken once only; the dead node coming back finds it is not its own.
      expect(await store.takeOver(run, 'node-c', 'again', true)).toBeNull();
      expect(await store.heartbeat(run.id, 'node-dead')).toBe(false);
      expect((await store.endAttempt(run, 'node-dead', { status: 'succeeded' }, POLICY)).written).toBe(false);
      expect(await store.periodRuns(job, at)).toEqual(rows);
      // Due at once: claimable now.
      expect(await store.claimPending(res!.next!.id, 'node-c', 30_000)).toMatchObject({ status: 'running', nodeId: 'node-c' });
    });

    it('takeOver: a heartbeat in time keeps the attempt; owe false abandons and inserts nothing', async () => {
      const job = `take-noowe-${uid()}`;
      const at = new Date(BASE);
      // A lease long enough that the takeover right after the heartbeat lands within it on a loaded machine.
      const run = await running(job, at, { leaseMs: 1000 });
      await untilStale(store, run.id);
      expect(await store.heartbeat(run.id, 'node-a')).toBe(true);
      expect(await store.takeOver(run, 'node-b', 'x', true)).toBeNull();
      await untilStale(store, run.id);
      expect(await store.takeOver(run, 'node-b', 'job defined on no live node', false)).toEqual({ written: true, status: 'abandoned', next: null });
      const rows = await store.periodRuns(job, at);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ status: 'abandoned', reason: 'job defined on no live node' });
    });

    it('takeOver: the third attempt ended without an outcome is recorded failed (reason and error), nothing owed', async () => {
      const job = `take-cap-${uid()}`;
      const at = new Date(BASE);
      let run = await running(job, at, { leaseMs: 250 });
      for (let attempt = 1; attempt <= 2; attempt++) {
        await untilStale(store, run.id);
        const res = await store.takeOver(run, 'node-b', 'lease expired', true);
        expect(res, `attempt ${attempt}`).toMatchObject({ written: true, status: 'abandoned', next: { attempt: attempt + 1 } });
        run = (await store.claimPending(res!.next!.id, 'node-x', 250))!;
      }
      await untilStale(store, run.id);
      const res = await store.takeOver(run, 'node-b', 'lease expired', true);
      expect(res).toEqual({ written: true, status: 'failed', next: null });
      const rows = await store.periodRuns(job, at);
      expect(rows.map((r) => r.status)).toEqual(['abandoned', 'abandoned', 'failed']);
      expect(rows[2]!.reason).toMatch(/^lease expired; 3 attempts ended without an outcome/);
      expect(rows[2]!.error).toMatch(/^lease expired; 3 attempts ended without an outcome/);
    });

    it('takeOver: 8 store instances race on one stale attempt: exactly one result, exactly one pending row', async () => {
      const job = `take-race-${uid()}`;
      const at = new Date(BASE);
      const run = await running(job, at, { leaseMs: 300, nodeId: 'node-dead' });
      await untilStale(store, run.id);
      // SQLite: one process per instance, as SQLite nodes share a file (better-sqlite3 waits for a busy
      // file synchronously, so instances in one process holding transactions would stall each other).
      const results = db.config.kind === 'sqlite'
        ? await takeOverInProcesses(8, db.config, run)
        : await withStores(8, db.config, (racers) => Promise.all(racers.map((s, i) => s.takeOver(run, `racer-${i}`, 'lease expired', true))));
      const won = results.filter((r) => r !== null);
      expect(won).toHaveLength(1);
      expect(won[0]).toMatchObject({ written: true, status: 'abandoned', next: { attempt: 2, status: 'pending' } });
      const rows = await store.periodRuns(job, at);
      expect(rows.map((r) => [r.attempt, r.status])).toEqual([[1, 'abandoned'], [2, 'pending']]);
    });

    describe('pending attempts', () => {
      let pdb: FreshStore;
      let ps: KnexRunStore;
      let k: Knex;
      // A database of its own: duePending reads every job's rows, and the limit and order below are exact.
      ownDatabase((own) => ({ pdb, ps, k } = own));

      /** A pending attempt 2 of a fresh period, due at store now + dueInMs (set behind the store's back). */
      async function pending(job: string, dueInMs: number, at = new Date(BASE)) {
        const r = await inserted(ps, newRun(job, at, { nodeId: 'node-owner' }));
        const next = (await ps.endAttempt(r, 'node-owner', { status: 'interrupted' }, null)).next!;
        await k(RUNS_TABLE).where({ id: Number(next.id) }).update({ run_at: (await ps.now()) + dueInMs });
        return (await ps.periodRuns(job, at)).find((x) => x.id === next.id)!;
      }

      it('duePending: only pending rows due by the store clock, the longest due first, limit respected', async () => {
        const b = await pending(`due-b-${uid()}`, -1_000);
        const a = await pending(`due-a-${uid()}`, -5_000);
        const c = await pending(`due-c-${uid()}`, -100);
        const future = await pending(`due-f-${uid()}`, 60_000);
        // Rows that are not pending, due or not: never listed.
        const run = await inserted(ps, newRun(`due-r-${uid()}`, new Date(BASE)));
        await k(RUNS_TABLE).where({ id: Number(run.id) }).update({ run_at: 0 });
        const fin = await inserted(ps, newRun(`due-s-${uid()}`, new Date(BASE)));
        await ps.finishRun(fin.id, 'node-a', { status: 'succeeded' });
        await k(RUNS_TABLE).where({ id: Number(fin.id) }).update({ run_at: 0 });
        await ps.insertSkipped([skipped(`due-k-${uid()}`, new Date(BASE))]);

        const due = await ps.duePending();
        expect(due.map((r) => r.id)).toEqual([a.id, b.id, c.id]);
        expect(due[0]).toEqual(a);
        expect((await ps.duePending(2)).map((r) => r.id)).toEqual([a.id, b.id]);
        expect((await ps.duePending(1)).map((r) => r.id)).toEqual([a.id]);
        // The future one becomes due by the store clock.
        await k(RUNS_TABLE).where({ id: Number(future.id) }).update({ run_at: (await ps.now()) + 200 });
        await waitFor('the future attempt to be due', async () => (await ps.duePending()).length === 4, 10_000, 50);
        expect((await ps.duePending()).map((r) => r.id)).toEqual([a.id, b.id, c.id, future.id]);
      });

      it('claimPending: compare-and-set pending -> running for one node, stamped by the store clock, never before run_at', async () => {
        const job = `claim-${uid()}`;
        const p = await pending(job, 400);
        // Not due yet.
        expect(await ps.claimPending(p.id, 'node-b', 12_000)).toBeNull();
        await waitFor('the attempt to be due', async () => (await ps.now()) >= p.runAt!.getTime(), 10_000, 20);
        const before = await ps.now();
        const got = await ps.claimPending(p.id, 'node-b', 12_000);
        const after = await ps.now();
        expect(got).toMatchObject({ id: p.id, job, attempt: 2, status: 'running', nodeId: 'node-b', leaseMs: 12_000, finishedAt: null });
        expect(got!.startedAt.getTime()).toBeGreaterThanOrEqual(before - 2);
        expect(got!.startedAt.getTime()).toBeLessThanOrEqual(after + 2);
        expect(Math.abs(got!.heartbeatAt!.getTime() - got!.startedAt.getTime())).toBeLessThanOrEqual(5);
        expect((await ps.periodRuns(job, new Date(BASE)))[1]).toEqual(got);
        // It is this node's running attempt now: not claimable again, live, heartbeats, and ends.
        expect(await ps.claimPending(p.id, 'node-c', 12_000)).toBeNull();
        expect((await ps.liveRuns(job)).map((r) => r.id)).toEqual([p.id]);
        expect(await ps.heartbeat(p.id, 'node-b')).toBe(true);
        expect(await ps.duePending()).toEqual([]);
        expect((await ps.endAttempt(got!, 'node-b', { status: 'succeeded' }, null)).written).toBe(true);
        expect(await ps.claimPending(p.id, 'node-c', 12_000)).toBeNull();
        expect(await ps.claimPending('987654321', 'node-c', 12_000)).toBeNull();
      });

      it('claimPending: 8 store instances race for one due attempt: exactly one wins', async () => {
        const job = `claim-race-${uid()}`;
        const p = await pending(job, -10);
        await withStores(8, pdb.config, async (racers) => {
          const got = await Promise.all(racers.map((s, i) => s.claimPending(p.id, `racer-${i}`, 30_000)));
          const winners = got.flatMap((r, i) => (r ? [{ r, i }] : []));
          expect(winners).toHaveLength(1);
          expect(winners[0]!.r.nodeId).toBe(`racer-${winners[0]!.i}`);
          const rows = await ps.periodRuns(job, new Date(BASE));
          expect(rows[1]).toMatchObject({ status: 'running', nodeId: `racer-${winners[0]!.i}` });
        });
      });

      it('reclaimSkipped turns a skipped row (no body ran) into this node\'s running attempt, once; a row that is not skipped is left alone', async () => {
        const job = `reclaim-${uid()}`;
        const at = new Date(BASE);
        expect(await ps.insertSkipped([skipped(job, at, { nodeId: 'node-s' })])).toBe(1);
        const [row] = await ps.periodRuns(job, at);
        const got = await ps.reclaimSkipped(row!.id, 'node-w', 30_000, 'schedule');
        expect(got).toMatchObject({ id: row!.id, status: 'running', nodeId: 'node-w', reason: null, finishedAt: null, trigger: 'schedule', attempt: 1 });
        expect(await ps.reclaimSkipped(row!.id, 'node-x', 30_000, 'schedule')).toBeNull();
        expect((await ps.endAttempt(got!, 'node-w', { status: 'succeeded', result: 1 }, null)).written).toBe(true);
        expect((await ps.periodRuns(job, at)).map((r) => [r.attempt, r.status, r.nodeId])).toEqual([[1, 'succeeded', 'node-w']]);
      });

      it('releasePending gives a claimed attempt back (due again at once); only its node can', async () => {
        const job = `release-${uid()}`;
        const p = await pending(job, -10);
        const got = (await ps.claimPending(p.id, 'node-b', 30_000))!;
        expect(await ps.releasePending(got.id, 'node-c')).toBe(false);
        const before = await ps.now();
        expect(await ps.releasePending(got.id, 'node-b')).toBe(true);
        const [, back] = await ps.periodRuns(job, new Date(BASE));
        expect(back).toMatchObject({ id: p.id, status: 'pending', heartbeatAt: null, finishedAt: null });
        expect(back!.runAt!.getTime()).toBeGreaterThanOrEqual(before - 2);
        expect(back!.runAt!.getTime()).toBeLessThanOrEqual((await ps.now()) + 2);
        expect((await ps.duePending()).map((r) => r.id)).toEqual([p.id]);
        // Not running any more: a second release is false, and anyone may claim it again.
        expect(await ps.releasePending(got.id, 'node-b')).toBe(false);
        expect(await ps.claimPending(p.id, 'node-c', 30_000)).toMatchObject({ status: 'running', nodeId: 'node-c' });
      });

      it('abandonPending ends a pending attempt only (reason kept); not a running or finished one', async () => {
        const job = `abpend-${uid()}`;
        const p = await pending(job, 60_000);
        const run = await inserted(ps, newRun(job, new Date(BASE + MINUTE)));
        expect(await ps.abandonPending(run.id, 'no live node defines the job')).toBe(false);
        expect(await ps.abandonPending(p.id, 'no live node defines the job')).toBe(true);
        expect(await ps.abandonPending(p.id, 'again')).toBe(false);
        const [first, second] = await ps.periodRuns(job, new Date(BASE));
        expect(first!.status).toBe('interrupted');
        expect(second).toMatchObject({ status: 'abandoned', reason: 'no live node defines the job', durationMs: 0 });
        expect(second!.finishedAt).not.toBeNull();
        expect((await ps.periodRuns(job, new Date(BASE + MINUTE)))[0]!.status).toBe('running');
        // Nothing is owed after it, and it is no longer due.
        expect(await ps.duePending()).toEqual([]);
        expect(await ps.periodRuns(job, new Date(BASE))).toHaveLength(2);
        expect(await ps.claimPending(p.id, 'node-c', 30_000)).toBeNull();
      });
    });

    it('rowsInRanges: several jobs and ranges in one call, bounds inclusive, more than 100 ranges (chunked)', async () => {
      const a = `rir-a-${uid()}`;
      const b = `rir-b-${uid()}`;
      const none = `rir-none-${uid()}`;
      // a: a row every minute for 160 minutes but every third; b: rows at minutes 0, 5, 10 (several attempts at 5).
      const aMinutes = Array.from({ length: 160 }, (_, i) => i).filter((i) => i % 3 !== 0);
      await store.insertSkipped(aMinutes.map((i) => skipped(a, new Date(BASE + i * MINUTE))));
      await inserted(store, newRun(b, new Date(BASE)));
      await inserted(store, newRun(b, new Date(BASE + 5 * MINUTE)));
      await inserted(store, newRun(b, new Date(BASE + 5 * MINUTE), { attempt: 2 }));
      await store.insertSkipped([skipped(b, new Date(BASE + 10 * MINUTE))]);
      // 160 single-instant ranges of a (crossing the chunk of 100), then ranges of b and of a job without rows.
      const ranges = [
        ...Array.from({ length: 160 }, (_, i) => ({ job: a, fromMs: BASE + i * MINUTE, toMs: BASE + i * MINUTE })),
        { job: b, fromMs: BASE, toMs: BASE + 5 * MINUTE }, // both bounds have rows
        { job: b, fromMs: BASE + 5 * MINUTE + 1, toMs: BASE + 10 * MINUTE - 1 }, // none inside
        { job: none, fromMs: 0, toMs: Number.MAX_SAFE_INTEGER },
      ];
      const got = await store.rowsInRanges(ranges);
      expect(got).toBeInstanceOf(Map);
      expect([...got.keys()].sort()).toEqual([a, b].sort());
      expect([...got.get(a)!].sort((x, y) => x - y)).toEqual(aMinutes.map((i) => BASE + i * MINUTE));
      expect([...got.get(b)!].sort((x, y) => x - y)).toEqual([BASE, BASE + 5 * MINUTE]);
      // The same job in both chunks: one set; overlapping ranges: counted once.
      const mixed = await store.rowsInRanges([
        ...Array.from({ length: 120 }, () => ({ job: b, fromMs: BASE + 10 * MINUTE, toMs: BASE + 10 * MINUTE })),
        { job: b, fromMs: BASE, toMs: BASE },
        { job: a, fromMs: BASE, toMs: BASE + 2 * MINUTE },
        { job: a, fromMs: BASE + MINUTE, toMs: BASE + 4 * MINUTE },
      ]);
      expect([...mixed.get(b)!].sort((x, y) => x - y)).toEqual([BASE, BASE + 10 * MINUTE]);
      expect([...mixed.get(a)!].sort((x, y) => x - y)).toEqual([1, 2, 4].map((i) => BASE + i * MINUTE));
      expect((await store.rowsInRanges([])).size).toBe(0);
    });

    it('rowsInRanges with nodeId: only that node\'s rows count (a node reading back what it wrote)', async () => {
      const job = `rir-node-${uid()}`;
      await inserted(store, newRun(job, new Date(BASE)));
      await inserted(store, newRun(job, new Date(BASE + MINUTE), { nodeId: 'node-b' }));
      const range = { job, fromMs: BASE, toMs: BASE + MINUTE };
      expect([...(await store.rowsInRanges([{ ...range, nodeId: 'node-a' }])).get(job)!]).toEqual([BASE]);
      expect([...(await store.rowsInRanges([{ ...range, nodeId: 'node-b' }])).get(job)!]).toEqual([BASE + MINUTE]);
      expect((await store.rowsInRanges([{ ...range, nodeId: 'node-c' }])).get(job)).toBeUndefined();
      expect([...(await store.rowsInRanges([range])).get(job)!].sort((x, y) => x - y)).toEqual([BASE, BASE + MINUTE]);
    });

    it('shards: one row per (period, shard, attempt); periodRuns and periodShards per shard; rowsInRanges counts a period once each shard has a row', async () => {
      const job = `shard-${uid()}`;
      const p0 = new Date(BASE);
      const p1 = new Date(BASE + MINUTE);
      // Shards 0..3 of p0: four rows under one period key; the same shard again is a duplicate.
      const rows = await Promise.all([0, 1, 2, 3].map((shard) => inserted(store, newRun(job, p0, { shard, nodeId: `node-${shard}` }))));
      expect(rows.map((r) => [r.shard, r.attempt, r.periodKey])).toEqual([0, 1, 2, 3].map((s) => [s, 1, `${job}@${p0.toISOString()}`]));
      expect((await store.insertRun(newRun(job, p0, { shard: 2, nodeId: 'node-x' }))).outcome).toBe('duplicate');
      expect((await store.periodRuns(job, p0, 2)).map((r) => r.nodeId)).toEqual(['node-2']);
      expect((await store.periodRuns(job, p0)).map((r) => r.shard)).toEqual([0]);
      // Live runs of one shard (the overlap check of a shard's claim): that shard's rows only.
      expect((await store.liveRuns(job, 30_000, 2)).map((r) => [r.shard, r.nodeId])).toEqual([[2, 'node-2']]);
      expect((await store.liveRuns(job)).map((r) => r.shard).sort()).toEqual([0, 1, 2, 3]);
      // p1: shards 0 and 2 only (one skipped marker, one run).
      await inserted(store, newRun(job, p1, { shard: 0 }));
      await expect(store.insertSkipped([skipped(job, p1, { shard: 2, reason: 'missed' }), skipped(job, p1, { shard: 0, reason: 'missed' })])).resolves.toBe(1);
      expect([...(await store.periodShards(job, p1))].sort()).toEqual([0, 2]);
      expect((await store.periodShards(job, new Date(BASE + 9 * MINUTE))).size).toBe(0);
      const range = { job, fromMs: BASE, toMs: BASE + MINUTE };
      // Four shards: only p0 is complete. Two: p0 is (shards 0 and 1), p1 is not (no shard 1). One: both.
      expect([...(await store.rowsInRanges([{ ...range, shards: 4 }])).get(job)!]).toEqual([BASE]);
      expect([...(await store.periodsWithRows(job, BASE, BASE + MINUTE, 2))]).toEqual([BASE]);
      expect([...(await store.rowsInRanges([range])).get(job)!].sort()).toEqual([BASE, BASE + MINUTE]);
      // The missing shards recorded: p1 complete with 4 shards (existing rows kept, not counted).
      await expect(store.insertSkipped([0, 1, 2, 3].map((shard) => skipped(job, p1, { shard })))).resolves.toBe(2);
      expect([...(await store.rowsInRanges([{ ...range, shards: 4 }])).get(job)!].sort()).toEqual([BASE, BASE + MINUTE]);
      expect((await store.periodRuns(job, p1, 2))[0]).toMatchObject({ status: 'skipped', reason: 'missed' });
    });

    it('shards: retries and takeovers are per shard: the owed attempt keeps its shard, retries count the shard\'s own failures', async () => {
      const job = `shard-owe-${uid()}`;
      const at = new Date(BASE + 3 * MINUTE);
      const policy = { retries: 1, retryDelayMs: 0 };
      const s1 = await running(job, at, { shard: 1 });
      const s3 = await running(job, at, { shard: 3, leaseMs: 300, nodeId: 'node-dead' });
      // Shard 1 fails: attempt 2 of shard 1 is owed (the other shard's rows do not count).
      const e1 = await store.endAttempt(s1, 'node-a', { status: 'failed', error: 'boom' }, policy);
      expect(e1.next).toMatchObject({ shard: 1, attempt: 2, status: 'pending', periodKey: s1.periodKey });
      const claimed = await store.claimPending(e1.next!.id, 'node-b', 30_000);
      expect(claimed).toMatchObject({ shard: 1, attempt: 2 });
      // Its second failure uses up its one retry: nothing more owed.
      expect((await store.endAttempt(claimed!, 'node-b', { status: 'failed', error: 'boom' }, policy)).next).toBeNull();
      // Shard 3's node died: the takeover owes attempt 2 of shard 3.
      await untilStale(store, s3.id);
      const taken = await store.takeOver(s3, 'node-c', 'lease expired', true);
      expect(taken!.next).toMatchObject({ shard: 3, attempt: 2, status: 'pending' });
      expect((await store.periodRuns(job, at, 3)).map((r) => [r.attempt, r.status])).toEqual([[1, 'abandoned'], [2, 'pending']]);
      expect((await store.periodRuns(job, at, 1)).map((r) => [r.attempt, r.status])).toEqual([[1, 'failed'], [2, 'failed']]);
      // A failure of shard 3 counts one failure of its own, so its retry is still owed.
      const c3 = await store.claimPending(taken!.next!.id, 'node-c', 30_000);
      expect((await store.endAttempt(c3!, 'node-c', { status: 'failed', error: 'boom' }, policy)).next).toMatchObject({ shard: 3, attempt: 3 });
    });

    it('latestPeriod: the latest period instant with any row (pending and skipped count), null without rows', async () => {
      const job = `latest-${uid()}`;
      expect(await store.latestPeriod(job)).toBeNull();
      await inserted(store, newRun(job, new Date(BASE + 3 * MINUTE)));
      expect(await store.latestPeriod(job)).toBe(BASE + 3 * MINUTE);
      await store.insertSkipped([skipped(job, new Date(BASE + 7 * MINUTE)), skipped(job, new Date(BASE + MINUTE))]);
      expect(await store.latestPeriod(job)).toBe(BASE + 7 * MINUTE);
      const r = await inserted(store, newRun(job, new Date(BASE + 9 * MINUTE)));
      await store.endAttempt(r, 'node-a', { status: 'interrupted' }, null);
      expect(await store.latestPeriod(job)).toBe(BASE + 9 * MINUTE);
      // Other jobs do not count, nor a job whose name differs only by case.
      await inserted(store, newRun(`${job}-other`, new Date(BASE + 60 * MINUTE)));
      await inserted(store, newRun(job.toUpperCase(), new Date(BASE + 61 * MINUTE)));
      expect(await store.latestPeriod(job)).toBe(BASE + 9 * MINUTE);
      expect(typeof (await store.latestPeriod(job))).toBe('number');
    });

    it('latestPeriods: each job of a long list (several statements) with its latest non-manual period; jobs without one absent', async () => {
      const tag = uid();
      const jobs = Array.from({ length: 230 }, (_, i) => `latest-many-${tag}-${i}`);
      // Every third job has rows (its latest is i minutes after BASE), every seventh only a manual run.
      const rows = jobs.flatMap((job, i) => (i % 3 === 0 ? [skipped(job, new Date(BASE + i * MINUTE)), skipped(job, new Date(BASE + (i - 1) * MINUTE))] : []));
      await store.insertSkipped(rows);
      for (const [i, job] of jobs.entries()) if (i % 7 === 1) await inserted(store, newRun(job, new Date(BASE + 500 * MINUTE), { trigger: 'manual' }));
      const latest = await store.latestPeriods(jobs);
      expect(new Map([...latest].sort())).toEqual(new Map(jobs.flatMap((job, i) => (i % 3 === 0 ? [[job, BASE + i * MINUTE] as const] : [])).sort()));
      expect(await store.latestPeriods([])).toEqual(new Map());
    });

    it('insertSkipped: two instances racing the same batch count only what each inserted (the counts sum to the periods)', async () => {
      await withStores(2, db.config, async ([s1, s2]) => {
        for (const n of [1, 7, 450]) {
          const job = `skipdup-${n}-${uid()}`;
          const batch = Array.from({ length: n }, (_, i) => skipped(job, new Date(BASE + i * MINUTE), { reason: 'missed' }));
          const [c1, c2] = await Promise.all([s1!.insertSkipped(batch), s2!.insertSkipped(batch.map((r) => ({ ...r, nodeId: 'node-t' })))]);
          expect(c1 + c2, `${n} periods`).toBe(n);
          expect(await store.history({ job, limit: 1000 })).toHaveLength(n);
        }
      });
    });

    describe('batches: a tick\'s claims, outcomes and heartbeats', () => {
      /** A store on a pool of its own whose statements are counted (both pools: main and lease keepers'). */
      async function counted<T>(fn: (runs: KnexRunStore, statements: string[]) => Promise<T>): Promise<T> {
        const database = await Database.open(db.config);
        const statements: string[] = [];
        const listen = (q: { sql: string }) => statements.push(q.sql);
        database.knex.on('query', listen);
        if (database.leaseKnex !== database.knex) database.leaseKnex.on('query', listen);
        try {
          return await fn(new KnexRunStore(database), statements);
        } finally {
          await database.close();
        }
      }

      const shuffled = <T>(list: T[]): T[] => list.map((v) => ({ v, k: Math.random() })).sort((a, b) => a.k - b.k).map((x) => x.v);
      const keyOf = (r: { job: string; scheduledAt: Date; shard?: number; attempt: number }) => `${r.job}|${r.scheduledAt.getTime()}|${r.shard ?? 0}|${r.attempt}`;
      /** Statements that write or read the runs table (MariaDB reads the table's columns once, for its checks). */
      const onRuns = (statements: string[]) => statements.filter((s) => !/information_schema/i.test(s));

      it('insertRuns: new and duplicate rows in one call, results in input order, each new row as stored with store-clock stamps; one INSERT per 500 rows', async () => {
        await counted(async (runs, statements) => {
          const [a, b] = [`batch-a-${uid()}`, `batch-b-${uid()}`];
          const wanted: NewRun[] = [];
          for (let i = 0; i < 300; i++) {
            wanted.push(newRun(a, new Date(BASE + i * 1000), { shard: i % 2, leaseMs: 20_000 + i }));
            wanted.push(newRun(b, new Date(BASE + i * 1000), { attempt: 1 + (i % 3), nodeId: 'node-b' }));
          }
          // Rows that exist already (another node's claims), and one key asked twice in the call.
          const existing = [wanted[3]!, wanted[100]!, wanted[599]!];
          for (const r of existing) await inserted(store, { ...r, nodeId: 'node-x' });
          const batch = shuffled([...wanted, { ...wanted[10]!, nodeId: 'node-twice' }]);
          const before = await runs.now();
          statements.length = 0;
          const res = await runs.insertRuns(batch);
          const writes = onRuns(statements);
          const after = await runs.now();
          expect(res).toHaveLength(batch.length);
          // 601 rows: two INSERT statements and nothing else.
          expect(writes).toHaveLength(2);
          expect(writes.every((s) => /^insert /i.test(s))).toBe(true);
          const existingKeys = new Set(existing.map(keyOf));
          const seen = new Set<string>();
          for (const [i, run] of batch.entries()) {
            const key = keyOf(run);
            const r = res[i]!;
            if (existingKeys.has(key) || seen.has(key)) {
              expect(r, key).toEqual({ outcome: 'duplicate' });
              continue;
            }
            seen.add(key);
            expect(r.outcome, key).toBe('inserted');
            const got = (r as { run: RunRecord }).run;
            expect(got).toMatchObject({
              job: run.job, scheduledAt: run.scheduledAt, periodKey: run.periodKey, shard: run.shard ?? 0, attempt: run.attempt,
              trigger: run.trigger, nodeId: run.nodeId, leaseMs: run.leaseMs, status: 'running', runAt: null, finishedAt: null,
            });
            for (const stamp of [got.startedAt, got.claimedAt!, got.heartbeatAt!]) {
              expect(stamp.getTime()).toBeGreaterThanOrEqual(before);
              expect(stamp.getTime()).toBeLessThanOrEqual(after);
            }
          }
          expect(seen.size).toBe(600 - existing.length);
          // As stored: what the reads return.
          const stored = new Map([...(await store.history({ job: a, limit: 1000 })), ...(await store.history({ job: b, limit: 1000 }))].map((r) => [r.id, r]));
          expect(stored.size).toBe(600);
          for (const r of res) if (r.outcome === 'inserted') expect(stored.get(r.run.id)).toEqual(r.run);
          for (const r of existing) expect((await store.periodRuns(r.job, r.scheduledAt, r.shard ?? 0)).find((x) => x.attempt === r.attempt)!.nodeId).toBe('node-x');
          // insertRun is the one-row case; an empty call sends nothing.
          statements.length = 0;
          expect(await runs.insertRuns([])).toEqual([]);
          expect(statements).toEqual([]);
          expect((await runs.insertRun(wanted[0]!)).outcome).toBe('duplicate');
        });
      });

      it('insertRuns: a value the store refuses fails the call and inserts nothing of the batch (no value is cut or emptied, as INSERT IGNORE would)', async () => {
        const job = `batch-bad-${uid()}`;
        const good = Array.from({ length: 4 }, (_, i) => newRun(job, new Date(BASE + i * MINUTE)));
        for (const bad of [{ nodeId: null as unknown as string }, { trigger: undefined as unknown as 'schedule' }, { periodKey: null as unknown as string }]) {
          const err = await store.insertRuns([...good, newRun(job, new Date(BASE + 9 * MINUTE), bad)]).then(() => null, (e: unknown) => e);
          expect(err, JSON.stringify(bad)).toBeInstanceOf(Error);
          expect(err).not.toBeInstanceOf(StoreUnavailableError);
          expect(await store.history({ job, limit: 100 })).toEqual([]);
        }
        // Too long for its column, or out of an INT's range: refused (nothing of the batch written), or
        // kept whole where the backend does not enforce it (SQLite), never cut or clamped.
        const long = `${job}-${'x'.repeat(120)}`;
        const wroteLong = await store.insertRuns([...good, newRun(long, new Date(BASE))]).then(() => true, () => false);
        expect(await store.history({ job: long.slice(0, 100), limit: 10 })).toEqual([]);
        if (wroteLong) expect((await store.history({ job: long })).map((r) => r.job)).toEqual([long]);
        else expect(await store.history({ job, limit: 100 })).toEqual([]);
        const job2 = `${job}-range`;
        const wroteBig = await store.insertRuns([newRun(job2, new Date(BASE)), newRun(job2, new Date(BASE + MINUTE), { shard: 2 ** 31 })]).then(() => true, () => false);
        const rows = await store.history({ job: job2, limit: 10 });
        if (wroteBig) expect(rows.map((r) => r.shard).sort()).toEqual([0, 2 ** 31]);
        else expect(rows).toEqual([]);
        // The store works afterwards.
        if (!wroteLong) expect((await store.insertRuns(good)).map((r) => r.outcome)).toEqual(['inserted', 'inserted', 'inserted', 'inserted']);
      });

      it('insertRuns: two stores racing over the same batches (each in its own order): each key inserted exactly once across both', async () => {
        await withStores(2, db.config, async ([s1, s2]) => {
          for (const n of [2, 40, 700]) {
            const job = `batch-race-${n}-${uid()}`;
            const batch = Array.from({ length: n }, (_, i) => newRun(i % 3 === 0 ? `${job}-x` : job, new Date(BASE + Math.floor(i / 2) * 1000), { attempt: 1 + (i % 2) }));
            const mine = (node: string) => shuffled(batch).map((r) => ({ ...r, nodeId: node }));
            const [b1, b2] = [mine('racer-1'), mine('racer-2')];
            const [r1, r2] = await Promise.all([s1!.insertRuns(b1), s2!.insertRuns(b2)]);
            const winners = new Map<string, string[]>();
            for (const [list, res] of [[b1, r1], [b2, r2]] as const) {
              for (const [i, r] of res.entries()) {
                if (r.outcome !== 'inserted') continue;
                winners.set(keyOf(list[i]!), [...(winners.get(keyOf(list[i]!)) ?? []), r.run.nodeId]);
              }
            }
            expect(winners.size, `${n} keys`).toBe(n);
            expect([...winners.values()].every((w) => w.length === 1)).toBe(true);
            const rows = [...(await store.history({ job, limit: 1000 })), ...(await store.history({ job: `${job}-x`, limit: 1000 }))];
            expect(rows).toHaveLength(n);
            for (const row of rows) expect(winners.get(keyOf(row))).toEqual([row.nodeId]);
          }
        });
      });

      it('liveRunsOf: the live runs of many jobs in one statement, shards included, each ordered by scheduled_at; every job named has an entry', async () => {
        await counted(async (runs, statements) => {
          const [a, b, none] = [`lof-a-${uid()}`, `lof-b-${uid()}`, `lof-none-${uid()}`];
          const s1 = await inserted(runs, newRun(a, new Date(BASE + 2 * MINUTE), { shard: 1, leaseMs: 60_000 }));
          const s0 = await inserted(runs, newRun(a, new Date(BASE + 2 * MINUTE), { shard: 0, leaseMs: 60_000 }));
          const first = await inserted(runs, newRun(a, new Date(BASE), { leaseMs: 60_000 }));
          const done = await inserted(runs, newRun(a, new Date(BASE + 3 * MINUTE), { leaseMs: 60_000 }));
          await runs.finishRun(done.id, 'node-a', { status: 'succeeded' });
          await runs.insertSkipped([skipped(a, new Date(BASE + 4 * MINUTE))]);
          const other = await inserted(runs, newRun(b, new Date(BASE), { leaseMs: 60_000, nodeId: 'node-b' }));
          // Last, and long enough for the reads below on a loaded machine.
          const short = await inserted(runs, newRun(a, new Date(BASE + MINUTE), { leaseMs: 2000 }));
          statements.length = 0;
          const live = await runs.liveRunsOf([a, b, none], 30_000);
          expect(statements).toHaveLength(1);
          expect([...live.keys()].sort()).toEqual([a, b, none].sort());
          expect(live.get(a)!.map((r) => r.id)).toEqual([first.id, short.id, s0.id, s1.id]);
          expect(live.get(b)).toEqual([other]);
          expect(live.get(none)).toEqual([]);
          // The same rows as liveRuns, job by job (which orders by scheduled_at alone).
          expect(live.get(a)).toEqual((await runs.liveRuns(a)).sort((x, y) => x.scheduledAt.getTime() - y.scheduledAt.getTime() || x.shard - y.shard));
          await waitFor('the short lease to run out', async () => !(await runs.liveRunsOf([a])).get(a)!.some((r) => r.id === short.id), 10_000, 50);
          expect((await runs.liveRunsOf([a, b])).get(a)!.map((r) => r.id)).toEqual([first.id, s0.id, s1.id]);
          expect(await runs.liveRunsOf([])).toEqual(new Map());
          for (const r of [first, short, s0, s1]) await runs.finishRun(r.id, 'node-a', { status: 'succeeded' });
          await runs.finishRun(other.id, 'node-b', { status: 'succeeded' });
        });
      });

      it('liveRunsOf and liveRuns read the running rows of the jobs, not their history (MariaDB: through (job, status, started_at), as EXPLAIN of the statement sent says)', async () => {
        // 30 jobs with 40 finished periods each and one running period: what an every-second job has after 40 s.
        const jobs = Array.from({ length: 30 }, (_, j) => `hist-${j}-${uid()}`);
        const k = inspector(db.config);
        const sent: Array<{ sql: string; bindings: unknown[] }> = [];
        const database = await Database.open(db.config);
        database.knex.on('query', (q: { sql: string; bindings: unknown[] }) => sent.push(q));
        try {
          const rows = jobs.flatMap((job) => Array.from({ length: 41 }, (_, p) => ({
            job, scheduled_at: BASE + p * 1000, period_key: `${job}@${p}`, shard: 0, attempt: 1, trigger: 'schedule', node_id: 'node-h',
            status: p === 40 ? 'running' : 'succeeded', started_at: BASE + p * 1000, finished_at: p === 40 ? null : BASE + p * 1000 + 5,
            heartbeat_at: p === 40 ? Date.now() + 600_000 : BASE + p * 1000, lease_ms: 60_000, claimed_at: BASE + p * 1000,
          })));
          for (let i = 0; i < rows.length; i += 200) await k(RUNS_TABLE).insert(rows.slice(i, i + 200));
          if (db.config.kind === 'mysql') await k.raw('ANALYZE TABLE ??', [RUNS_TABLE]);
          const runs = new KnexRunStore(database);
          const live = await runs.liveRunsOf(jobs, 30_000);
          for (const job of jobs) expect(live.get(job)!.map((r) => r.scheduledAt.getTime()), job).toEqual([BASE + 40_000]);
          expect((await runs.liveRuns(jobs[0]!)).map((r) => r.scheduledAt.getTime())).toEqual([BASE + 40_000]);
          if (db.config.kind === 'mysql') {
            const reads = sent.filter((q) => /status/.test(q.sql) && /heartbeat_at \+ lease_ms >=/.test(q.sql));
            expect(reads).toHaveLength(2);
            for (const q of reads) {
              const [plan] = await k.raw(`EXPLAIN ${q.sql}`, q.bindings as Knex.RawBinding[]) as unknown as [Array<{ key: string | null }>];
              expect(plan.map((p) => p.key), q.sql).toEqual(['scheduler_runs_job_status_started']);
            }
          }
          await k(RUNS_TABLE).whereIn('job', jobs).del();
        } finally {
          await database.close();
          await k.destroy();
        }
      });

      it('an outcome whose row id now names another attempt of this node (an id handed out again after a failover lost the row) writes nothing, alone or in a batch', async () => {
        await counted(async (runs) => {
          const job = `reused-${uid()}`;
          const all = (await runs.insertRuns(Array.from({ length: 4 }, (_, i) => newRun(job, new Date(BASE + i * MINUTE))))).map((c) => (c as { run: RunRecord }).run);
          // The lost attempt: the key of all[0], the id of all[1].
          const lost = { ...all[0]!, id: all[1]!.id };
          expect(await runs.endAttempt(lost, 'node-a', { status: 'succeeded' }, POLICY)).toEqual({ written: false, status: 'succeeded', next: null });
          const batch = await Promise.all([runs.endAttempt({ ...all[2]!, id: all[3]!.id }, 'node-a', { status: 'succeeded' }, POLICY), runs.endAttempt(all[0]!, 'node-a', { status: 'succeeded' }, POLICY)]);
          expect(batch.map((b) => b.written)).toEqual([false, true]);
          const statuses = await Promise.all(all.map(async (r) => (await runs.periodRuns(job, r.scheduledAt))[0]!.status));
          expect(statuses).toEqual(['succeeded', 'running', 'running', 'running']);
          for (const r of all.slice(1)) await runs.finishRun(r.id, r.nodeId, { status: 'succeeded' });
        });
      });

      it('endAttempt (owing nothing) of many runs at once: ONE UPDATE, each row its own values; a run no longer this node\'s running one is told written: false, the others true', async () => {
        await counted(async (runs, statements) => {
          const job = `coal-${uid()}`;
          const claims = await runs.insertRuns(Array.from({ length: 12 }, (_, i) => newRun(job, new Date(BASE + i * MINUTE))));
          const all = claims.map((c) => (c as { run: RunRecord }).run);
          const outcomeOf = (i: number): RunOutcome => (i % 3 === 2
            ? { status: 'skipped', reason: 'overlap' }
            : { status: 'succeeded', result: { i }, ...(i % 3 === 1 ? { output: `out ${i}`, bodyMsAgo: { started: 40 + i, ended: 5 } } : {}) });
          // All running and this node's: one statement.
          const firstHalf = all.slice(0, 6);
          statements.length = 0;
          const ended = await Promise.all(firstHalf.map((r, i) => runs.endAttempt(r, 'node-a', outcomeOf(i), POLICY)));
          expect(statements).toHaveLength(1);
          expect(statements[0]).toMatch(/^update /i);
          expect(ended).toEqual(firstHalf.map((_, i) => ({ written: true, status: outcomeOf(i).status, next: null })));
          for (const [i, r] of firstHalf.entries()) {
            const [row] = await runs.periodRuns(job, r.scheduledAt);
            const o = outcomeOf(i);
            expect(row, `run ${i}`).toMatchObject({ status: o.status, reason: o.reason ?? null, result: o.result ?? null, output: o.output ?? null, error: null });
            expect(row!.finishedAt).not.toBeNull();
            if (o.bodyMsAgo) {
              expect(row!.durationMs).toBe(35 + i);
              expect(row!.finishedAt!.getTime() - row!.startedAt.getTime()).toBe(35 + i);
            } else {
              expect(row!.startedAt).toEqual(r.startedAt);
            }
          }
          // One ended before by another outcome, one another node's, one twice in the flush: those two
          // are told false (nothing written), the twice-ended one true twice, the others true.
          const [gone, theirs, twice, ...rest] = all.slice(6);
          await runs.finishRun(gone!.id, 'node-a', { status: 'skipped', reason: 'paused' });
          const goneRow = (await runs.periodRuns(job, gone!.scheduledAt))[0];
          const calls = [
            runs.endAttempt(gone!, 'node-a', { status: 'succeeded' }, POLICY),
            runs.endAttempt(theirs!, 'node-b', { status: 'succeeded' }, POLICY),
            runs.endAttempt(twice!, 'node-a', { status: 'succeeded', result: 2 }, POLICY),
            runs.endAttempt(twice!, 'node-a', { status: 'succeeded', result: 2 }, POLICY),
            ...rest.map((r) => runs.endAttempt(r, 'node-a', { status: 'succeeded', result: r.id }, POLICY)),
          ];
          const answers = await Promise.all(calls);
          expect(answers.map((a) => a.written)).toEqual([false, false, true, true, ...rest.map(() => true)]);
          expect((await runs.periodRuns(job, gone!.scheduledAt))[0]).toEqual(goneRow);
          expect((await runs.periodRuns(job, theirs!.scheduledAt))[0]).toMatchObject({ status: 'running', finishedAt: null });
          expect((await runs.periodRuns(job, twice!.scheduledAt))[0]).toMatchObject({ status: 'succeeded', result: 2 });
          for (const r of rest) expect((await runs.periodRuns(job, r.scheduledAt))[0]).toMatchObject({ status: 'succeeded', result: r.id });
          await runs.finishRun(theirs!.id, 'node-a', { status: 'succeeded' });
        });
      });

      it('endAttempt coalesced, mixed outcomes (NULLs, long and multi-byte texts, output given, NULL or absent, one row no longer running, one another node\'s): each row as its one-row write leaves it', async () => {
        const k = inspector(db.config);
        try {
          await counted(async (runs, statements) => {
            const job = `coal-mix-${uid()}`;
            const outcomes: RunOutcome[] = [
              { status: 'succeeded', result: { a: 1 }, output: `tail ${'é'.repeat(65_000)}`, bodyMsAgo: { started: 120, ended: 20 } },
              { status: 'succeeded' }, // every nullable column NULL, output absent: the earlier tail stays
              { status: 'succeeded', result: null, output: null }, // output given as NULL: the earlier tail goes
              { status: 'succeeded', result: 'r'.repeat(200_000), error: `stored late ${'é'.repeat(40_000)}`, errorStack: null, resultNote: 'n'.repeat(70_000) },
              { status: 'succeeded', resultJson: null, resultNote: 'too big', error: 'e', errorStack: `Error: e\n${'    at f (x.ts:1:1)\n'.repeat(2_500)}`, bodyMsAgo: { started: 5, ended: 5 } },
              { status: 'skipped', reason: 'overlap' },
              { status: 'succeeded', reason: 'r'.repeat(300), output: '' },
            ];
            // Each outcome twice: written alone (the reference), and in one flush with the others.
            const claims = await runs.insertRuns(outcomes.flatMap((_, i) => [newRun(job, new Date(BASE + i * MINUTE)), newRun(job, new Date(BASE + i * MINUTE), { attempt: 2 })]));
            const all = claims.map((c) => (c as { run: RunRecord }).run);
            const alone = all.filter((r) => r.attempt === 1);
            const batched = all.filter((r) => r.attempt === 2);
            // An earlier tail behind the store's back: kept where the outcome carries no output.
            await k(RUNS_TABLE).whereIn('id', all.map((r) => Number(r.id))).update({ output: 'earlier tail' });
            for (const [i, r] of alone.entries()) expect(await runs.finishRun(r.id, 'node-a', outcomes[i]!), `alone ${i}`).toBe(true);
            const [gone, theirs] = (await runs.insertRuns([newRun(job, new Date(BASE + 100 * MINUTE)), newRun(job, new Date(BASE + 101 * MINUTE), { nodeId: 'node-b' })]))
              .map((c) => (c as { run: RunRecord }).run);
            await runs.finishRun(gone!.id, 'node-a', { status: 'skipped', reason: 'paused' });
            const goneRow = (await runs.periodRuns(job, gone!.scheduledAt))[0];
            statements.length = 0;
            const answers = await Promise.all([
              ...batched.map((r, i) => runs.endAttempt(r, 'node-a', outcomes[i]!, POLICY)),
              runs.endAttempt(gone!, 'node-a', { status: 'succeeded', error: 'x' }, POLICY),
              runs.endAttempt(theirs!, 'node-a', { status: 'succeeded', error: 'x' }, POLICY),
            ]);
            expect(answers).toEqual([...outcomes.map((o) => ({ written: true, status: o.status, next: null })), ...[0, 1].map(() => ({ written: false, status: 'succeeded', next: null }))]);
            // One UPDATE for the flush, then the two that matched nothing alone (one-row paths).
            expect(onRuns(statements).filter((s) => /^update /i.test(s))).toHaveLength(3);
            const rowOf = async (r: RunRecord) => (await runs.periodRuns(job, r.scheduledAt)).find((x) => x.attempt === r.attempt)!;
            for (const [i, o] of outcomes.entries()) {
              const [ref, got] = [await rowOf(alone[i]!), await rowOf(batched[i]!)];
              const same = (x: RunRecord) => ({ ...x, id: null, attempt: null, periodKey: null, startedAt: null, finishedAt: null, heartbeatAt: null, claimedAt: null, durationMs: o.bodyMsAgo ? x.durationMs : null });
              expect(same(got), `outcome ${i}`).toEqual(same(ref));
              expect(got.finishedAt, `outcome ${i}`).not.toBeNull();
              if (o.bodyMsAgo) {
                expect(got.durationMs).toBe(o.bodyMsAgo.started - o.bodyMsAgo.ended);
                expect(got.finishedAt!.getTime() - got.startedAt.getTime()).toBe(o.bodyMsAgo.started - o.bodyMsAgo.ended);
              } else {
                expect(got.startedAt).toEqual(batched[i]!.startedAt);
                expect(got.durationMs).toBe(got.finishedAt!.getTime() - got.startedAt.getTime());
              }
            }
            // The values as meant, not only as alone: NULLs NULL, long texts whole or cut with the note, tails kept or replaced.
            const got = await Promise.all(batched.map(rowOf));
            expect(got[0]).toMatchObject({ result: { a: 1 }, output: `tail ${'é'.repeat(65_000)}`, error: null, errorStack: null, resultNote: null, reason: null });
            expect(got[1]).toMatchObject({ result: null, resultNote: null, error: null, errorStack: null, reason: null, output: 'earlier tail' });
            expect(got[2]).toMatchObject({ result: null, output: null });
            expect(got[3]!.result).toBe('r'.repeat(200_000));
            expect(got[3]!.error).toMatch(/^stored late é+… \[truncated, 80012 bytes in all\]$/);
            expect(Buffer.byteLength(got[3]!.error!)).toBeLessThanOrEqual(60_000);
            expect(got[3]!.resultNote).toMatch(/^n+… \[truncated, 70000 bytes in all\]$/);
            expect(got[3]).toMatchObject({ errorStack: null, output: 'earlier tail' });
            expect(got[4]).toMatchObject({ result: null, resultNote: 'too big', error: 'e', errorStack: `Error: e\n${'    at f (x.ts:1:1)\n'.repeat(2_500)}`, durationMs: 0 });
            expect(got[5]).toMatchObject({ status: 'skipped', reason: 'overlap', result: null });
            expect(got[6]).toMatchObject({ reason: 'r'.repeat(200), output: '' });
            expect((await runs.periodRuns(job, gone!.scheduledAt))[0]).toEqual(goneRow);
            expect((await runs.periodRuns(job, theirs!.scheduledAt))[0]).toMatchObject({ status: 'running', finishedAt: null, error: null });
            await runs.finishRun(theirs!.id, 'node-b', { status: 'succeeded' });
          });
        } finally {
          await k.destroy();
        }
      });

      it('endAttempt coalesced: an outcome the store refuses fails its caller alone (as alone: not "unavailable"), the others are written; its status alone is then written', async () => {
        const job = `coal-bad-${uid()}`;
        const all = (await store.insertRuns(Array.from({ length: 6 }, (_, i) => newRun(job, new Date(BASE + i * MINUTE))))).map((c) => (c as { run: RunRecord }).run);
        // A value each backend refuses: a BIGINT out of range (MySQL strict, PostgreSQL); SQLite
        // stores any number, and better-sqlite3 refuses to bind an object.
        const refused: RunOutcome = store.kind === 'sqlite'
          ? { status: 'succeeded', resultJson: {} as unknown as string }
          : { status: 'succeeded', bodyMsAgo: { started: 1e300, ended: 0 } };
        const settled = await Promise.allSettled(all.map((r, i) => store.endAttempt(r, 'node-a', i === 3 ? refused : { status: 'succeeded', result: i }, POLICY)));
        for (const [i, s] of settled.entries()) {
          if (i === 3) {
            expect(s.status).toBe('rejected');
            expect((s as PromiseRejectedResult).reason).not.toBeInstanceOf(StoreUnavailableError);
          } else {
            expect(s, `run ${i}`).toEqual({ status: 'fulfilled', value: { written: true, status: 'succeeded', next: null } });
            expect((await store.periodRuns(job, all[i]!.scheduledAt))[0]).toMatchObject({ status: 'succeeded', result: i });
          }
        }
        expect((await store.periodRuns(job, all[3]!.scheduledAt))[0]!.status).toBe('running');
        expect(await store.endAttempt(all[3]!, 'node-a', { status: 'succeeded', error: 'outcome could not be stored' }, POLICY)).toEqual({ written: true, status: 'succeeded', next: null });
      });

      it('heartbeat of many runs at once: ONE UPDATE; runs no longer this node\'s running ones are told false, the others true and refreshed', async () => {
        await counted(async (runs, statements) => {
          const job = `beats-${uid()}`;
          const all = (await runs.insertRuns(Array.from({ length: 10 }, (_, i) => newRun(job, new Date(BASE + i * MINUTE), { nodeId: i === 8 ? 'node-b' : 'node-a', leaseMs: 30_000 + i }))))
            .map((c) => (c as { run: RunRecord }).run);
          const mine = all.filter((r) => r.nodeId === 'node-a');
          await waitFor('the store clock to move on', async () => (await runs.now()) > all[0]!.heartbeatAt!.getTime() + 20);
          statements.length = 0;
          expect(await Promise.all(mine.map((r) => runs.heartbeat(r.id, 'node-a', r.leaseMs, r)))).toEqual(mine.map(() => true));
          expect(statements).toHaveLength(1);
          expect(statements[0]).toMatch(/^update /i);
          const beaten = await runs.liveRunsOf([job]);
          for (const r of beaten.get(job)!) {
            if (r.nodeId === 'node-a') expect(r.heartbeatAt!.getTime()).toBeGreaterThan(all[0]!.heartbeatAt!.getTime());
            else expect(r.heartbeatAt).toEqual(all[8]!.heartbeatAt);
          }
          // One finished, one another node's, one unknown, one beaten twice in the flush.
          await runs.finishRun(all[0]!.id, 'node-a', { status: 'succeeded' });
          const answers = await Promise.all([
            runs.heartbeat(all[0]!.id, 'node-a', 30_000, all[0]),
            runs.heartbeat(all[8]!.id, 'node-a', 30_000, all[8]),
            runs.heartbeat('987654321', 'node-a', 30_000, all[1]),
            runs.heartbeat(all[1]!.id, 'node-a', 30_000, all[1]),
            ...mine.slice(1).map((r) => runs.heartbeat(r.id, 'node-a', 30_000, r)),
          ]);
          expect(answers).toEqual([false, false, false, true, ...mine.slice(1).map(() => true)]);
          // A row id that now names another attempt of this node (an id handed out again after a
          // failover lost the row): the beat matches nothing, alone or in a batch.
          expect(await runs.heartbeat(all[2]!.id, 'node-a', 30_000, all[3])).toBe(false);
          expect(await Promise.all([runs.heartbeat(all[2]!.id, 'node-a', 30_000, all[3]), runs.heartbeat(all[4]!.id, 'node-a', 30_000, all[4])])).toEqual([false, true]);
          // Beats of two nodes in one flush: one statement per node.
          statements.length = 0;
          expect(await Promise.all([runs.heartbeat(all[8]!.id, 'node-b', 30_000, all[8]), runs.heartbeat(all[2]!.id, 'node-a', 30_000, all[2]), runs.heartbeat(all[3]!.id, 'node-a', 30_000, all[3])])).toEqual([true, true, true]);
          expect(statements).toHaveLength(2);
          for (const r of all.slice(1)) await runs.finishRun(r.id, r.nodeId, { status: 'succeeded' });
        });
      });
    });

    describe('prune', () => {
      const DAY = 86_400_000;
      let pdb: FreshStore;
      let ps: KnexRunStore;
      let k: Knex;
      // A database of its own: prune works on the whole table, and the counts below are exact; each
      // case starts from an empty table.
      ownDatabase((own) => ({ pdb, ps, k } = own));

      /** Moves rows' started_at back by `ms` behind the store's back (the store stamps them with its clock). */
      async function age(ids: string[], ms: number): Promise<void> {
        await k(RUNS_TABLE).whereIn('id', ids.map(Number)).update({ started_at: k.raw('started_at - ?', [ms]) });
      }

      async function ids(job: string): Promise<string[]> {
        return (await k(RUNS_TABLE).select('id').where({ job }).orderBy('id')).map((r: { id: number | string }) => String(r.id));
      }

      /** n finished rows of `job` (succeeded, failed, skipped in turn), one period a minute from `from`. */
      async function finished(job: string, n: number, from = BASE): Promise<string[]> {
        const out: string[] = [];
        for (let i = 0; i < n; i++) {
          const at = new Date(from + i * MINUTE);
          if (i % 3 === 2) {
            await ps.insertSkipped([skipped(job, at)]);
            out.push((await ps.periodRuns(job, at))[0]!.id);
            continue;
          }
          const r = await inserted(ps, newRun(job, at));
          await ps.finishRun(r.id, 'node-a', i % 3 === 0 ? { status: 'succeeded' } : { status: 'failed', error: 'boom' });
          out.push(r.id);
        }
        return out;
      }

      it('deletes old finished rows in batches; rows younger than the cutoff stay; the cutoff is by the store clock', async () => {
        const job = `prune-${uid()}`;
        const old = await finished(job, 20);
        const young = await finished(job, 5, BASE + 100 * MINUTE);
        await age(old, 10 * DAY);
        await age(young.slice(0, 2), 4 * DAY);
        const before = await ps.now();
        const res = await ps.prune({ olderThanMs: 5 * DAY, batchSize: 7 });
        const after = await ps.now();
        expect(res).toMatchObject({ outcome: 'pruned', deleted: 20, dryRun: false, batches: 3 });
        expect(res.cutoff.getTime()).toBeGreaterThanOrEqual(before - 5 * DAY - 2);
        expect(res.cutoff.getTime()).toBeLessThanOrEqual(after - 5 * DAY + 2);
        expect(await ids(job)).toEqual(young);
        // Nothing more to do.
        expect(await ps.prune({ olderThanMs: 5 * DAY, batchSize: 7 })).toMatchObject({ outcome: 'pruned', deleted: 0, batches: 0 });
      });

      it("keeps each job's newest row (by started_at, then id) even when it is old", async () => {
        const a = `prune-new-a-${uid()}`;
        const b = `prune-new-b-${uid()}`;
        const c = `prune-new-c-${uid()}`;
        const rowsA = await finished(a, 4);
        const rowsB = await finished(b, 1);
        const rowsC = await finished(c, 3);
        // a: the newest by started_at is the first row inserted.
        await age(rowsA.slice(1), 20 * DAY);
        await age(rowsA.slice(0, 1), 10 * DAY);
        await age(rowsB, 20 * DAY);
        // c: all three at the same instant: the highest id is the newest.
        const same = (await ps.now()) - 20 * DAY;
        await k(RUNS_TABLE).whereIn('id', rowsC.map(Number)).update({ started_at: same });
        expect(await ps.prune({ olderThanMs: 5 * DAY, batchSize: 2 })).toMatchObject({ outcome: 'pruned', deleted: 3 + 0 + 2 });
        expect(await ids(a)).toEqual([rowsA[0]]);
        expect(await ids(b)).toEqual(rowsB);
        expect(await ids(c)).toEqual([rowsC[2]]);
        // And lastRuns still finds each job's last run.
        expect([...(await ps.lastRuns([a, b, c])).values()].map((r) => r.id).sort()).toEqual([rowsA[0], rowsB[0], rowsC[2]].sort());
      });

      it('keeps pending and running rows, and every attempt of a period that has one', async () => {
        const job = `prune-live-${uid()}`;
        // Period 0: attempt 1 failed with a retry owed (attempt 2 pending).
        const a1 = await inserted(ps, newRun(job, new Date(BASE)));
        const end = await ps.endAttempt(a1, 'node-a', { status: 'failed', error: 'boom' }, { retries: 3, retryDelayMs: 3_600_000 });
        expect(end.next?.status).toBe('pending');
        // Period 1: attempt 1 abandoned, attempt 2 running.
        const b1 = await inserted(ps, newRun(job, new Date(BASE + MINUTE)));
        await ps.finishRun(b1.id, 'node-a', { status: 'abandoned' });
        const b2 = await inserted(ps, newRun(job, new Date(BASE + MINUTE), { attempt: 2 }));
        // Period 2: a running attempt alone. Period 3: succeeded (the only row that may go). Period 4: the newest.
        const c1 = await inserted(ps, newRun(job, new Date(BASE + 2 * MINUTE)));
        const [d1] = await finished(job, 1, BASE + 3 * MINUTE);
        const [e1] = await finished(job, 1, BASE + 4 * MINUTE);
        await age([a1.id, end.next!.id, b1.id, b2.id, c1.id, d1!], 30 * DAY);
        await age([e1!], 20 * DAY);
        expect(await ps.prune({ olderThanMs: DAY, dryRun: true })).toMatchObject({ outcome: 'pruned', deleted: 1, dryRun: true });
        expect(await ps.prune({ olderThanMs: DAY })).toMatchObject({ outcome: 'pruned', deleted: 1 });
        expect(await ids(job)).toEqual([a1.id, end.next!.id, b1.id, b2.id, c1.id, e1].sort((x, y) => Number(x) - Number(y)));
        // Once the period's live attempt has ended, its old attempts may go.
        await ps.finishRun(b2.id, 'node-a', { status: 'succeeded' });
        expect(await ps.prune({ olderThanMs: DAY })).toMatchObject({ deleted: 2 });
        expect(await ids(job)).toEqual([a1.id, end.next!.id, c1.id, e1].sort((x, y) => Number(x) - Number(y)));
      });

      it('a dry run deletes nothing and counts what the prune then deletes', async () => {
        const job = `prune-dry-${uid()}`;
        const rows = await finished(job, 12);
        await age(rows, 40 * DAY);
        const dry = await ps.prune({ olderThanMs: 30 * DAY, dryRun: true, batchSize: 5 });
        expect(dry).toMatchObject({ outcome: 'pruned', deleted: 11, dryRun: true, batches: 0 });
        expect(await ids(job)).toEqual(rows);
        // A cutoff before every row: nothing at all.
        expect(await ps.prune({ olderThanMs: 50 * DAY })).toMatchObject({ deleted: 0 });
        const real = await ps.prune({ olderThanMs: 30 * DAY, batchSize: 5 });
        expect(real).toMatchObject({ outcome: 'pruned', deleted: 11, dryRun: false, batches: 3 });
        expect(await ids(job)).toEqual([rows[11]]);
      });

      it('an aborted signal stops before the next batch', async () => {
        const job = `prune-abort-${uid()}`;
        const rows = await finished(job, 4);
        await age(rows, 40 * DAY);
        const ac = new AbortController();
        ac.abort();
        expect(await ps.prune({ olderThanMs: DAY, signal: ac.signal })).toMatchObject({ outcome: 'aborted', deleted: 0 });
        expect(await ids(job)).toEqual(rows);
        expect(await ps.prune({ olderThanMs: DAY })).toMatchObject({ outcome: 'pruned', deleted: 3 });
      });

      it("another session holding the lock 'prune': skipped, nothing deleted (SQLite has no such lock: one writer at a time)", async () => {
        const job = `prune-lock-${uid()}`;
        const rows = await finished(job, 3);
        await age(rows, 40 * DAY);
        const other = await Database.open(pdb.config);
        try {
          const inside = await other.dialect.tryAdvisoryLock(other.knex, 'prune', () => ps.prune({ olderThanMs: DAY }));
          expect(inside).not.toBeNull();
          if (pdb.config.kind === 'sqlite') expect(inside).toMatchObject({ outcome: 'pruned', deleted: 2 });
          else {
            expect(inside).toMatchObject({ outcome: 'locked', deleted: 0, batches: 0 });
            expect(await ids(job)).toEqual(rows);
          }
        } finally {
          await other.close();
        }
        // The lock is free again afterwards.
        expect(await ps.prune({ olderThanMs: DAY })).toMatchObject({ outcome: 'pruned' });
        expect(await ids(job)).toEqual([rows[2]]);
      });

      it('two prunes at once from two nodes: one skips or both end consistent, every old row deleted once', async () => {
        const jobs = [`prune-race-a-${uid()}`, `prune-race-b-${uid()}`];
        const rows = [await finished(jobs[0]!, 30), await finished(jobs[1]!, 25)];
        await age([...rows[0]!, ...rows[1]!], 40 * DAY);
        await withStores(2, pdb.config, async ([s1, s2]) => {
          const results = await Promise.all([s1!.prune({ olderThanMs: DAY, batchSize: 4 }), s2!.prune({ olderThanMs: DAY, batchSize: 4 })]);
          for (const r of results) expect(['pruned', 'locked']).toContain(r.outcome);
          expect(results[0]!.deleted + results[1]!.deleted).toBe(29 + 24);
        });
        expect(await ids(jobs[0]!)).toEqual([rows[0]![29]]);
        expect(await ids(jobs[1]!)).toEqual([rows[1]![24]]);
      });
    });

  });
}

/** open() on a server that cannot be reached or refuses us (MariaDB and PostgreSQL both). */
export function describeOpenUnreachable(): void {
  describe('RunStore contract: open() on an unreachable store', () => {
    it.each([
      ['MariaDB', 'mysql' as const, 'mysql://root:s3cr3t-pw@127.0.0.1:1/x'],
      ['PostgreSQL', 'postgres' as const, 'postgres://postgres:s3cr3t-pw@127.0.0.1:1/x'],
    ])('%s: throws StoreUnavailableError, password redacted', async (_name, kind, url) => {
      const started = Date.now();
      const err = await KnexRunStore.open({ kind, url }).then(
        (s) => {
          void s.close();
          return new Error('open() resolved');
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect((err as StoreUnavailableError).code).toBe('E_STORE_UNAVAILABLE');
      const message = (err as Error).message;
      expect(message).not.toContain('s3cr3t-pw');
      expect(message).toContain('127.0.0.1:1');
      expect(message).toContain('***');
      expect(Date.now() - started).toBeLessThan(15_000);
    });

    it.each([
      ['MariaDB', 'mysql' as const, 'mysql://root:wrong-pw@127.0.0.1:3306/test'],
      ['PostgreSQL', 'postgres' as const, 'postgres://postgres:wrong-pw@127.0.0.1:5432/cron_no_such_db_contract'],
    ])('%s: a server that refuses us (bad password or database) is StoreUnavailableError too', async (_name, kind, url) => {
      const err = await KnexRunStore.open({ kind, url }).then(
        async (s) => {
          await s.close();
          return new Error('open() resolved');
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect((err as Error).message).not.toContain('wrong-pw');
    });
  });
}
