/**
 * OnceStore conformance, and ctx.once over it: the once keys (`scheduler_once_keys`) on every backend
 * on real servers (SQLite on a temp file, MariaDB and PostgreSQL on a fresh database each). Callers
 * are real run rows (inserted as a claim would); a lost lease is a row whose heartbeat is moved back
 * past its lease, as a paused node's would be by the store's clock. Races are run for real: several
 * store instances with their own pools, at once.
 */
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RecordingObserver } from '../../src/events/events.js';
import { OnceFailedError, OnceFencedError, OnceFingerprintMismatchError, OnceInProgressError, OnceInputError } from '../../src/index.js';
import { makeOnce, StoreOnceBackend } from '../../src/once/once.js';
import type { OnceFunction } from '../../src/once/types.js';
import { Database } from '../../src/store/database.js';
import { ONCE_KEY_MAX, ONCE_TABLE, RUNS_TABLE } from '../../src/store/migrations.js';
import { KnexOnceStore } from '../../src/store/once.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { OnceCaller, RunRecord } from '../../src/store/types.js';
import { storeBackends, type StoreBackend } from '../helpers/databases.js';

const uid = (): string => randomBytes(4).toString('hex');
const log = pino({ level: 'silent' });

for (const backend of storeBackends('cron_once')) {
  describe(`OnceStore contract and ctx.once: ${backend.name}`, () => {
    let fresh: Awaited<ReturnType<StoreBackend['fresh']>>;
    let db: Database;
    let runs: KnexRunStore;
    let once: KnexOnceStore;
    /** More pools on the same store, for the races. */
    const others: Database[] = [];
    let period = Date.UTC(2026, 0, 1);

    /** A running attempt of `job` on `node`, claimed as the scheduler claims one. */
    const runRow = async (job = 'orders', node = 'node-a', leaseMs = 30_000): Promise<RunRecord> => {
      period += 1000;
      const r = await runs.insertRun({ job, scheduledAt: new Date(period), periodKey: `${job}@${new Date(period).toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: node, leaseMs });
      if (r.outcome !== 'inserted') throw new Error('claim lost');
      return r.run;
    };
    const callerOf = (r: RunRecord): OnceCaller => ({ job: r.job, runId: r.id, attempt: r.attempt, nodeId: r.nodeId });
    /** The run's lease ran out by the store's clock (its node paused or died). */
    const expireLease = (r: RunRecord) => db.knex(RUNS_TABLE).where({ id: r.id }).update({ heartbeat_at: db.knex.raw(`${db.dialect.nowMs} - ?`, [r.leaseMs + 1000]) });
    const ttl = { fingerprint: null, ttlMs: 86_400_000 };

    beforeAll(async () => {
      fresh = await backend.fresh();
      db = await Database.open(fresh.config);
      await db.migrate();
      runs = new KnexRunStore(db);
      once = new KnexOnceStore(db);
      for (let i = 0; i < 4; i++) others.push(await Database.open(fresh.config));
    });

    afterAll(async () => {
      for (const o of others) await o.close();
      await db?.close();
      await fresh?.drop();
    });

    it('take inserts an absent key as processing, held by the caller, stamped by the store clock; read judges the holder live', async () => {
      const run = await runRow();
      const key = `order_delivery:${uid()}`;
      expect(await once.read(key)).toBeNull();
      const before = await db.now();
      expect(await once.take(key, callerOf(run), { fingerprint: 'fp-1', ttlMs: 60_000 }, null)).toEqual({ outcome: 'taken', version: 1, attempts: 1 });
      const rec = await once.read(key);
      expect(rec).toMatchObject({
        key, job: 'orders', status: 'processing', fingerprint: 'fp-1', resultJson: null, error: null, attempts: 1, version: 1,
        holder: { runId: run.id, attempt: 1, nodeId: 'node-a' }, firstRunId: run.id, holderLive: true, expired: false,
      });
      expect(rec!.createdAt).toBeGreaterThanOrEqual(before - 2);
      expect(rec!.expiresAt - rec!.createdAt).toBe(60_000);
    });

    it('a second caller loses the insert (changed), and cannot take a key whose holder is live', async () => {
      const [a, b] = [await runRow(), await runRow('other-job', 'node-b')];
      const key = `k:${uid()}`;
      expect((await once.take(key, callerOf(a), ttl, null)).outcome).toBe('taken');
      expect(await once.take(key, callerOf(b), ttl, null)).toEqual({ outcome: 'changed' });
      const seen = await once.read(key);
      expect(await once.take(key, callerOf(b), ttl, seen)).toEqual({ outcome: 'changed' });
      expect((await once.read(key))!.holder.runId).toBe(a.id);
    });

    it('settle stores the result once, by compare-and-set on the version; a stale token writes nothing', async () => {
      const run = await runRow();
      const key = `k:${uid()}`;
      const t = await once.take(key, callerOf(run), ttl, null);
      if (t.outcome !== 'taken') throw new Error('not taken');
      expect(await once.settle(key, callerOf(run), t.version, { status: 'succeeded', resultJson: '{"delivered":true}' })).toBe(true);
      expect(await once.settle(key, callerOf(run), t.version, { status: 'failed', error: 'late' })).toBe(false);
      expect(await once.read(key)).toMatchObject({ status: 'succeeded', resultJson: '{"delivered":true}', error: null, version: 2 });
    });

    it('fenced: an attempt that no longer owns its run row (finished, lease expired, another node or attempt) takes no key', async () => {
      const finished = await runRow();
      await runs.finishRun(finished.id, finished.nodeId, { status: 'succeeded' });
      const stale = await runRow();
      await expireLease(stale);
      const live = await runRow();
      const key = `k:${uid()}`;
      expect(await once.take(key, callerOf(finished), ttl, null)).toEqual({ outcome: 'fenced' });
      expect(await once.take(key, callerOf(stale), ttl, null)).toEqual({ outcome: 'fenced' });
      expect(await once.take(key, { ...callerOf(live), nodeId: 'node-z' }, ttl, null)).toEqual({ outcome: 'fenced' });
      expect(await once.take(key, { ...callerOf(live), attempt: 2 }, ttl, null)).toEqual({ outcome: 'fenced' });
      expect(await once.read(key)).toBeNull();
    });

    it('a holder whose lease ran out but whose row nobody took over still stores its result (as its outcome write would)', async () => {
      const slow = await runRow('orders', 'node-a', 2000);
      const key = `k:${uid()}`;
      const t = await once.take(key, callerOf(slow), ttl, null);
      if (t.outcome !== 'taken') throw new Error('not taken');
      await expireLease(slow);
      expect(await once.settle(key, callerOf(slow), t.version, { status: 'succeeded', resultJson: '1' })).toBe(true);
      expect(await once.read(key)).toMatchObject({ status: 'succeeded', resultJson: '1', attempts: 1 });
      // Taking another key needs a fresh lease.
      expect(await once.take(`k:${uid()}`, callerOf(slow), ttl, null)).toEqual({ outcome: 'fenced' });
    });

    it('a holder that lost its lease stores nothing once the next caller took the key over, nor once its row was taken over', async () => {
      const [paused, next] = [await runRow('orders', 'node-a', 2000), await runRow('orders', 'node-b')];
      const key = `k:${uid()}`;
      const t = await once.take(key, callerOf(paused), ttl, null);
      if (t.outcome !== 'taken') throw new Error('not taken');
      await expireLease(paused);
      const seen = await once.read(key);
      expect(seen).toMatchObject({ status: 'processing', holderLive: false });
      const t2 = await once.take(key, callerOf(next), ttl, seen);
      expect(t2).toEqual({ outcome: 'taken', version: 2, attempts: 2 });
      // The paused node wakes and heartbeats again: its row is live, but the key is not its any more.
      await db.knex(RUNS_TABLE).where({ id: paused.id }).update({ heartbeat_at: db.nowRaw() });
      expect(await once.settle(key, callerOf(paused), t.version, { status: 'succeeded', resultJson: '1' })).toBe(false);
      expect(await once.settle(key, callerOf(next), 2, { status: 'succeeded', resultJson: '2' })).toBe(true);
      // A holder whose run row was taken over (abandoned) cannot settle its key either.
      const gone = await runRow('orders', 'node-a');
      const key2 = `k:${uid()}`;
      const t3 = await once.take(key2, callerOf(gone), ttl, null);
      if (t3.outcome !== 'taken') throw new Error('not taken');
      await db.knex(RUNS_TABLE).where({ id: gone.id }).update({ status: 'abandoned' });
      expect(await once.settle(key2, callerOf(gone), t3.version, { status: 'succeeded', resultJson: '3' })).toBe(false);
      expect(await once.read(key)).toMatchObject({ status: 'succeeded', resultJson: '2', attempts: 2, firstRunId: paused.id, holder: { runId: next.id, nodeId: 'node-b' } });
      expect(await once.retried()).toBeGreaterThanOrEqual(1);
    });

    it('races: of five pools inserting one key, one takes it; of five taking over one failed key, one does', async () => {
      const callers = await Promise.all([0, 1, 2, 3, 4].map((i) => runRow('orders', `node-${i}`)));
      const stores = [once, ...others.map((o) => new KnexOnceStore(o))];
      const key = `race:${uid()}`;
      const inserts = await Promise.all(stores.map((s, i) => s.take(key, callerOf(callers[i]!), ttl, null)));
      expect(inserts.filter((r) => r.outcome === 'taken')).toHaveLength(1);
      const winner = callers[inserts.findIndex((r) => r.outcome === 'taken')]!;
      expect(await once.settle(key, callerOf(winner), 1, { status: 'failed', error: 'boom' })).toBe(true);
      const seen = await once.read(key);
      const takeovers = await Promise.all(stores.map((s, i) => s.take(key, callerOf(callers[i]!), ttl, seen)));
      expect(takeovers.filter((r) => r.outcome === 'taken')).toHaveLength(1);
      expect(takeovers.filter((r) => r.outcome === 'changed')).toHaveLength(4);
      expect(await once.read(key)).toMatchObject({ status: 'processing', attempts: 2, error: null, version: 3 });
    });

    it('an expired key counts as absent (taken afresh); prune deletes expired keys but not one processing under a live holder', async () => {
      const [a, b] = [await runRow(), await runRow()];
      const [done, busy] = [`exp:${uid()}`, `exp:${uid()}`];
      for (const key of [done, busy]) expect((await once.take(key, callerOf(a), ttl, null)).outcome).toBe('taken');
      await once.settle(done, callerOf(a), 1, { status: 'succeeded', resultJson: '"old"' });
      await db.knex(ONCE_TABLE).whereIn('key', [done, busy]).update({ expires_at: db.knex.raw(`${db.dialect.nowMs} - 1`) });
      const seen = await once.read(done);
      expect(seen).toMatchObject({ expired: true, status: 'succeeded' });
      expect(await once.read(busy)).toMatchObject({ expired: false, holderLive: true });
      expect(await once.take(done, callerOf(b), { fingerprint: 'new', ttlMs: 5000 }, seen)).toMatchObject({ outcome: 'taken', attempts: 1 });
      expect(await once.read(done)).toMatchObject({ firstRunId: b.id, attempts: 1, fingerprint: 'new', resultJson: null, expired: false });
      // Expire both again: the finished one goes, the live holder's stays.
      await once.settle(done, callerOf(b), seen!.version + 1, { status: 'succeeded', resultJson: '"new"' });
      await db.knex(ONCE_TABLE).whereIn('key', [done, busy]).update({ expires_at: db.knex.raw(`${db.dialect.nowMs} - 1`) });
      expect(await once.pruneExpired({ dryRun: true })).toBe(1);
      expect(await once.pruneExpired({ batchSize: 1 })).toBe(1);
      expect(await once.read(done)).toBeNull();
      expect(await once.read(busy)).not.toBeNull();
    });

    it('list filters by prefix (byte-wise, % and _ are plain characters), status and job; keys are case-sensitive and hold 191 characters of any script', async () => {
      const run = await runRow('lister');
      const p = `lst_${uid()}%`;
      const long = `${p}:${'é'.repeat(50)}${'😀'.repeat(ONCE_KEY_MAX - 50 - [...p].length - 1)}`;
      expect([...long].length).toBe(ONCE_KEY_MAX);
      for (const key of [`${p}:Order:1`, `${p}:order:1`, long]) expect((await once.take(key, callerOf(run), ttl, null)).outcome).toBe('taken');
      await once.settle(`${p}:order:1`, callerOf(run), 1, { status: 'succeeded', resultJson: 'null' });
      // Neither a LIKE pattern nor a case fold: 'lstX...' and 'LST_...' are not under the prefix.
      await once.take(`${p.replace('_', 'X')}:other`, callerOf(run), ttl, null);
      await once.take(`${p.toUpperCase()}:other`, callerOf(run), ttl, null);
      const all = await once.list({ prefix: p });
      expect(all.map((r) => r.key).sort()).toEqual([`${p}:Order:1`, `${p}:order:1`, long].sort());
      expect((await once.read(long))!.key).toBe(long);
      expect((await once.list({ prefix: p, status: 'succeeded' })).map((r) => r.key)).toEqual([`${p}:order:1`]);
      expect(await once.list({ prefix: p, job: 'nobody' })).toEqual([]);
      expect(await once.list({ prefix: p, limit: 1 })).toHaveLength(1);
    });

    describe('ctx.once over the store', () => {
      const recorder = new RecordingObserver();
      /** ctx.once as a body of `run` gets it. */
      const ctxOnce = (run: RecordingRun, opts: { dryRun?: boolean } = {}): OnceFunction => makeOnce(run.row.job, new StoreOnceBackend({
        store: once, caller: callerOf(run.row), signal: run.controller.signal, dryRun: opts.dryRun ?? false, log, events: recorder,
      }), run.controller.signal, 1024 * 1024);
      interface RecordingRun { row: RunRecord; controller: AbortController }
      const attempt = async (job = 'orders', node = 'node-a', leaseMs = 30_000): Promise<RecordingRun> => ({ row: await runRow(job, node, leaseMs), controller: new AbortController() });
      const resultsOf = (key: string) => recorder.of('once').filter((e) => e.key === key).map((e) => e.result);

      it('the first caller runs fn and gets its result through JSON; later callers (other runs, jobs, nodes) get it without running fn', async () => {
        const key = `order_delivery:${uid()}`;
        let calls = 0;
        const fn = () => {
          calls++;
          return { id: 123, at: new Date(Date.UTC(2026, 11, 1)), skip: undefined };
        };
        const first = await ctxOnce(await attempt()).detailed(key, fn);
        expect(first).toEqual({ value: { id: 123, at: '2026-12-01T00:00:00.000Z' }, replayed: false, attempts: 1 });
        const again = await ctxOnce(await attempt('another-job', 'node-b')).detailed(key, fn);
        expect(again).toEqual({ value: first.value, replayed: true, attempts: 1 });
        expect(await ctxOnce(await attempt())(key, fn)).toEqual(first.value);
        expect(calls).toBe(1);
        expect(resultsOf(key)).toEqual(['executed', 'replayed', 'replayed']);
        // undefined stays undefined on replay.
        const none = `none:${uid()}`;
        expect(await ctxOnce(await attempt())(none, () => undefined)).toBeUndefined();
        expect(await ctxOnce(await attempt()).detailed(none, () => 1)).toEqual({ value: undefined, replayed: true, attempts: 1 });
      });

      it('a concurrent caller waits for the holder and replays its result; past options.wait it gets OnceInProgressError naming the holder', async () => {
        const key = `slow:${uid()}`;
        const holder = await attempt('orders', 'node-a');
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        const running = ctxOnce(holder)(key, async () => {
          await gate;
          return 'done';
        });
        await expect.poll(async () => (await once.read(key))?.status).toBe('processing');
        const impatient = ctxOnce(await attempt('orders', 'node-b'))(key, () => 'second', { wait: '150ms' });
        await expect(impatient).rejects.toBeInstanceOf(OnceInProgressError);
        const err = (await impatient.catch((e: unknown) => e)) as OnceInProgressError;
        expect(err.holder).toEqual({ job: 'orders', runId: holder.row.id, attempt: 1, nodeId: 'node-a' });
        expect(err.message).toContain(`run ${holder.row.id}`);
        const patient = ctxOnce(await attempt('orders', 'node-c')).detailed(key, () => 'second', { wait: '10s' });
        setTimeout(release, 300);
        expect(await running).toBe('done');
        expect(await patient).toEqual({ value: 'done', replayed: true, attempts: 1 });
        expect(resultsOf(key)).toEqual(['in_progress', 'executed', 'replayed']);
      });

      it('a failed fn leaves the key failed with its error; the next caller runs it again, or with retryFailed: false gets OnceFailedError', async () => {
        const key = `flaky:${uid()}`;
        await expect(ctxOnce(await attempt())(key, () => { throw new Error('carrier down'); })).rejects.toThrow('carrier down');
        expect(await once.read(key)).toMatchObject({ status: 'failed', error: 'carrier down', attempts: 1 });
        const refused = ctxOnce(await attempt())(key, () => 'x', { retryFailed: false });
        await expect(refused).rejects.toBeInstanceOf(OnceFailedError);
        await expect(refused).rejects.toMatchObject({ storedError: 'carrier down', code: 'E_ONCE_FAILED' });
        expect(await ctxOnce(await attempt()).detailed(key, ({ attempt: n }) => `ok on ${n}`)).toEqual({ value: 'ok on 2', replayed: false, attempts: 2 });
        expect(resultsOf(key)).toEqual(['failed', 'executed']);
      });

      it('another fingerprint for a stored key is refused and the key is untouched', async () => {
        const key = `fp:${uid()}`;
        await ctxOnce(await attempt())(key, () => 1, { fingerprint: 'sha256:aaa' });
        const before = await once.read(key);
        const wrong = ctxOnce(await attempt())(key, () => 2, { fingerprint: 'sha256:bbb' });
        await expect(wrong).rejects.toBeInstanceOf(OnceFingerprintMismatchError);
        await expect(wrong).rejects.toThrow(`ctx.once('${key}') in job 'orders': the key is stored with fingerprint 'sha256:aaa', not 'sha256:bbb'`);
        expect(await once.read(key)).toEqual(before);
        expect(await ctxOnce(await attempt())(key, () => 3, { fingerprint: 'sha256:aaa' })).toBe(1);
      });

      it('bad input: one line naming the job and the key; nothing written, or the key left failed (not processing) for a result JSON cannot hold', async () => {
        const o = ctxOnce(await attempt('billing'));
        const tooLong = 'x'.repeat(ONCE_KEY_MAX + 1);
        await expect(o(tooLong, () => 1)).rejects.toThrow(new RegExp(`^ctx\\.once\\('x{60}…'\\) in job 'billing': the key is ${ONCE_KEY_MAX + 1} characters long, over the ${ONCE_KEY_MAX}`));
        await expect(o('', () => 1)).rejects.toThrow("ctx.once in job 'billing': the key must be a non-empty string, got an empty string");
        const key = `bad:${uid()}`;
        await expect(o(key, 'not a function' as never)).rejects.toThrow(`ctx.once('${key}') in job 'billing': fn must be a function, got string`);
        await expect(o(key, () => 1, { ttl: 'soon' })).rejects.toBeInstanceOf(OnceInputError);
        // The drivers would store both as 'half:\uFFFD', one key: refused instead.
        await expect(o('half:\uD83D', () => 1)).rejects.toThrow("ctx.once('half:\uD83D') in job 'billing': the key contains a lone UTF-16 surrogate");
        await expect(o(key, () => 1, { fingerprint: 'f\uDE00' })).rejects.toBeInstanceOf(OnceInputError);
        expect(await once.read('half:\uFFFD')).toBeNull();
        expect(await once.read(key)).toBeNull();
        const big = o(key, () => ({ n: 10n }));
        await expect(big).rejects.toThrow(new RegExp(`^ctx\\.once\\('${key}'\\) in job 'billing': fn's result cannot be stored: not JSON-serialisable .*; the key is left failed$`));
        expect(await once.read(key)).toMatchObject({ status: 'failed', error: expect.stringContaining('not JSON-serialisable') });
      });

      it('a dry run writes no key: it replays a stored result, otherwise runs fn and stores nothing', async () => {
        const key = `dry:${uid()}`;
        const dry = ctxOnce(await attempt(), { dryRun: true });
        expect(await dry.detailed(key, () => 'dry value')).toEqual({ value: 'dry value', replayed: false, attempts: 1 });
        expect(await once.read(key)).toBeNull();
        await ctxOnce(await attempt())(key, () => 'real');
        expect(await dry.detailed(key, () => 'dry value')).toEqual({ value: 'real', replayed: true, attempts: 1 });
      });

      it('a caller whose lease was lost while fn ran stores nothing; the next caller takes the key over and runs fn again', async () => {
        const key = `lost:${uid()}`;
        const paused = await attempt('orders', 'node-a', 2000);
        const stored = ctxOnce(paused)(key, async () => {
          // As the executor's self-fencing does when its heartbeats stop being confirmed; the store's lease runs out too.
          paused.controller.abort('lease-lost');
          await expireLease(paused.row);
          return 'late';
        });
        await expect(stored).rejects.toBeInstanceOf(OnceFencedError);
        expect(await once.read(key)).toMatchObject({ status: 'processing', holderLive: false, resultJson: null });
        // An aborted caller takes no key either.
        await expect(ctxOnce(paused)(`${key}:2`, () => 1)).rejects.toBeInstanceOf(OnceFencedError);
        expect(await once.read(`${key}:2`)).toBeNull();
        expect(await ctxOnce(await attempt('orders', 'node-b')).detailed(key, () => 'again')).toEqual({ value: 'again', replayed: false, attempts: 2 });
      });
    });
  });
}
