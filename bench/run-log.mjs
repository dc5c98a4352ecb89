#!/usr/bin/env node
/**
 * Each attempt's stored log under load (issue 22): one daemon on a private MariaDB database, an
 * every-second `tick` job whose result is its own fire delay, and one noisy body per phase.
 *
 *   npm run build && node bench/run-log.mjs [--seconds 60] [--rate 1000] [--keep]
 *
 * Phases (a fresh daemon each, the same database):
 *   stored   `noisy` writes --rate ctx.log lines a second for --seconds, logMaxSize 64MB (every line stored);
 *   off      the same body with logMaxSize 0 (nothing stored): the baseline;
 *   huge     a body writing 100 MB of lines as fast as it can with the default cap (1 MB), and the
 *            same body with logMaxSize 0: what the cap stores, what the storing costs the body;
 *   outage   2,000 lines of 1 KB a second for 20 s (logMaxSize 64MB), the store cut for 12 s from
 *            the body's 5th second (a proxy): the body's pace, its outcome, and the lines not stored.
 * For each: the tick job's fire delay (p50/p99/max) while the body runs, the body's duration and
 * pace, the lines and bytes stored, the daemon's peak RSS (VmHWM), and `scheduler_run_log_dropped_total`.
 * The report goes to stdout; its last line is one JSON document with the figures.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { SchedulerNode, StoreProxy, benchOptions, createMariaDb, fmt, runCli, sleep, sourceState, summarise, table } from './lib.mjs';

const flags = benchOptions(process.argv.slice(2), { strings: ['seconds', 'rate'], booleans: ['keep'], usage: 'usage: node bench/run-log.mjs [--seconds 60] [--rate 1000] [--keep]\n' });
const seconds = Number(flags.seconds ?? 60);
const rate = Number(flags.rate ?? 1000);
if (!(seconds >= 5) || !(rate >= 1)) throw new Error('--seconds: at least 5; --rate: at least 1');

const dir = mkdtempSync(join(tmpdir(), 'bench-runlog-'));
const db = await createMariaDb('bench_runlog');
const proxy = new StoreProxy(Number(new URL(db.url).port || 3306));
await proxy.start();
const storeUrl = proxy.urlFor(db.url);
const env = { SCHEDULER_STORE: storeUrl, SCHEDULER_HTTP: '127.0.0.1:0', SCHEDULER_LOG_LEVEL: 'info' };

const TICK = `export default { schedule: '* * * * * *', catchUp: '5s', run(ctx) { return { delay: Date.now() - ctx.scheduledAt.getTime() }; } };\n`;

/** A body that writes `perSecond` lines of `width` characters for `ms`, paced to the wall clock. */
const noisy = (name, { at, perSecond, ms, width, cap }) => `export default {
  name: '${name}', schedule: '${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *', catchUp: '1m'${cap === undefined ? '' : `, logMaxSize: ${JSON.stringify(cap)}`},
  async run(ctx) {
    const began = Date.now();
    const pad = 'x'.repeat(${width});
    let n = 0;
    while (Date.now() - began < ${ms}) {
      const due = Math.floor(((Date.now() - began) / 1000) * ${perSecond}) + 1;
      while (n < due) { n += 1; ctx.log.info({ n }, 'line %d %s', n, pad); }
      await new Promise((r) => setTimeout(r, 10));
    }
    return { lines: n, ms: Date.now() - began };
  },
};
`;

/** A body that writes `total` lines of `width` characters as fast as it can. */
const burst = (name, { at, total, width, cap }) => `export default {
  name: '${name}', schedule: '${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *', catchUp: '1m'${cap === undefined ? '' : `, logMaxSize: ${JSON.stringify(cap)}`},
  async run(ctx) {
    const began = performance.now();
    const pad = 'y'.repeat(${width});
    for (let n = 1; n <= ${total}; n++) {
      ctx.log.info('line %d %s', n, pad);
      if (n % 10000 === 0) await new Promise((r) => setImmediate(r));
    }
    return { lines: ${total}, ms: Math.round(performance.now() - began) };
  },
};
`;

const vm = (pid, key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;

async function json(args) {
  const r = await runCli([...args, '--json'], { cwd: dir, env: { SCHEDULER_STORE: db.url }, timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`scheduler ${args.join(' ')}: exit ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function scrapeDropped(node) {
  const url = node.logs().find((l) => l.msg === 'http server listening')?.url;
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^scheduler_run_log_dropped_total (\S+)$/m.exec(text)?.[1] ?? NaN);
}

/** One phase: a fresh daemon with `tick` and the phase's job files, until the named job's period has ended. */
async function phase(label, jobs, { job, during }) {
  const jobsDir = mkdtempSync(join(dir, `${label}-`));
  writeFileSync(join(jobsDir, 'tick.mjs'), TICK);
  for (const [file, source] of Object.entries(jobs)) writeFileSync(join(jobsDir, file), source);
  const node = new SchedulerNode({ nodeId: `bench-${label}`, cwd: dir, logFile: join(dir, `${label}.log`), env: { ...env, SCHEDULER_JOBS_DIR: jobsDir } });
  await node.waitStarted();
  let started;
  for (;;) {
    const runs = await json(['history', job, '--limit', '5']);
    const r = runs.find((x) => x.status !== 'pending');
    if (r && !started && r.startedAt) {
      started = r;
      during?.();
    }
    if (r && r.finishedAt) break;
    await sleep(500);
  }
  const dropped = await scrapeDropped(node);
  const peakRss = vm(node.pid, 'VmHWM');
  await node.stop();
  const [run] = await json(['history', job, '--limit', '1']);
  const from = Date.parse(run.startedAt);
  const to = Date.parse(run.finishedAt);
  const ticks = (await json(['history', 'tick', '--limit', '1000'])).filter((t) => Date.parse(t.scheduledAt) >= from && Date.parse(t.scheduledAt) < to && t.status === 'succeeded');
  const log = await json(['logs', job, '--run', String(run.id)]);
  const lines = log.lines.filter((l) => l.stream !== 'note');
  const notes = log.lines.filter((l) => l.stream === 'note').map((l) => l.line);
  const bytes = lines.reduce((n, l) => n + l.line.length + (l.fields ? JSON.stringify(l.fields).length : 0), 0);
  return {
    label, status: run.status, bodyMs: run.result?.ms ?? run.durationMs, written: run.result?.lines ?? null,
    storedLines: lines.length, storedMiB: bytes / 1048576, notes, dropped, peakRssMiB: peakRss,
    tick: summarise(ticks.map((t) => t.result.delay)),
  };
}

const soon = (s) => new Date(Math.ceil(Date.now() / 1000) * 1000 + s * 1000);
const results = [];
let exitCode = 0;
try {
  results.push(await phase('stored', { 'noisy.mjs': noisy('noisy-stored', { at: soon(8), perSecond: rate, ms: seconds * 1000, width: 40, cap: '64MB' }) }, { job: 'noisy-stored' }));
  results.push(await phase('off', { 'noisy.mjs': noisy('noisy-off', { at: soon(8), perSecond: rate, ms: seconds * 1000, width: 40, cap: 0 }) }, { job: 'noisy-off' }));
  results.push(await phase('huge', { 'huge.mjs': burst('huge', { at: soon(8), total: 100_000, width: 1000 }) }, { job: 'huge' }));
  results.push(await phase('huge-off', { 'huge.mjs': burst('huge-off', { at: soon(8), total: 100_000, width: 1000, cap: 0 }) }, { job: 'huge-off' }));
  results.push(await phase('outage', { 'cut.mjs': noisy('cut', { at: soon(8), perSecond: 2000, ms: 20_000, width: 1000, cap: '64MB' }) }, {
    job: 'cut',
    during: () => {
      setTimeout(() => proxy.cut(), 4000);
      setTimeout(() => proxy.restore(), 16_000);
    },
  }));
  process.stdout.write(`run logs, one daemon on MariaDB (${cpus().length} cores, load ${loadavg().map((x) => x.toFixed(2)).join(' ')}; commit ${sourceState().head}${sourceState().srcChanges.length ? ', src/ changed' : ''})\n`);
  process.stdout.write(`${table([
    ['phase', 'status', 'body ms', 'lines written', 'stored', 'stored MiB', 'dropped', 'peak RSS MiB', 'tick p50/p99/max ms (n)'],
    ...results.map((r) => [r.label, r.status, String(r.bodyMs), String(r.written ?? '-'), String(r.storedLines), fmt(r.storedMiB), String(r.dropped), fmt(r.peakRssMiB), `${fmt(r.tick.p50)}/${fmt(r.tick.p99)}/${fmt(r.tick.max)} (${r.tick.count})`]),
  ])}\n`);
  for (const r of results) for (const n of r.notes) process.stdout.write(`${r.label} note: ${n}\n`);
  process.stdout.write(`${JSON.stringify({ seconds, rate, results })}\n`);
} catch (err) {
  process.stderr.write(`${err?.stack ?? err}\n`);
  exitCode = 1;
} finally {
  await proxy.close();
  await db.drop();
  if (!flags.keep) rmSync(dir, { recursive: true, force: true });
  else process.stderr.write(`kept ${dir}\n`);
}
process.exit(exitCode);
