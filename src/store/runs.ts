/**
 * The runs table (`scheduler_runs`) over knex: SQLite, MySQL/MariaDB and PostgreSQL. What differs
 * between the databases is in ./dialect/; the rules are here, once.
 */
import type { Knex } from 'knex';
import type { StoreConfig } from '../config/config.js';
import type { Trigger } from '../jobs/types.js';
import { decideEnd } from '../run/owed.js';
import { DEFAULT_MAX_RESULT_BYTES, serialiseResult } from '../run/outcome.js';
import { StoreUnavailableError } from '../errors.js';
import { Coalescer, type Queued } from '../batch/coalescer.js';
import { Database, leaseQueryTimeout } from './database.js';
import { JOBS_TABLE, RUNS_TABLE } from './migrations.js';
import type { RowValues } from './dialect/types.js';
import type {
  EndResult, FinalStatus, HistoryQuery, InsertResult, JobSummary, NewRun, PeriodRange, RetryPolicy, RunOutcome, RunRecord, RunStatus, RunStore, SkippedRun,
} from './types.js';
import type { AttemptKey, PruneOptions, PruneResult } from './types.js';

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

/** Rows per INSERT of insertRuns: 500 x 12 values, far under every backend's limit on bindings. */
const INSERT_CHUNK = 500;
/** Jobs per statement of liveRunsOf. */
const LIVE_JOBS_CHUNK = 500;
/** Coalesced writes: a node's queue is sent at once when it holds this many. */
const BATCH_MAX = 200;
/**
 * An UPDATE of coalesced outcomes carries at most about this many bytes of values (results, errors,
 * outputs may be large; MySQL's max_allowed_packet is 16 MB by default); an outcome larger alone goes alone.
 */
const OUTCOME_BATCH_BYTES = 1024 * 1024;
/**
 * Coalesced batches of one node in flight at once (group commit, see Coalescer): two, so that one
 * batch waiting on a row lock does not hold up every outcome behind it; beats: the lease pool's size.
 */
const OUTCOME_BATCHES_IN_FLIGHT = 2;
const BEAT_BATCHES_IN_FLIGHT = 2;
/** A deadlock between two batches ends one of them whole: sent again, at most this many more times. */
const DEADLOCK_RETRIES = 2;

/** The unique key of a row, as one string. */
const keyOf = (job: string, scheduledAt: number, shard: number, attempt: number): string => `${job}\u0000${scheduledAt}\u0000${shard}\u0000${attempt}`;

/** The smallest lease of a batch: its statements are bounded by the tightest of them. */
function smallestLease(leases: Array<number | undefined>): number | undefined {
  const positive = leases.filter((l): l is number => l !== undefined && l > 0);
  return positive.length > 0 ? Math.min(...positive) : undefined;
}

/** A deadlock: the database rolled the statement back whole (MySQL 1213, PostgreSQL 40P01). */
function isDeadlock(err: unknown): boolean {
  const e = (err instanceof StoreUnavailableError ? err.cause : err) as { errno?: number; code?: string; message?: string } | undefined;
  return e?.errno === 1213 || e?.code === '40P01' || /deadlock/i.test(String(e?.message ?? ''));
}

/** A run id as the id column takes it in a CASE (a number: SQLite compares an INTEGER with a text as unequal there). */
function numericId(id: string): number | null {
  const n = Number(id);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

interface OutcomeCall {
  run: RunRecord;
  outcome: RunOutcome;
}

/** Outcome calls sent in one statement, with their run ids (numbers) and values. */
type OutcomeGroup = Array<{ q: Queued<OutcomeCall, EndResult>; id: number; values: OutcomeValues }>;

interface BeatCall {
  runId: string;
  leaseMs?: number;
  key?: AttemptKey;
}

function keyColumns(k: AttemptKey): { job: string; scheduled_at: number; shard: number; attempt: number } {
  return { job: k.job, scheduled_at: k.scheduledAt.getTime(), shard: k.shard, attempt: k.attempt };
}

/** An outcome's values as stored; the stamps as how long ago (ms) they were, for the store's clock to place. */
interface OutcomeValues {
  status: string;
  /** Null without the body's timing: started_at is kept, finished_at is now, duration_ms now - started_at. */
  startedAgo: number | null;
  endedAgo: number | null;
  durationMs: number | null;
  result: string | null;
  resultNote: string | null;
  error: string | null;
  errorStack: string | null;
  reason: string | null;
  /** Undefined: the outcome carries no output and the column is left as it is. */
  output?: string | null;
}

function outcomeValues(outcome: RunOutcome): OutcomeValues {
  const body = outcome.bodyMsAgo;
  const { result, result_note } = resultColumns(outcome);
  return {
    status: outcome.status,
    // The body's own start and end on the store's clock (the node measured how long ago they were).
    startedAgo: body ? Math.max(0, Math.round(body.started)) : null,
    endedAgo: body ? Math.max(0, Math.round(body.ended)) : null,
    durationMs: body ? Math.max(0, Math.round(body.started - body.ended)) : null,
    result,
    resultNote: result_note,
    error: storableText(outcome.error),
    errorStack: storableText(outcome.errorStack),
    reason: outcome.reason === null || outcome.reason === undefined ? null : storableText(outcome.reason)!.slice(0, 200),
    // A command job's tail, already at most 64 KiB.
    ...(outcome.output !== undefined ? { output: storableText(outcome.output, MAX_OUTPUT_BYTES) } : {}),
  };
}

/**
 * Whether a row that is no longer running holds this node's own outcome (see ownEnd): this node's,
 * with the outcome's status and reason, or the cap's `failed` with the reason the cap keeps.
 */
function isOwnOutcome(row: Pick<Row, 'status' | 'reason' | 'node_id'>, nodeId: string, outcome: RunOutcome): boolean {
  if (row.node_id !== nodeId) return false;
  const reason = outcome.reason === null || outcome.reason === undefined ? null : storableText(outcome.reason)!.slice(0, 200);
  const capped = row.status === 'failed' && (outcome.status === 'abandoned' || outcome.status === 'interrupted')
    && (reason === null ? row.reason !== null && !row.reason.startsWith('lease expired') : row.reason === reason);
  return capped || (row.status === outcome.status && (row.reason ?? null) === reason);
}

export class KnexRunStore implements RunStore {
  readonly kind: RunStore['kind'];
  private readonly knex: Knex;

  /**
   * Outcomes that owe nothing (succeeded, skipped) and heartbeats, of runs that end or beat at about
   * the same moment: one UPDATE per node and flush (see Coalescer), each caller answered as alone.
   */
  private readonly outcomes = new Coalescer<OutcomeCall, EndResult>(BATCH_MAX, (nodeId, batch) => this.sendOutcomes(nodeId, batch), OUTCOME_BATCHES_IN_FLIGHT);
  private readonly beats = new Coalescer<BeatCall, boolean>(BATCH_MAX, (nodeId, batch) => this.sendHeartbeats(nodeId, batch), BEAT_BATCHES_IN_FLIGHT);

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

  connectedForMs(): number {
    return this.db.connectedForMs();
  }

  storeHost(): string | null {
    return this.db.storeHost();
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
    return (await this.insertRuns([run]))[0]!;
  }

  async insertRuns(runs: NewRun[]): Promise<InsertResult[]> {
    if (runs.length === 0) return [];
    const stored = await this.leased('insert runs', smallestLease(runs.map((r) => r.leaseMs)), () => this.insertByKey(runs.map((run) => ({
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
    }))));
    return stored.map((row): InsertResult => (row ? { outcome: 'inserted', run: toRecord(row) } : { outcome: 'duplicate' }));
  }

  async insertSkippedEach(runs: SkippedRun[]): Promise<boolean[]> {
    if (runs.length === 0) return [];
    const stored = await this.wrap('record skipped periods', () => this.insertByKey(runs.map((r) => ({
      job: r.job, scheduled_at: r.scheduledAt.getTime(), period_key: r.periodKey, shard: r.shard ?? 0, attempt: 1, trigger: r.trigger,
      status: 'skipped', reason: r.reason, node_id: r.nodeId, started_at: this.db.nowRaw(), finished_at: this.db.nowRaw(), duration_ms: 0, lease_ms: 0,
    }))));
    return stored.map((row) => row !== null);
  }

  /**
   * Inserts rows under the unique key, INSERT_CHUNK a statement where the dialect allows it, and says
   * per input which row this call inserted, as stored (store-clock stamps included); null: the key
   * was taken (another node, an earlier call, or an earlier input of this call with the same key).
   * Sent in the order of the unique key, so that two nodes inserting overlapping batches take the
   * key's locks in one order (opposite orders deadlock on PostgreSQL and InnoDB alike); a chunk a
   * deadlock rolled back whole is sent again.
   */
  private async insertByKey(rows: Array<RowValues & { job: string; scheduled_at: number; shard: number; attempt: number }>): Promise<Array<Row | null>> {
    const out: Array<Row | null> = rows.map(() => null);
    const order = rows.map((r, i) => ({ i, job: r.job, at: r.scheduled_at, shard: r.shard, attempt: r.attempt }))
      .sort((a, b) => (a.job < b.job ? -1 : a.job > b.job ? 1 : a.at - b.at || a.shard - b.shard || a.attempt - b.attempt));
    for (let c = 0; c < order.length; c += INSERT_CHUNK) {
      const chunk = order.slice(c, c + INSERT_CHUNK);
      const values = chunk.map(({ i }) => rows[i]!);
      let stored: Record<string, unknown>[];
      for (let tries = 0; ; tries++) {
        try {
          stored = await this.db.dialect.insertClaims(this.knex, RUNS_TABLE, values, PERIOD_KEY);
          break;
        } catch (err) {
          // Rolled back whole by the database: nothing of it was written.
          if (tries < DEADLOCK_RETRIES && isDeadlock(err)) continue;
          throw err;
        }
      }
      // Back to the inputs by the key; the same key twice in one call: the first is inserted.
      const waiting = new Map<string, number[]>();
      for (const o of chunk) {
        const k = keyOf(o.job, o.at, o.shard, o.attempt);
        const list = waiting.get(k) ?? [];
        list.push(o.i);
        waiting.set(k, list);
      }
      for (const row of stored as unknown as Row[]) {
        const i = waiting.get(keyOf(row.job, Number(row.scheduled_at), Number(row.shard), Number(row.attempt)))?.shift();
        if (i !== undefined) out[i] = row;
      }
    }
    return out;
  }

  async insertSkipped(runs: SkippedRun[]): Promise<number> {
    return (await this.insertSkippedEach(runs)).filter(Boolean).length;
  }

  private outcomeColumns(outcome: RunOutcome): Record<string, unknown> {
    return this.columnsOf(outcomeValues(outcome));
  }

  /** An outcome's columns for one row's UPDATE (the stamps as SQL on the store's clock). */
  private columnsOf(v: OutcomeValues): Record<string, unknown> {
    const ago = (ms: number) => this.knex.raw(`${this.db.dialect.nowMs} - ?`, [ms]);
    return {
      status: v.status,
      ...(v.startedAgo !== null && v.endedAgo !== null
        ? { started_at: ago(v.startedAgo), finished_at: ago(v.endedAgo), duration_ms: v.durationMs }
        : { finished_at: this.db.nowRaw(), duration_ms: this.knex.raw(`${this.db.dialect.nowMs} - started_at`) }),
      result: v.result,
      result_note: v.resultNote,
      error: v.error,
      error_stack: v.errorStack,
      reason: v.reason,
      // Only outcomes that carry one write the column.
      ...(v.output !== undefined ? { output: v.output } : {}),
    };
  }

  async finishRun(runId: string, nodeId: string, outcome: RunOutcome, leaseMs?: number, key?: AttemptKey): Promise<boolean> {
    return this.leased('record outcome', leaseMs, async () => {
      const updated = await this.table().where({ id: runId, node_id: nodeId, status: 'running', ...(key ? keyColumns(key) : {}) }).update(this.outcomeColumns(outcome));
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
    // The common case (succeeded, skipped) owes nothing: one conditional UPDATE, shared with the
    // outcomes of this node's other runs that end at the same moment (sendOutcomes).
    if (!OWING.has(outcome.status)) return this.outcomes.add(nodeId, { run, outcome });
    return this.leased('record outcome', run.leaseMs, () => this.knex.transaction(async (trx) => {
      await this.lockRow(trx, run.id);
      const updated = await trx(RUNS_TABLE).where({ id: run.id, node_id: nodeId, status: 'running', ...keyColumns(run) }).update(this.outcomeColumns(outcome));
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

  /** Today's one-row path of an outcome that owes nothing: the conditional UPDATE, then (matched nothing) ownEnd. */
  private async endOwingNothing(run: RunRecord, nodeId: string, outcome: RunOutcome): Promise<EndResult> {
    if (await this.finishRun(run.id, nodeId, outcome, run.leaseMs, run)) return { written: true, status: outcome.status, next: null };
    return (await this.leased('record outcome', run.leaseMs, () => this.ownEnd(this.knex, run, nodeId, outcome))) ?? { written: false, status: outcome.status, next: null };
  }

  /** Each call on its own (endOwingNothing), each caller answered with its own result or error. */
  private async outcomesAlone(nodeId: string, calls: Array<Queued<OutcomeCall, EndResult>>): Promise<void> {
    await Promise.all(calls.map((q) => this.endOwingNothing(q.item.run, nodeId, q.item.outcome).then(q.resolve, q.reject)));
  }

  /**
   * The outcomes (owing nothing) of one node's runs queued in one flush: ONE UPDATE that sets each
   * row's own values (updateFromValues, updateByJoin), conditional as alone on the rows being this
   * node's and running. The rows it wrote are known from RETURNING id (PostgreSQL, SQLite) or, on
   * MySQL, from the matched count (mysql2 connects with FOUND_ROWS) and, when short,
   * one read of the rows (their status and reason show this node's outcome); every other call takes
   * its one-row path, so that each caller hears what it would have heard alone (`written: false`, or
   * its own outcome committed by a try whose answer was lost). A store that cannot be reached fails
   * every call of the batch; a refused statement (one row's value) sends each call alone.
   */
  private async sendOutcomes(nodeId: string, batch: Array<Queued<OutcomeCall, EndResult>>): Promise<void> {
    const alone: Array<Queued<OutcomeCall, EndResult>> = [];
    const groups: OutcomeGroup[] = [[]];
    let bytes = 0;
    const seen = new Set<number>();
    for (const q of batch) {
      const id = numericId(q.item.run.id);
      let values: OutcomeValues;
      try {
        values = outcomeValues(q.item.outcome);
      } catch {
        alone.push(q); // fails alone as it would have
        continue;
      }
      // The same run twice in one flush: the second goes after, alone (one row per id in the statement).
      if (id === null || seen.has(id)) {
        alone.push(q);
        continue;
      }
      seen.add(id);
      const size = Object.values(values).reduce<number>((n, v) => n + (typeof v === 'string' ? v.length : 8), 0);
      if (bytes + size > OUTCOME_BATCH_BYTES && groups[groups.length - 1]!.length > 0) {
        groups.push([]);
        bytes = 0;
      }
      bytes += size;
      groups[groups.length - 1]!.push({ q, id, values });
    }
    await Promise.all(groups.map((g) => (g.length === 1 ? this.outcomesAlone(nodeId, [g[0]!.q]) : g.length > 1 ? this.outcomeGroup(nodeId, g) : undefined)));
    await this.outcomesAlone(nodeId, alone);
  }

  private async outcomeGroup(nodeId: string, group: OutcomeGroup): Promise<void> {
    const ids = group.map((g) => g.id);
    const lease = smallestLease(group.map((g) => g.q.item.run.leaseMs));
    const returning = this.kind !== 'mysql';
    let answer: unknown;
    try {
      answer = await this.leased<unknown>('record outcomes', lease, () => (returning ? this.updateFromValues(nodeId, group) : this.updateByJoin(nodeId, group)));
    } catch (err) {
      if (err instanceof StoreUnavailableError && !isDeadlock(err)) {
        for (const g of group) g.q.reject(err);
        return;
      }
      // Refused (one row's value, most likely) or rolled back by a deadlock: each on its own.
      await this.outcomesAlone(nodeId, group.map((g) => g.q));
      return;
    }
    const written = (g: { q: Queued<OutcomeCall, EndResult> }) => g.q.resolve({ written: true, status: g.q.item.outcome.status, next: null });
    if (returning) {
      const ids = new Set((answer as Array<{ id: number | string }>).map((r) => Number(r.id)));
      group.filter((g) => ids.has(g.id)).forEach(written);
      await this.outcomesAlone(nodeId, group.filter((g) => !ids.has(g.id)).map((g) => g.q));
      return;
    }
    if (Number(answer) === group.length) {
      group.forEach(written);
      return;
    }
    // Fewer matched: which rows hold this node's outcome now (written by this statement, or by an
    // earlier try of the same call); the others take their one-row path.
    let rows: Array<Pick<Row, 'id' | 'status' | 'reason' | 'node_id'>>;
    try {
      rows = await this.leased('record outcomes: read back', lease, () => this.table().select('id', 'status', 'reason', 'node_id').whereIn('id', ids));
    } catch {
      await this.outcomesAlone(nodeId, group.map((g) => g.q));
      return;
    }
    const byId = new Map(rows.map((r) => [Number(r.id), r]));
    const own = (g: { id: number; q: Queued<OutcomeCall, EndResult> }) => {
      const row = byId.get(g.id);
      return row !== undefined && row.status !== 'running' && isOwnOutcome(row, nodeId, g.q.item.outcome);
    };
    group.filter(own).forEach(written);
    await this.outcomesAlone(nodeId, group.filter((g) => !own(g)).map((g) => g.q));
  }

  /**
   * MySQL 8, MariaDB: the rows' values as a derived table (SELECT ... UNION ALL SELECT ...) joined on
   * id, the stamps placed on the store's clock in SET as in updateFromValues (a CASE id per column
   * costs the server the square of the rows: for 200, about twice the CPU of this form, most of which
   * is InnoDB's own row updates). The derived table comes first (STRAIGHT_JOIN): the rows
   * are found by primary key and only they are locked, in id order (the rows are sent sorted, as the
   * range of an `id IN` locks them); runs is then updated through the server's temporary table,
   * which counts a matched row once. The answer is that matched count (FOUND_ROWS): no RETURNING on
   * UPDATE. Text values go through CONCAT: assigned as a bare column of the derived table
   * (MEDIUMTEXT for a long value), MariaDB 10.11 copies a value too long for a TEXT column cut to its
   * length modulo 64 KiB, with no error in strict mode, where an expression is refused as alone.
   */
  private async updateByJoin(nodeId: string, group: OutcomeGroup): Promise<number> {
    const now = this.db.dialect.nowMs;
    const rows = [...group].sort((a, b) => a.id - b.id);
    const first = 'SELECT ? AS id, ? AS job, ? AS scheduled_at, ? AS shard, ? AS attempt, ? AS status, ? AS started_ago, ? AS ended_ago, ? AS duration_ms, ? AS result, ? AS result_note, ? AS error, ? AS error_stack, ? AS reason, ? AS output, ? AS output_given';
    const more = 'SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?';
    const bindings: Knex.RawBinding[] = [];
    for (const { id, q, values: v } of rows) {
      const k = keyColumns(q.item.run);
      bindings.push(id, k.job, k.scheduled_at, k.shard, k.attempt, v.status, v.startedAgo, v.endedAgo, v.durationMs, v.result, v.resultNote, v.error, v.errorStack, v.reason, v.output ?? null, v.output === undefined ? 0 : 1);
    }
    bindings.push(RUNS_TABLE, nodeId, 'running');
    const sql = `UPDATE (${rows.map((_, i) => (i === 0 ? first : more)).join(' UNION ALL ')}) AS v
      STRAIGHT_JOIN ?? AS r ON r.id = v.id
      SET r.status = v.status,
        r.started_at = CASE WHEN v.started_ago IS NULL THEN r.started_at ELSE ${now} - v.started_ago END,
        r.finished_at = CASE WHEN v.ended_ago IS NULL THEN ${now} ELSE ${now} - v.ended_ago END,
        r.duration_ms = CASE WHEN v.duration_ms IS NULL THEN ${now} - r.started_at ELSE v.duration_ms END,
        r.result = CONCAT(v.result), r.result_note = CONCAT(v.result_note), r.error = CONCAT(v.error),
        r.error_stack = CONCAT(v.error_stack), r.reason = v.reason,
        r.output = CASE WHEN v.output_given = 1 THEN CONCAT(v.output) ELSE r.output END
      WHERE r.node_id = ? AND r.status = ? AND r.job = v.job AND r.scheduled_at = v.scheduled_at AND r.shard = v.shard AND r.attempt = v.attempt`;
    const [res] = (await this.knex.raw(sql, bindings)) as unknown as [{ affectedRows: number }];
    return Number(res.affectedRows);
  }

  /**
   * PostgreSQL, SQLite (3.33+): `UPDATE ... FROM (VALUES (id, status, ...), ...)` joined on id, the
   * stamps placed on the store's clock in SET; RETURNING id names the rows written. (A CASE per
   * column costs SQLite's prepare time in the square of the rows: 80 ms for 200.) Every value is
   * cast, so that PostgreSQL types the VALUES columns and NULLs alike.
   */
  private async updateFromValues(nodeId: string, group: OutcomeGroup): Promise<Array<{ id: number | string }>> {
    const big = this.db.dialect.bigint;
    const now = this.db.dialect.nowMs;
    const row = `(CAST(? AS ${big}), CAST(? AS TEXT), CAST(? AS ${big}), CAST(? AS ${big}), CAST(? AS ${big}), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS INTEGER), CAST(? AS TEXT), CAST(? AS ${big}), CAST(? AS INTEGER), CAST(? AS INTEGER))`;
    const bindings: Knex.RawBinding[] = [RUNS_TABLE];
    for (const { id, q, values: v } of group) {
      const k = keyColumns(q.item.run);
      bindings.push(id, v.status, v.startedAgo, v.endedAgo, v.durationMs, v.result, v.resultNote, v.error, v.errorStack, v.reason, v.output ?? null, v.output === undefined ? 0 : 1, k.job, k.scheduled_at, k.shard, k.attempt);
    }
    bindings.push(RUNS_TABLE, RUNS_TABLE, nodeId, RUNS_TABLE, 'running', RUNS_TABLE, RUNS_TABLE, RUNS_TABLE, RUNS_TABLE, RUNS_TABLE);
    // VALUES columns are column1..column16 on both (id, status, started ago, ended ago, duration,
    // result, result note, error, stack, reason, output, output given, then the attempt's key: job,
    // scheduled_at, shard, attempt).
    const sql = `UPDATE ?? SET status = v.column2,
        started_at = CASE WHEN v.column3 IS NULL THEN started_at ELSE ${now} - v.column3 END,
        finished_at = CASE WHEN v.column4 IS NULL THEN ${now} ELSE ${now} - v.column4 END,
        duration_ms = CASE WHEN v.column5 IS NULL THEN ${now} - started_at ELSE v.column5 END,
        result = v.column6, result_note = v.column7, error = v.column8, error_stack = v.column9, reason = v.column10,
        output = CASE WHEN v.column12 = 1 THEN v.column11 ELSE output END
      FROM (VALUES ${group.map(() => row).join(', ')}) AS v
      WHERE ??.id = v.column1 AND ??.node_id = ? AND ??.status = ?
        AND ??.job = v.column13 AND ??.scheduled_at = v.column14 AND ??.shard = v.column15 AND ??.attempt = v.column16 RETURNING ??.id`;
    const res = (await this.knex.raw(sql, bindings)) as Array<{ id: number | string }> | { rows: Array<{ id: number | string }> };
    return Array.isArray(res) ? res : res.rows;
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
    const row = await db(RUNS_TABLE).select('status', 'reason', 'node_id').where({ id: run.id, ...keyColumns(run) }).first<Pick<Row, 'status' | 'reason' | 'node_id'> | undefined>();
    if (!row || !isOwnOutcome(row, nodeId, outcome)) return null;
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

  async reclaimSkipped(runId: string, nodeId: string, leaseMs: number, trigger: Trigger): Promise<RunRecord | null> {
    return this.leased('reclaim skipped run', leaseMs, async () => {
      const updated = await this.table()
        .where({ id: runId, status: 'skipped' })
        .update({ status: 'running', reason: null, trigger, node_id: nodeId, started_at: this.db.nowRaw(), claimed_at: this.db.nowRaw(), heartbeat_at: this.db.nowRaw(), finished_at: null, duration_ms: null, lease_ms: leaseMs });
      if (Number(updated) === 0) return null;
      const row = await this.table().where({ id: runId }).first<Row | undefined>();
      return row ? toRecord(row) : null;
    });
  }

  async abandonPending(runId: string, reason: string): Promise<boolean> {
    return this.wrap('abandon pending run', async () => {
      const updated = await this.table().where({ id: runId, status: 'pending' })
        .update({ status: 'abandoned', reason: reason.slice(0, 200), finished_at: this.db.nowRaw(), duration_ms: 0 });
      return Number(updated) > 0;
    });
  }

  heartbeat(runId: string, nodeId: string, leaseMs?: number, key?: AttemptKey): Promise<boolean> {
    return this.beats.add(nodeId, { runId, leaseMs, key });
  }

  private async beatAlone(runId: string, nodeId: string, leaseMs?: number, key?: AttemptKey): Promise<boolean> {
    // On the lease keepers' own connections: a burst of claims on the main pool cannot delay it.
    return this.leased('heartbeat', leaseMs, async () => {
      const updated = await this.table(this.db.leaseKnex).where({ id: runId, node_id: nodeId, status: 'running', ...(key ? keyColumns(key) : {}) }).update({ heartbeat_at: this.db.nowRaw() });
      return Number(updated) > 0;
    });
  }

  private async beatsAlone(nodeId: string, calls: Array<Queued<BeatCall, boolean>>): Promise<void> {
    await Promise.all(calls.map((q) => this.beatAlone(q.item.runId, nodeId, q.item.leaseMs, q.item.key).then(q.resolve, q.reject)));
  }

  /**
   * The heartbeats of one node's runs queued in one flush: ONE UPDATE on the lease connections,
   * bounded by the smallest of their leases. Which rows it refreshed: RETURNING id (PostgreSQL,
   * SQLite); on MySQL all when it matched them all, otherwise each beat alone to learn which.
   */
  private async sendHeartbeats(nodeId: string, batch: Array<Queued<BeatCall, boolean>>): Promise<void> {
    const byId = new Map<number, Array<Queued<BeatCall, boolean>>>();
    const alone: Array<Queued<BeatCall, boolean>> = [];
    for (const q of batch) {
      const id = numericId(q.item.runId);
      // A beat without its attempt's key (a caller that knows only the id) goes alone.
      if (id === null || !q.item.key) alone.push(q);
      else byId.set(id, [...(byId.get(id) ?? []), q]);
    }
    const ids = [...byId.keys()];
    // Beats of one run in one flush get one answer.
    const answer = (id: number, value: boolean) => byId.get(id)!.forEach((q) => q.resolve(value));
    if (ids.length === 1) {
      alone.push(...byId.get(ids[0]!)!);
    } else if (ids.length > 1) {
      const returning = this.kind !== 'mysql';
      try {
        const updated = await this.leased('heartbeats', smallestLease(batch.map((q) => q.item.leaseMs)), async (): Promise<unknown> => {
          const tuples = ids.map((id) => {
            const k = keyColumns(byId.get(id)![0]!.item.key!);
            return [id, k.job, k.scheduled_at, k.shard, k.attempt];
          });
          // `id IN` beside the tuples: the primary key is what the optimizer should range over (MariaDB
          // takes it for the ids; for the row constructor alone it may take the status index).
          const q = this.table(this.db.leaseKnex).whereIn('id', ids).whereIn(['id', 'job', 'scheduled_at', 'shard', 'attempt'], tuples).andWhere({ node_id: nodeId, status: 'running' });
          return returning ? q.update({ heartbeat_at: this.db.nowRaw() }, ['id']) : q.update({ heartbeat_at: this.db.nowRaw() });
        });
        if (returning) {
          const beaten = new Set((updated as Array<{ id: number | string }>).map((r) => Number(r.id)));
          for (const id of ids) answer(id, beaten.has(id));
        } else if (Number(updated) === ids.length) {
          for (const id of ids) answer(id, true);
        } else {
          alone.push(...ids.flatMap((id) => byId.get(id)!));
        }
      } catch (err) {
        if (err instanceof StoreUnavailableError && !isDeadlock(err)) for (const q of batch) q.reject(err);
        else alone.push(...ids.flatMap((id) => byId.get(id)!));
      }
    }
    await this.beatsAlone(nodeId, alone);
  }

  async staleRuns(limit = 500, maxLeaseMs?: number): Promise<RunRecord[]> {
    // Every row returned is resolved by a takeover (whatever its job), so a limit never hides rows for long.
    return this.wrap('read stale runs', async () => {
      const query = this.table().where({ status: 'running' }).andWhereRaw(this.stale);
      if (maxLeaseMs !== undefined) query.andWhere('lease_ms', '<=', Math.floor(maxLeaseMs));
      const rows = await query.orderBy('heartbeat_at', 'asc').limit(limit);
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
      const rows = await this.runningOfJobs()
        .where({ job, status: 'running', ...(shard !== undefined ? { shard } : {}) })
        .andWhereRaw(`heartbeat_at + lease_ms >= ${this.db.dialect.nowMs}`)
        .orderBy('scheduled_at', 'asc');
      return (rows as Row[]).map(toRecord);
    });
  }

  async liveRunsOf(jobs: string[], leaseMs?: number): Promise<Map<string, RunRecord[]>> {
    const out = new Map<string, RunRecord[]>(jobs.map((j) => [j, []]));
    const names = [...out.keys()];
    for (let i = 0; i < names.length; i += LIVE_JOBS_CHUNK) {
      const chunk = names.slice(i, i + LIVE_JOBS_CHUNK);
      // A range of (job, status, started_at) per job named.
      const rows = await this.leased('read running runs', leaseMs, () => this.runningOfJobs()
        .whereIn('job', chunk).andWhere('status', 'running')
        .andWhereRaw(`heartbeat_at + lease_ms >= ${this.db.dialect.nowMs}`)
        .orderBy([{ column: 'scheduled_at', order: 'asc' }, { column: 'shard', order: 'asc' }, { column: 'attempt', order: 'asc' }]));
      for (const row of rows as Row[]) out.get(row.job)?.push(toRecord(row));
    }
    return out;
  }

  /**
   * The runs table for reads of the running rows of some jobs: through (job, status, started_at),
   * whatever the history. MariaDB chose (job, started_at) for `job IN (...) AND status = 'running'`
   * (its estimate of one row per job), reading every row each job ever had to find its running ones:
   * 41 rows per job after 40 s of an every-second job, 43,200 after 30 days of an every-minute one.
   */
  private runningOfJobs(): Knex.QueryBuilder {
    return this.knex.from(this.db.dialect.tableUsing(this.knex, RUNS_TABLE, 'scheduler_runs_job_status_started'));
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

  async jobsWithRowAt(scheduledAt: Date, jobs: string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (let i = 0; i < jobs.length; i += 500) {
      // Point reads of the unique key's (job, scheduled_at) prefix.
      const rows = await this.wrap('read period rows', () => this.table().distinct('job').where('scheduled_at', scheduledAt.getTime()).whereIn('job', jobs.slice(i, i + 500)));
      for (const r of rows as Array<{ job: string }>) out.add(r.job);
    }
    return out;
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
          q.orWhere((w) => {
            w.where('job', r.job).andWhere('scheduled_at', '>=', r.fromMs).andWhere('scheduled_at', '<=', r.toMs).andWhere('shard', '<', Math.max(1, r.shards ?? 1));
            if (r.nodeId !== undefined) w.andWhere('node_id', r.nodeId);
            if (r.finalOnly) w.whereNotIn('status', ['running', 'pending']);
          });
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
    const ended = k.select('e.id').from({ e: RUNS_TABLE }).whereRaw('e.job = j.name').whereNotIn('e.status', ['running', 'pending'])
      .orderBy([{ column: 'e.scheduled_at', order: 'desc' }, { column: 'e.shard', order: 'desc' }, { column: 'e.attempt', order: 'desc' }]).limit(1);
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
      .leftJoin({ le: RUNS_TABLE }, (on) => { on.on('le.id', '=', k.raw('(?)', [ended])); })
      .select('j.name', 'l.scheduled_at', 'l.status', 'l.finished_at', 'l.attempt', 'l.error',
        'le.scheduled_at as ended_scheduled_at', 'le.status as ended_status', 'le.attempt as ended_attempt', 'le.finished_at as ended_finished_at', 'le.error as ended_error',
        k.raw('(?) as last_success_at', [lastSuccess]), k.raw('(?) + (?) + (?) as failures', [failed('failed'), failed('timed_out'), failed('abandoned')]), k.raw('(?) as missed', [missed]), k.raw('(?) as running', [running]))) as Array<{
      name: string; scheduled_at: number | string | null; status: RunStatus | null; finished_at: number | string | null; attempt: number | null; error: string | null;
      ended_scheduled_at: number | string | null; ended_status: RunStatus | null; ended_attempt: number | string | null; ended_finished_at: number | string | null; ended_error: string | null;
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
        lastEnded: r.ended_status === null || r.ended_scheduled_at === null ? null : {
          scheduledAt: Number(r.ended_scheduled_at), status: r.ended_status, finishedAt: r.ended_finished_at === null ? null : Number(r.ended_finished_at), attempt: Number(r.ended_attempt), error: r.ended_error,
        },
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
    // Writes queued for coalescing are sent (and answered) before the pool goes.
    await Promise.all([this.outcomes.drain(), this.beats.drain()]);
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
