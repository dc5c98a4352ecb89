/**
 * RunStore over knex: SQLite (better-sqlite3), MySQL/MariaDB (mysql2) and PostgreSQL (pg). Dialect
 * differences are confined to this file: the store-clock expression, unique-violation codes,
 * `returning`, and the lock that serialises migrations across nodes.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type { StoreConfig } from '../config/config.js';
import { redactText, redactUrl } from '../config/redact.js';
import { errorMessage, StoreUnavailableError } from '../errors.js';
import { MIGRATIONS_TABLE, RUNS_TABLE, migrationSource } from './migrations.js';
import type {
  HistoryQuery, InsertResult, NewRun, RunOutcome, RunRecord, RunStatus, RunStore, SkippedRun,
} from './types.js';

// int8 columns (epoch ms) arrive as strings from pg by default; they fit a double exactly.
pg.types.setTypeParser(20, (v: string) => Number(v));

const NOW_MS: Record<RunStore['kind'], string> = {
  sqlite: "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
  mysql: 'CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED)',
  postgres: 'CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)',
};

/**
 * knex's own logger prints with console.log, i.e. to stdout: a multi-line "Acquire connection error"
 * stack in the middle of the daemon's JSON log lines, or of a command's --json document. Every failure
 * it reports also reaches the caller as an error (and is reported there, redacted), so it stays quiet.
 */
const QUIET_KNEX_LOG: Knex.Logger = { warn: () => {}, error: () => {}, debug: () => {}, deprecate: () => {} };

export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errno?: number } | undefined;
  return (
    e?.code === 'ER_DUP_ENTRY' || e?.errno === 1062 || e?.code === '23505' ||
    e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
  );
}

/** MariaDB 10.5 and later know INSERT ... RETURNING (MySQL does not): e.g. '10.11.19-MariaDB-0+deb12u1'. */
export function mariaDbWithReturning(version: string): boolean {
  const m = /^(\d+)\.(\d+)\./.exec(version);
  if (!m || !/mariadb/i.test(version)) return false;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > 10 || (major === 10 && minor >= 5);
}

/** Errors that mean "the store is not there" rather than "this query is wrong". */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; name?: string; message?: string } | undefined;
  const code = e?.code ?? '';
  return (
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'PROTOCOL_CONNECTION_LOST',
      'ER_ACCESS_DENIED_ERROR', 'ER_BAD_DB_ERROR', '28P01', '28000', '3D000', '57P01', '57P03', 'SQLITE_CANTOPEN',
      'ER_CON_COUNT_ERROR', 'PROTOCOL_SEQUENCE_TIMEOUT'].includes(code) ||
    e?.name === 'KnexTimeoutError' ||
    /Connection terminated|connect ETIMEDOUT|Timeout acquiring a connection|ECONNREFUSED|ECONNRESET/i.test(e?.message ?? '')
  );
}

interface Row {
  id: number | string;
  job: string;
  scheduled_at: number | string;
  period_key: string;
  shard: number;
  attempt: number;
  trigger: string;
  status: string;
  reason: string | null;
  node_id: string;
  started_at: number | string;
  heartbeat_at: number | string | null;
  lease_ms: number;
  finished_at: number | string | null;
  duration_ms: number | string | null;
  result: string | null;
  error: string | null;
  error_stack: string | null;
}

const date = (v: number | string | null): Date | null => (v === null || v === undefined ? null : new Date(Number(v)));

function toRecord(row: Row): RunRecord {
  let result: unknown = null;
  if (row.result !== null && row.result !== undefined) {
    try {
      result = JSON.parse(row.result);
    } catch {
      result = row.result;
    }
  }
  return {
    id: String(row.id),
    job: row.job,
    scheduledAt: new Date(Number(row.scheduled_at)),
    periodKey: row.period_key,
    shard: Number(row.shard),
    attempt: Number(row.attempt),
    trigger: row.trigger as RunRecord['trigger'],
    status: row.status as RunStatus,
    reason: row.reason,
    nodeId: row.node_id,
    startedAt: new Date(Number(row.started_at)),
    finishedAt: date(row.finished_at),
    durationMs: row.duration_ms === null ? null : Number(row.duration_ms),
    heartbeatAt: date(row.heartbeat_at),
    leaseMs: Number(row.lease_ms),
    result,
    error: row.error,
    errorStack: row.error_stack,
  };
}

/** JSON for the result column; a value that cannot be serialised is stored as a description. */
/** A stored result larger than this is replaced by a note (MySQL mediumtext holds 16 MB). */
const MAX_RESULT_BYTES = 1_000_000;

function serialiseResult(value: unknown): string | null {
  if (value === undefined) return null;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    return JSON.stringify({ unserialisable: errorMessage(err) });
  }
  if (json === undefined) return null;
  const bytes = Buffer.byteLength(json, 'utf8');
  return bytes > MAX_RESULT_BYTES ? JSON.stringify({ unstored: `result of ${bytes} bytes is over the ${MAX_RESULT_BYTES}-byte limit` }) : json;
}

/** Under MySQL's TEXT limit (65,535 bytes), with room for the truncation note. */
const MAX_TEXT_BYTES = 60_000;

/**
 * Error texts as every backend can store them: PostgreSQL refuses NUL characters in text, and MySQL
 * refuses (strict mode) a TEXT value over 64 KB. Either would make the outcome of a run unrecordable.
 */
export function storableText(value: string | null | undefined, maxBytes = MAX_TEXT_BYTES): string | null {
  if (value === null || value === undefined) return null;
  const text = value.includes('\u0000') ? value.replace(/\u0000/g, '\uFFFD') : value;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= maxBytes) return text;
  const note = `… [truncated, ${bytes} bytes in all]`;
  let cut = Buffer.from(text, 'utf8').subarray(0, maxBytes - Buffer.byteLength(note, 'utf8')).toString('utf8');
  // A multi-byte character cut in two decodes as U+FFFD: drop it.
  if (cut.endsWith('\uFFFD') && !text.startsWith(cut)) cut = cut.slice(0, -1);
  return cut + note;
}

export class KnexRunStore implements RunStore {
  readonly kind: RunStore['kind'];
  private readonly knex: Knex;
  private readonly nowSql: string;
  private readonly shownUrl: string;
  /** INSERT ... RETURNING works: PostgreSQL, SQLite (3.35+, bundled by better-sqlite3 12), MariaDB 10.5+; not MySQL. */
  private insertReturning: boolean;

  private constructor(kind: RunStore['kind'], knex: Knex, shownUrl: string) {
    this.insertReturning = kind !== 'mysql';
    this.kind = kind;
    this.knex = knex;
    this.nowSql = NOW_MS[kind];
    this.shownUrl = shownUrl;
  }

  /** Opens the store and checks that it answers (StoreUnavailableError otherwise). */
  static async open(config: StoreConfig): Promise<KnexRunStore> {
    const shown = redactUrl(config.url);
    let knex: Knex;
    if (config.kind === 'sqlite') {
      if (config.path !== ':memory:') mkdirSync(dirname(config.path), { recursive: true });
      knex = knexFactory({
        log: QUIET_KNEX_LOG,
        client: 'better-sqlite3',
        connection: { filename: config.path },
        useNullAsDefault: true,
        pool: {
          min: 1, max: 1,
          afterCreate: (conn: { pragma(s: string): unknown }, done: (err: Error | null, c: unknown) => void) => {
            try {
              // Several processes may share the file: WAL lets readers go on, busy_timeout waits for writers.
              conn.pragma('busy_timeout = 10000');
              conn.pragma('journal_mode = WAL');
              conn.pragma('synchronous = NORMAL');
              done(null, conn);
            } catch (err) {
              done(err as Error, conn);
            }
          },
        },
      });
    } else if (config.kind === 'mysql') {
      knex = knexFactory({
        log: QUIET_KNEX_LOG,
        client: 'mysql2',
        connection: { uri: config.url, timezone: 'Z', connectTimeout: 5000, supportBigNumbers: true, bigNumberStrings: false } as Knex.MySql2ConnectionConfig & { uri: string },
        pool: { min: 0, max: 4 },
        acquireConnectionTimeout: 10_000,
      });
    } else {
      knex = knexFactory({
        log: QUIET_KNEX_LOG,
        client: 'pg',
        connection: { connectionString: config.url, connectionTimeoutMillis: 5000 },
        pool: { min: 0, max: 4 },
        acquireConnectionTimeout: 10_000,
      });
    }
    const store = new KnexRunStore(config.kind, knex, shown);
    try {
      if (config.kind === 'mysql') {
        const [rows] = (await knex.raw('select version() as version')) as unknown as [Array<{ version: string }>];
        store.insertReturning = mariaDbWithReturning(String(rows[0]?.version ?? ''));
      } else {
        await knex.raw('select 1 as ok');
      }
    } catch (err) {
      await knex.destroy().catch(() => {});
      throw new StoreUnavailableError(`store ${shown} cannot be reached: ${redactText(errorMessage(err))}`, { cause: err });
    }
    return store;
  }

  private unavailable(err: unknown, what: string): Error {
    if (isConnectionError(err)) {
      return new StoreUnavailableError(`store ${this.shownUrl} cannot be reached (${what}): ${redactText(errorMessage(err))}`, { cause: err });
    }
    return err instanceof Error ? err : new Error(String(err));
  }

  private async wrap<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.unavailable(err, what);
    }
  }

  private nowRaw(): Knex.Raw {
    return this.knex.raw(this.nowSql);
  }

  async migrate(): Promise<void> {
    const config = { tableName: MIGRATIONS_TABLE, migrationSource };
    await this.wrap('migrate', async () => {
      if (this.kind === 'sqlite') {
        // One file: SQLite serialises writers itself; a loser of knex's lock waits and tries again.
        await retryWhileLocked(() => this.knex.migrate.latest(config));
        return;
      }
      // MySQL and PostgreSQL: a session-level advisory lock on one connection serialises nodes; it is
      // released by the server if this process dies, unlike knex's lock row.
      const conn = await this.knex.client.acquireConnection();
      try {
        if (this.kind === 'mysql') {
          // Named after the database, so that schedulers of different databases do not wait for each other.
          const [rows] = (await this.knex.raw("SELECT GET_LOCK(CONCAT('scheduler_migrate:', DATABASE()), 120) AS got").connection(conn)) as [Array<{ got: number | null }>];
          if (Number(rows[0]?.got) !== 1) throw new Error('timed out after 120 s waiting for another node to finish migrating');
        } else {
          await this.knex.raw('SELECT pg_advisory_lock(?)', [0x5c4ed]).connection(conn);
        }
        try {
          await retryWhileLocked(async () => {
            try {
              return await this.knex.migrate.latest(config);
            } catch (err) {
              // Holding the advisory lock, any knex lock row left set is stale (a crashed node).
              if (/already locked/i.test(errorMessage(err))) await this.knex.migrate.forceFreeMigrationsLock(config);
              throw err;
            }
          });
        } finally {
          if (this.kind === 'mysql') await this.knex.raw("SELECT RELEASE_LOCK(CONCAT('scheduler_migrate:', DATABASE()))").connection(conn);
          else await this.knex.raw('SELECT pg_advisory_unlock(?)', [0x5c4ed]).connection(conn);
        }
      } finally {
        await this.knex.client.releaseConnection(conn);
      }
    });
  }

  async insertRun(run: NewRun): Promise<InsertResult> {
    const row = {
      job: run.job,
      scheduled_at: run.scheduledAt.getTime(),
      period_key: run.periodKey,
      shard: run.shard ?? 0,
      attempt: run.attempt,
      trigger: run.trigger,
      status: 'running',
      node_id: run.nodeId,
      started_at: this.nowRaw(),
      heartbeat_at: this.nowRaw(),
      lease_ms: run.leaseMs,
    };
    try {
      let stored: Row;
      if (this.insertReturning) {
        // One round trip on the claim path: the row as stored (store-clock stamps included) comes
        // back with the INSERT instead of from a second SELECT.
        if (this.kind === 'mysql') {
          // MariaDB has INSERT ... RETURNING; knex's MySQL dialect does not emit it.
          const q = this.knex(RUNS_TABLE).insert(row).toSQL().toNative();
          const [rows] = (await this.knex.raw(`${q.sql} returning *`, q.bindings as Knex.RawBinding[])) as unknown as [Row[]];
          stored = rows[0]!;
        } else {
          const [inserted] = await this.knex(RUNS_TABLE).insert(row, '*');
          stored = inserted as Row;
        }
      } else {
        // MySQL: no RETURNING; read the row back by its id.
        const [inserted] = await this.knex(RUNS_TABLE).insert(row);
        stored = await this.knex(RUNS_TABLE).where({ id: inserted as number }).first<Row>();
      }
      return { outcome: 'inserted', run: toRecord(stored) };
    } catch (err) {
      if (isUniqueViolation(err)) return { outcome: 'duplicate' };
      throw this.unavailable(err, 'insert run');
    }
  }

  async insertSkipped(runs: SkippedRun[]): Promise<number> {
    if (runs.length === 0) return 0;
    let written = 0;
    for (let i = 0; i < runs.length; i += 200) {
      const rows = runs.slice(i, i + 200).map((r) => ({
        job: r.job,
        scheduled_at: r.scheduledAt.getTime(),
        period_key: r.periodKey,
        shard: 0,
        attempt: 1,
        trigger: r.trigger,
        status: 'skipped',
        reason: r.reason,
        node_id: r.nodeId,
        started_at: this.nowRaw(),
        finished_at: this.nowRaw(),
        duration_ms: 0,
        lease_ms: 0,
      }));
      await this.wrap('record skipped periods', async () => {
        // Marker rows only: a row that exists already (another node recorded or ran it) stays as it is.
        const insert = this.knex(RUNS_TABLE).insert(rows).onConflict(['job', 'scheduled_at', 'shard', 'attempt']);
        if (this.kind === 'mysql') {
          // Not `.ignore()`: on MySQL that is INSERT IGNORE, which also turns every other error into a
          // warning (a NULL written as '', a name silently truncated). A no-op ON DUPLICATE KEY UPDATE
          // skips the conflicting rows only.
          await insert.merge({ id: this.knex.ref('id') });
        } else {
          await insert.ignore();
        }
      });
      written += rows.length;
    }
    return written;
  }

  async finishRun(runId: string, nodeId: string, outcome: RunOutcome): Promise<boolean> {
    return this.wrap('record outcome', async () => {
      const updated = await this.knex(RUNS_TABLE)
        .where({ id: runId, node_id: nodeId, status: 'running' })
        .update({
          status: outcome.status,
          finished_at: this.nowRaw(),
          duration_ms: this.knex.raw(`${this.nowSql} - started_at`),
          result: serialiseResult(outcome.result),
          error: storableText(outcome.error),
          error_stack: storableText(outcome.errorStack),
          reason: outcome.reason === null || outcome.reason === undefined ? null : storableText(outcome.reason)!.slice(0, 200),
        });
      return Number(updated) > 0;
    });
  }

  async heartbeat(runId: string, nodeId: string): Promise<boolean> {
    return this.wrap('heartbeat', async () => {
      const updated = await this.knex(RUNS_TABLE)
        .where({ id: runId, node_id: nodeId, status: 'running' })
        .update({ heartbeat_at: this.nowRaw() });
      return Number(updated) > 0;
    });
  }

  async staleRuns(): Promise<RunRecord[]> {
    return this.wrap('read stale runs', async () => {
      const rows = await this.knex(RUNS_TABLE)
        .where({ status: 'running' })
        .andWhereRaw(`heartbeat_at + lease_ms < ${this.nowSql}`)
        .orderBy('id', 'asc')
        .limit(100);
      return (rows as Row[]).map(toRecord);
    });
  }

  async abandonRun(runId: string, status: 'abandoned' | 'failed', reason: string): Promise<boolean> {
    return this.wrap('abandon run', async () => {
      const updated = await this.knex(RUNS_TABLE)
        .where({ id: runId, status: 'running' })
        .andWhereRaw(`heartbeat_at + lease_ms < ${this.nowSql}`)
        .update({
          status,
          reason,
          error: status === 'failed' ? reason : null,
          finished_at: this.nowRaw(),
          duration_ms: this.knex.raw(`${this.nowSql} - started_at`),
        });
      return Number(updated) > 0;
    });
  }

  async periodRuns(job: string, scheduledAt: Date, shard = 0): Promise<RunRecord[]> {
    return this.wrap('read period', async () => {
      const rows = await this.knex(RUNS_TABLE)
        .where({ job, scheduled_at: scheduledAt.getTime(), shard })
        .orderBy('attempt', 'asc');
      return (rows as Row[]).map(toRecord);
    });
  }

  async liveRuns(job: string): Promise<RunRecord[]> {
    return this.wrap('read running runs', async () => {
      const rows = await this.knex(RUNS_TABLE)
        .where({ job, status: 'running' })
        .andWhereRaw(`heartbeat_at + lease_ms >= ${this.nowSql}`)
        .orderBy('scheduled_at', 'asc');
      return (rows as Row[]).map(toRecord);
    });
  }

  async periodsWithRows(job: string, fromMs: number, toMs: number): Promise<Set<number>> {
    return this.wrap('read periods', async () => {
      const rows = await this.knex(RUNS_TABLE)
        .distinct('scheduled_at')
        .where({ job })
        .andWhere('scheduled_at', '>=', fromMs)
        .andWhere('scheduled_at', '<=', toMs);
      return new Set((rows as { scheduled_at: number | string }[]).map((r) => Number(r.scheduled_at)));
    });
  }

  async lastRuns(jobs: string[]): Promise<Map<string, RunRecord>> {
    return this.wrap('read last runs', async () => {
      const out = new Map<string, RunRecord>();
      for (const job of jobs) {
        const row = await this.knex(RUNS_TABLE).where({ job }).orderBy([{ column: 'started_at', order: 'desc' }, { column: 'id', order: 'desc' }]).first<Row | undefined>();
        if (row) out.set(job, toRecord(row));
      }
      return out;
    });
  }

  async history(query: HistoryQuery): Promise<RunRecord[]> {
    return this.wrap('read history', async () => {
      const q = this.knex(RUNS_TABLE).select('*');
      if (query.job) q.where({ job: query.job });
      if (query.status) q.where({ status: query.status });
      q.orderBy([{ column: 'started_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(query.limit ?? 50);
      return ((await q) as Row[]).map(toRecord);
    });
  }

  async now(): Promise<number> {
    return this.wrap('read clock', async () => {
      const result: unknown = await this.knex.raw(`select ${this.nowSql} as now_ms`);
      const rows = this.kind === 'mysql' ? (result as [Array<{ now_ms: number }>])[0]
        : this.kind === 'postgres' ? (result as { rows: Array<{ now_ms: number }> }).rows
          : (result as Array<{ now_ms: number }>);
      return Number(rows[0]!.now_ms);
    });
  }

  async close(): Promise<void> {
    await this.knex.destroy();
  }
}

async function retryWhileLocked<T>(fn: () => Promise<T>, deadlineMs = 60_000): Promise<T> {
  const until = Date.now() + deadlineMs;
  let delay = 50;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      const message = errorMessage(err);
      const transient = /already locked|SQLITE_BUSY|database is locked|already exists|Duplicate entry|duplicate key/i.test(message);
      if (!transient || Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 1000);
    }
  }
}
