#!/usr/bin/env node
/**
 * Store batches: what one statement for many rows saves, through the compiled store (dist/: run
 * `npm run build` first), on a private database it creates and drops.
 *
 *   node bench/store-batch.mjs [--store mysql|postgres|sqlite] [--rows 500] [--reps 5] [--json-out FILE]
 *   (BENCH_MYSQL_ADMIN=mysql://root@127.0.0.1:3306/, BENCH_PG_ADMIN=postgres://postgres@127.0.0.1:5432/postgres)
 *
 * Each rep, on `--rows` fresh periods:
 *   claims      `--rows` insertRun calls at once (one INSERT each, as a tick sends them today)
 *               vs one insertRuns call (one INSERT per 500 rows)
 *   heartbeats  the same running rows beaten one statement each (2 at a time: the lease pool's size)
 *               vs coalesced heartbeat calls at once
 *   outcomes    `--rows` finishRun calls at once (one UPDATE each: the one-row path of endAttempt)
 *               vs endAttempt calls at once (coalesced: one UPDATE per 200)
 * Per mode: wall time (median of the reps), rows/s, statements sent (knex 'query' events on both
 * pools), this process's CPU time and, with --store mysql on this machine, the CPU time of the local
 * mariadbd (utime + stime from /proc, 10 ms ticks; it counts whatever else that server serves
 * meanwhile). The first rep is a warm-up and is not counted.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { PROJECT_ROOT, adminConnection, cpuTimeMs, createBenchDatabase, createPostgresDb, fmt, pidsByName, randomTag, sourceState, table } from './lib.mjs';

const dist = (p) => pathToFileURL(join(PROJECT_ROOT, 'dist', p)).href;

const { values: flags } = parseArgs({
  options: {
    store: { type: 'string', default: 'mysql' },
    rows: { type: 'string', default: '500' },
    reps: { type: 'string', default: '5' },
    'json-out': { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (flags.help) {
  process.stdout.write('usage: node bench/store-batch.mjs [--store mysql|postgres|sqlite] [--rows 500] [--reps 5] [--json-out FILE]\n');
  process.exit(0);
}
const rowsPerRep = Number(flags.rows);
const reps = Number(flags.reps);
if (!Number.isInteger(rowsPerRep) || rowsPerRep <= 0) throw new Error(`--rows: a positive integer, got ${flags.rows}`);
if (!Number.isInteger(reps) || reps <= 0) throw new Error(`--reps: a positive integer, got ${flags.reps}`);
if (!['mysql', 'postgres', 'sqlite'].includes(flags.store)) throw new Error(`--store: mysql, postgres or sqlite, got ${flags.store}`);

const out = (s = '') => process.stdout.write(`${s}\n`);
const note = (s) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${s}\n`);

/** A private database: { config, drop }. */
async function freshStore(kind, tag) {
  if (kind === 'mysql') {
    const admin = await adminConnection();
    const db = await createBenchDatabase(admin, { tag: `batch_${tag}`, nodes: 1 });
    return { config: { kind, url: db.storeUrl(db.users[0]) }, drop: async () => { await db.drop(); await admin.end(); } };
  }
  if (kind === 'postgres') {
    const adminUrl = process.env.BENCH_PG_ADMIN ?? 'postgres://postgres@127.0.0.1:5432/postgres';
    const db = await createPostgresDb('cron_bench_batch', { adminUrl, name: `cron_bench_batch_${tag}` });
    return { config: { kind, url: db.url }, drop: () => db.drop() };
  }
  const dir = mkdtempSync(join(tmpdir(), 'bench-batch-'));
  const path = join(dir, 'runs.db');
  return { config: { kind, path, url: `sqlite:${path}` }, drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  const { Database } = await import(dist('store/database.js'));
  const { KnexRunStore } = await import(dist('store/runs.js'));
  const tag = randomTag();
  const fresh = await freshStore(flags.store, tag);
  const database = await Database.open(fresh.config);
  const statements = [];
  const count = (q) => statements.push(q.sql);
  database.knex.on('query', count);
  if (database.leaseKnex !== database.knex) database.leaseKnex.on('query', count);
  const store = new KnexRunStore(database);
  const results = new Map();
  // The server's CPU, when it runs here (one mariadbd or mysqld process).
  const serverPids = flags.store === 'mysql' ? pidsByName('mariadbd', 'mysqld') : [];
  const serverPid = serverPids.length === 1 ? serverPids[0] : null;
  const serverCpu = () => (serverPid === null ? NaN : cpuTimeMs(serverPid));
  try {
    await store.migrate();
    /** Times fn: wall ms, statements, CPU ms of this process. */
    const measure = async (mode, fn) => {
      statements.length = 0;
      const cpu = process.cpuUsage();
      const server0 = serverCpu();
      const t0 = performance.now();
      await fn();
      const ms = performance.now() - t0;
      const used = process.cpuUsage(cpu);
      return { mode, ms, statements: statements.length, cpuMs: (used.user + used.system) / 1000, serverCpuMs: serverCpu() - server0 };
    };
    const record = (rep, r) => {
      if (rep === 0) return; // warm-up
      const list = results.get(r.mode) ?? [];
      list.push(r);
      results.set(r.mode, list);
    };
    const lease = 30_000;
    const newRuns = (job) => Array.from({ length: rowsPerRep }, (_, i) => ({
      job, scheduledAt: new Date(Date.UTC(2030, 0, 1) + i * 1000), periodKey: `${job}@${i}`, attempt: 1, trigger: 'schedule', nodeId: 'bench', leaseMs: lease,
    }));
    for (let rep = 0; rep <= reps; rep++) {
      note(`rep ${rep}${rep === 0 ? ' (warm-up)' : ''}`);
      for (const batched of [false, true]) {
        const job = `batch-${batched ? 'b' : 'r'}-${rep}`;
        const wanted = newRuns(job);
        let claimed;
        record(rep, await measure(`claims: ${batched ? 'insertRuns, one call' : 'insertRun per row, at once'}`, async () => {
          claimed = batched ? await store.insertRuns(wanted) : await Promise.all(wanted.map((r) => store.insertRun(r)));
        }));
        const runs = claimed.map((c) => {
          if (c.outcome !== 'inserted') throw new Error('bench: a fresh period was not inserted');
          return c.run;
        });
        record(rep, await measure(`heartbeats: ${batched ? 'coalesced' : 'one UPDATE per row, 2 at a time'}`, async () => {
          // One at a time on each of the lease pool's 2 connections: all at once, most would wait past
          // the pool's 1 s acquire timeout (what a burst of per-row beats meets).
          const lanes = async () => {
            const answers = [];
            let next = 0;
            await Promise.all([0, 1].map(async () => {
              while (next < runs.length) {
                const i = next++;
                answers[i] = await store.heartbeats.beatAlone(runs[i].id, 'bench', lease);
              }
            }));
            return answers;
          };
          const beaten = batched ? await Promise.all(runs.map((r) => store.heartbeat(r.id, 'bench', lease))) : await lanes();
          if (!beaten.every(Boolean)) throw new Error('bench: a heartbeat missed its row');
        }));
        record(rep, await measure(`outcomes: ${batched ? 'endAttempt, coalesced' : 'finishRun per row, at once'}`, async () => {
          const outcome = (i) => ({ status: 'succeeded', result: { i }, bodyMsAgo: { started: 20, ended: 1 } });
          const written = batched
            ? (await Promise.all(runs.map((r, i) => store.endAttempt(r, 'bench', outcome(i), null)))).map((e) => e.written)
            : await Promise.all(runs.map((r, i) => store.finishRun(r.id, 'bench', outcome(i), lease)));
          if (!written.every(Boolean)) throw new Error('bench: an outcome was not written');
        }));
      }
    }
  } finally {
    await store.close();
    await database.close();
    await fresh.drop();
  }
  const summary = [...results].map(([mode, list]) => {
    const ms = median(list.map((r) => r.ms));
    return { mode, rows: rowsPerRep, ms, rowsPerSecond: rowsPerRep / (ms / 1000), statements: median(list.map((r) => r.statements)), cpuMs: median(list.map((r) => r.cpuMs)),
      serverCpuMs: serverPid === null ? null : median(list.map((r) => r.serverCpuMs)) };
  });
  out(`store-batch: ${flags.store}, ${rowsPerRep} rows, ${reps} reps (medians), load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const server = serverPid !== null;
  if (flags.store === 'mysql' && !server) note(`no single local mariadbd/mysqld process (found ${serverPids.length}): no server CPU column`);
  out(table([['mode', 'ms', 'rows/s', 'statements', 'node CPU ms', ...(server ? ['server CPU ms'] : [])],
    ...summary.map((s) => [s.mode, fmt(s.ms), fmt(s.rowsPerSecond, 0), String(s.statements), fmt(s.cpuMs), ...(server ? [fmt(s.serverCpuMs)] : [])])]));
  if (flags['json-out']) writeFileSync(flags['json-out'], JSON.stringify({ store: flags.store, rows: rowsPerRep, reps, load: loadavg(), source: sourceState(), summary }, null, 2));
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(2);
});
