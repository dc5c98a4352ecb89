/**
 * Helpers for bench/faults.mjs (plain ESM, no build step): a private MariaDB database (root on
 * loopback, no extra users), job sources whose bodies record their own side effects, and a cluster
 * of `bin/scheduler run` processes that can be killed, paused and restarted by pid.
 * Builds on bench/lib.mjs (Redis servers, daemon processes, statistics); never touches the shared
 * Redis on 6379 or any database other than the one it creates.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SchedulerNode, adminConnection, exited, randomTag, readJsonLines, waitFor } from './lib.mjs';

// -------------------------------------------------------------------------------------- MariaDB

/** `cron_bench_faults_<random>`, used by every node as root; `drop()` removes it. */
export async function createFaultDatabase(adminUrl = process.env.BENCH_MYSQL_ADMIN ?? 'mysql://root@127.0.0.1:3306/') {
  const admin = await adminConnection(adminUrl);
  const db = `cron_bench_faults_${randomTag()}`;
  await admin.query(`CREATE DATABASE \`${db}\``);
  const u = new URL(adminUrl);
  u.pathname = `/${db}`;
  let dropped = false;
  return {
    db,
    url: u.toString(),
    admin,
    /** Rows of the runs table (empty before the first migration). */
    async runs(where = '1=1', params = []) {
      try {
        const [rows] = await admin.query(`SELECT * FROM \`${db}\`.scheduler_runs WHERE ${where} ORDER BY id`, params);
        return rows.map((r) => ({
          ...r, scheduled_at: Number(r.scheduled_at), started_at: Number(r.started_at), heartbeat_at: r.heartbeat_at === null ? null : Number(r.heartbeat_at),
          finished_at: r.finished_at === null ? null : Number(r.finished_at), lease_ms: Number(r.lease_ms),
        }));
      } catch (err) {
        if (err?.code === 'ER_NO_SUCH_TABLE') return [];
        throw err;
      }
    },
    async drop() {
      if (dropped) return;
      dropped = true;
      try {
        await admin.query(`DROP DATABASE IF EXISTS \`${db}\``);
      } finally {
        await admin.end().catch(() => {});
      }
    },
  };
}

// ----------------------------------------------------------------------------------------- jobs

/**
 * A body that records start, then waits (attempt 1: `firstMs`, later attempts: `laterMs`) unless its
 * signal aborts; records 'end' or 'abort' (with the reason). Lines go to $SIDE_EFFECTS.
 */
export function longJobSource({ schedule, lockTtl, firstMs, laterMs, extra = {} }) {
  const fields = Object.entries({ schedule, lockTtl, ...extra }).map(([k, v]) => `  ${k}: ${JSON.stringify(v)},`).join('\n');
  return `import { appendFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
export default {
${fields}
  async run(ctx) {
    const me = { key: ctx.periodKey, attempt: ctx.attempt, node: ctx.nodeId, pid: process.pid };
    rec({ ev: 'start', ...me, trigger: ctx.trigger, sched: ctx.scheduledAt.getTime() });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, ctx.attempt === 1 ? ${Number(firstMs)} : ${Number(laterMs)});
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

/** A trivial body: one 'start' line with the period instant, nothing else. */
export function trivialJobSource({ schedule, extra = {} }) {
  const fields = Object.entries({ schedule, ...extra }).map(([k, v]) => `  ${k}: ${JSON.stringify(v)},`).join('\n');
  return `import { appendFileSync } from 'node:fs';
export default {
${fields}
  run(ctx) {
    appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ev: 'start', key: ctx.periodKey, attempt: ctx.attempt, node: ctx.nodeId, trigger: ctx.trigger, sched: ctx.scheduledAt.getTime(), t: Date.now() }) + '\\n');
  },
};
`;
}

// -------------------------------------------------------------------------------------- cluster

/** A temp folder with jobs/, logs/ and the side-effect file. */
export class Workspace {
  constructor(prefix) {
    this.dir = mkdtempSync(join(tmpdir(), prefix));
    this.jobsDir = join(this.dir, 'jobs');
    this.logsDir = join(this.dir, 'logs');
    this.effectsFile = join(this.dir, 'effects.jsonl');
    mkdirSync(this.jobsDir);
    mkdirSync(this.logsDir);
    writeFileSync(this.effectsFile, '');
  }

  writeJob(file, source) {
    writeFileSync(join(this.jobsDir, file), source);
  }

  effects() {
    return readJsonLines(this.effectsFile);
  }

  cleanup() {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Daemons over one workspace. Slots (`n1`, `n2`, ...) are the cluster's places; each process in a
 * slot gets a fresh node id (`n1`, then `n1-g2` after a restart), so that "another node" in the
 * side effects never confuses a restarted process with the one that was killed.
 */
export class Cluster {
  constructor(ws, env, { logLevel = 'info', slotEnv = () => ({}) } = {}) {
    this.ws = ws;
    this.env = env;
    this.slotEnv = slotEnv;
    this.logLevel = logLevel;
    /** slot -> current SchedulerNode */
    this.slots = new Map();
    /** every process ever started (for the final cleanup) */
    this.all = [];
    this.generation = new Map();
  }

  start(slot) {
    const gen = (this.generation.get(slot) ?? 0) + 1;
    this.generation.set(slot, gen);
    const nodeId = gen === 1 ? slot : `${slot}-g${gen}`;
    const node = new SchedulerNode({
      nodeId,
      cwd: this.ws.dir,
      logFile: join(this.ws.logsDir, `${nodeId}.log`),
      env: {
        ...this.env,
        SCHEDULER_JOBS_DIR: this.ws.jobsDir,
        SIDE_EFFECTS: this.ws.effectsFile,
        SCHEDULER_LOG_LEVEL: this.logLevel,
        SCHEDULER_GRACE_PERIOD: '2s',
        SCHEDULER_HTTP: 'off',
        ...this.slotEnv(slot),
      },
    });
    node.slot = slot;
    this.slots.set(slot, node);
    this.all.push(node);
    return node;
  }

  /** The live process whose node id is `nodeId`. */
  byNodeId(nodeId) {
    return [...this.slots.values()].find((n) => n.nodeId === nodeId);
  }

  async startAll(slots) {
    const nodes = slots.map((s) => this.start(s));
    await Promise.all(nodes.map((n) => n.waitStarted()));
    return nodes;
  }

  /** kill -9 by pid; resolves with the instant just before the signal was sent, once the process is gone. */
  async kill9(node) {
    const done = exited(node.proc);
    const at = Date.now();
    node.proc.kill('SIGKILL');
    await done;
    return at;
  }

  logs() {
    return this.all.flatMap((n) => n.logLines().map((l) => ({ ...l, _node: n.nodeId })));
  }

  /** SIGCONT to anything left stopped, then SIGTERM (SIGKILL after a while) to every process this cluster started. */
  async stopAll(killAfterMs = 20_000) {
    const results = [];
    for (const n of this.all) {
      if (n.proc.exitCode === null && n.proc.signalCode === null) {
        try { n.proc.kill('SIGCONT'); } catch { /* gone */ }
      }
    }
    await Promise.all(this.all.map(async (n) => {
      const r = await n.stop(killAfterMs);
      results.push({ nodeId: n.nodeId, ...r });
    }));
    return results;
  }
}

// ------------------------------------------------------------------------------------- analysis

/** Starts per `<key>#<attempt>` that occur more than once, and periods whose body started more than once in all. */
export function duplicates(effects) {
  const perAttempt = new Map();
  const perKey = new Map();
  for (const e of effects) {
    if (e.ev !== 'start') continue;
    const k = `${e.key}#${e.attempt}`;
    perAttempt.set(k, (perAttempt.get(k) ?? 0) + 1);
    perKey.set(e.key, (perKey.get(e.key) ?? 0) + 1);
  }
  return {
    sameAttempt: [...perAttempt].filter(([, n]) => n > 1).map(([k, n]) => `${k} x${n}`),
    samePeriod: [...perKey].filter(([, n]) => n > 1).map(([k, n]) => `${k} x${n}`),
  };
}

export { waitFor };

// ------------------------------------------------------------------------- a store proxy that sniffs

/**
 * A TCP proxy in front of MariaDB for one node; `cut()` / `restore()` partition that node alone. `armOnce(pattern, fn)`: the next client->server chunk
 * whose text matches `pattern` is forwarded, then `fn()` runs synchronously (before any reply can come
 * back through this proxy). Used to pause a node exactly while its heartbeat UPDATE is in flight.
 */
export class SniffingProxy {
  constructor(targetPort = 3306, targetHost = '127.0.0.1') {
    this.targetPort = targetPort;
    this.targetHost = targetHost;
    this.sockets = new Set();
    this.armed = undefined;
    this.port = 0;
  }

  async start(port = 0) {
    const { createServer, Socket } = await import('node:net');
    this.server = createServer((client) => {
      const upstream = new Socket();
      this.sockets.add(client);
      this.sockets.add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      upstream.connect(this.targetPort, this.targetHost, () => {
        client.on('data', (chunk) => {
          upstream.write(chunk);
          const armed = this.armed;
          if (armed && armed.pattern.test(chunk.toString('latin1'))) {
            this.armed = undefined;
            armed.fn();
          }
        });
        upstream.pipe(client);
      });
    });
    await new Promise((resolve) => this.server.listen(port, '127.0.0.1', resolve));
    this.port = this.server.address().port;
    return this.port;
  }

  /** Cuts the node off the store: every connection reset, new ones refused (until restore()). */
  async cut() {
    for (const s of this.sockets) s.resetAndDestroy();
    this.sockets.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise((resolve) => server.close(() => resolve()));
  }

  /** Listens again on the same port. */
  async restore() {
    await this.start(this.port);
  }

  armOnce(pattern, fn) {
    this.armed = { pattern, fn };
  }

  async close() {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    if (this.server) await new Promise((resolve) => this.server.close(() => resolve()));
    this.server = undefined;
  }
}
