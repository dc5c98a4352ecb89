/**
 * The benchmarks' helpers (plain ESM, no build step). The pieces shared with the tests (Redis masters
 * on free ports, private databases with per-node users, daemons, workspaces, job sources, the fault
 * cluster, proxies, statistics) live in test/harness/ and are re-exported here under the names the
 * bench scripts use; what only benchmarks need (a private build of src/, MariaDB's per-user
 * statistics, CPU time, options) is below. Never touches the shared Redis on 6379 or any database
 * other than the ones it creates.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { BENCH_MARIADB_ADMIN, createMariaDb } from '../test/harness/databases.mjs';
import { BIN, Daemon, ROOT } from '../test/harness/process.mjs';

export { BENCH_MARIADB_ADMIN, createMariaDb, createPostgresDb } from '../test/harness/databases.mjs';
export { Daemon, cleanEnv, exited, freePort, procState, randomTag, readJsonLines, runCli, sleep, tail, waitFor } from '../test/harness/process.mjs';
export { StoreProxy } from '../test/harness/proxy.mjs';
export { RedisServer, redisAnswers, startRedisServers } from '../test/harness/redis.mjs';
export { countBy, fmt, percentile, summarise, table } from '../test/harness/stats.mjs';
export { Workspace } from '../test/harness/workspace.mjs';

export const PROJECT_ROOT = ROOT;
export const SCHEDULER_BIN = BIN;

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

/** Admin connection (root on loopback by default; BENCH_MYSQL_ADMIN overrides). */
export async function adminConnection(url = BENCH_MARIADB_ADMIN) {
  const u = new URL(url);
  return mysql.createConnection({
    host: u.hostname, port: Number(u.port || 3306), user: decodeURIComponent(u.username || 'root'),
    password: decodeURIComponent(u.password || ''), multipleStatements: false, supportBigNumbers: true, bigNumberStrings: false,
  });
}

/**
 * A private database `cron_bench_<tag>` and one passwordless MySQL user per node (`cb_<tag>_n1`...),
 * so that MariaDB's per-user statistics tell the nodes apart; `storeUrl(user)`; `drop()` removes the
 * users and the database. (`admin` is not used any more: the harness opens its own connection to
 * BENCH_MYSQL_ADMIN.)
 */
export async function createBenchDatabase(_admin, { tag, nodes }) {
  const users = Array.from({ length: nodes }, (_, i) => `cb_${tag}_n${i + 1}`);
  const db = await createMariaDb('cron_bench', { adminUrl: BENCH_MARIADB_ADMIN, name: `cron_bench_${tag}`, nodeUsers: users });
  return { db: db.name, users, storeUrl: db.urlFor, drop: db.drop };
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
 * One `bin/scheduler run` process in the benches' form: named by its node id, stdout and stderr to
 * `logFile`, the caller's environment passed on; stop(killAfterMs) is SIGTERM, then SIGKILL, and
 * resolves with { code, signal }.
 */
export class SchedulerNode extends Daemon {
  constructor({ nodeId, env, cwd, logFile, nodeArgs = [], bin = SCHEDULER_BIN }) {
    super([], { cwd, bin, nodeArgs, logFile, inheritEnv: true, env: { ...env, SCHEDULER_NODE_ID: nodeId, SCHEDULER_LOG_FORMAT: 'json' } });
  }

  logLines() {
    return this.logs();
  }

  stop(killAfterMs = 40_000) {
    return this.terminate(killAfterMs);
  }
}

// ----------------------------------------------------------------------------------- statistics

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

// -------------------------------------------------------------------------------------- options

/**
 * A bench script's options, by node:util parseArgs (strict): `strings` take a value (`--name value`
 * or `--name=value`; a value that starts with '-' needs the `=` form), `booleans` do not. Unset ones
 * are undefined (each script keeps its own defaults). `--help` prints `usage` and exits 0; an unknown
 * option, a missing value or a stray argument prints one line naming it and exits 2.
 */
export function benchOptions(argv, { strings = [], booleans = [], usage = '' } = {}) {
  const options = { help: { type: 'boolean' } };
  for (const name of strings) options[name] = { type: 'string' };
  for (const name of booleans) options[name] = { type: 'boolean' };
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false }));
  } catch (err) {
    optionError(String(err.message).split(/\.\s|\n/)[0]);
  }
  if (values.help) {
    process.stdout.write(usage.endsWith('\n') ? usage : `${usage}\n`);
    process.exit(0);
  }
  return values;
}

/** One line naming what is wrong with the options (and where the usage is), exit 2. */
export function optionError(message) {
  const script = `bench/${basename(process.argv[1] ?? 'script')}`;
  process.stderr.write(`${script}: ${message} (usage: node ${script} --help)\n`);
  process.exit(2);
}

/**
 * Options declared by their use (the older form; new scripts use benchOptions): every `--name` given
 * takes a value unless it is in `booleans`. Parsed by parseArgs all the same.
 */
export function parseFlags(argv, { booleans = [], usage = '' } = {}) {
  const strings = argv.filter((a) => a.startsWith('--')).map((a) => a.slice(2).split('=')[0]).filter((n) => n !== 'help' && !booleans.includes(n));
  return benchOptions(argv, { strings, booleans, usage });
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
