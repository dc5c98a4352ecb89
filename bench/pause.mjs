#!/usr/bin/env node
/**
 * How fast a pause is honoured cluster-wide, with real daemons on loopback.
 *
 *   node bench/pause.mjs [--rounds 10] [--nodes 3] [--jobs 3] [--redis 3] [--store postgres|sqlite]
 *                        [--no-build | --package DIR] [--keep] [--json-out FILE]
 *   (BENCH_PG_ADMIN=postgres://postgres@127.0.0.1:5432/postgres)
 *
 * N `bin/scheduler run` nodes on one store (a private PostgreSQL database by default; `--store sqlite`:
 * one file), R Redis masters, J every-second jobs whose bodies append one JSON line each (job, period,
 * node, trigger) to a side-effect file. Each round, at a random phase of the second, `bin/scheduler
 * pause <job>` runs for every job at once; the moment its line arrives on stdout is the pause's return
 * (the earliest moment a user can know it returned). After 3 s, the latest period instant whose body
 * started (trigger schedule or catch-up) is read from the side effects, relative to that return; then
 * `resume` runs and the first period whose body started after the resume's return is recorded too.
 *
 * Goal: no body starts for a period whose instant is later than the pause's return + 1 s (one tick):
 * the worst `last body - pause return` over every round and job must be <= 1000 ms. Also checked:
 * every period after that bound has exactly one row, `skipped` with reason `paused`.
 * Exit status: 0 goal met, 1 not met, 2 on error. The last line of the report is one JSON document.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  SCHEDULER_BIN, SchedulerNode, buildSnapshot, benchOptions, createPostgresDb, randomTag, readJsonLines, sleep, sourceState, startRedisServers, summarise, table,
} from './lib.mjs';

const USAGE = 'usage: node bench/pause.mjs [--rounds 10] [--nodes 3] [--jobs 3] [--redis 3] [--store postgres|sqlite] [--no-build | --package DIR] [--keep] [--json-out FILE]\n';
const BOUND_MS = 1000;

function options(argv) {
  const flags = benchOptions(argv, { strings: ['rounds', 'nodes', 'jobs', 'redis', 'store', 'package', 'json-out'], booleans: ['no-build', 'keep'], usage: USAGE });
  const num = (name, dflt, min = 1) => {
    if (flags[name] === undefined) return dflt;
    const n = Number(flags[name]);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name}: expected a whole number >= ${min}, got ${flags[name]}`);
    return n;
  };
  const store = flags.store ?? 'postgres';
  if (!['postgres', 'sqlite'].includes(store)) throw new Error(`--store: postgres or sqlite, got ${store}`);
  return {
    rounds: num('rounds', 10), nodes: num('nodes', 3), jobs: num('jobs', 3), redis: num('redis', 3, 0), store,
    build: !flags['no-build'], packageDir: flags.package, keep: Boolean(flags.keep), jsonOut: flags['json-out'],
  };
}

const JOB = `import { appendFileSync } from 'node:fs';
export default {
  schedule: '* * * * * *',
  catchUp: '30s',
  run(ctx) {
    appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ job: ctx.job, instant: ctx.scheduledAt.getTime(), node: ctx.nodeId, trigger: ctx.trigger, at: Date.now() }) + '\\n');
  },
};
`;

async function createStore(opts, dir) {
  if (opts.store === 'sqlite') return { url: `sqlite:${join(dir, 'scheduler.db')}`, drop: async () => {}, describe: 'SQLite (one file)' };
  const adminUrl = process.env.BENCH_PG_ADMIN ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const db = await createPostgresDb('cron_bench_pause', { adminUrl, name: `cron_bench_pause_${randomTag()}` });
  return { url: db.url, describe: `PostgreSQL (private database ${db.name})`, drop: () => db.drop() };
}

/** Runs a CLI command; resolves with the moment its first stdout line arrived, its output and exit code. */
function cli(bin, args, env, cwd) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { cwd, env: { ...process.env, ...env, SCHEDULER_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let lineAt;
    child.stdout.on('data', (d) => {
      lineAt ??= Date.now();
      stdout += d;
    });
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr, lineAt: lineAt ?? Date.now() }));
  });
}

/** The store's rows of a job (history --json), newest first. */
async function rows(bin, env, cwd, job) {
  const r = await cli(bin, ['history', job, '--json', '--limit', '1000'], env, cwd);
  if (r.code !== 0) throw new Error(`history ${job}: exit ${r.code}: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout);
}

async function main() {
  const opts = options(process.argv.slice(2));
  const dir = mkdtempSync(join(tmpdir(), 'bench-pause-'));
  const jobsDir = join(dir, 'jobs');
  mkdirSync(jobsDir);
  const names = Array.from({ length: opts.jobs }, (_, i) => `pause-${i + 1}`);
  for (const n of names) writeFileSync(join(jobsDir, `${n}.mjs`), JOB);
  const effectsFile = join(dir, 'effects.jsonl');
  const packageDir = opts.packageDir ?? (opts.build ? buildSnapshot() : undefined);
  const bin = packageDir ? join(packageDir, 'bin', 'scheduler') : SCHEDULER_BIN;
  const redis = await startRedisServers(opts.redis);
  const store = await createStore(opts, dir);
  const env = {
    SCHEDULER_STORE: store.url, SCHEDULER_JOBS_DIR: jobsDir, SIDE_EFFECTS: effectsFile, SCHEDULER_LOG_LEVEL: 'info',
    ...(redis.length > 0 ? { SCHEDULER_REDIS: redis.map((r) => r.url).join(',') } : {}),
  };
  const nodes = [];
  const report = { bench: 'pause', command: `node bench/pause.mjs ${process.argv.slice(2).join(' ')}`.trim(), at: new Date().toISOString(), source: sourceState(), store: store.describe, nodes: opts.nodes, redis: opts.redis, jobs: opts.jobs, rounds: [] };
  try {
    for (let i = 0; i < opts.nodes; i++) nodes.push(new SchedulerNode({ nodeId: `node-${i + 1}`, env, cwd: dir, logFile: join(dir, `node-${i + 1}.log`), bin }));
    await Promise.all(nodes.map((n) => n.waitStarted()));
    console.log(`[bench] ${opts.nodes} nodes, ${opts.redis} Redis, ${store.describe}, ${opts.jobs} every-second job(s), ${opts.rounds} rounds; files in ${dir}`);
    await sleep(3000);
    const load = [loadavg()[0]];
    for (let round = 1; round <= opts.rounds; round++) {
      await sleep(Math.floor(Math.random() * 1000));
      const paused = await Promise.all(names.map((job) => cli(bin, ['pause', job, '--reason', `bench round ${round}`], env, dir)));
      for (const [i, p] of paused.entries()) if (p.code !== 0) throw new Error(`pause ${names[i]}: exit ${p.code}: ${p.stderr.trim()}`);
      await sleep(3000);
      const effects = readJsonLines(effectsFile);
      const resumed = await Promise.all(names.map((job) => cli(bin, ['resume', job], env, dir)));
      for (const [i, r] of resumed.entries()) if (r.code !== 0) throw new Error(`resume ${names[i]}: exit ${r.code}: ${r.stderr.trim()}`);
      for (const [i, job] of names.entries()) {
        const returnedAt = paused[i].lineAt;
        const resumedAt = resumed[i].lineAt;
        const bodies = effects.filter((e) => e.job === job && e.trigger !== 'manual' && e.instant < resumedAt);
        const last = Math.max(...bodies.map((e) => e.instant));
        report.rounds.push({ round, job, pauseReturnedAt: returnedAt, resumeReturnedAt: resumedAt, lastBodyInstant: last, lastBodyMinusReturnMs: last - returnedAt });
      }
      // Resumed: every job runs again before the next round.
      const until = Date.now() + 15_000;
      for (;;) {
        const after = readJsonLines(effectsFile);
        const back = names.map((job, i) => after.filter((e) => e.job === job && e.instant > resumed[i].lineAt).map((e) => e.instant));
        if (back.every((b) => b.length > 0)) {
          for (const [i, b] of back.entries()) report.rounds[report.rounds.length - names.length + i].firstBodyAfterResumeMs = Math.min(...b) - resumed[i].lineAt;
          break;
        }
        if (Date.now() > until) throw new Error(`round ${round}: not every job ran again within 15 s of resume`);
        await sleep(100);
      }
    }
    load.push(loadavg()[0]);
    // The rows: every period after a pause's bound (until its resume) has one row, skipped (paused).
    const problems = [];
    for (const job of names) {
      const runs = await rows(bin, env, dir, job);
      for (const r of report.rounds.filter((x) => x.job === job)) {
        const inWindow = runs.filter((x) => {
          const t = new Date(x.scheduledAt).getTime();
          return x.trigger !== 'manual' && t > r.pauseReturnedAt + BOUND_MS && t < r.resumeReturnedAt - 200;
        });
        const bad = inWindow.filter((x) => x.status !== 'skipped' || x.reason !== 'paused');
        if (bad.length > 0) problems.push(`${job} round ${r.round}: ${bad.length} row(s) in the paused window not skipped/paused: ${bad.slice(0, 3).map((x) => `${x.periodKey} ${x.status}`).join(', ')}`);
        const keys = new Set(inWindow.map((x) => x.periodKey));
        if (keys.size !== inWindow.length) problems.push(`${job} round ${r.round}: a period with two rows`);
        r.skippedPausedRows = inWindow.length - bad.length;
      }
    }
    const deltas = report.rounds.map((r) => r.lastBodyMinusReturnMs);
    const worst = Math.max(...deltas);
    if (worst > BOUND_MS) problems.push(`a body started for a period ${worst} ms after the pause returned (bound ${BOUND_MS} ms)`);
    const resumes = summarise(report.rounds.map((r) => r.firstBodyAfterResumeMs));
    console.log(table([
      ['round', 'job', 'last body - pause return (ms)', 'first body - resume return (ms)', 'skipped/paused rows'],
      ...report.rounds.map((r) => [r.round, r.job, r.lastBodyMinusReturnMs, r.firstBodyAfterResumeMs, r.skippedPausedRows]),
    ]));
    const s = summarise(deltas);
    console.log(`last body - pause return, ms: ${s.count} pauses, min ${s.min}  p50 ${s.p50}  max ${s.max}   goal <= ${BOUND_MS}: ${worst <= BOUND_MS ? 'PASS' : 'FAIL'}`);
    console.log(`first body - resume return, ms: min ${resumes.min}  p50 ${resumes.p50}  max ${resumes.max}`);
    console.log(`1-min load average ${load[0].toFixed(2)} -> ${load[1].toFixed(2)}; problems: ${problems.length === 0 ? 'none' : ''}`);
    for (const p of problems) console.log(`  ${p}`);
    Object.assign(report, { worstMs: worst, lastBodyMinusReturnMs: s, firstBodyAfterResumeMs: resumes, load1: load, problems, ok: problems.length === 0 });
    if (opts.jsonOut) writeFileSync(opts.jsonOut, JSON.stringify(report, null, 2));
    console.log(JSON.stringify(report));
    process.exitCode = problems.length === 0 ? 0 : 1;
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
    await Promise.all(redis.map((r) => r.cleanup()));
    await store.drop().catch((err) => console.error(`[bench] could not drop the database: ${err.message}`));
    if (!opts.keep) {
      rmSync(dir, { recursive: true, force: true });
      if (packageDir && !opts.packageDir) rmSync(packageDir, { recursive: true, force: true });
    } else console.log(`[bench] kept ${dir}`);
  }
}

main().catch((err) => {
  console.error(`[bench] error: ${err.stack ?? err}`);
  process.exitCode = 2;
});
