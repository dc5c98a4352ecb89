/**
 * A seeded chaos soak for cluster-cron (plain ESM, no build step), shared by
 * test/fault/chaos.test.ts (about 60 s of faults, part of `npm test`) and bench/chaos.mjs (longer).
 *
 * Five real `bin/scheduler run` daemons, three Redis masters started here on free ports, MariaDB (a
 * private database) behind a TCP proxy that can cut it, or (`engine`, see ENGINES) a replicated
 * store started here whose fault is a failover instead of the cut. A fault starts every 8-15 s, chosen by a
 * PRNG seeded from `seed`: kill -9 of a node and a restart (same node id, fresh process), SIGSTOP of a
 * node past its lease then SIGCONT, SIGTERM of a node and a restart, one, two or three Redis masters
 * down (killed and restarted empty, or frozen with SIGSTOP and thawed), the store cut. The whole fault
 * plan (instants, kinds, targets, durations) is drawn from the seed before the soak starts, so a seed
 * replays the same plan (the timing of the cluster itself is of course not replayed).
 *
 * Every job body appends its own side effects (start / end / fail / abort with its reason; job,
 * period key, attempt, node, pid, time) to a file. After the fault phase everything is restored, the
 * cluster settles, the nodes are stopped with SIGTERM, and the bodies' records plus
 * `bin/scheduler history --json --limit 100000` are checked (see `analyse`).
 *
 * Never touches the shared Redis on 6379 or any database other than the one it creates.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_MARIADB_ADMIN, createMariaDb } from './databases.mjs';
import { byPeriod } from './effects.mjs';
import { definitionFields } from './job-sources.mjs';
import { BIN, Daemon, exited, procState, randomTag, readJsonLines, runCli, sleep, tail, waitFor } from './process.mjs';
import { StoreProxy, accepts } from './proxy.mjs';
import { redisAnswers, startRedisServers } from './redis.mjs';
import { GaleraCluster } from './galera.mjs';
import { startPgReplicas } from './pg-replicas.mjs';
import { countBy, table } from './stats.mjs';
import { Workspace } from './workspace.mjs';

// ------------------------------------------------------------------------------------------ PRNG

/** mulberry32: a small, well-mixed 32-bit PRNG. Returns floats in [0, 1). */
export function prng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    /** an integer in [lo, hi] */
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (list) => list[Math.floor(next() * list.length)],
    chance: (p) => next() < p,
    /** `k` distinct elements of `list`, in random order */
    sample: (list, k) => {
      const copy = [...list];
      for (let i = copy.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [copy[i], copy[j]] = [copy[j], copy[i]];
      }
      return copy.slice(0, k);
    },
  };
}

/** The seed from a flag value, CHAOS_SEED, or a fresh random one. */
export function resolveSeed(value = process.env.CHAOS_SEED) {
  if (value !== undefined && value !== '') {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new Error(`chaos seed: expected a whole number from 0 to 4294967295, got ${value}`);
    return n;
  }
  return Math.floor(Math.random() * 0x7fffffff);
}

// ------------------------------------------------------------------------------------------ jobs

/**
 * The soak's jobs. `stepS`: the period spacing in seconds (every schedule divides a minute), used to
 * enumerate the periods that must each have a row. `retries`: how many failed attempts a period may
 * end with after its retries.
 */
export const CHAOS_JOBS = [
  {
    name: 'tick', stepS: 1, retries: 0,
    fields: { schedule: '* * * * * *', lockTtl: '3s', overlap: 'skip', catchUp: '30s' },
    body: { minMs: 50, maxMs: 250 },
  },
  {
    name: 'slow', stepS: 5, retries: 0,
    fields: { schedule: '*/5 * * * * *', lockTtl: '2s', overlap: 'skip', catchUp: '30s', coalesce: false },
    body: { minMs: 2000, maxMs: 3000 },
  },
  {
    name: 'flaky', stepS: 4, retries: 2,
    fields: { schedule: '*/4 * * * * *', lockTtl: '3s', overlap: 'skip', catchUp: '30s', retries: 2, retryDelay: '1s' },
    body: { minMs: 100, maxMs: 400, failOnAttempt: 1 },
  },
];

/**
 * A job file whose body records its own side effects. The body's duration is derived from the
 * period key (the same for every attempt of a period, and on a replay).
 */
export function chaosJobSource(job) {
  const fields = definitionFields({ name: job.name, ...job.fields });
  const { minMs, maxMs, failOnAttempt = 0 } = job.body;
  return `import { appendFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
const hash = (s) => { let h = 2166136261; for (const c of s) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0; return h; };
export default {
${fields}
  async run(ctx) {
    const me = { job: ctx.job, key: ctx.periodKey, sched: ctx.scheduledAt.getTime(), attempt: ctx.attempt, node: ctx.nodeId, pid: process.pid };
    rec({ ev: 'start', ...me, trigger: ctx.trigger, runId: String(ctx.runId) });
    const ms = ${minMs} + (hash(ctx.periodKey) % ${maxMs - minMs + 1});
    await new Promise((resolve, reject) => {
      let timer;
      const onAbort = () => {
        clearTimeout(timer);
        rec({ ev: 'abort', ...me, reason: String(ctx.signal.reason) });
        reject(new Error('aborted: ' + String(ctx.signal.reason)));
      };
      timer = setTimeout(() => { ctx.signal.removeEventListener('abort', onAbort); resolve(); }, ms);
      if (ctx.signal.aborted) onAbort();
      else ctx.signal.addEventListener('abort', onAbort, { once: true });
    });
    // Before its side effect, the body reads its signal, as the README asks of a body whose effects must
    // not overlap another attempt's: the read proves the lease then and there. Without it, a timer due
    // as the process wakes from a SIGSTOP past its lease runs before the fence's check (a known limit):
    // seed 202 once recorded such an 'end' 3 s after the takeover's attempt had started.
    if (ctx.signal.aborted) {
      rec({ ev: 'abort', ...me, reason: String(ctx.signal.reason) });
      throw new Error('aborted: ' + String(ctx.signal.reason));
    }
    if (ctx.attempt === ${failOnAttempt}) {
      rec({ ev: 'fail', ...me });
      throw new Error('chaos: attempt ${failOnAttempt} fails on purpose');
    }
    rec({ ev: 'end', ...me });
    return { ok: true, ms };
  },
};
`;
}

// ---------------------------------------------------------------------------------------- plan

const NODE_IDS = ['c1', 'c2', 'c3', 'c4', 'c5'];
/**
 * The store under the soak (`engine`): MariaDB behind the cutting proxy (the default), a PostgreSQL
 * primary and synchronous or asynchronous standby on libpq's multi-host URL, or a three-node MariaDB
 * Galera cluster on a host list; each replicated one started here (test/harness/pg-replicas.mjs,
 * galera.mjs).
 */
export const ENGINES = ['mariadb', 'pg-sync', 'pg-async', 'galera'];
const STARTUP_MS = 4000; // planning allowance for a restarted daemon to be up again
export const GRACE_MS = 1500; // SCHEDULER_GRACE_PERIOD of the nodes: the 2-3 s body is sometimes interrupted

/**
 * The fault plan for `phaseMs` of faults, from the seed alone. Each fault: { at (ms from the start
 * of the fault phase), kind, ... }. Node faults target a node that the plan has up at that instant,
 * and keep at least 3 of 5 nodes unimpaired (2 for a small share of the incidents); a store cut is
 * not planned over another one; Redis faults take masters that are up.
 *
 * `everyKind`: the first faults are one of each kind (in a seeded order, each the first of the kinds
 * not yet planned that fits at its instant), spaced 6-9 s instead of 8-15 s, so that a short soak (the
 * test's 45 s) still meets every kind; the weighted draw takes over once each kind has been planned.
 */
export function planFaults(seed, phaseMs, { everyKind = false, engine = 'mariadb' } = {}) {
  if (!ENGINES.includes(engine)) throw new Error(`chaos: unknown store engine ${engine} (one of ${ENGINES.join(', ')})`);
  const r = prng(seed);
  const nodeBusy = new Map(NODE_IDS.map((n) => [n, 0]));
  const redisBusy = [0, 0, 0];
  let storeBusy = 0;
  // pg-async: when the last kill -9 or SIGTERM of a node ends (a node that dies holding outcomes a
  // failover then loses cannot write them back: two faults the promise does not cover, see below).
  let nodeDeathEnds = -Infinity;
  const asyncWindows = [];
  const plan = [];
  // Beside MariaDB behind the proxy the store's fault is a cut; on a replicated store, a failover.
  const kinds = [
    ['kill9', 22], ['pause', 18], ['term', 18], ['redis', 20], [engine === 'mariadb' ? 'store' : 'failover', 22],
  ];
  const weighted = () => {
    let x = r.next() * kinds.reduce((s, [, w]) => s + w, 0);
    for (const [k, w] of kinds) if ((x -= w) < 0) return k;
    return kinds[0][0];
  };
  const tryFault = (at, kind) => {
    const upNodes = NODE_IDS.filter((n) => nodeBusy.get(n) <= at);
    switch (kind) {
      case 'kill9':
      case 'pause':
      case 'term': {
        const minUpAfter = r.chance(0.1) ? 2 : 3;
        if (upNodes.length - 1 < minUpAfter) return undefined;
        const node = r.pick(upNodes);
        // pg-async: no node dies within 10 s of a failover that loses its tail (its written outcomes
        // would be lost with nobody left to write them back; the Redis key then stops a second run,
        // but the period shows no row: outside what asynchronous replication keeps).
        const nearFailover = (end) => asyncWindows.some(([from, to]) => at < to && end > from);
        if (kind === 'kill9') {
          const downMs = r.int(2000, 5000);
          if (nearFailover(at + downMs + STARTUP_MS)) return undefined;
          nodeBusy.set(node, at + downMs + STARTUP_MS);
          nodeDeathEnds = Math.max(nodeDeathEnds, at + downMs + STARTUP_MS);
          return { at, kind, node, downMs };
        }
        if (kind === 'pause') {
          const pauseMs = r.int(5000, 9000); // past every job's lease (2-3 s) and a takeover
          nodeBusy.set(node, at + pauseMs + 500);
          return { at, kind, node, pauseMs };
        }
        const downMs = r.int(1000, 4000);
        if (nearFailover(at + GRACE_MS + 1000 + downMs + STARTUP_MS)) return undefined;
        nodeBusy.set(node, at + GRACE_MS + 1000 + downMs + STARTUP_MS);
        nodeDeathEnds = Math.max(nodeDeathEnds, at + GRACE_MS + 1000 + downMs + STARTUP_MS);
        return { at, kind, node, downMs };
      }
      case 'redis': {
        const up = [0, 1, 2].filter((i) => redisBusy[i] <= at);
        if (up.length === 0) return undefined;
        const count = r.int(1, 3);
        if (count > up.length) return undefined;
        const masters = r.sample(up, count).sort();
        const downMs = r.int(3000, 10_000);
        let mode = r.chance(0.6) ? 'kill' : 'freeze'; // kill: restarted empty; freeze: SIGSTOP, keeps its keys
        // pg-async: a majority of masters never restarts empty (the kept keys are what stops a period
        // whose row the failover lost from running again: the store and Redis must not both lose it).
        if (engine === 'pg-async' && count >= 2) mode = 'freeze';
        for (const i of masters) redisBusy[i] = at + downMs + 1000;
        return { at, kind, masters, mode, downMs };
      }
      case 'store': {
        if (storeBusy > at) return undefined;
        const downMs = r.int(3000, 10_000);
        storeBusy = at + downMs + 1000;
        return { at, kind, downMs };
      }
      case 'failover': {
        if (storeBusy > at) return undefined;
        // pg-*: the primary crashed, the standby promoted downMs later, the old primary rebuilt as
        // its standby; pg-async cuts the replication cutMs before the crash (that tail is lost).
        // galera: a node killed and restarted, or isolated into a minority and healed, after downMs.
        const downMs = r.int(1500, 4000);
        const cutMs = engine === 'pg-async' ? r.int(2000, 4000) : 0;
        const mode = engine === 'galera' ? (r.chance(0.5) ? 'kill' : 'partition') : 'crash';
        const node = engine === 'galera' ? r.int(0, 2) : undefined;
        if (engine === 'pg-async' && nodeDeathEnds > at - 10_000) return undefined;
        // The repair (a base backup, an IST) takes several seconds more before the next one.
        storeBusy = at + cutMs + downMs + 20_000;
        if (engine === 'pg-async') asyncWindows.push([at - 10_000, at + cutMs + downMs + 10_000]);
        return { at, kind, mode, downMs, cutMs, ...(node !== undefined ? { node } : {}) };
      }
      default:
        throw new Error(kind);
    }
  };
  // Kinds still to be planned (everyKind), in a seeded order.
  const owed = everyKind ? r.sample(kinds.map(([k]) => k), kinds.length) : [];
  // pg-async: the failover first, before any node death can stand in its way (see nearFailover).
  if (engine === 'pg-async' && owed.length > 0) owed.sort((a, b) => (a === 'failover' ? -1 : b === 'failover' ? 1 : 0));
  const pickFault = (at) => {
    for (const kind of owed) {
      // A few tries each: a kind's own draw (which node, how many masters) may not fit at this instant.
      for (let i = 0; i < 4; i++) {
        const f = tryFault(at, kind);
        if (f) {
          owed.splice(owed.indexOf(kind), 1);
          return f;
        }
      }
    }
    for (let i = 0; i < 12; i++) {
      const f = tryFault(at, weighted());
      if (f) return f;
    }
    return undefined;
  };
  let t = r.int(3000, 6000);
  while (t < phaseMs - 2000) {
    const f = pickFault(t);
    if (f) plan.push(f);
    // Incidents come together now and then: a second fault a little later, overlapping the first.
    if (r.chance(0.3)) {
      const t2 = t + r.int(1000, 4000);
      if (t2 < phaseMs - 2000) {
        const g = pickFault(t2);
        if (g) plan.push({ ...g, compound: true });
      }
    }
    t += owed.length > 0 ? r.int(6000, 9000) : r.int(8000, 15_000);
  }
  return plan;
}

export function describeFault(f) {
  const at = `+${(f.at / 1000).toFixed(1)}s`;
  switch (f.kind) {
    case 'kill9': return `${at} kill -9 ${f.node}, restart after ${f.downMs}ms`;
    case 'pause': return `${at} SIGSTOP ${f.node} for ${f.pauseMs}ms`;
    case 'term': return `${at} SIGTERM ${f.node}, restart after ${f.downMs}ms`;
    case 'redis': return `${at} Redis ${f.masters.map((i) => `r${i + 1}`).join('+')} down (${f.mode}) for ${f.downMs}ms`;
    case 'store': return `${at} store cut for ${f.downMs}ms`;
    case 'failover': return f.mode === 'crash'
      ? `${at} ${f.cutMs ? `replication cut, ${f.cutMs}ms later ` : ''}primary crashed, standby promoted after ${f.downMs}ms`
      : `${at} galera${f.node + 1} ${f.mode === 'kill' ? 'killed' : 'isolated'} for ${f.downMs}ms`;
    default: return `${at} ${JSON.stringify(f)}`;
  }
}

export function faultLabel(f) {
  if (f.kind === 'redis') return `redis-${f.masters.length}-down-${f.mode}`;
  if (f.kind === 'store') return 'store-cut';
  if (f.kind === 'failover') return f.mode === 'crash' ? (f.cutMs ? 'failover-async' : 'failover') : `galera-${f.mode}`;
  if (f.kind === 'kill9') return 'kill-9+restart';
  if (f.kind === 'pause') return 'sigstop+sigcont';
  if (f.kind === 'term') return 'sigterm+restart';
  return f.kind;
}

// ---------------------------------------------------------------------------------------- nodes

/**
 * One node slot: a node id and the daemon process currently holding it. A restart is a fresh
 * process with the same node id. An exit the soak did not ask for is recorded and, like a service
 * manager would, the slot is started again after 2 s.
 */
class ChaosNode {
  constructor(soak, nodeId) {
    this.soak = soak;
    this.nodeId = nodeId;
    this.proc = undefined;
    this.generation = 0;
    this.expectingExit = false;
    this.logFile = undefined;
  }

  get alive() {
    return this.proc !== undefined && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  get pid() {
    return this.proc?.pid;
  }

  spawn() {
    const s = this.soak;
    this.generation += 1;
    this.logFile = join(s.ws.logsDir, `${this.nodeId}.${this.generation}.log`);
    const { proc } = new Daemon([], {
      bin: s.bin,
      cwd: s.ws.dir,
      logFile: this.logFile,
      env: {
        SCHEDULER_NODE_ID: this.nodeId,
        SCHEDULER_STORE: s.storeUrl,
        SCHEDULER_REDIS: s.redis.map((r) => r.url).join(','),
        SCHEDULER_REDIS_PREFIX: s.redisPrefix,
        SCHEDULER_JOBS_DIR: s.ws.jobsDir,
        SCHEDULER_LOG_LEVEL: s.logLevel,
        SCHEDULER_GRACE_PERIOD: `${GRACE_MS}ms`,
        SCHEDULER_HTTP: 'off',
        SIDE_EFFECTS: s.ws.effectsFile,
      },
    });
    this.proc = proc;
    this.expectingExit = false;
    const startedAt = Date.now();
    const info = { nodeId: this.nodeId, pid: proc.pid, generation: this.generation, spawnedAt: startedAt, logFile: this.logFile };
    s.processes.push(info);
    proc.on('exit', (code, signal) => {
      info.exitedAt = Date.now();
      info.code = code;
      info.signal = signal;
      s.deaths.set(proc.pid, Math.min(info.killedAt ?? Infinity, info.exitedAt));
      if (info.killedAt !== undefined || signal === 'SIGKILL') s.kills.set(proc.pid, Math.min(info.killedAt ?? Infinity, info.exitedAt));
      if (this.proc === proc && !this.expectingExit && !s.stopping) {
        const ev = { nodeId: this.nodeId, pid: proc.pid, code, signal, t: info.exitedAt, storeCut: Boolean(s.proxy?.isCut) || s.failingOver || s.storeCutEndedAt > info.exitedAt - 5000, logTail: tail(this.logFile, 3) };
        s.unexpectedExits.push(ev);
        s.log(`${this.nodeId} (pid ${proc.pid}) exited on its own: code ${code} signal ${signal}${ev.storeCut ? ' (store cut)' : ''}; restarting in 2 s`);
        setTimeout(() => {
          if (this.proc === proc && !s.stopping) {
            this.spawn();
            void this.watchStart();
          }
        }, 2000);
      }
    });
    return info;
  }

  /** Resolves when the current process has logged 'scheduler started' (false if it exited first or timed out). */
  async waitStarted(timeoutMs = 60_000) {
    const proc = this.proc;
    const file = this.logFile;
    const until = Date.now() + timeoutMs;
    for (;;) {
      if (existsSync(file) && readFileSync(file, 'utf8').includes('"scheduler started"')) return true;
      if (proc.exitCode !== null || proc.signalCode !== null || Date.now() > until) return false;
      await sleep(100);
    }
  }

  /** Records how long the current process took to start (a harness problem if it never did). */
  async watchStart() {
    const info = this.soak.processes.find((p) => p.pid === this.pid);
    const ok = await this.waitStarted();
    if (ok && info) info.startedMs = Date.now() - info.spawnedAt;
    else if (info && info.exitedAt === undefined && !this.soak.stopping) this.soak.harnessProblems.push(`${this.nodeId} pid ${info.pid} did not log 'scheduler started' within 60 s: ${tail(info.logFile, 3)}`);
  }

  signal(sig) {
    const info = this.soak.processes.find((p) => p.pid === this.pid);
    if (sig === 'SIGKILL' && info) info.killedAt = Date.now();
    this.proc.kill(sig);
  }

  /** SIGTERM and wait for the exit (SIGKILL after `killAfterMs`). Returns { code, signal, ms, killed }. */
  async term(killAfterMs) {
    const proc = this.proc;
    this.expectingExit = true;
    const t0 = Date.now();
    const done = exited(proc);
    try { proc.kill('SIGCONT'); } catch { /* gone */ }
    proc.kill('SIGTERM');
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      this.signal('SIGKILL');
    }, killAfterMs);
    await done;
    clearTimeout(timer);
    return { code: proc.exitCode, signal: proc.signalCode, ms: Date.now() - t0, killed };
  }
}

// ------------------------------------------------------------------------------------------ soak

/**
 * Runs one soak. Options: seconds (of faults), seed, bin (path of bin/scheduler), log (a function
 * taking a line), settleMs (deadline of the settling phase), keep (leave the workspace), logLevel,
 * everyKind (see planFaults).
 * Returns { seed, plan, injected, summary, violations, report, workspace }.
 */
export async function runChaos(options) {
  const soak = new Soak(options);
  try {
    return await soak.run();
  } finally {
    await soak.cleanup();
  }
}

class Soak {
  constructor({ seconds = 60, seed, bin = BIN, log, settleMs = 90_000, keep = false, logLevel = 'info', adminUrl, everyKind = false, engine = 'mariadb' } = {}) {
    this.seconds = seconds;
    this.engine = engine;
    this.failingOver = false;
    this.everyKind = everyKind;
    this.seed = seed ?? resolveSeed();
    this.bin = bin;
    this.log = log ?? ((line) => process.stderr.write(`[chaos ${new Date().toISOString().slice(11, 23)}] ${line}\n`));
    this.settleMs = settleMs;
    this.keep = keep;
    this.logLevel = logLevel;
    this.adminUrl = adminUrl ?? BENCH_MARIADB_ADMIN;
    this.tag = randomTag();
    this.redisPrefix = `chaos-${this.tag}:`;
    this.nodes = [];
    this.redis = [];
    this.processes = [];
    /** pid -> the instant it was killed or exited */
    this.deaths = new Map();
    /** pid -> the instant it was sent SIGKILL (a subset of deaths) */
    this.kills = new Map();
    /** { pid, nodeId, from, to } */
    this.pauses = [];
    this.unexpectedExits = [];
    this.harnessProblems = [];
    this.injected = [];
    this.stopping = false;
    this.storeCutEndedAt = 0;
    this.phaseOver = new AbortController();
    this.pending = new Set();
  }

  /** Sleeps `ms`, or less when the fault phase ends (every fault is then restored at once). */
  wait(ms) {
    if (this.phaseOver.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.phaseOver.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.phaseOver.signal.addEventListener('abort', done, { once: true });
    });
  }

  async setup() {
    this.ws = new Workspace('chaos-');
    for (const job of CHAOS_JOBS) this.ws.writeJob(`${job.name}.mjs`, chaosJobSource(job));

    const dbName = `cron_chaos_${this.tag}`.replace(/[^a-z0-9_]/gi, '_').toLowerCase();
    if (this.engine === 'mariadb') {
      this.db = await createMariaDb('cron_chaos', { adminUrl: this.adminUrl });
      const u = new URL(this.db.url);
      this.proxy = new StoreProxy(Number(u.port || 3306), u.hostname);
      await this.proxy.start();
      this.storeUrl = this.proxy.urlFor(this.db.url);
      this.cliStoreUrl = this.db.url;
    } else if (this.engine === 'galera') {
      this.galera = new GaleraCluster();
      await this.galera.start();
      await this.galera.createDatabase(dbName);
      this.storeUrl = this.cliStoreUrl = this.galera.multiUrl(dbName);
    } else {
      this.pair = await startPgReplicas({ sync: this.engine === 'pg-sync' });
      this.pair.createDatabase(dbName);
      await this.pair.replicating();
      this.storeUrl = this.cliStoreUrl = this.pair.url(dbName);
    }
    this.redis = await startRedisServers(3);
    this.log(`workspace ${this.ws.dir}; store ${this.engine}${this.db ? ` database ${this.db.name} (proxy :${this.proxy.port})` : ` ${this.storeUrl}`}; redis ${this.redis.map((r) => r.port).join(', ')}`);
    // The tables exist before the nodes race for them (every node also migrates, under a lock).
    const m = await runCli(['migrate'], { bin: this.bin, cwd: this.ws.dir, env: this.cliEnv() });
    if (m.code !== 0) throw new Error(`migrate exited ${m.code}: ${m.stderr}`);
  }

  cliEnv() {
    return { SCHEDULER_STORE: this.cliStoreUrl, SCHEDULER_JOBS_DIR: this.ws.jobsDir, SCHEDULER_LOG_LEVEL: 'warn' };
  }

  async history() {
    const r = await runCli(['history', '--json', '--limit', '100000'], { bin: this.bin, cwd: this.ws.dir, env: this.cliEnv() });
    if (r.code !== 0) throw new Error(`history exited ${r.code}: ${r.stderr.slice(0, 500)}`);
    const parsed = JSON.parse(r.stdout);
    return Array.isArray(parsed) ? parsed : parsed.runs;
  }

  effects() {
    return this.ws.effects();
  }

  node(id) {
    return this.nodes.find((n) => n.nodeId === id);
  }

  // ------------------------------------------------------------------------------- faults

  /** After `downMs` (less when the fault phase ends), a fresh process in the node's slot. */
  async restartAfter(n, rec, downMs) {
    await this.wait(downMs);
    const info = n.spawn();
    rec.restartPid = info.pid;
    rec.restoredAt = Date.now();
    await n.watchStart();
  }

  async inject(f) {
    const rec = { ...f, label: faultLabel(f), plannedAt: this.phaseStart + f.at, injectedAt: Date.now(), notes: [] };
    this.injected.push(rec);
    const note = (s) => rec.notes.push(s);
    try {
      switch (f.kind) {
        case 'kill9': {
          const n = this.node(f.node);
          if (!n.alive) { rec.skipped = 'target not running'; break; }
          const proc = n.proc;
          rec.pid = proc.pid;
          n.expectingExit = true;
          const done = exited(proc);
          n.signal('SIGKILL');
          await done;
          if (proc.signalCode !== 'SIGKILL') this.harnessProblems.push(`kill -9 of ${f.node} pid ${proc.pid}: exited with ${proc.exitCode ?? proc.signalCode}`);
          await this.restartAfter(n, rec, f.downMs);
          break;
        }
        case 'pause': {
          const n = this.node(f.node);
          if (!n.alive) { rec.skipped = 'target not running'; break; }
          const pid = n.pid;
          rec.pid = pid;
          const p = { pid, nodeId: f.node, from: Date.now(), to: Infinity };
          this.pauses.push(p);
          n.signal('SIGSTOP');
          const stopped = await waitFor(`${f.node} to be stopped`, () => procState(pid) === 'T', 3000, 20).catch(() => false);
          if (!stopped) this.harnessProblems.push(`SIGSTOP of ${f.node} pid ${pid}: /proc state ${procState(pid)}`);
          await this.wait(f.pauseMs);
          n.proc.kill('SIGCONT');
          p.to = Date.now();
          rec.restoredAt = p.to;
          if (procState(pid) === 'T') this.harnessProblems.push(`SIGCONT of ${f.node} pid ${pid}: still stopped`);
          break;
        }
        case 'term': {
          const n = this.node(f.node);
          if (!n.alive) { rec.skipped = 'target not running'; break; }
          rec.pid = n.pid;
          const r = await n.term(30_000);
          rec.exit = r;
          if (r.killed) note(`did not exit within 30 s of SIGTERM: killed`);
          else note(`exit ${r.code ?? r.signal} ${r.ms} ms after SIGTERM`);
          await this.restartAfter(n, rec, f.downMs);
          break;
        }
        case 'redis': {
          const servers = f.masters.map((i) => this.redis[i]);
          if (servers.some((s) => s.chaosDown)) { rec.skipped = 'a master is already down'; break; }
          for (const s of servers) s.chaosDown = true;
          try {
            if (f.mode === 'kill') await Promise.all(servers.map((s) => s.stop()));
            else for (const s of servers) s.proc.kill('SIGSTOP');
            for (const s of servers) if (await redisAnswers(s.port)) this.harnessProblems.push(`Redis ${s.port} still answers after ${f.mode}`);
            await this.wait(f.downMs);
          } finally {
            if (f.mode === 'kill') await Promise.all(servers.map((s) => s.start()));
            else for (const s of servers) s.proc.kill('SIGCONT');
            for (const s of servers) s.chaosDown = false;
          }
          rec.restoredAt = Date.now();
          for (const s of servers) if (!(await redisAnswers(s.port))) this.harnessProblems.push(`Redis ${s.port} does not answer after being restored`);
          break;
        }
        case 'store': {
          if (this.proxy.isCut) { rec.skipped = 'already cut'; break; }
          await this.proxy.cut();
          if (await accepts(this.proxy.port)) this.harnessProblems.push('store proxy still accepts connections after the cut');
          try {
            await this.wait(f.downMs);
          } finally {
            await this.proxy.restore();
            this.storeCutEndedAt = Date.now();
          }
          rec.restoredAt = this.storeCutEndedAt;
          if (!(await accepts(this.proxy.port))) this.harnessProblems.push('store proxy does not accept connections after the restore');
          break;
        }
        case 'failover': {
          if (this.failingOver) { rec.skipped = 'a failover is still in progress'; break; }
          this.failingOver = true;
          try {
            if (this.pair) {
              if (f.cutMs) {
                await this.pair.cutReplication();
                await this.wait(f.cutMs);
              }
              const old = this.pair.primaryIndex;
              this.pair.crash();
              rec.crashedAt = Date.now();
              await this.wait(f.downMs);
              await this.pair.promote();
              rec.restoredAt = Date.now();
              note(`promoted ${rec.restoredAt - rec.crashedAt} ms after the crash`);
              // The old primary back as the new one's standby (synchronous again for pg-sync).
              await this.pair.rejoin(old);
              await this.pair.replicating();
            } else {
              if (f.mode === 'kill') await this.galera.kill(f.node);
              else await this.galera.isolate(f.node);
              await this.wait(f.downMs);
              if (f.mode === 'kill') await this.galera.restart(f.node);
              else await this.galera.heal(f.node);
              rec.restoredAt = Date.now();
            }
          } finally {
            this.failingOver = false;
            this.storeCutEndedAt = Date.now();
          }
          break;
        }
        default:
          throw new Error(`unknown fault ${f.kind}`);
      }
    } catch (err) {
      rec.error = err.message;
      this.harnessProblems.push(`${describeFault(f)}: ${err.message}`);
    }
    this.log(`${rec.skipped ? 'skipped' : 'done   '} ${describeFault(f)}${rec.skipped ? ` (${rec.skipped})` : ''}${rec.notes.length ? ` [${rec.notes.join('; ')}]` : ''}`);
  }

  // --------------------------------------------------------------------------------- phases

  async run() {
    const t0 = Date.now();
    this.log(`chaos seed=${this.seed} seconds=${this.seconds} store=${this.engine}`);
    const plan = planFaults(this.seed, this.seconds * 1000, { everyKind: this.everyKind, engine: this.engine });
    this.plan = plan;
    this.log(`plan (${plan.length} faults): ${plan.map(describeFault).join(' | ')}`);
    await this.setup();

    this.nodes = NODE_IDS.map((id) => new ChaosNode(this, id));
    for (const n of this.nodes) n.spawn();
    const up = await Promise.all(this.nodes.map((n) => n.waitStarted()));
    if (!up.every(Boolean)) throw new Error(`nodes did not start: ${this.nodes.filter((_, i) => !up[i]).map((n) => `${n.nodeId}: ${tail(n.logFile)}`).join('; ')}`);
    this.startedMs = Date.now() - t0;
    await sleep(1000);

    // Fault phase.
    this.phaseStart = Date.now();
    this.log(`fault phase: ${this.seconds} s`);
    for (const f of plan) {
      await sleep(Math.max(0, this.phaseStart + f.at - Date.now()));
      this.log(`inject ${describeFault(f)}`);
      const p = this.inject(f);
      this.pending.add(p);
      void p.finally(() => this.pending.delete(p));
    }
    await sleep(Math.max(0, this.phaseStart + this.seconds * 1000 - Date.now()));
    this.phaseEnd = Date.now();

    // Restore everything that is still faulted, at once.
    this.log(`fault phase over: restoring (${this.pending.size} fault(s) still open)`);
    this.phaseOver.abort();
    await Promise.all([...this.pending]);
    for (const n of this.nodes) if (n.alive && procState(n.pid) === 'T') { n.proc.kill('SIGCONT'); this.harnessProblems.push(`${n.nodeId} was still stopped after the restore`); }
    if (this.proxy?.isCut) { this.harnessProblems.push('store still cut after the restore'); await this.proxy.restore(); }
    await waitFor('every node to be up', async () => {
      const ok = await Promise.all(this.nodes.map((n) => (n.alive ? n.waitStarted(2000) : false)));
      return ok.every(Boolean);
    }, 60_000, 500).catch(() => this.harnessProblems.push(`not every node was up after the restore: ${this.nodes.filter((n) => !n.alive).map((n) => n.nodeId).join(', ')}`));
    for (const r of this.redis) if (!(await redisAnswers(r.port))) this.harnessProblems.push(`Redis ${r.port} not answering after the restore`);
    if (this.proxy && !(await accepts(this.proxy.port))) this.harnessProblems.push('store proxy not accepting after the restore');
    this.restoredAt = Date.now();

    // Settle: no row of a period up to the end of the fault phase is running or pending past due.
    const settleFloorMs = 8000; // in-memory retries (retryDelay 1 s, doubled) and takeovers get their chance
    const settleUntil = this.restoredAt + this.settleMs;
    let open = [];
    for (;;) {
      const now = Date.now();
      const runs = await this.history().catch((err) => {
        this.log(`history failed while settling: ${err.message}`);
        return undefined;
      });
      if (runs) {
        open = runs.filter((r) => Date.parse(r.scheduledAt) <= this.phaseEnd && (r.status === 'running' || (r.status === 'pending' && Date.parse(r.runAt ?? r.scheduledAt) <= now)));
        if (open.length === 0 && now - this.restoredAt >= settleFloorMs) break;
      }
      if (now > settleUntil) {
        this.log(`settle deadline passed with ${open.length} row(s) still running or pending past due`);
        break;
      }
      await sleep(2000);
    }
    this.settledAt = Date.now();
    this.log(`settled ${this.settledAt - this.restoredAt} ms after the restore`);

    // Stop the nodes (SIGTERM), then read everything.
    this.stopping = true;
    const stops = await Promise.all(this.nodes.map(async (n) => (n.alive ? { nodeId: n.nodeId, ...(await n.term(40_000)) } : { nodeId: n.nodeId, code: null, signal: 'not running' })));
    this.stops = stops;
    const runs = await this.history();
    const effects = this.effects();
    const logs = this.processes.flatMap((p) => readJsonLines(p.logFile).map((l) => ({ ...l, _node: p.nodeId, _pid: p.pid })));
    const analysis = analyse({
      effects, runs, jobs: CHAOS_JOBS, windowFrom: this.phaseStart + 2000, windowTo: this.phaseEnd - 2000, judgedTo: this.phaseEnd,
      deaths: this.deaths, kills: this.kills, pauses: this.pauses, settledAt: this.settledAt,
      gaveUp: outcomesGivenUp(logs),
    });
    const violations = { ...analysis.violations };
    const crashes = this.unexpectedExits.filter((e) => !(e.code === 4 && e.storeCut));
    if (crashes.length) violations['node-crash'] = crashes.map((e) => `${e.nodeId} pid ${e.pid} exited on its own (code ${e.code}, signal ${e.signal}) at ${new Date(e.t).toISOString()}: ${e.logTail.slice(0, 300)}`);
    const unclean = stops.filter((s) => s.code !== 0);
    if (unclean.length) violations['unclean-stop'] = unclean.map((s) => `${s.nodeId}: exit ${s.code ?? s.signal}${s.killed ? ' (killed after 40 s)' : ''} on the final SIGTERM`);
    if (this.harnessProblems.length) violations.harness = [...this.harnessProblems];

    const summary = this.summarise({ runs, effects, logs, analysis, t0 });
    const result = { seed: this.seed, seconds: this.seconds, engine: this.engine, everyKind: this.everyKind, plan, injected: this.injected, summary, violations, workspace: this.ws.dir };
    result.violationCount = Object.values(violations).reduce((s, v) => s + v.length, 0);
    result.report = report(result);
    this.failed = result.violationCount > 0;
    return result;
  }

  summarise({ runs, effects, logs, analysis, t0 }) {
    const byKind = {};
    for (const f of this.injected) if (!f.skipped) byKind[f.label] = (byKind[f.label] ?? 0) + 1;
    const skipped = this.injected.filter((f) => f.skipped).map((f) => `${describeFault(f)}: ${f.skipped}`);
    const byStatus = {};
    for (const r of runs) {
      const k = r.status === 'skipped' ? `skipped(${r.reason ?? 'no reason'})` : r.status;
      byStatus[k] = (byStatus[k] ?? 0) + 1;
    }
    const restarts = this.processes.filter((p) => p.generation > 1);
    const interesting = {};
    const levels = { 40: 'warn', 50: 'error', 60: 'fatal', warn: 'warn', error: 'error', fatal: 'fatal' };
    for (const l of logs) {
      const level = levels[l.level];
      if (!level) continue;
      const k = `${level}: ${String(l.msg).slice(0, 90)}`;
      interesting[k] = (interesting[k] ?? 0) + 1;
    }
    const takeovers = logs.filter((l) => /abandon|takeover|taking over/i.test(String(l.msg))).length;
    return {
      elapsedS: Math.round((Date.now() - t0) / 1000),
      startupMs: this.startedMs,
      faultPhase: { from: new Date(this.phaseStart).toISOString(), to: new Date(this.phaseEnd).toISOString() },
      window: { from: new Date(this.phaseStart + 2000).toISOString(), to: new Date(this.phaseEnd - 2000).toISOString() },
      settleMs: this.settledAt - this.restoredAt,
      faultsByKind: byKind,
      faultsSkipped: skipped,
      periods: analysis.periods,
      rows: runs.length,
      runsByStatus: byStatus,
      effects: { starts: effects.filter((e) => e.ev === 'start').length, ends: effects.filter((e) => e.ev === 'end').length, fails: effects.filter((e) => e.ev === 'fail').length, aborts: countBy(effects.filter((e) => e.ev === 'abort').map((e) => e.reason)) },
      processes: this.processes.length,
      restarts: restarts.length,
      restartStartMs: restarts.map((p) => p.startedMs).filter(Number.isFinite),
      unexpectedExits: this.unexpectedExits.map((e) => `${e.nodeId}:${e.code ?? e.signal}${e.storeCut ? '(store cut)' : ''}`),
      finalStops: this.stops.map((s) => `${s.nodeId}:${s.code ?? s.signal}${s.killed ? '(killed)' : ''} ${s.ms ?? ''}ms`),
      takeoverLogLines: takeovers,
      warnings: Object.entries(interesting).sort((a, b) => b[1] - a[1]).slice(0, 12),
    };
  }

  async cleanup() {
    this.stopping = true;
    this.phaseOver.abort();
    for (const n of this.nodes) {
      if (n.alive) {
        try { n.proc.kill('SIGCONT'); } catch { /* gone */ }
        n.expectingExit = true;
        const done = exited(n.proc);
        n.proc.kill('SIGKILL');
        await done;
      }
    }
    await Promise.all([...this.pending]).catch(() => {});
    if (this.proxy) await this.proxy.close().catch(() => {});
    for (const r of this.redis) {
      try { r.proc?.kill('SIGCONT'); } catch { /* gone */ }
      await r.cleanup().catch(() => {});
    }
    if (this.db) await this.db.drop().catch((err) => this.log(`dropping ${this.db.name}: ${err.message}`));
    if (this.pair) await this.pair.stop().catch((err) => this.log(`stopping the PostgreSQL pair: ${err.message}`));
    if (this.galera) await this.galera.stop().catch((err) => this.log(`stopping the Galera cluster: ${err.message}`));
    if (this.ws && !this.keep) this.ws.cleanup();
    else if (this.ws) this.log(`kept ${this.ws.dir}`);
  }
}

// -------------------------------------------------------------------------------------- analysis

const FINAL_FAILURE = new Set(['failed', 'timed_out']);
const SKIP_REASONS = new Set(['overlap', 'coalesced', 'missed']);

/**
 * The soak's assertions, from the bodies' records (`effects`) and `history --json` (`runs`):
 *   duplicate-start      a (period, attempt) body started twice
 *   overlap              attempt n+1 started before attempt n ended (its process neither dead nor a
 *                        paused attempt that aborted with lease-lost and recorded no end)
 *   missing              a period in [windowFrom, windowTo] with no row at all
 *   skipped-reason       a period whose only rows are skipped without reason overlap/coalesced/missed
 *   start-without-row    a body started for a (period, attempt) that has no row
 *   unfinished           a period up to `judgedTo` with a started attempt whose last attempt is neither
 *                        succeeded nor a failure after its retries (left abandoned / interrupted /
 *                        failed with retries left / pending past due / running)
 *   succeeded-twice      two succeeded attempts of one period
 *   history-mismatch     a succeeded row without the body's end record, an end record without a
 *                        succeeded row of the same attempt (unless its process was killed -9 after
 *                        the end and the row is abandoned, or it was stopped while the store was
 *                        away and logged that it gave that attempt's outcome up at the shutdown's
 *                        deadline, a documented limit: `gaveUp`), a fail record whose row is not failed
 *   left-running         a row still running after the nodes stopped
 * `deaths`: pid -> instant it was killed or exited; `kills`: the same for kill -9 only;
 * `pauses`: [{ pid, from, to }].
 */
export function analyse({ effects, runs, jobs, windowFrom, windowTo, judgedTo, deaths, kills = deaths, pauses, settledAt, gaveUp = new Set() }) {
  const v = {
    'duplicate-start': [], overlap: [], missing: [], 'skipped-reason': [], 'start-without-row': [], unfinished: [],
    'succeeded-twice': [], 'history-mismatch': [], 'left-running': [],
  };
  const jobByName = new Map(jobs.map((j) => [j.name, j]));

  // Side effects by period and attempt.
  const eff = byPeriod(effects);
  for (const [key, attempts] of eff) {
    for (const [attempt, list] of attempts) {
      const n = list.filter((e) => e.ev === 'start').length;
      if (n > 1) v['duplicate-start'].push(`${key}#${attempt} started ${n} times`);
    }
  }

  const pausedAt = (pid, t) => pauses.some((p) => p.pid === pid && p.from <= t && t <= p.to + 2000);
  for (const [key, attempts] of eff) {
    const numbers = [...attempts.keys()].sort((a, b) => a - b);
    for (let i = 1; i < numbers.length; i++) {
      const prev = attempts.get(numbers[i - 1]);
      const next = attempts.get(numbers[i]);
      const nextStart = next.find((e) => e.ev === 'start');
      const prevStart = prev.find((e) => e.ev === 'start');
      if (!nextStart || !prevStart) continue;
      const prevEnd = prev.find((e) => e.pid === prevStart.pid && (e.ev === 'end' || e.ev === 'abort' || e.ev === 'fail'));
      const tag = `${key}#${numbers[i - 1]}`;
      if (prevEnd && prevEnd.t <= nextStart.t) continue;
      const died = deaths.get(prevStart.pid);
      if (!prevEnd && died !== undefined && died <= nextStart.t) continue;
      if (prevEnd?.ev === 'abort' && prevEnd.reason === 'lease-lost' && pausedAt(prevStart.pid, nextStart.t)) continue;
      v.overlap.push(`${tag} (${prevStart.node} pid ${prevStart.pid}) overlapped attempt ${numbers[i]} (${nextStart.node}): prev ${prevEnd ? `${prevEnd.ev}${prevEnd.reason ? ` ${prevEnd.reason}` : ''} at ${prevEnd.t}` : 'no end'}, next start ${nextStart.t}${pausedAt(prevStart.pid, nextStart.t) ? ' (prev was paused)' : ''}`);
    }
  }

  // Rows by period.
  const rows = new Map();
  for (const r of runs) {
    const list = rows.get(r.periodKey) ?? [];
    list.push(r);
    rows.set(r.periodKey, list);
  }
  const rowOf = (key, attempt) => (rows.get(key) ?? []).find((r) => r.attempt === attempt && r.status !== 'skipped');

  // Every period of every job in the window has a row.
  const periods = {};
  for (const job of jobs) {
    const step = job.stepS * 1000;
    let n = 0;
    for (let t = Math.ceil(windowFrom / step) * step; t <= windowTo; t += step) {
      n += 1;
      const key = `${job.name}@${new Date(t).toISOString()}`;
      const list = rows.get(key);
      if (!list || list.length === 0) {
        v.missing.push(`${key}: no row${eff.has(key) ? ' (but a body started)' : ''}`);
        continue;
      }
      if (list.every((r) => r.status === 'skipped') && !list.some((r) => SKIP_REASONS.has(r.reason))) {
        v['skipped-reason'].push(`${key}: skipped with reason ${list.map((r) => r.reason ?? 'none').join(',')}`);
      }
    }
    periods[job.name] = n;
  }

  // No body started without its row.
  for (const [key, attempts] of eff) {
    for (const [attempt, list] of attempts) {
      if (list.some((e) => e.ev === 'start') && !rowOf(key, attempt)) v['start-without-row'].push(`${key}#${attempt}: body started, no row of that attempt`);
    }
  }

  // Every started period up to the end of the fault phase ends with a success, or a failure after its retries.
  for (const [key, list] of rows) {
    const r0 = list[0];
    const job = jobByName.get(r0.job);
    const attempts = list.filter((r) => r.status !== 'skipped').sort((a, b) => a.attempt - b.attempt);
    if (attempts.length === 0) continue;
    const succeeded = attempts.filter((r) => r.status === 'succeeded');
    if (succeeded.length > 1) v['succeeded-twice'].push(`${key}: attempts ${succeeded.map((r) => r.attempt).join(', ')} succeeded`);
    if (Date.parse(r0.scheduledAt) > judgedTo) continue;
    const last = attempts[attempts.length - 1];
    const trail = attempts.map((r) => `${r.attempt}:${r.status}${r.nodeId ? `@${r.nodeId}` : ''}`).join(' ');
    if (last.status === 'succeeded') continue;
    const failures = attempts.filter((r) => FINAL_FAILURE.has(r.status)).length;
    const abandoned = attempts.filter((r) => r.status === 'abandoned').length;
    if (FINAL_FAILURE.has(last.status)) {
      if (failures > (job?.retries ?? 0)) continue;
      if (last.status === 'failed' && abandoned >= 3) continue; // the documented cap on takeovers
      v.unfinished.push(`${key}: last attempt ${last.attempt} ${last.status} with ${(job?.retries ?? 0) - failures + 1} retr${(job?.retries ?? 0) - failures + 1 === 1 ? 'y' : 'ies'} left, no later attempt [${trail}]`);
      continue;
    }
    if (last.status === 'pending') {
      const due = Date.parse(last.runAt ?? last.scheduledAt);
      v.unfinished.push(`${key}: attempt ${last.attempt} still pending${due <= settledAt ? ` past due (runAt ${last.runAt ?? '?'})` : ` (runAt ${last.runAt})`} [${trail}]`);
      continue;
    }
    v.unfinished.push(`${key}: left ${last.status} at attempt ${last.attempt}, no later attempt [${trail}]`);
  }

  // History agrees with the side effects.
  for (const r of runs) {
    if (r.status === 'running') v['left-running'].push(`${r.periodKey}#${r.attempt} on ${r.nodeId}`);
    if (r.status === 'succeeded') {
      const list = eff.get(r.periodKey)?.get(r.attempt) ?? [];
      if (!list.some((e) => e.ev === 'end')) v['history-mismatch'].push(`${r.periodKey}#${r.attempt}: succeeded row, no end record (records: ${list.map((e) => e.ev + (e.reason ? `:${e.reason}` : '')).join(',') || 'none'})`);
    }
  }
  for (const [key, attempts] of eff) {
    for (const [attempt, list] of attempts) {
      const row = rowOf(key, attempt);
      for (const e of list) {
        if (e.ev === 'end' && row?.status !== 'succeeded') {
          const died = kills.get(e.pid);
          const excused = row?.status === 'abandoned' && ((died !== undefined && died >= e.t) || gaveUp.has(`${key}#${attempt}`));
          if (!excused) v['history-mismatch'].push(`${key}#${attempt}: end record (${e.node}), row ${row ? row.status : 'missing'}`);
        }
        if (e.ev === 'fail' && row && !FINAL_FAILURE.has(row.status)) {
          const died = kills.get(e.pid);
          if (!(died !== undefined && died >= e.t && row.status === 'abandoned')) v['history-mismatch'].push(`${key}#${attempt}: fail record (${e.node}), row ${row.status}`);
        }
      }
    }
  }

  for (const k of Object.keys(v)) if (v[k].length === 0) delete v[k];
  return { violations: v, periods };
}

/**
 * The attempts whose node, stopping while the store was away, logged that it gave their outcome up at
 * the shutdown's write deadline (`<periodKey>#<attempt>`): the row stays running, the takeover ends
 * it abandoned and owes attempt n + 1 (the README's known limit). Read from the nodes' own logs.
 */
export function outcomesGivenUp(logs) {
  const out = new Set();
  for (const l of logs) {
    if (typeof l.msg === 'string' && l.msg.startsWith('shutdown: the outcome could not be written before the deadline') && l.periodKey) out.add(`${l.periodKey}#${l.attempt}`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------- report

export function report(result) {
  const s = result.summary;
  const out = [];
  const p = (line = '') => out.push(line);
  const store = result.engine && result.engine !== 'mariadb' ? result.engine : null;
  p(`chaos seed=${result.seed} seconds=${result.seconds}${store ? ` store=${store}` : ''}  (replay: node bench/chaos.mjs --seconds ${result.seconds} --seed ${result.seed}${result.everyKind ? ' --every-kind' : ''}${store ? ` --store ${store}` : ''}, or CHAOS_SEED=${result.seed}${store ? ` CHAOS_STORE=${store}` : ''} npx vitest run test/fault/chaos.test.ts)`);
  p(`elapsed ${s.elapsedS} s; 5 nodes up in ${s.startupMs} ms; fault phase ${s.faultPhase.from} .. ${s.faultPhase.to}; settled ${s.settleMs} ms after the restore`);
  p(`faults injected: ${Object.entries(s.faultsByKind).map(([k, n]) => `${k} x${n}`).join(', ') || 'none'}${s.faultsSkipped.length ? `; skipped: ${s.faultsSkipped.join('; ')}` : ''}`);
  p(table([
    ['fault', 'injected', 'restored', 'notes'],
    ...result.injected.map((f) => [describeFault(f), new Date(f.injectedAt).toISOString().slice(11, 23), f.restoredAt ? new Date(f.restoredAt).toISOString().slice(11, 23) : '-',
      [f.compound ? 'compound' : '', f.skipped ?? '', f.error ?? '', ...(f.notes ?? [])].filter(Boolean).join('; ')]),
  ]));
  p(`processes: ${s.processes} (${s.restarts} restarts${s.restartStartMs.length ? `, up again in ${Math.min(...s.restartStartMs)}-${Math.max(...s.restartStartMs)} ms` : ''}); unexpected exits: ${s.unexpectedExits.join(' ') || 'none'}; final stops: ${s.finalStops.join(', ')}`);
  p(`periods checked (window ${s.window.from} .. ${s.window.to}): ${Object.entries(s.periods).map(([j, n]) => `${j} ${n}`).join(', ')}`);
  p(`rows: ${s.rows}; by status: ${Object.entries(s.runsByStatus).map(([k, n]) => `${k} ${n}`).join(', ')}`);
  p(`body records: ${s.effects.starts} starts, ${s.effects.ends} ends, ${s.effects.fails} fails, aborts ${JSON.stringify(s.effects.aborts)}`);
  if (s.warnings.length) p(`node warnings/errors (top): ${s.warnings.map(([k, n]) => `${n}x ${k}`).join(' | ')}`);
  const classes = Object.entries(result.violations);
  if (classes.length === 0) {
    p('violations: none');
  } else {
    p(`violations: ${result.violationCount} (${classes.map(([k, l]) => `${k} ${l.length}`).join(', ')}) -- seed=${result.seed}`);
    for (const [k, list] of classes) {
      p(`  ${k} (${list.length}${list.length > 20 ? ', first 20' : ''}):`);
      for (const line of list.slice(0, 20)) p(`    ${line}`);
    }
  }
  return out.join('\n');
}
