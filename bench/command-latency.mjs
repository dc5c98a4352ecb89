#!/usr/bin/env node
/**
 * Command job start latency, with one real daemon on SQLite (the embedded default).
 *
 *   npm run build && node bench/command-latency.mjs [--seconds 60] [--keep]
 *   (also as env: BENCH_SECONDS)
 *
 * Two command jobs take turns, one period a second between them: `shell` (a string, run by
 * `/bin/sh -c 'date +%s%N'`) at even seconds, `argv` (`["date", "+%s%N"]`, spawned directly) at odd
 * seconds. For each period:
 *   - started: the child's own clock when it runs (`date +%s%N`, its first and only line) minus the
 *     period instant: the scheduler's fire delay, the claim, the spawn, exec and the shell if any;
 *   - logged: when the daemon logged that first line (pino's `time`, ms) minus the period instant:
 *     the above plus the pipe back to the daemon.
 * Every period of the window must have run exactly once, succeeded. dist/ is run as it is.
 * The report goes to stdout; its last line is one JSON document with the figures.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Sqlite from 'better-sqlite3';
import { SchedulerNode, fmt, benchOptions, sleep, sourceState, summarise, table } from './lib.mjs';

const flags = benchOptions(process.argv.slice(2), { strings: ['seconds'], booleans: ['keep'], usage: 'usage: node bench/command-latency.mjs [--seconds 60] [--keep]\n' });
const seconds = Number(flags.seconds ?? process.env.BENCH_SECONDS ?? 60);
if (!Number.isFinite(seconds) || seconds < 4) throw new Error(`--seconds: expected a number of at least 4, got ${flags.seconds}`);

const dir = mkdtempSync(join(tmpdir(), 'bench-command-'));
const jobsDir = join(dir, 'jobs');
mkdirSync(jobsDir);
writeFileSync(join(jobsDir, 'shell.yaml'), "schedule: '*/2 * * * * *'\ncatchUp: 5s\ncommand: 'date +%s%N'\n");
writeFileSync(join(jobsDir, 'argv.yaml'), "schedule: '1-59/2 * * * * *'\ncatchUp: 5s\ncommand: [date, '+%s%N']\n");
const db = join(dir, 'scheduler.db');

const node = new SchedulerNode({
  nodeId: 'bench-command', cwd: dir, logFile: join(dir, 'node.log'),
  env: { SCHEDULER_STORE: `sqlite:${db}`, SCHEDULER_JOBS_DIR: jobsDir, SCHEDULER_HTTP: 'off', SCHEDULER_LOG_LEVEL: 'info' },
});
let exitCode = 0;
try {
  await node.waitStarted();
  // Measured: the periods after a 2 s warm-up, for `seconds` seconds.
  const from = Math.ceil(Date.now() / 1000) * 1000 + 2000;
  const to = from + seconds * 1000;
  while (Date.now() < to + 3000) await sleep(250);
  await node.stop();

  const rows = new Sqlite(db, { readonly: true }).prepare('select id, job, scheduled_at, status, attempt, output from scheduler_runs where scheduled_at >= ? and scheduled_at < ? order by scheduled_at').all(from, to);
  const loggedAt = new Map();
  for (const l of node.logLines()) {
    if (l.stream === 'stdout' && l.runId !== undefined && !loggedAt.has(String(l.runId))) loggedAt.set(String(l.runId), Date.parse(l.time));
  }
  const problems = [];
  const per = { shell: { started: [], logged: [] }, argv: { started: [], logged: [] } };
  const seen = new Set();
  for (const r of rows) {
    const at = Number(r.scheduled_at);
    if (seen.has(at)) problems.push(`period ${new Date(at).toISOString()} has more than one row`);
    seen.add(at);
    if (r.status !== 'succeeded') {
      problems.push(`${r.job}@${new Date(at).toISOString()}: ${r.status}`);
      continue;
    }
    const ns = BigInt(String(r.output).trim());
    per[r.job].started.push(Number(ns - BigInt(at) * 1_000_000n) / 1e6);
    if (loggedAt.has(String(r.id))) per[r.job].logged.push(loggedAt.get(String(r.id)) - at);
  }
  for (let t = from; t < to; t += 1000) if (!seen.has(t)) problems.push(`period ${new Date(t).toISOString()} has no row`);

  const figures = Object.fromEntries(Object.entries(per).map(([job, v]) => [job, { started: summarise(v.started), logged: summarise(v.logged) }]));
  const line = (label, s) => [label, s.count, fmt(s.p50), fmt(s.p90), fmt(s.p99), fmt(s.max)];
  process.stdout.write(`command job start latency, one daemon on SQLite, ${seconds} s (${cpus().length} cores, load ${loadavg().map((x) => x.toFixed(2)).join(' ')})\n`);
  process.stdout.write(`${table([
    ['ms after the period instant', 'n', 'p50', 'p90', 'p99', 'max'],
    line("shell ('date +%s%N'): child running", figures.shell.started),
    line('shell: its first line logged', figures.shell.logged),
    line('argv ([date, +%s%N]): child running', figures.argv.started),
    line('argv: its first line logged', figures.argv.logged),
  ])}\n`);
  if (problems.length) {
    exitCode = 1;
    process.stdout.write(`problems:\n  ${problems.slice(0, 20).join('\n  ')}\n`);
  }
  process.stdout.write(`${JSON.stringify({ bench: 'command-latency', store: 'sqlite', seconds, source: sourceState(), figures, problems })}\n`);
} catch (err) {
  exitCode = 2;
  process.stderr.write(`${err.stack ?? err}\n`);
  await node.stop(5000).catch(() => {});
} finally {
  if (!flags.keep) rmSync(dir, { recursive: true, force: true });
  else process.stderr.write(`kept ${dir}\n`);
}
process.exitCode = exitCode;
