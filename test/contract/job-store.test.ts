/**
 * JobStore conformance: the jobs table (`scheduler_jobs`) on every backend, on real servers (SQLite on
 * a temp file, MariaDB and PostgreSQL on a fresh database each): declare, get and advance, the store's
 * clock for seen_at, byte-wise names, chunked statements, and pause/resume (setPaused, paused, names).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/store/database.js';
import { KnexJobStore } from '../../src/store/jobs.js';
import { storeBackends, type StoreBackend } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';

const backends = storeBackends('cron_jobs');

const uid = (): string => randomBytes(4).toString('hex');
const T0 = Date.UTC(2026, 10, 30, 18, 0, 0);

for (const backend of backends) {
  describe(`JobStore contract: ${backend.name}`, () => {
    let fresh: Awaited<ReturnType<StoreBackend['fresh']>>;
    let db: Database;
    let jobs: KnexJobStore;

    beforeAll(async () => {
      fresh = await backend.fresh();
      db = await Database.open(fresh.config);
      await db.migrate();
      jobs = new KnexJobStore(db);
    });

    afterAll(async () => {
      await db?.close();
      await fresh?.drop();
    });

    it('declare inserts new jobs with their anchor, stamped by the store clock; get reads them back', async () => {
      const a = `decl-a-${uid()}`;
      const b = `decl-b-${uid()}`;
      const before = await db.now();
      const got = await jobs.declare([{ name: a, reconciledThrough: T0 }, { name: b, reconciledThrough: null }]);
      const after = await db.now();
      expect(got).toBeInstanceOf(Map);
      expect([...got.keys()].sort()).toEqual([a, b].sort());
      expect(got.get(a)).toMatchObject({ name: a, reconciledThrough: T0 });
      expect(got.get(b)).toMatchObject({ name: b, reconciledThrough: null });
      for (const r of got.values()) {
        expect(r.firstSeenAt).toBeGreaterThanOrEqual(before - 2);
        expect(r.firstSeenAt).toBeLessThanOrEqual(after + 2);
        expect(r.seenAt).toBeGreaterThanOrEqual(r.firstSeenAt - 2);
        expect(r.seenAt).toBeLessThanOrEqual(after + 2);
        expect(typeof r.seenAt).toBe('number');
      }
      expect(await jobs.get([a, b, `nope-${uid()}`])).toEqual(got);
      expect((await jobs.get([])).size).toBe(0);
      expect((await jobs.declare([])).size).toBe(0);
    });

    it('declare leaves existing jobs as they are (anchor and first seen unchanged) and marks every one seen again', async () => {
      const a = `redecl-${uid()}`;
      const first = (await jobs.declare([{ name: a, reconciledThrough: T0 }])).get(a)!;
      await waitFor('the store clock to move on', async () => (await db.now()) > first.seenAt + 20, 5_000, 10);
      const again = (await jobs.declare([{ name: a, reconciledThrough: T0 + 3_600_000 }, { name: `${a}-new`, reconciledThrough: 5 }]));
      expect(again.get(a)).toMatchObject({ name: a, reconciledThrough: T0, firstSeenAt: first.firstSeenAt });
      expect(again.get(a)!.seenAt).toBeGreaterThan(first.seenAt);
      expect(again.get(`${a}-new`)!.reconciledThrough).toBe(5);
      // A lower anchor, or none, does not change it either.
      expect((await jobs.declare([{ name: a, reconciledThrough: null }])).get(a)!.reconciledThrough).toBe(T0);
      expect((await jobs.declare([{ name: a, reconciledThrough: 1 }])).get(a)!.reconciledThrough).toBe(T0);
    });

    it('two stores declaring the same new jobs at once: one row each, every caller sees the same anchor', async () => {
      const other = await Database.open(fresh.config);
      try {
        const names = Array.from({ length: 5 }, (_, i) => `decl-race-${i}-${uid()}`);
        const [r1, r2] = await Promise.all([
          jobs.declare(names.map((name) => ({ name, reconciledThrough: T0 }))),
          new KnexJobStore(other).declare(names.map((name) => ({ name, reconciledThrough: T0 + 1 }))),
        ]);
        for (const n of names) {
          expect(r1.get(n)!.reconciledThrough, n).toBe(r2.get(n)!.reconciledThrough);
          expect([T0, T0 + 1]).toContain(r1.get(n)!.reconciledThrough);
        }
      } finally {
        await other.close();
      }
    });

    it('advance moves anchors forward only, sets a null one, and marks the jobs seen', async () => {
      const a = `adv-a-${uid()}`;
      const b = `adv-b-${uid()}`;
      const c = `adv-c-${uid()}`;
      const start = await jobs.declare([{ name: a, reconciledThrough: T0 }, { name: b, reconciledThrough: T0 }, { name: c, reconciledThrough: null }]);
      await waitFor('the store clock to move on', async () => (await db.now()) > start.get(a)!.seenAt + 20, 5_000, 10);
      await jobs.advance(new Map([[a, T0 + 60_000], [b, T0 - 60_000], [c, T0 + 5]]));
      const now = await jobs.get([a, b, c]);
      expect(now.get(a)!.reconciledThrough).toBe(T0 + 60_000);
      // A lower value never moves one back.
      expect(now.get(b)!.reconciledThrough).toBe(T0);
      expect(now.get(c)!.reconciledThrough).toBe(T0 + 5);
      for (const n of [a, b, c]) {
        expect(now.get(n)!.seenAt, n).toBeGreaterThan(start.get(n)!.seenAt);
        expect(now.get(n)!.firstSeenAt, n).toBe(start.get(n)!.firstSeenAt);
      }
      // The same value again: unchanged; an empty map: nothing; an unknown job is not created.
      await jobs.advance(new Map([[a, T0 + 60_000]]));
      await jobs.advance(new Map());
      const unknown = `adv-none-${uid()}`;
      await jobs.advance(new Map([[unknown, T0]]));
      expect((await jobs.get([a])).get(a)!.reconciledThrough).toBe(T0 + 60_000);
      expect((await jobs.get([unknown])).size).toBe(0);
      // Anchors far in the future are 64-bit values (no 32-bit truncation).
      const far = Date.UTC(2200, 0, 1);
      await jobs.advance(new Map([[a, far]]));
      expect((await jobs.get([a])).get(a)!.reconciledThrough).toBe(far);
    });

    it('names that differ only by case or accents are different jobs (compared byte-wise)', async () => {
      const base = `Report-${uid()}`;
      const names = [base, base.toLowerCase(), base.toUpperCase(), `${base}-e`, `${base}-é`, `${base}-É`, `${base}-e\u0301`];
      const declared = await jobs.declare(names.map((name, i) => ({ name, reconciledThrough: T0 + i })));
      expect(declared.size).toBe(names.length);
      names.forEach((n, i) => expect(declared.get(n)?.reconciledThrough, n).toBe(T0 + i));
      await jobs.advance(new Map(names.map((n, i) => [n, T0 + 100 * (i + 1)])));
      const got = await jobs.get(names);
      expect([...got.keys()].sort()).toEqual([...names].sort());
      names.forEach((n, i) => expect(got.get(n)!.reconciledThrough, n).toBe(T0 + 100 * (i + 1)));
      // Only the name asked for: not its case- or accent-folded twin.
      expect([...(await jobs.get([base.toLowerCase()])).keys()]).toEqual([base.toLowerCase()]);
      expect([...(await jobs.get([`${base}-é`])).keys()]).toEqual([`${base}-é`]);
    });

    it('setPaused pauses a job the table has not seen (its row created, store clock), paused() and get() show it; declare keeps it paused', async () => {
      const a = `pause-new-${uid()}`;
      const before = await db.now();
      expect(await jobs.setPaused(a, true, 'ledger migration')).toBe('changed');
      const after = await db.now();
      const row = (await jobs.get([a])).get(a)!;
      expect(row).toMatchObject({ name: a, paused: true, pausedReason: 'ledger migration', reconciledThrough: null });
      expect(row.pausedAt).toBeGreaterThanOrEqual(before - 2);
      expect(row.pausedAt).toBeLessThanOrEqual(after + 2);
      expect((await jobs.paused()).get(a)).toEqual({ reason: 'ledger migration', pausedAt: row.pausedAt });
      // A node declaring it later (with its anchor) neither resumes it nor loses the pause's reason.
      const declared = (await jobs.declare([{ name: a, reconciledThrough: T0 }])).get(a)!;
      expect(declared).toMatchObject({ paused: true, pausedReason: 'ledger migration', pausedAt: row.pausedAt });
      await jobs.advance(new Map([[a, T0]]));
      expect((await jobs.get([a])).get(a)).toMatchObject({ paused: true, reconciledThrough: T0 });
      expect(await jobs.names()).toContain(a);
    });

    it('pausing again is unchanged: a new reason replaces the old, none keeps it, the instant stays; resume clears all three; only paused jobs are listed', async () => {
      const a = `pause-again-${uid()}`;
      const b = `pause-other-${uid()}`;
      await jobs.declare([{ name: a, reconciledThrough: T0 }, { name: b, reconciledThrough: T0 }]);
      expect((await jobs.get([a])).get(a)).toMatchObject({ paused: false, pausedReason: null, pausedAt: null });
      expect(await jobs.setPaused(a, true)).toBe('changed');
      const first = (await jobs.get([a])).get(a)!;
      expect(first).toMatchObject({ paused: true, pausedReason: null });
      await waitFor('the store clock to move on', async () => (await db.now()) > first.pausedAt! + 20, 5_000, 10);
      expect(await jobs.setPaused(a, true, 'second reason')).toBe('unchanged');
      expect(await jobs.setPaused(a, true, null)).toBe('unchanged');
      expect((await jobs.get([a])).get(a)).toMatchObject({ paused: true, pausedReason: 'second reason', pausedAt: first.pausedAt });
      const listed = await jobs.paused();
      expect(listed.get(a)).toEqual({ reason: 'second reason', pausedAt: first.pausedAt });
      expect(listed.has(b)).toBe(false);
      expect(await jobs.setPaused(a, false)).toBe('changed');
      expect((await jobs.get([a])).get(a)).toMatchObject({ paused: false, pausedReason: null, pausedAt: null, reconciledThrough: T0 });
      expect((await jobs.paused()).has(a)).toBe(false);
      expect(await jobs.setPaused(a, false)).toBe('unchanged');
      expect(await jobs.setPaused(b, false)).toBe('unchanged');
    });

    it('two stores pausing the same job at once: one changes it, the other finds it paused; names() lists every job once, sorted', async () => {
      const other = await Database.open(fresh.config);
      try {
        const a = `pause-race-${uid()}`;
        const outcomes = await Promise.all([jobs.setPaused(a, true, 'one'), new KnexJobStore(other).setPaused(a, true, 'two')]);
        expect([...outcomes].sort()).toEqual(['changed', 'unchanged']);
        expect((await jobs.get([a])).get(a)!.paused).toBe(true);
        const names = await jobs.names();
        expect(names.filter((n) => n === a)).toHaveLength(1);
        expect(names).toEqual([...names].sort());
      } finally {
        await other.close();
      }
    });

    it('more than 200 jobs in one call (chunked): declare, get and advance each of them', async () => {
      const prefix = `many-${uid()}`;
      const names = Array.from({ length: 450 }, (_, i) => `${prefix}-${String(i).padStart(3, '0')}`);
      // Some exist already (in the second chunk), with an anchor of their own.
      await jobs.declare(names.filter((_, i) => i % 50 === 7).map((name) => ({ name, reconciledThrough: 42 })));
      const declared = await jobs.declare(names.map((name, i) => ({ name, reconciledThrough: i % 3 === 0 ? null : T0 + i })));
      expect(declared.size).toBe(450);
      names.forEach((n, i) => expect(declared.get(n)!.reconciledThrough, n).toBe(i % 50 === 7 ? 42 : i % 3 === 0 ? null : T0 + i));
      await jobs.advance(new Map(names.map((n, i) => [n, T0 + 2 * i])));
      const got = await jobs.get(names);
      expect(got.size).toBe(450);
      // Forward only: T0 + 2i beats T0 + i (and 42, and null), except at i = 0 where they are equal.
      names.forEach((n, i) => expect(got.get(n)!.reconciledThrough, n).toBe(T0 + 2 * i));
    });
  });
}
