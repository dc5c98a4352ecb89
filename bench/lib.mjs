/**
 * Helpers for the benchmarks (plain ESM, no build step): Redis masters on free ports, a private
 * MariaDB database with one MySQL user per node, daemon processes, small statistics.
 * Mirrors test/helpers/redis.ts and test/helpers/databases.ts; never touches the shared Redis on 6379
 * or any database other than the one it creates.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';

export const PROJECT_ROOT = fileURLToPath(new URL('../', import.meta.url));
export const SCHEDULER_BIN = join(PROJECT_ROOT, 'bin', 'scheduler');

/**
 * Compiles src/ into a private copy of the package (dist/, bin/, package.json, node_modules linked),
 * so that the daemons under test are immune to rebuilds of the shared dist/ and to edits of src/
 * while the benchmark runs. Returns the copy's root.
 */
export function buildSnapshot() {
  const root = mkdtempSync(join(tmpdir(), 'bench-fire-build-'));
  try {
    execFileSync(process.execPath, [join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json', '--outDir', join(root, 'dist'), '--declaration', 'false', '--sourceMap', 'false'], {
      cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    rmSync(root, { recursive: true, force: true });
    throw new Error(`tsc failed: ${String(err.stdout ?? '')}${String(err.stderr ?? '')}`.trim());
  }
  mkdirSync(join(root, 'bin'));
  copyFileSync(SCHEDULER_BIN, join(root, 'bin', 'scheduler'));
  copyFileSync(join(PROJECT_ROOT, 'package.json'), join(root, 'package.json'));
  symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(root, 'node_modules'), 'dir');
  return root;
}

/** The commit and whether src/ has uncommitted changes, for the record. */
export function sourceState() {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: PROJECT_ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: PROJECT_ROOT, encoding: 'utf8' }).trim().split('\n').filter(Boolean);
    return { head, srcChanges: dirty };
  } catch {
    return { head: null, srcChanges: [] };
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export async function waitFor(what, fn, timeoutMs = 30_000, everyMs = 100) {
  const until = Date.now() + timeoutMs;
  let lastErr;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}${lastErr ? `: ${String(lastErr)}` : ''}`);
    await sleep(everyMs);
  }
}

/** Resolves when the child has exited (at once if it already has). */
export function exited(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((r) => proc.once('exit', r));
}

// ---------------------------------------------------------------------------------------- Redis

export class RedisServer {
  constructor(port) {
    this.port = port;
    this.dir = mkdtempSync(join(tmpdir(), `bench-redis-${port}-`));
    this.proc = undefined;
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start() {
    if (this.port === 6379) throw new Error('refusing to start a bench Redis on the shared port 6379');
    this.proc = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir], { stdio: 'ignore' });
    await waitFor(`redis on ${this.port}`, async () => {
      const c = new Redis(this.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      c.on('error', () => {});
      try {
        await c.connect();
        return (await c.ping()) === 'PONG';
      } finally {
        c.disconnect();
      }
    });
  }

  async stop() {
    const p = this.proc;
    if (!p) return;
    if (p.exitCode === null && p.signalCode === null) {
      const done = exited(p);
      p.kill('SIGKILL'); // by pid: this process only
      await done;
    }
    this.proc = undefined;
  }

  async cleanup() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function startRedisServers(n) {
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      let port = await freePort();
      while (port === 6379 || servers.some((s) => s.port === port)) port = await freePort();
      const s = new RedisServer(port);
      servers.push(s);
      await s.start();
    }
  } catch (err) {
    await Promise.all(servers.map((s) => s.cleanup()));
    throw err;
  }
  return servers;
}

// -------------------------------------------------------------------------------------- MariaDB

export function randomTag() {
  return `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
}

/** Admin connection (root on loopback by default; BENCH_MYSQL_ADMIN overrides). */
export async function adminConnection(url = process.env.BENCH_MYSQL_ADMIN ?? 'mysql://root@127.0.0.1:3306/') {
  const u = new URL(url);
  return mysql.createConnection({
    host: u.hostname, port: Number(u.port || 3306), user: decodeURIComponent(u.username || 'root'),
    password: decodeURIComponent(u.password || ''), multipleStatements: false, supportBigNumbers: true, bigNumberStrings: false,
  });
}

/**
 * A private database and one passwordless MySQL user per node (`'<user>'@'127.0.0.1'`, and
 * `@'localhost'` for servers that resolve names), so that MariaDB's per-user statistics tell the
 * nodes apart. `drop()` removes the users and the database.
 */
export async function createBenchDatabase(admin, { tag, nodes }) {
  const db = `cron_bench_${tag}`;
  const users = Array.from({ length: nodes }, (_, i) => `cb_${tag}_n${i + 1}`);
  const hosts = ['127.0.0.1', 'localhost'];
  await admin.query(`CREATE DATABASE \`${db}\``);
  const created = [];
  try {
    for (const user of users) {
      for (const host of hosts) {
        await admin.query('CREATE USER ?@?', [user, host]);
        created.push([user, host]);
        await admin.query(`GRANT ALL PRIVILEGES ON \`${db}\`.* TO ?@?`, [user, host]);
      }
    }
  } catch (err) {
    for (const [user, host] of created) await admin.query('DROP USER IF EXISTS ?@?', [user, host]).catch(() => {});
    await admin.query(`DROP DATABASE IF EXISTS \`${db}\``).catch(() => {});
    throw err;
  }
  const u = new URL(process.env.BENCH_MYSQL_ADMIN ?? 'mysql://root@127.0.0.1:3306/');
  const storeUrl = (user) => `mysql://${user}@${u.hostname}:${u.port || 3306}/${db}`;
  return {
    db,
    users,
    storeUrl,
    async drop() {
      for (const user of users) for (const host of hosts) await admin.query('DROP USER IF EXISTS ?@?', [user, host]);
      await admin.query(`DROP DATABASE IF EXISTS \`${db}\``);
    },
  };
}

export async function globalVariable(admin, name) {
  const [rows] = await admin.query('SHOW GLOBAL VARIABLES LIKE ?', [name]);
  return rows[0]?.Value;
}

/**
 * Per-user statement counters from information_schema.USER_STATISTICS (MariaDB `userstat`), plus the
 * store clock, read in one statement.
 */
export async function userStatistics(admin, users) {
  const [rows] = await admin.query(
    `SELECT USER AS user, TOTAL_CONNECTIONS AS connections, SELECT_COMMANDS AS selects, UPDATE_COMMANDS AS updates,
            OTHER_COMMANDS AS other, COMMIT_TRANSACTIONS AS commits, ROLLBACK_TRANSACTIONS AS rollbacks,
            ROWS_INSERTED AS rowsInserted, ROWS_UPDATED AS rowsUpdated,
            CAST(ROUND(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000) AS SIGNED) AS nowMs
       FROM information_schema.USER_STATISTICS WHERE USER IN (?)`,
    [users],
  );
  const out = new Map();
  for (const user of users) {
    out.set(user, { connections: 0, selects: 0, updates: 0, other: 0, commits: 0, rollbacks: 0, rowsInserted: 0, rowsUpdated: 0 });
  }
  for (const r of rows) {
    out.set(r.user, {
      connections: Number(r.connections), selects: Number(r.selects), updates: Number(r.updates), other: Number(r.other),
      commits: Number(r.commits), rollbacks: Number(r.rollbacks), rowsInserted: Number(r.rowsInserted), rowsUpdated: Number(r.rowsUpdated),
    });
  }
  return out;
}

export function statDelta(a, b) {
  const d = {};
  for (const k of Object.keys(b)) d[k] = b[k] - (a?.[k] ?? 0);
  d.statements = d.selects + d.updates + d.other;
  return d;
}

// -------------------------------------------------------------------------------------- daemons

/**
 * One `bin/scheduler run` process. stdout/stderr go to a file (the daemon writes its JSON log lines
 * synchronously, as it would to a file or a pipe drained by a log shipper).
 */
export class SchedulerNode {
  constructor({ nodeId, env, cwd, logFile, nodeArgs = [], bin = SCHEDULER_BIN }) {
    this.nodeId = nodeId;
    this.logFile = logFile;
    const fd = openSync(logFile, 'a');
    this.proc = spawn(process.execPath, [...nodeArgs, bin, 'run'], {
      cwd,
      env: { ...process.env, ...env, SCHEDULER_NODE_ID: nodeId, SCHEDULER_LOG_FORMAT: 'json' },
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd);
  }

  get pid() {
    return this.proc.pid;
  }

  logLines() {
    if (!existsSync(this.logFile)) return [];
    return readJsonLines(this.logFile);
  }

  async waitStarted(timeoutMs = 60_000) {
    const until = Date.now() + timeoutMs;
    for (;;) {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
        throw new Error(`${this.nodeId} exited with ${this.proc.exitCode ?? this.proc.signalCode} before starting: ${tail(this.logFile)}`);
      }
      if (this.logLines().some((l) => l.msg === 'scheduler started')) return;
      if (Date.now() > until) throw new Error(`${this.nodeId} did not start within ${timeoutMs} ms: ${tail(this.logFile)}`);
      await sleep(50);
    }
  }

  /** SIGTERM (the daemon's clean stop), then SIGKILL after `killAfterMs`. Only this pid. */
  async stop(killAfterMs = 40_000) {
    const p = this.proc;
    if (p.exitCode !== null || p.signalCode !== null) return { code: p.exitCode, signal: p.signalCode };
    const done = exited(p);
    p.kill('SIGTERM');
    const t = setTimeout(() => p.kill('SIGKILL'), killAfterMs);
    await done;
    clearTimeout(t);
    return { code: p.exitCode, signal: p.signalCode };
  }
}

export function readJsonLines(file) {
  if (!existsSync(file)) return [];
  const out = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // a non-JSON line (a stack trace printed by Node itself): ignored here, visible in the file
    }
  }
  return out;
}

export function tail(file, n = 5) {
  if (!existsSync(file)) return '';
  return readFileSync(file, 'utf8').trim().split('\n').slice(-n).join(' | ');
}

// ----------------------------------------------------------------------------------- statistics

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function summarise(values) {
  const s = [...values].sort((a, b) => a - b);
  const sum = s.reduce((a, b) => a + b, 0);
  return {
    count: s.length,
    min: s[0] ?? NaN,
    p50: percentile(s, 50),
    p90: percentile(s, 90),
    p99: percentile(s, 99),
    max: s[s.length - 1] ?? NaN,
    mean: s.length ? sum / s.length : NaN,
  };
}

export const fmt = (v, digits = 1) => (Number.isFinite(v) ? v.toFixed(digits) : '-');

export function table(rows) {
  if (rows.length === 0) return '';
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => {
    const s = String(c ?? '');
    return i === 0 ? s.padEnd(widths[i]) : s.padStart(widths[i]);
  }).join('  ')).join('\n');
}

/** CPU time (user + system) of a process in ms, from /proc (Linux); NaN when unavailable. */
export function cpuTimeMs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[11] = utime, fields[12] = stime (clock ticks; USER_HZ is 100 on Linux)
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return NaN;
  }
}

/**
 * `--name value`, `--name=value` and boolean `--flag`s (those in `booleans`); `--help` prints `usage`
 * and exits. Shared by the bench scripts.
 */
export function parseFlags(argv, { booleans = [], usage = '' } = {}) {
  const flags = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const [name, inline] = a.slice(2).split('=', 2);
    if ([...booleans, 'help'].includes(name)) flags[name] = true;
    else flags[name] = inline ?? argv[++i];
  }
  if (flags.help) {
    process.stdout.write(usage.endsWith('\n') ? usage : `${usage}\n`);
    process.exit(0);
  }
  return flags;
}

// ------------------------------------------------- pieces shared by fire-latency and throughput

/**
 * The package the daemons run: a private build of src/ (default), a build made earlier (`packageDir`,
 * for before/after comparisons) or the project's dist/ as it is (`build: false`). `cleanup()` removes
 * a private build.
 */
export function resolvePackage({ build = true, packageDir } = {}) {
  let root = PROJECT_ROOT;
  let cleanup = () => {};
  let kind = 'dist/ as found';
  if (packageDir) {
    root = packageDir;
    kind = `prebuilt ${packageDir}`;
  } else if (build) {
    root = buildSnapshot();
    cleanup = () => rmSync(root, { recursive: true, force: true });
    kind = 'private build of src/';
  } else if (!existsSync(join(PROJECT_ROOT, 'dist', 'cli', 'entry.js'))) {
    throw new Error('dist/ is missing: run npm run build (or drop --no-build)');
  }
  return { root, bin: join(root, 'bin', 'scheduler'), dist: join(root, 'dist'), kind, cleanup };
}

/**
 * Turns MariaDB's per-user statistics on (`SET GLOBAL userstat = 1`) if they are off. Returns what
 * the variable was (undefined on a server without it: not MariaDB) and `restore()`, which turns it
 * off again only if this call turned it on.
 */
export async function enableUserstat(admin) {
  const before = await globalVariable(admin, 'userstat');
  if (before === undefined || before === 'ON') return { before, restore: async () => {} };
  await admin.query('SET GLOBAL userstat = 1');
  return { before, restore: async () => { await admin.query('SET GLOBAL userstat = 0'); } };
}

/**
 * Starts one `bin/scheduler run` per MySQL user of `db` (node-1, node-2, ...) on the given Redis
 * masters and jobs folder; `env(nodeId)` adds per-node variables (the bench's own output files).
 * HTTP is off, logs are JSON lines in `<outDir>/<nodeId>.log`.
 */
export function startSchedulerNodes({ db, redisUrls, jobsDir, cwd, outDir, prefix, logLevel = 'info', bin, nodeArgs = [], env = () => ({}) }) {
  return db.users.map((user, i) => {
    const nodeId = `node-${i + 1}`;
    return new SchedulerNode({
      nodeId,
      cwd,
      logFile: join(outDir, `${nodeId}.log`),
      nodeArgs,
      bin,
      env: {
        SCHEDULER_STORE: db.storeUrl(user),
        SCHEDULER_REDIS: redisUrls.join(','),
        SCHEDULER_JOBS_DIR: jobsDir,
        SCHEDULER_REDIS_PREFIX: prefix,
        SCHEDULER_LOG_LEVEL: logLevel,
        SCHEDULER_HTTP: 'off',
        ...env(nodeId),
      },
    });
  });
}

/**
 * Calls per command from `INFO commandstats` (`cmdstat_evalsha` -> `evalsha`). Redis counts the
 * commands a Lua script runs as well as the EVALSHA that ran it.
 */
export async function commandStats(client) {
  const text = await client.info('commandstats');
  const calls = new Map();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1], Number(m[2]));
  return calls;
}

/** Per-command difference of two commandStats() snapshots (summed over servers when given arrays). */
export function commandStatsDelta(before, after) {
  const b = Array.isArray(before) ? before : [before];
  const a = Array.isArray(after) ? after : [after];
  const d = new Map();
  a.forEach((snap, i) => {
    for (const [cmd, n] of snap) d.set(cmd, (d.get(cmd) ?? 0) + n - (b[i]?.get(cmd) ?? 0));
  });
  return d;
}

/** Pids of the processes whose command name (/proc/<pid>/comm) is one of `names` (Linux). */
export function pidsByName(...names) {
  const out = [];
  let entries = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (names.includes(readFileSync(`/proc/${e}/comm`, 'utf8').trim())) out.push(Number(e));
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/**
 * Cleanup steps run last-in first-out, once, also on SIGINT/SIGTERM (then the process exits 130).
 * `push(fn)` adds a step; `run()` runs them all, reporting failures through `note`; `scope()` gives a
 * part (one round of a bench) whose `run()` runs only the steps pushed through it, while an interrupt
 * still runs every step left.
 */
export function cleanupStack(note = (s) => process.stderr.write(`${s}\n`)) {
  const steps = [];
  let interrupted = false;
  async function runSteps(list) {
    while (list.length) {
      const fn = list.pop();
      const i = steps.lastIndexOf(fn);
      if (i >= 0) steps.splice(i, 1);
      try {
        await fn();
      } catch (err) {
        note(`cleanup: ${err?.message ?? err}`);
      }
    }
  }
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    note('interrupted: cleaning up');
    void runSteps(steps).finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    push: (fn) => { steps.push(fn); },
    run: () => runSteps(steps),
    scope() {
      const mine = [];
      return {
        push: (fn) => { mine.push(fn); steps.push(fn); },
        run: () => runSteps(mine),
      };
    },
  };
}
