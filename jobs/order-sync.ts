// Hourly order sync: pulls the orders changed during the last hour from a shop API and upserts them,
// so a retry or an overlapping window updates rows instead of duplicating them. The "API" here is a
// stand-in that derives orders from the period; replace fetchOrders() with your client.
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { defineJob } from 'cluster-cron';

interface Order { id: string; status: string; cents: number; updatedAt: string }

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
    mkdirSync('data', { recursive: true });
    const db = new Database('data/example-shop.db');
    try {
      db.exec('CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, status TEXT NOT NULL, cents INTEGER NOT NULL, updated_at TEXT NOT NULL)');
      const upsert = db.prepare(`INSERT INTO orders (id, status, cents, updated_at) VALUES (@id, @status, @cents, @updatedAt)
        ON CONFLICT(id) DO UPDATE SET status = excluded.status, cents = excluded.cents, updated_at = excluded.updated_at`);
      db.transaction((rows: Order[]) => rows.forEach((o) => upsert.run(o)))(orders);
    } finally {
      db.close();
    }
    ctx.log.info({ upserted: orders.length, since: since.toISOString() }, 'orders synced');
    return { fetched: orders.length, upserted: orders.length };
  },
});
