#!/usr/bin/env node
/**
 * Status page paint benchmark, in headless Chromium (Debian's /usr/bin/chromium via playwright-core).
 *
 *   npm run build && node bench/status-page.mjs [--store sqlite|postgres] [--jobs 1000] [--rows 100000] [--loads 10] [--target 500]
 *   node bench/status-page.mjs --url http://127.0.0.1:8080 [--job NAME]      (a daemon already running)
 *   node bench/status-page.mjs --fixture [--jobs 1000] [--runs 100]          (the page alone, over memory)
 *   (BENCH_PG_ADMIN=postgres://postgres@127.0.0.1:5432/postgres)
 *
 * By default, a real daemon: a temp workspace with --jobs job files (every minute, every 5 minutes,
 * hourly and daily at minutes spread over the hour, in five zones), a store made by `bin/scheduler
 * migrate` (SQLite in the workspace, or with --store postgres a database `cron_bench_page_<tag>` of its
 * own, dropped afterwards) filled through knex batch inserts with --rows rows of `scheduler_runs`
 * (each job's past periods newest back, busier jobs more rows; ~90 % succeeded, 5 % failed with an
 * error and its stack, 5 % skipped as missed), then `bin/scheduler run` with SCHEDULER_HTTP=127.0.0.1:0
 * (its URL read from the 'http server listening' line), measured once /readyz is 200 and the summary
 * cache has read the rows (/api/summary readAt set). Retention is off so that the prune leaves the rows.
 * With --url: loads that daemon's `/` and one job page (--job, else the first job of the table).
 * With --fixture: dist/'s page handler over a fixture reader held in memory (the page's own cost).
 * Each load is a fresh browser context (no cache); the figures are the median and max over --loads
 * loads of first-contentful-paint (performance.getEntriesByType('paint')) and of the `load` event
 * (navigation timing loadEventEnd), from the navigation's start, the browser's time to first byte, and
 * the server's own time to first byte and to the last byte (plain HTTP GETs from Node, no browser).
 * Goal: first paint of `/` under --target ms (500) with 1,000 jobs. Exit 0 when met, 1 when not, 2 on error.
 * The last line of the report is one JSON document with the figures.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import knexFactory from 'knex';
import { chromium } from 'playwright-core';
import { PROJECT_ROOT, SCHEDULER_BIN, createPostgresDb, exited, fmt, benchOptions, randomTag, sleep, sourceState, summarise, table, waitFor } from './lib.mjs';

const USAGE = `usage: npm run build && node bench/status-page.mjs [--store sqlite|postgres] [--jobs 1000] [--rows 100000] [--loads 10] [--target 500]
       node bench/status-page.mjs --url http://host:port [--job NAME] [--loads 10] [--target 500]
       node bench/status-page.mjs --fixture [--jobs 1000] [--runs 100] [--loads 10] [--target 500]
`;
const PG_ADMIN = process.env.BENCH_PG_ADMIN ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

function options(argv) {
  const flags = benchOptions(argv, { strings: ['store', 'jobs', 'rows', 'loads', 'target', 'url', 'job', 'runs'], usage: USAGE, booleans: ['fixture'] });
  const count = (name, dflt) => {
    if (flags[name] === undefined) return dflt;
    const n = Number(flags[name]);
    if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name}: expected a whole number above 0, got ${flags[name]}`);
    return n;
  };
  let url = null;
  if (flags.url !== undefined) {
    try { url = new URL(flags.url); } catch { throw new Error(`--url: expected an http:// URL such as http://127.0.0.1:8080, got ${flags.url}`); }
  }
  const store = flags.store ?? 'sqlite';
  if (store !== 'sqlite' && store !== 'postgres') throw new Error(`--store: expected sqlite or postgres, got ${store}`);
  if (url && flags.fixture) throw new Error('--url and --fixture: pick one');
  return {
    url, fixture: Boolean(flags.fixture), store, job: flags.job ?? null, loads: count('loads', 10), jobs: count('jobs', 1000), runs: count('runs', 100),
    rows: count('rows', 100_000), target: count('target', 500),
  };
}

// ------------------------------------------------------------------------------ fixture reader

async function fixtureServer(jobCount, runCount) {
  const dist = join(PROJECT_ROOT, 'dist');
  if (!existsSync(join(dist, 'http', 'page', 'index.js'))) throw new Error('dist/http/page/index.js is missing: run `npm run build` first');
  const { createPageHandler } = await import(pathToFileURL(join(dist, 'http', 'page', 'index.js')).href);
  const { compileSchedule, describePeriods, nextPeriods } = await import(pathToFileURL(join(dist, 'time', 'schedule.js')).href);

  const now = new Date();
  const zones = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Shanghai', 'Australia/Sydney'];
  const schedules = ['*/5 * * * *', '0 * * * *', '30 2 * * *', '0 */15 * * * *', '0 6 * * 1'];
  const statuses = ['succeeded', 'succeeded', 'succeeded', 'failed', 'running', 'timed_out', 'skipped'];
  const jobs = Array.from({ length: jobCount }, (_, i) => ({
    name: `job-${String(i).padStart(4, '0')}`,
    schedule: compileSchedule(schedules[i % schedules.length], zones[i % zones.length]),
    status: i % 11 === 0 ? null : statuses[i % statuses.length],
    paused: i % 37 === 0 ? { reason: 'maintenance', since: new Date(now.getTime() - 3_600_000).toISOString() } : null,
  }));
  const view = (j) => {
    const last = j.status === null ? null : {
      scheduledAt: new Date(now.getTime() - 300_000).toISOString(), status: j.status, finishedAt: j.status === 'running' ? null : new Date(now.getTime() - 290_000).toISOString(),
      attempt: 1, error: j.status === 'failed' ? 'Error: connect ECONNREFUSED 10.0.0.7:5432' : null,
    };
    return {
      name: j.name, schedule: j.schedule.expression, timezone: j.schedule.timezone, next: nextPeriods(j.schedule, now, 3).map((d) => d.toISOString()),
      // The last attempt that ended (for a running job, the one before it), as the reader gives it.
      last, lastEnded: last === null ? null : last.status === 'running' ? { ...last, scheduledAt: new Date(now.getTime() - 600_000).toISOString(), status: 'succeeded', finishedAt: new Date(now.getTime() - 590_000).toISOString(), error: null } : last,
      lastSuccessAt: new Date(now.getTime() - 600_000).toISOString(), paused: j.paused, running: j.status === 'running' ? 1 : 0,
      failures24h: j.status === 'failed' ? 3 : 0, missed24h: 0, overlap: 'skip', timeout: 60_000, retries: 1, file: `/etc/cluster-cron/jobs/${j.name}.ts`,
    };
  };
  // Answered from memory, so that the figure is the page's own cost (render, transfer, parse, paint);
  // with --url it is the daemon's whole cost, its read model included.
  const views = jobs.map(view);
  const runs = (j) => Array.from({ length: runCount }, (_, k) => {
    const at = new Date(now.getTime() - (k + 1) * 300_000);
    const status = k % 9 === 4 ? 'failed' : 'succeeded';
    return {
      runId: String(k + 1), job: j.name, scheduledAt: at.toISOString(), periodKey: `${j.name}@${at.toISOString()}`, shard: 0, attempt: 1, trigger: 'schedule', status, reason: null,
      nodeId: `node-${k % 3}`, startedAt: new Date(at.getTime() + 15).toISOString(), finishedAt: new Date(at.getTime() + 1515).toISOString(), durationMs: 1500,
      error: status === 'failed' ? 'Error: upstream answered 503 Service Unavailable' : null,
    };
  });
  const reader = {
    async summary() {
      return {
        nodeId: 'node-0', version: 'bench', nodesAlive: 3, store: { kind: 'postgres', state: 'ok' }, redis: 'ok', jobs: jobs.length, invalidJobs: 0,
        paused: jobs.filter((j) => j.paused).length, running: jobs.filter((j) => j.status === 'running').length, failures24h: 3 * jobs.filter((j) => j.status === 'failed').length,
        missed24h: 0, clockOffsetMs: 1, readAt: now.toISOString(),
      };
    },
    async jobs() { return views; },
    async job(name) {
      const j = jobs.find((x) => x.name === name);
      if (!j) return null;
      return { job: view(j), runs: runs(j), periods: describePeriods(j.schedule, now, 10).map((p) => ({ utc: p.utc, local: p.local, dst: p.dst ?? null })) };
    },
    async runs() { return []; },
    async nodes() {
      return [0, 1, 2].map((n) => ({
        id: `node-${n}`, host: `host-${n}`, pid: 1000 + n, version: 'bench', startedAt: now.toISOString(), heartbeatAt: now.toISOString(), inFlight: 2, clockOffsetMs: n, state: 'running', alive: true,
      }));
    },
    invalid() { return []; },
  };
  const hook = createPageHandler(reader, { refreshSeconds: 600 });
  const server = createServer((req, res) => {
    hook(new URL(req.url ?? '/', 'http://127.0.0.1')).then((answer) => {
      if (!answer) res.writeHead(404).end();
      else res.writeHead(answer.status, { 'content-type': 'text/html; charset=utf-8' }).end(answer.html);
    }, (err) => { res.writeHead(500).end(); process.stderr.write(`bench: page failed: ${err.message}\n`); });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: new URL(`http://127.0.0.1:${server.address().port}`), firstJob: jobs[0].name, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

// ------------------------------------------------------------------------------ a real daemon

const ZONES = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Shanghai', 'Australia/Sydney'];

/** The i-th job's schedule and its weight in the rows (how often it runs, roughly). */
function jobPlan(i) {
  const zone = ZONES[i % ZONES.length];
  if (i % 50 === 0) return { schedule: '* * * * *', zone, weight: 20 };
  if (i % 10 === 0) return { schedule: `${i % 5}-59/5 * * * *`, zone, weight: 6 };
  if (i % 3 === 0) return { schedule: `${(i * 7) % 60} ${i % 24} * * *`, zone, weight: 1 };
  return { schedule: `${(i * 7) % 60} * * * *`, zone, weight: 2 };
}

/** `bin/scheduler <args>` to its end; its output on failure. */
async function scheduler(args, env) {
  const p = spawn(process.execPath, [SCHEDULER_BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { out += d; });
  await exited(p);
  if (p.exitCode !== 0) throw new Error(`scheduler ${args.join(' ')} exited with ${p.exitCode}: ${out.trim()}`);
}

/** The runs of one job: its periods newest back from `now`, statuses mixed as a working cluster's. */
function runRows(name, schedule, count, latestPeriodAtOrBefore, now) {
  const rows = [];
  let at = latestPeriodAtOrBefore(schedule, now);
  for (let k = 0; k < count && at; k++) {
    const t = at.getTime();
    const base = { job: name, scheduled_at: t, period_key: `${name}@${at.toISOString()}`, shard: 0, attempt: 1, node_id: `node-${k % 3}`, lease_ms: 0, result: null, error: null, error_stack: null, reason: null };
    if (k % 20 === 7) {
      rows.push({ ...base, trigger: 'schedule', status: 'failed', started_at: t + 12, claimed_at: t - 3, heartbeat_at: t + 2000, finished_at: t + 2412, duration_ms: 2400,
        error: 'Error: connect ECONNREFUSED 10.0.0.7:5432', error_stack: 'Error: connect ECONNREFUSED 10.0.0.7:5432\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)' });
    } else if (k % 20 === 13) {
      rows.push({ ...base, trigger: 'catch-up', status: 'skipped', reason: 'missed', started_at: t + 900_000, claimed_at: null, heartbeat_at: null, finished_at: t + 900_000, duration_ms: null });
    } else {
      const d = 300 + ((k * 37) % 2000);
      rows.push({ ...base, trigger: 'schedule', status: 'succeeded', started_at: t + 10, claimed_at: t - 2, heartbeat_at: t + d, finished_at: t + 10 + d, duration_ms: d, result: JSON.stringify({ rows: k * 3 }) });
    }
    at = latestPeriodAtOrBefore(schedule, new Date(t - 1));
  }
  return rows;
}

async function daemonServer(opts) {
  const dist = join(PROJECT_ROOT, 'dist');
  if (!existsSync(join(dist, 'time', 'schedule.js'))) throw new Error('dist/ is missing: run `npm run build` first');
  const { compileSchedule, latestPeriodAtOrBefore } = await import(pathToFileURL(join(dist, 'time', 'schedule.js')).href);
  const ws = mkdtempSync(join(tmpdir(), 'bench-page-'));
  const cleanups = [() => rmSync(ws, { recursive: true, force: true })];
  const cleanup = async () => { for (const c of cleanups.reverse()) await c(); };
  try {
    mkdirSync(join(ws, 'jobs'));
    const jobs = Array.from({ length: opts.jobs }, (_, i) => ({ name: `job-${String(i).padStart(4, '0')}`, ...jobPlan(i) }));
    for (const j of jobs) {
      writeFileSync(join(ws, 'jobs', `${j.name}.mjs`), `export default { schedule: '${j.schedule}', timezone: '${j.zone}', async run() { return { ok: true }; } };\n`);
    }
    let storeUrl = `sqlite:${join(ws, 'scheduler.db')}`;
    let knexConfig = { client: 'better-sqlite3', connection: { filename: join(ws, 'scheduler.db') }, useNullAsDefault: true };
    if (opts.store === 'postgres') {
      const db = await createPostgresDb('cron_bench_page', { adminUrl: PG_ADMIN, name: `cron_bench_page_${randomTag()}` });
      cleanups.push(() => db.drop());
      storeUrl = db.url;
      knexConfig = { client: 'pg', connection: storeUrl, pool: { min: 0, max: 1 } };
    }
    const env = { SCHEDULER_STORE: storeUrl, SCHEDULER_JOBS_DIR: join(ws, 'jobs'), SCHEDULER_LOG_FORMAT: 'json' };
    await scheduler(['migrate'], env);

    // The rows: each job's share of --rows by its weight, its newest period first.
    const fillStart = performance.now();
    const weights = jobs.reduce((a, j) => a + j.weight, 0);
    const now = new Date();
    const knex = knexFactory(knexConfig);
    let inserted = 0;
    try {
      await knex.transaction(async (trx) => {
        let left = opts.rows;
        for (const [i, j] of jobs.entries()) {
          const count = i === jobs.length - 1 ? left : Math.min(left, Math.round((opts.rows * j.weight) / weights));
          left -= count;
          const rows = runRows(j.name, compileSchedule(j.schedule, j.zone), count, latestPeriodAtOrBefore, now);
          // 19 columns a row: 500 rows stay under SQLite's 32,766 bound parameters.
          await trx.batchInsert('scheduler_runs', rows, 500);
          inserted += rows.length;
        }
      });
      if (opts.store === 'postgres') await knex.raw('ANALYZE scheduler_runs');
    } finally {
      await knex.destroy();
    }
    const fillMs = performance.now() - fillStart;

    // The daemon: its URL from its JSON log line; stdout drained line by line.
    const proc = spawn(process.execPath, [SCHEDULER_BIN, 'run'], {
      cwd: ws, stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env, SCHEDULER_HTTP: '127.0.0.1:0', SCHEDULER_NODE_ID: 'bench-page', SCHEDULER_RETENTION: 'off' },
    });
    cleanups.push(async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const done = exited(proc);
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 40_000);
      await done;
      clearTimeout(t);
    });
    let url = null;
    let errors = 0;
    const tail = [];
    for (const stream of [proc.stdout, proc.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        tail.push(line);
        if (tail.length > 5) tail.shift();
        let l;
        try { l = JSON.parse(line); } catch { return; }
        if (l.msg === 'http server listening') url = l.url;
        if (l.level >= 50) errors++;
      });
    }
    const startAt = performance.now();
    const gone = await waitFor('the daemon\'s http server', () => (proc.exitCode !== null ? 'exited' : url !== null), 120_000);
    if (gone === 'exited') throw new Error(`the daemon exited with ${proc.exitCode}: ${tail.join('\n')}`);
    await waitFor('/readyz to answer 200', async () => (await fetch(new URL('/readyz', url))).status === 200, 120_000, 200);
    await waitFor('the summary cache to read the rows', async () => (await (await fetch(new URL('/api/summary', url))).json()).readAt !== null, 120_000, 200);
    const readyMs = performance.now() - startAt;
    return {
      url: new URL(url), firstJob: jobs[0].name, busyJob: jobs[0].name,
      about: `daemon (bin/scheduler run) on ${opts.store === 'postgres' ? 'PostgreSQL' : 'SQLite'}: ${jobs.length} jobs, ${inserted} run rows (filled in ${fmt(fillMs / 1000)} s, daemon ready in ${fmt(readyMs / 1000)} s)`,
      errors: () => errors,
      close: cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** The server's own time to first byte (headers) and to the last byte, plain GETs from Node. */
async function serverTimes(url, n) {
  const ttfb = [];
  const total = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const res = await fetch(url);
    const t1 = performance.now();
    await res.text();
    ttfb.push(t1 - t0);
    total.push(performance.now() - t0);
  }
  return { ttfb: summarise(ttfb), total: summarise(total) };
}

// ---------------------------------------------------------------------------------- measuring

async function measure(browser, url) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (msg) => { if (msg.type() === 'error') errors.push(msg.text()); });
  const response = await page.goto(url, { waitUntil: 'load', timeout: 60_000 });
  // The paint entry may come after the load event on a small page: wait for it (buffered observer).
  const figures = await page.evaluate(`new Promise((resolve) => {
    new PerformanceObserver((list, observer) => {
      if (!list.getEntries().some((e) => e.name === 'first-contentful-paint')) return;
      observer.disconnect();
      resolve();
    }).observe({ type: 'paint', buffered: true });
    setTimeout(resolve, 10000);
  }).then(() => {
    const fcp = performance.getEntriesByType('paint').find((e) => e.name === 'first-contentful-paint');
    const nav = performance.getEntriesByType('navigation')[0];
    return { fcp: fcp ? fcp.startTime : NaN, load: nav ? nav.loadEventEnd : NaN, ttfb: nav ? nav.responseStart : NaN, bytes: nav ? nav.decodedBodySize : NaN, rows: document.querySelectorAll('tbody tr').length };
  })`);
  await context.close();
  if (!response || response.status() !== 200) throw new Error(`${url}: HTTP ${response ? response.status() : 'no response'}`);
  return { ...figures, errors };
}

async function firstJobOf(browser, base) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(new URL('/', base).toString(), { waitUntil: 'load', timeout: 60_000 });
  const href = await page.getAttribute('table.jobs tbody tr td.name a', 'href');
  await context.close();
  if (!href) throw new Error(`${base}: the jobs table has no job; pass --job NAME`);
  return decodeURIComponent(href.replace(/^\/jobs\//, ''));
}

async function main() {
  const opts = options(process.argv.slice(2));
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium`);
  const served = opts.url ? null : opts.fixture ? await fixtureServer(opts.jobs, opts.runs) : await daemonServer(opts);
  const base = opts.url ?? served.url;
  try {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
    try {
      const job = opts.job ?? served?.firstJob ?? (await firstJobOf(browser, base));
      const targets = [['/', new URL('/', base).toString()], [`/jobs/${job}`, new URL(`/jobs/${encodeURIComponent(job)}`, base).toString()]];
      await measure(browser, targets[0][1]); // warm-up: the browser's first page pays for its own start
      const results = {};
      for (const [label, url] of targets) {
        const loads = [];
        for (let i = 0; i < opts.loads; i++) loads.push(await measure(browser, url));
        const server = await serverTimes(url, opts.loads);
        results[label] = {
          fcp: summarise(loads.map((l) => l.fcp)), load: summarise(loads.map((l) => l.load)), ttfb: summarise(loads.map((l) => l.ttfb)),
          serverTtfb: server.ttfb, serverTotal: server.total, bytes: loads[0].bytes, rows: loads[0].rows, consoleErrors: loads.flatMap((l) => l.errors),
        };
      }
      const rows = [['page', 'rows', 'HTML KiB', 'server TTFB p50', 'server last byte p50', 'browser TTFB p50', 'FCP p50', 'FCP max', 'load p50', 'load max']];
      for (const [label, r] of Object.entries(results)) {
        rows.push([label, r.rows, fmt(r.bytes / 1024, 0), fmt(r.serverTtfb.p50), fmt(r.serverTotal.p50), fmt(r.ttfb.p50), fmt(r.fcp.p50), fmt(r.fcp.max), fmt(r.load.p50), fmt(r.load.max)]);
      }
      const source = opts.url ? `daemon at ${opts.url}` : opts.fixture ? `fixture reader: ${opts.jobs} jobs, ${opts.runs} attempts on the job page` : served.about;
      const machine = `${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`;
      process.stdout.write(`status page in Chromium (${source}), ${opts.loads} loads each, fresh context per load; ${machine}; all in ms\n${table(rows)}\n`);
      const daemonErrors = served?.errors ? served.errors() : 0;
      if (daemonErrors > 0) process.stdout.write(`the daemon logged ${daemonErrors} error line(s) meanwhile\n`);
      const met = results['/'].fcp.p50 < opts.target;
      process.stdout.write(`goal: first paint of / under ${opts.target} ms: ${met ? 'met' : 'NOT met'} (median ${fmt(results['/'].fcp.p50)} ms)\n`);
      process.stdout.write(`${JSON.stringify({ bench: 'status-page', source, machine, loads: opts.loads, targetMs: opts.target, met, daemonErrors, results, ...sourceState() })}\n`);
      process.exitCode = met ? 0 : 1;
    } finally {
      await browser.close();
    }
  } finally {
    await served?.close();
  }
}

main().catch((err) => {
  process.stderr.write(`bench/status-page: ${err.message}\n`);
  process.exit(2);
});
