// Daily settlement: one settlement row per business day, whatever runs ask for it.
//
// Level 1 and 3 of "Making your job idempotent" (README): the scheduler runs the period once; the
// effect itself is keyed by what it settles, the business day (the settlements table's primary key),
// so a forced re-run (`run-once settle-business-day --period <ISO> --force`), a retry after a crash or
// a second run of another period for the same day cannot write the day twice: the later run inserts
// nothing (INSERT ... ON CONFLICT DO NOTHING / INSERT IGNORE) and reports `written: false`, with the
// run that did write it.
import { defineJob } from 'cluster-cron';
import { businessDb } from './_business-db.ts';

export default defineJob({
  schedule: process.env.EXAMPLE_SCHEDULE ?? '0 0 2 * * *', // 02:00 in the job's zone
  timezone: 'Asia/Shanghai',
  timeout: '10m',
  lockTtl: process.env.EXAMPLE_LOCK_TTL ?? '30s',
  catchUp: '6h', // a node restart in the night must not lose the day's settlement
  retries: 2,
  retryDelay: '1m',
  async run(ctx) {
    const db = await businessDb();
    // The business day being settled: the local date before the period's.
    const day = new Date(ctx.scheduledAt.getTime() - 86_400_000).toLocaleDateString('en-CA', { timeZone: 'Asia/Shanghai' });
    const [sum] = (await db('payments').where({ day }).select(db.raw('COALESCE(SUM(cents), 0) AS total'), db.raw('COUNT(*) AS n'))) as Array<{ total: number | string; n: number | string }>;
    const total = Number(sum!.total);
    const count = Number(sum!.n);
    ctx.signal.throwIfAborted();
    if (ctx.dryRun) return { day, total, count, written: false };
    await db('settlements')
      .insert({ day, total_cents: total, payments: count, period_key: ctx.periodKey, run_id: ctx.runId })
      .onConflict('day').ignore();
    // Who holds the day now: this run, or the run that settled it before.
    const row = (await db('settlements').where({ day }).first()) as { run_id: string; period_key: string } | undefined;
    const written = row?.run_id === ctx.runId;
    ctx.log.info({ day, total, count, written }, written ? 'day settled' : 'day already settled');
    return { day, total, count, written, settledBy: row?.period_key ?? null };
  },
});
