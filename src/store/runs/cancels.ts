/**
 * `cancel`: a request written on a running attempt's row (who, why, when by the store's clock), and
 * the read of the node that holds attempts: which of them were asked to stop.
 */
import { RUNS_TABLE } from '../migrations.js';
import type { RunsContext } from './context.js';

const idValue = (id: string): number => (/^\d{1,18}$/.test(id) ? Number(id) : -1);
/** Ids a statement names at most. */
const CHUNK = 500;

export async function requestCancel(ctx: RunsContext, runId: string, by: { actor: string; reason: string | null }): Promise<boolean> {
  const id = idValue(runId);
  if (id < 0) return false;
  const n = await ctx.wrap('request cancel', () => ctx.knex(RUNS_TABLE).where({ id, status: 'running' })
    .update({ cancel_requested_at: ctx.knex.raw(ctx.db.dialect.nowMs), cancel_by: by.actor.slice(0, 200), cancel_reason: by.reason === null ? null : by.reason.slice(0, 500) }));
  return Number(n) > 0;
}

export async function cancelRequests(ctx: RunsContext, runIds: string[]): Promise<Map<string, { actor: string; reason: string | null }>> {
  const out = new Map<string, { actor: string; reason: string | null }>();
  const ids = runIds.map(idValue).filter((id) => id >= 0);
  for (let i = 0; i < ids.length; i += CHUNK) {
    const rows = (await ctx.wrap('read cancel requests', () => ctx.knex(RUNS_TABLE).select('id', 'cancel_by', 'cancel_reason')
      .whereIn('id', ids.slice(i, i + CHUNK)).whereNotNull('cancel_requested_at').andWhere('status', 'running'))) as Array<{ id: number | string; cancel_by: string | null; cancel_reason: string | null }>;
    for (const r of rows) out.set(String(r.id), { actor: r.cancel_by ?? 'unknown', reason: r.cancel_reason });
  }
  return out;
}
