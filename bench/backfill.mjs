#!/usr/bin/env node
/**
 * Backfill rate: periods per second that real daemons run a backfill at.
 *
 *   npm run build && node bench/backfill.mjs [--periods 10000] [--nodes 3] [--concurrency 8[,32,...]]
 *                        [--redis 3] [--store mariadb|postgres|sqlite] [--body-ms 0] [--json-out FILE]
 *
 * N `bin/scheduler run` nodes (dist/) on one store (a private MariaDB database by default), R Redis
 * masters, one every-minute job whose body appends its period key to a side-effect file (and waits
 * --body-ms). For each concurrency, `bin/scheduler backfill` of --periods minutes ending two hours ago
 * (a fresh range each time) runs with --json; the rate is the periods over the seconds from the
 * command's start to its end line. Checked: every period's body ran once (0 duplicates, 0 left out).
 * Exit status: 0 checked, 1 a duplicate or a period left out, 2 on error. The last line is one JSON document.
 */
import { writeFileSync } from 'node:fs';
import {
  Daemon, Workspace, benchOptions, createMariaDb, createPostgresDb, runCli, startRedisServers, table,
} from './lib.mjs';

const USAGE = 'usage: npm run build && node bench/backfill.mjs [--periods 10000] [--nodes 3] [--concurrency 8[,32]] [--redis 3] [--store mariadb|postgres|sqlite] [--body-ms 0] [--json-out FILE]\n';

function options(argv) {
  const flags = benchOptions(argv, { strings: ['periods', 'nodes', 'concurrency', 'redis', 'store', 'body-ms', 'json-out'], usage: USAGE });
  const num = (text, name, min) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name}: expected a whole number >= ${min}, got ${text}`);
    return n;
  };
  const store = flags.store ?? 'mariadb';
  if (!['mariadb', 'postgres', 'sqlite'].includes(store)) throw new Error(`--store: mariadb, postgres or sqlite, got ${store}`);
  return {
    periods: num(flags.periods ?? '10000', 'periods', 1), nodes: num(flags.nodes ?? '3', 'nodes', 1), redis: num(flags.redis ?? '3', 'redis', 0),
    concurrency: (flags.concurrency ?? '8').split(',').map((c) => num(c, 'concurrency', 1)), store, bodyMs: num(flags['body-ms'] ?? '0', 'body-ms', 0), jsonOut: flags['json-out'],
  };
}

const job = (bodyMs) => `import { appendFileSync } from 'node:fs';
export default {
  schedule: '* * * * *',
  async run(ctx) {
    appendFileSync(process.env.SIDE_EFFECTS, ctx.periodKey + '\\n');
    ${bodyMs > 0 ? `await new Promise((r) => setTimeout(r, ${bodyMs}));` : ''}
  },
};
`;

async function main() {
  const opts = options(process.argv.slice(2));
  const ws = new Workspace('bench-backfill-');
  const db = opts.store === 'mariadb' ? await createMariaDb('bench_backfill') : opts.store === 'postgres' ? await createPostgresDb('bench_backfill') : { url: ws.sqliteStore(), drop: async () => {} };
  const redis = opts.redis > 0 ? await startRedisServers(opts.redis) : [];
  const nodes = [];
  const rows = [];
  try {
    ws.writeJob('minutely.mjs', job(opts.bodyMs));
    const env = { SCHEDULER_STORE: db.url, SCHEDULER_REDIS: redis.map((r) => r.url).join(','), SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_HTTP: 'off', SIDE_EFFECTS: ws.path('effects.txt') };
    for (let i = 0; i < opts.nodes; i++) nodes.push(new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: `bench-${i + 1}` }, logFile: ws.path(`node-${i + 1}.log`) }));
    await Promise.all(nodes.map((n) => n.waitStarted(120_000)));
    let end = Math.floor(Date.now() / 60_000) * 60_000 - 2 * 3_600_000;
    for (const concurrency of opts.concurrency) {
      const to = new Date(end);
      const from = new Date(end - (opts.periods - 1) * 60_000);
      end = from.getTime() - 60_000;
      const started = performance.now();
      const r = await runCli(['backfill', 'minutely', '--from', from.toISOString(), '--to', to.toISOString(), '--concurrency', String(concurrency), '--json'],
        { cwd: ws.dir, env: { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir }, timeoutMs: 3_600_000 });
      const seconds = (performance.now() - started) / 1000;
      if (r.code !== 0) throw new Error(`backfill exited ${r.code}: ${r.stderr.trim().split('\n').at(-1)}`);
      const last = JSON.parse(r.stdout.trim().split('\n').at(-1));
      const keys = new Set();
      let dup = 0;
      const inRange = (k) => { const t = Date.parse(k.slice(k.indexOf('@') + 1)); return t >= from.getTime() && t <= to.getTime(); };
      for (const k of ws.lines('effects.txt').filter(inRange)) (keys.has(k) ? dup++ : keys.add(k));
      rows.push({ concurrency, periods: opts.periods, seconds: Math.round(seconds * 10) / 10, rate: Math.round(opts.periods / seconds), succeeded: last.counts.succeeded, duplicates: dup, leftOut: opts.periods - keys.size });
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop('SIGTERM')));
    await Promise.all(redis.map((r) => r.stop()));
    await db.drop();
    ws.cleanup();
  }
  process.stdout.write(`backfill: ${opts.nodes} nodes, ${opts.redis} Redis, ${opts.store}, body ${opts.bodyMs} ms\n`);
  process.stdout.write(`${table([['concurrency', 'periods', 'seconds', 'periods/s', 'succeeded', 'duplicates', 'left out'], ...rows.map((r) => [r.concurrency, r.periods, r.seconds, r.rate, r.succeeded, r.duplicates, r.leftOut].map(String))])}\n`);
  const doc = { nodes: opts.nodes, redis: opts.redis, store: opts.store, bodyMs: opts.bodyMs, rows };
  if (opts.jsonOut) writeFileSync(opts.jsonOut, JSON.stringify(doc, null, 2));
  process.stdout.write(`${JSON.stringify(doc)}\n`);
  process.exitCode = rows.every((r) => r.duplicates === 0 && r.leftOut === 0) ? 0 : 1;
}

main().catch((err) => {
  process.stderr.write(`bench/backfill.mjs: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 2;
});
