/**
 * Outcome: the write that ends an attempt, one row at a time (finishRun, endAttempt's transaction
 * with what it owes next), and the rules the coalesced path (./outcome-batch.ts) shares with it: the
 * values as stored, and how a row that is no longer running is recognised as this node's own outcome.
 */
import type { Knex } from 'knex';
import { decideEnd } from '../../run/owed.js';
import { DEFAULT_MAX_RESULT_BYTES, serialiseResult } from '../../run/outcome.js';
import { RUNS_TABLE } from '../migrations.js';
import type { AttemptKey, EndResult, FinalStatus, RetryPolicy, RunOutcome, RunRecord, RunStatus } from '../types.js';
import { insertNext } from './claims.js';
import type { RunsContext } from './context.js';
import { MAX_OUTPUT_BYTES, keyColumns, storableText, toRecord, type Row } from './rows.js';

/** Statuses that end an attempt without an outcome of its own, or by a failure: the next attempt may be owed. */
export const OWING: ReadonlySet<FinalStatus> = new Set(['failed', 'timed_out', 'abandoned', 'interrupted']);

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

/** An outcome's values as stored; the stamps as how long ago (ms) they were, for the store's clock to place. */
export interface OutcomeValues {
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

export function outcomeValues(outcome: RunOutcome): OutcomeValues {
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
export function isOwnOutcome(row: Pick<Row, 'status' | 'reason' | 'node_id'>, nodeId: string, outcome: RunOutcome): boolean {
  if (row.node_id !== nodeId) return false;
  const reason = outcome.reason === null || outcome.reason === undefined ? null : storableText(outcome.reason)!.slice(0, 200);
  const capped = row.status === 'failed' && (outcome.status === 'abandoned' || outcome.status === 'interrupted')
    && (reason === null ? row.reason !== null && !row.reason.startsWith('lease expired') : row.reason === reason);
  return capped || (row.status === outcome.status && (row.reason ?? null) === reason);
}

function outcomeColumns(ctx: RunsContext, outcome: RunOutcome): Record<string, unknown> {
  return columnsOf(ctx, outcomeValues(outcome));
}

/** An outcome's columns for one row's UPDATE (the stamps as SQL on the store's clock). */
function columnsOf(ctx: RunsContext, v: OutcomeValues): Record<string, unknown> {
  const ago = (ms: number) => ctx.knex.raw(`${ctx.db.dialect.nowMs} - ?`, [ms]);
  return {
    status: v.status,
    ...(v.startedAgo !== null && v.endedAgo !== null
      ? { started_at: ago(v.startedAgo), finished_at: ago(v.endedAgo), duration_ms: v.durationMs }
      : { finished_at: ctx.db.nowRaw(), duration_ms: ctx.knex.raw(`${ctx.db.dialect.nowMs} - started_at`) }),
    result: v.result,
    result_note: v.resultNote,
    error: v.error,
    error_stack: v.errorStack,
    reason: v.reason,
    // Only outcomes that carry one write the column.
    ...(v.output !== undefined ? { output: v.output } : {}),
  };
}

export async function finishRun(ctx: RunsContext, runId: string, nodeId: string, outcome: RunOutcome, leaseMs?: number, key?: AttemptKey): Promise<boolean> {
  return ctx.leased('record outcome', leaseMs, async () => {
    const updated = await ctx.table().where({ id: runId, node_id: nodeId, status: 'running', ...(key ? keyColumns(key) : {}) }).update(outcomeColumns(ctx, outcome));
    return Number(updated) > 0;
  });
}

/** Statuses of the period's attempts before `run`, read inside the transaction that ends it. */
export async function earlierStatuses(trx: Knex.Transaction, run: RunRecord): Promise<RunStatus[]> {
  const rows = await trx(RUNS_TABLE).select('status')
    .where({ job: run.job, scheduled_at: run.scheduledAt.getTime(), shard: run.shard })
    .andWhere('attempt', '<', run.attempt);
  return (rows as Array<{ status: RunStatus }>).map((r) => r.status);
}

/**
 * endAttempt of an outcome that may owe the next attempt (OWING): one transaction that writes the
 * outcome, applies the cap and inserts what is owed. (The others go through ./outcome-batch.ts.)
 */
export async function endOwing(ctx: RunsContext, run: RunRecord, nodeId: string, outcome: RunOutcome, policy: RetryPolicy | null): Promise<EndResult> {
  return ctx.leased('record outcome', run.leaseMs, () => ctx.knex.transaction(async (trx) => {
    await ctx.lockRow(trx, run.id);
    const updated = await trx(RUNS_TABLE).where({ id: run.id, node_id: nodeId, status: 'running', ...keyColumns(run) }).update(outcomeColumns(ctx, outcome));
    if (Number(updated) === 0) return (await ownEnd(trx, run, nodeId, outcome)) ?? { written: false, status: outcome.status, next: null };
    const decision = decideEnd(outcome.status, await earlierStatuses(trx, run), policy);
    if (decision.status !== outcome.status) {
      await trx(RUNS_TABLE).where({ id: run.id }).update(capColumns(decision.status, outcome.reason ?? decision.reason ?? null,
        outcome.error ? `${outcome.error}; ${decision.reason}` : decision.reason ?? null));
    }
    const next = decision.next ? await insertNext(ctx, trx, run, nodeId, decision.next.delayMs) : null;
    return { written: true, status: decision.status, next };
  }));
}

/** Today's one-row path of an outcome that owes nothing: the conditional UPDATE, then (matched nothing) ownEnd. */
export async function endOwingNothing(ctx: RunsContext, run: RunRecord, nodeId: string, outcome: RunOutcome): Promise<EndResult> {
  if (await finishRun(ctx, run.id, nodeId, outcome, run.leaseMs, run)) return { written: true, status: outcome.status, next: null };
  return (await ctx.leased('record outcome', run.leaseMs, () => ownEnd(ctx.knex, run, nodeId, outcome))) ?? { written: false, status: outcome.status, next: null };
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
export async function ownEnd(db: Knex | Knex.Transaction, run: RunRecord, nodeId: string, outcome: RunOutcome): Promise<EndResult | null> {
  const row = await db(RUNS_TABLE).select('status', 'reason', 'node_id').where({ id: run.id, ...keyColumns(run) }).first<Pick<Row, 'status' | 'reason' | 'node_id'> | undefined>();
  if (!row || !isOwnOutcome(row, nodeId, outcome)) return null;
  const next = await db(RUNS_TABLE)
    .where({ job: run.job, scheduled_at: run.scheduledAt.getTime(), shard: run.shard, attempt: run.attempt + 1 })
    .first<Row | undefined>();
  return { written: true, status: row.status as FinalStatus, next: next ? toRecord(next) : null };
}

/** The columns that the MAX_UNFINISHED cap rewrites, in the transaction that ended the attempt. */
export function capColumns(status: FinalStatus, reason: string | null, error: string | null): Record<string, unknown> {
  return { status, reason: reason === null ? null : storableText(reason)!.slice(0, 200), error: storableText(error) };
}
