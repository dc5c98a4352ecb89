// Event import with a checkpoint: new rows of `source_events` are added into `customer_totals` in
// batches of EXAMPLE_BATCH (default 100), each batch in one transaction with the checkpoint that says
// how far the import got. A run that dies or loses its lease in the middle leaves the last committed
// batch behind it; the next attempt (a retry, a takeover by another node) or the next period goes on
// from there, and no event is added twice although the upsert adds (total = total + amount).
//
// Level 3 of "Making your job idempotent" (README): the step inside the body. Two things make it safe:
//  - the batch and the checkpoint commit together (one transaction), so they cannot disagree;
//  - the checkpoint moves by compare-and-set (UPDATE ... WHERE last_id = <where this batch began>): a
//    node that paused past its lease and wakes in the middle of a batch finds the checkpoint moved and
//    rolls its batch back, even before it has noticed that its lease is gone.
// The upsert is INSERT ... ON DUPLICATE KEY UPDATE on MySQL/MariaDB, INSERT ... ON CONFLICT DO UPDATE
// on PostgreSQL and SQLite (knex's onConflict().merge()).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import { defineJob } from 'cluster-cron';
import { businessDb } from './_business-db.ts';

const CHECKPOINT = 'import-events';

/** `total_cents + <the inserted row's value>`, in each dialect's words. */
function added(db: Knex, column: string): Knex.Raw {
  return db.client.config.client === 'mysql2' ? db.raw('?? + VALUES(??)', [column, column]) : db.raw('?? + excluded.??', [`customer_totals.${column}`, column]);
}

export default defineJob({
  schedule: process.env.EXAMPLE_SCHEDULE ?? '0 * * * * *', // every minute
  timeout: '5m',
  lockTtl: process.env.EXAMPLE_LOCK_TTL ?? '15s',
  retries: 5,
  retryDelay: '5s',
  async run(ctx) {
    const db = await businessDb();
    const batchSize = Number(process.env.EXAMPLE_BATCH ?? 100);
    const pauseMs = Number(process.env.EXAMPLE_BATCH_MS ?? 0); // a stand-in for slow work per batch
    // (A dry run writes nothing, this row included: it reads as if the checkpoint were at 0.)
    if (!ctx.dryRun) await db('import_checkpoints').insert({ name: CHECKPOINT, last_id: 0 }).onConflict('name').ignore();
    let batches = 0;
    let events = 0;
    for (;;) {
      ctx.signal.throwIfAborted();
      const done = await db.transaction(async (trx) => {
        const { last_id: from } = ((await trx('import_checkpoints').where({ name: CHECKPOINT }).first()) ?? { last_id: 0 }) as { last_id: number };
        const rows = (await trx('source_events').where('id', '>', from).orderBy('id').limit(batchSize)) as Array<{ id: number; customer: string; cents: number }>;
        if (rows.length === 0) return null;
        if (ctx.dryRun) return { count: rows.length, dry: true };
        const to = rows[rows.length - 1]!.id;
        // Claim the batch first: a second importer of the same batch waits here, then moves nothing.
        const moved = await trx('import_checkpoints').where({ name: CHECKPOINT, last_id: from }).update({ last_id: to, period_key: ctx.periodKey });
        if (moved !== 1) throw new Error(`checkpoint moved under this run (another attempt imported after ${from}); rolling the batch back`);
        const totals = new Map<string, { cents: number; events: number }>();
        for (const r of rows) {
          const t = totals.get(r.customer) ?? { cents: 0, events: 0 };
          t.cents += r.cents;
          t.events += 1;
          totals.set(r.customer, t);
        }
        const upserts = [...totals].map(([customer, t]) => ({ customer, total_cents: t.cents, events: t.events }));
        await trx('customer_totals').insert(upserts).onConflict('customer').merge({ total_cents: added(trx, 'total_cents'), events: added(trx, 'events') });
        if (pauseMs > 0) await sleep(pauseMs);
        // The lease is proven again before the commit: a fenced run rolls its batch back.
        ctx.signal.throwIfAborted();
        return { count: rows.length, dry: false };
      });
      if (done === null || done.dry) break;
      batches += 1;
      events += done.count;
    }
    ctx.log.info({ batches, events }, 'events imported');
    return { batches, events };
  },
});
