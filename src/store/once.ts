/**
 * The ctx.once keys (`scheduler_once_keys`) over knex: SQLite, MySQL/MariaDB and PostgreSQL. One row
 * per business key, global across jobs. Every write is fenced in its own statement by the caller's run
 * row (running, on the caller's node, at the caller's attempt, its lease fresh by the store's clock)
 * and, for an existing key, is a compare-and-set on `version`: a paused attempt whose lease ran out
 * cannot take a key or store a result, and of two callers only one takes a key.
 */
import type { Knex } from 'knex';
import { Database } from './database.js';
import { ONCE_TABLE, RUNS_TABLE } from './migrations.js';
import { storableText } from './runs/rows.js';
import type { OnceCaller, OnceQuery, OnceRecord, OnceStatus, OnceStore, OnceTakeResult } from './types.js';

interface Row {
  key: string;
  job: string;
  status: string;
  fingerprint: string | null;
  result: string | null;
  error: string | null;
  attempts: number | string;
  version: number | string;
  holder_run_id: number | string;
  holder_attempt: number | string;
  holder_node: string;
  first_run_id: number | string;
  created_at: number | string;
  updated_at: number | string;
  expires_at: number | string;
  holder_live: number | string | boolean | null;
  store_now: number | string;
}

const truthy = (v: number | string | boolean | null): boolean => v === true || Number(v) === 1;

function toRecord(r: Row): OnceRecord {
  const status = r.status as OnceStatus;
  const holderLive = truthy(r.holder_live);
  const expiresAt = Number(r.expires_at);
  return {
    key: r.key,
    job: r.job,
    status,
    fingerprint: r.fingerprint,
    resultJson: r.result,
    error: r.error,
    attempts: Number(r.attempts),
    version: Number(r.version),
    holder: { runId: String(r.holder_run_id), attempt: Number(r.holder_attempt), nodeId: r.holder_node },
    firstRunId: String(r.first_run_id),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    expiresAt,
    holderLive,
    // A key processing under a live holder is never absent, whatever its age: fn may be running.
    expired: expiresAt < Number(r.store_now) && !(status === 'processing' && holderLive),
  };
}

/** A run id as the runs table's key: run ids are the bigint ids of attempts (a dry run's fake id matches no row). */
const runIdValue = (id: string): number => (/^\d+$/.test(id) ? Number(id) : -1);

export class KnexOnceStore implements OnceStore {
  private readonly knex: Knex;
  constructor(private readonly db: Database) {
    this.knex = db.knex;
  }

  private get now(): string {
    return this.db.dialect.nowMs;
  }

  /**
   * SQL (with bindings): the caller's attempt owns its run row now: running on the caller's node at its
   * attempt and, with `fresh`, its lease unexpired by the store's clock. Taking a key needs a fresh
   * lease; storing fn's outcome needs the row alone, as the attempt's own outcome write does (a row not
   * yet taken over is still the attempt's, and the key's version says nobody took the key over), so
   * that a result whose write was slow is not lost and fn run again.
   */
  private owns(caller: OnceCaller, fresh = true): [string, Knex.RawBinding[]] {
    const lease = fresh ? ` AND ?? + ?? >= ${this.now}` : '';
    return [
      `EXISTS (SELECT 1 FROM ?? WHERE ?? = ? AND ?? = 'running' AND ?? = ? AND ?? = ?${lease})`,
      [RUNS_TABLE, 'id', runIdValue(caller.runId), 'status', 'node_id', caller.nodeId, 'attempt', caller.attempt, ...(fresh ? ['heartbeat_at', 'lease_ms'] : [])],
    ];
  }

  /** SQL (with bindings, columns of alias `k`): the key's holder attempt is live. */
  private holderLiveSql(): string {
    return `EXISTS (SELECT 1 FROM ${this.q(RUNS_TABLE)} r WHERE r.id = k.holder_run_id AND r.status = 'running' AND r.node_id = k.holder_node AND r.attempt = k.holder_attempt AND r.heartbeat_at + r.lease_ms >= ${this.now})`;
  }

  /** An identifier quoted for this database (a constant table name; never user text). */
  private q(name: string): string {
    return this.db.kind === 'mysql' ? `\`${name}\`` : `"${name}"`;
  }

  private select(): Knex.QueryBuilder {
    return this.knex({ k: ONCE_TABLE }).select('k.*', this.knex.raw(`CASE WHEN ${this.holderLiveSql()} THEN 1 ELSE 0 END as holder_live`), this.knex.raw(`${this.now} as store_now`));
  }

  async read(key: string): Promise<OnceRecord | null> {
    // One statement (the replay path's single round trip): the row, its holder's liveness and the store's clock.
    const row = (await this.db.wrap('read once key', () => this.select().where('k.key', key).first())) as Row | undefined;
    return row ? toRecord(row) : null;
  }

  async take(key: string, caller: OnceCaller, options: { fingerprint: string | null; ttlMs: number }, seen: OnceRecord | null): Promise<OnceTakeResult> {
    const ttl = Math.max(1, Math.round(options.ttlMs));
    const runId = runIdValue(caller.runId);
    const [owns, ownsBindings] = this.owns(caller);
    if (seen === null) {
      // INSERT ... SELECT from the caller's run row: no row of its own, nothing inserted.
      const columns = ['key', 'job', 'status', 'fingerprint', 'attempts', 'version', 'holder_run_id', 'holder_attempt', 'holder_node', 'first_run_id', 'created_at', 'updated_at', 'expires_at'];
      // MySQL takes a WHERE only after a FROM; it has no ON CONFLICT (a duplicate fails the statement alone).
      const from = this.db.kind === 'mysql' ? ' FROM DUAL' : '';
      const conflict = this.db.kind === 'mysql' ? '' : ` ON CONFLICT (${this.q('key')}) DO NOTHING`;
      const sql = `INSERT INTO ?? (${columns.map(() => '??').join(', ')}) SELECT ?, ?, 'processing', ?, 1, 1, ?, ?, ?, ?, ${this.now}, ${this.now}, ${this.now} + ?${from} WHERE ${owns}${conflict}`;
      const bindings: Knex.RawBinding[] = [ONCE_TABLE, ...columns, key, caller.job, options.fingerprint, runId, caller.attempt, caller.nodeId, runId, ttl, ...ownsBindings];
      let inserted: number;
      try {
        inserted = affected(this.db.kind, await this.db.wrap('take once key', () => this.knex.raw(sql, bindings)));
      } catch (err) {
        // A duplicate (MySQL, which has no ON CONFLICT here) is a lost race: db.wrap leaves it unwrapped.
        if (this.db.dialect.classify(err) === 'duplicate') return { outcome: 'changed' };
        throw err;
      }
      if (inserted === 1) return { outcome: 'taken', version: 1, attempts: 1 };
      // Nothing inserted: the key exists (a lost race), or the caller does not own its run row.
      return (await this.read(key)) ? { outcome: 'changed' } : { outcome: 'fenced' };
    }
    // An expired key starts afresh; a failed one, or one whose holder is gone, is taken over.
    const fresh = seen.expired;
    const version = seen.version + 1;
    const attempts = fresh ? 1 : seen.attempts + 1;
    const changes: Record<string, unknown> = {
      job: caller.job, status: 'processing', result: null, error: null, attempts, version,
      holder_run_id: runId, holder_attempt: caller.attempt, holder_node: caller.nodeId,
      updated_at: this.db.nowRaw(), expires_at: this.db.nowPlus(ttl),
      ...(fresh ? { first_run_id: runId, created_at: this.db.nowRaw(), fingerprint: options.fingerprint } : options.fingerprint !== null ? { fingerprint: options.fingerprint } : {}),
    };
    const holderLive = `EXISTS (SELECT 1 FROM ?? WHERE ?? = ? AND ?? = 'running' AND ?? = ? AND ?? = ? AND ?? + ?? >= ${this.now})`;
    const holderBindings = [RUNS_TABLE, 'id', runIdValue(seen.holder.runId), 'status', 'node_id', seen.holder.nodeId, 'attempt', seen.holder.attempt, 'heartbeat_at', 'lease_ms'];
    const updated = await this.db.wrap('take over once key', () => this.knex(ONCE_TABLE)
      .where({ key, version: seen.version })
      // A key may be taken when it failed, succeeded but expired, or is processing under a holder no longer live.
      .andWhere((w) => w.where('status', 'failed')
        .orWhere((o) => o.where('status', 'succeeded').andWhereRaw(`?? < ${this.now}`, ['expires_at']))
        .orWhere((o) => o.where('status', 'processing').andWhereRaw(`NOT ${holderLive}`, holderBindings)))
      .andWhereRaw(owns, ownsBindings)
      .update(changes));
    if (Number(updated) === 1) return { outcome: 'taken', version, attempts };
    return (await this.ownsRun(caller)) ? { outcome: 'changed' } : { outcome: 'fenced' };
  }

  private async ownsRun(caller: OnceCaller): Promise<boolean> {
    const [owns, bindings] = this.owns(caller);
    const row = (await this.db.wrap('check run ownership', () => this.knex.first(this.knex.raw(`CASE WHEN ${owns} THEN 1 ELSE 0 END as owned`, bindings)))) as { owned: number | string };
    return truthy(row.owned);
  }

  async settle(key: string, caller: OnceCaller, version: number, outcome: { status: 'succeeded'; resultJson: string | null } | { status: 'failed'; error: string }): Promise<boolean> {
    const [owns, bindings] = this.owns(caller, false);
    const updated = await this.db.wrap('settle once key', () => this.knex(ONCE_TABLE)
      .where({ key, version, status: 'processing', holder_run_id: runIdValue(caller.runId), holder_node: caller.nodeId, holder_attempt: caller.attempt })
      .andWhereRaw(owns, bindings)
      .update({
        status: outcome.status,
        result: outcome.status === 'succeeded' ? outcome.resultJson : null,
        error: outcome.status === 'failed' ? storableText(outcome.error) : null,
        version: version + 1,
        updated_at: this.db.nowRaw(),
      }));
    return Number(updated) === 1;
  }

  async list(query: OnceQuery): Promise<OnceRecord[]> {
    const q = this.select();
    if (query.prefix) q.whereRaw('SUBSTR(??, 1, ?) = ?', ['k.key', [...query.prefix].length, query.prefix]);
    if (query.status) q.where('k.status', query.status);
    if (query.job) q.where('k.job', query.job);
    const rows = (await this.db.wrap('list once keys', () => q.orderBy('k.updated_at', 'desc').orderBy('k.key', 'asc').limit(Math.max(1, query.limit ?? 100)))) as Row[];
    return rows.map(toRecord);
  }

  async retried(): Promise<number> {
    const row = (await this.db.wrap('count retried once keys', () => this.knex(ONCE_TABLE).where('attempts', '>', 1).andWhereRaw(`?? >= ${this.now}`, ['expires_at']).count({ n: '*' }).first())) as { n: number | string } | undefined;
    return Number(row?.n ?? 0);
  }

  async pruneExpired(options: { dryRun?: boolean; batchSize?: number; signal?: AbortSignal } = {}): Promise<number> {
    const batch = Math.max(1, options.batchSize ?? 1000);
    const candidates = () => this.knex({ k: ONCE_TABLE }).select('k.key')
      .whereRaw(`k.expires_at < ${this.now}`)
      .andWhereRaw(`NOT (k.status = 'processing' AND ${this.holderLiveSql()})`);
    if (options.dryRun) {
      const row = (await this.db.wrap('count expired once keys', () => this.knex.count({ n: '*' }).from(candidates().as('c')).first())) as { n: number | string } | undefined;
      return Number(row?.n ?? 0);
    }
    let deleted = 0;
    for (;;) {
      if (options.signal?.aborted) return deleted;
      const keys = ((await this.db.wrap('prune: read expired once keys', () => candidates().limit(batch))) as Array<{ key: string }>).map((r) => r.key);
      if (keys.length === 0) return deleted;
      // Still expired at the delete: a key taken again meanwhile has a new expires_at.
      deleted += Number(await this.db.wrap('prune: delete expired once keys', () => this.knex(ONCE_TABLE).whereIn('key', keys).andWhereRaw(`?? < ${this.now}`, ['expires_at']).delete()));
      if (keys.length < batch) return deleted;
    }
  }
}

/** Rows an INSERT sent through knex.raw wrote, as each driver reports it. */
function affected(kind: Database['kind'], answer: unknown): number {
  if (kind === 'mysql') return Number((answer as [{ affectedRows?: number }])[0]?.affectedRows ?? 0);
  if (kind === 'postgres') return Number((answer as { rowCount?: number }).rowCount ?? 0);
  return Number((answer as { changes?: number }).changes ?? 0);
}
