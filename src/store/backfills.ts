/**
 * Backfills (`scheduler_backfills`) and their periods (`scheduler_backfill_periods`) over knex:
 * SQLite, MySQL/MariaDB and PostgreSQL. Times are the store's clock, in ms.
 *
 * The cluster-wide concurrency is kept by the claim: one transaction that locks the backfill's row
 * (SELECT ... FOR UPDATE; SQLite has one writer at a time anyway), counts its live claims (claimed,
 * lease not run out) and claims at most what is left. A node that dies leaves claims whose leases
 * run out: they count no longer, and the next claim takes them over.
 */
import type { Knex } from 'knex';
import { Database } from './database.js';
import { BACKFILL_PERIODS_TABLE, BACKFILLS_TABLE, RUNS_TABLE } from './migrations.js';
import type { BackfillCounts, BackfillPeriod, BackfillPeriodState, BackfillRecord, BackfillStatus, BackfillStore, NewBackfill } from './types.js';

interface Row {
  id: string;
  job: string;
  from_at: number | string;
  to_at: number | string;
  concurrency: number | string;
  force: boolean | number | string;
  status: string;
  total: number | string;
  created_at: number | string;
  created_by: string;
  updated_at: number | string;
  ended_at: number | string | null;
}

const STATES: readonly BackfillPeriodState[] = ['pending', 'claimed', 'succeeded', 'failed', 'skipped', 'cancelled'];
const noCounts = (): BackfillCounts => ({ pending: 0, claimed: 0, succeeded: 0, failed: 0, skipped: 0, cancelled: 0 });

const toRecord = (r: Row, counts: BackfillCounts): BackfillRecord => ({
  id: r.id,
  job: r.job,
  from: new Date(Number(r.from_at)),
  to: new Date(Number(r.to_at)),
  concurrency: Number(r.concurrency),
  force: r.force === true || Number(r.force) === 1,
  createdBy: r.created_by,
  status: r.status as BackfillStatus,
  total: Number(r.total),
  createdAt: new Date(Number(r.created_at)),
  updatedAt: new Date(Number(r.updated_at)),
  endedAt: r.ended_at === null ? null : new Date(Number(r.ended_at)),
  counts,
});

/** Period rows per INSERT (4 bindings each): knex writes SQLite's as a compound SELECT, at most 500 terms. */
const INSERT_CHUNK = 1000;
const SQLITE_INSERT_CHUNK = 400;

export class KnexBackfillStore implements BackfillStore {
  private readonly knex: Knex;
  constructor(private readonly db: Database) {
    this.knex = db.knex;
  }

  private get now(): Knex.Raw {
    return this.db.nowRaw();
  }

  async create(b: NewBackfill, periods: Date[]): Promise<BackfillRecord> {
    await this.db.transaction('create backfill', async (trx) => {
      await trx(BACKFILLS_TABLE).insert({
        id: b.id, job: b.job, from_at: b.from.getTime(), to_at: b.to.getTime(), concurrency: b.concurrency, force: b.force,
        status: 'running', total: periods.length, created_at: this.now, created_by: b.createdBy, updated_at: this.now, ended_at: null,
      });
      const chunk = this.db.kind === 'sqlite' ? SQLITE_INSERT_CHUNK : INSERT_CHUNK;
      for (let i = 0; i < periods.length; i += chunk) {
        await trx(BACKFILL_PERIODS_TABLE).insert(periods.slice(i, i + chunk).map((p, n) => ({ backfill_id: b.id, idx: i + n, scheduled_at: p.getTime(), state: 'pending' })));
      }
    });
    return (await this.get(b.id))!;
  }

  private async counts(ids: string[]): Promise<Map<string, BackfillCounts>> {
    const out = new Map<string, BackfillCounts>(ids.map((id) => [id, noCounts()]));
    if (ids.length === 0) return out;
    const rows = (await this.db.wrap('count backfill periods', () => this.knex(BACKFILL_PERIODS_TABLE).select('backfill_id', 'state').count({ n: '*' })
      .whereIn('backfill_id', ids).groupBy('backfill_id', 'state'))) as Array<{ backfill_id: string; state: string; n: number | string }>;
    for (const r of rows) {
      const c = out.get(r.backfill_id);
      if (c && (STATES as readonly string[]).includes(r.state)) c[r.state as BackfillPeriodState] = Number(r.n);
    }
    return out;
  }

  async get(id: string): Promise<BackfillRecord | undefined> {
    const row = (await this.db.wrap('read backfill', () => this.knex(BACKFILLS_TABLE).where({ id }).first())) as Row | undefined;
    if (!row) return undefined;
    return toRecord(row, (await this.counts([id])).get(id)!);
  }

  async list(options: { limit?: number; active?: boolean; job?: string } = {}): Promise<BackfillRecord[]> {
    const q = this.knex(BACKFILLS_TABLE).select('*').orderBy('created_at', 'desc').orderBy('id', 'desc').limit(options.limit ?? 50);
    if (options.active) q.whereIn('status', ['running', 'paused']);
    if (options.job !== undefined) q.where('job', options.job);
    const rows = (await this.db.wrap('read backfills', () => q)) as Row[];
    const counts = await this.counts(rows.map((r) => r.id));
    return rows.map((r) => toRecord(r, counts.get(r.id)!));
  }

  async running(): Promise<Array<Pick<BackfillRecord, 'id' | 'job' | 'concurrency' | 'force'>>> {
    const rows = (await this.db.wrap('read running backfills', () => this.knex(BACKFILLS_TABLE).select('id', 'job', 'concurrency', 'force').where('status', 'running').orderBy('created_at'))) as Row[];
    return rows.map((r) => ({ id: r.id, job: r.job, concurrency: Number(r.concurrency), force: r.force === true || Number(r.force) === 1 }));
  }

  async setStatus(id: string, from: BackfillStatus[], to: BackfillStatus): Promise<boolean> {
    return this.db.transaction('change backfill', async (trx) => {
      const ended = to === 'cancelled' || to === 'done';
      const n = await trx(BACKFILLS_TABLE).where({ id }).whereIn('status', from).update({ status: to, updated_at: this.now, ...(ended ? { ended_at: this.now } : {}) });
      if (n > 0 && to === 'cancelled') await trx(BACKFILL_PERIODS_TABLE).where({ backfill_id: id, state: 'pending' }).update({ state: 'cancelled', status: 'cancelled' });
      return n > 0;
    });
  }

  async claim(id: string, nodeId: string, leaseMs: number, max: number): Promise<BackfillPeriod[]> {
    const nowMs = this.db.dialect.nowMs;
    return this.db.transaction('claim backfill periods', async (trx) => {
      const lockRow = trx(BACKFILLS_TABLE).select('status', 'concurrency', 'job').where({ id });
      const b = (await (this.db.kind === 'sqlite' ? lockRow : lockRow.forUpdate()).first()) as Pick<Row, 'status' | 'concurrency' | 'job'> | undefined;
      if (!b || b.status !== 'running') return [];
      const [{ n } = { n: 0 }] = (await trx(BACKFILL_PERIODS_TABLE).count({ n: '*' }).where({ backfill_id: id, state: 'claimed' }).andWhereRaw(`lease_until > ${nowMs}`)) as Array<{ n: number | string }>;
      const free = Math.min(max, Number(b.concurrency) - Number(n));
      if (free <= 0) return [];
      // Claims whose holder's lease ran out first (a node died), then the next pending periods in order.
      const cols = ['idx', 'scheduled_at', 'base_attempt'];
      const lapsed = (await trx(BACKFILL_PERIODS_TABLE).select(cols).where({ backfill_id: id, state: 'claimed' }).andWhereRaw(`lease_until <= ${nowMs}`).orderBy('idx').limit(free)) as Array<{ idx: number; scheduled_at: number | string; base_attempt: number | null }>;
      const pending = lapsed.length < free
        ? (await trx(BACKFILL_PERIODS_TABLE).select(cols).where({ backfill_id: id, state: 'pending' }).andWhere((w) => w.whereNull('lease_until').orWhereRaw(`lease_until <= ${nowMs}`)).orderBy('idx').limit(free - lapsed.length)) as typeof lapsed
        : [];
      const taken = [...lapsed, ...pending];
      if (taken.length === 0) return [];
      await trx(BACKFILL_PERIODS_TABLE).where({ backfill_id: id }).whereIn('idx', taken.map((t) => t.idx)).update({ state: 'claimed', node_id: nodeId, lease_until: this.db.nowPlus(leaseMs) });
      // A period taken for the first time gets its base here (its last attempt before the backfill,
      // 0 if none): one read of the runs and one write per distinct base, inside the claim, instead
      // of two statements per period after it (setBase).
      const fresh = taken.filter((t) => t.base_attempt === null);
      if (fresh.length > 0) {
        const last = (await trx(RUNS_TABLE).select('scheduled_at').max({ attempt: 'attempt' }).where({ job: b.job, shard: 0 })
          .whereIn('scheduled_at', fresh.map((t) => Number(t.scheduled_at))).groupBy('scheduled_at')) as Array<{ scheduled_at: number | string; attempt: number | string }>;
        const lastAt = new Map(last.map((r) => [Number(r.scheduled_at), Number(r.attempt)]));
        const byBase = new Map<number, number[]>();
        for (const t of fresh) {
          const base = lastAt.get(Number(t.scheduled_at)) ?? 0;
          t.base_attempt = base;
          byBase.set(base, [...(byBase.get(base) ?? []), Number(t.idx)]);
        }
        for (const [base, idx] of byBase) await trx(BACKFILL_PERIODS_TABLE).where({ backfill_id: id }).whereIn('idx', idx).whereNull('base_attempt').update({ base_attempt: base });
      }
      return taken.map((t) => ({ backfillId: id, idx: Number(t.idx), scheduledAt: new Date(Number(t.scheduled_at)), baseAttempt: t.base_attempt === null ? null : Number(t.base_attempt) }));
    });
  }

  private byBackfill(periods: Array<{ backfillId: string; idx: number }>): Map<string, number[]> {
    const out = new Map<string, number[]>();
    for (const p of periods) out.set(p.backfillId, [...(out.get(p.backfillId) ?? []), p.idx]);
    return out;
  }

  async renew(nodeId: string, periods: Array<{ backfillId: string; idx: number }>, leaseMs: number): Promise<void> {
    for (const [id, idx] of this.byBackfill(periods)) {
      await this.db.wrap('renew backfill periods', () => this.knex(BACKFILL_PERIODS_TABLE).where({ backfill_id: id, state: 'claimed', node_id: nodeId }).whereIn('idx', idx).update({ lease_until: this.db.nowPlus(leaseMs) }));
    }
  }

  async setBase(backfillId: string, idx: number, base: number): Promise<number> {
    return this.db.wrap('set backfill period base', async () => {
      await this.knex(BACKFILL_PERIODS_TABLE).where({ backfill_id: backfillId, idx }).whereNull('base_attempt').update({ base_attempt: base });
      const row = (await this.knex(BACKFILL_PERIODS_TABLE).select('base_attempt').where({ backfill_id: backfillId, idx }).first()) as { base_attempt: number | string } | undefined;
      return Number(row?.base_attempt ?? base);
    });
  }

  async finish(backfillId: string, idx: number, state: Exclude<BackfillPeriodState, 'pending' | 'claimed'>, attempt: number | null, status: string): Promise<void> {
    await this.db.wrap('record backfill period', () => this.knex(BACKFILL_PERIODS_TABLE).where({ backfill_id: backfillId, idx }).whereIn('state', ['pending', 'claimed'])
      .update({ state, attempt, status, lease_until: null }));
  }

  async release(nodeId: string, periods: Array<{ backfillId: string; idx: number }>, delayMs: number): Promise<void> {
    for (const [id, idx] of this.byBackfill(periods)) {
      await this.db.wrap('give back backfill periods', () => this.knex(BACKFILL_PERIODS_TABLE).where({ backfill_id: id, state: 'claimed', node_id: nodeId }).whereIn('idx', idx)
        .update({ state: 'pending', node_id: null, lease_until: this.db.nowPlus(delayMs) }));
    }
  }

  async completeIfDone(id: string): Promise<boolean> {
    return this.db.transaction('complete backfill', async (trx) => {
      const open = await trx(BACKFILL_PERIODS_TABLE).select('idx').where({ backfill_id: id }).whereIn('state', ['pending', 'claimed']).first();
      if (open) return false;
      const n = await trx(BACKFILLS_TABLE).where({ id, status: 'running' }).update({ status: 'done', updated_at: this.now, ended_at: this.now });
      return n > 0;
    });
  }

  async succeededPeriods(job: string, from: Date, to: Date): Promise<number> {
    const [{ n } = { n: 0 }] = (await this.db.wrap('count succeeded periods', () => this.knex(RUNS_TABLE).countDistinct({ n: 'scheduled_at' })
      .where({ job, status: 'succeeded' }).andWhere('scheduled_at', '>=', from.getTime()).andWhere('scheduled_at', '<=', to.getTime()).whereNot('trigger', 'manual'))) as Array<{ n: number | string }>;
    return Number(n);
  }

  async prune(olderThan: Date, options: { dryRun?: boolean } = {}): Promise<number> {
    const old = this.knex(BACKFILLS_TABLE).select('id').whereIn('status', ['done', 'cancelled']).andWhere('ended_at', '<', olderThan.getTime());
    const ids = ((await this.db.wrap('read old backfills', () => old)) as Array<{ id: string }>).map((r) => r.id);
    if (options.dryRun || ids.length === 0) return ids.length;
    for (const id of ids) {
      await this.db.transaction('prune backfill', async (trx) => {
        await trx(BACKFILL_PERIODS_TABLE).where({ backfill_id: id }).del();
        await trx(BACKFILLS_TABLE).where({ id }).del();
      });
    }
    return ids.length;
  }
}
