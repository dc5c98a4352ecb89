/**
 * The audit trail (`scheduler_audit`) over knex: SQLite, MySQL/MariaDB and PostgreSQL. One row per
 * operator action, stamped by the store's clock (one clock for every node and every operator's
 * machine), read newest first. Rows are few (operators act by hand), so reads and the prune are
 * single statements over the (at) and (job, at) indexes.
 */
import type { Knex } from 'knex';
import { Database } from './database.js';
import { AUDIT_TABLE } from './migrations.js';
import { storableText } from './runs/rows.js';
import type { AuditAction, AuditEntry, AuditQuery, AuditRecord, AuditResult, AuditStore } from './types.js';

/** The column sizes of migration 0013, in characters. */
export const AUDIT_LIMITS = { actor: 200, job: 100, period: 64, reason: 500 } as const;

interface Row {
  id: number | string;
  at: number | string;
  actor: string;
  action: string;
  job: string | null;
  period: string | null;
  reason: string | null;
  force: boolean | number | string;
  result: string;
  detail: string | null;
}

const toRecord = (r: Row): AuditRecord => ({
  id: String(r.id),
  at: Number(r.at),
  actor: r.actor,
  action: r.action as AuditAction,
  job: r.job,
  period: r.period,
  reason: r.reason,
  force: r.force === true || Number(r.force) === 1,
  result: r.result as AuditResult,
  detail: r.detail,
});

/** At most `max` characters (whole code points): a long value is cut rather than the row refused. */
function fit(value: string | null, max: number): string | null {
  if (value === null) return null;
  const chars = [...value];
  return chars.length <= max ? value : chars.slice(0, max).join('');
}

export class KnexAuditStore implements AuditStore {
  private readonly knex: Knex;
  constructor(private readonly db: Database) {
    this.knex = db.knex;
  }

  async record(entry: AuditEntry): Promise<AuditRecord> {
    const row = {
      at: this.db.nowRaw(),
      actor: fit(entry.actor, AUDIT_LIMITS.actor) ?? '',
      action: entry.action,
      job: fit(entry.job, AUDIT_LIMITS.job),
      period: fit(entry.period, AUDIT_LIMITS.period),
      reason: fit(entry.reason, AUDIT_LIMITS.reason),
      force: entry.force,
      result: entry.result,
      detail: storableText(entry.detail),
    };
    return this.db.wrap('record audit entry', async () => {
      // MySQL has no INSERT ... RETURNING: its answer is the new id, read back by it.
      if (this.db.kind === 'mysql') {
        const [id] = (await this.knex(AUDIT_TABLE).insert(row)) as number[];
        return toRecord((await this.knex(AUDIT_TABLE).where({ id }).first()) as Row);
      }
      const [stored] = (await this.knex(AUDIT_TABLE).insert(row).returning('*')) as Row[];
      return toRecord(stored!);
    });
  }

  async list(query: AuditQuery): Promise<AuditRecord[]> {
    const q = this.knex(AUDIT_TABLE).select('*');
    if (query.job !== undefined) q.where('job', query.job);
    if (query.since !== undefined) q.where('at', '>=', query.since.getTime());
    const rows = await this.db.wrap('read audit entries', () => q.orderBy('at', 'desc').orderBy('id', 'desc').limit(Math.max(1, query.limit)));
    return (rows as Row[]).map(toRecord);
  }

  async prune(olderThan: Date, options: { dryRun?: boolean } = {}): Promise<number> {
    const older = () => this.knex(AUDIT_TABLE).where('at', '<', olderThan.getTime());
    if (options.dryRun) {
      const row = (await this.db.wrap('count old audit entries', () => older().count({ n: '*' }).first())) as { n: number | string } | undefined;
      return Number(row?.n ?? 0);
    }
    // One statement: several nodes pruning at once delete the same rows, which is harmless.
    return Number(await this.db.wrap('prune audit entries', () => older().delete()));
  }
}
