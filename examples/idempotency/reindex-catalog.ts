// A sharded job: each period's work (re-indexing the catalog) is split into `shards` parts, claimed
// and recorded one by one, so that several nodes share one period in parallel. Each shard indexes
// the items whose id falls in it (id mod count = index); the index row's key (item, period) makes a
// shard's retry or takeover re-index an item instead of adding it twice.
import { defineJob } from 'cluster-cron';
import { businessDb } from './_business-db.ts';

export default defineJob({
  schedule: process.env.EXAMPLE_SCHEDULE ?? '0 */10 * * * *', // every ten minutes
  shards: 4,
  timeout: '5m',
  lockTtl: process.env.EXAMPLE_LOCK_TTL ?? '15s',
  retries: 2,
  retryDelay: '5s',
  async run(ctx) {
    const db = await businessDb();
    const { index, count } = ctx.shard;
    const items = (await db('catalog_items').whereRaw('?? % ? = ?', ['id', count, index]).orderBy('id')) as Array<{ id: number }>;
    ctx.signal.throwIfAborted();
    if (ctx.dryRun) return { shard: index, items: items.length };
    if (items.length > 0) {
      await db('catalog_index')
        .insert(items.map((i) => ({ item_id: i.id, period_key: ctx.periodKey, shard: index })))
        .onConflict(['item_id', 'period_key']).merge(['shard']);
    }
    return { shard: index, items: items.length };
  },
});
