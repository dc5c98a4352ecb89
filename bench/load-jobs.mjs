#!/usr/bin/env node
/**
 * Start-up and idle cost over a jobs folder of N files: `bin/scheduler validate` (loads every file,
 * prints one line), the daemon's start (spawn to 'scheduler started'), its memory once started
 * (VmRSS and VmHWM from /proc), the CPU it spends idle (utime + stime from /proc/<pid>/stat over
 * --idle seconds), and the time of `bin/scheduler --help` beside `node -e 0` in the same run.
 * Optionally H job files whose top-level await never settles (they cost one loadTimeout each when
 * loaded one after another, one loadTimeout per batch when loaded concurrently).
 *
 *   node bench/load-jobs.mjs [--files 1000] [--ts 0.5] [--schedule '0 0 2 1 1 *' | --spread] [--hung 0]
 *                            [--load-timeout 2s] [--rounds 5] [--idle 30] [--settle 60]
 *                            [--help-runs 20] [--no-daemon] [--no-build | --package DIR]
 *
 * Every file has the same yearly schedule, or with --spread one of its own (a yearly instant at a
 * minute, hour, day and month derived from its index: no two files share one).
 * The daemon runs on SQLite (a file in the temporary workspace), HTTP on a free port, no Redis.
 * Memory and idle CPU are read from the last round's daemon, --settle seconds after it started
 * (--idle 0: not measured); the CPU it spent during the settle is reported too (V8 compacts the heap
 * left by the start-up in the first minute, once: that is not the idle cost). By default src/ is compiled into a private copy of the package
 * (bench/lib.mjs buildSnapshot()); --package DIR uses a copy made earlier (for before/after
 * comparisons), --no-build the shared dist/. Prints one line per measurement and a JSON summary
 * (medians in ms).
 */
import { spawn } from 'node:child_process';
import { readFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT, benchOptions, buildSnapshot, cpuTimeMs, sleep, sourceState } from './lib.mjs';

const USAGE = "node bench/load-jobs.mjs [--files 1000] [--ts 0.5] [--schedule '0 0 2 1 1 *' | --spread] [--hung 0] [--load-timeout 2s] [--rounds 5] [--idle 30] [--settle 60] [--help-runs 20] [--no-daemon] [--no-build | --package DIR]";
const flags = benchOptions(process.argv.slice(2), {
  strings: ['files', 'ts', 'schedule', 'hung', 'load-timeout', 'rounds', 'idle', 'settle', 'help-runs', 'package'],
  booleans: ['spread', 'no-daemon', 'no-build'],
  usage: USAGE,
});
const DEFAULTS = { files: '1000', ts: '0.5', schedule: '0 0 2 1 1 *', hung: '0', rounds: '5', idle: '30', settle: '60', 'help-runs': '20' };
for (const [k, v] of Object.entries(DEFAULTS)) flags[k] ??= v;
const files = Number(flags.files);
const tsShare = Number(flags.ts);
const hung = Number(flags.hung);
const rounds = Number(flags.rounds);
const idleSeconds = Number(flags.idle);
const settleSeconds = Number(flags.settle);
const helpRuns = Number(flags['help-runs']);
const loadTimeout = flags['load-timeout'];

let root = PROJECT_ROOT;
const cleanups = [];
if (flags.package) root = flags.package;
else if (!flags['no-build']) {
  root = buildSnapshot();
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
}
const bin = join(root, 'bin', 'scheduler');

const ws = mkdtempSync(join(tmpdir(), 'bench-load-'));
cleanups.push(() => rmSync(ws, { recursive: true, force: true }));
const jobsDir = join(ws, 'jobs');
mkdirSync(jobsDir);
const tsCount = Math.round(files * tsShare);
const scheduleOf = (i) => JSON.stringify(flags.spread
  ? `0 ${i % 60} ${Math.floor(i / 60) % 24} ${1 + (Math.floor(i / 1440) % 28)} ${1 + (Math.floor(i / 40_320) % 12)} *`
  : flags.schedule);
const schedule = flags.spread ? 'one yearly schedule per file' : scheduleOf(0);
for (let i = 0; i < files; i++) {
  const ts = i < tsCount;
  const schedule = scheduleOf(i);
  const name = `job-${String(i).padStart(5, '0')}.${ts ? 'ts' : 'mjs'}`;
  const body = ts
    ? `import { defineJob } from 'cluster-cron';\ninterface Out { n: number }\nexport default defineJob({ schedule: ${schedule}, catchUp: '1m', async run(): Promise<Out> { return { n: ${i} }; } });\n`
    : `export default { schedule: ${schedule}, catchUp: '1m', async run() { return { n: ${i} }; } };\n`;
  writeFileSync(join(jobsDir, name), body);
}
for (let i = 0; i < hung; i++) writeFileSync(join(jobsDir, `hung-${i}.mjs`), 'await new Promise(() => {});\nexport default {};\n');

const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SCHEDULER_'))), SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_LOG_FORMAT: 'json' };
const common = ['--jobs', jobsDir, '--store', `sqlite:${join(ws, 'scheduler.db')}`, '--node-id', 'bench-load'];
if (loadTimeout) common.push('--load-timeout', loadTimeout);

const elapsedMs = (started) => Number(process.hrtime.bigint() - started) / 1e6;

function timedRun(args) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, args, { cwd: ws, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ ms: elapsedMs(started), code, out }));
  });
}

/** VmRSS and VmHWM (peak resident) of a process in MB, from /proc/<pid>/status. */
function memoryMb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
}

/** One daemon: spawn to 'scheduler started'; with `idle`, then memory and idle CPU; then SIGTERM. */
function daemonOnce({ idle }) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, [bin, 'run', ...common, '--http', '127.0.0.1:0'], { cwd: ws, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    let ms;
    let measured;
    let failure;
    const afterStart = async () => {
      try {
        if (idle) {
          const settleCpu = cpuTimeMs(child.pid);
          await sleep(settleSeconds * 1000);
          const settleCpuMs = cpuTimeMs(child.pid) - settleCpu;
          const memory = memoryMb(child.pid);
          const cpuBefore = cpuTimeMs(child.pid);
          const t0 = process.hrtime.bigint();
          await sleep(idleSeconds * 1000);
          const cpuMs = cpuTimeMs(child.pid) - cpuBefore;
          const wallMs = elapsedMs(t0);
          measured = { ...memory, settleCpuMs, idleCpuPercent: (100 * cpuMs) / wallMs, idleCpuMs: cpuMs, idleWallMs: wallMs, rssAfterIdle: memoryMb(child.pid).rss };
        }
      } catch (err) {
        failure = err;
      }
      child.kill('SIGTERM');
    };
    child.stdout.on('data', (d) => {
      if (ms !== undefined) return;
      buf += d;
      if (buf.includes('"msg":"scheduler started"')) {
        ms = elapsedMs(started);
        buf = '';
        void afterStart();
      }
    });
    child.stderr.on('data', (d) => (buf += d));
    const guard = setTimeout(() => child.kill('SIGKILL'), 600_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(guard);
      if (failure) reject(failure);
      else resolve({ ms, code, measured, out: buf });
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? null : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const stats = (xs) => (xs.length ? { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) } : null);
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');

try {
  process.stdout.write(`load-jobs: ${files} good files (${tsCount} .ts, ${files - tsCount} .mjs, schedule ${schedule}), ${hung} hung, package ${root}, ${JSON.stringify(sourceState())}, load average ${load()}\n`);
  // `--help` and `node -e 0` alternately, so that both see the same load.
  const help = [];
  const bare = [];
  for (let i = 0; i < helpRuns; i++) {
    const h = await timedRun([bin, '--help']);
    if (h.code !== 0) throw new Error(`--help exited ${h.code}:\n${h.out.slice(0, 2000)}`);
    help.push(h.ms);
    bare.push((await timedRun(['-e', '0'])).ms);
  }
  if (helpRuns > 0) process.stdout.write(`--help ${median(help).toFixed(0)} ms (median of ${helpRuns}), node -e 0 ${median(bare).toFixed(0)} ms\n`);

  const validate = [];
  const daemon = [];
  let measured;
  for (let r = 0; r < rounds; r++) {
    const v = await timedRun([bin, 'validate', ...common]);
    const expected = hung > 0 ? 2 : 0;
    if (v.code !== expected) throw new Error(`validate exited ${v.code} (expected ${expected}):\n${v.out.slice(0, 2000)}`);
    validate.push(v.ms);
    process.stdout.write(`round ${r + 1}: validate ${v.ms.toFixed(0)} ms`);
    if (!flags['no-daemon']) {
      const last = r === rounds - 1;
      const d = await daemonOnce({ idle: last && idleSeconds > 0 });
      if (d.ms === undefined || d.code !== 0) throw new Error(`daemon did not start and stop cleanly (exit ${d.code}):\n${d.out.slice(0, 2000)}`);
      daemon.push(d.ms);
      process.stdout.write(`, daemon start ${d.ms.toFixed(0)} ms`);
      if (d.measured) {
        measured = d.measured;
        process.stdout.write(`, first ${settleSeconds} s: ${measured.settleCpuMs.toFixed(0)} ms CPU; then VmRSS ${measured.rss.toFixed(0)} MB, VmHWM ${measured.hwm.toFixed(0)} MB; idle ${idleSeconds} s: ${measured.idleCpuMs.toFixed(0)} ms CPU = ${measured.idleCpuPercent.toFixed(2)} % of a core (VmRSS then ${measured.rssAfterIdle.toFixed(0)} MB)`);
      }
    }
    process.stdout.write(` [load ${load()}]\n`);
  }
  const summary = {
    files, ts: tsCount, mjs: files - tsCount, schedule: flags.spread ? 'spread' : flags.schedule, hung, loadTimeout: loadTimeout ?? null, rounds,
    helpMs: stats(help), nodeBareMs: stats(bare),
    validateMs: stats(validate),
    daemonStartMs: stats(daemon),
    memoryMb: measured ? { rss: Math.round(measured.rss), hwm: Math.round(measured.hwm), rssAfterIdle: Math.round(measured.rssAfterIdle) } : null,
    settleCpuMs: measured ? Math.round(measured.settleCpuMs) : null,
    idleCpuPercent: measured ? Number(measured.idleCpuPercent.toFixed(3)) : null,
    loadAverage: load(),
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
} finally {
  for (const c of cleanups.reverse()) c();
}
