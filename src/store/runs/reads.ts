/**
 * Reads of the runs table: a period's attempts, the live runs of jobs, which periods have rows, the
 * latest period and run of jobs, history, job names and the per-job summaries. Each read names the
 * index it means to use where a planner would choose worse (see Dialect.tableUsing).
 */
import type { Knex } from 'knex';
import { JOBS_TABLE, RUNS_TABLE } from '../migrations.js';
import type { HistoryQuery, JobSummary, PeriodRange, RunRecord, RunStatus } from '../types.js';
import type { RunsContext } from './context.js';
import { toRecord, type Row } from './rows.js';

/** Jobs per statement of liveRunsOf. */
const LIVE_JOBS_CHUNK = 500;

export async function periodRuns(ctx: RunsContext, job: string, scheduledAt: Date, shard = 0): Promise<RunRecord[]> {
  return ctx.wrap('read period', async () => {
    const rows = await ctx.table().where({ job, scheduled_at: scheduledAt.getTime(), shard }).orderBy('attempt', 'asc');
    return (rows as Row[]).map(toRecord);
  });
}

/** One attempt by its run id, or null (an id that is not a number matches no row). */
export async function runById(ctx: RunsContext, runId: string): Promise<RunRecord | null> {
  if (!/^\d{1,18}$/.test(runId)) return null;
  return ctx.wrap('read run', async () => {
    const row = (await ctx.table().where({ id: Number(runId) }).first()) as Row | undefined;
    return row ? toRecord(row) : null;
  });
}

export async function liveRuns(ctx: RunsContext, job: string, leaseMs?: number, shard?: number): Promise<RunRecord[]> {
  return ctx.leased('read running runs', leaseMs, async () => {
    const rows = await runningOfJobs(ctx)
      .where({ job, status: 'running', ...(shard !== undefined ? { shard } : {}) })
      .andWhereRaw(`heartbeat_at + lease_ms >= ${ctx.db.dialect.nowMs}`)
      .orderBy('scheduled_at', 'asc');
    return (rows as Row[]).map(toRecord);
  });
}

export async function liveRunsOf(ctx: RunsContext, jobs: string[], leaseMs?: number): Promise<Map<string, RunRecord[]>> {
  const out = new Map<string, RunRecord[]>(jobs.map((j) => [j, []]));
  const names = [...out.keys()];
  for (let i = 0; i < names.length; i += LIVE_JOBS_CHUNK) {
    const chunk = names.slice(i, i + LIVE_JOBS_CHUNK);
    // A range of (job, status, started_at) per job named.
    const rows = await ctx.leased('read running runs', leaseMs, () => runningOfJobs(ctx)
      .whereIn('job', chunk).andWhere('status', 'running')
      .andWhereRaw(`heartbeat_at + lease_ms >= ${ctx.db.dialect.nowMs}`)
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
function runningOfJobs(ctx: RunsContext): Knex.QueryBuilder {
  return ctx.knex.from(ctx.db.dialect.tableUsing(ctx.knex, RUNS_TABLE, 'scheduler_runs_job_status_started'));
}

export async function periodShards(ctx: RunsContext, job: string, scheduledAt: Date): Promise<Set<number>> {
  return ctx.wrap('read period shards', async () => {
    const rows = await ctx.table().distinct('shard').where({ job, scheduled_at: scheduledAt.getTime() });
    return new Set((rows as Array<{ shard: number | string }>).map((r) => Number(r.shard)));
  });
}

export async function jobsWithRowAt(ctx: RunsContext, scheduledAt: Date, jobs: string[]): Promise<Set<string>> {
  const out = new Set<string>();
  for (let i = 0; i < jobs.length; i += 500) {
    // Point reads of the unique key's (job, scheduled_at) prefix.
    const rows = await ctx.wrap('read period rows', () => ctx.table().distinct('job').where('scheduled_at', scheduledAt.getTime()).whereIn('job', jobs.slice(i, i + 500)));
    for (const r of rows as Array<{ job: string }>) out.add(r.job);
  }
  return out;
}

export async function rowsInRanges(ctx: RunsContext, ranges: PeriodRange[]): Promise<Map<string, Set<number>>> {
  const out = new Map<string, Set<number>>();
  for (let i = 0; i < ranges.length; i += 100) {
    const chunk = ranges.slice(i, i + 100);
    const shardsOf = new Map(chunk.map((r) => [r.job, Math.max(1, r.shards ?? 1)]));
    // One range scan of the unique index per (job, range), OR-ed into one statement; a period
    // counts once each of the job's shards has a row (shards beyond the count, left by a job that
    // had more, are not counted).
    const rows = await ctx.wrap('read periods', () => ctx.table().select('job', 'scheduled_at').countDistinct({ n: 'shard' }).where((q) => {
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

export async function latestPeriods(ctx: RunsContext, jobs: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const k = ctx.knex;
  // A daemon declaring 10,000 new jobs asked for each in a statement of its own (a second of
  // start-up on SQLite): one statement per 100 jobs now, each job still one index step.
  for (let i = 0; i < jobs.length; i += 100) {
    const chunk = jobs.slice(i, i + 100);
    // Manual runs are not periods of the schedule (a run by hand "now"), nor anchors of it; nor are
    // a backfill's runs (old periods run on request). Newest
    // first down the unique key, stopping at the first row that is not manual: one index step, as a
    // MAX with that filter (which reads every row of the job) would not be. Each job's step is a
    // subquery of its own (an ORDER BY ... LIMIT per job), their rows put together by UNION ALL.
    const latest = chunk.map((job, n) => k.select('job', 'scheduled_at').from(
      k.from(ctx.db.dialect.tableUsing(k, RUNS_TABLE, 'scheduler_runs_period_attempt'))
        .select('job', 'scheduled_at').where({ job }).whereNotIn('trigger', ['manual', 'backfill'])
        .orderBy('scheduled_at', 'desc').limit(1).as(`l${n}`)));
    const rows = (await ctx.wrap('read latest periods', () => (latest.length === 1 ? latest[0]! : latest[0]!.unionAll(latest.slice(1))))) as Array<{ job: string; scheduled_at: number | string }>;
    for (const r of rows) out.set(r.job, Number(r.scheduled_at));
  }
  return out;
}

export async function lastRuns(ctx: RunsContext, jobs: string[]): Promise<Map<string, RunRecord>> {
  return ctx.wrap('read last runs', async () => {
    const out = new Map<string, RunRecord>();
    for (const job of jobs) {
      const row = await ctx.knex.from(ctx.db.dialect.tableUsing(ctx.knex, RUNS_TABLE, 'scheduler_runs_job_started'))
        .where({ job }).orderBy([{ column: 'started_at', order: 'desc' }, { column: 'id', order: 'desc' }]).first<Row | undefined>();
      if (row) out.set(job, toRecord(row));
    }
    return out;
  });
}

export async function jobNames(ctx: RunsContext): Promise<string[]> {
  return ctx.wrap('read job names of runs', async () => {
    // DISTINCT over the index that starts with job: one step per job, not per row, where the engine skips.
    const rows = (await ctx.knex.from(ctx.db.dialect.tableUsing(ctx.knex, RUNS_TABLE, 'scheduler_runs_job_started')).distinct('job')) as Array<{ job: string }>;
    // Sorted here, not by the database: collations differ between backends.
    return rows.map((r) => r.job).sort();
  });
}

export async function history(ctx: RunsContext, query: HistoryQuery): Promise<RunRecord[]> {
  return ctx.wrap('read history', async () => {
    // The index that serves the filters and the order at any size (see Dialect.tableUsing).
    const index = query.job ? (query.status ? 'scheduler_runs_job_status_started' : 'scheduler_runs_job_started')
      : query.status ? 'scheduler_runs_status_started' : 'scheduler_runs_started';
    const q = ctx.knex.from(ctx.db.dialect.tableUsing(ctx.knex, RUNS_TABLE, index));
    if (query.outputChars === undefined) q.select('*');
    else q.select([...(await ctx.columnsBut('output')), outputTail(ctx, query.outputChars + 1)]);
    if (query.job) q.where({ job: query.job });
    if (query.status) q.where({ status: query.status });
    q.orderBy([{ column: 'started_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(query.limit ?? 50);
    return ((await q) as Row[]).map(toRecord);
  });
}

/** SQL: the last `chars` characters of the output column, as `output`. */
function outputTail(ctx: RunsContext, chars: number): Knex.Raw {
  const n = Math.max(1, Math.floor(chars));
  return ctx.kind === 'sqlite' ? ctx.knex.raw('substr(??, ?) as ??', ['output', -n, 'output']) : ctx.knex.raw('right(??, ?) as ??', ['output', n, 'output']);
}

export async function jobSummaries(ctx: RunsContext, sinceMs: number): Promise<Map<string, JobSummary>> {
  // One row per job of the jobs table, each figure a correlated subquery that is one probe or one
  // short range of a (job, ...) index: the cost grows with the jobs and the window, not the table.
  const k = ctx.knex;
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
  const rows = await ctx.wrap('read job summaries', () => k.from({ j: JOBS_TABLE })
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
