/**
 * AuditStore conformance: the audit trail (`scheduler_audit`) on every backend, on real servers
 * (SQLite on a temp file, MariaDB and PostgreSQL on a fresh database each): record stamps the row by
 * the store's clock and returns it as stored; list reads newest first with the job, since and limit
 * filters; prune deletes (or counts) the rows older than a cutoff; values too long are cut, not refused.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_LIMITS, KnexAuditStore } from '../../src/store/audit.js';
import { Database } from '../../src/store/database.js';
import { AUDIT_TABLE } from '../../src/store/migrations.js';
import type { AuditEntry } from '../../src/store/types.js';
import { storeBackends, type StoreBackend } from '../helpers/databases.js';

const uid = (): string => randomBytes(4).toString('hex');

const entry = (over: Partial<AuditEntry> = {}): AuditEntry => ({
  actor: 'alice@web-1', action: 'pause', job: 'nightly', period: null, reason: null, force: false, result: 'done', detail: null, ...over,
});

for (const backend of storeBackends('cron_audit')) {
  describe(`AuditStore contract: ${backend.name}`, () => {
    let fresh: Awaited<ReturnType<StoreBackend['fresh']>>;
    let db: Database;
    let audit: KnexAuditStore;

    beforeAll(async () => {
      fresh = await backend.fresh();
      db = await Database.open(fresh.config);
      await db.migrate();
      audit = new KnexAuditStore(db);
    });

    afterAll(async () => {
      await db?.close();
      await fresh?.drop();
    });

    it('record writes one row stamped by the store clock and returns it as stored, every field', async () => {
      const before = await db.now();
      const e = entry({ action: 'rerun', job: `j-${uid()}`, period: '2026-11-30T18:00:00.000Z', reason: 'ledger fixed', force: true, result: 'refused', detail: 'period already succeeded' });
      const rec = await audit.record(e);
      const after = await db.now();
      expect(rec).toMatchObject(e);
      expect(rec.id).toMatch(/^\d+$/);
      expect(rec.at).toBeGreaterThanOrEqual(before - 2);
      expect(rec.at).toBeLessThanOrEqual(after + 2);
      const [listed] = await audit.list({ job: e.job!, limit: 10 });
      expect(listed).toEqual(rec);
    });

    it('a row without a job, period, reason or detail (prune) keeps them null; force defaults false', async () => {
      const rec = await audit.record(entry({ action: 'prune', job: null, detail: null }));
      expect(rec).toMatchObject({ action: 'prune', job: null, period: null, reason: null, detail: null, force: false, result: 'done' });
    });

    it('list: newest first (at, then id), filtered by job, since and limit', async () => {
      const job = `list-${uid()}`;
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push((await audit.record(entry({ job, detail: `#${i}` }))).id);
      await audit.record(entry({ job: `other-${uid()}` }));
      // Rows of one millisecond are ordered by id; older rows moved back by hand for `since`.
      await db.knex(AUDIT_TABLE).whereIn('id', ids.slice(0, 2)).update({ at: db.knex.raw(`${db.dialect.nowMs} - ?`, [3_600_000]) });
      const all = await audit.list({ job, limit: 100 });
      expect(all.map((r) => r.detail)).toEqual(['#3', '#2', '#1', '#0']);
      expect((await audit.list({ job, limit: 2 })).map((r) => r.detail)).toEqual(['#3', '#2']);
      const since = new Date((await db.now()) - 60_000);
      expect((await audit.list({ job, since, limit: 100 })).map((r) => r.detail)).toEqual(['#3', '#2']);
      const everyJob = await audit.list({ limit: 100 });
      expect(everyJob.length).toBeGreaterThanOrEqual(5);
      for (let i = 1; i < everyJob.length; i++) expect(everyJob[i - 1]!.at).toBeGreaterThanOrEqual(everyJob[i]!.at);
    });

    it('job names are compared byte-wise', async () => {
      const job = `Case-${uid()}`;
      await audit.record(entry({ job }));
      expect(await audit.list({ job: job.toLowerCase(), limit: 10 })).toEqual([]);
      expect(await audit.list({ job, limit: 10 })).toHaveLength(1);
    });

    it('prune deletes the rows older than the cutoff (dryRun counts them), and keeps the rest', async () => {
      const job = `prune-${uid()}`;
      const old = await audit.record(entry({ job, detail: 'old' }));
      await audit.record(entry({ job, detail: 'new' }));
      await db.knex(AUDIT_TABLE).where({ id: old.id }).update({ at: db.knex.raw(`${db.dialect.nowMs} - ?`, [10 * 86_400_000]) });
      const cutoff = new Date((await db.now()) - 86_400_000);
      const counted = await audit.prune(cutoff, { dryRun: true });
      expect(counted).toBeGreaterThanOrEqual(1);
      expect(await audit.list({ job, limit: 10 })).toHaveLength(2);
      expect(await audit.prune(cutoff)).toBe(counted);
      expect((await audit.list({ job, limit: 10 })).map((r) => r.detail)).toEqual(['new']);
      expect(await audit.prune(cutoff)).toBe(0);
    });

    it('values longer than their columns are cut to fit; a detail with NUL characters is stored', async () => {
      const rec = await audit.record(entry({
        actor: 'a'.repeat(300), job: `long-${uid()}`, period: `${'p'.repeat(100)}`, reason: 'é'.repeat(600), detail: `nul\u0000here ${'x'.repeat(70_000)}`,
      }));
      expect([...rec.actor]).toHaveLength(AUDIT_LIMITS.actor);
      expect(rec.period).toHaveLength(AUDIT_LIMITS.period);
      expect([...rec.reason!]).toHaveLength(AUDIT_LIMITS.reason);
      expect(rec.detail!.startsWith('nul\uFFFDhere')).toBe(true);
    });
  });
}
