// Nightly settlement: once per day at 02:00 Shanghai time, totals yesterday's payments and writes ONE
// row per business day under a unique key. The unique key makes the job's own effect idempotent: even
// a forced re-run by hand (`run-once daily-settlement --period ... --force`) cannot write the day twice.
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { defineJob } from 'cluster-cron';

export default defineJob({
  schedule: '0 0 2 * * *',
  timezone: 'Asia/Shanghai',
  timeout: '10m',
  lockTtl: '30s',
  catchUp: '6h', // a node restart in the night must not lose the day's settlement
  retries: 2,
  retryDelay: '1m',
  async run(ctx) {
    // The business day being settled: the local date before the period instant.
    const day = new Date(ctx.scheduledAt.getTime() - 86_400_000).toLocaleDateString('en-CA', { timeZone: 'Asia/Shanghai' });
    mkdirSync('data', { recursive: true });
    const db = new Database('data/example-ledger.db');
    try {
      db.exec(`CREATE TABLE IF NOT EXISTS payments (id TEXT PRIMARY KEY, day TEXT NOT NULL, cents INTEGER NOT NULL);
               CREATE TABLE IF NOT EXISTS settlements (day TEXT PRIMARY KEY, total_cents INTEGER NOT NULL, payments INTEGER NOT NULL, period_key TEXT NOT NULL)`);
      const { total, count } = db.prepare('SELECT COALESCE(SUM(cents), 0) AS total, COUNT(*) AS count FROM payments WHERE day = ?').get(day) as { total: number; count: number };
      if (ctx.signal.aborted) throw new Error(`aborted: ${String(ctx.signal.reason)}`);
      if (ctx.dryRun) return { day, total, count, written: false };
      const info = db.prepare('INSERT INTO settlements (day, total_cents, payments, period_key) VALUES (?, ?, ?, ?) ON CONFLICT(day) DO NOTHING')
        .run(day, total, count, ctx.periodKey);
      ctx.log.info({ day, total, count, written: info.changes === 1 }, 'settlement');
      return { day, total, count, written: info.changes === 1 };
    } finally {
      db.close();
    }
  },
});
