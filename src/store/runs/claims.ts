/**
 * Claim and insert: the rows that start an attempt (a period's claim, a skipped period, the next
 * attempt owed), and the compare-and-set of a pending or skipped row to this node's running attempt.
 */
import type { Knex } from 'knex';
import type { Trigger } from '../../jobs/types.js';
import { RUNS_TABLE } from '../migrations.js';
import type { RowValues } from '../dialect/types.js';
import type { InsertResult, NewRun, RunRecord, SkippedRun } from '../types.js';
import type { RunsContext } from './context.js';
import { DEADLOCK_RETRIES, PERIOD_KEY, isDeadlock, keyOf, smallestLease, toRecord, type Row } from './rows.js';

/** Rows per INSERT of insertRuns: 500 x 12 values, far under every backend's limit on bindings. */
const INSERT_CHUNK = 500;

export async function insertRuns(ctx: RunsContext, runs: NewRun[]): Promise<InsertResult[]> {
  if (runs.length === 0) return [];
  const stored = await ctx.leased('insert runs', smallestLease(runs.map((r) => r.leaseMs)), () => insertByKey(ctx, runs.map((run) => ({
    job: run.job,
    scheduled_at: run.scheduledAt.getTime(),
    period_key: run.periodKey,
    shard: run.shard ?? 0,
    attempt: run.attempt,
    trigger: run.trigger,
    status: 'running',
    node_id: run.nodeId,
    started_at: ctx.db.nowRaw(),
    claimed_at: ctx.db.nowRaw(),
    heartbeat_at: ctx.db.nowRaw(),
    lease_ms: run.leaseMs,
  }))));
  return stored.map((row): InsertResult => (row ? { outcome: 'inserted', run: toRecord(row) } : { outcome: 'duplicate' }));
}

export async function insertSkippedEach(ctx: RunsContext, runs: SkippedRun[]): Promise<boolean[]> {
  if (runs.length === 0) return [];
  const stored = await ctx.wrap('record skipped periods', () => insertByKey(ctx, runs.map((r) => ({
    job: r.job, scheduled_at: r.scheduledAt.getTime(), period_key: r.periodKey, shard: r.shard ?? 0, attempt: 1, trigger: r.trigger,
    status: 'skipped', reason: r.reason, node_id: r.nodeId, started_at: ctx.db.nowRaw(), finished_at: ctx.db.nowRaw(), duration_ms: 0, lease_ms: 0,
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
async function insertByKey(ctx: RunsContext, rows: Array<RowValues & { job: string; scheduled_at: number; shard: number; attempt: number }>): Promise<Array<Row | null>> {
  const out: Array<Row | null> = rows.map(() => null);
  const order = rows.map((r, i) => ({ i, job: r.job, at: r.scheduled_at, shard: r.shard, attempt: r.attempt }))
    .sort((a, b) => (a.job < b.job ? -1 : a.job > b.job ? 1 : a.at - b.at || a.shard - b.shard || a.attempt - b.attempt));
  for (let c = 0; c < order.length; c += INSERT_CHUNK) {
    const chunk = order.slice(c, c + INSERT_CHUNK);
    const values = chunk.map(({ i }) => rows[i]!);
    let stored: Record<string, unknown>[];
    for (let tries = 0; ; tries++) {
      try {
        stored = await ctx.db.dialect.insertClaims(ctx.knex, RUNS_TABLE, values, PERIOD_KEY);
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

/** Inserts the next attempt of `run` as pending, due `delayMs` from now (store clock). */
export async function insertNext(ctx: RunsContext, trx: Knex.Transaction, run: RunRecord, nodeId: string, delayMs: number): Promise<RunRecord | null> {
  const [stored] = await ctx.db.dialect.insertClaims(trx, RUNS_TABLE, [{
    job: run.job,
    scheduled_at: run.scheduledAt.getTime(),
    period_key: run.periodKey,
    shard: run.shard,
    attempt: run.attempt + 1,
    trigger: run.trigger,
    status: 'pending',
    node_id: nodeId,
    started_at: ctx.db.nowRaw(),
    claimed_at: null,
    run_at: ctx.db.nowPlus(delayMs),
    lease_ms: run.leaseMs,
  }], PERIOD_KEY);
  return stored ? toRecord(stored as unknown as Row) : null;
}

export async function claimPending(ctx: RunsContext, runId: string, nodeId: string, leaseMs: number): Promise<RunRecord | null> {
  return ctx.leased('claim pending run', leaseMs, async () => {
    const updated = await ctx.table()
      .where({ id: runId, status: 'pending' })
      .andWhereRaw(`run_at <= ${ctx.db.dialect.nowMs}`)
      .update({ status: 'running', node_id: nodeId, started_at: ctx.db.nowRaw(), claimed_at: ctx.db.nowRaw(), heartbeat_at: ctx.db.nowRaw(), lease_ms: leaseMs, run_at: null });
    if (Number(updated) === 0) return null;
    const row = await ctx.table().where({ id: runId }).first<Row | undefined>();
    return row ? toRecord(row) : null;
  });
}

export async function releasePending(ctx: RunsContext, runId: string, nodeId: string): Promise<boolean> {
  return ctx.wrap('release pending run', async () => {
    const updated = await ctx.table().where({ id: runId, node_id: nodeId, status: 'running' }).update({ status: 'pending', heartbeat_at: null, run_at: ctx.db.nowRaw() });
    return Number(updated) > 0;
  });
}

export async function reclaimSkipped(ctx: RunsContext, runId: string, nodeId: string, leaseMs: number, trigger: Trigger): Promise<RunRecord | null> {
  return ctx.leased('reclaim skipped run', leaseMs, async () => {
    const updated = await ctx.table()
      .where({ id: runId, status: 'skipped' })
      .update({ status: 'running', reason: null, trigger, node_id: nodeId, started_at: ctx.db.nowRaw(), claimed_at: ctx.db.nowRaw(), heartbeat_at: ctx.db.nowRaw(), finished_at: null, duration_ms: null, lease_ms: leaseMs });
    if (Number(updated) === 0) return null;
    const row = await ctx.table().where({ id: runId }).first<Row | undefined>();
    return row ? toRecord(row) : null;
  });
}
