// Nightly settlement: once per day at 02:00 Shanghai time, totals yesterday's payments and writes ONE
// settlement per business day, under the day as a unique key. The unique key makes the job's own effect
// idempotent: even a forced re-run by hand (`run-once daily-settlement --period ... --force`) or a retry
// after a crash cannot write the day twice; the later run reports `written: false`.
//
// It imports only node: modules and `cluster-cron`, so it runs wherever the jobs folder is copied.
// Files (a stand-in for your ledger database): it reads `<data>/payments.jsonl`, one JSON payment a line
// `{"id":"p1","day":"2026-11-30","cents":1250}` (none when the file is missing), and writes
// `<data>/settlements/<day>.json`. `<data>` is $EXAMPLES_DATA_DIR, else `data/examples` under the working
// directory (beside the embedded default store `./data/scheduler.db`).
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defineJob } from 'cluster-cron';

const dataDir = (): string => resolve(process.env.EXAMPLES_DATA_DIR || join('data', 'examples'));

function paymentsOf(day: string): { total: number; count: number } {
  let text = '';
  try {
    text = readFileSync(join(dataDir(), 'payments.jsonl'), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  let total = 0;
  let count = 0;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const p = JSON.parse(line) as { day: string; cents: number };
    if (p.day === day) {
      total += p.cents;
      count += 1;
    }
  }
  return { total, count };
}

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
    const { total, count } = paymentsOf(day);
    if (ctx.signal.aborted) throw new Error(`aborted: ${String(ctx.signal.reason)}`);
    if (ctx.dryRun) return { day, total, count, written: false };

    // Write the whole record to a file of this attempt, then link it under the day's name: link() fails
    // with EEXIST when the day is already settled (the unique key), and a reader never sees half a file.
    const dir = join(dataDir(), 'settlements');
    mkdirSync(dir, { recursive: true });
    const temp = join(dir, `.${day}.${ctx.runId}.tmp`);
    writeFileSync(temp, `${JSON.stringify({ day, totalCents: total, payments: count, periodKey: ctx.periodKey })}\n`);
    let written = true;
    try {
      linkSync(temp, join(dir, `${day}.json`));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      written = false;
    } finally {
      unlinkSync(temp);
    }
    ctx.log.info({ day, total, count, written }, 'settlement');
    return { day, total, count, written };
  },
});
