#!/usr/bin/env node
/**
 * Throughput benchmark for issue 10: N every-second jobs on this project's cluster and the same N
 * every-second job schedulers on BullMQ, side by side in one run on this machine.
 *
 *   node bench/throughput.mjs [--jobs 200,500,1000,2000] [--seconds 40] [--warmup 10] [--grace 5]
 *                             [--nodes 4] [--redis 3] [--sides project,bullmq] [--bullmq-version 6.7.0]
 *                             [--bullmq-workers 4] [--bullmq-concurrency 1000] [--log-level info] [--node-args "--cpu-prof ..."]
 *                             [--no-build | --package DIR] [--keep] [--json-out FILE] [--profile DIR]
 *
 * One round per job count, both sides per round (the project first, then BullMQ, same N), each on
 * servers of its own that the bench starts on free ports and stops afterwards:
 *   project  `--nodes` `bin/scheduler run` daemons (a private build of src/ unless --no-build or
 *            --package), `--redis` Redis masters, a private MariaDB database with one MySQL user per
 *            node; N job files `schedule: '* * * * * *'` with the default options.
 *   bullmq   one Redis server, N job schedulers `queue.upsertJobScheduler(name, { pattern: '* * * * * *' })`
 *            (cron with seconds: every scheduler's iterations fall on the same whole seconds as the
 *            project's periods; `every: 1000` would spread them over the second from the moment each
 *            was added), `--bullmq-workers` worker processes (bench/throughput-bullmq-worker.mjs) with
 *            `--bullmq-concurrency`; jobs `removeOnComplete`/`removeOnFail`, the setting a queue that
 *            runs thousands of jobs a second needs. bullmq (and ioredis, its optional peer) is installed
 *            with npm into a folder under the temp dir, kept there between runs per version, never into
 *            the project.
 *
 * Each job body appends one line to a file of its node or worker (job, period instant, wall-clock
 * start with a fraction of a millisecond, node). After `--warmup` seconds the window of `--seconds`
 * opens mid-second; the periods of the window are the whole seconds inside it. From the lines:
 * gaps (a period of the window with no line), duplicates (a period with two or more), fire latency
 * (start - period instant, p50/p99/max), each node's share of the periods (fairness: goal within 25 %
 * of the mean). Over the window, divided by its periods (jobs x seconds): Redis commands (delta of
 * INFO commandstats over all of the side's servers, INFO itself left out; commands a Lua script runs
 * count as well as the EVALSHA), store statements (MariaDB USER_STATISTICS of the nodes' users, else
 * the server-wide Questions counter, polluted by other users), CPU (utime + stime from /proc of the
 * nodes or workers, the side's Redis servers and, for the project, mariadbd: a shared server, so its
 * delta includes other users' load; its rate during BullMQ's window, when the project is idle, is
 * shown as a baseline). Lateness from the store: the window's rows by status, reason and trigger.
 *
 * Waits `--grace` seconds after the window before stopping, so late runs of the window's periods are
 * still counted. Prints a table per round and a summary; `--json-out FILE` writes every figure.
 * Exit status: 0 when the project met issue 10's goals in every round, 1 otherwise, 2 on error.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import {
  PROJECT_ROOT, adminConnection, cleanupStack, commandStats, commandStatsDelta, cpuTimeMs, createBenchDatabase,
  enableUserstat, exited, fmt, pidsByName, randomTag, resolvePackage, sleep, sourceState, startRedisServers,
  startSchedulerNodes, statDelta, summarise, table, tail, userStatistics,
} from './lib.mjs';
import { formatTop, mergeTop, topFrames } from './profile-top.mjs';

// The goals of issue 10 ("Must reach").
const GOALS = { p99Ms: 100, redisPerPeriod: 8, storePerPeriod: 1.5, fairness: 0.25 };

const out = (s = '') => process.stdout.write(`${s}\n`);
const note = (s) => process.stderr.write(`[throughput] ${s}\n`);

// ------------------------------------------------------------------------------------- options

const USAGE = `usage: node bench/throughput.mjs [--jobs 200,500,1000,2000] [--seconds 40] [--warmup 10] [--grace 5]
       [--nodes 4] [--redis 3] [--sides project,bullmq] [--bullmq-version 6.7.0] [--bullmq-workers 4]
       [--bullmq-concurrency 1000] [--log-level info] [--node-args "--cpu-prof ..."] [--no-build | --package DIR] [--keep] [--json-out FILE]
       [--profile DIR]   project side: each node writes a CPU profile (--cpu-prof, from its start to its stop)
                         and a heap snapshot after the window into DIR/<jobs>/, and the top frames by self
                         time are printed (bench/profile-top.mjs reads them again); the profiler costs CPU,
                         so a profiled round's figures are not the unprofiled ones
       [--then-jobs M]   project side: after the window, keep M of the jobs (the other files removed, SIGHUP to
                         every node), and measure a second window at M jobs: the recovery from an overload`;

function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      jobs: { type: 'string', default: '200,500,1000,2000' },
      seconds: { type: 'string', default: '40' },
      warmup: { type: 'string', default: '10' },
      grace: { type: 'string', default: '5' },
      nodes: { type: 'string', default: '4' },
      redis: { type: 'string', default: '3' },
      sides: { type: 'string', default: 'project,bullmq' },
      'bullmq-version': { type: 'string', default: '6.7.0' },
      'bullmq-workers': { type: 'string', default: '4' },
      'bullmq-concurrency': { type: 'string', default: '1000' },
      'log-level': { type: 'string', default: 'info' },
      'node-args': { type: 'string', default: '' },
      package: { type: 'string' },
      'no-build': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      'json-out': { type: 'string' },
      'then-jobs': { type: 'string' },
      profile: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    out(USAGE);
    process.exit(0);
  }
  const int = (name, min = 1) => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name}: expected an integer >= ${min}, got ${values[name]}`);
    return n;
  };
  const jobs = values.jobs.split(',').map((s) => s.trim()).filter(Boolean).map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--jobs: expected a list of positive integers, got ${values.jobs}`);
    return n;
  });
  const sides = values.sides.split(',').map((s) => s.trim()).filter(Boolean);
  for (const s of sides) if (!['project', 'bullmq'].includes(s)) throw new Error(`--sides: unknown side ${s} (project, bullmq)`);
  return {
    jobs, sides,
    seconds: int('seconds'), warmup: int('warmup', 0), grace: int('grace', 0),
    nodes: int('nodes'), redis: int('redis', 1),
    bullmqVersion: values['bullmq-version'], bullmqWorkers: int('bullmq-workers'), bullmqConcurrency: int('bullmq-concurrency'),
    nodeArgs: values['node-args'].split(' ').filter(Boolean),
    logLevel: values['log-level'], packageDir: values.package, build: !values['no-build'], keep: values.keep, jsonOut: values['json-out'],
    thenJobs: values['then-jobs'] === undefined ? null : int('then-jobs'),
    profile: values.profile ?? null,
  };
}

// ----------------------------------------------------------------------------- profiles (--profile)

/** SIGUSR2 to every node, one at a time (a snapshot holds its node for a while), each awaited until its file is whole. */
async function heapSnapshots(nodes, dir) {
  for (const node of nodes) {
    const before = new Set(readdirSync(dir));
    process.kill(node.pid, 'SIGUSR2');
    const deadline = Date.now() + 120_000;
    let file = null;
    let size = -1;
    while (Date.now() < deadline) {
      await sleep(500);
      file ??= readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f)) ?? null;
      if (!file) continue;
      const now = statSync(join(dir, file)).size;
      if (now > 0 && now === size) break;
      size = now;
    }
    if (file) renameSync(join(dir, file), join(dir, `${node.nodeId}.heapsnapshot`));
    note(file ? `heap snapshot of ${node.nodeId}: ${(size / 2 ** 20).toFixed(0)} MiB file` : `heap snapshot of ${node.nodeId}: none written within 120 s`);
  }
}

/** The top frames of each node's CPU profile, and of all of them together. */
function printProfiles(dir, nodes, n) {
  const byPid = new Map(nodes.map((node) => [String(node.pid), node.nodeId]));
  const results = [];
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.cpuprofile'))) {
    // Node names the file CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile.
    const nodeId = byPid.get(f.split('.')[3]) ?? f;
    const named = join(dir, `${nodeId}.cpuprofile`);
    if (!f.startsWith(nodeId)) renameSync(join(dir, f), named);
    // The heap snapshot taken after the window is the profile's own cost, not the node's.
    results.push({ nodeId, ...topFrames(JSON.parse(readFileSync(named, 'utf8')), { exclude: ['writeHeapSnapshot'] }) });
  }
  if (results.length === 0) {
    note(`no CPU profile in ${dir} (a node that did not exit cleanly writes none)`);
    return;
  }
  out(formatTop(`CPU profile, ${n} jobs, all ${results.length} nodes (${dir})`, mergeTop(results), 20));
  out();
}

// ----------------------------------------------------------------------------- shared measuring

const jobNames = (n) => Array.from({ length: n }, (_, i) => `tp-${String(i + 1).padStart(4, '0')}`);

async function sleepUntil(t) {
  const d = t - Date.now();
  if (d > 0) await sleep(d);
}

/**
 * The measured window: it opens mid-second `warmup` seconds from now and lasts `seconds`; its periods
 * are the whole seconds inside it (`seconds` instants per job).
 */
function measuredWindow(opts) {
  const from = Math.ceil((Date.now() + opts.warmup * 1000) / 1000) * 1000 + 500;
  const to = from + opts.seconds * 1000;
  const instants = [];
  for (let t = from + 500; t < to; t += 1000) instants.push(t);
  return { from, to, instants };
}

/** CPU ms per process group, Redis commandstats per server, store counters: taken together. */
async function snapshot({ cpuGroups, redisClients, store }) {
  const at = Date.now();
  const cpu = Object.fromEntries(Object.entries(cpuGroups).map(([k, pids]) => [k, pids.map((p) => cpuTimeMs(p))]));
  const [redis, storeCounters] = await Promise.all([
    Promise.all(redisClients.map((c) => commandStats(c))),
    store ? store.read() : undefined,
  ]);
  return { at, cpu, redis, store: storeCounters };
}

function cpuPerPeriod(s1, s2, periods) {
  const seconds = (s2.at - s1.at) / 1000;
  const groups = {};
  for (const k of Object.keys(s2.cpu)) {
    const ms = s2.cpu[k].reduce((sum, v, i) => sum + (v - s1.cpu[k][i]), 0);
    groups[k] = { ms, perPeriod: ms / periods, perSecond: ms / seconds };
  }
  return groups;
}

function redisPerPeriod(s1, s2, periods) {
  const d = commandStatsDelta(s1.redis, s2.redis);
  d.delete('info'); // the bench's own snapshots (and the clients' ready checks at connect)
  const total = [...d.values()].reduce((a, b) => a + b, 0);
  const top = [...d].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]).slice(0, 8)
    .map(([cmd, n]) => ({ cmd: cmd.toUpperCase(), perPeriod: n / periods }));
  return { total, perPeriod: total / periods, top };
}

/**
 * Reads every line the bodies wrote and counts, over the window's periods: gaps, duplicates, fire
 * latency and each node's share. Lines of periods outside the window are counted apart.
 */
function analyseLines(lines, { names, instants, nodeIds }) {
  const inWindow = new Set(instants);
  const counts = new Map();
  const latencies = [];
  const perNode = Object.fromEntries(nodeIds.map((n) => [n, 0]));
  let outside = 0;
  let over1s = 0;
  const triggers = {};
  for (const l of lines) {
    if (!inWindow.has(l.period)) {
      outside += 1;
      continue;
    }
    const key = `${l.job}@${l.period}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
    const lat = l.startMs - l.period;
    latencies.push(lat);
    if (lat > 1000) over1s += 1;
    perNode[l.node] = (perNode[l.node] ?? 0) + 1;
    if (l.trigger) triggers[l.trigger] = (triggers[l.trigger] ?? 0) + 1;
  }
  let gaps = 0;
  let duplicates = 0;
  const gapSample = [];
  for (const job of names) {
    for (const t of instants) {
      const c = counts.get(`${job}@${t}`) ?? 0;
      if (c === 0) {
        gaps += 1;
        if (gapSample.length < 5) gapSample.push(`${job}@${new Date(t).toISOString()}`);
      } else if (c > 1) {
        duplicates += c - 1;
      }
    }
  }
  const started = latencies.length;
  const mean = started / nodeIds.length;
  const shares = Object.values(perNode);
  const fairness = mean > 0 ? Math.max(...shares.map((c) => Math.abs(c - mean) / mean)) : NaN;
  return {
    periods: names.length * instants.length, started, gaps, duplicates, gapSample, startedOver1s: over1s, linesOutsideWindow: outside,
    latencyMs: summarise(latencies), perNode, fairnessMaxDeviation: fairness, triggers,
  };
}

/**
 * The cold start, from the bodies' own lines before the window: the seconds from the first period
 * any body ran to the first period from which every period up to the window's start had all its
 * jobs started within 1 s of their instant (`settledAfterS`; null when that never happened before
 * the window: the window then measures the start's overload too), and how many of those periods'
 * bodies started late (`late`; `lateCatchUp` of them catch-ups: periods due while the nodes started,
 * late by nature) and how many of those periods have no body at all (`notStarted`).
 */
function coldStart(lines, jobs, windowFrom) {
  const byPeriod = new Map();
  let lateCatchUp = 0;
  for (const l of lines) {
    if (l.period >= windowFrom) continue;
    const p = byPeriod.get(l.period) ?? { started: 0, late: 0 };
    p.started += 1;
    if (l.startMs - l.period > 1000) {
      p.late += 1;
      if (l.trigger === 'catch-up') lateCatchUp += 1;
    }
    byPeriod.set(l.period, p);
  }
  if (byPeriod.size === 0) return { settledAfterS: null, periods: 0, started: 0, notStarted: 0, late: 0, lateCatchUp: 0 };
  const first = Math.min(...byPeriod.keys());
  let settledFrom = null;
  let late = 0;
  let started = 0;
  let periods = 0;
  for (let t = first; t < windowFrom; t += 1000) {
    periods += jobs;
    const p = byPeriod.get(t) ?? { started: 0, late: 0 };
    late += p.late;
    started += p.started;
    if (p.started < jobs || p.late > 0) settledFrom = null;
    else settledFrom ??= t;
  }
  return { settledAfterS: settledFrom === null ? null : (settledFrom - first) / 1000, periods, started, notStarted: periods - started, late, lateCatchUp };
}

function readLines(file) {
  if (!existsSync(file)) return [];
  const lines = [];
  for (const s of readFileSync(file, 'utf8').split('\n')) {
    if (!s) continue;
    try {
      lines.push(JSON.parse(s));
    } catch {
      // a line cut by a kill: not a run that can be told apart
    }
  }
  return lines;
}

/** Warning and error lines of a daemon's log, by message (the per-run info lines are not parsed). */
function logProblems(file) {
  const byMsg = new Map();
  if (!existsSync(file)) return byMsg;
  for (const s of readFileSync(file, 'utf8').split('\n')) {
    if (!/"level":"(warn|error|fatal)"/.test(s)) continue;
    let msg = s.slice(0, 120);
    try {
      const l = JSON.parse(s);
      msg = `${l.level}: ${l.msg}${l.err?.message ? ` (${String(l.err.message).slice(0, 80)})` : ''}`;
    } catch {
      // not JSON: keep the raw start
    }
    byMsg.set(msg, (byMsg.get(msg) ?? 0) + 1);
  }
  return byMsg;
}

/** Lines of a file that match `re` (a daemon's log). */
function countLines(file, re) {
  if (!existsSync(file)) return 0;
  let n = 0;
  for (const line of readFileSync(file, 'utf8').split('\n')) if (re.test(line)) n += 1;
  return n;
}

function loadNow() {
  return loadavg().map((v) => Number(v.toFixed(2)));
}

// ------------------------------------------------------------------------------- project side

function projectJobSource(name) {
  return `// generated by bench/throughput.mjs: one line per run, written by the body itself
import { appendFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

export default {
  name: ${JSON.stringify(name)},
  schedule: '* * * * * *',
  run(ctx) {
    const startMs = performance.timeOrigin + performance.now();
    appendFileSync(process.env.BENCH_RUNS_OUT, JSON.stringify({
      job: ctx.job, period: ctx.scheduledAt.getTime(), startMs, node: ctx.nodeId, trigger: ctx.trigger, attempt: ctx.attempt,
    }) + '\\n');
  },
};
`;
}

/** Store statements: per-user statistics of the nodes' users, else the server-wide Questions. */
function storeCounter(admin, users, perUser) {
  if (perUser) {
    return {
      kind: 'USER_STATISTICS of the nodes\' MySQL users',
      async read() {
        const stats = await userStatistics(admin, users);
        return Object.fromEntries(users.map((u) => [u, stats.get(u)]));
      },
      delta(a, b) {
        const per = users.map((u) => statDelta(a[u], b[u]));
        return { total: per.reduce((s, d) => s + d.statements, 0), perNode: per.map((d) => d.statements) };
      },
    };
  }
  return {
    kind: 'SHOW GLOBAL STATUS Questions (server-wide: polluted by other users of the server)',
    async read() {
      const [rows] = await admin.query('SHOW GLOBAL STATUS LIKE ?', ['Questions']);
      return Number(rows[0]?.Value ?? NaN);
    },
    delta(a, b) {
      return { total: b - a - 1, perNode: null }; // minus this read itself
    },
  };
}

/**
 * The measured window of a side: counters read at its start and end, then `--grace` for the late
 * runs of its periods, then the side stopped (its exit codes).
 */
async function measureWindow(w, sources, load, opts, stop) {
  await sleepUntil(w.from);
  const s1 = await snapshot(sources);
  await sleepUntil(w.to);
  const s2 = await snapshot(sources);
  load.end = loadNow();
  await sleep(opts.grace * 1000);
  return { s1, s2, exits: stop ? await stop() : [] };
}

/** One round of the project: N every-second job files on `--nodes` daemons. */
async function runProjectRound(env, n) {
  const { admin, opts, pkg, mariadbPids, perUserStats } = env;
  const local = env.cleanups.scope();
  const names = jobNames(n);
  const tag = randomTag();
  const dir = mkdtempSync(join(tmpdir(), 'bench-throughput-project-'));
  const jobsDir = join(dir, 'jobs');
  const outDir = join(dir, 'out');
  mkdirSync(jobsDir);
  mkdirSync(outDir);
  if (!opts.keep) local.push(() => rmSync(dir, { recursive: true, force: true }));
  try {
    const db = await createBenchDatabase(admin, { tag, nodes: opts.nodes });
    local.push(() => db.drop());
    const redis = await startRedisServers(opts.redis);
    local.push(() => Promise.all(redis.map((s) => s.cleanup())));
    for (const name of names) writeFileSync(join(jobsDir, `${name}.mjs`), projectJobSource(name));
    note(`project, ${n} jobs: database ${db.db}, Redis ${redis.map((s) => s.port).join(', ')}, files in ${dir}`);

    // --profile: V8 writes the CPU profile when the node exits (a SIGTERM stop), the heap snapshot on SIGUSR2.
    const profileDir = opts.profile ? join(opts.profile, String(n)) : null;
    if (profileDir) mkdirSync(profileDir, { recursive: true });
    const profileArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, '--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${profileDir}`] : [];
    const nodes = startSchedulerNodes({
      db, redisUrls: redis.map((s) => s.url), jobsDir, cwd: dir, outDir, prefix: `cron-tput-${tag}:`, logLevel: opts.logLevel, bin: pkg.bin, nodeArgs: [...opts.nodeArgs, ...profileArgs],
      env: (nodeId) => ({ BENCH_RUNS_OUT: join(outDir, `${nodeId}.runs.jsonl`) }),
    });
    // Called after the window and again by the clean-up: the profiles are taken the first time only.
    let profiled = !profileDir;
    const stopNodes = async () => {
      const first = !profiled;
      profiled = true;
      if (first) await heapSnapshots(nodes, profileDir);
      const exits = await Promise.all(nodes.map((node) => node.stop()));
      if (first) printProfiles(profileDir, nodes, n);
      return exits;
    };
    local.push(stopNodes);
    const redisClients = redis.map((s) => new Redis(s.port, '127.0.0.1', { enableReadyCheck: false, maxRetriesPerRequest: 1 }));
    local.push(() => redisClients.forEach((c) => c.disconnect()));
    const store = storeCounter(admin, db.users, perUserStats);
    const started = Date.now();
    await Promise.all(nodes.map((node) => node.waitStarted(180_000)));
    const startupMs = Date.now() - started;
    const load = { start: loadNow() };
    const w = measuredWindow(opts);
    note(`project, ${n} jobs: all ${nodes.length} nodes started after ${startupMs} ms; window ${new Date(w.from).toISOString()} + ${opts.seconds}s`);
    const sources = {
      cpuGroups: { nodes: nodes.map((node) => node.pid), redis: redis.map((s) => s.proc.pid), store: mariadbPids },
      redisClients, store,
    };
    const first = await measureWindow(w, sources, load, opts, opts.thenJobs ? null : stopNodes);
    let then = null;
    if (opts.thenJobs) {
      // The load drops: the job files beyond M are removed and every node reloads its folder.
      const keep = names.slice(0, Math.min(opts.thenJobs, n));
      for (const name of names.slice(keep.length)) rmSync(join(jobsDir, `${name}.mjs`));
      for (const node of nodes) process.kill(node.pid, 'SIGHUP');
      const load2 = { start: loadNow() };
      const w2 = measuredWindow(opts);
      note(`project: ${keep.length} of ${n} jobs kept, nodes reloading; recovery window ${new Date(w2.from).toISOString()} + ${opts.seconds}s`);
      then = { names: keep, w: w2, load: load2, ...(await measureWindow(w2, sources, load2, opts, stopNodes)) };
    }

    const lines = nodes.flatMap((node) => readLines(join(outDir, `${node.nodeId}.runs.jsonl`)));
    const logs = {};
    for (const node of nodes) {
      const p = logProblems(node.logFile);
      if (p.size) logs[node.nodeId] = Object.fromEntries([...p].sort((a, b) => b[1] - a[1]).slice(0, 5));
    }
    const unreachable = nodes.reduce((sum, node) => sum + countLines(node.logFile, /cannot be reached/), 0);
    const exits = (then ?? first).exits;
    const windowResult = async (jobs, wNames, win, s1, s2, wLoad) => {
      const counted = analyseLines(lines, { names: wNames, instants: win.instants, nodeIds: nodes.map((node) => node.nodeId) });
      const periods = counted.periods;
      const [rows] = await admin.query(
        `SELECT status, reason, \`trigger\`, COUNT(*) AS n FROM \`${db.db}\`.scheduler_runs
          WHERE scheduled_at >= ? AND scheduled_at <= ? AND job IN (?) GROUP BY status, reason, \`trigger\` ORDER BY n DESC`,
        [win.instants[0], win.instants[win.instants.length - 1], wNames],
      );
      const storeRows = rows.map((r) => ({ status: r.status, reason: r.reason, trigger: r.trigger, count: Number(r.n) }));
      const st = store.delta(s1.store, s2.store);
      const cpu = cpuPerPeriod(s1, s2, periods);
      return {
        side: 'project', jobs, nodes: opts.nodes, redisServers: opts.redis, startupMs, load: wLoad,
        window: { from: new Date(win.from).toISOString(), seconds: opts.seconds, measuredMs: s2.at - s1.at },
        ...counted,
        redis: redisPerPeriod(s1, s2, periods),
        store: { kind: store.kind, statements: st.total, perPeriod: st.total / periods, perNode: st.perNode },
        cpu, cpuPerPeriodMs: (cpu.nodes.ms + cpu.redis.ms + cpu.store.ms) / periods,
        storeRows, logProblems: logs, unreachableLines: unreachable,
        exits: exits.map((e, i) => ({ node: nodes[i].nodeId, code: e.code, signal: e.signal, ...(e.code !== 0 ? { tail: tail(nodes[i].logFile, 2) } : {}) })),
      };
    };
    const result = { ...(await windowResult(n, names, w, first.s1, first.s2, load)), coldStart: coldStart(lines, n, w.from) };
    if (then) result.then = { ...(await windowResult(then.names.length, then.names, then.w, then.s1, then.s2, then.load)), side: 'project, then' };
    return result;
  } finally {
    await local.run();
  }
}

// -------------------------------------------------------------------------------- BullMQ side

/**
 * bullmq@version and ioredis (its optional peer; the project's own version) installed with npm into
 * a folder under the temp dir, reused by later runs with the same versions. Returns the folder and
 * the exact versions installed.
 */
function installBullmq(spec) {
  const ioredisVersion = JSON.parse(readFileSync(join(PROJECT_ROOT, 'node_modules', 'ioredis', 'package.json'), 'utf8')).version;
  const version = /^\d+\.\d+\.\d+$/.test(spec) ? spec : execFileSync('npm', ['view', `bullmq@${spec}`, 'version'], { encoding: 'utf8' }).trim().split('\n').pop().replace(/.*'(.+)'.*/, '$1');
  const dir = join(tmpdir(), `bench-bullmq-${version}-ioredis-${ioredisVersion}`);
  const installed = (d) => {
    try {
      return JSON.parse(readFileSync(join(d, 'node_modules', 'bullmq', 'package.json'), 'utf8')).version === version
        && existsSync(join(d, 'node_modules', 'ioredis', 'package.json'));
    } catch {
      return false;
    }
  };
  if (!installed(dir)) {
    note(`installing bullmq@${version} and ioredis@${ioredisVersion} into ${dir}`);
    // Into a fresh folder first, renamed when complete: a cut install is never taken for a cached one.
    const staging = mkdtempSync(join(tmpdir(), 'bench-bullmq-install-'));
    writeFileSync(join(staging, 'package.json'), '{ "private": true }\n');
    execFileSync('npm', ['install', '--prefix', staging, '--no-audit', '--no-fund', '--save-exact', `bullmq@${version}`, `ioredis@${ioredisVersion}`], { stdio: ['ignore', 'ignore', 'inherit'] });
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
  }
  return { dir, version, ioredisVersion };
}

function startBullmqWorker({ bullmq, port, queue, outFile, workerId, concurrency }) {
  const proc = spawn(process.execPath, [join(PROJECT_ROOT, 'bench', 'throughput-bullmq-worker.mjs')], {
    env: {
      ...process.env, BENCH_BULLMQ_DIR: bullmq.dir, BENCH_REDIS_PORT: String(port), BENCH_QUEUE: queue, BENCH_RUNS_OUT: outFile,
      BENCH_WORKER_ID: workerId, BENCH_CONCURRENCY: String(concurrency),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr = (stderr + d).slice(-2000); });
  const ready = new Promise((resolve, reject) => {
    let stdout = '';
    proc.stdout.on('data', (d) => {
      stdout += d;
      if (stdout.includes('ready\n')) resolve();
    });
    proc.once('exit', (code) => reject(new Error(`BullMQ worker ${workerId} exited with ${code}: ${stderr.trim()}`)));
  });
  return {
    workerId, proc, ready, stderr: () => stderr,
    async stop(killAfterMs = 20_000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return { code: proc.exitCode, signal: proc.signalCode };
      const done = exited(proc);
      proc.kill('SIGTERM'); // this pid only
      const t = setTimeout(() => proc.kill('SIGKILL'), killAfterMs);
      await done;
      clearTimeout(t);
      return { code: proc.exitCode, signal: proc.signalCode };
    },
  };
}

/** One round of BullMQ: N job schedulers on one Redis, `--bullmq-workers` worker processes. */
async function runBullmqRound(env, n) {
  const { opts, bullmq, mariadbPids } = env;
  const local = env.cleanups.scope();
  const names = jobNames(n);
  const dir = mkdtempSync(join(tmpdir(), 'bench-throughput-bullmq-'));
  if (!opts.keep) local.push(() => rmSync(dir, { recursive: true, force: true }));
  try {
    const [redis] = await startRedisServers(1);
    local.push(() => redis.cleanup());
    const queueName = `tput-${randomTag()}`;
    note(`bullmq ${bullmq.version}, ${n} schedulers: Redis ${redis.port}, files in ${dir}`);
    const { Queue } = createRequire(join(bullmq.dir, 'package.json'))('bullmq');
    const queue = new Queue(queueName, { connection: { host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: null } });
    for (let i = 0; i < names.length; i += 100) {
      await Promise.all(names.slice(i, i + 100).map((name) => queue.upsertJobScheduler(name, { pattern: '* * * * * *' }, {
        name, data: {}, opts: { removeOnComplete: true, removeOnFail: true },
      })));
    }
    await queue.close();

    const workers = Array.from({ length: opts.bullmqWorkers }, (_, i) => startBullmqWorker({
      bullmq, port: redis.port, queue: queueName, outFile: join(dir, `worker-${i + 1}.runs.jsonl`), workerId: `worker-${i + 1}`,
      concurrency: opts.bullmqConcurrency,
    }));
    const stopWorkers = () => Promise.all(workers.map((w) => w.stop()));
    local.push(stopWorkers);
    const started = Date.now();
    await Promise.all(workers.map((w) => w.ready));
    const startupMs = Date.now() - started;
    const redisClient = new Redis(redis.port, '127.0.0.1', { enableReadyCheck: false, maxRetriesPerRequest: 1 });
    local.push(() => redisClient.disconnect());
    const load = { start: loadNow() };
    const w = measuredWindow(opts);
    note(`bullmq, ${n} schedulers: ${workers.length} workers ready after ${startupMs} ms; window ${new Date(w.from).toISOString()} + ${opts.seconds}s`);
    // mariadbd is measured here too: the project is idle now, so its rate is other users' load.
    const sources = { cpuGroups: { workers: workers.map((x) => x.proc.pid), redis: [redis.proc.pid], mariadbIdle: mariadbPids }, redisClients: [redisClient] };
    const { s1, s2, exits } = await measureWindow(w, sources, load, opts, stopWorkers);

    const lines = workers.flatMap((x) => readLines(join(dir, `${x.workerId}.runs.jsonl`)));
    const counted = analyseLines(lines, { names, instants: w.instants, nodeIds: workers.map((x) => x.workerId) });
    const periods = counted.periods;
    const cpu = cpuPerPeriod(s1, s2, periods);
    return {
      side: 'bullmq', bullmqVersion: bullmq.version, ioredisVersion: bullmq.ioredisVersion, jobs: n, workers: opts.bullmqWorkers,
      concurrency: opts.bullmqConcurrency, schedule: "upsertJobScheduler(name, { pattern: '* * * * * *' })", startupMs, load,
      window: { from: new Date(w.from).toISOString(), seconds: opts.seconds, measuredMs: s2.at - s1.at },
      ...counted,
      // The instant taken from job.opts.prevMillis; lines whose job id ends in another number:
      periodIdMismatches: lines.filter((l) => l.period !== l.idMillis).length,
      redis: redisPerPeriod(s1, s2, periods),
      cpu, cpuPerPeriodMs: (cpu.workers.ms + cpu.redis.ms) / periods,
      exits: exits.map((e, i) => ({ worker: workers[i].workerId, code: e.code, signal: e.signal, ...(e.code !== 0 ? { stderr: workers[i].stderr().slice(-300) } : {}) })),
    };
  } finally {
    await local.run();
  }
}

// ----------------------------------------------------------------------------------- a round

/** Both sides (those asked for) with the same job count, one after the other. */
async function runRound(env, n) {
  const round = { jobs: n };
  for (const side of env.opts.sides) {
    try {
      round[side] = side === 'project' ? await runProjectRound(env, n) : await runBullmqRound(env, n);
    } catch (err) {
      note(`${side}, ${n} jobs: ${err?.stack ?? err}`);
      round[side] = { side, jobs: n, error: String(err?.message ?? err) };
    }
  }
  if (round.project && !round.project.error) round.project.goals = projectGoals(round.project, round.bullmq);
  return round;
}

function projectGoals(p, b) {
  const goals = {
    noGaps: p.gaps === 0,
    noDuplicates: p.duplicates === 0,
    p99: p.latencyMs.p99 <= GOALS.p99Ms,
    redisPerPeriod: p.redis.perPeriod <= GOALS.redisPerPeriod,
    storePerPeriod: p.store.perPeriod <= GOALS.storePerPeriod,
    fairness: p.fairnessMaxDeviation <= GOALS.fairness,
    // Overload degrades gracefully: pool waits never read as an unreachable store.
    noUnreachable: p.unreachableLines === 0,
  };
  // ...and once the load drops, every period runs again, once.
  if (p.then) goals.recovered = p.then.gaps === 0 && p.then.duplicates === 0;
  if (b && !b.error) goals.cpuNotAboveBullmq = p.cpuPerPeriodMs <= b.cpuPerPeriodMs;
  return goals;
}

// ---------------------------------------------------------------------------------- report

const f0 = (v) => fmt(v, 0);
const f2 = (v) => fmt(v, 2);

function sideRow(r) {
  if (!r) return null;
  if (r.error) return [r.side, r.jobs, 'error', '', '', '', '', '', '', '', '', '', '', r.error.slice(0, 60)];
  const cpuParts = r.side.startsWith('project')
    ? `${f2(r.cpu.nodes.perPeriod)}+${f2(r.cpu.redis.perPeriod)}+${f2(r.cpu.store.perPeriod)}`
    : `${f2(r.cpu.workers.perPeriod)}+${f2(r.cpu.redis.perPeriod)}`;
  return [
    r.side, r.jobs, r.periods, r.started, r.gaps, r.duplicates, f0(r.latencyMs.p50), f0(r.latencyMs.p99), f0(r.latencyMs.max),
    f2(r.redis.perPeriod), r.store ? f2(r.store.perPeriod) : '-', f2(r.cpuPerPeriodMs), cpuParts,
    `${fmt(r.fairnessMaxDeviation * 100, 0)} %`, `${r.load.start[0]} -> ${r.load.end[0]}`,
  ];
}

const HEADER = ['side', 'jobs', 'periods', 'started', 'gaps', 'dups', 'p50 ms', 'p99 ms', 'max ms', 'Redis cmd/period',
  'store stmt/period', 'CPU ms/period', '= nodes+Redis(+store)', 'max share off mean', 'load 1m'];

function reportRound(round) {
  out('');
  out(`=== ${round.jobs} every-second jobs`);
  out(table([HEADER, ...[round.project, round.project?.then, round.bullmq].map(sideRow).filter(Boolean)]));
  for (const side of ['project', 'bullmq']) {
    const r = round[side];
    if (!r || r.error) continue;
    out(`${side}: top Redis commands per period: ${r.redis.top.map((t) => `${t.cmd} ${fmt(t.perPeriod, 1)}`).join(', ')}`);
    out(`${side}: periods per ${side === 'project' ? 'node' : 'worker'} ${Object.entries(r.perNode).map(([k, v]) => `${k} ${v}`).join(', ')}; started > 1 s late ${r.startedOver1s}; start-up ${r.startupMs} ms`);
    if (side === 'project' && r.coldStart) {
      const c = r.coldStart;
      out(`project: cold start: ${c.settledAfterS === null ? 'not settled before the window (its overload runs into it)' : `settled ${c.settledAfterS} s after its first period`}; before the window ${c.started} of ${c.periods} periods started (${c.notStarted} with no body), ${c.late} more than 1 s late (${c.lateCatchUp} of them catch-ups)`);
    }
    if (side === 'project') {
      out(`project: store statements from ${r.store.kind}${r.store.perNode ? ` (per node ${r.store.perNode.join(' / ')})` : ''}`);
      out(`project: mariadbd (shared server) ${fmt(r.cpu.store.perSecond, 1)} ms CPU/s in the window${round.bullmq?.cpu ? `, ${fmt(round.bullmq.cpu.mariadbIdle.perSecond, 1)} ms/s in BullMQ's window (other users' load)` : ''}`);
      out(`project: store rows of the window: ${r.storeRows.map((x) => `${x.status}${x.reason ? `/${x.reason}` : ''} (${x.trigger}) ${x.count}`).join(', ') || 'none'}`);
      if (r.then) {
        const t = r.then;
        out(`project, then ${t.jobs} jobs: ${t.gaps} gaps, ${t.duplicates} dups, p50/p99 ${f0(t.latencyMs.p50)}/${f0(t.latencyMs.p99)} ms; store rows: ${t.storeRows.map((x) => `${x.status}${x.reason ? `/${x.reason}` : ''} (${x.trigger}) ${x.count}`).join(', ') || 'none'}`);
      }
      out(`project: "cannot be reached" lines in the nodes' logs: ${r.unreachableLines}`);
      for (const [node, msgs] of Object.entries(r.logProblems)) out(`project: ${node} logged ${Object.entries(msgs).map(([m, c]) => `${c} x ${m}`).join('; ')}`);
      const bad = r.exits.filter((e) => e.code !== 0);
      if (bad.length) out(`project: exits ${bad.map((e) => `${e.node} ${e.code ?? e.signal} ${e.tail ?? ''}`).join('; ')}`);
      const failed = Object.entries(r.goals).filter(([, ok]) => !ok).map(([g]) => g);
      out(`project: issue 10 goals ${failed.length ? `NOT met: ${failed.join(', ')}` : 'met'}`);
    } else {
      if (r.periodIdMismatches) out(`bullmq: ${r.periodIdMismatches} line(s) whose prevMillis differs from the job id's instant`);
      const bad = r.exits.filter((e) => e.code !== 0);
      if (bad.length) out(`bullmq: exits ${bad.map((e) => `${e.worker} ${e.code ?? e.signal} ${e.stderr ?? ''}`).join('; ')}`);
    }
    if (r.gapSample.length) out(`${side}: first gaps ${r.gapSample.join(', ')}`);
  }
}

// ---------------------------------------------------------------------------------- main

async function main() {
  const opts = parseOptions(process.argv.slice(2));
  const cleanups = cleanupStack(note);
  const source = sourceState();
  const env = { opts, cleanups, mariadbPids: pidsByName('mariadbd', 'mysqld') };
  const rounds = [];
  try {
    if (opts.sides.includes('bullmq')) env.bullmq = installBullmq(opts.bullmqVersion);
    if (opts.sides.includes('project')) {
      if (opts.build && !opts.packageDir) note('compiling src/ into a private build');
      env.pkg = resolvePackage({ build: opts.build, packageDir: opts.packageDir });
      cleanups.push(env.pkg.cleanup);
      env.admin = await adminConnection();
      cleanups.push(() => env.admin.end());
      const userstat = await enableUserstat(env.admin);
      cleanups.push(userstat.restore);
      env.perUserStats = userstat.before !== undefined;
      if (!env.perUserStats) note('no userstat on this server: store statements from the server-wide Questions counter (polluted by other users)');
    }
    if (env.mariadbPids.length === 0) note('no mariadbd process found: the store\'s CPU is not measured');
    note(`machine: ${cpus().length} CPUs, load ${loadNow().join(' ')}`);
    for (const n of opts.jobs) {
      const round = await runRound(env, n);
      rounds.push(round);
      reportRound(round);
    }
  } finally {
    await cleanups.run();
  }

  const summary = {
    bench: 'throughput',
    command: `node bench/throughput.mjs ${process.argv.slice(2).join(' ')}`.trim(),
    at: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    source: { ...source, build: env.pkg?.kind },
    bullmq: env.bullmq ? { version: env.bullmq.version, ioredis: env.bullmq.ioredisVersion, dir: env.bullmq.dir } : undefined,
    options: { ...opts },
    goals: GOALS,
    rounds,
  };
  out('');
  out('=== summary');
  out(table([HEADER, ...rounds.flatMap((r) => [r.project, r.project?.then, r.bullmq].map(sideRow).filter(Boolean))]));
  out(`(${summary.source.head ?? '?'}${source.srcChanges.length ? ' + uncommitted src/ changes' : ''}; bullmq ${env.bullmq?.version ?? '-'}; CPU per period: nodes or workers + their Redis (+ mariadbd, a shared server, for the project))`);
  if (opts.jsonOut) writeFileSync(opts.jsonOut, `${JSON.stringify(summary, (_, v) => (typeof v === 'number' && !Number.isInteger(v) ? Number(v.toFixed(3)) : v), 2)}\n`);
  const ok = rounds.every((r) => !r.project || (!r.project.error && Object.values(r.project.goals).every(Boolean)));
  process.exitCode = ok ? 0 : 1;
}

main().catch((err) => {
  process.stderr.write(`throughput: ${err?.stack ?? err}\n`);
  process.exitCode = 2;
});
