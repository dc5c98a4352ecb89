#!/usr/bin/env node
/**
 * ctx.once's overhead per call on MariaDB, through the same code a job body calls (makeOnce over the
 * store backend, from a private build of src/): a first call (read, fenced insert, fn, fenced result
 * write) and a replayed call (one read), beside a bare INSERT of one row on the same pool in the same
 * run, interleaved so that all three see the same server load. Counts the statements each call sends
 * (a replay must be one round trip). Creates its own database and drops it.
 *
 *   npm run build && node bench/once.mjs [--count 500]   (BENCH_MYSQL_ADMIN=mysql://root@127.0.0.1:3306/)
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { adminConnection, buildSnapshot, createBenchDatabase, fmt, benchOptions, randomTag, sourceState, summarise, table } from './lib.mjs';

const flags = benchOptions(process.argv.slice(2), { strings: ['count'], usage: 'node bench/once.mjs [--count 500]' });
const count = Number(flags.count ?? 500);

const root = buildSnapshot();
const load = (p) => import(pathToFileURL(join(root, 'dist', p)).href);
const [{ Database }, { KnexRunStore }, { KnexOnceStore }, { makeOnce, StoreOnceBackend }] = await Promise.all([
  load('store/database.js'), load('store/runs.js'), load('store/once.js'), load('once/once.js'),
]);

const admin = await adminConnection();
const bench = await createBenchDatabase(admin, { tag: randomTag(), nodes: 1 });
let db;
try {
  db = await Database.open({ kind: 'mysql', url: bench.storeUrl(bench.users[0]) });
  await db.migrate();
  await db.knex.schema.createTable('bench_probe', (t) => {
    t.bigIncrements('id').primary();
    t.string('k', 191).notNullable().unique();
  });
  let statements = 0;
  db.knex.on('query', () => statements++);
  const runs = new KnexRunStore(db);
  const claim = await runs.insertRun({ job: 'bench', scheduledAt: new Date(0), periodKey: 'bench@1970-01-01T00:00:00.000Z', attempt: 1, trigger: 'manual', nodeId: 'bench-node', leaseMs: 3_600_000 });
  const run = claim.run;
  const signal = new AbortController().signal;
  const once = makeOnce('bench', new StoreOnceBackend({
    store: new KnexOnceStore(db), caller: { job: 'bench', runId: run.id, attempt: 1, nodeId: 'bench-node' }, signal, dryRun: false, log: pino({ level: 'silent' }),
  }), signal, 1024 * 1024);

  const timed = async (fn) => {
    const before = statements;
    const t = performance.now();
    await fn();
    return { ms: performance.now() - t, statements: statements - before };
  };
  const result = { delivered: true, carrier: 'ACME', tracking: 'TRK-0000000000' };
  // Warm the pool and the statement paths.
  for (let i = 0; i < 20; i++) {
    await once(`warm:${i}`, () => result);
    await once(`warm:${i}`, () => result);
    await db.knex('bench_probe').insert({ k: `warm:${i}` });
  }
  const samples = { insert: [], first: [], replay: [] };
  const stmts = { insert: new Set(), first: new Set(), replay: new Set() };
  for (let i = 0; i < count; i++) {
    const key = `order_delivery:ORDER_${i}`;
    for (const [name, fn] of [
      ['insert', () => db.knex('bench_probe').insert({ k: key })],
      ['first', () => once(key, () => result)],
      ['replay', () => once(key, () => { throw new Error('fn ran on a replay'); })],
    ]) {
      const s = await timed(fn);
      samples[name].push(s.ms);
      stmts[name].add(s.statements);
    }
  }
  const rows = [['call', 'statements', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms']];
  for (const [name, label] of [['insert', 'bare INSERT (same pool)'], ['first', 'ctx.once, first call'], ['replay', 'ctx.once, replayed']]) {
    const s = summarise(samples[name]);
    rows.push([label, [...stmts[name]].join('/'), fmt(s.p50, 2), fmt(s.p90, 2), fmt(s.p99, 2), fmt(s.max, 2)]);
  }
  const [[version]] = await admin.query('SELECT VERSION() AS v');
  console.log(`ctx.once on MariaDB ${version.v}, ${count} keys, calls interleaved (${JSON.stringify(sourceState())})`);
  console.log(table(rows));
} finally {
  await db?.close();
  await bench.drop();
  await admin.end();
  rmSync(root, { recursive: true, force: true });
}
