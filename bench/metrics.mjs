#!/usr/bin/env node
/**
 * /metrics with many jobs: a daemon (`bin/scheduler run`, the built dist/) with N job files, on
 * SQLite and on PostgreSQL, scraped S times one after another: the scrape's time (request to last
 * byte, in ms: p50, p90, p99, max) and the store statements each scrape started (counted in the daemon
 * by bench/metrics-preload.mjs; the goal is 0: scrapes read the summary cache). Goal from issue 8:
 * under 50 ms with 1,000 jobs.
 *
 *   npm run build && node bench/metrics.mjs [--jobs 1000] [--scrapes 200] [--stores sqlite,postgres]
 *
 * PostgreSQL: a fresh database on $BENCH_POSTGRES_ADMIN (default postgres://postgres@127.0.0.1:5432/postgres), dropped after.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT, SchedulerNode, createPostgresDb, fmt, benchOptions, randomTag, sleep, summarise, table, waitFor } from './lib.mjs';

const USAGE = 'node bench/metrics.mjs [--jobs 1000] [--scrapes 200] [--stores sqlite,postgres]';
const flags = benchOptions(process.argv.slice(2), { strings: ['jobs', 'scrapes', 'stores'], usage: USAGE });
const jobCount = Number(flags.jobs ?? 1000);
const scrapes = Number(flags.scrapes ?? 200);
const stores = String(flags.stores ?? 'sqlite,postgres').split(',');
const PG_ADMIN = process.env.BENCH_POSTGRES_ADMIN ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const ws = mkdtempSync(join(tmpdir(), 'bench-metrics-'));
const jobsDir = join(ws, 'jobs');
mkdirSync(jobsDir);
// Hourly jobs spread over the minutes (about 17 fire each minute), as a large installation has.
for (let i = 0; i < jobCount; i++) {
  writeFileSync(join(jobsDir, `job-${String(i).padStart(4, '0')}.mjs`), `export default { schedule: '${i % 60} * * * *', async run() { return ${i}; } };\n`);
}

async function measure(kind, storeUrl) {
  const out = join(ws, `${kind}-counts.json`);
  const node = new SchedulerNode({
    nodeId: `bench-metrics-${kind}`, cwd: ws, logFile: join(ws, `${kind}.log`),
    nodeArgs: ['--import', join(PROJECT_ROOT, 'bench', 'metrics-preload.mjs')],
    env: { SCHEDULER_STORE: storeUrl, SCHEDULER_JOBS_DIR: jobsDir, SCHEDULER_HTTP: '127.0.0.1:0', SCHEDULER_LOG_LEVEL: 'info', BENCH_METRICS_OUT: out },
  });
  try {
    await node.waitStarted(180_000);
    const url = node.logLines().find((l) => l.msg === 'http server listening').url;
    // The summary cache's first read (the page's and the metrics' cluster-wide figures).
    await waitFor('the summary cache', async () => (await (await fetch(`${url}/api/summary`)).json()).readAt !== null, 60_000);
    const scrape = async () => {
      const t = performance.now();
      const res = await fetch(`${url}/metrics`);
      const body = await res.text();
      if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
      return { ms: performance.now() - t, bytes: body.length, series: body.split('\n').filter((l) => l && !l.startsWith('#')).length };
    };
    for (let i = 0; i < 10; i++) await scrape();
    const times = [];
    let last;
    for (let i = 0; i < scrapes; i++) {
      last = await scrape();
      times.push(last.ms);
      await sleep(5);
    }
    await node.stop();
    const counts = JSON.parse(readFileSync(out, 'utf8'));
    return { kind, ...summarise(times), bytes: last.bytes, series: last.series, statementsPerScrape: counts.statements / counts.scrapes, scrapesCounted: counts.scrapes };
  } finally {
    await node.stop();
  }
}

const results = [];
try {
  if (stores.includes('sqlite')) results.push(await measure('sqlite', `sqlite:${join(ws, 'bench.db')}`));
  if (stores.includes('postgres')) {
    const db = await createPostgresDb('bench_metrics', { adminUrl: PG_ADMIN, name: `bench_metrics_${randomTag()}` });
    try {
      results.push(await measure('postgres', db.url));
    } finally {
      await db.drop();
    }
  }
} finally {
  rmSync(ws, { recursive: true, force: true });
}

console.log(`/metrics with ${jobCount} jobs, ${scrapes} scrapes one after another (ms, request to last byte); load average ${loadavg().map((l) => l.toFixed(1)).join(' ')} on ${cpus().length} cores`);
console.log(table([
  ['store', 'p50', 'p90', 'p99', 'max', 'series', 'bytes', 'statements/scrape'],
  ...results.map((r) => [r.kind, fmt(r.p50), fmt(r.p90), fmt(r.p99), fmt(r.max), String(r.series), String(r.bytes), fmt(r.statementsPerScrape, 2)]),
]));
console.log(JSON.stringify(results));
