// Order delivery: every paid order is handed to the carrier ONCE, whatever runs ask for it (the
// scheduled run, a manual `run-once order-delivery` beside it, a retry after a timeout whose first
// attempt did reach the carrier, the takeover of a node that paused in the middle of a call).
//
// Level 2 of "Making your job idempotent" (docs/idempotency.md): the business key. The carrier's API does not
// dedupe, so each call goes through `ctx.once('order_delivery:<id>', ...)`: the first caller runs it
// and its result (the tracking number) is stored in the scheduler's store; every later caller, in any
// run, attempt or node, gets the stored tracking number back without calling the carrier again. The
// fingerprint (address and amount) refuses a reused key for a different delivery.
//
// The carrier here is a stand-in for a remote API: it answers after EXAMPLE_CARRIER_MS (default
// 50 ms) and records each shipment it accepted as one line of its own log (CARRIER_LOG, default
// ./data/examples/carrier.jsonl), outside your database, as a real carrier keeps its own records.
// Replace ship() with your client, and pass it the signal as you would to fetch().
import { createHash, randomUUID } from 'node:crypto';
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { defineJob, type JobContext } from 'cluster-cron';
import { businessDb } from './_business-db.ts';

interface Order { id: string; address: string; cents: number; status: string }

async function ship(order: Order, ctx: JobContext, signal: AbortSignal): Promise<{ tracking: string }> {
  ctx.log.info({ order: order.id }, 'calling the carrier');
  await sleep(Number(process.env.EXAMPLE_CARRIER_MS ?? 50), undefined, { signal });
  // Right before the irreversible call: reading the signal proves the lease then and there, so a
  // node that paused past its lease (and whose key the next caller may take) does not ship.
  signal.throwIfAborted();
  const tracking = `TRK-${randomUUID().slice(0, 8)}`;
  const log = resolve(process.env.CARRIER_LOG || 'data/examples/carrier.jsonl');
  mkdirSync(dirname(log), { recursive: true });
  appendFileSync(log, `${JSON.stringify({ order: order.id, address: order.address, tracking, runId: ctx.runId, node: ctx.nodeId })}\n`);
  return { tracking };
}

export default defineJob({
  schedule: process.env.EXAMPLE_SCHEDULE ?? '0 */5 * * * *', // every five minutes
  timeout: '4m',
  // Runs of successive periods (and manual runs) may work at once: they meet on the same keys, and
  // ctx.once lets one of them call the carrier for each order.
  overlap: 'allow',
  lockTtl: process.env.EXAMPLE_LOCK_TTL ?? '15s',
  catchUp: '5m',
  retries: 3,
  retryDelay: '10s',
  async run(ctx) {
    const db = await businessDb();
    const orders = (await db('orders').where({ status: 'paid' }).orderBy('id').limit(100)) as Order[];
    let shipped = 0;
    let replayed = 0;
    for (const order of orders) {
      ctx.signal.throwIfAborted();
      const fingerprint = createHash('sha256').update(`${order.address}|${order.cents}`).digest('hex');
      // Under --dry-run ctx.once takes and stores no key, but it still runs fn for a key not stored yet:
      // fn must then do nothing (no shipment), as the rest of a dry-run body.
      const delivery = await ctx.once.detailed(`order_delivery:${order.id}`, ({ signal }) => (ctx.dryRun ? { tracking: '(dry run: not shipped)' } : ship(order, ctx, signal)), { fingerprint, ttl: '30d' });
      if (delivery.replayed) replayed += 1;
      else shipped += 1;
      if (ctx.dryRun) continue;
      // Marking the order is itself repeatable: a run that dies here leaves it paid, and the next run
      // gets the same tracking number from ctx.once instead of a second shipment.
      await db('orders').where({ id: order.id, status: 'paid' }).update({ status: 'delivered', tracking: delivery.value.tracking });
    }
    ctx.log.info({ orders: orders.length, shipped, replayed }, 'orders delivered');
    return { orders: orders.length, shipped, replayed };
  },
});
