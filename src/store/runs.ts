/**
 * The runs table (`scheduler_runs`) over knex: SQLite, MySQL/MariaDB and PostgreSQL. What differs
 * between the databases is in ./dialect/; the rules are here, once.
 */
import type { Knex } from 'knex';
import type { StoreConfig } from '../config/config.js';
import { decideEnd } from '../run/owed.js';
import { DEFAULT_MAX_RESULT_BYTES, serialiseResult } from '../run/outcome.js';
import { Database, leaseQueryTimeout } from './database.js';
import { JOBS_TABLE, RUNS_TABLE } from './migrations.js';
import type {
  EndResult, FinalStatus, HistoryQuery, InsertResult, JobSummary, NewRun, PeriodRange, RetryPolicy, RunOutcome, RunRecord, RunStatus, RunStore, SkippedRun,
} from './types.js';
import type { PruneOptions, PruneResult } from './types.js';

/** The unique key: one row per (job, period, shard, attempt). */
const PERIOD_KEY = ['job', 'scheduled_at', 'shard', 'attempt'];

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
  claimed_at: number | string | null;
  run_at: number | string | null;
  heartbeat_at: number | string | null;
  lease_ms: number;
  finished_at: number | string | null;
  duration_ms: number | string | null;
  result: string | null;
  result_note?: string | null;
  error: string | null;
  error_stack: string | null;
  output?: string | null;
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
    claimedAt: date(row.claimed_at),
    runAt: date(row.run_at),
    finishedAt: date(row.finished_at),
    durationMs: row.duration_ms === null ? null : Number(row.duration_ms),
    heartbeatAt: date(row.heartbeat_at),
    leaseMs: Number(row.lease_ms),
    result,
    resultNote: row.result_note ?? null,
    error: row.error,
    errorStack: row.error_stack,
    output: row.output ?? null,
  };
}

/**
 * The result and result_note columns. The executor serialises the result with the configured
 * `maxResultSize` (and logs a warning when it cannot be stored); an outcome without `resultJson`
 * (written by other code) is serialised here with the default limit. A result over the limit or
 * that JSON cannot represent is stored as NULL with a note saying why (MySQL's MEDIUMTEXT holds 16 MB).
 */
function resultColumns(outcome: RunOutcome): { result: string | null; result_note: string | null } {
  const stored = outcome.resultJson !== undefined
    ? { json: outcome.resultJson, note: null }
    : serialiseResult(outcome.result, DEFAULT_MAX_RESULT_BYTES);
  return { result: stored.json, result_note: storableText(outcome.resultNote ?? stored.note) };
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

/** The output column (MEDIUMTEXT on MySQL): a 64 KiB tail with room to spare. */
const MAX_OUTPUT_BYTES = 256 * 1024;

/** Statuses that end an attempt without an outcome of its own, or by a failure: the next attempt may be owed. */
const OWING: ReadonlySet<FinalStatus> = new Set(['failed', 'timed_out', 'abandoned', 'interrupted']);

export class KnexRunStore implements RunStore {
  readonly kind: RunStore['kind'];
  private readonly knex: Knex;

  /** @param ownsDb close() closes the pool too (a store opened on its own). */
  constructor(private readonly db: Database, private readonly ownsDb = false) {
    this.kind = db.kind;
    this.knex = db.knex;
  }

  /** Opens a pool of its own and checks that the store answers (StoreUnavailableError otherwise). */
  static async open(config: StoreConfig): Promise<KnexRunStore> {
    return new KnexRunStore(await Database.open(config), true);
  }

  private wrap<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return this.db.wrap(what, fn);
  }

  /** A statement that takes, keeps or ends a lease: bounded by a third of it (see leaseQueryTimeout). */
  private leased<T>(what: string, leaseMs: number | undefined, fn: () => Promise<T>): Promise<T> {
    if (leaseMs === undefined || leaseMs <= 0) return this.wrap(what, fn);
    return this.wrap(what, () => this.db.withTimeout(leaseQueryTimeout(leaseMs), fn));
  }

  private table(db: Knex | Knex.Transaction = this.knex): Knex.QueryBuilder {
    return db(RUNS_TABLE);
  }

  /** SQL: the row's lease ran out by the store's clock. */
  private get stale(): string {
    return `heartbeat_at + lease_ms < ${this.db.dialect.nowMs}`;
  }

  migrate(): Promise<void> {
    return this.db.migrate();
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
      started_at: this.db.nowRaw(),
      claimed_at: this.db.nowRaw(),
      heartbeat_at: this.db.nowRaw(),
      lease_ms: run.leaseMs,
    };
    // One round trip on the claim path where the dialect allows it: the row as stored (store-clock
    // stamps included) comes back with the INSERT, and a lost race is an empty answer.
    const [stored] = await this.leased('insert run', run.leaseMs, () => this.db.dialect.insertClaims(this.knex, RUNS_TABLE, [row], PERIOD_KEY));
    return stored ? { outcome: 'inserted', run: toRecord(stored as unknown as Row) } : { outcome: 'duplicate' };
  }

  async insertSkipped(runs: SkippedRun[]): Promise<number> {
    let inserted = 0;
    for (let i = 0; i < runs.length; i += 200) {
      const rows = runs.slice(i, i + 200).map((r) => ({
        job: r.job,
        scheduled_at: r.scheduledAt.getTime(),
        period_key: r.periodKey,
        shard: r.shard ?? 0,
        attempt: 1,
        trigger: r.trigger,
        status: 'skipped',
        reason: r.reason,
        node_id: r.nodeId,
        started_at: this.db.nowRaw(),
        finished_at: this.db.nowRaw(),
        duration_ms: 0,
        lease_ms: 0,
      }));
      // Marker rows only: a row that exists already (another node recorded or ran it) stays as it is,
      // and only the rows this call inserted are counted (so a missed period is counted once).
      inserted += await this.wrap('record skipped periods', () => this.db.dialect.insertMissing(this.knex, RUNS_TABLE, rows, PERIOD_KEY));
    }
    return inserted;
  }

  private outcomeColumns(outcome: RunOutcome): Record<string, unknown> {
    const body = outcome.bodyMsAgo;
    const ago = (ms: number) => this.knex.raw(`${this.db.dialect.nowMs} - ?`, [Math.max(0, Math.round(ms))]);
    return {
      status: outcome.status,
      // The body's own start and end on the store's clock (the node measured how long ago they were).
      ...(body
        ? { started_at: ago(body.started), finished_at: ago(body.ended), duration_ms: Math.max(0, Math.round(body.started - body.ended)) }
        : { finished_at: this.db.nowRaw(), duration_ms: this.knex.raw(`${this.db.dialect.nowMs} - started_at`) }),
      ...resultColumns(outcome),
      error: storableText(outcome.error),
      error_stack: storableText(outcome.errorStack),
      reason: outcome.reason === null || outcome.reason === undefined ? null : storableText(outcome.reason)!.slice(0, 200),
      // A command job's tail, already at most 64 KiB; only outcomes that carry one write the column.
      ...(outcome.output !== undefined ? { output: storableText(outcome.output, MAX_OUTPUT_BYTES) } : {}),
    };
  }

  async finishRun(runId: string, nodeId: string, outcome: RunOutcome, leaseMs?: number): Promise<boolean> {
    return this.leased('record outcome', leaseMs, async () => {
      const updated = await this.table().where({ id: runId, node_id: nodeId, status: 'running' }).update(this.outcomeColumns(outcome));
      return Number(updated) > 0;
    });
  }

  /** Statuses of the period's attempts before `run`, read inside the transaction that ends it. */
  private async earlierStatuses(trx: Knex.Transaction, run: RunRecord): Promise<RunStatus[]> {
    const rows = await trx(RUNS_TABLE).select('status')
      .where({ job: run.job, scheduled_at: run.scheduledAt.getTime(), shard: run.shard })
      .andWhere('attempt', '<', run.attempt);
    return (rows as Array<{ status: RunStatus }>).map((r) => r.status);
  }

  /** Inserts the next attempt of `run` as pending, due `delayMs` from now (store clock). */
  private async insertNext(trx: Knex.Transaction, run: RunRecord, nodeId: string, delayMs: number): Promise<RunRecord | null> {
    const [stored] = await this.db.dialect.insertClaims(trx, RUNS_TABLE, [{
      job: run.job,
      scheduled_at: run.scheduledAt.getTime(),
      period_key: run.periodKey,
      shard: run.shard,
      attempt: run.attempt + 1,
      trigger: run.trigger,
      status: 'pending',
      node_id: nodeId,
      started_at: this.db.nowRaw(),
      claimed_at: null,
      run_at: this.db.nowPlus(delayMs),
      lease_ms: run.leaseMs,
    }], PERIOD_KEY);
    return stored ? toRecord(stored as unknown as Row) : null;
  }

  async endAttempt(run: RunRecord, nodeId: string, outcome: RunOutcome, policy: RetryPolicy | null): Promise<EndResult> {
    // The common case (succeeded, skipped) owes nothing: one conditional UPDATE, as before.
    if (!OWING.has(outcome.status)) {
      if (await this.finishRun(run.id, nodeId, outcome, run.leaseMs)) return { written: true, status: outcome.status, next: null };
      return (await this.leased('record outcome', run.leaseMs, () => this.ownEnd(this.knex, run, nodeId, outcome))) ?? { written: false, status: outcome.status, next: null };
    }
    return this.leased('record outcome', run.leaseMs, () => this.knex.transaction(async (trx) => {
      await this.lockRow(trx, run.id);
      const updated = await trx(RUNS_TABLE).where({ id: run.id, node_id: nodeId, status: 'running' }).update(this.outcomeColumns(outcome));
      if (Number(updated) === 0) return (await this.ownEnd(trx, run, nodeId, outcome)) ?? { written: false, status: outcome.status, next: null };
      const decision = decideEnd(outcome.status, await this.earlierStatuses(trx, run), policy);
      if (decision.status !== outcome.status) {
        await trx(RUNS_TABLE).where({ id: run.id }).update(this.capColumns(decision.status, outcome.reason ?? decision.reason ?? null,
          outcome.error ? `${outcome.error}; ${decision.reason}` : decision.reason ?? null));
      }
      const next = decision.next ? await this.insertNext(trx, run, nodeId, decision.next.delayMs) : null;
      return { written: true, status: decision.status, next };
    }));
  }

  /**
   * After an outcome write that matched no running row: whether this node's own outcome is what
   * ended it. That is the case of a retry whose earlier try committed but whose answer was lost (a
   * connection cut or a client timeout after the server's commit): the write is in the store, and
   * the caller must hear `written: true` with what it owed, not "no longer this node's". The row is
   * this node's outcome when it is this node's with the outcome's status and reason (or the cap's
   * `failed` with the reason the cap keeps): a takeover writes `abandoned` (or a capped `failed`) with
   * its own `lease expired` reason, and no other writer ends a row of this node. One read, on this
   * rare path only.
   */
  private async ownEnd(db: Knex | Knex.Transaction, run: RunRecord, nodeId: string, outcome: RunOutcome): Promise<EndResult | null> {
    const row = await db(RUNS_TABLE).select('status', 'reason', 'node_id').where({ id: run.id }).first<Pick<Row, 'status' | 'reason' | 'node_id'> | undefined>();
    if (!row || row.node_id !== nodeId) return null;
    const reason = outcome.reason === null || outcome.reason === undefined ? null : storableText(outcome.reason)!.slice(0, 200);
    const capped = row.status === 'failed' && (outcome.status === 'abandoned' || outcome.status === 'interrupted')
      && (reason === null ? row.reason !== null && !row.reason.startsWith('lease expired') : row.reason === reason);
    if (!capped && !(row.status === outcome.status && (row.reason ?? null) === reason)) return null;
    const next = await db(RUNS_TABLE)
      .where({ job: run.job, scheduled_at: run.scheduledAt.getTime(), shard: run.shard, attempt: run.attempt + 1 })
      .first<Row | undefined>();
    return { written: true, status: row.status as FinalStatus, next: next ? toRecord(next) : null };
  }

  /**
   * The first statement of a transaction that ends an attempt. MySQL, PostgreSQL: the row's lock, by
   * its primary key alone, so that racing nodes queue on that one lock and hold nothing else (a
   * compare-and-set UPDATE may scan a status index and take gap locks there, which deadlocks with
   * the winner's INSERT of the next attempt on InnoDB). SQLite: nothing; the compare-and-set UPDATE
   * that comes next is the first statement, so the write lock is taken before any read (in WAL mode, a
   * transaction that read first and writes after another node's commit fails with SQLITE_BUSY
   * instead of finding the row no longer running).
   */
  private async lockRow(trx: Knex.Transaction, runId: string): Promise<void> {
    if (this.kind === 'sqlite') return;
    await trx(RUNS_TABLE).select('id').where({ id: runId }).forUpdate();
  }

  /** The columns that the MAX_UNFINISHED cap rewrites, in the transaction that ended the attempt. */
  private capColumns(status: FinalStatus, reason: string | null, error: string | null): Record<string, unknown> {
    return { status, reason: reason === null ? null : storableText(reason)!.slice(0, 200), error: storableText(error) };
  }

  async takeOver(run: RunRecord, nodeId: string, reason: string, owe: boolean): Promise<EndResult | null> {
    return this.db.transaction('take over a stale run', async (trx) => {
      await this.lockRow(trx, run.id);
      const updated = await trx(RUNS_TABLE)
        .where({ id: run.id, status: 'running' })
        .andWhereRaw(this.stale)
        .update({
          status: 'abandoned',
          reason: reason.slice(0, 200),
          error: null,
          finished_at: this.db.nowRaw(),
          duration_ms: this.knex.raw(`${this.db.dialect.nowMs} - started_at`),
        });
      if (Number(updated) === 0) return null;
      const decision = decideEnd('abandoned', await this.earlierStatuses(trx, run), null, owe);
      if (decision.status !== 'abandoned') {
        const why = decision.reason ? `${reason}; ${decision.reason}` : reason;
        await trx(RUNS_TABLE).where({ id: run.id }).update(this.capColumns(decision.status, why, why));
      }
      const next = decision.next ? await this.insertNext(trx, run, nodeId, 0) : null;
      return { written: true, status: decision.status, next };
    });
  }

  async duePending(limit = 500): Promise<RunRecord[]> {
    return this.wrap('read pending runs', async () => {
      const rows = await this.table().where({ status: 'pending' }).andWhereRaw(`run_at <= ${this.db.dialect.nowMs}`).orderBy('run_at', 'asc').limit(limit);
      return (rows as Row[]).map(toRecord);
    });
  }

  async claimPending(runId: string, nodeId: string, leaseMs: number): Promise<RunRecord | null> {
    return this.leased('claim pending run', leaseMs, async () => {
      const updated = await this.table()
        .where({ id: runId, status: 'pending' })
        .andWhereRaw(`run_at <= ${this.db.dialect.nowMs}`)
        .update({ status: 'running', node_id: nodeId, started_at: this.db.nowRaw(), claimed_at: this.db.nowRaw(), heartbeat_at: this.db.nowRaw(), lease_ms: leaseMs, run_at: null });
      if (Number(updated) === 0) return null;
      const row = await this.table().where({ id: runId }).first<Row | undefined>();
      return row ? toRecord(row) : null;
    });
  }

  async releasePending(runId: string, nodeId: string): Promise<boolean> {
    return this.wrap('release pending run', async () => {
      const updated = await this.table().where({ id: runId, node_id: nodeId, status: 'running' }).update({ status: 'pending', heartbeat_at: null, run_at: this.db.nowRaw() });
      return Number(updated) > 0;
    });
  }

  async abandonPending(runId: string, reason: string): Promise<boolean> {
    return this.wrap('abandon pending run', async () => {
      const updated = await this.table().where({ id: runId, status: 'pending' })
        .update({ status: 'abandoned', reason: reason.slice(0, 200), finished_at: this.db.nowRaw(), duration_ms: 0 });
      return Number(updated) > 0;
    });
  }

  async heartbeat(runId: string, nodeId: string, leaseMs?: number): Promise<boolean> {
    // On the lease keepers' own connections: a burst of claims on the main pool cannot delay it.
    return this.leased('heartbeat', leaseMs, async () => {
      const updated = await this.table(this.db.leaseKnex).where({ id: runId, node_id: nodeId, status: 'running' }).update({ heartbeat_at: this.db.nowRaw() });
      return Number(updated) > 0;
    });
  }

  async staleRuns(limit = 500): Promise<RunRecord[]> {
    // Every row returned is resolved by a takeover (whatever its job), so a limit never hides rows for long.
    return this.wrap('read stale runs', async () => {
      const rows = await this.table().where({ status: 'running' }).andWhereRaw(this.stale).orderBy('heartbeat_at', 'asc').limit(limit);
      return (rows as Row[]).map(toRecord);
    });
  }

  async periodRuns(job: string, scheduledAt: Date, shard = 0): Promise<RunRecord[]> {
    return this.wrap('read period', async () => {
      const rows = await this.table().where({ job, scheduled_at: scheduledAt.getTime(), shard }).orderBy('attempt', 'asc');
      return (rows as Row[]).map(toRecord);
    });
  }

  async liveRuns(job: string, leaseMs?: number, shard?: number): Promise<RunRecord[]> {
    return this.leased('read running runs', leaseMs, async () => {
      const rows = await this.table()
        .where({ job, status: 'running', ...(shard !== undefined ? { shard } : {}) })
        .andWhereRaw(`heartbeat_at + lease_ms >= ${this.db.dialect.nowMs}`)
        .orderBy('scheduled_at', 'asc');
      return (rows as Row[]).map(toRecord);
    });
  }

  async periodsWithRows(job: string, fromMs: number, toMs: number, shards = 1): Promise<Set<number>> {
    return (await this.rowsInRanges([{ job, fromMs, toMs, shards }])).get(job) ?? new Set();
  }

  async periodShards(job: string, scheduledAt: Date): Promise<Set<number>> {
    return this.wrap('read period shards', async () => {
      const rows = await this.table().distinct('shard').where({ job, scheduled_at: scheduledAt.getTime() });
      return new Set((rows as Array<{ shard: number | string }>).map((r) => Number(r.shard)));
    });
  }

  async rowsInRanges(ranges: PeriodRange[]): Promise<Map<string, Set<number>>> {
    const out = new Map<string, Set<number>>();
    for (let i = 0; i < ranges.length; i += 100) {
      const chunk = ranges.slice(i, i + 100);
      const shardsOf = new Map(chunk.map((r) => [r.job, Math.max(1, r.shards ?? 1)]));
      // One range scan of the unique index per (job, range), OR-ed into one statement; a period
      // counts once each of the job's shards has a row (shards beyond the count, left by a job that
      // had more, are not counted).
      const rows = await this.wrap('read periods', () => this.table().select('job', 'scheduled_at').countDistinct({ n: 'shard' }).where((q) => {
        for (const r of chunk) {
          q.orWhere((w) => w.where('job', r.job).andWhere('scheduled_at', '>=', r.fromMs).andWhere('scheduled_at', '<=', r.toMs).andWhere('shard', '<', Math.max(1, r.shards ?? 1)));
        }
      }).groupBy('job', 'scheduled_at'));
      for (const r of rows as Array<{ job: string; scheduled_at: number | string; n: number | string }>) {
        if (Number(r.n) < (shardsOf.get(r.job) ?? 1)) continue;
        const set = out.get(r.job) ?? new Set<number>();
        set.add(Number(r.scheduled_at));
        out.set(r.job, set);
      }
    }
    return out;
  }

  async latestPeriod(job: string): Promise<number | null> {
    return (await this.latestPeriods([job])).get(job) ?? null;
  }

  async latestPeriods(jobs: string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const k = this.knex;
    // A daemon declaring 10,000 new jobs asked for each in a statement of its own (a second of
    // start-up on SQLite): one statement per 100 jobs now, each job still one index step.
    for (let i = 0; i < jobs.length; i += 100) {
      const chunk = jobs.slice(i, i + 100);
      // Manual runs are not periods of the schedule (a run by hand "now"), nor anchors of it. Newest
      // first down the unique key, stopping at the first row that is not manual: one index step, as a
      // MAX with that filter (which reads every row of the job) would not be. Each job's step is a
      // subquery of its own (an ORDER BY ... LIMIT per job), their rows put together by UNION ALL.
      const latest = chunk.map((job, n) => k.select('job', 'scheduled_at').from(
        k.from(this.db.dialect.tableUsing(k, RUNS_TABLE, 'scheduler_runs_period_attempt'))
          .select('job', 'scheduled_at').where({ job }).andWhereNot('trigger', 'manual')
          .orderBy('scheduled_at', 'desc').limit(1).as(`l${n}`)));
      const rows = (await this.wrap('read latest periods', () => (latest.length === 1 ? latest[0]! : latest[0]!.unionAll(latest.slice(1))))) as Array<{ job: string; scheduled_at: number | string }>;
      for (const r of rows) out.set(r.job, Number(r.scheduled_at));
    }
    return out;
  }

  async lastRuns(jobs: string[]): Promise<Map<string, RunRecord>> {
    return this.wrap('read last runs', async () => {
      const out = new Map<string, RunRecord>();
      for (const job of jobs) {
        const row = await this.knex.from(this.db.dialect.tableUsing(this.knex, RUNS_TABLE, 'scheduler_runs_job_started'))
          .where({ job }).orderBy([{ column: 'started_at', order: 'desc' }, { column: 'id', order: 'desc' }]).first<Row | undefined>();
        if (row) out.set(job, toRecord(row));
      }
      return out;
    });
  }

  async jobNames(): Promise<string[]> {
    return this.wrap('read job names of runs', async () => {
      // DISTINCT over the index that starts with job: one step per job, not per row, where the engine skips.
      const rows = (await this.knex.from(this.db.dialect.tableUsing(this.knex, RUNS_TABLE, 'scheduler_runs_job_started')).distinct('job')) as Array<{ job: string }>;
      // Sorted here, not by the database: collations differ between backends.
      return rows.map((r) => r.job).sort();
    });
  }

  async history(query: HistoryQuery): Promise<RunRecord[]> {
    return this.wrap('read history', async () => {
      // The index that serves the filters and the order at any size (see Dialect.tableUsing).
      const index = query.job ? (query.status ? 'scheduler_runs_job_status_started' : 'scheduler_runs_job_started')
        : query.status ? 'scheduler_runs_status_started' : 'scheduler_runs_started';
      const q = this.knex.from(this.db.dialect.tableUsing(this.knex, RUNS_TABLE, index));
      if (query.outputChars === undefined) q.select('*');
      else q.select([...(await this.columnsBut('output')), this.outputTail(query.outputChars + 1)]);
      if (query.job) q.where({ job: query.job });
      if (query.status) q.where({ status: query.status });
      q.orderBy([{ column: 'started_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(query.limit ?? 50);
      return ((await q) as Row[]).map(toRecord);
    });
  }

  private columns: Promise<string[]> | undefined;

  /** The runs table's columns but `except` (read once: they are fixed by the migrations this process ran or found). */
  private async columnsBut(except: string): Promise<string[]> {
    this.columns ??= this.knex(RUNS_TABLE).columnInfo().then((info) => Object.keys(info), (err: unknown) => {
      this.columns = undefined;
      throw err;
    });
    return (await this.columns).filter((c) => c !== except);
  }

  /** SQL: the last `chars` characters of the output column, as `output`. */
  private outputTail(chars: number): Knex.Raw {
    const n = Math.max(1, Math.floor(chars));
    return this.kind === 'sqlite' ? this.knex.raw('substr(??, ?) as ??', ['output', -n, 'output']) : this.knex.raw('right(??, ?) as ??', ['output', n, 'output']);
  }

  async jobSummaries(sinceMs: number): Promise<Map<string, JobSummary>> {
    // One row per job of the jobs table, each figure a correlated subquery that is one probe or one
    // short range of a (job, ...) index: the cost grows with the jobs and the window, not the table.
    const k = this.knex;
    const since = Math.floor(sinceMs);
    const newest = k.select('n.id').from({ n: RUNS_TABLE }).whereRaw('n.job = j.name')
      .orderBy([{ column: 'n.scheduled_at', order: 'desc' }, { column: 'n.shard', order: 'desc' }, { column: 'n.attempt', order: 'desc' }]).limit(1);
    const lastSuccess = k.select('s.finished_at').from({ s: RUNS_TABLE }).whereRaw('s.job = j.name').andWhere('s.status', 'succeeded')
      .orderBy('s.started_at', 'desc').limit(1);
    // A period failed for good: its attempt ended failed, timed out or abandoned and no later attempt exists.
    // One subquery per status: an equality on (job, status) lets every planner (MariaDB included) take
    // a range of scheduler_runs_job_status_started, where an IN list made MariaDB read all the job's rows.
    const failed = (status: string) => k.count('*').from({ f: RUNS_TABLE }).whereRaw('f.job = j.name').andWhere('f.status', status)
      .andWhere('f.started_at', '>=', since)
      .whereNotExists((q) => q.select(k.raw('1')).from({ a: RUNS_TABLE })
        .whereRaw('a.job = f.job and a.scheduled_at = f.scheduled_at and a.shard = f.shard and a.attempt > f.attempt'));
    const missed = k.count('*').from({ m: RUNS_TABLE }).whereRaw('m.job = j.name').andWhere('m.status', 'skipped').andWhere('m.reason', 'missed')
      .andWhere('m.started_at', '>=', since);
    const running = k.count('*').from({ r: RUNS_TABLE }).whereRaw('r.job = j.name').andWhere('r.status', 'running');
    const rows = await this.wrap('read job summaries', () => k.from({ j: JOBS_TABLE })
      .leftJoin({ l: RUNS_TABLE }, (on) => { on.on('l.id', '=', k.raw('(?)', [newest])); })
      .select('j.name', 'l.scheduled_at', 'l.status', 'l.finished_at', 'l.attempt', 'l.error',
        k.raw('(?) as last_success_at', [lastSuccess]), k.raw('(?) + (?) + (?) as failures', [failed('failed'), failed('timed_out'), failed('abandoned')]), k.raw('(?) as missed', [missed]), k.raw('(?) as running', [running]))) as Array<{
      name: string; scheduled_at: number | string | null; status: RunStatus | null; finished_at: number | string | null; attempt: number | null; error: string | null;
      last_success_at: number | string | null; failures: number | string; missed: number | string; running: number | string;
    }>;
    const out = new Map<string, JobSummary>();
    for (const r of rows) {
      out.set(r.name, {
        job: r.name,
        last: r.status === null || r.scheduled_at === null ? null : {
          scheduledAt: Number(r.scheduled_at), status: r.status, finishedAt: r.finished_at === null ? null : Number(r.finished_at), attempt: Number(r.attempt), error: r.error,
        },
        lastSuccessAt: r.last_success_at === null ? null : Number(r.last_success_at),
        failures: Number(r.failures),
        missed: Number(r.missed),
        running: Number(r.running),
      });
    }
    return out;
  }

  now(): Promise<number> {
    return this.db.now();
  }

  async close(): Promise<void> {
    if (this.ownsDb) await this.db.close();
  }

  // Retention: prune() and its helpers, kept together at the end of the class.

  /**
   * Deletes old finished rows in batches of at most `batchSize` ids, walking the started_at index
   * (scheduler_runs_started) from the oldest row up to the cutoff with a keyset cursor, so a batch
   * never re-reads rows it kept. Kept: a job's newest row (one probe of scheduler_runs_job_started per
   * job), pending and running rows, and every row of a period with a pending or running attempt (a
   * probe of the unique key). The DELETE re-checks status and cutoff. A dry run walks the same way.
   */
  async prune(options: PruneOptions): Promise<PruneResult> {
    const batchSize = Math.max(1, Math.min(Math.floor(options.batchSize ?? 1000), 10_000));
    const dryRun = options.dryRun === true;
    const cutoffMs = (await this.now()) - Math.max(0, Math.round(options.olderThanMs));
    const result: PruneResult = { outcome: 'pruned', deleted: 0, cutoff: new Date(cutoffMs), dryRun, batches: 0 };
    const held = await this.wrap('prune', () => this.db.dialect.tryAdvisoryLock(this.knex, 'prune', async () => {
      const newest = new Map<string, number | null>();
      let after: { at: number; id: number } | null = null;
      while (!options.signal?.aborted) {
        const rows = await this.wrap('prune: read old rows', () => this.pruneCandidates(cutoffMs, after, batchSize));
        if (rows.length === 0) return true;
        const last = rows[rows.length - 1]!;
        after = { at: Number(last.started_at), id: Number(last.id) };
        for (const job of new Set(rows.map((r) => r.job))) {
          if (!newest.has(job)) newest.set(job, await this.newestRowId(job));
        }
        const ids = rows.filter((r) => newest.get(r.job) !== Number(r.id)).map((r) => Number(r.id));
        if (ids.length === 0) continue;
        if (dryRun) {
          result.deleted += ids.length;
          continue;
        }
        const n = await this.wrap('prune: delete old rows', () => this.table().whereIn('id', ids)
          .whereNotIn('status', ['pending', 'running']).andWhere('started_at', '<', cutoffMs).del());
        result.deleted += Number(n);
        result.batches += 1;
      }
      result.outcome = 'aborted';
      return true;
    }));
    if (held === null) result.outcome = 'locked';
    return result;
  }

  /** The next finished rows older than the cutoff, after the cursor, oldest first, whose period has no live attempt. */
  private async pruneCandidates(cutoffMs: number, after: { at: number; id: number } | null, limit: number): Promise<Array<{ id: number | string; job: string; started_at: number | string }>> {
    const q = this.knex({ r: RUNS_TABLE }).select('r.id', 'r.job', 'r.started_at')
      .where('r.started_at', '<', cutoffMs)
      .whereNotIn('r.status', ['pending', 'running'])
      .whereNotExists((sub) => sub.select(this.knex.raw('1')).from({ l: RUNS_TABLE })
        .where('l.job', this.knex.ref('r.job')).andWhere('l.scheduled_at', this.knex.ref('r.scheduled_at')).andWhere('l.shard', this.knex.ref('r.shard'))
        .whereIn('l.status', ['pending', 'running']));
    if (after) {
      q.andWhere('r.started_at', '>=', after.at).andWhere((w) => w.where('r.started_at', '>', after.at).orWhere('r.id', '>', after.id));
    }
    return q.orderBy([{ column: 'r.started_at', order: 'asc' }, { column: 'r.id', order: 'asc' }]).limit(limit);
  }

  /**
   * The id of the job's newest row (by started_at, then id), or null. Two probes of
   * scheduler_runs_job_started (MAX over an index prefix), so no planner walks the started_at index
   * back from now for a job whose last row is old.
   */
  private async newestRowId(job: string): Promise<number | null> {
    return this.wrap('prune: read newest row', async () => {
      const latest = (await this.table().max({ at: 'started_at' }).where({ job }).first()) as { at: number | string | null } | undefined;
      if (latest?.at === null || latest?.at === undefined) return null;
      const row = (await this.table().max({ id: 'id' }).where({ job, started_at: Number(latest.at) }).first()) as { id: number | string | null } | undefined;
      return row?.id === null || row?.id === undefined ? null : Number(row.id);
    });
  }
}
