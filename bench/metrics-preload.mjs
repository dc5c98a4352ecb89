/**
 * Preload of bench/metrics.mjs (node --import bench/metrics-preload.mjs bin/scheduler run): counts
 * the store statements started inside a scrape of /metrics (knex's `query` event, attributed by
 * AsyncLocalStorage to the scrape that caused it) and writes { scrapes, statements } as JSON to
 * $BENCH_METRICS_OUT when the process exits. It changes nothing in src/: it wraps methods of dist/.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { writeFileSync } from 'node:fs';

const dist = new URL('../dist/', import.meta.url);
const { Database } = await import(new URL('store/database.js', dist));
const { SchedulerMetrics } = await import(new URL('http/metrics.js', dist));
const als = new AsyncLocalStorage();
const counts = { scrapes: 0, statements: 0, statementsOutsideScrapes: 0 };

const open = Database.open;
Database.open = async function (...args) {
  const db = await open.apply(this, args);
  for (const k of new Set([db.knex, db.leaseKnex])) {
    k.on('query', () => {
      if (als.getStore()) counts.statements += 1;
      else counts.statementsOutsideScrapes += 1;
    });
  }
  return db;
};

const scrape = SchedulerMetrics.prototype.scrape;
SchedulerMetrics.prototype.scrape = function (...args) {
  counts.scrapes += 1;
  return als.run(true, () => scrape.apply(this, args));
};

process.on('exit', () => {
  if (process.env.BENCH_METRICS_OUT) writeFileSync(process.env.BENCH_METRICS_OUT, JSON.stringify(counts));
});
