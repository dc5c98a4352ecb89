/**
 * BackfillStore conformance: backfills and their periods on every backend, on real servers (SQLite
 * on a temp file, MariaDB and PostgreSQL on a fresh database each). Create writes the periods in
 * order (100,000 of them in chunks); claims from many connections at once never hold more than the
 * backfill's concurrency live; a claim whose lease ran out is taken over; the first claim of a period
 * sets its base attempt (its last attempt in the runs table, 0 if none), once; pause stops claims, cancel marks the pending periods; completeIfDone ends a backfill only
 * when nothing is pending or claimed; prune deletes ended ones with their periods.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KnexBackfillStore } from '../../src/store/backfills.js';
import { KnexRunStore } from '../../src/store/runs.js';
import { Database } from '../../src/store/database.js';
import { BACKFILL_PERIODS_TABLE } from '../../src/store/migrations.js';
import { storeBackends, type StoreBackend } from '../helpers/databases.js';

const uid = (): string => `bf-${randomBytes(5).toString('hex')}`;
const minutes = (n: number, from = Date.UTC(2026, 0, 1)) => Array.from({ length: n }, (_, i) => new Date(from + i * 60_000));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const backend of storeBackends('cron_backfills')) {
  describe(`BackfillStore contract: ${backend.name}`, () => {
    let fresh: Awaited<ReturnType<StoreBackend['fresh']>>;
    let db: Database;
    let store: KnexBackfillStore;
    const create = (n: number, concurrency: number, job = 'j') => {
      const periods = minutes(n);
      return store.create({ id: uid(), job, from: periods[0]!, to: periods.at(-1)!, concurrency, force: false, createdBy: 'alice@web-1' }, periods);
    };

    beforeAll(async () => {
      fresh = await backend.fresh();
      db = await Database.open(fresh.config);
      await db.migrate();
      store = new KnexBackfillStore(db);
    });

    afterAll(async () => {
      await db?.close();
      await fresh?.drop();
    });

    it('create writes the backfill and its periods (100,000 in chunks), pending, in order; get and list show the counts', async () => {
      const b = await create(100_000, 8, 'big');
      expect(b).toMatchObject({ job: 'big', status: 'running', total: 100_000, concurrency: 8, force: false, createdBy: 'alice@web-1', endedAt: null });
      expect(b.counts).toEqual({ pending: 100_000, claimed: 0, succeeded: 0, failed: 0, skipped: 0, cancelled: 0 });
      const [first] = await store.claim(b.id, 'n1', 10_000, 1);
      expect(first).toEqual({ backfillId: b.id, idx: 0, scheduledAt: new Date(Date.UTC(2026, 0, 1)), baseAttempt: 0 });
      expect((await store.list({ job: 'big' }))[0]!.counts.claimed).toBe(1);
      expect(await store.setStatus(b.id, ['running', 'paused'], 'cancelled')).toBe(true);
      expect((await store.get(b.id))!.counts).toMatchObject({ cancelled: 99_999, claimed: 1 });
    }, 120_000);

    it('claims from many connections at once never hold more than the concurrency; a lapsed claim is taken over', async () => {
      const b = await create(50, 5);
      const claims = await Promise.all(Array.from({ length: 12 }, (_, i) => store.claim(b.id, `n${i % 3}`, 60_000, 4).catch(() => [])));
      const taken = claims.flat();
      expect(taken).toHaveLength(5);
      expect(new Set(taken.map((p) => p.idx))).toEqual(new Set([0, 1, 2, 3, 4]));
      expect(await store.claim(b.id, 'n9', 60_000, 4)).toEqual([]);
      // Finishing one frees one slot.
      await store.finish(b.id, taken[0]!.idx, 'succeeded', 1, 'succeeded');
      expect((await store.claim(b.id, 'n9', 60_000, 4)).map((p) => p.idx)).toEqual([5]);
      // A short lease runs out: its periods count no longer and are taken over first.
      const c = await create(10, 2);
      await store.claim(c.id, 'dead', 300, 2);
      expect(await store.claim(c.id, 'alive', 60_000, 2)).toEqual([]);
      await sleep(700);
      expect((await store.claim(c.id, 'alive', 60_000, 2)).map((p) => p.idx)).toEqual([0, 1]);
      // Renewed leases hold.
      const d = await create(10, 1);
      const [held] = await store.claim(d.id, 'n1', 500, 1);
      for (let i = 0; i < 4; i++) {
        await sleep(200);
        await store.renew('n1', [held!], 500);
      }
      expect(await store.claim(d.id, 'n2', 500, 1)).toEqual([]);
    });

    it('the first claim of a period sets its base (its last attempt, 0 if none), kept when taken again; a period given back is not taken before its delay', async () => {
      const b = await create(3, 3, 'based');
      // The second period already has attempts 1 and 2 (the schedule ran it, then a retry).
      const runs = await KnexRunStore.open(fresh.config);
      const at = minutes(3)[1]!;
      for (const attempt of [1, 2]) {
        const r = await runs.insertRun({ job: 'based', scheduledAt: at, periodKey: `based@${at.toISOString()}`, attempt, trigger: 'schedule', nodeId: 'n0', leaseMs: 60_000 });
        if (r.outcome !== 'inserted') throw new Error(`setup: attempt ${attempt} not inserted`);
        await runs.finishRun(r.run.id, 'n0', { status: 'failed', error: 'x' });
      }
      await runs.close();
      const claimed = await store.claim(b.id, 'n1', 60_000, 2);
      expect(claimed.map((q) => [q.idx, q.baseAttempt])).toEqual([[0, 0], [1, 2]]);
      expect(await store.setBase(b.id, 1, 5)).toBe(2);
      await store.release('n1', [claimed[1]!], 0);
      expect((await store.claim(b.id, 'n2', 60_000, 1)).map((q) => [q.idx, q.baseAttempt])).toEqual([[1, 2]]);
      const c = await create(3, 3);
      const [p] = await store.claim(c.id, 'n1', 60_000, 1);
      await store.release('n1', [p!], 60_000);
      const next = await store.claim(c.id, 'n2', 60_000, 3);
      expect(next.map((q) => q.idx)).toEqual([1, 2]);
      await store.release('n2', next, 0);
      expect((await store.claim(c.id, 'n3', 60_000, 3)).map((q) => q.idx)).toEqual([1, 2]);
    });

    it('pause stops claims, resume lets them on; completeIfDone only once nothing is pending or claimed; prune', async () => {
      const b = await create(2, 2);
      expect(await store.setStatus(b.id, ['running'], 'paused')).toBe(true);
      expect(await store.setStatus(b.id, ['running'], 'paused')).toBe(false);
      expect(await store.claim(b.id, 'n1', 60_000, 2)).toEqual([]);
      expect(await store.setStatus(b.id, ['paused'], 'running')).toBe(true);
      const taken = await store.claim(b.id, 'n1', 60_000, 2);
      expect(await store.completeIfDone(b.id)).toBe(false);
      await store.finish(b.id, taken[0]!.idx, 'succeeded', 1, 'succeeded');
      expect(await store.completeIfDone(b.id)).toBe(false);
      await store.finish(b.id, taken[1]!.idx, 'failed', 1, 'failed');
      expect(await store.completeIfDone(b.id)).toBe(true);
      const done = (await store.get(b.id))!;
      expect(done.status).toBe('done');
      expect(done.endedAt).not.toBeNull();
      expect(done.counts).toMatchObject({ succeeded: 1, failed: 1 });
      expect((await store.running()).map((r) => r.id)).not.toContain(b.id);
      expect(await store.prune(new Date(Date.now() + 60_000), { dryRun: true })).toBeGreaterThanOrEqual(1);
      expect(await store.prune(new Date(Date.now() + 60_000))).toBeGreaterThanOrEqual(1);
      expect(await store.get(b.id)).toBeUndefined();
      expect(await db.knex(BACKFILL_PERIODS_TABLE).where({ backfill_id: b.id }).first()).toBeUndefined();
    });
  });
}
