#!/usr/bin/env node
/**
 * Fire-latency benchmark for cluster-cron, with real daemons on loopback.
 *
 *   node bench/fire-latency.mjs [--seconds 40] [--scenarios single,multi,trace] [--nodes 4] [--redis 3]
 *                               [--jobs 5] [--multi-seconds N] [--trace-seconds 30] [--trace-jobs 1]
 *                               [--warmup 3] [--log-level info] [--target 20] [--no-build | --package DIR]
 *                               [--keep] [--json-out FILE] [--node-args="--cpu-prof ..."]  (a value that starts with - takes the = form)
 *   (each option also as env: BENCH_SECONDS, BENCH_SCENARIOS, BENCH_NODES, BENCH_REDIS, BENCH_JOBS,
 *    BENCH_MULTI_SECONDS, BENCH_TRACE_SECONDS, BENCH_TRACE_JOBS, BENCH_WARMUP, BENCH_LOG_LEVEL,
 *    BENCH_TARGET_P99, BENCH_NO_BUILD=1, BENCH_PACKAGE, BENCH_JSON_OUT, BENCH_NODE_ARGS,
 *    BENCH_MYSQL_ADMIN=mysql://root@127.0.0.1:3306/)
 *
 * By default src/ is compiled into a private copy of the package under the temp dir, so that the
 * daemons are not disturbed by anyone rebuilding dist/ meanwhile; --no-build runs dist/ as it is,
 * --package DIR a copy made earlier (bench/lib.mjs buildSnapshot(), for before/after comparisons).
 * Exit status: 0 when every scenario met the p99 target with no problem found, 1 otherwise, 2 on error.
 *
 * Scenarios (each on a fresh database with one MySQL user per node, the same 3 Redis masters, and 4
 * `bin/scheduler run` processes):
 *   single  one every-second job (`* * * * * *`)
 *   multi   N every-second jobs firing at the same instant
 *   trace   one every-second job, daemons started with bench/trace-preload.mjs: where the time goes
 *           (timer wake-up, Redlock, overlap check, insert + read-back, logging) and which period
 *           every SQL statement belongs to
 *
 * Goal 1: fire latency = Date.now() - ctx.scheduledAt in the winning node's job body; target p99 <= 20 ms.
 *         Every period in the measured window must run exactly once (no duplicate, none missing).
 * Goal 2: a node that loses a period at the lock sends no query to the store for it. MariaDB per-user
 *         statistics (userstat, restored afterwards) count each node's statements between two snapshots
 *         taken mid-second; they must be explained by the periods the node won.
 *
 * The report goes to stdout; its last line is one JSON document with the figures.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  PROJECT_ROOT, adminConnection, benchOptions, createBenchDatabase, enableUserstat, fmt, randomTag, readJsonLines, resolvePackage,
  startSchedulerNodes, cpuTimeMs, sleep, sourceState, startRedisServers, statDelta, summarise, table, tail, userStatistics } from './lib.mjs';

// ------------------------------------------------------------------------------------- options

function parseOptions(argv) {
  const flags = benchOptions(argv, {
    strings: ['seconds', 'scenarios', 'nodes', 'redis', 'jobs', 'multi-seconds', 'trace-seconds', 'trace-jobs', 'warmup', 'log-level', 'target', 'package', 'json-out', 'node-args'],
    booleans: ['no-build', 'keep'],
    usage: `usage: node bench/fire-latency.mjs [--seconds N] [--scenarios single,multi,trace] [--nodes 4] [--redis 3] [--jobs 5]\n` +
      `       [--multi-seconds N] [--trace-seconds N] [--trace-jobs N] [--warmup 3] [--log-level info] [--target 20]\n` +
      `       [--no-build | --package DIR] [--keep] [--json-out FILE] [--node-args="..."]\n`,
  });
  const env = process.env;
  const num = (flag, envName, dflt) => {
    const raw = flags[flag] ?? env[envName];
    if (raw === undefined) return dflt;
    const n = Number(raw);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${flag}: expected a positive number, got ${raw}`);
    return n;
  };
  const seconds = num('seconds', 'BENCH_SECONDS', 40);
  const scenarios = String(flags.scenarios ?? env.BENCH_SCENARIOS ?? 'single,multi,trace').split(',').map((s) => s.trim()).filter(Boolean);
  for (const s of scenarios) if (!['single', 'multi', 'trace'].includes(s)) throw new Error(`--scenarios: unknown scenario ${s}`);
  return {
    seconds,
    multiSeconds: num('multi-seconds', 'BENCH_MULTI_SECONDS', seconds),
    traceSeconds: num('trace-seconds', 'BENCH_TRACE_SECONDS', Math.min(seconds, 30)),
    nodes: num('nodes', 'BENCH_NODES', 4),
    redis: num('redis', 'BENCH_REDIS', 3),
    jobs: num('jobs', 'BENCH_JOBS', 5),
    traceJobs: num('trace-jobs', 'BENCH_TRACE_JOBS', 1),
    // An existing private build to run instead of compiling src/ (a directory made by buildSnapshot()).
    packageDir: flags.package ?? env.BENCH_PACKAGE,
    warmup: num('warmup', 'BENCH_WARMUP', 3),
    logLevel: flags['log-level'] ?? env.BENCH_LOG_LEVEL ?? 'info',
    scenarios,
    build: !flags['no-build'] && env.BENCH_NO_BUILD !== '1',
    // Extra Node flags for the daemons, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" (diagnostics only).
    nodeArgs: String(flags['node-args'] ?? env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean),
    keep: Boolean(flags.keep),
    jsonOut: flags['json-out'] ?? env.BENCH_JSON_OUT,
    target: num('target', 'BENCH_TARGET_P99', 20),
  };
}

const out = (s = '') => process.stdout.write(`${s}\n`);
const note = (s) => process.stderr.write(`[bench] ${s}\n`);

// ------------------------------------------------------------------------------------- the job

function jobSource(name) {
  return `// generated by bench/fire-latency.mjs
import { appendFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

export default {
  name: ${JSON.stringify(name)},
  schedule: '* * * * * *',
  catchUp: '10s',
  async run(ctx) {
    const lagMs = Date.now() - ctx.scheduledAt.getTime();
    const lagHiMs = performance.timeOrigin + performance.now() - ctx.scheduledAt.getTime();
    appendFileSync(process.env.BENCH_OUT, JSON.stringify({
      periodKey: ctx.periodKey, job: ctx.job, nodeId: ctx.nodeId, lagMs, lagHiMs,
      scheduledAt: ctx.scheduledAt.getTime(), trigger: ctx.trigger, attempt: ctx.attempt, runId: ctx.runId,
    }) + '\\n');
  },
};
`;
}

// ---------------------------------------------------------------------------------- scenario

/**
 * Statements a node sends for a period it loses at the row: the INSERT that hits the unique key, and
 * the overlap check (overlap 'skip', the default) that goes out beside it.
 */
const LOST_ROW_STATEMENTS = 2;

async function sleepUntil(t) {
  const d = t - Date.now();
  if (d > 0) await sleep(d);
}

async function runScenario(env, sc) {
  const { admin, redisUrls, redisPids, opts, cleanups } = env;
  const tag = randomTag();
  const dir = mkdtempSync(join(tmpdir(), `bench-fire-${sc.name}-`));
  const jobsDir = join(dir, 'jobs');
  const outDir = join(dir, 'out');
  mkdirSync(jobsDir);
  mkdirSync(outDir);
  const removeDir = () => { if (!opts.keep) rmSync(dir, { recursive: true, force: true }); };
  cleanups.push(removeDir);
  const db = await createBenchDatabase(admin, { tag, nodes: opts.nodes });
  cleanups.push(() => db.drop());
  for (const name of sc.jobs) writeFileSync(join(jobsDir, `${name}.mjs`), jobSource(name));

  note(`${sc.name}: database ${db.db}, ${opts.nodes} nodes, ${sc.jobs.length} job(s), ${sc.seconds}s window${sc.trace ? ', traced' : ''}; files in ${dir}`);
  const s0 = await userStatistics(admin, db.users);
  const traceUrl = pathToFileURL(join(PROJECT_ROOT, 'bench', 'trace-preload.mjs')).href;
  const nodes = startSchedulerNodes({
    db, redisUrls, jobsDir, cwd: dir, outDir, prefix: `cron-bench-${tag}:`, logLevel: sc.logLevel, bin: opts.bin,
    nodeArgs: [...opts.nodeArgs, ...(sc.trace ? ['--import', traceUrl] : [])],
    env: (nodeId) => ({
      BENCH_OUT: join(outDir, `${nodeId}.runs.jsonl`),
      BENCH_TRACE_OUT: join(outDir, `${nodeId}.trace.jsonl`),
      BENCH_DIST: opts.dist,
    }),
  });
  const stopNodes = async () => Promise.all(nodes.map((n) => n.stop()));
  cleanups.push(stopNodes);
  let exits;
  let s1;
  let s2;
  let s3;
  try {
    await Promise.all(nodes.map((n) => n.waitStarted()));
    sc.loadBefore = loadavg()[0];
    const allStarted = Date.now();
    // Snapshots mid-second, when no claim of an every-second job is in flight.
    const t1 = Math.ceil((allStarted + opts.warmup * 1000) / 1000) * 1000 + 500;
    const t2 = t1 + sc.seconds * 1000;
    await sleepUntil(t1);
    s1 = { local: Date.now(), stats: await userStatistics(admin, db.users) };
    const cpu = () => ({ nodes: nodes.map((n) => cpuTimeMs(n.pid)), redis: redisPids.map((p) => cpuTimeMs(p)) });
    sc.cpu1 = cpu();
    sc.cpuNow = cpu;
    note(`${sc.name}: measuring until ${new Date(t2).toISOString()}`);
    await sleepUntil(t2);
    s2 = { local: Date.now(), stats: await userStatistics(admin, db.users) };
    sc.cpu2 = sc.cpuNow();
    sc.loadAfter = loadavg()[0];
  } finally {
    exits = await stopNodes();
  }
  s3 = { local: Date.now(), stats: await userStatistics(admin, db.users) };

  const [rows] = await admin.query(
    `SELECT id, job, scheduled_at AS scheduledAt, period_key AS periodKey, attempt, \`trigger\`, status, reason, node_id AS nodeId,
            started_at AS startedAt, finished_at AS finishedAt
       FROM \`${db.db}\`.scheduler_runs ORDER BY scheduled_at, job, attempt`,
  );
  const runs = [];
  const traces = new Map();
  const logs = new Map();
  for (const n of nodes) {
    runs.push(...readJsonLines(join(outDir, `${n.nodeId}.runs.jsonl`)));
    if (sc.trace) traces.set(n.nodeId, readJsonLines(join(outDir, `${n.nodeId}.trace.jsonl`)));
    logs.set(n.nodeId, n.logLines());
  }
  const result = analyse({ sc, opts, db, nodes, exits, s0, s1, s2, s3, rows: rows.map(normRow), runs, traces, logs });
  // cleanup of this scenario now (the global list still holds them, harmlessly idempotent)
  await db.drop();
  removeDir();
  return result;
}

function normRow(r) {
  return {
    ...r, id: String(r.id), scheduledAt: Number(r.scheduledAt), startedAt: Number(r.startedAt),
    finishedAt: r.finishedAt === null ? null : Number(r.finishedAt), attempt: Number(r.attempt),
  };
}

// ---------------------------------------------------------------------------------- analysis

function analyse({ sc, opts, db, nodes, exits, s0, s1, s2, s3, rows, runs, traces, logs }) {
  const nodeIds = nodes.map((n) => n.nodeId);
  const userOf = new Map(nodeIds.map((id, i) => [id, db.users[i]]));
  const inWindow = (t) => t > s1.local && t < s2.local;
  const problems = [];

  // --- exactly once ---------------------------------------------------------------------------
  const byKey = new Map();
  for (const r of runs) byKey.set(r.periodKey, [...(byKey.get(r.periodKey) ?? []), r]);
  const duplicateKeys = [...byKey].filter(([, v]) => v.length > 1).map(([k, v]) => ({ periodKey: k, nodes: v.map((r) => r.nodeId) }));
  const firstWindowPeriod = Math.floor(s1.local / 1000) * 1000 + 1000;
  const lastWindowPeriod = Math.floor(s2.local / 1000) * 1000;
  const expectedPerJob = Math.max(0, (lastWindowPeriod - firstWindowPeriod) / 1000 + 1);
  const perJob = {};
  const missing = [];
  const missingOverall = [];
  for (const job of sc.jobs) {
    const instants = [...new Set(runs.filter((r) => r.job === job).map((r) => r.scheduledAt))].sort((a, b) => a - b);
    for (let t = firstWindowPeriod; t <= lastWindowPeriod; t += 1000) {
      if (!byKey.has(`${job}@${new Date(t).toISOString()}`)) missing.push(`${job}@${new Date(t).toISOString()}`);
    }
    // Overall: from the first to the last period any node ran, every second has a row (run or recorded skipped).
    const rowInstants = new Set(rows.filter((r) => r.job === job).map((r) => r.scheduledAt));
    if (instants.length > 0) {
      for (let t = instants[0]; t <= instants[instants.length - 1]; t += 1000) {
        if (!rowInstants.has(t)) missingOverall.push(`${job}@${new Date(t).toISOString()}`);
      }
    }
    perJob[job] = { ranOverall: instants.length };
  }
  // The rows agree with the bodies: one run row per body start, same node, succeeded.
  const rowById = new Map(rows.map((r) => [r.id, r]));
  let rowMismatch = 0;
  for (const r of runs) {
    const row = rowById.get(String(r.runId));
    if (!row || row.nodeId !== r.nodeId || row.status !== 'succeeded' || row.periodKey !== r.periodKey) rowMismatch += 1;
  }
  const runRows = rows.filter((r) => r.status !== 'skipped');
  const rowsNotSucceeded = runRows.filter((r) => r.status !== 'succeeded').map((r) => `${r.periodKey} ${r.status} on ${r.nodeId}`);
  const rowsWithoutBody = runRows.filter((r) => !runs.some((x) => String(x.runId) === r.id)).map((r) => r.periodKey);
  const skippedRows = rows.filter((r) => r.status === 'skipped');
  if (duplicateKeys.length) problems.push(`${duplicateKeys.length} period(s) ran more than once`);
  if (missing.length) problems.push(`${missing.length} period(s) missing in the window`);
  if (missingOverall.length) problems.push(`${missingOverall.length} period(s) without a row between the first and last run`);
  if (rowMismatch) problems.push(`${rowMismatch} body start(s) without a matching succeeded row`);
  if (rowsNotSucceeded.length) problems.push(`${rowsNotSucceeded.length} run row(s) not succeeded`);
  for (const [i, e] of exits.entries()) if (e.code !== 0) problems.push(`${nodeIds[i]} exited with ${e.code ?? e.signal}: ${tail(nodes[i].logFile, 2)}`);
  for (const [id, lines] of logs) {
    const bad = lines.filter((l) => l.level === 'error' || l.level === 'fatal' || (l.level === 'warn' && !/stopping|shutdown/.test(l.msg)));
    if (bad.length) problems.push(`${id} logged ${bad.length} warning/error line(s), first: ${bad[0].msg}`);
  }

  // --- latency ----------------------------------------------------------------------------------
  const windowRuns = runs.filter((r) => inWindow(r.scheduledAt) && r.trigger === 'schedule');
  const latency = summarise(windowRuns.map((r) => r.lagMs));
  const latencyHi = summarise(windowRuns.map((r) => r.lagHiMs));
  const overall = summarise(runs.filter((r) => r.trigger === 'schedule').map((r) => r.lagMs));
  const winners = {};
  for (const id of nodeIds) {
    const mine = windowRuns.filter((r) => r.nodeId === id);
    winners[id] = { won: mine.length, p50: summarise(mine.map((r) => r.lagMs)).p50 };
  }
  const nodesWon = Object.values(winners).filter((w) => w.won > 0).length;
  let spread;
  if (sc.jobs.length > 1) {
    const byInstant = new Map();
    for (const r of windowRuns) byInstant.set(r.scheduledAt, [...(byInstant.get(r.scheduledAt) ?? []), r]);
    spread = summarise([...byInstant.values()].filter((v) => v.length > 1).map((v) => Math.max(...v.map((r) => r.lagHiMs)) - Math.min(...v.map((r) => r.lagHiMs))));
    for (const job of sc.jobs) perJob[job].latency = summarise(windowRuns.filter((r) => r.job === job).map((r) => r.lagMs));
  }

  // --- statements per node (goal 2) ------------------------------------------------------------
  // Window statements of node i = a * won_i + r * lostRow_i + sweeps_i + b * lostLock_i, where
  //   lostRow_i  = periods it lost at the row (it won the lock, e.g. after the winner had released it,
  //                then its INSERT hit the unique key): r = LOST_ROW_STATEMENTS (the failed INSERT;
  //                checked against the trace); MariaDB counts a failed INSERT as an UPDATE_COMMAND and
  //                as one ROLLBACK, which gives lostRow_i exactly;
  //   sweeps_i   = the sweep, independent of periods lost or won: every SWEEP_EVERY_MS its statements
  //                (before the owed-work store: the takeover SELECT alone; since: the stale-run and
  //                due-pending SELECTs and the reconciler's one range read for all jobs), plus the
  //                jobs-table flush (2 statements every FLUSH_EVERY_MS); +-1 sweep for the timer phase;
  //   b          = statements per period lost at the lock: the claim is that b = 0.
  const periodsInWindow = expectedPerJob * sc.jobs.length;
  const windowMs = s2.local - s1.local;
  const sweepsExpected = (opts.sweepEveryMs ? (windowMs / opts.sweepEveryMs) * opts.sweepStatements : 0)
    + (opts.flushEveryMs ? (windowMs / opts.flushEveryMs) * 2 : 0);
  // Since the rendezvous ranking (a node races only the periods it ranks first for, the second
  // steps in for those with no row), two more sources of no period: the step-in check, one a node
  // per instant it ranks second for some due job (every rank below the first while a node is unsure
  // of the racers: its first 20 s), and the liveness statements (heartbeat, nodes list, store clock:
  // 3 every 5 s). They land in `b` (statements per period lost at the lock); the trace names them.
  const backgroundAllowance = (windowMs / 1000) * Math.max(1, nodeIds.length - 1) + (windowMs / 5000) * 3;
  const accounting = nodeIds.map((id) => {
    const user = userOf.get(id);
    const startup = statDelta(s0.get(user), s1.stats.get(user));
    const window = statDelta(s1.stats.get(user), s2.stats.get(user));
    const shutdown = statDelta(s2.stats.get(user), s3.stats.get(user));
    const wonRows = rows.filter((r) => r.nodeId === id && r.status !== 'skipped');
    const won = wonRows.filter((r) => inWindow(r.scheduledAt)).length;
    const wonBefore = wonRows.filter((r) => r.scheduledAt < s1.local).length;
    const skippedWritten = skippedRows.filter((r) => r.nodeId === id).length;
    const lostRow = window.rollbacks;
    const lostLock = periodsInWindow - won - lostRow;
    const claimStatements = window.statements - sweepsExpected - LOST_ROW_STATEMENTS * lostRow;
    return { node: id, user, won, lostRow, lostLock, wonBefore, skippedWritten, startup, window, shutdown, claimStatements };
  });
  // Snapshots must not cut through a claim: no run row may start or finish within 100 ms of one.
  const near = (t, s) => t !== null && Math.abs(t - s) < 100;
  const cut = rows.filter((r) => [s1.local, s2.local].some((s) => near(r.startedAt, s) || near(r.finishedAt, s) || (r.startedAt < s && r.finishedAt !== null && r.finishedAt > s)));
  if (cut.length) problems.push(`${cut.length} run(s) overlapped a statistics snapshot: the split by window is approximate`);
  const fit = fit2(accounting.map((a) => [a.won, a.lostLock, a.claimStatements]));
  const perWon = fit ? Math.round(fit.a) : null;
  for (const a of accounting) {
    a.perWon = a.won ? a.claimStatements / a.won : null;
    a.attributableToLost = perWon === null ? null : a.claimStatements - perWon * a.won;
    a.startupFixed = perWon === null ? null : a.startup.statements - perWon * a.wonBefore;
  }
  const lostStatements = accounting.reduce((s, a) => s + (a.attributableToLost ?? 0), 0);
  const worst = Math.max(0, ...accounting.map((a) => Math.abs(a.attributableToLost ?? 0)));
  // The snapshots cut through a sweep (its statements) and a flush (2) at each window edge.
  if (fit && worst > opts.sweepStatements + (opts.flushEveryMs ? 2 : 0) + 2 + backgroundAllowance) problems.push(`up to ${fmt(worst, 1)} statement(s) per node in the window not explained by won periods, lost-row periods, the sweep, the step-in checks and the liveness statements`);

  // --- trace (where the time goes, and which period each statement belongs to) -------------------
  const trace = traces.size ? analyseTrace({ traces, runs, nodeIds, inWindow, accounting, s1, s2 }) : undefined;
  if (trace) for (const p of trace.problems) problems.push(p);

  return {
    scenario: sc.name, jobs: sc.jobs, nodes: nodeIds.length, windowSeconds: sc.seconds, logLevel: sc.logLevel, traced: Boolean(sc.trace),
    load1: { before: sc.loadBefore, after: sc.loadAfter, cpus: cpus().length },
    cpuMsPerSecond: sc.cpu1 && sc.cpu2 ? {
      nodes: sc.cpu2.nodes.map((v, i) => ((v - sc.cpu1.nodes[i]) * 1000) / (s2.local - s1.local)),
      redis: sc.cpu2.redis.map((v, i) => ((v - sc.cpu1.redis[i]) * 1000) / (s2.local - s1.local)),
    } : undefined,
    window: { from: new Date(s1.local).toISOString(), to: new Date(s2.local).toISOString(), periodsPerJob: expectedPerJob },
    latencyMs: latency, latencyHiResMs: latencyHi, latencyOverallMs: overall, winners, nodesWon,
    spreadSameInstantMs: spread, perJob,
    exactlyOnce: {
      duplicates: duplicateKeys.length, duplicateKeys: duplicateKeys.slice(0, 5), missingInWindow: missing.length, missingSample: missing.slice(0, 5),
      missingOverall: missingOverall.length, bodyRowMismatch: rowMismatch, rowsNotSucceeded: rowsNotSucceeded.slice(0, 5),
      rowsWithoutBody: rowsWithoutBody.length, skippedRows: skippedRows.length,
      ok: duplicateKeys.length === 0 && missing.length === 0 && missingOverall.length === 0 && rowMismatch === 0 && rowsNotSucceeded.length === 0,
    },
    statements: {
      fit, perWon, periodsInWindow, windowMs, sweepEveryMs: opts.sweepEveryMs, sweepStatements: opts.sweepStatements, flushEveryMs: opts.flushEveryMs, sweepsExpected, nodes: accounting,
      attributableToLostTotal: fit ? lostStatements : null, worstNode: worst, snapshotsClean: cut.length === 0,
    },
    trace,
    problems,
  };
}

/** Least squares through the origin of y = a * x1 + b * x2 (normal equations); null when degenerate. */
function fit2(points) {
  let s11 = 0; let s12 = 0; let s22 = 0; let s1y = 0; let s2y = 0;
  for (const [x1, x2, y] of points) {
    s11 += x1 * x1; s12 += x1 * x2; s22 += x2 * x2; s1y += x1 * y; s2y += x2 * y;
  }
  const det = s11 * s22 - s12 * s12;
  if (Math.abs(det) < 1e-9) return null;
  const a = (s1y * s22 - s2y * s12) / det;
  const b = (s2y * s11 - s1y * s12) / det;
  const maxResidual = Math.max(...points.map(([x1, x2, y]) => Math.abs(y - a * x1 - b * x2)));
  return { a, b, maxResidual };
}

function classifySql(sql) {
  const s = sql.toLowerCase();
  if (s.startsWith('insert')) return 'insert';
  if (s.startsWith('select') && s.includes('heartbeat_at + lease_ms <')) return 'sweep';
  if (s.startsWith('select') && s.includes('heartbeat_at + lease_ms >=')) return 'overlap';
  if (s.startsWith('select') && s.includes('where `id`')) return 'readback';
  if (s.startsWith('update') && s.includes('finished_at')) return 'finish';
  if (s.includes('scheduler_nodes') || s.includes('as now_ms')) return 'liveness';
  if (s.startsWith('update') && s.includes('reconciled_through')) return 'sweep';
  if (s.startsWith('update') && s.includes('heartbeat_at')) return 'heartbeat';
  // Work of no period: the second-ranked node's step-in check (one per instant it ranks second for
  // some due job), the sweep's due-pending read and the reconciler's range read, the nodes table
  // (heartbeat, list) and the store clock's sample, each every 5 s.
  if (s.startsWith('select distinct') && s.includes('scheduled_at') && s.includes(' in (')) return 'step-in';
  if (s.startsWith('select') && s.includes("'pending'")) return 'sweep';
  if (s.startsWith('select') && s.includes('count(distinct')) return 'sweep';
  return 'other';
}

function analyseTrace({ traces, runs, nodeIds, inWindow, accounting, s1, s2 }) {
  const problems = [];
  const bodyByNodeKey = new Map(runs.map((r) => [`${r.nodeId} ${r.periodKey}`, r]));
  const phases = {
    wake: [], dispatch: [], lock: [], overlap: [], overlapWire: [], insertRun: [], insertWire: [], readbackWire: [],
    afterClaim: [], logBeforeBody: [], total: [], unaccounted: [],
  };
  const loser = { wake: [], lock: [] };
  const wakeAll = [];
  const outcomes = {};
  const byPeriod = new Map(); // key -> { node: outcome }
  const votes = new Map(); // key -> { node: [1/0 per master] }
  const sqlByCause = {};
  const sqlKinds = {};
  const untaggedShapes = new Map();
  const inWindowT = (t) => t > s1.local && t < s2.local;
  for (const id of nodeIds) {
    const ev = traces.get(id) ?? [];
    outcomes[id] = {};
    sqlByCause[id] = { total: 0, won: 0, 'lost-row': 0, 'lost-lock': 0, otherPeriod: 0, sweep: 0, 'step-in': 0, liveness: 0, untaggedOther: 0, lostLockPeriods: 0, redisForLostLock: 0 };
    const ticks = ev.filter((e) => e.ev === 'tick').map((e) => e.t).sort((a, b) => a - b);
    const byKey = new Map();
    for (const e of ev) {
      if (!e.key) continue;
      if (!byKey.has(e.key)) byKey.set(e.key, []);
      byKey.get(e.key).push(e);
    }
    const outcomeOf = new Map();
    for (const [key, list] of byKey) {
      const claim = list.find((e) => e.ev === 'claim');
      outcomeOf.set(key, claim?.res ?? (claim?.err ? 'error' : 'none'));
    }
    // Every statement the node sent in the window, by cause.
    for (const e of ev) {
      if (e.ev !== 'sql') continue;
      if (!inWindowT(e.t0)) continue;
      const c = sqlByCause[id];
      c.total += 1;
      const kind = classifySql(e.sql);
      sqlKinds[kind] = (sqlKinds[kind] ?? 0) + 1;
      if (!e.key) {
        if (kind === 'sweep') c.sweep += 1;
        else if (kind === 'step-in' || kind === 'liveness') c[kind] = (c[kind] ?? 0) + 1;
        else {
          c.untaggedOther += 1;
          // Their shapes (literals cut), to name what sends them.
          const shape = String(e.sql).replace(/\s+/g, ' ').replace(/\b\d+\b/g, '?').slice(0, 110);
          untaggedShapes.set(shape, (untaggedShapes.get(shape) ?? 0) + 1);
        }
        continue;
      }
      const o = outcomeOf.get(e.key);
      if (o === 'won' || o === 'lost-row' || o === 'lost-lock') c[o] += 1;
      else c.otherPeriod += 1;
    }
    for (const [key, list] of byKey) {
      const instant = Date.parse(key.slice(key.lastIndexOf('@') + 1));
      const rp = list.find((e) => e.ev === 'runPeriod');
      if (!rp || rp.trigger !== 'schedule' || !inWindow(instant)) continue;
      const claim = list.find((e) => e.ev === 'claim');
      const lock = list.find((e) => e.ev === 'lock');
      const redis = list.filter((e) => e.ev === 'redis');
      const outcome = outcomeOf.get(key);
      outcomes[id][outcome] = (outcomes[id][outcome] ?? 0) + 1;
      if (!byPeriod.has(key)) byPeriod.set(key, {});
      byPeriod.get(key)[id] = outcome;
      if (!votes.has(key)) votes.set(key, {});
      // The first EVALSHA per master is the acquire (1 = granted, 0 = held by someone else).
      const firstPerPort = new Map();
      for (const r of redis.filter((x) => x.cmd === 'evalsha').sort((a, b) => a.t0 - b.t0)) if (!firstPerPort.has(r.port)) firstPerPort.set(r.port, r.res ?? (r.err ? 'err' : '?'));
      votes.get(key)[id] = [...firstPerPort.entries()].sort((a, b) => a[0] - b[0]).map(([, v]) => v);
      let tick = null;
      for (let lo = 0, hi = ticks.length - 1; lo <= hi;) {
        const mid = (lo + hi) >> 1;
        if (ticks[mid] <= rp.t) { tick = ticks[mid]; lo = mid + 1; } else hi = mid - 1;
      }
      const wake = tick === null ? NaN : tick - instant;
      wakeAll.push(wake);
      if (outcome === 'lost-lock') {
        sqlByCause[id].lostLockPeriods += 1;
        sqlByCause[id].redisForLostLock += redis.length;
        loser.wake.push(wake);
        if (lock) loser.lock.push(lock.t1 - lock.t0);
        continue;
      }
      if (outcome !== 'won') continue;
      const body = bodyByNodeKey.get(`${id} ${key}`);
      if (!body) { problems.push(`trace: ${id} won ${key} but no body start was recorded`); continue; }
      const sql = list.filter((e) => e.ev === 'sql');
      const bodyAt = instant + body.lagHiMs;
      const live = list.find((e) => e.ev === 'store.liveRuns');
      const ins = list.find((e) => e.ev === 'store.insertRun');
      const wire = (kind) => sql.filter((x) => classifySql(x.sql) === kind && x.t0 < bodyAt).reduce((a, x) => a + (x.t1 - x.t0), 0);
      const logs = list.filter((e) => e.ev === 'log' && e.t0 >= rp.t && e.t1 <= bodyAt);
      const lockMs = lock ? lock.t1 - lock.t0 : 0;
      const liveMs = live ? live.t1 - live.t0 : 0;
      const insMs = ins ? ins.t1 - ins.t0 : 0;
      phases.wake.push(wake);
      phases.dispatch.push(claim.t0 - tick);
      phases.lock.push(lockMs);
      phases.overlap.push(liveMs);
      phases.overlapWire.push(wire('overlap'));
      phases.insertRun.push(insMs);
      phases.insertWire.push(wire('insert'));
      phases.readbackWire.push(wire('readback'));
      phases.afterClaim.push(bodyAt - claim.t1);
      phases.logBeforeBody.push(logs.reduce((a, e) => a + (e.t1 - e.t0), 0));
      phases.total.push(bodyAt - instant);
      phases.unaccounted.push(bodyAt - instant - (wake + (claim.t0 - tick) + lockMs + liveMs + insMs + (bodyAt - claim.t1)));
    }
    const lr = outcomes[id]['lost-row'] ?? 0;
    if (lr > 0 && sqlByCause[id]['lost-row'] !== lr * LOST_ROW_STATEMENTS) problems.push(`trace: ${id} sent ${sqlByCause[id]['lost-row']} statement(s) for ${lr} period(s) lost at the row; the accounting assumes ${LOST_ROW_STATEMENTS} each`);
    if (sqlByCause[id]['lost-lock'] > 0) problems.push(`trace: ${id} sent ${sqlByCause[id]['lost-lock']} SQL statement(s) for periods it lost at the lock`);
    if (sqlByCause[id].untaggedOther > 0) problems.push(`trace: ${id} sent ${sqlByCause[id].untaggedOther} SQL statement(s) in the window outside any period that are not the sweep`);
    if (id === nodeIds.at(-1) && untaggedShapes.size > 0) {
      const top = [...untaggedShapes].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([q, n]) => `${n}x ${q}`);
      problems.push(`trace: statements outside any period, all nodes, by shape: ${top.join(' | ')}`);
    }
  }
  // Periods of the window that no node won, with each node's Redlock votes (1 granted, 0 held elsewhere).
  const unclaimed = [];
  for (const [key, per] of byPeriod) {
    if (Object.values(per).includes('won')) continue;
    unclaimed.push({ periodKey: key, outcomes: per, votes: votes.get(key) });
  }
  unclaimed.sort((a, b) => a.periodKey.localeCompare(b.periodKey));
  const splitVotes = unclaimed.filter((u) => Object.values(u.outcomes).every((o) => o === 'lost-lock')).length;
  if (unclaimed.length) problems.push(`trace: ${unclaimed.length} period(s) of the window claimed by no node (${splitVotes} with every node 'lost-lock': a Redlock split vote)`);
  // Cross-check: statements the trace saw in the window vs. MariaDB's per-user count.
  const crossCheck = accounting.map((a) => ({ node: a.node, traceSql: sqlByCause[a.node].total, userstat: a.window.statements }));
  for (const c of crossCheck) if (c.traceSql !== c.userstat) problems.push(`trace: ${c.node} trace saw ${c.traceSql} statements in the window, MariaDB counted ${c.userstat} (snapshot timing?)`);
  const summary = Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, summarise(v)]));
  return {
    winnerPhasesMs: summary, loserPhasesMs: { wake: summarise(loser.wake), lock: summarise(loser.lock) }, timerWakeAllNodesMs: summarise(wakeAll),
    outcomes, sqlByCause, sqlKinds, crossCheck, unclaimed, splitVotes, problems,
  };
}

// ---------------------------------------------------------------------------------- report

function report(r, opts) {
  out('');
  out(`=== scenario ${r.scenario}: ${r.nodes} nodes, ${r.jobs.length} every-second job(s) [${r.jobs.join(', ')}], log level ${r.logLevel}${r.traced ? ', TRACED (timings slightly inflated)' : ''}`);
  out(`window ${r.window.from} .. ${r.window.to} (${r.window.periodsPerJob} periods per job); 1-min load average ${fmt(r.load1.before, 2)} -> ${fmt(r.load1.after, 2)} on ${r.load1.cpus} CPUs`);
  const l = r.latencyMs;
  const pass = l.p99 <= opts.target;
  out(`fire latency (Date.now() - scheduledAt in the winning body), ms: count ${l.count}  p50 ${fmt(l.p50, 0)}  p90 ${fmt(l.p90, 0)}  p99 ${fmt(l.p99, 0)}  max ${fmt(l.max, 0)}  mean ${fmt(l.mean, 2)}   target p99 <= ${opts.target}: ${pass ? 'PASS' : 'FAIL'}`);
  const h = r.latencyHiResMs;
  out(`  same, sub-millisecond clock, ms:            p50 ${fmt(h.p50, 2)}  p90 ${fmt(h.p90, 2)}  p99 ${fmt(h.p99, 2)}  max ${fmt(h.max, 2)}`);
  if (r.spreadSameInstantMs) {
    const s = r.spreadSameInstantMs;
    out(`  spread between the first and last of the ${r.jobs.length} jobs of one instant, ms: p50 ${fmt(s.p50, 2)}  p99 ${fmt(s.p99, 2)}  max ${fmt(s.max, 2)}`);
    out(table([['job', 'count', 'p50', 'p99', 'max'], ...Object.entries(r.perJob).map(([j, v]) => [j, v.latency.count, fmt(v.latency.p50, 0), fmt(v.latency.p99, 0), fmt(v.latency.max, 0)])]).replace(/^/gm, '  '));
  }
  if (r.cpuMsPerSecond) {
    const c = r.cpuMsPerSecond;
    out(`CPU used per second of window (ms of CPU, /proc, 10 ms resolution): nodes ${c.nodes.map((v) => fmt(v, 1)).join(' / ')}, Redis masters ${c.redis.map((v) => fmt(v, 1)).join(' / ')}`);
  }
  out(`nodes that won periods: ${r.nodesWon} of ${r.nodes}  (${Object.entries(r.winners).map(([n, w]) => `${n} ${w.won}`).join(', ')})`);
  const e = r.exactlyOnce;
  out(`exactly once: ${e.ok ? 'OK' : 'FAILED'}  duplicates ${e.duplicates}, missing in window ${e.missingInWindow}, missing between first and last run ${e.missingOverall}, body/row mismatches ${e.bodyRowMismatch}, rows not succeeded ${e.rowsNotSucceeded.length}, skipped rows (start-up catch-up) ${e.skippedRows}`);

  const st = r.statements;
  out('');
  out(`statements per node in the window (MariaDB USER_STATISTICS, one MySQL user per node, snapshots mid-second, ${fmt(st.windowMs / 1000, 3)} s):`);
  out(`  model: stmts = a x won + ${LOST_ROW_STATEMENTS} x lost-at-row + sweeps + b x lost-at-lock; sweeps = ${st.sweepEveryMs ? `${st.sweepStatements} statement(s) x window / ${st.sweepEveryMs} ms${st.flushEveryMs ? ` + 2 x window / ${st.flushEveryMs} ms (jobs-table flush)` : ''} = ${fmt(st.sweepsExpected, 2)} (+-${st.sweepStatements} for the sweep's timer phase)` : 'none'}`);
  out(table([
    ['node', 'won', 'lost@lock', 'lost@row', 'stmts', 'SELECT', 'INS/UPD', 'other', 'stmts/won*', 'from lost@lock', 'start-up', 'won before', 'start-up fixed', 'after stop'],
    ...st.nodes.map((a) => [a.node, a.won, a.lostLock, a.lostRow, a.window.statements, a.window.selects, a.window.updates, a.window.other,
      a.perWon === null ? '-' : fmt(a.perWon, 2), a.attributableToLost === null ? '-' : fmt(a.attributableToLost, 2), a.startup.statements, a.wonBefore,
      a.startupFixed === null ? '-' : fmt(a.startupFixed, 2), a.shutdown.statements]),
  ]).replace(/^/gm, '  '));
  out(`  * stmts/won = (stmts - sweeps - ${LOST_ROW_STATEMENTS} x lost@row) / won;  from lost@lock = that minus a x won (expected 0, +-1 sweep phase)`);
  if (st.fit) {
    out(`  least-squares fit over the nodes: a = ${fmt(st.fit.a, 3)} statements per won period, b = ${fmt(st.fit.b, 4)} per period lost at the lock (expected 0); max residual ${fmt(st.fit.maxResidual, 2)}`);
  } else {
    out('  (won and lost counts are proportional across nodes: the per-won and per-lost costs cannot be separated)');
  }
  if (!st.snapshotsClean) out('  [a snapshot overlapped a run: the split by window is approximate]');
  if (r.trace) {
    const t = r.trace;
    out('');
    out('where the time goes (winner of each period, traced in-process), ms:');
    const names = {
      wake: 'timer wake-up (tick - period instant)', dispatch: 'tick -> claim start', lock: 'Redlock acquire (3 masters)',
      insertRun: 'insertRun() total', insertWire: '  INSERT on the wire', readbackWire: '  read-back SELECT on the wire',
      overlap: 'overlap check liveRuns() total', overlapWire: '  of which SQL on the wire', afterClaim: 'claim won -> body start',
      logBeforeBody: '  of which log writes', unaccounted: 'unaccounted (gaps)', total: 'TOTAL period instant -> body start',
    };
    out(table([['phase', 'p50', 'p90', 'p99', 'max', 'mean'], ...Object.entries(names).map(([k, label]) => {
      const s = t.winnerPhasesMs[k];
      return [label, fmt(s.p50, 2), fmt(s.p90, 2), fmt(s.p99, 2), fmt(s.max, 2), fmt(s.mean, 2)];
    })]).replace(/^/gm, '  '));
    out(`  timer wake-up on all nodes (winners and losers): p50 ${fmt(t.timerWakeAllNodesMs.p50, 2)} p99 ${fmt(t.timerWakeAllNodesMs.p99, 2)} max ${fmt(t.timerWakeAllNodesMs.max, 2)}; losers' Redlock attempt: p50 ${fmt(t.loserPhasesMs.lock.p50, 2)} p99 ${fmt(t.loserPhasesMs.lock.p99, 2)}`);
    out('claim outcomes per node (window) and every SQL statement the node sent in the window, by cause:');
    out(table([['node', 'won', 'lost@lock', 'lost@row', 'SQL total', 'for won', 'for lost@row', 'for lost@lock', 'sweep', 'step-in', 'liveness', 'other', 'userstat', 'Redis cmds for lost@lock'],
      ...Object.entries(t.outcomes).map(([n, o]) => {
        const c = t.sqlByCause[n];
        const cc = t.crossCheck.find((x) => x.node === n);
        return [n, o.won ?? 0, o['lost-lock'] ?? 0, o['lost-row'] ?? 0, c.total, c.won, c['lost-row'], c['lost-lock'], c.sweep, c['step-in'], c.liveness, c.untaggedOther + c.otherPeriod, cc.userstat, c.redisForLostLock];
      })]).replace(/^/gm, '  '));
    out(`  SQL statements by kind (window): ${Object.entries(t.sqlKinds).map(([k, v]) => `${k} ${v}`).join(', ')}`);
    if (t.unclaimed.length) {
      out(`  periods no node claimed (${t.splitVotes} split vote(s)): ${t.unclaimed.slice(0, 5).map((u) => `${u.periodKey} votes per node [${Object.entries(u.votes ?? {}).map(([n, v]) => `${n}:${v.join('')}`).join(' ')}]`).join('; ')}`);
    }
  }
  if (r.problems.length) {
    out('problems:');
    for (const p of r.problems) out(`  - ${p}`);
  }
}

// ---------------------------------------------------------------------------------- main

async function main() {
  const opts = parseOptions(process.argv.slice(2));
  const cleanups = [];
  const source = sourceState();
  // The daemons run a private build of src/ (immune to rebuilds of dist/ by anyone else meanwhile);
  // --no-build runs the project's dist/ as it is.
  if (opts.build && !opts.packageDir) note('compiling src/ into a private build');
  const pkg = resolvePackage({ build: opts.build, packageDir: opts.packageDir });
  cleanups.push(pkg.cleanup);
  opts.bin = pkg.bin;
  opts.dist = pkg.dist;
  // The takeover sweep's cadence (one SELECT per node per period of it), read from the compiled daemon.
  const sweepMatch = /SWEEP_EVERY_MS\s*=\s*([0-9_]+)/.exec(readFileSync(join(opts.dist, 'daemon', 'scheduler.js'), 'utf8'));
  opts.sweepEveryMs = sweepMatch ? Number(sweepMatch[1].replace(/_/g, '')) : 0;
  // Since the owed-work store, a sweep sends 3 statements (stale runs, due pending, the reconciler's
  // range read) and the reconciler flushes the jobs table (2 statements every FLUSH_EVERY_MS).
  const reconcileJs = join(opts.dist, 'run', 'reconcile.js');
  const flushMatch = existsSync(reconcileJs) ? /FLUSH_EVERY_MS\s*=\s*([0-9_]+)/.exec(readFileSync(reconcileJs, 'utf8')) : null;
  opts.sweepStatements = existsSync(reconcileJs) ? 3 : 1;
  opts.flushEveryMs = flushMatch ? Number(flushMatch[1].replace(/_/g, '')) : 0;
  let admin;
  let userstatBefore;
  let interrupted = false;
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    note('interrupted: cleaning up');
    void cleanup().finally(() => process.exit(130));
  };
  async function cleanup() {
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (err) {
        note(`cleanup: ${err?.message ?? err}`);
      }
    }
    cleanups.length = 0;
  }
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const results = [];
  try {
    admin = await adminConnection();
    cleanups.push(() => admin.end());
    const userstat = await enableUserstat(admin);
    userstatBefore = userstat.before;
    if (userstatBefore === undefined) throw new Error('this server has no userstat variable (MariaDB needed for per-user statistics)');
    cleanups.push(async () => {
      await userstat.restore();
      if (userstatBefore !== 'ON') note('userstat restored to OFF');
    });
    const redis = await startRedisServers(opts.redis);
    cleanups.push(() => Promise.all(redis.map((s) => s.cleanup())));
    const env = { admin, redisUrls: redis.map((s) => s.url), redisPids: redis.map((s) => s.proc.pid), opts, cleanups };
    note(`Redis masters on ports ${redis.map((s) => s.port).join(', ')}; userstat was ${userstatBefore}`);

    const single = ['every-second'];
    const multi = Array.from({ length: opts.jobs }, (_, i) => `burst-${i + 1}`);
    for (const name of opts.scenarios) {
      const sc = name === 'single' ? { name, jobs: single, seconds: opts.seconds, logLevel: opts.logLevel }
        : name === 'multi' ? { name, jobs: multi, seconds: opts.multiSeconds, logLevel: opts.logLevel }
          : { name, jobs: opts.traceJobs > 1 ? multi.slice(0, opts.traceJobs) : single, seconds: opts.traceSeconds, logLevel: opts.logLevel, trace: true };
      const r = await runScenario(env, sc);
      results.push(r);
      report(r, opts);
    }
  } finally {
    await cleanup();
  }

  const summary = {
    bench: 'fire-latency',
    command: `node bench/fire-latency.mjs ${process.argv.slice(2).join(' ')}`.trim(),
    at: new Date().toISOString(),
    node: process.version,
    source: { ...source, build: opts.packageDir ? `prebuilt ${opts.packageDir}` : opts.build ? 'private build of src/' : 'dist/ as found' },
    targetP99Ms: opts.target,
    scenarios: results.map((r) => ({
      scenario: r.scenario, jobs: r.jobs.length, nodes: r.nodes, windowSeconds: r.windowSeconds, traced: r.traced,
      latencyMs: pick(r.latencyMs), latencyHiResMs: pick(r.latencyHiResMs), p99Pass: r.latencyMs.p99 <= opts.target,
      nodesWon: r.nodesWon, winners: Object.fromEntries(Object.entries(r.winners).map(([k, v]) => [k, v.won])),
      spreadSameInstantMs: r.spreadSameInstantMs ? pick(r.spreadSameInstantMs) : undefined,
      load1: r.load1,
      cpuMsPerSecond: r.cpuMsPerSecond ? { nodes: r.cpuMsPerSecond.nodes.map((v) => round(v, 1)), redis: r.cpuMsPerSecond.redis.map((v) => round(v, 1)) } : undefined,
      exactlyOnce: {
        ok: r.exactlyOnce.ok, duplicates: r.exactlyOnce.duplicates, missingInWindow: r.exactlyOnce.missingInWindow, missingOverall: r.exactlyOnce.missingOverall,
        missingSample: r.exactlyOnce.missingSample,
      },
      statements: {
        perWonPeriod: r.statements.fit ? round(r.statements.fit.a, 3) : null,
        perLostAtLockPeriod: r.statements.fit ? round(r.statements.fit.b, 4) : null,
        sweepsPerNode: round(r.statements.sweepsExpected, 2),
        attributableToLostAtLock: round(r.statements.attributableToLostTotal, 2),
        nodes: r.statements.nodes.map((a) => ({
          node: a.node, won: a.won, lostAtLock: a.lostLock, lostAtRow: a.lostRow, statements: a.window.statements, selects: a.window.selects, updates: a.window.updates,
          perWon: a.perWon === null ? null : round(a.perWon, 3), attributableToLostAtLock: round(a.attributableToLost, 2), startup: a.startup.statements,
        })),
      },
      trace: r.trace ? {
        winnerPhasesP50: Object.fromEntries(Object.entries(r.trace.winnerPhasesMs).map(([k, v]) => [k, round(v.p50, 2)])),
        winnerPhasesP99: Object.fromEntries(Object.entries(r.trace.winnerPhasesMs).map(([k, v]) => [k, round(v.p99, 2)])),
        outcomes: r.trace.outcomes, sqlByCause: r.trace.sqlByCause, unclaimedPeriods: r.trace.unclaimed.length, splitVotes: r.trace.splitVotes,
        sqlForLostLockPeriods: Object.values(r.trace.sqlByCause).reduce((s, v) => s + v['lost-lock'], 0),
      } : undefined,
      problems: r.problems,
    })),
  };
  const ok = results.every((r) => r.problems.length === 0 && r.latencyMs.p99 <= opts.target);
  summary.ok = ok;
  out('');
  out('JSON summary:');
  out(JSON.stringify(summary));
  if (opts.jsonOut) writeFileSync(opts.jsonOut, `${JSON.stringify(summary, null, 2)}\n`);
  process.exitCode = ok ? 0 : 1;
}

const round = (v, d) => (Number.isFinite(v) ? Number(v.toFixed(d)) : null);
const pick = (s) => ({ count: s.count, p50: round(s.p50, 2), p90: round(s.p90, 2), p99: round(s.p99, 2), max: round(s.max, 2), mean: round(s.mean, 2) });

main().catch((err) => {
  process.stderr.write(`fire-latency: ${err?.stack ?? err}\n`);
  process.exitCode = 2;
});
