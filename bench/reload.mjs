#!/usr/bin/env node
/**
 * What a reload costs a running daemon: one `bin/scheduler run` (SQLite) with N daily job files (half
 * `.ts`, half `.mjs`) and one every-second job, sent SIGHUP R times (one file of each kind edited
 * before the last). Measures each reload (the 'reload requested' line to 'reload done') and how late
 * the every-second job's bodies started (its 'run started' against its period), before and during
 * the reloads.
 *
 *   node bench/reload.mjs [--files 200] [--reloads 5] [--no-build | --package DIR]
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT, SchedulerNode, buildSnapshot, fmt, benchOptions, sleep, sourceState, summarise, waitFor } from './lib.mjs';

const USAGE = 'node bench/reload.mjs [--files 200] [--reloads 5] [--no-build | --package DIR]';
const flags = benchOptions(process.argv.slice(2), { strings: ['files', 'reloads', 'package'], booleans: ['no-build'], usage: USAGE });
const files = Number(flags.files ?? 200);
const reloads = Number(flags.reloads ?? 5);

const cleanups = [];
let root = PROJECT_ROOT;
if (flags.package) root = flags.package;
else if (!flags['no-build']) {
  root = buildSnapshot();
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
}

const ws = mkdtempSync(join(tmpdir(), 'bench-reload-'));
cleanups.push(() => rmSync(ws, { recursive: true, force: true }));
const jobsDir = join(ws, 'jobs');
mkdirSync(jobsDir);
const source = (i, ts, tag) => (ts
  ? `import { defineJob } from 'cluster-cron';\ninterface Out { n: number; tag: string }\nexport default defineJob({ schedule: '0 0 2 * * *', async run(): Promise<Out> { return { n: ${i}, tag: '${tag}' }; } });\n`
  : `export default { schedule: '0 0 2 * * *', async run() { return { n: ${i}, tag: '${tag}' }; } };\n`);
const fileOf = (i, ts) => join(jobsDir, `job-${String(i).padStart(5, '0')}.${ts ? 'ts' : 'mjs'}`);
for (let i = 0; i < files; i++) writeFileSync(fileOf(i, i % 2 === 0), source(i, i % 2 === 0, 'v1'));
writeFileSync(join(jobsDir, 'tick.mjs'), "export default { schedule: '* * * * * *', catchUp: '10s', run() {} };\n");

const logFile = join(ws, 'daemon.log');
const node = new SchedulerNode({
  nodeId: 'bench-reload', cwd: ws, logFile, bin: join(root, 'bin', 'scheduler'),
  env: { SCHEDULER_STORE: `sqlite:${join(ws, 'scheduler.db')}`, SCHEDULER_JOBS_DIR: jobsDir, SCHEDULER_LOG_LEVEL: 'debug' /* its 'run started' lines are at debug */ },
});
try {
  process.stdout.write(`reload: ${files} daily files (${Math.ceil(files / 2)} .ts, ${Math.floor(files / 2)} .mjs) + one every-second job, ${reloads} reloads, package ${root}, ${JSON.stringify(sourceState())}\n`);
  await node.waitStarted(120_000);
  await sleep(5000);
  for (let r = 1; r <= reloads; r++) {
    if (r === reloads) {
      writeFileSync(fileOf(0, true), source(0, true, 'v2'));
      writeFileSync(fileOf(1, false), source(1, false, 'v2'));
    }
    process.kill(node.pid, 'SIGHUP');
    await waitFor(`reload ${r}`, () => node.logLines().filter((l) => /^reload done/.test(l.msg)).length >= r, 120_000);
    await sleep(3000);
  }
  await node.stop();
  const lines = node.logLines();
  const windows = [];
  let from;
  for (const l of lines) {
    if (/^reload requested/.test(l.msg)) from = Date.parse(l.time);
    if (/^reload done/.test(l.msg)) windows.push({ from, to: Date.parse(l.time), msg: l.msg });
  }
  const inWindow = (t) => windows.some((w) => t >= w.from - 100 && t <= w.to + 100);
  const starts = lines.filter((l) => l.msg === 'run started' && l.job === 'tick').map((l) => ({ at: Date.parse(l.scheduledAt), late: Date.parse(l.time) - Date.parse(l.scheduledAt) }));
  const during = summarise(starts.filter((s) => inWindow(s.at)).map((s) => s.late));
  const outside = summarise(starts.filter((s) => !inWindow(s.at)).map((s) => s.late));
  for (const [i, w] of windows.entries()) process.stdout.write(`reload ${i + 1}: ${w.to - w.from} ms: ${w.msg}\n`);
  const changed = lines.filter((l) => /^job changed/.test(l.msg)).map((l) => l.msg);
  process.stdout.write(`changed: ${changed.join('; ')}\n`);
  process.stdout.write(`every-second job, start lateness (ms): during reloads n=${during.count} p50 ${fmt(during.p50, 0)} max ${fmt(during.max, 0)}; otherwise n=${outside.count} p50 ${fmt(outside.p50, 0)} max ${fmt(outside.max, 0)}\n`);
  process.stdout.write(`${JSON.stringify({ files, reloads, reloadMs: summarise(windows.map((w) => w.to - w.from)), latenessDuring: during, latenessOutside: outside })}\n`);
} finally {
  await node.stop().catch(() => {});
  for (const c of cleanups.reverse()) c();
}
