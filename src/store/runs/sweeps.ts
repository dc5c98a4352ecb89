/**
 * The owed-work sweeps' part of the store: the running rows whose lease ran out and their takeover
 * (abandoned, with the next attempt owed in the same transaction), and the pending attempts that
 * are due or that nobody can run.
 */
import { decideEnd } from '../../run/owed.js';
import { RUNS_TABLE } from '../migrations.js';
import type { EndResult, RunRecord } from '../types.js';
import { insertNext } from './claims.js';
import type { RunsContext } from './context.js';
import { capColumns, earlierStatuses } from './outcomes.js';
import { toRecord, type Row } from './rows.js';

export async function staleRuns(ctx: RunsContext, limit = 500, maxLeaseMs?: number): Promise<RunRecord[]> {
  // Every row returned is resolved by a takeover (whatever its job), so a limit never hides rows for long.
  return ctx.wrap('read stale runs', async () => {
    const query = ctx.table().where({ status: 'running' }).andWhereRaw(ctx.stale);
    if (maxLeaseMs !== undefined) query.andWhere('lease_ms', '<=', Math.floor(maxLeaseMs));
    const rows = await query.orderBy('heartbeat_at', 'asc').limit(limit);
    return (rows as Row[]).map(toRecord);
  });
}

export async function takeOver(ctx: RunsContext, run: RunRecord, nodeId: string, reason: string, owe: boolean): Promise<EndResult | null> {
  return ctx.db.transaction('take over a stale run', async (trx) => {
    await ctx.lockRow(trx, run.id);
    // An operator asked to cancel it before its node went silent: it ends cancelled, owing nothing.
    // (The write first: a SQLite transaction that read first could not take the write lock.)
    const cancelled = await trx(RUNS_TABLE).where({ id: run.id, status: 'running' }).whereNotNull('cancel_requested_at').andWhereRaw(ctx.stale)
      .update({ status: 'cancelled', reason: 'cancelled', finished_at: ctx.db.nowRaw(), duration_ms: ctx.knex.raw(`${ctx.db.dialect.nowMs} - started_at`) });
    if (Number(cancelled) > 0) {
      const asked = (await trx(RUNS_TABLE).select('cancel_by', 'cancel_reason').where({ id: run.id }).first()) as { cancel_by: string | null; cancel_reason: string | null };
      const error = `cancelled by ${asked.cancel_by ?? 'unknown'}${asked.cancel_reason ? `: ${asked.cancel_reason}` : ''} (its node stopped answering; ended by ${nodeId})`;
      await trx(RUNS_TABLE).where({ id: run.id }).update({ error });
      return { written: true, status: 'cancelled', next: null };
    }
    const updated = await trx(RUNS_TABLE)
      .where({ id: run.id, status: 'running' })
      .andWhereRaw(ctx.stale)
      .update({
        status: 'abandoned',
        reason: reason.slice(0, 200),
        error: null,
        finished_at: ctx.db.nowRaw(),
        duration_ms: ctx.knex.raw(`${ctx.db.dialect.nowMs} - started_at`),
      });
    if (Number(updated) === 0) return null;
    const decision = decideEnd('abandoned', await earlierStatuses(trx, run), null, owe);
    if (decision.status !== 'abandoned') {
      const why = decision.reason ? `${reason}; ${decision.reason}` : reason;
      await trx(RUNS_TABLE).where({ id: run.id }).update(capColumns(decision.status, why, why));
    }
    const next = decision.next ? await insertNext(ctx, trx, run, nodeId, 0) : null;
    return { written: true, status: decision.status, next };
  });
}

export async function duePending(ctx: RunsContext, limit = 500): Promise<RunRecord[]> {
  return ctx.wrap('read pending runs', async () => {
    const rows = await ctx.table().where({ status: 'pending' }).andWhereRaw(`run_at <= ${ctx.db.dialect.nowMs}`).orderBy('run_at', 'asc').limit(limit);
    return (rows as Row[]).map(toRecord);
  });
}

export async function abandonPending(ctx: RunsContext, runId: string, reason: string): Promise<boolean> {
  return ctx.wrap('abandon pending run', async () => {
    const updated = await ctx.table().where({ id: runId, status: 'pending' })
      .update({ status: 'abandoned', reason: reason.slice(0, 200), finished_at: ctx.db.nowRaw(), duration_ms: 0 });
    return Number(updated) > 0;
  });
}
