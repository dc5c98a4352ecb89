// Hourly order sync: pulls the orders changed during the last hour from a shop API and upserts them by
// order id, so a retry or an overlapping window updates orders instead of duplicating them. The "API"
// here is a stand-in that derives orders from the period; replace fetchOrders() with your client.
//
// It imports only node: modules and `cluster-cron`, so it runs wherever the jobs folder is copied.
// Files (a stand-in for your database): one `<data>/orders/<order id>.json` per order, replaced whole
// (write a temporary file, then rename it over the old one: the upsert). `<data>` is $EXAMPLES_DATA_DIR,
// else `data/examples` under the working directory (beside the embedded default store `./data/scheduler.db`).
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defineJob } from 'cluster-cron';

interface Order { id: string; status: string; cents: number; updatedAt: string }

const dataDir = (): string => resolve(process.env.EXAMPLES_DATA_DIR || join('data', 'examples'));

async function fetchOrders(since: Date, until: Date, signal: AbortSignal): Promise<Order[]> {
  if (signal.aborted) throw new Error('aborted');
  const hour = until.toISOString().slice(0, 13);
  return [1, 2, 3].map((n) => ({ id: `${hour}-${n}`, status: 'paid', cents: 1000 * n, updatedAt: since.toISOString() }));
}

export default defineJob({
  schedule: '5 * * * *', // five past every hour
  timeout: '15m',
  catchUp: '30m',
  coalesce: true,
  retries: 3,
  retryDelay: '20s',
  async run(ctx) {
    const until = ctx.scheduledAt;
    const since = new Date(until.getTime() - 3_600_000);
    const orders = await fetchOrders(since, until, ctx.signal);
    if (ctx.dryRun) return { fetched: orders.length, upserted: 0 };
    const dir = join(dataDir(), 'orders');
    mkdirSync(dir, { recursive: true });
    for (const order of orders) {
      if (ctx.signal.aborted) throw new Error(`aborted: ${String(ctx.signal.reason)}`);
      const file = join(dir, `${encodeURIComponent(order.id)}.json`);
      const temp = join(dir, `.${encodeURIComponent(order.id)}.${ctx.runId}.tmp`);
      writeFileSync(temp, `${JSON.stringify({ ...order, syncedBy: ctx.periodKey })}\n`);
      renameSync(temp, file);
    }
    ctx.log.info({ upserted: orders.length, since: since.toISOString() }, 'orders synced');
    return { fetched: orders.length, upserted: orders.length };
  },
});
