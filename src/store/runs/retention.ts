/**
 * Retention: prune() deletes old finished rows in batches under the advisory lock 'prune', keeping
 * what the retry rules and the schedule's anchor still read.
 */
import { RUN_LOGS_TABLE, RUNS_TABLE } from '../migrations.js';
import type { PruneOptions, PruneResult } from '../types.js';
import type { RunsContext } from './context.js';

/**
 * Deletes old finished rows in batches of at most `batchSize` ids, walking the started_at index
 * (scheduler_runs_started) from the oldest row up to the cutoff with a keyset cursor, so a batch
 * never re-reads rows it kept. Kept: a job's newest row (one probe of scheduler_runs_job_started per
 * job), pending and running rows, and every row of a period with a pending or running attempt (a
 * probe of the unique key). The DELETE re-checks status and cutoff. A dry run walks the same way.
 */
export async function prune(ctx: RunsContext, options: PruneOptions): Promise<PruneResult> {
  const batchSize = Math.max(1, Math.min(Math.floor(options.batchSize ?? 1000), 10_000));
  const dryRun = options.dryRun === true;
  const cutoffMs = (await ctx.db.now()) - Math.max(0, Math.round(options.olderThanMs));
  const result: PruneResult = { outcome: 'pruned', deleted: 0, cutoff: new Date(cutoffMs), dryRun, batches: 0 };
  const held = await ctx.wrap('prune', () => ctx.db.dialect.tryAdvisoryLock(ctx.knex, 'prune', async () => {
    const newest = new Map<string, number | null>();
    let after: { at: number; id: number } | null = null;
    while (!options.signal?.aborted) {
      const rows = await ctx.wrap('prune: read old rows', () => pruneCandidates(ctx, cutoffMs, after, batchSize));
      if (rows.length === 0) return true;
      const last = rows[rows.length - 1]!;
      after = { at: Number(last.started_at), id: Number(last.id) };
      for (const job of new Set(rows.map((r) => r.job))) {
        if (!newest.has(job)) newest.set(job, await newestRowId(ctx, job));
      }
      const ids = rows.filter((r) => newest.get(r.job) !== Number(r.id)).map((r) => Number(r.id));
      if (ids.length === 0) continue;
      if (dryRun) {
        result.deleted += ids.length;
        continue;
      }
      const n = await ctx.wrap('prune: delete old rows', () => ctx.table().whereIn('id', ids)
        .whereNotIn('status', ['pending', 'running']).andWhere('started_at', '<', cutoffMs).del());
      result.deleted += Number(n);
      result.batches += 1;
      // Their logs go with them (not those of a row the DELETE's re-check kept).
      await ctx.wrap('prune: delete the logs of old rows', () => ctx.knex(RUN_LOGS_TABLE).whereIn('run_id', ids)
        .whereNotExists((sub) => sub.select(ctx.knex.raw('1')).from(RUNS_TABLE).where('id', ctx.knex.ref(`${RUN_LOGS_TABLE}.run_id`))).del());
    }
    result.outcome = 'aborted';
    return true;
  }));
  if (held === null) result.outcome = 'locked';
  return result;
}

/** The next finished rows older than the cutoff, after the cursor, oldest first, whose period has no live attempt. */
async function pruneCandidates(ctx: RunsContext, cutoffMs: number, after: { at: number; id: number } | null, limit: number): Promise<Array<{ id: number | string; job: string; started_at: number | string }>> {
  const q = ctx.knex({ r: RUNS_TABLE }).select('r.id', 'r.job', 'r.started_at')
    .where('r.started_at', '<', cutoffMs)
    .whereNotIn('r.status', ['pending', 'running'])
    .whereNotExists((sub) => sub.select(ctx.knex.raw('1')).from({ l: RUNS_TABLE })
      .where('l.job', ctx.knex.ref('r.job')).andWhere('l.scheduled_at', ctx.knex.ref('r.scheduled_at')).andWhere('l.shard', ctx.knex.ref('r.shard'))
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
async function newestRowId(ctx: RunsContext, job: string): Promise<number | null> {
  return ctx.wrap('prune: read newest row', async () => {
    const latest = (await ctx.table().max({ at: 'started_at' }).where({ job }).first()) as { at: number | string | null } | undefined;
    if (latest?.at === null || latest?.at === undefined) return null;
    const row = (await ctx.table().max({ id: 'id' }).where({ job, started_at: Number(latest.at) }).first()) as { id: number | string | null } | undefined;
    return row?.id === null || row?.id === undefined ? null : Number(row.id);
  });
}
