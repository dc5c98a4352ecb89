#!/usr/bin/env node
/**
 * Status page paint benchmark, in headless Chromium (Debian's /usr/bin/chromium via playwright-core).
 *
 *   npm run build && node bench/status-page.mjs [--url http://127.0.0.1:8080] [--job NAME] [--loads 7]
 *                                               [--jobs 1000] [--runs 100] [--target 500]
 *
 * With --url: loads that daemon's `/` and one job page (--job, else the first job of the table).
 * Without: serves dist/'s page handler itself over a fixture reader with --jobs jobs (1,000) whose
 * job pages have --runs attempts (100), answered from memory: the figure is then the page's own cost
 * (render, transfer, parse, paint), the daemon's read model left out.
 * Each load is a fresh browser context (no cache); the figures are the medians over --loads loads of
 * first-contentful-paint (performance.getEntriesByType('paint')) and of the `load` event (navigation
 * timing loadEventEnd), both from the navigation's start, plus the HTML size.
 * Goal: first paint of `/` under --target ms (500) with 1,000 jobs. Exit 0 when met, 1 when not, 2 on error.
 * The last line of the report is one JSON document with the figures.
 */
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { PROJECT_ROOT, fmt, parseFlags, sourceState, summarise, table } from './lib.mjs';

const USAGE = 'usage: npm run build && node bench/status-page.mjs [--url http://host:port] [--job NAME] [--loads 7] [--jobs 1000] [--runs 100] [--target 500]\n';
const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

function options(argv) {
  const flags = parseFlags(argv, { usage: USAGE });
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
  return { url, job: flags.job ?? null, loads: count('loads', 7), jobs: count('jobs', 1000), runs: count('runs', 100), target: count('target', 500) };
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
      last, lastSuccessAt: new Date(now.getTime() - 600_000).toISOString(), paused: j.paused, running: j.status === 'running' ? 1 : 0,
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
      job: j.name, scheduledAt: at.toISOString(), periodKey: `${j.name}@${at.toISOString()}`, attempt: 1, trigger: 'schedule', status, reason: null,
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
  const fixture = opts.url ? null : await fixtureServer(opts.jobs, opts.runs);
  const base = opts.url ?? fixture.url;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
  try {
    const job = opts.job ?? fixture?.firstJob ?? (await firstJobOf(browser, base));
    const targets = [['/', new URL('/', base).toString()], [`/jobs/${job}`, new URL(`/jobs/${encodeURIComponent(job)}`, base).toString()]];
    await measure(browser, targets[0][1]); // warm-up: the browser's first page pays for its own start
    const results = {};
    for (const [label, url] of targets) {
      const loads = [];
      for (let i = 0; i < opts.loads; i++) loads.push(await measure(browser, url));
      results[label] = {
        fcp: summarise(loads.map((l) => l.fcp)), load: summarise(loads.map((l) => l.load)), ttfb: summarise(loads.map((l) => l.ttfb)),
        bytes: loads[0].bytes, rows: loads[0].rows, consoleErrors: loads.flatMap((l) => l.errors),
      };
    }
    const rows = [['page', 'rows', 'HTML KiB', 'TTFB p50 ms', 'FCP p50 ms', 'FCP max ms', 'load p50 ms', 'load max ms']];
    for (const [label, r] of Object.entries(results)) {
      rows.push([label, r.rows, fmt(r.bytes / 1024, 0), fmt(r.ttfb.p50), fmt(r.fcp.p50), fmt(r.fcp.max), fmt(r.load.p50), fmt(r.load.max)]);
    }
    const source = opts.url ? `daemon at ${opts.url}` : `fixture reader: ${opts.jobs} jobs, ${opts.runs} attempts on the job page`;
    const machine = `${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`;
    process.stdout.write(`status page in Chromium (${source}), ${opts.loads} loads each, fresh context per load; ${machine}\n${table(rows)}\n`);
    const met = results['/'].fcp.p50 < opts.target;
    process.stdout.write(`goal: first paint of / under ${opts.target} ms: ${met ? 'met' : 'NOT met'} (median ${fmt(results['/'].fcp.p50)} ms)\n`);
    process.stdout.write(`${JSON.stringify({ bench: 'status-page', source, machine, loads: opts.loads, targetMs: opts.target, met, results, ...sourceState() })}\n`);
    process.exitCode = met ? 0 : 1;
  } finally {
    await browser.close();
    await fixture?.close();
  }
}

main().catch((err) => {
  process.stderr.write(`bench/status-page: ${err.message}\n`);
  process.exit(2);
});
