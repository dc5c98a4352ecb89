#!/usr/bin/env node
/**
 * The cost per run of each isolation mode of a job body, through the scheduler's own code (dist/):
 *
 *  - start latency: from the moment the scheduler starts the body (runBody / runInWorker called) to
 *    the body's first statement (the body returns `performance.timeOrigin + performance.now()`, a
 *    wall-clock instant with fractions, comparable across threads and processes), and to the outcome
 *    back in the scheduler; runs one after another;
 *  - memory: `--concurrent` bodies that hold for a while, all at once; the RSS growth of the node
 *    (for child processes: the node's growth plus the children's RSS), divided by their number.
 *
 * Modes: inline (the body in the scheduler's thread), worker thread (what `isolation: 'worker'` uses)
 * and child process (the same worker entry, forked; measured for the choice, not offered). Job files:
 * a plain .mjs and a .ts importing `cluster-cron` (jiti transpiles it in every new worker).
 *
 *  - drift: the node's RSS growth over `--drift-runs` more sequential runs (a leak per run shows here).
 *
 *   npm run build && node --expose-gc bench/isolation.mjs [--runs 40] [--concurrent 20] [--hold 6000] [--drift-runs 200] [--modes inline,thread,process] [--kinds mjs,ts]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { fmt, benchOptions, sleep, summarise, table, sourceState } from './lib.mjs';

const USAGE = `node bench/isolation.mjs [--runs N] [--concurrent N] [--hold MS] [--drift-runs N] [--modes inline,thread,process] [--kinds mjs,ts] [--json]
  --runs        sequential runs per mode and job file for the start latency (default 40; the first 3 are warm-up)
  --concurrent  bodies held at once for the memory figure (default 20)
  --hold        how long each of those bodies holds (ms, default 6000; the RSS is sampled half-way)
  --drift-runs  further sequential runs over which the node's RSS growth is measured (default 200)
  --json        also print the figures as JSON
Needs a build (npm run build): it runs dist/.`;

const flags = benchOptions(process.argv.slice(2), { strings: ['runs', 'concurrent', 'hold', 'drift-runs', 'modes', 'kinds'], booleans: ['json'], usage: USAGE });
const runs = Number(flags.runs ?? 40);
const concurrent = Number(flags.concurrent ?? 20);
const hold = Number(flags.hold ?? 6000);
const driftRuns = Number(flags['drift-runs'] ?? 200);
const modes = String(flags.modes ?? 'inline,thread,process').split(',');
const kinds = String(flags.kinds ?? 'mjs,ts').split(',');
const WARMUP = 3;

const dist = (p) => new URL(`../dist/${p}`, import.meta.url).href;
const { runBody } = await import(dist('run/body.js'));
const { runInWorker } = await import(dist('run/isolation/worker-body.js'));
const { createJobImporter, defaultExportOf } = await import(dist('jobs/importer.js'));

const dir = mkdtempSync(join(tmpdir(), 'bench-isolation-'));
const now = () => performance.timeOrigin + performance.now();

const SOURCES = {
  mjs: (holdMs) => `export default {
  schedule: '0 0 * * *',
  async run(ctx) {
    const t = performance.timeOrigin + performance.now();
    if (${holdMs} > 0) await new Promise((r) => setTimeout(r, ${holdMs}));
    return t;
  },
};
`,
  ts: (holdMs) => `import { defineJob, type JobContext } from 'cluster-cron';

interface Started { at: number }

export default defineJob({
  schedule: '0 0 * * *',
  async run(ctx: JobContext): Promise<number> {
    const started: Started = { at: performance.timeOrigin + performance.now() };
    if (${holdMs} > 0) await new Promise<void>((r) => setTimeout(r, ${holdMs}));
    return started.at;
  },
});
`,
};

const log = pino({ level: 'silent' });
let seq = 0;

function fakeRun(name) {
  seq += 1;
  return { id: String(seq), job: name, scheduledAt: new Date(), periodKey: `${name}@${new Date().toISOString()}`, attempt: 1, trigger: 'manual' };
}

/** Starts one body in the given mode; resolves with { startMs, totalMs } (start: to the body's first statement). */
async function once(mode, file, job) {
  const run = fakeRun(job.name);
  const t0 = now();
  let value;
  if (mode === 'inline') {
    const outcome = await runBody({ job, run, nodeId: 'bench', controller: new AbortController(), dryRun: false, log, maxResultBytes: 1024 * 1024 });
    if (outcome.status !== 'succeeded') throw new Error(`inline body: ${outcome.status} ${outcome.error}`);
    value = outcome.result;
  } else {
    const settled = await runInWorker({
      start: { file, job: job.name, scheduledAt: run.scheduledAt.getTime(), periodKey: run.periodKey, runId: run.id, attempt: 1, trigger: 'manual', nodeId: 'bench', dryRun: false, log: { level: 'silent', bindings: {} }, maxResultBytes: 1024 * 1024 },
      log,
      signal: new AbortController().signal,
      mode,
    });
    if (settled.kind !== 'ok') throw new Error(`${mode} body: ${settled.error}`);
    value = JSON.parse(settled.json);
  }
  const t1 = now();
  return { startMs: value - t0, totalMs: t1 - t0 };
}

function rssKb(pid) {
  const status = execFileSync('cat', [`/proc/${pid}/status`], { encoding: 'utf8' });
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
}

function childrenRssKb(pid) {
  try {
    const out = execFileSync('ps', ['-o', 'rss=', '--ppid', String(pid)], { encoding: 'utf8' });
    return out.split('\n').map((l) => Number(l.trim())).filter((n) => Number.isFinite(n) && n > 0).reduce((a, b) => a + b, 0);
  } catch {
    return 0; // no children
  }
}

async function memory(mode, file, job) {
  global.gc?.();
  await sleep(300);
  const before = rssKb(process.pid) + childrenRssKb(process.pid);
  const pending = [];
  for (let i = 0; i < concurrent; i++) pending.push(once(mode, file, job));
  // Sample while every body holds: after the slowest start (bounded by hold/2).
  await sleep(hold / 2);
  const during = rssKb(process.pid) + childrenRssKb(process.pid);
  await Promise.all(pending);
  await sleep(300);
  const after = rssKb(process.pid) + childrenRssKb(process.pid);
  return { perRunMb: (during - before) / 1024 / concurrent, leftMb: (after - before) / 1024 };
}

/** RSS growth over `n` more sequential runs (after the latency runs): a leak per run would show here. */
async function drift(mode, file, job, n) {
  global.gc?.();
  const before = rssKb(process.pid);
  for (let i = 0; i < n; i++) await once(mode, file, job);
  await sleep(300);
  global.gc?.();
  return (rssKb(process.pid) - before) / 1024;
}

const rows = [['mode', 'job file', 'start p50', 'p90', 'max', 'outcome back p50', 'p90', `RSS per run (${concurrent} at once)`, 'RSS left after', `RSS drift over ${driftRuns} more runs`]];
const results = [];
try {
  for (const kind of kinds) {
    const quick = join(dir, `quick-${kind}.${kind}`);
    const held = join(dir, `held-${kind}.${kind}`);
    writeFileSync(quick, SOURCES[kind](0));
    writeFileSync(held, SOURCES[kind](hold));
    const importer = createJobImporter();
    const quickJob = { name: `quick-${kind}`, file: quick, path: quick, isolation: 'inline', timeoutMs: null, run: defaultExportOf(await importer(quick)).run };
    const heldJob = { name: `held-${kind}`, file: held, path: held, isolation: 'inline', timeoutMs: null, run: defaultExportOf(await importer(held)).run };
    for (const mode of modes) {
      const starts = [];
      const totals = [];
      for (let i = 0; i < runs + WARMUP; i++) {
        const r = await once(mode, quick, quickJob);
        if (i >= WARMUP) {
          starts.push(r.startMs);
          totals.push(r.totalMs);
        }
      }
      const driftMb = await drift(mode, quick, quickJob, driftRuns);
      const mem = await memory(mode, held, heldJob);
      const s = summarise(starts);
      const t = summarise(totals);
      results.push({ mode, kind, start: s, total: t, ...mem, driftMb });
      rows.push([mode === 'thread' ? 'worker thread' : mode === 'process' ? 'child process' : 'inline', `.${kind}`, `${fmt(s.p50, 2)} ms`, `${fmt(s.p90, 2)} ms`, `${fmt(s.max, 2)} ms`, `${fmt(t.p50, 2)} ms`, `${fmt(t.p90, 2)} ms`, `${fmt(mem.perRunMb, 1)} MB`, `${fmt(mem.leftMb, 1)} MB`, `${fmt(driftMb, 1)} MB`]);
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const state = sourceState();
process.stdout.write(`node ${[...process.execArgv, 'bench/isolation.mjs', ...process.argv.slice(2)].join(' ')}\n`);
process.stdout.write(`Node ${process.version}, ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB; commit ${state.head}${state.srcChanges.length ? ' (src/ changed)' : ''}; ${runs} sequential runs per row (after ${WARMUP} warm-up), ${concurrent} held at once for memory\n\n`);
process.stdout.write(`${table(rows)}\n`);
if (flags.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
