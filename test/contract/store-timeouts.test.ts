/**
 * The store's statements are bounded: on a connection that answers nothing (a black hole: no error,
 * no reset), a statement that keeps a lease fails within a third of the lease, and the next one goes
 * out on a fresh connection; heartbeats have connections of their own, so statements queued on the
 * main pool cannot delay them. MariaDB and PostgreSQL (SQLite has no socket), through a proxy here.
 */
import knexFactory, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoreConfig } from '../../src/config/config.js';
import { StoreUnavailableError } from '../../src/errors.js';
import { leaseQueryTimeout } from '../../src/store/database.js';
import { RUNS_TABLE } from '../../src/store/migrations.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { RunRecord } from '../../src/store/types.js';
import { BlackHoleProxy } from '../helpers/black-hole.js';
import { createMariaDb, createPostgresDb, type TestDatabase } from '../helpers/databases.js';

interface Backend {
  name: string;
  kind: 'mysql' | 'postgres';
  create(): Promise<TestDatabase>;
  client: string;
}

const BACKENDS: Backend[] = [
  { name: 'MariaDB', kind: 'mysql', create: () => createMariaDb('cron_timeouts'), client: 'mysql2' },
  { name: 'PostgreSQL', kind: 'postgres', create: () => createPostgresDb('cron_timeouts'), client: 'pg' },
];

const LEASE_MS = 1500; // statements that keep it: 490 ms

for (const backend of BACKENDS) {
  describe(`store statement timeouts: ${backend.name}`, () => {
    let db: TestDatabase;
    let proxy: BlackHoleProxy;
    let store: KnexRunStore;
    let direct: Knex;
    let n = 0;

    beforeAll(async () => {
      db = await backend.create();
      proxy = new BlackHoleProxy(Number(new URL(db.url).port || (backend.kind === 'mysql' ? 3306 : 5432)));
      await proxy.start();
      const config: StoreConfig = { kind: backend.kind, url: proxy.urlFor(db.url) };
      store = await KnexRunStore.open(config);
      await store.migrate();
      direct = knexFactory({ client: backend.client, connection: db.url, pool: { min: 0, max: 2 } });
    });

    afterAll(async () => {
      proxy?.lift();
      await store?.close();
      await direct?.destroy();
      await proxy?.close();
      await db?.drop();
    });

    async function claim(): Promise<RunRecord> {
      const scheduledAt = new Date(Date.UTC(2026, 11, 1, 0, 0, n++));
      const res = await store.insertRun({ job: 'bounded', scheduledAt, periodKey: `bounded@${scheduledAt.toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: LEASE_MS });
      if (res.outcome !== 'inserted') throw new Error('setup: not inserted');
      return res.run;
    }

    async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value?: T; error?: unknown }> {
      const t0 = performance.now();
      try {
        const value = await fn();
        return { ms: performance.now() - t0, value };
      } catch (error) {
        return { ms: performance.now() - t0, error };
      }
    }

    it('a heartbeat into a black hole fails as "store unavailable" within lockTtl / 3; once the hole is lifted the next one lands on a fresh connection', async () => {
      const run = await claim();
      expect(await store.heartbeat(run.id, 'n1', LEASE_MS)).toBe(true);
      proxy.hole();
      try {
        const lost = await timed(() => store.heartbeat(run.id, 'n1', LEASE_MS));
        expect(lost.error).toBeInstanceOf(StoreUnavailableError);
        expect(lost.ms, `bounded by ${leaseQueryTimeout(LEASE_MS)} ms (+ slack)`).toBeLessThan(leaseQueryTimeout(LEASE_MS) + 400);
        // Still holed: the next statement (on a fresh connection, which connects to nothing) is bounded too.
        const again = await timed(() => store.heartbeat(run.id, 'n1', LEASE_MS));
        expect(again.error).toBeInstanceOf(StoreUnavailableError);
        expect(again.ms).toBeLessThan(1000 + 400);
      } finally {
        proxy.lift();
      }
      let landed: boolean | undefined;
      for (let i = 0; i < 10 && landed === undefined; i++) {
        landed = await store.heartbeat(run.id, 'n1', LEASE_MS).catch(() => undefined);
      }
      expect(landed).toBe(true);
    });

    it('an outcome transaction into a black hole fails in bounded time and writes nothing; the store works afterwards', async () => {
      const run = await claim();
      proxy.hole();
      let ended;
      try {
        ended = await timed(() => store.endAttempt(run, 'n1', { status: 'failed', error: 'boom' }, { retries: 2, retryDelayMs: 1000 }));
      } finally {
        proxy.lift();
      }
      expect(ended.error).toBeInstanceOf(StoreUnavailableError);
      // A few statements, each bounded: the whole transaction is bounded.
      expect(ended.ms).toBeLessThan(3 * leaseQueryTimeout(LEASE_MS) + 1500);
      const rows = await direct(RUNS_TABLE).where({ job: 'bounded', scheduled_at: run.scheduledAt.getTime() });
      expect(rows.map((r: { attempt: number; status: string }) => [Number(r.attempt), r.status])).toEqual([[1, 'running']]);
      // The store works afterwards: the outcome lands once, with attempt 2 owed. On a loaded machine a
      // try may time out on the client after the server committed it: the next try then recognises
      // its own outcome, and hears `written: true` with the attempt the committed try inserted.
      let written;
      for (let i = 0; i < 10 && !written; i++) written = await store.endAttempt(run, 'n1', { status: 'failed', error: 'boom' }, { retries: 2, retryDelayMs: 1000 }).catch(() => undefined);
      expect(written).toMatchObject({ written: true, status: 'failed', next: { attempt: 2, status: 'pending' } });
      const after = await direct(RUNS_TABLE).where({ job: 'bounded', scheduled_at: run.scheduledAt.getTime() }).orderBy('attempt');
      expect(after.map((r: { attempt: number; status: string }) => [Number(r.attempt), r.status])).toEqual([[1, 'failed'], [2, 'pending']]);
    });

    it('coalesced heartbeats and outcome writes into a black hole: every caller of the batch hears "store unavailable" in bounded time; once lifted, each lands', async () => {
      const runs = [await claim(), await claim(), await claim()];
      proxy.hole();
      let beats;
      let ends;
      try {
        beats = await timed(() => Promise.allSettled(runs.map((r) => store.heartbeat(r.id, 'n1', LEASE_MS))));
        ends = await timed(() => Promise.allSettled(runs.map((r) => store.endAttempt(r, 'n1', { status: 'succeeded', result: r.id }, null))));
      } finally {
        proxy.lift();
      }
      for (const settled of [beats.value!, ends.value!]) {
        expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
        for (const s of settled) expect((s as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
      }
      // One statement each, bounded by a third of the lease.
      expect(beats.ms).toBeLessThan(leaseQueryTimeout(LEASE_MS) + 1000);
      expect(ends.ms).toBeLessThan(leaseQueryTimeout(LEASE_MS) + 1000);
      // Tried again as the executor does, each lands once (a try that committed unseen is recognised).
      for (const r of runs) {
        let written;
        for (let i = 0; i < 10 && !written; i++) written = await store.endAttempt(r, 'n1', { status: 'succeeded', result: r.id }, null).catch(() => undefined);
        expect(written).toEqual({ written: true, status: 'succeeded', next: null });
      }
      const rows = await direct(RUNS_TABLE).whereIn('id', runs.map((r) => r.id));
      expect(rows.map((r: { status: string }) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    });

    it('heartbeats have their own connections: with the main pool taken by statements waiting on a row lock, a heartbeat lands at once', async () => {
      const run = await claim();
      const other = await claim();
      const blocker = await direct.transaction();
      try {
        await blocker(RUNS_TABLE).where({ id: run.id }).forUpdate().select('id');
        // Four statements (the main pool's size) that wait for the row lock, as a burst of claims would fill the pool.
        const waiting = Array.from({ length: 4 }, () => store.finishRun(run.id, 'n1', { status: 'succeeded' }, 30_000).catch(() => false));
        await new Promise((r) => setTimeout(r, 300));
        // A longer lease for this beat (its statement bounded by 2990 ms, not 490): what is tested is
        // that it does not wait behind the full main pool, whose statements wait until the blocker
        // rolls back below, not how fast a loaded server answers (a fresh connection, here).
        const beat = await timed(() => store.heartbeat(other.id, 'n1', 9000));
        expect(beat.error).toBeUndefined();
        expect(beat.value).toBe(true);
        await blocker.rollback();
        await Promise.all(waiting);
      } finally {
        if (!blocker.isCompleted()) await blocker.rollback();
      }
    });
  });
}
