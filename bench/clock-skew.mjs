#!/usr/bin/env node
/**
 * Clock-skew benchmark for cluster-cron: real `bin/scheduler run` daemons on loopback whose wall
 * clocks are shifted with libfaketime, on MariaDB (a private database, dropped afterwards) and three
 * Redis masters started here on free ports (`--redis 0`: none).
 *
 *   node bench/clock-skew.mjs [--skews +1.5s,-1.5s,0] [--nodes N] [--redis 3] [--jobs 5] [--seconds 60]
 *                             [--warmup 5] [--settle 4] [--body-ms 300] [--log-level info]
 *                             [--no-build | --package DIR] [--keep] [--json-out FILE]
 *   (a list that starts with a minus takes the = form: --skews=-1.5s,+1.5s; env: BENCH_MYSQL_ADMIN=mysql://root@127.0.0.1:3306/)
 *
 * Each node's clock is shifted by its skew (`+1.5s`, `-200ms`, `+5m`, `0` = not faked): libfaketime
 * preloaded straight into node (FAKETIME=<offset>, FAKETIME_DONT_FAKE_MONOTONIC=1, FAKETIME_NO_CACHE=1),
 * as test/fault/infrastructure.test.ts does. The store's clock (MariaDB on this machine) is the real one,
 * and so is this script's. `--nodes` defaults to the number of skews; extra nodes get 0.
 * Jobs: `--jobs` every-second jobs (`* * * * * *`, overlap 'skip', lockTtl 2s, catchUp 1m,
 * coalesce false) whose body records its start and end (JSON lines, its own side effects) and waits
 * `--body-ms`: a node that fired by its own clock 1.5 s early would meet the previous period's live
 * run and record its period skipped (overlap); one 1.5 s late would leave seconds to the catch-up.
 * After the daemons have started and `--warmup` seconds more, a window of `--seconds` whole seconds
 * (real clock) is measured; `--settle` seconds later the daemons get SIGTERM.
 *
 * Measured, per node: the applied skew; the offset the node measured (clockOffsetMs of its log line
 * 'clock offset to the store measured: ...', store minus node, so expected = -skew); the error
 * |measured + skew|; whether it warned (offsets over 1 s); the periods it won.
 * For the cluster (from the bodies' side effects and the rows):
 *   duplicates      periods whose body started more than once (any attempt; the whole run)
 *   gaps            (job, second) in the window with no body start or no succeeded row
 *   overlap skips   rows `skipped` with reason `overlap` (the whole run)
 *   takeovers       rows `abandoned`, and attempts > 1 (no node paused or died: expected 0)
 *   lateness        body start - period instant, each record put back on the real clock by its
 *                   node's skew (a faked process's Date.now() is faked too): p50/p99/min/max; and
 *                   the rows' started_at - scheduled_at (store clock), and the claim lead
 *                   scheduled_at - claimed_at (store clock: claims go out ~100 ms ahead)
 * Targets (the issue): 0 duplicates, 0 gaps, 0 overlap skips; every measured offset within 50 ms of
 * the applied skew. Exit status 0 when all are met, 1 otherwise, 2 on error.
 *
 * The report goes to stdout (the command line first); its last line is one JSON document with the figures.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import {
  BENCH_MARIADB_ADMIN, PROJECT_ROOT, SchedulerNode, Workspace, adminConnection, benchOptions, buildSnapshot, countBy, createMariaDb, randomTag,
  sleep, sourceState, startRedisServers, summarise, table, tail,
} from './lib.mjs';

const OFFSET_TARGET_MS = 50;

// ------------------------------------------------------------------------------------- options

/** `+1.5s`, `-200ms`, `+5m`, `-1h`, `0` -> ms (signed). */
function parseSkew(text) {
  const m = /^([+-]?)(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(String(text).trim());
  if (!m) throw new Error(`--skews: expected offsets such as +1.5s, -200ms, +5m or 0, got ${text}`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[3] ?? 's'];
  const v = Number(m[2]) * unit;
  if (v !== 0 && !m[3]) throw new Error(`--skews: give a unit (ms, s, m, h) with ${text}`);
  return m[1] === '-' ? -v : v;
}

/**
 * libfaketime's relative offset, in seconds: its parser multiplies by 60 when the string contains an
 * 'm' anywhere (so "1500ms" would be 1500 minutes); seconds with a fraction are exact enough.
 */
function faketimeOffset(ms) {
  return `${ms < 0 ? '-' : '+'}${(Math.abs(ms) / 1000).toFixed(3).replace(/\.?0+$/, '')}s`;
}

const showSkew = (ms) => (ms === 0 ? '0' : `${ms > 0 ? '+' : '-'}${Math.abs(ms) % 60_000 === 0 ? `${Math.abs(ms) / 60_000}m` : `${Math.abs(ms) / 1000}s`}`);

function parseOptions(argv) {
  const flags = benchOptions(argv, {
    strings: ['skews', 'nodes', 'redis', 'jobs', 'seconds', 'warmup', 'settle', 'body-ms', 'log-level', 'package', 'json-out'],
    booleans: ['no-build', 'keep'],
    usage: 'usage: node bench/clock-skew.mjs [--skews +1.5s,-1.5s,0] [--nodes N] [--redis 3] [--jobs 5] [--seconds 60]\n' +
      '       [--warmup 5] [--settle 4] [--body-ms 300] [--log-level info] [--no-build | --package DIR] [--keep] [--json-out FILE]\n',
  });
  const num = (flag, dflt, min = 1) => {
    if (flags[flag] === undefined) return dflt;
    const n = Number(flags[flag]);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${flag}: expected a number >= ${min}, got ${flags[flag]}`);
    return n;
  };
  const skewsGiven = String(flags.skews ?? '+1.5s,-1.5s,0').split(',').map((s) => s.trim()).filter(Boolean).map(parseSkew);
  const nodes = num('nodes', skewsGiven.length, 1);
  if (skewsGiven.length > nodes) throw new Error(`--skews: ${skewsGiven.length} skews for ${nodes} node(s)`);
  const skews = Array.from({ length: nodes }, (_, i) => skewsGiven[i] ?? 0);
  const redis = num('redis', 3, 0);
  if (![0, 1, 3, 5].includes(redis)) throw new Error('--redis: 0, 1, 3 or 5 masters');
  return {
    skews,
    nodes,
    redis,
    jobs: num('jobs', 5),
    seconds: num('seconds', 60),
    warmup: num('warmup', 5, 0),
    settle: num('settle', 4, 0),
    bodyMs: num('body-ms', 300, 0),
    logLevel: flags['log-level'] ?? 'info',
    build: !flags['no-build'],
    packageDir: flags.package,
    keep: Boolean(flags.keep),
    jsonOut: flags['json-out'],
  };
}

const note = (s) => process.stderr.write(`[clock-skew ${new Date().toISOString().slice(11, 23)}] ${s}\n`);

// ----------------------------------------------------------------------------------------- job

function jobSource(bodyMs) {
  return `// generated by bench/clock-skew.mjs
import { appendFileSync } from 'node:fs';
// t: this process's Date.now(), faked by libfaketime on a skewed node (the analysis takes the skew off).
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
export default {
  schedule: '* * * * * *',
  overlap: 'skip',
  lockTtl: '2s',
  catchUp: '1m',
  coalesce: false,
  async run(ctx) {
    const me = { key: ctx.periodKey, job: ctx.job, attempt: ctx.attempt, node: ctx.nodeId, trigger: ctx.trigger, sched: ctx.scheduledAt.getTime() };
    rec({ ev: 'start', ...me });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, ${Number(bodyMs)});
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        rec({ ev: 'abort', ...me, reason: String(ctx.signal.reason) });
        reject(new Error('aborted: ' + String(ctx.signal.reason)));
      }, { once: true });
    });
    rec({ ev: 'end', ...me });
    return { ok: true };
  },
};
`;
}

// ------------------------------------------------------------------------------------ analysis

const OFFSET_MSG = /^clock offset to the store measured/;
const WARN_MSG = /clock is .* the store's/;


const pick = (s) => ({ count: s.count, min: s.min, p50: s.p50, p99: s.p99, max: s.max });

function analyse({ opts, nodes, effects, rows, fromMs, toMs, jobs }) {
  const skewOf = new Map(nodes.map((n) => [n.nodeId, n.skewMs]));
  const real = (e) => e.t - (skewOf.get(e.node) ?? 0);

  // Per node: what it measured, from its own log.
  const perNode = nodes.map((n) => {
    const lines = n.logLines();
    const line = lines.find((l) => OFFSET_MSG.test(String(l.msg)) && typeof l.clockOffsetMs === 'number');
    const measured = line ? line.clockOffsetMs : null;
    return {
      node: n.nodeId,
      skewMs: n.skewMs,
      faketime: n.faketime,
      measuredOffsetMs: measured,
      expectedOffsetMs: -n.skewMs,
      errorMs: measured === null ? null : Math.abs(measured + n.skewMs),
      rttMs: line?.rttMs ?? null,
      warned: lines.filter((l) => WARN_MSG.test(String(l.msg))).length,
      errorLines: lines.filter((l) => l.level === 'error' || l.level === 'fatal' || l.level >= 50).length,
      lateTimerLines: lines.filter((l) => /timer woke late/.test(String(l.msg))).length,
    };
  });

  const starts = effects.filter((e) => e.ev === 'start');
  // Duplicates: a period whose body started more than once, over the whole run.
  const perKey = countBy(starts.map((e) => e.key));
  const perAttempt = countBy(starts.map((e) => `${e.key}#${e.attempt}`));
  const duplicates = Object.entries(perKey).filter(([, c]) => c > 1).map(([k, c]) => ({
    key: k, starts: c, by: starts.filter((e) => e.key === k).map((e) => `${e.node}#${e.attempt}/${e.trigger}`).join(' '),
  }));
  const sameAttemptTwice = Object.entries(perAttempt).filter(([, c]) => c > 1).map(([k]) => k);

  // Gaps: every (job, second) of the window needs a body start and a succeeded row.
  const started = new Set(starts.map((e) => e.key));
  const succeeded = new Set(rows.filter((r) => r.status === 'succeeded').map((r) => r.period_key));
  const expected = [];
  for (let t = fromMs; t < toMs; t += 1000) for (const j of jobs) expected.push(`${j}@${new Date(t).toISOString()}`);
  const inWindow = new Set(expected);
  const noStart = expected.filter((k) => !started.has(k));
  const noSucceeded = expected.filter((k) => !succeeded.has(k));
  const gaps = [...new Set([...noStart, ...noSucceeded])].sort();
  const rowsOf = (k) => rows.filter((r) => r.period_key === k).map((r) => `${r.attempt}:${r.status}${r.reason ? `(${r.reason})` : ''}@${r.node_id}`).join(' ') || 'no row';

  // Rows: the whole run.
  const overlapSkips = rows.filter((r) => r.status === 'skipped' && r.reason === 'overlap');
  const otherSkips = countBy(rows.filter((r) => r.status === 'skipped' && r.reason !== 'overlap').map((r) => r.reason ?? 'none'));
  const abandoned = rows.filter((r) => r.status === 'abandoned');
  const laterAttempts = rows.filter((r) => r.attempt > 1);
  const statuses = countBy(rows.map((r) => r.status));
  const leftOpen = rows.filter((r) => r.status === 'running' || r.status === 'pending');

  // Lateness on the real clock: every body start of a period in the window.
  const windowStarts = starts.filter((e) => inWindow.has(e.key));
  const lateness = windowStarts.map((e) => real(e) - e.sched);
  const byNode = {};
  for (const n of nodes) {
    const mine = windowStarts.filter((e) => e.node === n.nodeId);
    byNode[n.nodeId] = { won: mine.length, latenessMs: pick(summarise(mine.map((e) => real(e) - e.sched))) };
  }
  const windowRows = rows.filter((r) => inWindow.has(r.period_key) && r.status === 'succeeded');
  const rowLateness = windowRows.map((r) => r.started_at - r.scheduled_at);
  const claimLead = rows.filter((r) => inWindow.has(r.period_key) && r.claimed_at !== null).map((r) => r.scheduled_at - r.claimed_at);
  const claimLeadByNode = {};
  for (const n of nodes) {
    claimLeadByNode[n.nodeId] = pick(summarise(rows.filter((r) => inWindow.has(r.period_key) && r.claimed_at !== null && r.node_id === n.nodeId).map((r) => r.scheduled_at - r.claimed_at)));
  }
  const triggers = countBy(windowStarts.map((e) => e.trigger));
  const earliest = [...windowStarts].sort((a, b) => (real(a) - a.sched) - (real(b) - b.sched)).slice(0, 3)
    .map((e) => `${e.key} on ${e.node}: ${real(e) - e.sched} ms`);

  const offsetsOk = perNode.every((n) => n.errorMs !== null && n.errorMs <= OFFSET_TARGET_MS);
  const checks = {
    duplicates: duplicates.length === 0,
    gaps: gaps.length === 0,
    overlapSkips: overlapSkips.length === 0,
    offsets: offsetsOk,
  };
  return {
    perNode,
    window: { from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString(), seconds: Math.round((toMs - fromMs) / 1000), periods: expected.length },
    duplicates, sameAttemptTwice,
    gaps: gaps.map((k) => ({ key: k, start: started.has(k), rows: rowsOf(k) })),
    noStart: noStart.length, noSucceeded: noSucceeded.length,
    overlapSkips: overlapSkips.map((r) => ({ key: r.period_key, node: r.node_id, claimedAt: r.claimed_at, startedAt: r.started_at })),
    otherSkips, abandoned: abandoned.map((r) => `${r.period_key}#${r.attempt}@${r.node_id}`), laterAttempts: laterAttempts.map((r) => `${r.period_key}#${r.attempt}:${r.status}@${r.node_id}`),
    statuses, leftOpen: leftOpen.map((r) => `${r.period_key}#${r.attempt}:${r.status}`),
    latenessMs: pick(summarise(lateness)), byNode, earliest,
    rowLatenessMs: pick(summarise(rowLateness)),
    claimLeadMs: pick(summarise(claimLead)), claimLeadByNode,
    triggers,
    checks,
    pass: Object.values(checks).every(Boolean),
  };
}

// -------------------------------------------------------------------------------------- report

function report(opts, s) {
  const out = [];
  const p = (x = '') => out.push(x);
  const a = s.result;
  p('cluster-cron clock-skew benchmark');
  p(`command: ${s.command}`);
  p(`at ${s.at}; commit ${s.source.head ?? '?'}${s.source.srcChanges.length ? ` with uncommitted src/ changes (${s.source.srcChanges.length})` : ''}; ${s.source.build}`);
  p(`machine: ${s.machine.cpus} CPU(s), load average at start ${s.machine.loadStart.map((x) => x.toFixed(2)).join(' ')}, at end ${s.machine.loadEnd.map((x) => x.toFixed(2)).join(' ')}; other work shares these cores`);
  p(`node ${process.version}; MariaDB (private database ${s.db}), ${opts.redis ? `${opts.redis} Redis master(s)` : 'no Redis'}; ${opts.nodes} daemons, ${opts.jobs} jobs '* * * * * *' (overlap skip, lockTtl 2s, catchUp 1m, coalesce false, body ${opts.bodyMs} ms)`);
  p(`window ${a.window.from.slice(11, 19)}-${a.window.to.slice(11, 19)} UTC (${a.window.seconds} s, ${a.window.periods} periods; real clock)`);
  p();
  p('== per node: clock offset measured against the store (store minus node; expected = -skew)');
  p(table([
    ['node', 'skew', 'FAKETIME', 'measured ms', 'expected ms', '|error| ms', 'rtt ms', 'warned', 'won', 'lateness p50/p99/min/max ms', 'claim lead p50/min/max ms', 'ok'],
    ...a.perNode.map((n) => {
      const w = a.byNode[n.node];
      const c = a.claimLeadByNode[n.node];
      return [n.node, showSkew(n.skewMs), n.faketime ?? '-', n.measuredOffsetMs ?? '-', n.expectedOffsetMs, n.errorMs ?? '-', n.rttMs ?? '-', n.warned, w.won,
        w.won ? `${w.latenessMs.p50}/${w.latenessMs.p99}/${w.latenessMs.min}/${w.latenessMs.max}` : '-',
        c.count ? `${c.p50}/${c.min}/${c.max}` : '-',
        n.errorMs !== null && n.errorMs <= OFFSET_TARGET_MS ? 'yes' : 'NO'];
    }),
  ]));
  p();
  p('== cluster');
  const l = a.latenessMs;
  p(table([
    ['figure', 'value', 'target'],
    ['duplicates (a period started twice)', a.duplicates.length, '0'],
    ['gaps (a second with no start or no succeeded row)', `${a.gaps.length} (no start ${a.noStart}, no succeeded row ${a.noSucceeded})`, '0'],
    ['overlap skips (rows skipped/overlap)', a.overlapSkips.length, '0'],
    ['abandoned rows / attempts > 1', `${a.abandoned.length} / ${a.laterAttempts.length}`, '(0 expected)'],
    ['other skips', JSON.stringify(a.otherSkips), ''],
    ['body start lateness, real clock (p50/p99/min/max)', `${l.p50}/${l.p99}/${l.min}/${l.max} ms (${l.count} starts)`, ''],
    ['rows: started_at - scheduled_at (p50/p99/min/max)', `${a.rowLatenessMs.p50}/${a.rowLatenessMs.p99}/${a.rowLatenessMs.min}/${a.rowLatenessMs.max} ms`, ''],
    ['rows: claim lead scheduled_at - claimed_at (p50/min/max)', `${a.claimLeadMs.p50}/${a.claimLeadMs.min}/${a.claimLeadMs.max} ms`, ''],
    ['triggers of the window\'s starts', JSON.stringify(a.triggers), ''],
    ['row statuses (whole run)', JSON.stringify(a.statuses), ''],
    ['max |offset error|', a.perNode.every((n) => n.errorMs !== null) ? `${Math.max(...a.perNode.map((n) => n.errorMs))} ms` : 'an offset was not logged', `<= ${OFFSET_TARGET_MS} ms`],
  ]));
  if (a.duplicates.length) p(`duplicates: ${a.duplicates.slice(0, 10).map((d) => `${d.key} x${d.starts} (${d.by})`).join('; ')}`);
  if (a.gaps.length) p(`gaps: ${a.gaps.slice(0, 10).map((g) => `${g.key} [${g.start ? 'started' : 'no start'}; ${g.rows}]`).join('; ')}${a.gaps.length > 10 ? ' ...' : ''}`);
  if (a.overlapSkips.length) p(`overlap skips: ${a.overlapSkips.slice(0, 10).map((r) => `${r.key} by ${r.node}`).join('; ')}`);
  if (a.abandoned.length || a.laterAttempts.length) p(`takeovers: ${[...a.abandoned, ...a.laterAttempts].slice(0, 10).join('; ')}`);
  if (a.leftOpen.length) p(`rows left running/pending: ${a.leftOpen.slice(0, 10).join('; ')}`);
  p(`earliest starts: ${a.earliest.join('; ')}`);
  p(`daemon exits: ${s.exits.map((e) => `${e.nodeId}:${e.code ?? e.signal}`).join(' ')}; error log lines: ${a.perNode.map((n) => `${n.node}:${n.errorLines}`).join(' ')}; 'timer woke late' lines: ${a.perNode.map((n) => `${n.node}:${n.lateTimerLines}`).join(' ')}`);
  p();
  p(`targets: ${Object.entries(a.checks).map(([k, v]) => `${k} ${v ? 'ok' : 'FAILED'}`).join(', ')}  => ${a.pass ? 'PASS' : 'FAIL'}  (${s.elapsedS} s)`);
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------- main

async function main() {
  const opts = parseOptions(process.argv.slice(2));
  const t0 = Date.now();
  const loadStart = loadavg();
  const command = `node bench/clock-skew.mjs ${process.argv.slice(2).join(' ')}`.trim();
  const source = sourceState();
  const cleanups = [];
  let cleaning;
  const cleanup = () => (cleaning ??= (async () => {
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (err) {
        note(`cleanup: ${err?.message ?? err}`);
      }
    }
  })());
  const onSignal = (sig) => {
    note(`${sig}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const needFaketime = opts.skews.some((x) => x !== 0);
  let lib;
  if (needFaketime) {
    lib = execFileSync('sh', ['-c', 'dpkg -L libfaketime 2>/dev/null | grep "/libfaketime.so.1$" || true'], { encoding: 'utf8' }).trim().split('\n')[0];
    if (!lib || !existsSync(lib)) throw new Error('libfaketime.so.1 not found (Debian package libfaketime)');
  }

  // The daemons run a private build of src/ (immune to rebuilds of dist/ meanwhile); --no-build runs dist/.
  let packageRoot = PROJECT_ROOT;
  if (opts.packageDir) packageRoot = opts.packageDir;
  else if (opts.build) {
    note('compiling src/ into a private build');
    packageRoot = buildSnapshot();
    cleanups.push(() => rmSync(packageRoot, { recursive: true, force: true }));
  } else if (!existsSync(join(PROJECT_ROOT, 'dist', 'cli', 'entry.js'))) {
    throw new Error('dist/ is missing: run npx tsc -p tsconfig.json (or drop --no-build)');
  }
  const bin = join(packageRoot, 'bin', 'scheduler');

  const summary = {
    bench: 'clock-skew', command, at: new Date().toISOString(), node: process.version,
    source: { ...source, build: opts.packageDir ? `prebuilt ${opts.packageDir}` : opts.build ? 'private build of src/' : 'dist/ as found' },
    options: opts, machine: { cpus: cpus().length, loadStart },
  };
  let nodes = [];
  try {
    // Workspace: jobs, logs, side effects.
    const ws = new Workspace('bench-clock-skew-');
    const dir = ws.dir;
    cleanups.push(() => (opts.keep ? note(`kept ${dir}`) : ws.cleanup()));
    const jobs = Array.from({ length: opts.jobs }, (_, i) => `skew${String(i + 1).padStart(2, '0')}`);
    for (const j of jobs) ws.writeJob(`${j}.mjs`, jobSource(opts.bodyMs));

    // Private database (root on loopback), dropped at the end.
    const tag = randomTag();
    const store = await createMariaDb('cron_bench_skew', { adminUrl: BENCH_MARIADB_ADMIN });
    const db = store.name;
    cleanups.push(async () => {
      await store.drop();
      note(`dropped ${db}`);
    });
    const admin = await adminConnection();
    cleanups.push(() => admin.end());
    summary.db = db;

    const redis = opts.redis ? await startRedisServers(opts.redis) : [];
    cleanups.push(() => Promise.all(redis.map((r) => r.cleanup())));
    note(`database ${db}; ${redis.length ? `Redis on ports ${redis.map((r) => r.port).join(', ')}` : 'no Redis'}; workspace ${dir}`);

    // The daemons, each with its skew.
    nodes = opts.skews.map((skewMs, i) => {
      const nodeId = `n${i + 1}`;
      const faketime = skewMs === 0 ? null : faketimeOffset(skewMs);
      const node = new SchedulerNode({
        nodeId, cwd: dir, bin, logFile: join(ws.logsDir, `${nodeId}.log`),
        env: {
          SCHEDULER_STORE: store.url,
          SCHEDULER_REDIS: redis.map((r) => r.url).join(','),
          SCHEDULER_REDIS_PREFIX: `bench-skew-${tag}:`,
          SCHEDULER_JOBS_DIR: ws.jobsDir,
          SCHEDULER_LOG_LEVEL: opts.logLevel,
          SCHEDULER_GRACE_PERIOD: '2s',
          SCHEDULER_HTTP: 'off',
          SIDE_EFFECTS: ws.effectsFile,
          ...(faketime ? { LD_PRELOAD: lib, FAKETIME: faketime, FAKETIME_DONT_FAKE_MONOTONIC: '1', FAKETIME_NO_CACHE: '1' } : {}),
        },
      });
      node.skewMs = skewMs;
      node.faketime = faketime;
      return node;
    });
    cleanups.push(async () => {
      for (const n of nodes) if (n.proc.exitCode === null && n.proc.signalCode === null) await n.stop(20_000);
    });
    note(`starting ${nodes.map((n) => `${n.nodeId} (${showSkew(n.skewMs)})`).join(', ')}`);
    await Promise.all(nodes.map((n) => n.waitStarted()));
    await sleep(opts.warmup * 1000);
    const fromMs = Math.ceil((Date.now() + 1) / 1000) * 1000;
    const toMs = fromMs + opts.seconds * 1000;
    note(`measuring ${new Date(fromMs).toISOString().slice(11, 19)}-${new Date(toMs).toISOString().slice(11, 19)}`);
    await sleep(toMs - Date.now() + opts.settle * 1000);
    summary.exits = [];
    await Promise.all(nodes.map(async (n) => summary.exits.push({ nodeId: n.nodeId, ...(await n.stop(20_000)) })));
    summary.exits.sort((x, y) => x.nodeId.localeCompare(y.nodeId));
    for (const n of nodes) if (n.proc.exitCode !== 0) note(`${n.nodeId} exited ${n.proc.exitCode ?? n.proc.signalCode}: ${tail(n.logFile)}`);

    const [raw] = await admin.query(`SELECT * FROM \`${db}\`.scheduler_runs ORDER BY id`);
    const num = (v) => (v === null || v === undefined ? null : Number(v));
    const rows = raw.map((r) => ({
      ...r, attempt: Number(r.attempt), scheduled_at: num(r.scheduled_at), started_at: num(r.started_at), claimed_at: num(r.claimed_at),
      heartbeat_at: num(r.heartbeat_at), finished_at: num(r.finished_at), lease_ms: num(r.lease_ms), result: undefined,
    }));
    writeFileSync(join(dir, 'rows.json'), `${JSON.stringify(rows, null, 1)}\n`);
    const effects = ws.effects();
    summary.result = analyse({ opts, nodes, effects, rows, fromMs, toMs, jobs });
  } finally {
    await cleanup();
  }
  summary.machine.loadEnd = loadavg();
  summary.elapsedS = Math.round((Date.now() - t0) / 1000);
  process.stdout.write(`${report(opts, summary)}\n`);
  const a = summary.result;
  const compact = {
    bench: 'clock-skew', command, at: summary.at, commit: summary.source.head, pass: a.pass,
    cpus: summary.machine.cpus, load: [summary.machine.loadStart[0], summary.machine.loadEnd[0]].map((x) => Number(x.toFixed(2))),
    nodes: opts.nodes, redis: opts.redis, jobs: opts.jobs, windowSeconds: a.window.seconds, periods: a.window.periods,
    perNode: a.perNode.map((n) => ({ node: n.node, skewMs: n.skewMs, measuredOffsetMs: n.measuredOffsetMs, errorMs: n.errorMs, rttMs: n.rttMs, warned: n.warned, won: a.byNode[n.node].won })),
    duplicates: a.duplicates.length, gaps: a.gaps.length, overlapSkips: a.overlapSkips.length,
    abandoned: a.abandoned.length, laterAttempts: a.laterAttempts.length, otherSkips: a.otherSkips,
    latenessMs: { p50: a.latenessMs.p50, p99: a.latenessMs.p99, min: a.latenessMs.min, max: a.latenessMs.max },
    rowLatenessMs: { p50: a.rowLatenessMs.p50, p99: a.rowLatenessMs.p99, min: a.rowLatenessMs.min },
    claimLeadMs: { p50: a.claimLeadMs.p50, min: a.claimLeadMs.min, max: a.claimLeadMs.max },
    triggers: a.triggers, exits: summary.exits.map((e) => e.code ?? e.signal), elapsedS: summary.elapsedS,
  };
  if (opts.jsonOut) writeFileSync(opts.jsonOut, `${JSON.stringify(summary, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(compact)}\n`);
  process.exitCode = a.pass ? 0 : 1;
}

main().catch((err) => {
  note(`failed: ${err.stack ?? err}`);
  process.exit(2);
});
