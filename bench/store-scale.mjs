#!/usr/bin/env node
/**
 * Store-scale benchmark: do the store's queries stay flat as `scheduler_runs` grows to millions of rows?
 *
 *   node bench/store-scale.mjs [--rows 10000000] [--store mysql|postgres] [--keep] [--json-out FILE]
 *                              [--reps 50] [--warmup 5] [--startups 5] [--chunk 1000000]
 *                              [--idle-nodes 1,3,5] [--idle-seconds 30] [--skip-idle]
 *   (BENCH_MYSQL_ADMIN=mysql://root@127.0.0.1:3306/, BENCH_PG_ADMIN=postgres://postgres@127.0.0.1:5432/postgres)
 *
 * 1. A fresh database `cron_bench_scale_<tag>`; `bin/scheduler migrate` makes the schema (the real migrations).
 * 2. On the (nearly) empty table -- a few real rows written through the store for one job, one running
 *    row with a live lease and one pending attempt not yet due -- each operation is timed from Node
 *    through the compiled store (dist/store/runs.js: the SQL the daemon sends), `--reps` times after
 *    `--warmup` untimed calls: one sweep's statements (staleRuns, duePending, rowsInRanges for 20 jobs
 *    over 3 s), a claim (insertRun of a new period; finished untimed afterwards), history (job, 50),
 *    lastRuns (20 jobs), liveRuns, latestPeriod, the jobs-table flush; and daemon start-up (spawn
 *    `bin/scheduler run` with 20 jobs to its 'scheduler started' line, jobs table emptied before each
 *    start, so every start reads latestPeriod for its 20 jobs from the runs table).
 * 3. The runs table is emptied and filled to `--rows` with INSERT ... SELECT from a numbers table
 *    (MariaDB's seq engine, PostgreSQL's generate_series), `--chunk` rows per statement, then analysed.
 *    The data: 200 jobs in four classes of 50 (every 1 s, 10 s, 1 min, 5 min), in time order, in blocks
 *    of 5 minutes of history (16,800 rows), ending at the fill's start: 90 % succeeded, 5 % failed,
 *    4 % skipped (missed), 1 % abandoned; plus 5 running rows (live lease) and 5 pending attempts (not due).
 * 4. The same operations again on the full table; table of empty vs full (target: full p50 <= 2x empty
 *    p50); EXPLAIN (MariaDB: ANALYZE, with the rows actually read) of each sweep/history query.
 * 5. Idle store load: 1, 3, 5 `bin/scheduler run` nodes with 20 daily jobs (no tick fires), each node
 *    its own MySQL user; MariaDB's USER_STATISTICS (userstat enabled, restored afterwards) counts each
 *    node's statements over `--idle-seconds`. On PostgreSQL: pg_stat_database transactions (totals only).
 *
 * Exit status: 0 when every operation met the 2x target, 1 otherwise, 2 on error.
 */
import { execFile, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import {
  PROJECT_ROOT, SCHEDULER_BIN, adminConnection, createBenchDatabase, exited, fmt, globalVariable, randomTag, sleep, sourceState, table, benchOptions } from './lib.mjs';

const dist = (p) => pathToFileURL(join(PROJECT_ROOT, 'dist', p)).href;

// ------------------------------------------------------------------------------------- options

function parseOptions(argv) {
  const flags = benchOptions(argv, {
    strings: ['rows', 'store', 'json-out', 'reps', 'warmup', 'startups', 'chunk', 'idle-nodes', 'idle-seconds'],
    booleans: ['keep', 'skip-idle'],
    usage: 'usage: node bench/store-scale.mjs [--rows N] [--store mysql|postgres] [--keep] [--json-out FILE] [--reps 50] [--warmup 5]\n'
      + '       [--startups 5] [--chunk 1000000] [--idle-nodes 1,3,5] [--idle-seconds 30] [--skip-idle]\n',
  });
  const num = (flag, dflt) => {
    if (flags[flag] === undefined) return dflt;
    const n = Number(String(flags[flag]).replace(/_/g, ''));
    if (!Number.isInteger(n) || n <= 0) throw new Error(`--${flag}: expected a positive integer, got ${flags[flag]}`);
    return n;
  };
  const store = flags.store ?? 'mysql';
  if (!['mysql', 'postgres'].includes(store)) throw new Error(`--store: mysql or postgres, got ${store}`);
  const idleNodes = String(flags['idle-nodes'] ?? '1,3,5').split(',').map(Number);
  if (idleNodes.some((n) => !Number.isInteger(n) || n <= 0)) throw new Error('--idle-nodes: e.g. 1,3,5');
  return {
    rows: num('rows', 10_000_000),
    store,
    keep: Boolean(flags.keep),
    jsonOut: flags['json-out'],
    reps: num('reps', 50),
    warmup: num('warmup', 5),
    startups: num('startups', 5),
    chunk: num('chunk', 1_000_000),
    idleNodes,
    idleSeconds: num('idle-seconds', 30),
    skipIdle: Boolean(flags['skip-idle']),
  };
}

const out = (s = '') => process.stdout.write(`${s}\n`);
const note = (s) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${s}\n`);

// ----------------------------------------------------------------------------------- the data

const JOBS = 200;
/** Four classes of 50 jobs: every 1 s, 10 s, 60 s, 300 s. */
const CLASSES = [1000, 10_000, 60_000, 300_000];
const PER_CLASS = JOBS / CLASSES.length;
const BLOCK_MS = 300_000;
const ROWS_PER_BLOCK = CLASSES.reduce((s, p) => s + PER_CLASS * (BLOCK_MS / p), 0); // 16,800
const jobName = (j) => `job-${String(j).padStart(3, '0')}`;
const periodOf = (j) => CLASSES[Math.floor(j / PER_CLASS)];
/** The 20 jobs the operations (and the daemons) use: five of each class. */
const BENCH_JOBS = [0, 1, 2, 3, 4, 50, 51, 52, 53, 54, 100, 101, 102, 103, 104, 150, 151, 152, 153, 154].map(jobName);
/** The job new periods are claimed for (every second, not among the daemons' jobs). */
const CLAIM_JOB = jobName(5);
const RUNNING_JOBS = [10, 11, 12, 13, 14].map(jobName);
const PENDING_JOBS = [60, 61, 62, 63, 64].map(jobName);
const LIVE_LEASE_MS = 6 * 3_600_000;

/**
 * Row n (0-based) of the fill, as SQL over a column `n`: block b = n / 16800 of 5 minutes, ending at
 * `endMs` (aligned to 5 minutes); within a block, the 1 s class first (50 jobs x 300), then 10 s, 1 min, 5 min.
 */
function fillSelect(kind, { lo, hi, blocks, endMs }) {
  const q = kind === 'mysql' ? (s) => `\`${s}\`` : (s) => `"${s}"`;
  const div = kind === 'mysql' ? (a, b) => `(${a}) DIV ${b}` : (a, b) => `((${a}) / ${b})`;
  const mod = (a, b) => `((${a}) % ${b})`;
  // Class boundaries within a block (rows).
  const bounds = [];
  let at = 0;
  for (const [c, p] of CLASSES.entries()) {
    const per = BLOCK_MS / p;
    bounds.push({ c, p, per, from: at, to: at + PER_CLASS * per });
    at += PER_CLASS * per;
  }
  const caseOf = (f) => `CASE ${bounds.map((b) => `WHEN r < ${b.to} THEN ${f(b)}`).join(' ')} END`;
  const job = caseOf((b) => `${b.c * PER_CLASS} + ${div(`r - ${b.from}`, b.per)}`);
  const offset = caseOf((b) => `${mod(`r - ${b.from}`, b.per)} * ${b.p}`);
  const start0 = endMs - blocks * BLOCK_MS;
  const numbers = kind === 'mysql' ? `seq_${lo}_to_${hi - 1}` : `generate_series(${lo}::bigint, ${hi - 1}::bigint) AS g(n)`;
  const nCol = kind === 'mysql' ? 'seq' : 'n';
  const jobText = kind === 'mysql' ? "CONCAT('job-', LPAD(j, 3, '0'))" : "'job-' || LPAD(j::text, 3, '0')";
  const iso = kind === 'mysql'
    ? "CONCAT(DATE_FORMAT(FROM_UNIXTIME(s DIV 1000), '%Y-%m-%dT%H:%i:%s'), '.', LPAD(s % 1000, 3, '0'), 'Z')"
    : `to_char(to_timestamp(s / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
  const cat = kind === 'mysql' ? (...a) => `CONCAT(${a.join(', ')})` : (...a) => a.join(' || ');
  const text = kind === 'mysql' ? (e) => e : (e) => `(${e})::text`;
  // h: a per-row number 0..999 spread over the rows of each job (7919 is prime to 1000).
  return `
    SELECT ${jobText} AS job, s AS scheduled_at, ${cat(jobText, "'@'", iso)} AS period_key, 0 AS shard, 1 AS attempt,
           CASE WHEN h >= 950 AND h < 990 THEN 'catch-up' ELSE 'schedule' END AS ${q('trigger')},
           CASE WHEN h < 900 THEN 'succeeded' WHEN h < 950 THEN 'failed' WHEN h < 990 THEN 'skipped' ELSE 'abandoned' END AS status,
           CASE WHEN h >= 950 AND h < 990 THEN 'missed' WHEN h >= 990 THEN 'lease expired: node node-3 stopped heartbeating' END AS reason,
           ${cat("'node-'", text(`1 + h % 5`))} AS node_id,
           s + h % 7 AS started_at,
           s + h % 7 + d AS heartbeat_at,
           30000 AS lease_ms,
           s + h % 7 + d AS finished_at,
           d AS duration_ms,
           CASE WHEN h < 900 THEN ${cat(`'{"ok":true,"items":'`, text('h'), "'}'")} END AS result,
           CASE WHEN h >= 900 AND h < 950 THEN 'Error: upstream answered 503' END AS error,
           CASE WHEN h >= 900 AND h < 950 THEN 'Error: upstream answered 503\n    at run (file:///srv/jobs/sync.mjs:14:11)\n    at async Executor.start' END AS error_stack
      FROM (
        SELECT j, s, h, CASE WHEN h < 900 THEN 20 + (h * 37) % 400 WHEN h < 950 THEN 1000 + h WHEN h < 990 THEN 0 ELSE 30000 END AS d
          FROM (
            SELECT ${job} AS j, ${start0} + b * ${BLOCK_MS} + ${offset} AS s, ${mod(`b * 7919 + r * 104729 + ${div('r', 7)}`, 1000)} AS h
              FROM (SELECT ${div(nCol, ROWS_PER_BLOCK)} AS b, ${mod(nCol, ROWS_PER_BLOCK)} AS r FROM ${numbers}) AS x
          ) AS y
      ) AS z`;
}

const FILL_COLUMNS = ['job', 'scheduled_at', 'period_key', 'shard', 'attempt', 'trigger', 'status', 'reason', 'node_id', 'started_at', 'heartbeat_at',
  'lease_ms', 'finished_at', 'duration_ms', 'result', 'error', 'error_stack'];

// ------------------------------------------------------------------------------------ backends

/** What differs between MariaDB and PostgreSQL for the bench itself (the store's SQL is the store's). */
async function openBackend(opts) {
  const tag = `scale_${randomTag()}`;
  const maxNodes = Math.max(...opts.idleNodes);
  if (opts.store === 'mysql') {
    const admin = await adminConnection();
    // users[0]: this process's store; users[1..]: the daemons (one MySQL user each).
    const db = await createBenchDatabase(admin, { tag, nodes: maxNodes + 1 });
    const q = async (sql, params) => (await admin.query(sql, params))[0];
    await admin.query(`USE \`${db.db}\``);
    await admin.query("SET time_zone = '+00:00'");
    return {
      kind: 'mysql', name: db.db, url: db.storeUrl(db.users[0]), nodeUrl: (i) => db.storeUrl(db.users[i + 1]), nodeUser: (i) => db.users[i + 1],
      query: q,
      async clock() {
        return Number((await q("SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED) AS t"))[0].t);
      },
      async truncate() {
        await q('TRUNCATE TABLE scheduler_runs');
        await q('DELETE FROM scheduler_jobs');
      },
      async fillSession() {
        // Only this session: the generated keys are unique by construction.
        await q('SET SESSION unique_checks = 0');
      },
      insertSelect: (sel) => `INSERT INTO scheduler_runs (${FILL_COLUMNS.map((c) => `\`${c}\``).join(', ')}) ${sel}`,
      async analyze() {
        await q('ANALYZE TABLE scheduler_runs, scheduler_jobs');
      },
      async explain(sql, bindings) {
        const rows = await q(`ANALYZE ${sql}`, bindings);
        const cols = ['id', 'select_type', 'table', 'type', 'possible_keys', 'key', 'key_len', 'ref', 'rows', 'r_rows', 'filtered', 'r_filtered', 'Extra'];
        return { columns: cols, rows: rows.map((r) => cols.map((c) => r[c] ?? 'NULL')) };
      },
      /** Waits (up to maxMs) for InnoDB to write back the bulk load's dirty pages, so that the timings see a steady server. */
      async settle(maxMs) {
        const t0 = Date.now();
        const read = async () => {
          const rows = await q("SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_buffer_pool_pages_dirty', 'Innodb_buffer_pool_pages_total')");
          const m = Object.fromEntries(rows.map((r) => [r.Variable_name, Number(r.Value)]));
          return m.Innodb_buffer_pool_pages_dirty / m.Innodb_buffer_pool_pages_total;
        };
        let dirty = await read();
        const first = dirty;
        while (dirty > 0.01 && Date.now() - t0 < maxMs) {
          await sleep(2000);
          dirty = await read();
        }
        return { waitedMs: Date.now() - t0, dirtyBefore: first, dirtyAfter: dirty };
      },
      async tableSize() {
        const [r] = await q('SELECT DATA_LENGTH AS data, INDEX_LENGTH AS idx FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?', ['scheduler_runs']);
        return { dataBytes: Number(r.data), indexBytes: Number(r.idx) };
      },
      async idleCounters(users) {
        const rows = await q(
          `SELECT USER AS user, SELECT_COMMANDS AS selects, UPDATE_COMMANDS AS updates, OTHER_COMMANDS AS other, ROWS_READ AS rowsRead,
                  BUSY_TIME AS busy, CPU_TIME AS cpu, TOTAL_CONNECTIONS AS connections
             FROM information_schema.USER_STATISTICS WHERE USER IN (?)`, [users]);
        const m = new Map(users.map((u) => [u, { selects: 0, updates: 0, other: 0, rowsRead: 0, busy: 0, cpu: 0, connections: 0 }]));
        for (const r of rows) m.set(r.user, { selects: +r.selects, updates: +r.updates, other: +r.other, rowsRead: +r.rowsRead, busy: +r.busy, cpu: +r.cpu, connections: +r.connections });
        return m;
      },
      perNodeCounters: true,
      userstatBefore: undefined,
      async enableStats() {
        this.userstatBefore = await globalVariable(admin, 'userstat');
        if (this.userstatBefore === undefined) throw new Error('no userstat variable: MariaDB is needed for per-user statistics');
        if (this.userstatBefore !== 'ON') await admin.query('SET GLOBAL userstat = 1');
      },
      async restoreStats() {
        if (this.userstatBefore !== undefined && this.userstatBefore !== 'ON') {
          await admin.query('SET GLOBAL userstat = 0');
          note('userstat restored to OFF');
        }
        this.userstatBefore = undefined;
      },
      async drop() {
        await db.drop();
      },
      async close() {
        await admin.end();
      },
      serverInfo: async () => {
        const [v] = await q('SELECT VERSION() AS v, @@innodb_buffer_pool_size AS bp, @@innodb_flush_log_at_trx_commit AS flush');
        return `MariaDB ${v.v}, innodb_buffer_pool_size ${Math.round(Number(v.bp) / 2 ** 20)} MiB, innodb_flush_log_at_trx_commit=${v.flush}`;
      },
    };
  }
  const pg = (await import('pg')).default;
  const adminUrl = process.env.BENCH_PG_ADMIN ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const name = `cron_bench_${tag}`;
  await admin.query(`CREATE DATABASE "${name}"`);
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query("SET TIME ZONE 'UTC'");
  // ? placeholders (knex's form) to $n.
  const toPg = (sql) => {
    let i = 0;
    return sql.includes('$1') ? sql : sql.replace(/\?/g, () => `$${++i}`);
  };
  const q = async (sql, params) => (await client.query(toPg(sql), params)).rows;
  return {
    kind: 'postgres', name, url, nodeUrl: () => url, nodeUser: () => 'postgres',
    query: q,
    async clock() {
      return Number((await q('SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint AS t'))[0].t);
    },
    async truncate() {
      await q('TRUNCATE TABLE scheduler_runs');
      await q('DELETE FROM scheduler_jobs');
    },
    async fillSession() {},
    insertSelect: (sel) => `INSERT INTO scheduler_runs (${FILL_COLUMNS.map((c) => `"${c}"`).join(', ')}) ${sel}`,
    async analyze() {
      // As autovacuum would: statistics and the visibility map (index-only scans).
      await q('VACUUM (ANALYZE) scheduler_runs');
      await q('VACUUM (ANALYZE) scheduler_jobs');
    },
    async explain(sql, bindings) {
      const rows = await q(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, bindings);
      return { columns: ['QUERY PLAN'], rows: rows.map((r) => [r['QUERY PLAN']]) };
    },
    async settle() {
      const t0 = Date.now();
      await q('CHECKPOINT');
      return { waitedMs: Date.now() - t0, checkpoint: true };
    },
    async tableSize() {
      const [r] = await q("SELECT pg_relation_size('scheduler_runs') AS data, pg_indexes_size('scheduler_runs') AS idx");
      return { dataBytes: Number(r.data), indexBytes: Number(r.idx) };
    },
    async idleCounters() {
      const rows = (await admin.query('SELECT xact_commit + xact_rollback AS xacts, tup_returned, tup_fetched FROM pg_stat_database WHERE datname = $1', [name])).rows;
      const r = rows[0];
      return new Map([['(database)', { xacts: Number(r.xacts), rowsRead: Number(r.tup_returned) + Number(r.tup_fetched) }]]);
    },
    perNodeCounters: false,
    async enableStats() {},
    async restoreStats() {},
    async drop() {
      await client.end().catch(() => {});
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    },
    async close() {
      await client.end().catch(() => {});
      await admin.end();
    },
    serverInfo: async () => {
      const [v] = await q("SELECT version() AS v, current_setting('shared_buffers') AS sb, current_setting('synchronous_commit') AS sc");
      return `${v.v.split(' on ')[0]}, shared_buffers ${v.sb}, synchronous_commit=${v.sc}`;
    },
  };
}

// ---------------------------------------------------------------------------------- the store

async function openStore(backend) {
  const { Database } = await import(dist('store/database.js'));
  const { KnexRunStore } = await import(dist('store/runs.js'));
  const { KnexJobStore } = await import(dist('store/jobs.js'));
  const { periodKey } = await import(dist('time/schedule.js'));
  const db = await Database.open({ kind: backend.kind, url: backend.url });
  const runs = new KnexRunStore(db);
  const jobs = new KnexJobStore(db);
  // Every statement the store sends, as sent (SQL and bindings), for EXPLAIN.
  let capture = null;
  db.knex.on('query', (q) => { if (capture) capture.push({ sql: q.sql, bindings: q.bindings ?? [] }); });
  return {
    db, runs, jobs, periodKey,
    async captured(fn) {
      capture = [];
      try {
        await fn();
        return capture;
      } finally {
        capture = null;
      }
    },
    close: () => db.close(),
  };
}

function runCommand(args, env) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [SCHEDULER_BIN, ...args], { cwd: PROJECT_ROOT, env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`scheduler ${args.join(' ')} failed: ${err.message} ${stderr}`));
      else resolve(stdout);
    });
  });
}

// ----------------------------------------------------------------------------------- timing

function stats(values) {
  const s = [...values].sort((a, b) => a - b);
  const pick = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
  return { n: s.length, p50: pick(50), p95: pick(95), max: s[s.length - 1] };
}

async function timeIt(reps, warmup, fn) {
  for (let i = 0; i < warmup; i++) await fn(-1 - i);
  const ms = [];
  let last;
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    last = await fn(i);
    ms.push(performance.now() - t);
  }
  return { ...stats(ms), last };
}

/**
 * The operations, timed. `ctx`: the store, `ref` (an instant the sweep's ranges end 2 s before),
 * `claimFrom` (the first new period of CLAIM_JOB), and the seq counter for claims.
 */
async function measureOps(store, ctx, opts) {
  const { runs, jobs } = store;
  const ranges = () => BENCH_JOBS.map((job) => ({ job, fromMs: ctx.ref - 5000, toMs: ctx.ref - 2000 }));
  let claimSeq = 0;
  const claim = async () => {
    const at = new Date(ctx.claimFrom + 1000 * claimSeq++);
    const r = await runs.insertRun({ job: CLAIM_JOB, scheduledAt: at, periodKey: store.periodKey(CLAIM_JOB, at), attempt: 1, trigger: 'schedule', nodeId: 'bench', leaseMs: 30_000 });
    if (r.outcome !== 'inserted') throw new Error(`claim of ${at.toISOString()} was a duplicate`);
    return r.run;
  };
  const anchors = new Map(BENCH_JOBS.map((j) => [j, ctx.ref - 2000]));
  const ops = [
    ['staleRuns()', 'sweep', async () => (await runs.staleRuns()).length],
    ['duePending()', 'sweep', async () => (await runs.duePending()).length],
    ['rowsInRanges(20 jobs, 3 s)', 'sweep', async () => [...(await runs.rowsInRanges(ranges())).values()].reduce((s, v) => s + v.size, 0)],
    ['one sweep (the 3 above)', 'sweep', async () => {
      const a = await runs.staleRuns();
      const b = await runs.duePending();
      const c = await runs.rowsInRanges(ranges());
      return a.length + b.length + [...c.values()].reduce((s, v) => s + v.size, 0);
    }],
    ['insertRun (claim a new period)', 'claim', null],
    ['liveRuns(job) (overlap check)', 'claim', async () => (await runs.liveRuns(BENCH_JOBS[0])).length],
    ['history({ job, limit: 50 })', 'read', async () => (await runs.history({ job: BENCH_JOBS[0], limit: 50 })).length],
    ['history (a 5-min job, limit 50)', 'read', async () => (await runs.history({ job: BENCH_JOBS[15], limit: 50 })).length],
    ['lastRuns(20 jobs)', 'read', async () => (await runs.lastRuns(BENCH_JOBS)).size],
    ['latestPeriod(job) (start-up)', 'start', async () => ((await runs.latestPeriod(BENCH_JOBS[0])) === null ? 0 : 1)],
    ['jobs-table flush (advance 20)', 'sweep', async () => { await jobs.advance(anchors); return 20; }],
  ];
  const results = [];
  for (const [name, group, fn] of ops) {
    let r;
    if (fn === null) {
      // A claim: timed insertRun; the run is then finished (untimed), as the daemon would.
      const ms = [];
      for (let i = 0; i < opts.warmup + opts.reps; i++) {
        const t = performance.now();
        const run = await claim();
        const dt = performance.now() - t;
        if (i >= opts.warmup) ms.push(dt);
        await runs.finishRun(run.id, 'bench', { status: 'succeeded', result: { ok: true } });
      }
      r = { ...stats(ms), last: 1 };
    } else {
      r = await timeIt(opts.reps, opts.warmup, fn);
    }
    results.push({ name, group, p50: r.p50, p95: r.p95, max: r.max, n: r.n, rows: r.last });
    note(`  ${name}: p50 ${fmt(r.p50, 2)} ms p95 ${fmt(r.p95, 2)} ms (rows ${r.last})`);
  }
  return results;
}

/** The statements behind the sweep and history queries, as the store sends them, and their plans. */
async function explainAll(store, backend, ctx) {
  const { runs } = store;
  const ranges = BENCH_JOBS.map((job) => ({ job, fromMs: ctx.ref - 5000, toMs: ctx.ref - 2000 }));
  const targets = [
    ['staleRuns()', () => runs.staleRuns()],
    ['duePending()', () => runs.duePending()],
    ['rowsInRanges(20 jobs)', () => runs.rowsInRanges(ranges)],
    ['history({ job, limit: 50 }) (an every-second job)', () => runs.history({ job: BENCH_JOBS[0], limit: 50 })],
    ['history({ job, limit: 50 }) (a 5-minute job)', () => runs.history({ job: BENCH_JOBS[15], limit: 50 })],
    // lastRuns sends one statement per job: one of each class (1 s, 10 s, 1 min, 5 min), whose plans may differ.
    ['lastRuns (its statement for an every-second job)', () => runs.lastRuns([BENCH_JOBS[0]])],
    ['lastRuns (its statement for a 10-second job)', () => runs.lastRuns([BENCH_JOBS[5]])],
    ['lastRuns (its statement for a 1-minute job)', () => runs.lastRuns([BENCH_JOBS[10]])],
    ['lastRuns (its statement for a 5-minute job)', () => runs.lastRuns([BENCH_JOBS[15]])],
    ['liveRuns(job)', () => runs.liveRuns(BENCH_JOBS[0])],
    ['latestPeriod(job)', () => runs.latestPeriod(BENCH_JOBS[0])],
  ];
  const plans = [];
  for (const [name, fn] of targets) {
    const sent = await store.captured(fn);
    for (const s of sent) {
      const plan = await backend.explain(s.sql, s.bindings);
      plans.push({ name, sql: s.sql, bindings: s.bindings, ...plan });
    }
  }
  return plans;
}

// ---------------------------------------------------------------------------------- daemons

function dailyJob(name, hour) {
  return `// generated by bench/store-scale.mjs: daily at ${hour}:00 UTC, so no tick fires during the bench
export default { name: ${JSON.stringify(name)}, schedule: '0 0 ${hour} * * *', timezone: 'UTC', catchUp: '1m', async run() { return { ok: true }; } };
`;
}

function makeJobsDir() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-scale-'));
  const jobsDir = join(dir, 'jobs');
  // Twelve hours away from now: no daily instant falls within the bench.
  const hour = (new Date().getUTCHours() + 12) % 24;
  mkdirSync(jobsDir);
  for (const name of BENCH_JOBS) writeFileSync(join(jobsDir, `${name}.mjs`), dailyJob(name, hour));
  return { dir, jobsDir, hour };
}

/** One `bin/scheduler run`; resolves `startedMs` when its 'scheduler started' line is printed. */
function startNode({ url, jobsDir, cwd, nodeId, logFile }) {
  const t0 = performance.now();
  const proc = spawn(process.execPath, [SCHEDULER_BIN, 'run'], {
    cwd,
    env: {
      ...process.env, SCHEDULER_STORE: url, SCHEDULER_JOBS_DIR: jobsDir, SCHEDULER_NODE_ID: nodeId,
      // As deployed: each node's HTTP server on (its readiness probe and summaries cache read the store); BENCH_HTTP=off without.
      SCHEDULER_HTTP: process.env.BENCH_HTTP ?? '127.0.0.1:0',
      SCHEDULER_LOG_FORMAT: 'json', SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_REDIS: '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(logFile, { flags: 'a' });
  proc.stderr.pipe(log, { end: false });
  const lines = [];
  const started = new Promise((resolve, reject) => {
    const rl = createInterface({ input: proc.stdout });
    rl.on('line', (line) => {
      log.write(`${line}\n`);
      lines.push(line);
      if (line.includes('"scheduler started"')) resolve(performance.now() - t0);
    });
    proc.once('exit', (code, signal) => reject(new Error(`${nodeId} exited (${code ?? signal}) before starting: ${lines.slice(-3).join(' | ')}`)));
  });
  started.catch(() => {});
  return {
    proc, started, lines,
    async stop() {
      // The daemon installs its SIGTERM handler just after printing 'scheduler started': a signal
      // sent at once can beat it (default action: killed). Give it a moment.
      await sleep(300);
      if (proc.exitCode === null && proc.signalCode === null) {
        const done = exited(proc);
        proc.kill('SIGTERM'); // this pid only
        const t = setTimeout(() => proc.kill('SIGKILL'), 40_000);
        await done;
        clearTimeout(t);
      }
      log.end();
      return { code: proc.exitCode, signal: proc.signalCode };
    },
  };
}

async function measureStartup(backend, files, opts, label) {
  const ms = [];
  for (let i = 0; i < opts.startups; i++) {
    // A cold start each time: the 20 jobs unknown to the jobs table, so each start reads their latest period from the runs table.
    await backend.query('DELETE FROM scheduler_jobs');
    const node = startNode({ url: backend.nodeUrl(0), jobsDir: files.jobsDir, cwd: files.dir, nodeId: `startup-${label}-${i + 1}`, logFile: join(files.dir, `startup-${label}.log`) });
    try {
      ms.push(await node.started);
    } finally {
      const e = await node.stop();
      if (e.code !== 0) throw new Error(`start-up node exited with ${e.code ?? e.signal}`);
    }
  }
  const s = stats(ms);
  note(`  daemon start-up (${label}): p50 ${fmt(s.p50, 0)} ms, all ${ms.map((v) => fmt(v, 0)).join(', ')}`);
  return { name: 'daemon start-up (spawn -> started)', group: 'start', p50: s.p50, p95: s.p95, max: s.max, n: s.n, samples: ms };
}

async function idleLoad(backend, files, opts) {
  const results = [];
  for (const n of opts.idleNodes) {
    const nodes = Array.from({ length: n }, (_, i) => startNode({
      url: backend.nodeUrl(i), jobsDir: files.jobsDir, cwd: files.dir, nodeId: `idle-${n}-${i + 1}`, logFile: join(files.dir, `idle-${n}-node${i + 1}.log`),
    }));
    const users = nodes.map((_, i) => backend.nodeUser(i));
    try {
      await Promise.all(nodes.map((x) => x.started));
      await sleep(3000); // past the first sweep and the start-up statements
      const a = { t: performance.now(), c: await backend.idleCounters(users) };
      note(`  idle load, ${n} node(s): measuring ${opts.idleSeconds} s`);
      await sleep(opts.idleSeconds * 1000);
      const b = { t: performance.now(), c: await backend.idleCounters(users) };
      const seconds = (b.t - a.t) / 1000;
      const per = [];
      for (const [user, after] of b.c) {
        const before = a.c.get(user);
        const d = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - (before?.[k] ?? 0)]));
        const statements = backend.perNodeCounters ? d.selects + d.updates + d.other : d.xacts;
        per.push({ user, statements, perSecond: statements / seconds, selects: d.selects, updates: d.updates, other: d.other, rowsRead: d.rowsRead, busyS: d.busy, cpuS: d.cpu, newConnections: d.connections });
      }
      const total = per.reduce((s, p) => s + p.statements, 0);
      results.push({
        nodes: n, seconds, perNode: per, totalPerSecond: total / seconds,
        perNodePerSecond: backend.perNodeCounters ? per.map((p) => p.perSecond) : [total / seconds / n],
        perSweepPerNode: total / seconds / n, // one sweep a second
        rowsReadPerSecond: per.reduce((s, p) => s + (p.rowsRead ?? 0), 0) / seconds,
        load1: loadavg()[0],
      });
      note(`    total ${fmt(total / seconds, 2)} statements/s, per node ${fmt(total / seconds / n, 2)}`);
    } finally {
      const exits = await Promise.all(nodes.map((x) => x.stop()));
      for (const [i, e] of exits.entries()) if (e.code !== 0) throw new Error(`idle node ${i + 1} exited with ${e.code ?? e.signal}`);
    }
  }
  return results;
}

// ------------------------------------------------------------------------------------ phases

/** A few real rows through the store: 5 finished periods and a skipped one for one job, a running row (live lease), a pending attempt not due. */
async function seedFew(store, now) {
  const { runs } = store;
  const job = BENCH_JOBS[0];
  const base = Math.floor(now / 1000) * 1000 - 6000; // some of them within the sweep's ranges [now - 5 s, now - 2 s]
  for (let i = 0; i < 5; i++) {
    const at = new Date(base + i * 1000);
    const r = await runs.insertRun({ job, scheduledAt: at, periodKey: store.periodKey(job, at), attempt: 1, trigger: 'schedule', nodeId: 'bench', leaseMs: 30_000 });
    await runs.finishRun(r.run.id, 'bench', { status: 'succeeded', result: { ok: true } });
  }
  const skippedAt = new Date(base + 5000);
  await runs.insertSkipped([{ job, scheduledAt: skippedAt, periodKey: store.periodKey(job, skippedAt), trigger: 'catch-up', nodeId: 'bench', reason: 'missed' }]);
  await insertLiveRows(store, now, RUNNING_JOBS.slice(0, 1), PENDING_JOBS.slice(0, 1));
}

/** Running rows (live lease) and pending attempts (due in 6 h), as a busy cluster has a few of. */
async function insertLiveRows(store, now, runningJobs, pendingJobs) {
  const { runs } = store;
  // At the current second: after the filled history (which ends before the fill started), so no key collides.
  const at = new Date(Math.floor(now / 1000) * 1000);
  for (const job of runningJobs) {
    const r = await runs.insertRun({ job, scheduledAt: at, periodKey: store.periodKey(job, at), attempt: 1, trigger: 'schedule', nodeId: 'bench-live', leaseMs: LIVE_LEASE_MS });
    if (r.outcome !== 'inserted') throw new Error(`live row for ${job} not inserted`);
  }
  for (const job of pendingJobs) {
    const r = await runs.insertRun({ job, scheduledAt: at, periodKey: store.periodKey(job, at), attempt: 1, trigger: 'schedule', nodeId: 'bench-live', leaseMs: 30_000 });
    const end = await runs.endAttempt(r.run, 'bench-live', { status: 'failed', error: 'Error: upstream answered 503' }, { retries: 2, retryDelayMs: LIVE_LEASE_MS });
    if (!end.next || end.next.status !== 'pending') throw new Error(`pending attempt for ${job} not inserted`);
  }
}

async function fill(backend, opts, endMs) {
  const blocks = Math.ceil(opts.rows / ROWS_PER_BLOCK);
  await backend.fillSession();
  const t0 = performance.now();
  const chunks = [];
  for (let lo = 0; lo < opts.rows; lo += opts.chunk) {
    const hi = Math.min(opts.rows, lo + opts.chunk);
    const t = performance.now();
    await backend.query(backend.insertSelect(fillSelect(backend.kind, { lo, hi, blocks, endMs })));
    const dt = performance.now() - t;
    chunks.push(dt);
    note(`  fill: ${hi.toLocaleString('en')} / ${opts.rows.toLocaleString('en')} rows (chunk ${fmt(dt / 1000, 1)} s, total ${fmt((performance.now() - t0) / 1000, 0)} s)`);
  }
  const insertS = (performance.now() - t0) / 1000;
  const t1 = performance.now();
  await backend.analyze();
  const analyzeS = (performance.now() - t1) / 1000;
  return { rows: opts.rows, blocks, historyHours: (blocks * BLOCK_MS) / 3_600_000, insertSeconds: insertS, analyzeSeconds: analyzeS, chunkSeconds: chunks.map((c) => c / 1000) };
}

// -------------------------------------------------------------------------------------- main

async function main() {
  const opts = parseOptions(process.argv.slice(2));
  const command = `node bench/store-scale.mjs ${process.argv.slice(2).join(' ')}`.trim();
  const source = sourceState();
  const cleanups = [];
  let interrupted = false;
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (err) {
        note(`cleanup: ${err?.message ?? err}`);
      }
    }
    cleanups.length = 0;
  };
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    note('interrupted: cleaning up');
    void cleanup().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const summary = { bench: 'store-scale', command, at: new Date().toISOString(), node: process.version, cpus: cpus().length, source, store: opts.store, rows: opts.rows };
  try {
    const backend = await openBackend(opts);
    cleanups.push(() => backend.close());
    if (!opts.keep) cleanups.push(() => backend.drop().then(() => note(`database ${backend.name} dropped`)));
    else cleanups.push(() => note(`--keep: database ${backend.name} kept (${backend.url})`));
    summary.database = backend.name;
    summary.server = await backend.serverInfo();
    note(`database ${backend.name} (${summary.server}); load average ${loadavg().map((v) => v.toFixed(2)).join(' ')}`);

    const tm = performance.now();
    await runCommand(['migrate'], { SCHEDULER_STORE: backend.url, SCHEDULER_LOG_LEVEL: 'warn' });
    summary.migrateMs = performance.now() - tm;
    note(`bin/scheduler migrate: ${fmt(summary.migrateMs, 0)} ms`);

    const files = makeJobsDir();
    cleanups.push(() => { if (!opts.keep) rmSync(files.dir, { recursive: true, force: true }); });
    const store = await openStore(backend);
    cleanups.push(() => store.close());
    await store.jobs.declare(BENCH_JOBS.map((name) => ({ name, reconciledThrough: null })));

    // ---- empty
    const now0 = await backend.clock();
    await seedFew(store, now0);
    note('empty table: timing the operations');
    const empty = await measureOps(store, { ref: now0, claimFrom: Math.floor(now0 / 1000) * 1000 + 1000 }, opts);
    empty.push(await measureStartup(backend, files, opts, 'empty'));
    const emptyPlans = await explainAll(store, backend, { ref: now0 });

    // ---- fill
    await backend.truncate();
    const endMs = Math.floor((await backend.clock()) / BLOCK_MS) * BLOCK_MS;
    note(`filling ${opts.rows.toLocaleString('en')} rows (${JOBS} jobs, history ending ${new Date(endMs).toISOString()})`);
    const filled = await fill(backend, opts, endMs);
    const nowF = await backend.clock();
    await insertLiveRows(store, nowF, RUNNING_JOBS, PENDING_JOBS);
    await store.jobs.declare(BENCH_JOBS.map((name) => ({ name, reconciledThrough: null })));
    await backend.analyze();
    const [{ c: count }] = await backend.query('SELECT COUNT(*) AS c FROM scheduler_runs');
    filled.countedRows = Number(count);
    filled.size = await backend.tableSize();
    summary.fill = filled;
    filled.settle = await backend.settle(180_000);
    note(`settled after the load: ${JSON.stringify(filled.settle)}`);
    note(`fill: ${filled.countedRows.toLocaleString('en')} rows in ${fmt(filled.insertSeconds, 1)} s (+ analyse ${fmt(filled.analyzeSeconds, 1)} s); data ${fmt(filled.size.dataBytes / 2 ** 20, 0)} MiB, indexes ${fmt(filled.size.indexBytes / 2 ** 20, 0)} MiB`);

    // ---- full
    note('full table: timing the operations');
    // The sweep's ranges: the last 3 s of the history (every-second jobs have rows there). Claims: after CLAIM_JOB's latest period.
    const refFull = endMs; // ranges [end - 5 s, end - 2 s]
    const latestClaimJob = await store.runs.latestPeriod(CLAIM_JOB);
    const full = await measureOps(store, { ref: refFull, claimFrom: latestClaimJob + 1000 }, opts);
    full.push(await measureStartup(backend, files, opts, 'full'));
    const plans = await explainAll(store, backend, { ref: refFull });

    // ---- idle load (on the full table)
    let idle = null;
    if (!opts.skipIdle) {
      await backend.enableStats();
      cleanups.push(() => backend.restoreStats());
      note(`idle load: ${opts.idleNodes.join(', ')} node(s), ${opts.idleSeconds} s each, ${BENCH_JOBS.length} daily jobs (at ${files.hour}:00 UTC)`);
      idle = await idleLoad(backend, files, opts);
      await backend.restoreStats();
    }

    // ---- report
    const rows = empty.map((e) => {
      const f = full.find((x) => x.name === e.name);
      const ratio = f.p50 / e.p50;
      return { name: e.name, group: e.group, empty: { p50: e.p50, p95: e.p95, rows: e.rows }, full: { p50: f.p50, p95: f.p95, rows: f.rows }, ratioP50: ratio, ratioP95: f.p95 / e.p95, pass: ratio <= 2 };
    });
    out('');
    out(`store-scale: ${opts.store}, ${filled.countedRows.toLocaleString('en')} rows (${JOBS} jobs, ${fmt(filled.historyHours, 1)} h of history), ${summary.server}`);
    out(`machine: ${cpus().length} cores (shared with other work), Node ${process.version}, load average now ${loadavg().map((v) => v.toFixed(2)).join(' ')}`);
    out(`fill: ${fmt(filled.insertSeconds, 1)} s INSERT ... SELECT in chunks of ${opts.chunk.toLocaleString('en')} (${fmt(filled.rows / filled.insertSeconds / 1000, 0)}k rows/s), analyse ${fmt(filled.analyzeSeconds, 1)} s, then ${fmt(filled.settle.waitedMs / 1000, 0)} s waiting for the load's dirty pages to be written${filled.settle.dirtyAfter === undefined ? ' (CHECKPOINT)' : ` (${fmt(100 * filled.settle.dirtyBefore, 1)} % -> ${fmt(100 * filled.settle.dirtyAfter, 1)} % of the buffer pool dirty)`}; table data ${fmt(filled.size.dataBytes / 2 ** 20, 0)} MiB, indexes ${fmt(filled.size.indexBytes / 2 ** 20, 0)} MiB`);
    out(`timings: ms from Node over ${opts.reps} repetitions after ${opts.warmup} untimed (start-up: ${opts.startups} spawns); target full p50 <= 2x empty p50`);
    out('');
    out(table([
      ['operation', 'empty p50', 'empty p95', 'full p50', 'full p95', 'ratio p50', 'ratio p95', 'rows (empty/full)', '<= 2x'],
      ...rows.map((r) => [r.name, fmt(r.empty.p50, 2), fmt(r.empty.p95, 2), fmt(r.full.p50, 2), fmt(r.full.p95, 2), fmt(r.ratioP50, 2), fmt(r.ratioP95, 2),
        r.empty.rows === undefined ? '' : `${r.empty.rows ?? 'null'}/${r.full.rows ?? 'null'}`, r.pass ? 'yes' : 'NO']),
    ]));
    out('');
    out(`plans on the full table (${opts.store === 'mysql' ? 'MariaDB ANALYZE: EXPLAIN plus r_rows, the rows actually read' : 'EXPLAIN (ANALYZE, BUFFERS)'}):`);
    for (const p of plans) {
      out('');
      out(`-- ${p.name}`);
      out(`   ${p.sql.replace(/\s+/g, ' ')}`);
      out(`   bindings: ${JSON.stringify(p.bindings)}`);
      out(table([p.columns, ...p.rows.map((r) => r.map(String))]).replace(/^/gm, '   '));
    }
    if (idle) {
      out('');
      out(`idle store load on the full table (${BENCH_JOBS.length} daily jobs per node, no tick fires; one sweep a second per node; ${opts.store === 'mysql' ? 'MariaDB USER_STATISTICS per node user' : 'pg_stat_database transactions, totals only'}):`);
      out(table([
        ['nodes', 'seconds', 'statements/s total', 'statements/s per node', 'statements per sweep per node', 'selects/updates/other per node (window)', 'rows read/s total', 'new connections'],
        ...idle.map((r) => [r.nodes, fmt(r.seconds, 1), fmt(r.totalPerSecond, 2), r.perNodePerSecond.map((v) => fmt(v, 2)).join(' '), fmt(r.perSweepPerNode, 2),
          r.perNode.map((p) => (p.selects === undefined ? '-' : `${p.selects}/${p.updates}/${p.other}`)).join(' '), fmt(r.rowsReadPerSecond, 1), r.perNode.map((p) => p.newConnections ?? '-').join(' ')]),
      ]));
    }
    const failing = rows.filter((r) => !r.pass);
    out('');
    out(failing.length ? `over 2x: ${failing.map((r) => `${r.name} (${fmt(r.ratioP50, 2)}x)`).join(', ')}` : 'every operation within 2x of the empty table');
    summary.operations = rows.map((r) => ({ ...r, empty: round3(r.empty), full: round3(r.full), ratioP50: round(r.ratioP50, 3), ratioP95: round(r.ratioP95, 3) }));
    summary.startupSamplesMs = { empty: empty.at(-1).samples.map((v) => round(v, 1)), full: full.at(-1).samples.map((v) => round(v, 1)) };
    summary.plans = plans.map((p) => ({ name: p.name, sql: p.sql, bindings: p.bindings, columns: p.columns, rows: p.rows }));
    summary.emptyPlans = emptyPlans.map((p) => ({ name: p.name, columns: p.columns, rows: p.rows }));
    summary.idle = idle?.map((r) => ({ ...r, seconds: round(r.seconds, 2), totalPerSecond: round(r.totalPerSecond, 3), perNodePerSecond: r.perNodePerSecond.map((v) => round(v, 3)), perSweepPerNode: round(r.perSweepPerNode, 3), rowsReadPerSecond: round(r.rowsReadPerSecond, 1) }));
    summary.ok = failing.length === 0;
    process.exitCode = summary.ok ? 0 : 1;
  } finally {
    await cleanup();
  }
  out('');
  out(`command: ${command}`);
  out('JSON summary:');
  out(JSON.stringify({ ...summary, plans: undefined, emptyPlans: undefined }));
  if (opts.jsonOut) writeFileSync(opts.jsonOut, `${JSON.stringify(summary, null, 2)}\n`);
}

const round = (v, d) => (Number.isFinite(v) ? Number(v.toFixed(d)) : null);
const round3 = (o) => ({ p50: round(o.p50, 3), p95: round(o.p95, 3), rows: o.rows ?? null });

main().catch((err) => {
  process.stderr.write(`store-scale: ${err?.stack ?? err}\n`);
  process.exitCode = 2;
});
