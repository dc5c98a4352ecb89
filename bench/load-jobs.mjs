#!/usr/bin/env node
/**
 * How long loading the jobs folder takes: `bin/scheduler validate` (loads every file, prints one
 * line) and the daemon's start (spawn to 'scheduler started') over a folder of N good job files,
 * optionally with H job files whose top-level await never settles (they cost one loadTimeout each
 * when loaded one after another, one loadTimeout per batch when loaded concurrently).
 *
 *   node bench/load-jobs.mjs [--files 1000] [--ts 0.5] [--hung 0] [--load-timeout 2s]
 *                            [--rounds 5] [--no-daemon] [--no-build | --package DIR]
 *
 * By default src/ is compiled into a private copy of the package (bench/lib.mjs buildSnapshot());
 * --package DIR uses a copy made earlier (for before/after comparisons), --no-build the shared dist/.
 * Prints one line per measurement and a JSON summary (medians in ms).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT, buildSnapshot, benchOptions, sourceState } from './lib.mjs';

const USAGE = 'node bench/load-jobs.mjs [--files 1000] [--ts 0.5] [--hung 0] [--load-timeout 2s] [--rounds 5] [--no-daemon] [--no-build | --package DIR]';
const flags = benchOptions(process.argv.slice(2), { strings: ['files', 'ts', 'hung', 'load-timeout', 'rounds', 'package'], booleans: ['no-daemon', 'no-build'], usage: USAGE });
const files = Number(flags.files ?? 1000);
const tsShare = Number(flags.ts ?? 0.5);
const hung = Number(flags.hung ?? 0);
const rounds = Number(flags.rounds ?? 5);
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
for (let i = 0; i < files; i++) {
  const ts = i < tsCount;
  const name = `job-${String(i).padStart(5, '0')}.${ts ? 'ts' : 'mjs'}`;
  const body = ts
    ? `import { defineJob } from 'cluster-cron';\ninterface Out { n: number }\nexport default defineJob({ schedule: '0 0 2 * * *', catchUp: '1m', async run(): Promise<Out> { return { n: ${i} }; } });\n`
    : `export default { schedule: '0 0 2 * * *', catchUp: '1m', async run() { return { n: ${i} }; } };\n`;
  writeFileSync(join(jobsDir, name), body);
}
for (let i = 0; i < hung; i++) writeFileSync(join(jobsDir, `hung-${i}.mjs`), 'await new Promise(() => {});\nexport default {};\n');

const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SCHEDULER_'))), SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_LOG_FORMAT: 'json' };
const common = ['--jobs', jobsDir, '--store', `sqlite:${join(ws, 'scheduler.db')}`, '--node-id', 'bench-load'];
if (loadTimeout) common.push('--load-timeout', loadTimeout);

function validateOnce() {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, [bin, 'validate', ...common], { cwd: ws, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ ms: Number(process.hrtime.bigint() - started) / 1e6, code, out }));
  });
}

function daemonOnce() {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, [bin, 'run', ...common], { cwd: ws, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    let ms;
    child.stdout.on('data', (d) => {
      buf += d;
      if (ms === undefined && buf.includes('"msg":"scheduler started"')) {
        ms = Number(process.hrtime.bigint() - started) / 1e6;
        child.kill('SIGTERM');
      }
    });
    const guard = setTimeout(() => child.kill('SIGKILL'), 600_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(guard);
      resolve({ ms, code });
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? null : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

try {
  process.stdout.write(`load-jobs: ${files} good files (${tsCount} .ts, ${files - tsCount} .mjs), ${hung} hung, package ${root}, ${JSON.stringify(sourceState())}\n`);
  const validate = [];
  const daemon = [];
  for (let r = 0; r < rounds; r++) {
    const v = await validateOnce();
    const expected = hung > 0 ? 2 : 0;
    if (v.code !== expected) throw new Error(`validate exited ${v.code} (expected ${expected}):\n${v.out.slice(0, 2000)}`);
    validate.push(v.ms);
    process.stdout.write(`round ${r + 1}: validate ${v.ms.toFixed(0)} ms`);
    if (!flags['no-daemon']) {
      const d = await daemonOnce();
      if (d.ms === undefined || d.code !== 0) throw new Error(`daemon did not start and stop cleanly (exit ${d.code})`);
      daemon.push(d.ms);
      process.stdout.write(`, daemon start ${d.ms.toFixed(0)} ms`);
    }
    process.stdout.write('\n');
  }
  const summary = {
    files, ts: tsCount, mjs: files - tsCount, hung, loadTimeout: loadTimeout ?? null, rounds,
    validateMs: { median: median(validate), min: Math.min(...validate), max: Math.max(...validate) },
    daemonStartMs: daemon.length ? { median: median(daemon), min: Math.min(...daemon), max: Math.max(...daemon) } : null,
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
} finally {
  for (const c of cleanups.reverse()) c();
}
