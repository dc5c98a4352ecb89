/**
 * The outcomes that owe nothing (succeeded, skipped) of one node's runs that end at about the same
 * moment: one UPDATE per node and flush (see Coalescer), each caller answered as it would be alone.
 */
import type { Knex } from 'knex';
import { Coalescer, type Queued } from '../../batch/coalescer.js';
import { StoreUnavailableError } from '../../errors.js';
import { RUNS_TABLE } from '../migrations.js';
import type { EndResult, RunOutcome, RunRecord } from '../types.js';
import { BATCH_MAX, type RunsContext } from './context.js';
import { endOwingNothing, isOwnOutcome, outcomeValues, type OutcomeValues } from './outcomes.js';
import { isDeadlock, keyColumns, numericId, smallestLease, type Row } from './rows.js';

/**
 * An UPDATE of coalesced outcomes carries at most about this many bytes of values (results, errors,
 * outputs may be large; MySQL's max_allowed_packet is 16 MB by default); an outcome larger alone goes alone.
 */
const OUTCOME_BATCH_BYTES = 1024 * 1024;
/**
 * Coalesced batches of one node in flight at once (group commit, see Coalescer): two, so that one
 * batch waiting on a row lock does not hold up every outcome behind it.
 */
const OUTCOME_BATCHES_IN_FLIGHT = 2;

interface OutcomeCall {
  run: RunRecord;
  outcome: RunOutcome;
}

/** Outcome calls sent in one statement, with their run ids (numbers) and values. */
type OutcomeGroup = Array<{ q: Queued<OutcomeCall, EndResult>; id: number; values: OutcomeValues }>;

export class CoalescedOutcomes {
  private readonly queue = new Coalescer<OutcomeCall, EndResult>(BATCH_MAX, (nodeId, batch) => this.sendOutcomes(nodeId, batch), OUTCOME_BATCHES_IN_FLIGHT);

  constructor(private readonly ctx: RunsContext) {}

  /** endAttempt of an outcome that owes nothing: queued for this node's next flush. */
  add(nodeId: string, call: OutcomeCall): Promise<EndResult> {
    return this.queue.add(nodeId, call);
  }

  /** Sends (and answers) every queued outcome. */
  drain(): Promise<void> {
    return this.queue.drain();
  }

  /** Each call on its own (endOwingNothing), each caller answered with its own result or error. */
  private async outcomesAlone(nodeId: string, calls: Array<Queued<OutcomeCall, EndResult>>): Promise<void> {
    await Promise.all(calls.map((q) => endOwingNothing(this.ctx, q.item.run, nodeId, q.item.outcome).then(q.resolve, q.reject)));
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
    const returning = this.ctx.kind !== 'mysql';
    let answer: unknown;
    try {
      answer = await this.ctx.leased<unknown>('record outcomes', lease, () => (returning ? this.updateFromValues(nodeId, group) : this.updateByJoin(nodeId, group)));
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
      rows = await this.ctx.leased('record outcomes: read back', lease, () => this.ctx.table().select('id', 'status', 'reason', 'node_id').whereIn('id', ids));
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
    const now = this.ctx.db.dialect.nowMs;
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
    const [res] = (await this.ctx.knex.raw(sql, bindings)) as unknown as [{ affectedRows: number }];
    return Number(res.affectedRows);
  }

  /**
   * PostgreSQL, SQLite (3.33+): `UPDATE ... FROM (VALUES (id, status, ...), ...)` joined on id, the
   * stamps placed on the store's clock in SET; RETURNING id names the rows written. (A CASE per
   * column costs SQLite's prepare time in the square of the rows: 80 ms for 200.) Every value is
   * cast, so that PostgreSQL types the VALUES columns and NULLs alike.
   */
  private async updateFromValues(nodeId: string, group: OutcomeGroup): Promise<Array<{ id: number | string }>> {
    const big = this.ctx.db.dialect.bigint;
    const now = this.ctx.db.dialect.nowMs;
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
    const res = (await this.ctx.knex.raw(sql, bindings)) as Array<{ id: number | string }> | { rows: Array<{ id: number | string }> };
    return Array.isArray(res) ? res : res.rows;
  }
}
