#!/usr/bin/env node
/**
 * Fault-handling benchmark for cluster-cron: real `bin/scheduler run` daemons on loopback, MariaDB
 * (a private database), three Redis masters started here on free ports.
 *
 *   node bench/faults.mjs [--goals takeover,pause,pause-inflight,redis,partition] [--rounds 5] [--ttls 2s,5s] [--pause-ttls 2s,5s]
 *                         [--nodes 3] [--redis 3] [--jobs 20] [--phase-seconds 20] [--settle 2]
 *                         [--warmup 3] [--log-level info] [--no-build] [--keep] [--json-out FILE]
 *                         [--inflight-ttls 5s] [--inflight-redis on|off|on,off] [--partition-ttls 3s]
 *   (env: BENCH_MYSQL_ADMIN=mysql://root@127.0.0.1:3306/)
 *
 * Goal 1 (takeover): a job with lockTtl T whose first attempt runs long. Each round waits for an
 *   attempt 1 to start, kill -9s its node between T and 2T after the start (so the lease was extended
 *   and the kill falls at a random phase of the heartbeat), restarts that slot at once (3 nodes again),
 *   and measures kill -> start of attempt 2 of the same period on another node, from the bodies' side
 *   effects. Target: <= T + 2 s. The store's rows give the split: kill -> lease expiry (last heartbeat
 *   + lease, store clock) and lease expiry -> attempt 2.
 * Goal 2 (pause): the node running attempt 1 is SIGSTOPped (between T and 2T after the start) until
 *   another node has started attempt 2, held 0-1 s more, then SIGCONTed. Measured: SIGCONT -> the
 *   paused body's 'abort' record; its reason must be 'lease-lost' and the attempt must not be recorded
 *   succeeded. Target: <= 1 s.
 *   Goal 'pause-inflight' is its worst case: each node reaches the store through a proxy here, and the
 *   node is stopped the instant its heartbeat UPDATE passes the proxy, so that the beat's answer
 *   ("the row is still yours", true when it was written) is read only after waking.
 * Goal 3 (Redis down): N every-second jobs with trivial bodies on 3 nodes; a phase with every Redis
 *   master up, then every master stopped (SIGKILL). Per phase: periods run per second, claim latency
 *   (period instant -> body start) p50/p99, missing periods, and no period run twice. Target: the
 *   down/up ratio of the rate >= 0.5.
 *
 * Goal 4 (partition): each node reaches the store through its own proxy; while a node runs attempt 1
 *   of a long body, only its proxy is cut (between T/3 and T after the start), until another node has
 *   started attempt 2; then it is restored. Measured per round, from the row's last heartbeat_at
 *   (store clock; one machine, so the clocks agree): the partitioned body's abort record minus that
 *   heartbeat (target <= T + 1 s; it must be 'lease-lost'), attempt 2's start minus it (the takeover,
 *   after the lease), and whether the partitioned node ever recorded an outcome for its lapsed attempt
 *   once the store was back (target: never; the row must stay as the takeover wrote it).
 *
 * The report goes to stdout; its last line is one JSON document with the figures.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import {
  PROJECT_ROOT, benchOptions, countBy, fmt, optionError, randomTag, sleep, startRedisServers, summarise, table } from './lib.mjs';
import {
  Cluster, SniffingProxy, Workspace, createFaultDatabase, duplicates, longJobSource, trivialJobSource, waitFor,
} from './fault-lib.mjs';

// ------------------------------------------------------------------------------------- options

function parseDuration(s) {
  const m = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(String(s).trim());
  if (!m) throw new Error(`expected a duration such as 2s or 1500ms, got ${s}`);
  return m[2] === 'ms' ? Number(m[1]) : Number(m[1]) * 1000;
}

function parseOptions(argv) {
  const flags = benchOptions(argv, {
    strings: ['goals', 'rounds', 'ttls', 'pause-ttls', 'inflight-ttls', 'inflight-redis', 'partition-ttls', 'nodes', 'redis', 'jobs',
      'phase-seconds', 'settle', 'warmup', 'log-level', 'json-out'],
    booleans: ['no-build', 'keep'],
    usage: 'usage: node bench/faults.mjs [--goals takeover,pause,pause-inflight,redis,partition] [--rounds 5] [--ttls 2s,5s] [--pause-ttls 2s,5s]\n' +
      '       [--inflight-ttls 5s] [--inflight-redis on|off|on,off] [--partition-ttls 3s]\n' +
      '       [--nodes 3] [--redis 3] [--jobs 20] [--phase-seconds 20] [--settle 2] [--warmup 3] [--log-level info]\n' +
      '       [--no-build] [--keep] [--json-out FILE]\n',
  });
  const num = (flag, dflt, min = 1) => {
    if (flags[flag] === undefined) return dflt;
    const n = Number(flags[flag]);
    if (!Number.isFinite(n) || n < min) optionError(`--${flag}: expected a number >= ${min}, got ${flags[flag]}`);
    return n;
  };
  const goals = String(flags.goals ?? 'takeover,pause,pause-inflight,redis,partition').split(',').map((s) => s.trim()).filter(Boolean);
  for (const g of goals) if (!['takeover', 'pause', 'pause-inflight', 'redis', 'partition'].includes(g)) optionError(`--goals: unknown goal ${g}`);
  const ttls = String(flags.ttls ?? '2s,5s').split(',').map(parseDuration);
  const pauseTtls = String(flags['pause-ttls'] ?? flags.ttls ?? '2s,5s').split(',').map(parseDuration);
  const inflightTtls = String(flags['inflight-ttls'] ?? '5s').split(',').map(parseDuration);
  const partitionTtls = String(flags['partition-ttls'] ?? '3s').split(',').map(parseDuration);
  const inflightRedis = String(flags['inflight-redis'] ?? 'on').split(',').map((x) => x.trim());
  for (const v of inflightRedis) if (!['on', 'off'].includes(v)) optionError(`--inflight-redis: expected on, off or on,off, got ${v}`);
  for (const t of [...ttls, ...pauseTtls, ...inflightTtls, ...partitionTtls]) if (t < 1000) optionError('lockTtl must be at least 1s (the job validator refuses less)');
  return {
    goals, ttls, pauseTtls, inflightTtls, inflightRedis, partitionTtls,
    rounds: num('rounds', 5),
    nodes: num('nodes', 3, 2),
    redis: num('redis', 3),
    jobs: num('jobs', 20),
    phaseSeconds: num('phase-seconds', 20),
    settle: num('settle', 2, 0),
    warmup: num('warmup', 3, 0),
    logLevel: flags['log-level'] ?? 'info',
    build: !flags['no-build'],
    keep: Boolean(flags.keep),
    jsonOut: flags['json-out'],
  };
}

// ------------------------------------------------------------------------------------ resources

const resources = { clusters: [], workspaces: [], redis: [], proxies: [], db: undefined };
let cleaning;

async function cleanup(keep) {
  cleaning ??= (async () => {
    const problems = [];
    for (const c of resources.clusters) {
      try {
        await c.stopAll();
      } catch (err) {
        problems.push(`stopping daemons: ${err.message}`);
      }
    }
    for (const p of resources.proxies) await p.close().catch(() => {});
    for (const r of resources.redis) {
      try {
        await r.cleanup();
      } catch (err) {
        problems.push(`stopping redis ${r.port}: ${err.message}`);
      }
    }
    if (resources.db) {
      try {
        await resources.db.drop();
      } catch (err) {
        problems.push(`dropping ${resources.db.db}: ${err.message}`);
      }
    }
    if (!keep) for (const w of resources.workspaces) w.cleanup();
    return problems;
  })();
  return cleaning;
}

const log = (...a) => process.stderr.write(`[faults ${new Date().toISOString().slice(11, 23)}] ${a.join(' ')}\n`);

// ------------------------------------------------------------------------------------- helpers

/** The smallest divisor of 60 (seconds) not below `ms`, as a `*\/P` six-field expression. */
function everySeconds(ms) {
  const p = [2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60].find((d) => d * 1000 >= ms) ?? 60;
  return { seconds: p, schedule: `*/${p} * * * * *` };
}

const rand = (lo, hi) => Math.round(lo + Math.random() * (hi - lo));

function clusterFor(opts, ctx, name, ws, env = {}, slotEnv = undefined) {
  // Each process its own node id and log file (logs/<node id>.log of the workspace).
  const cluster = new Cluster(ws, {
    SCHEDULER_STORE: ctx.db.url,
    SCHEDULER_REDIS: ctx.redis.map((r) => r.url).join(','),
    SCHEDULER_REDIS_PREFIX: `bench-faults-${ctx.tag}-${name}:`,
    SCHEDULER_GRACE_PERIOD: '2s',
    SCHEDULER_HTTP: 'off',
    ...env,
  }, { logLevel: opts.logLevel, freshIds: true, logFiles: true, ...(slotEnv ? { slotEnv } : {}) });
  resources.clusters.push(cluster);
  return cluster;
}

const slotsOf = (n) => Array.from({ length: n }, (_, i) => `n${i + 1}`);
const findStart = (ws, pred) => ws.effects().find((e) => e.ev === 'start' && pred(e));

/** The row's lease expiry (store clock): last heartbeat + lease. */
async function leaseOf(db, key, attempt) {
  const [row] = await db.runs('period_key = ? AND attempt = ?', [key, attempt]);
  return row ? { status: row.status, nodeId: row.node_id, expiry: row.heartbeat_at + row.lease_ms, heartbeatAt: row.heartbeat_at, reason: row.reason } : undefined;
}

// ------------------------------------------------------------------------ goal 1: kill -9 takeover

async function takeoverScenario(opts, ctx, ttlMs) {
  const ws = new Workspace(`bench-faults-kill${ttlMs}-`);
  resources.workspaces.push(ws);
  const job = `crash-ttl${ttlMs}`;
  const firstMs = Math.max(60_000, 10 * ttlMs); // attempt 1 "runs long"; attempt 2 is short
  const laterMs = 1000;
  // kill at <= 2T, takeover <= T + 2 s (target), attempt 2 1 s, a restart and some slack.
  const { seconds, schedule } = everySeconds(2 * ttlMs + ttlMs + 2000 + laterMs + 5000);
  ws.writeJob(`${job}.mjs`, longJobSource({ schedule, lockTtl: `${ttlMs}ms`, firstMs, laterMs, extra: { catchUp: '1m' } }));
  const cluster = clusterFor(opts, ctx, `kill${ttlMs}`, ws);
  log(`takeover lockTtl=${ttlMs}ms: ${opts.nodes} nodes, schedule '${schedule}'`);
  await cluster.startAll(slotsOf(opts.nodes));

  const rounds = [];
  const used = new Set();
  const deaths = new Map();
  for (let r = 1; r <= opts.rounds; r++) {
    const round = { round: r };
    rounds.push(round);
    try {
      const notBefore = Date.now();
      const first = await waitFor('an attempt 1 to start', () => findStart(ws, (e) => e.attempt === 1 && !used.has(e.key) && e.t >= notBefore - 200), seconds * 1000 + 30_000, 50);
      used.add(first.key);
      const victim = cluster.byNodeId(first.node);
      if (!victim) throw new Error(`no live process with node id ${first.node}`);
      round.key = first.key;
      round.victim = first.node;
      round.killDelayMs = rand(ttlMs, 2 * ttlMs);
      await sleep(Math.max(0, first.t + round.killDelayMs - Date.now()));
      if (ws.effects().some((e) => e.key === first.key && e.attempt === 1 && e.ev !== 'start')) throw new Error('attempt 1 ended before the kill');
      const killedAt = (await victim.kill9()).sentAt;
      deaths.set(first.node, killedAt);
      round.killDelayMs = killedAt - first.t;
      const replacement = cluster.start(victim.slot); // there are 3 nodes again as soon as it is up
      const second = await waitFor('attempt 2 of the same period', () => findStart(ws, (e) => e.key === first.key && e.attempt === 2), ttlMs + 30_000, 20);
      round.takeoverMs = second.t - killedAt;
      round.takeoverNode = second.node;
      round.otherNode = second.node !== first.node;
      const lease = await leaseOf(ctx.db, first.key, 1);
      if (lease) {
        round.attempt1Status = lease.status;
        round.killToExpiryMs = lease.expiry - killedAt;
        round.expiryToAttempt2Ms = second.t - lease.expiry;
      }
      await replacement.waitStarted();
      round.restartMs = Date.parse(replacement.logs().find((l) => l.msg === 'scheduler started')?.time) - killedAt;
      await waitFor('attempt 2 to end', () => ws.effects().find((e) => e.key === first.key && e.attempt === 2 && e.ev !== 'start'), laterMs + 30_000, 50);
      round.pass = round.takeoverMs <= ttlMs + 2000 && round.otherNode;
      log(`  round ${r}: ${first.key} on ${first.node}, kill at +${round.killDelayMs}ms -> attempt 2 on ${second.node} after ${round.takeoverMs}ms`);
    } catch (err) {
      round.error = err.message;
      round.pass = false;
      log(`  round ${r}: ${err.message}`);
    }
  }
  await cluster.stopAll(20_000);
  const stopped = cluster.exits();
  const effects = ws.effects();
  const dup = duplicates(effects);
  const runs = await ctx.db.runs('job = ?', [job]);
  const taken = summarise(rounds.filter((x) => Number.isFinite(x.takeoverMs)).map((x) => x.takeoverMs));
  return {
    lockTtlMs: ttlMs,
    schedule,
    targetMs: ttlMs + 2000,
    rounds,
    takeover: taken,
    maxMs: taken.max,
    duplicateStarts: dup.sameAttempt,
    stillRunning: runs.filter((x) => x.status === 'running').map((x) => `${x.period_key}#${x.attempt}`),
    attempt1Statuses: countBy(rounds.map((x) => x.attempt1Status ?? 'n/a')),
    exitCodes: stopped.map((s) => `${s.nodeId}:${s.code ?? s.signal}`),
    pass: rounds.length === opts.rounds && rounds.every((x) => x.pass) && dup.sameAttempt.length === 0,
  };
}

// --------------------------------------------------------------------- goal 2: SIGSTOP / SIGCONT

/**
 * `inFlight`: the node is stopped at the instant its heartbeat UPDATE passes a proxy in front of the
 * store (the worst case: the beat's answer, "still yours", is read only after waking). `redis: false`:
 * the cluster runs without Redis (the row is then the only judge of the lease, as with every master down).
 */
async function pauseScenario(opts, ctx, ttlMs, { inFlight = false, redis = true } = {}) {
  const name = `${inFlight ? 'inflight' : 'pause'}${ttlMs}${redis ? '' : '-noredis'}`;
  const ws = new Workspace(`bench-faults-${name}-`);
  resources.workspaces.push(ws);
  const job = `stall-ttl${ttlMs}`;
  const firstMs = Math.max(60_000, 10 * ttlMs);
  const laterMs = 1000;
  const { seconds, schedule } = everySeconds(2 * ttlMs + ttlMs + 2000 + 1000 + 1000 + laterMs + 5000);
  ws.writeJob(`${job}.mjs`, longJobSource({ schedule, lockTtl: `${ttlMs}ms`, firstMs, laterMs, extra: { catchUp: '1m' } }));
  const proxies = new Map();
  if (inFlight) {
    const port = Number(new URL(ctx.db.url).port || 3306);
    for (const slot of slotsOf(opts.nodes)) {
      const proxy = new SniffingProxy(port);
      await proxy.start();
      resources.proxies.push(proxy);
      proxies.set(slot, proxy);
    }
  }
  const viaProxy = (slot) => {
    const u = new URL(ctx.db.url);
    u.port = String(proxies.get(slot).port);
    return u.toString();
  };
  const cluster = clusterFor(opts, ctx, name, ws, {
    ...(redis ? {} : { SCHEDULER_REDIS: '' }),
  }, inFlight ? (slot) => ({ SCHEDULER_STORE: viaProxy(slot) }) : undefined);
  log(`pause${inFlight ? ' during an in-flight heartbeat' : ''} lockTtl=${ttlMs}ms${redis ? '' : ', no Redis'}: ${opts.nodes} nodes, schedule '${schedule}'`);
  await cluster.startAll(slotsOf(opts.nodes));

  const rounds = [];
  const used = new Set();
  for (let r = 1; r <= opts.rounds; r++) {
    const round = { round: r };
    rounds.push(round);
    let paused;
    try {
      const notBefore = Date.now();
      const first = await waitFor('an attempt 1 to start', () => findStart(ws, (e) => e.attempt === 1 && !used.has(e.key) && e.t >= notBefore - 200), seconds * 1000 + 30_000, 50);
      used.add(first.key);
      paused = cluster.byNodeId(first.node);
      if (!paused) throw new Error(`no live process with node id ${first.node}`);
      round.key = first.key;
      round.node = first.node;
      await sleep(Math.max(0, first.t + rand(ttlMs, 2 * ttlMs) - Date.now()));
      let stoppedAt;
      if (inFlight) {
        const target = paused;
        const stopped = new Promise((resolve) => proxies.get(target.slot).armOnce(/update\s+`scheduler_runs`\s+set\s+`heartbeat_at`/i, () => {
          target.proc.kill('SIGSTOP');
          resolve(Date.now());
        }));
        stoppedAt = await Promise.race([stopped, sleep(ttlMs + 5000).then(() => { throw new Error('no heartbeat seen at the proxy'); })]);
      } else {
        stoppedAt = Date.now();
        paused.proc.kill('SIGSTOP');
      }
      round.stopDelayMs = stoppedAt - first.t;
      const second = await waitFor('attempt 2 while the node is paused', () => findStart(ws, (e) => e.key === first.key && e.attempt === 2), ttlMs + 30_000, 20);
      round.takeoverMs = second.t - stoppedAt;
      round.takeoverNode = second.node;
      await sleep(rand(0, 1000));
      const resumedAt = Date.now();
      paused.proc.kill('SIGCONT');
      paused = undefined;
      round.pausedMs = resumedAt - stoppedAt;
      const abort = await waitFor('the paused attempt to abort', () => ws.effects().find((e) => e.key === first.key && e.attempt === 1 && e.ev !== 'start'), 20_000, 10);
      round.ev = abort.ev;
      round.reason = abort.reason ?? null;
      round.abortMs = abort.t - resumedAt;
      const node = cluster.byNodeId(first.node);
      const lost = node?.logs().find((l) => l.msg === 'lease lost: aborting the run' && l.periodKey === first.key);
      round.leaseLostLogMs = lost ? Date.parse(lost.time) - resumedAt : null;
      await waitFor('attempt 2 to end', () => ws.effects().find((e) => e.key === first.key && e.attempt === 2 && e.ev !== 'start'), laterMs + 30_000, 50);
      await sleep(500); // the paused node's refused outcome write
      const rows = await ctx.db.runs('period_key = ?', [first.key]);
      round.statuses = rows.map((x) => `${x.attempt}:${x.status}`).join(' ');
      const a1 = rows.find((x) => x.attempt === 1);
      round.pass = abort.ev === 'abort' && abort.reason === 'lease-lost' && round.abortMs <= 1000 && a1?.status !== 'succeeded';
      log(`  round ${r}: ${first.key} on ${first.node} paused ${round.pausedMs}ms (attempt 2 on ${second.node} after ${round.takeoverMs}ms) -> ${abort.ev} ${abort.reason ?? ''} ${round.abortMs}ms after SIGCONT`);
    } catch (err) {
      if (paused) paused.proc.kill('SIGCONT');
      round.error = err.message;
      round.pass = false;
      log(`  round ${r}: ${err.message}`);
    }
  }
  await cluster.stopAll(20_000);
  const stopped = cluster.exits();
  const effects = ws.effects();
  const dup = duplicates(effects);
  for (const p of proxies.values()) await p.close();
  const aborts = summarise(rounds.filter((x) => Number.isFinite(x.abortMs)).map((x) => x.abortMs));
  return {
    variant: inFlight ? 'paused during an in-flight heartbeat' : 'paused at a random instant',
    redis,
    lockTtlMs: ttlMs,
    schedule,
    targetMs: 1000,
    rounds,
    abort: aborts,
    maxMs: aborts.max,
    reasons: countBy(rounds.map((x) => x.reason ?? x.error ?? 'n/a')),
    duplicateStarts: dup.sameAttempt,
    exitCodes: stopped.map((s) => `${s.nodeId}:${s.code ?? s.signal}`),
    pass: rounds.length === opts.rounds && rounds.every((x) => x.pass) && dup.sameAttempt.length === 0,
  };
}

// ------------------------------------------------------------- goal 4: one node's store partitioned

const REFUSED_OUTCOME = "outcome not recorded: the attempt is no longer this node's";
const NO_OUTCOME = /^lease lost: no outcome is written/;

async function partitionScenario(opts, ctx, ttlMs) {
  const name = `partition${ttlMs}`;
  const ws = new Workspace(`bench-faults-${name}-`);
  resources.workspaces.push(ws);
  const job = `part-ttl${ttlMs}`;
  const firstMs = Math.max(60_000, 10 * ttlMs);
  const laterMs = 1000;
  // cut <= T after the start, abort <= T, takeover <= T + 1 s, attempt 2, the wait after the restore, slack.
  const { seconds, schedule } = everySeconds(3 * ttlMs + laterMs + 8000);
  ws.writeJob(`${job}.mjs`, longJobSource({ schedule, lockTtl: `${ttlMs}ms`, firstMs, laterMs, extra: { catchUp: '1m' } }));
  const port = Number(new URL(ctx.db.url).port || 3306);
  const proxies = new Map();
  for (const slot of slotsOf(opts.nodes)) {
    const proxy = new SniffingProxy(port);
    await proxy.start();
    resources.proxies.push(proxy);
    proxies.set(slot, proxy);
  }
  const viaProxy = (slot) => {
    const u = new URL(ctx.db.url);
    u.port = String(proxies.get(slot).port);
    return u.toString();
  };
  const cluster = clusterFor(opts, ctx, name, ws, {}, (slot) => ({ SCHEDULER_STORE: viaProxy(slot) }));
  log(`partition lockTtl=${ttlMs}ms: ${opts.nodes} nodes, each through its own store proxy, schedule '${schedule}'`);
  await cluster.startAll(slotsOf(opts.nodes));

  const rounds = [];
  const used = new Set();
  for (let r = 1; r <= opts.rounds; r++) {
    const round = { round: r };
    rounds.push(round);
    let cutProxy;
    try {
      const notBefore = Date.now();
      const first = await waitFor('an attempt 1 to start', () => findStart(ws, (e) => e.attempt === 1 && !used.has(e.key) && e.t >= notBefore - 200), seconds * 1000 + 30_000, 50);
      used.add(first.key);
      const node = cluster.byNodeId(first.node);
      if (!node) throw new Error(`no live process with node id ${first.node}`);
      round.key = first.key;
      round.node = first.node;
      await sleep(Math.max(0, first.t + rand(Math.floor(ttlMs / 3), ttlMs) - Date.now()));
      if (ws.effects().some((e) => e.key === first.key && e.attempt === 1 && e.ev !== 'start')) throw new Error('attempt 1 ended before the cut');
      cutProxy = proxies.get(node.slot);
      await cutProxy.cut();
      const cutAt = Date.now();
      round.cutDelayMs = cutAt - first.t;
      const abort = await waitFor('the partitioned attempt to stop', () => ws.effects().find((e) => e.key === first.key && e.attempt === 1 && e.ev !== 'start'), ttlMs + 20_000, 10);
      round.ev = abort.ev;
      round.reason = abort.reason ?? null;
      const second = await waitFor('attempt 2 on another node', () => findStart(ws, (e) => e.key === first.key && e.attempt === 2), ttlMs + 30_000, 20);
      round.takeoverNode = second.node;
      await cutProxy.restore();
      cutProxy = undefined;
      const restoredAt = Date.now();
      round.cutMs = restoredAt - cutAt;
      await waitFor('attempt 2 to end', () => ws.effects().find((e) => e.key === first.key && e.attempt === 2 && e.ev !== 'start'), laterMs + 30_000, 50);
      // A node that lost its lease writes no outcome for that attempt (it says so at the abort), and
      // does not try once the store answers it again (a refused write would show as REFUSED_OUTCOME).
      await sleep(1000);
      round.saidNoOutcome = node.logs().some((l) => NO_OUTCOME.test(String(l.msg)) && l.periodKey === first.key);
      round.triedOutcome = node.logs().some((l) => l.msg === REFUSED_OUTCOME && l.periodKey === first.key);
      const rows = await ctx.db.runs('period_key = ?', [first.key]);
      round.statuses = rows.map((x) => `${x.attempt}:${x.status}`).join(' ');
      const a1 = rows.find((x) => x.attempt === 1);
      if (!a1 || a1.heartbeat_at === null) throw new Error('attempt 1 has no row or no heartbeat');
      round.lastBeatBeforeCutMs = cutAt - a1.heartbeat_at;
      round.abortAfterBeatMs = abort.t - a1.heartbeat_at;
      round.takeoverAfterBeatMs = second.t - a1.heartbeat_at;
      round.overlapMs = Math.max(0, abort.t - second.t);
      // The row as the takeover wrote it: abandoned, its reason, no error. Anything else is an outcome
      // written by the partitioned node (or a takeover that did not happen).
      round.outcomeRecorded = !(a1.status === 'abandoned' && String(a1.reason ?? '').startsWith('lease expired') && a1.error === null)
        || rows.some((x) => x.attempt > 2) || round.triedOutcome;
      round.pass = abort.ev === 'abort' && abort.reason === 'lease-lost' && round.abortAfterBeatMs <= ttlMs + 1000
        && round.takeoverAfterBeatMs >= ttlMs && round.overlapMs === 0 && second.node !== first.node && !round.outcomeRecorded;
      log(`  round ${r}: ${first.key} on ${first.node}, cut at +${round.cutDelayMs}ms -> ${abort.ev} ${abort.reason ?? ''} ${round.abortAfterBeatMs}ms after its last heartbeat; attempt 2 on ${second.node} ${round.takeoverAfterBeatMs}ms after it; outcome recorded by the partitioned node: ${round.outcomeRecorded ? 'YES' : 'no'}`);
    } catch (err) {
      if (cutProxy) await cutProxy.restore().catch(() => {});
      round.error = err.message;
      round.pass = false;
      log(`  round ${r}: ${err.message}`);
    }
  }
  await cluster.stopAll(20_000);
  const stopped = cluster.exits();
  const effects = ws.effects();
  const dup = duplicates(effects);
  for (const p of proxies.values()) await p.close();
  const measured = rounds.filter((x) => Number.isFinite(x.abortAfterBeatMs));
  const abortAfterBeat = summarise(measured.map((x) => x.abortAfterBeatMs));
  const takeoverAfterBeat = summarise(measured.map((x) => x.takeoverAfterBeatMs));
  return {
    lockTtlMs: ttlMs,
    schedule,
    targetMs: ttlMs + 1000,
    rounds,
    abortAfterBeat,
    takeoverAfterBeat,
    maxMs: abortAfterBeat.max,
    outcomesRecorded: rounds.filter((x) => x.outcomeRecorded).length,
    reasons: countBy(rounds.map((x) => x.reason ?? x.error ?? 'n/a')),
    duplicateStarts: dup.sameAttempt,
    exitCodes: stopped.map((s) => `${s.nodeId}:${s.code ?? s.signal}`),
    pass: rounds.length === opts.rounds && rounds.every((x) => x.pass) && dup.sameAttempt.length === 0 && stopped.every((s) => s.code === 0),
  };
}

// ------------------------------------------------------------------------ goal 3: every Redis down

function phaseFigures(effects, jobs, fromMs, toMs) {
  const seconds = Math.round((toMs - fromMs) / 1000);
  const expected = new Set();
  for (let t = fromMs; t < toMs; t += 1000) for (const j of jobs) expected.add(`${j}@${new Date(t).toISOString()}`);
  const firstStart = new Map();
  const winners = {};
  let catchUp = 0;
  for (const e of effects) {
    if (e.ev !== 'start' || !expected.has(e.key)) continue;
    if (!firstStart.has(e.key)) {
      firstStart.set(e.key, e);
      winners[e.node] = (winners[e.node] ?? 0) + 1;
      if (e.trigger !== 'schedule') catchUp += 1;
    }
  }
  const latency = summarise([...firstStart.values()].map((e) => e.t - e.sched));
  const missing = [...expected].filter((k) => !firstStart.has(k));
  return {
    from: new Date(fromMs).toISOString(),
    to: new Date(toMs).toISOString(),
    seconds,
    expected: expected.size,
    ran: firstStart.size,
    perSecond: firstStart.size / seconds,
    expectedPerSecond: expected.size / seconds,
    missing: missing.length,
    missingSample: missing.slice(0, 5),
    catchUp,
    latencyMs: latency,
    winners,
  };
}

async function redisScenario(opts, ctx) {
  const ws = new Workspace('bench-faults-redis-');
  resources.workspaces.push(ws);
  const jobs = Array.from({ length: opts.jobs }, (_, i) => `tick${String(i + 1).padStart(2, '0')}`);
  for (const j of jobs) ws.writeJob(`${j}.mjs`, trivialJobSource({ schedule: '* * * * * *' }));
  for (const r of ctx.redis) if (!r.proc) await r.start();
  const cluster = clusterFor(opts, ctx, 'redis', ws);
  log(`redis: ${opts.nodes} nodes, ${opts.jobs} every-second jobs, ${opts.phaseSeconds}s up then ${opts.phaseSeconds}s with all ${ctx.redis.length} masters stopped`);
  await cluster.startAll(slotsOf(opts.nodes));
  await sleep(opts.warmup * 1000);

  const upFrom = Math.ceil((Date.now() + 1) / 1000) * 1000;
  const upTo = upFrom + opts.phaseSeconds * 1000;
  await sleep(upTo - Date.now() + 50);
  const stopAt = Date.now();
  await Promise.all(ctx.redis.map((r) => r.stop()));
  log(`  all Redis masters stopped (${Date.now() - stopAt}ms)`);
  const downFrom = Math.ceil((stopAt + opts.settle * 1000) / 1000) * 1000;
  const downTo = downFrom + opts.phaseSeconds * 1000;
  await sleep(downTo - Date.now() + 3000); // late starts of the last periods
  await cluster.stopAll(20_000);
  const stopped = cluster.exits();

  const effects = ws.effects();
  const up = phaseFigures(effects, jobs, upFrom, upTo);
  const down = phaseFigures(effects, jobs, downFrom, downTo);
  const transition = phaseFigures(effects, jobs, upTo, downFrom);
  const dup = duplicates(effects);
  const logs = cluster.logs();
  const degradedNodes = [...new Set(logs.filter((l) => l.msg === 'Redis quorum unreachable: claims go on through the run row alone').map((l) => l._node))];
  const claimErrors = logs.filter((l) => l.msg === 'claim failed').length;
  const errorLines = logs.filter((l) => l.level === 'error' || l.level === 'fatal').length;
  const rows = await ctx.db.runs('job LIKE ?', ['tick%']);
  const rowStatuses = countBy(rows.map((x) => x.status));
  const ratio = down.perSecond / up.perSecond;
  return {
    nodes: opts.nodes,
    jobs: opts.jobs,
    stopAt: new Date(stopAt).toISOString(),
    up, transition, down,
    ratio,
    targetRatio: 0.5,
    duplicateStarts: dup.sameAttempt,
    periodsStartedTwice: dup.samePeriod,
    degradedNodes,
    claimErrors,
    errorLogLines: errorLines,
    rowStatuses,
    exitCodes: stopped.map((s) => `${s.nodeId}:${s.code ?? s.signal}`),
    pass: ratio >= 0.5 && dup.samePeriod.length === 0 && dup.sameAttempt.length === 0,
  };
}


// -------------------------------------------------------------------------------------- report

function report(opts, summary) {
  const out = [];
  const p = (s = '') => out.push(s);
  p('cluster-cron fault benchmark');
  p(`command: node bench/faults.mjs ${process.argv.slice(2).join(' ')}`);
  p(`machine: ${cpus().length} CPU(s) (${cpus()[0]?.model ?? '?'}), load average at start ${summary.machine.loadStart.map((x) => x.toFixed(2)).join(' ')}, at end ${summary.machine.loadEnd.map((x) => x.toFixed(2)).join(' ')}; other work shares these cores`);
  p(`node ${process.version}; MariaDB store (private database), ${opts.redis} Redis masters on loopback; daemons log at '${opts.logLevel}' to files`);
  for (const t of summary.takeover ?? []) {
    p();
    p(`== Goal 1: takeover after kill -9, lockTtl ${t.lockTtlMs} ms (schedule '${t.schedule}', ${opts.nodes} nodes, target <= ${t.targetMs} ms)`);
    p(table([
      ['round', 'period', 'killed', 'kill@+ms', 'kill->lease expiry', 'expiry->attempt 2', 'kill->attempt 2', 'on', 'restart ms', 'attempt 1', 'ok'],
      ...t.rounds.map((r) => [r.round, r.key ?? '-', r.victim ?? '-', r.killDelayMs ?? '-', r.killToExpiryMs ?? '-', r.expiryToAttempt2Ms ?? '-', r.takeoverMs ?? '-',
        r.takeoverNode ?? '-', Number.isFinite(r.restartMs) ? r.restartMs : '-', r.attempt1Status ?? '-', r.pass ? 'yes' : `NO${r.error ? ` (${r.error})` : ''}`]),
    ]));
    p(`kill -> attempt 2: min ${t.takeover.min} / p50 ${t.takeover.p50} / max ${t.takeover.max} ms (target ${t.targetMs}); duplicate starts: ${t.duplicateStarts.length}; rows left running: ${t.stillRunning.length}; exits ${t.exitCodes.join(' ')}  => ${t.pass ? 'PASS' : 'FAIL'}`);
  }
  for (const t of summary.pause ?? []) {
    p();
    p(`== Goal 2: paused attempt aborts after waking, ${t.variant}, lockTtl ${t.lockTtlMs} ms${t.redis ? '' : ', no Redis'} (schedule '${t.schedule}', target <= ${t.targetMs} ms after SIGCONT)`);
    p(table([
      ['round', 'period', 'paused', 'stop@+ms', 'stop->attempt 2', 'paused ms', 'SIGCONT->abort', 'SIGCONT->log', 'reason', 'rows', 'ok'],
      ...t.rounds.map((r) => [r.round, r.key ?? '-', r.node ?? '-', r.stopDelayMs ?? '-', r.takeoverMs ?? '-', r.pausedMs ?? '-', r.abortMs ?? '-',
        r.leaseLostLogMs ?? '-', r.reason ?? r.ev ?? '-', r.statuses ?? '-', r.pass ? 'yes' : `NO${r.error ? ` (${r.error})` : ''}`]),
    ]));
    p(`SIGCONT -> abort: min ${t.abort.min} / p50 ${t.abort.p50} / max ${t.abort.max} ms (target ${t.targetMs}); reasons ${JSON.stringify(t.reasons)}; duplicate starts: ${t.duplicateStarts.length}; exits ${t.exitCodes.join(' ')}  => ${t.pass ? 'PASS' : 'FAIL'}`);
  }
  for (const t of summary.partition ?? []) {
    p();
    p(`== Goal 4: one node's store partitioned mid-run, lockTtl ${t.lockTtlMs} ms (schedule '${t.schedule}', ${opts.nodes} nodes each through its own proxy; target: abort <= ${t.targetMs} ms after the last heartbeat, no outcome recorded by the partitioned node)`);
    p(table([
      ['round', 'period', 'partitioned', 'cut@+ms', 'beat->cut', 'beat->abort', 'beat->attempt 2', 'on', 'cut ms', 'no outcome written (said / tried)', 'reason', 'rows', 'outcome by it', 'ok'],
      ...t.rounds.map((r) => [r.round, r.key ?? '-', r.node ?? '-', r.cutDelayMs ?? '-', r.lastBeatBeforeCutMs ?? '-', r.abortAfterBeatMs ?? '-', r.takeoverAfterBeatMs ?? '-',
        r.takeoverNode ?? '-', r.cutMs ?? '-', r.saidNoOutcome === undefined ? '-' : `${r.saidNoOutcome ? 'said' : 'not said'} / ${r.triedOutcome ? 'TRIED' : 'no'}`, r.reason ?? r.ev ?? '-', r.statuses ?? '-', r.outcomeRecorded === undefined ? '-' : r.outcomeRecorded ? 'YES' : 'no',
        r.pass ? 'yes' : `NO${r.error ? ` (${r.error})` : ''}`]),
    ]));
    p(`last heartbeat -> abort: min ${t.abortAfterBeat.min} / p50 ${t.abortAfterBeat.p50} / max ${t.abortAfterBeat.max} ms (target ${t.targetMs}); last heartbeat -> attempt 2: min ${t.takeoverAfterBeat.min} / p50 ${t.takeoverAfterBeat.p50} / max ${t.takeoverAfterBeat.max} ms; outcomes recorded by the partitioned node: ${t.outcomesRecorded} (target 0); reasons ${JSON.stringify(t.reasons)}; duplicate starts: ${t.duplicateStarts.length}; exits ${t.exitCodes.join(' ')}  => ${t.pass ? 'PASS' : 'FAIL'}`);
  }
  if (summary.redis) {
    const r = summary.redis;
    p();
    p(`== Goal 3: claims with every Redis master down (${r.nodes} nodes, ${r.jobs} jobs '* * * * * *', trivial bodies; masters stopped at ${r.stopAt})`);
    const row = (name, f) => [name, `${f.from.slice(11, 19)}-${f.to.slice(11, 19)}`, f.seconds, f.expected, f.ran, f.missing, f.catchUp, fmt(f.perSecond, 2),
      fmt(f.latencyMs.p50, 0), fmt(f.latencyMs.p99, 0), fmt(f.latencyMs.max, 0), Object.entries(f.winners).sort().map(([n, c]) => `${n}:${c}`).join(' ')];
    p(table([
      ['phase', 'window (UTC)', 's', 'expected', 'ran', 'missing', 'catch-up', 'periods/s', 'lat p50', 'lat p99', 'lat max', 'winners'],
      row('Redis up', r.up),
      row('transition', r.transition),
      row('Redis down', r.down),
    ]));
    p(`rate ratio down/up: ${fmt(r.ratio, 3)} (target >= ${r.targetRatio}); periods started twice: ${r.periodsStartedTwice.length}; same attempt twice: ${r.duplicateStarts.length}`);
    p(`nodes that logged the degraded mode: ${r.degradedNodes.join(', ') || 'none'}; 'claim failed' lines: ${r.claimErrors}; error lines: ${r.errorLogLines}; rows ${JSON.stringify(r.rowStatuses)}; exits ${r.exitCodes.join(' ')}  => ${r.pass ? 'PASS' : 'FAIL'}`);
  }
  p();
  p(`overall: ${summary.pass ? 'PASS' : 'FAIL'}  (${summary.elapsedS} s)`);
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------- main

async function main() {
  const opts = parseOptions(process.argv.slice(2));
  const t0 = Date.now();
  const loadStart = loadavg();
  if (opts.build) {
    log('npm run build');
    execFileSync('npm', ['run', 'build'], { cwd: PROJECT_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const onSignal = (sig) => {
    log(`${sig}: cleaning up`);
    void cleanup(opts.keep).then(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const ctx = { tag: randomTag() };
  const summary = { bench: 'faults', options: { ...opts }, machine: { cpus: cpus().length, loadStart } };
  try {
    ctx.db = resources.db = await createFaultDatabase();
    log(`database ${ctx.db.db}`);
    ctx.redis = await startRedisServers(opts.redis);
    resources.redis.push(...ctx.redis);
    log(`redis on ports ${ctx.redis.map((r) => r.port).join(', ')}`);
    if (opts.goals.includes('takeover')) {
      summary.takeover = [];
      for (const ttl of opts.ttls) summary.takeover.push(await takeoverScenario(opts, ctx, ttl));
    }
    if (opts.goals.includes('pause')) {
      summary.pause = [];
      for (const ttl of opts.pauseTtls) summary.pause.push(await pauseScenario(opts, ctx, ttl));
    }
    if (opts.goals.includes('pause-inflight')) {
      summary.pause ??= [];
      for (const ttl of opts.inflightTtls) {
        for (const r of opts.inflightRedis) summary.pause.push(await pauseScenario(opts, ctx, ttl, { inFlight: true, redis: r === 'on' }));
      }
    }
    if (opts.goals.includes('partition')) {
      summary.partition = [];
      for (const ttl of opts.partitionTtls) summary.partition.push(await partitionScenario(opts, ctx, ttl));
    }
    if (opts.goals.includes('redis')) summary.redis = await redisScenario(opts, ctx);
  } finally {
    const problems = await cleanup(opts.keep);
    if (problems.length) log(`cleanup problems: ${problems.join('; ')}`);
    summary.cleanup = problems;
  }
  summary.machine.loadEnd = loadavg();
  summary.elapsedS = Math.round((Date.now() - t0) / 1000);
  summary.pass = [...(summary.takeover ?? []), ...(summary.pause ?? []), ...(summary.partition ?? []), ...(summary.redis ? [summary.redis] : [])].every((s) => s.pass);
  process.stdout.write(`${report(opts, summary)}\n`);
  if (opts.keep) process.stdout.write(`kept: ${resources.workspaces.map((w) => w.dir).join(' ')}\n`);
  const compact = {
    bench: 'faults',
    pass: summary.pass,
    cpus: summary.machine.cpus,
    load: [summary.machine.loadStart[0], summary.machine.loadEnd[0]].map((x) => Number(x.toFixed(2))),
    takeover: summary.takeover?.map((t) => ({ lockTtlMs: t.lockTtlMs, targetMs: t.targetMs, roundsMs: t.rounds.map((r) => r.takeoverMs ?? null), maxMs: t.maxMs, pass: t.pass })),
    pause: summary.pause?.map((t) => ({ variant: t.variant, redis: t.redis, lockTtlMs: t.lockTtlMs, targetMs: t.targetMs, roundsMs: t.rounds.map((r) => r.abortMs ?? null), reasons: t.reasons, maxMs: t.maxMs, pass: t.pass })),
    partition: summary.partition?.map((t) => ({
      lockTtlMs: t.lockTtlMs, targetMs: t.targetMs, abortAfterBeatMs: t.rounds.map((r) => r.abortAfterBeatMs ?? null),
      takeoverAfterBeatMs: t.rounds.map((r) => r.takeoverAfterBeatMs ?? null), maxMs: t.maxMs, outcomesRecorded: t.outcomesRecorded, pass: t.pass,
    })),
    redis: summary.redis && {
      upPerSecond: summary.redis.up.perSecond, downPerSecond: summary.redis.down.perSecond, ratio: Number(summary.redis.ratio.toFixed(3)),
      upLatencyMs: { p50: summary.redis.up.latencyMs.p50, p99: summary.redis.up.latencyMs.p99 },
      downLatencyMs: { p50: summary.redis.down.latencyMs.p50, p99: summary.redis.down.latencyMs.p99 },
      missing: { up: summary.redis.up.missing, transition: summary.redis.transition.missing, down: summary.redis.down.missing },
      periodsStartedTwice: summary.redis.periodsStartedTwice.length, pass: summary.redis.pass,
    },
    elapsedS: summary.elapsedS,
  };
  if (opts.jsonOut) writeFileSync(opts.jsonOut, `${JSON.stringify(summary, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(compact)}\n`);
  process.exitCode = summary.pass ? 0 : 1;
}

main().catch(async (err) => {
  log(`failed: ${err.stack ?? err}`);
  await cleanup(false).catch(() => {});
  process.exit(2);
});
