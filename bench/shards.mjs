#!/usr/bin/env node
/**
 * Shards: how a period's N shards are spread over nodes, and how late the last shard starts.
 *
 *   node bench/shards.mjs [--shards 4,100,1000] [--nodes 1,3] [--periods 5]
 *   (BENCH_MYSQL_ADMIN=mysql://root@127.0.0.1:3306/)
 *
 * A private MariaDB database and one Redis master on a free port. Each "node" is the daemon's own
 * machinery (the compiled dist/: a store pool, a RedlockProvider, Claimer, Executor, PeriodRunner)
 * in this one process, so the nodes share its CPU (two cores here: real nodes on their own machines
 * can only do better). For every period, every node calls `runPeriod(job, instant, 'schedule')`
 * 100 ms before the instant, as the tick does; the body (a no-op) records its shard, node and start.
 * Reported per (shards, nodes): the last shard's start after the instant (p50 and max over the
 * periods), the shards each node won (min-max over nodes and periods), and shards run twice or not at
 * all (both must be 0).
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { PROJECT_ROOT, adminConnection, createBenchDatabase, fmt, benchOptions, randomTag, sleep, sourceState, startRedisServers, summarise, table } from './lib.mjs';

const dist = (p) => pathToFileURL(join(PROJECT_ROOT, 'dist', p)).href;
const flags = benchOptions(process.argv.slice(2), { strings: ['shards', 'nodes', 'periods'], usage: 'usage: node bench/shards.mjs [--shards 4,100,1000] [--nodes 1,3] [--periods 5]' });
const SHARDS = String(flags.shards ?? '4,100,1000').split(',').map(Number);
const NODES = String(flags.nodes ?? '1,3').split(',').map(Number);
const PERIODS = Number(flags.periods ?? 5);

const [{ Database }, { KnexRunStore }, { KnexJobStore }, { Claimer }, { RedlockProvider }, { Executor }, { PeriodRunner }, { compileSchedule }] = await Promise.all([
  import(dist('store/database.js')), import(dist('store/runs.js')), import(dist('store/jobs.js')), import(dist('claim/claim.js')),
  import(dist('claim/redlock-provider.js')), import(dist('run/execute.js')), import(dist('run/period.js')), import(dist('time/schedule.js')),
]);

const log = pino({ level: 'silent' });
const admin = await adminConnection();
const bench = await createBenchDatabase(admin, { tag: randomTag(), nodes: 1 });
const [redis] = await startRedisServers(1);
const opened = [];
const nodesOpened = [];
const rows = [['shards', 'nodes', 'last start p50 ms', 'last start max ms', 'won per node', 'twice', 'missing']];
try {
  const config = { kind: 'mysql', url: bench.storeUrl(bench.users[0]) };
  const first = await Database.open(config);
  await first.migrate();
  opened.push(first);
  const maxNodes = Math.max(...NODES);
  const nodes = [];
  for (let i = 0; i < maxNodes; i++) {
    const db = i === 0 ? first : await Database.open(config);
    if (i > 0) opened.push(db);
    const store = new KnexRunStore(db);
    const lock = new RedlockProvider({ urls: [redis.url], prefix: 'bench-shards:', log });
    await lock.connect();
    const id = `node-${i + 1}`;
    const claimer = new Claimer(store, lock, id, log, new KnexJobStore(db));
    const executor = new Executor(store, id, log);
    nodes.push({ id, lock, runner: new PeriodRunner(store, claimer, executor, log) });
    nodesOpened.push(nodes[nodes.length - 1]);
  }
  for (const shards of SHARDS) {
    for (const n of NODES) {
      const starts = [];
      const job = {
        name: `bench-${shards}-${n}-${randomTag()}`, file: '/bench.mjs', schedule: compileSchedule('* * * * * *', 'UTC'), timezone: 'UTC',
        timeoutMs: null, lockTtlMs: 10_000, overlap: 'allow', catchUpMs: 60_000, coalesce: true, retries: 0, retryDelayMs: 1000, enabled: true, shards,
        run: (ctx) => { starts.push({ key: ctx.periodKey, shard: ctx.shard.index, node: ctx.nodeId, t: Date.now() }); },
      };
      const lastStart = [];
      const won = [];
      let twice = 0;
      let missing = 0;
      for (let p = 0; p < PERIODS; p++) {
        const instant = new Date(Math.ceil(Date.now() / 1000) * 1000 + 1000);
        await sleep(instant.getTime() - 100 - Date.now());
        await Promise.all(nodes.slice(0, n).map((node) => node.runner.runPeriod(job, instant, 'schedule', { notBefore: instant })));
        const mine = starts.filter((s) => s.key.endsWith(instant.toISOString()));
        const seen = new Map();
        for (const s of mine) seen.set(s.shard, (seen.get(s.shard) ?? 0) + 1);
        twice += [...seen.values()].filter((c) => c > 1).length;
        missing += shards - seen.size;
        lastStart.push(Math.max(...mine.map((s) => s.t)) - instant.getTime());
        for (const node of nodes.slice(0, n)) won.push(mine.filter((s) => s.node === node.id).length);
      }
      const l = summarise(lastStart);
      const w = summarise(won);
      rows.push([shards, n, fmt(l.p50, 0), fmt(l.max, 0), `${w.min}-${w.max}`, twice, missing]);
      process.stderr.write(`${shards} shards, ${n} nodes: done\n`);
    }
  }
  const { head, srcChanges } = sourceState();
  process.stdout.write(`bench/shards.mjs on ${head}${srcChanges.length ? ' (uncommitted src changes)' : ''}, MariaDB + 1 Redis, ${PERIODS} periods each, nodes in one process\n`);
  process.stdout.write(`${table(rows)}\n`);
} finally {
  for (const node of nodesOpened) await node.lock.close().catch(() => {});
  for (const db of opened) await db.close().catch(() => {});
  await redis.cleanup();
  await bench.drop().catch(() => {});
  await admin.end();
}
