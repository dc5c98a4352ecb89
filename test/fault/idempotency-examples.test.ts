/**
 * The idempotency examples of examples/idempotency, as users run them: three real `bin/scheduler run`
 * nodes with the examples' folder as their jobs folder, the business database on the same kind of
 * server as the store (SQLite files, or MariaDB), every job every second, a manual run beside the
 * scheduled ones, a node paused past its lease and a node killed with -9 and restarted, while they
 * work. Then each example's own promise is checked in the business tables, not in the scheduler's:
 * one shipment per order, one settlement per business day with the right total, every event added
 * into the totals exactly once, every catalog item indexed once per period by the shard it falls in.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, runCli } from '../helpers/cli.js';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { createTables } from '../../examples/idempotency/_business-db.js';
import { Cluster } from './harness.js';

const EXAMPLES = join(ROOT, 'examples', 'idempotency');

/**
 * The examples' folder copied inside the project (so that their `knex` import resolves, as in a user's
 * service), with the command job's schedule every second and its exports in the workspace.
 */
function examplesCopy(ws: Workspace): string {
  mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
  const dir = mkdtempSync(join(ROOT, 'test-artifacts', 'examples-'));
  cpSync(EXAMPLES, dir, { recursive: true });
  const yaml = join(dir, 'export-period.yaml');
  // Every second, with the others' short lease (a killed node's run blocks the next periods until its lease runs out).
  writeFileSync(yaml, readFileSync(yaml, 'utf8').replace(/^schedule: .*$/m, `schedule: '* * * * * *'\nlockTtl: ${LOCK_TTL_MS}ms`).replace(/^( {2}EXPORT_DIR:).*$/m, `$1 ${ws.path('exports')}`));
  return dir;
}
/** Orders paid before the faults, and as many more paid after the kill (new orders keep arriving). */
const ORDERS = 40;
const EVENTS = 1500;
const CUSTOMERS = 12;
const ITEMS = 30;
const LOCK_TTL_MS = 3000;

function businessKnex(url: string): Knex {
  if (url.startsWith('sqlite:')) return knexFactory({ client: 'better-sqlite3', connection: { filename: url.slice(7) }, useNullAsDefault: true, pool: { min: 1, max: 1 } });
  return knexFactory({ client: 'mysql2', connection: url, pool: { min: 0, max: 2 } });
}

async function payOrders(db: Knex, from: number, count: number): Promise<void> {
  await db.batchInsert('orders', Array.from({ length: count }, (_, n) => ({ id: `ORDER_${100 + from + n}`, address: `${from + n} Main St`, cents: 1000 + from + n, status: 'paid' })), 100);
}

async function seed(db: Knex): Promise<void> {
  await createTables(db);
  await payOrders(db, 0, ORDERS / 2);
  // Payments of the business days the every-second settlement may settle (the day before the period's, in Shanghai).
  const day = (offsetDays: number) => new Date(Date.now() + offsetDays * 86_400_000).toLocaleDateString('en-CA', { timeZone: 'Asia/Shanghai' });
  await db('payments').insert([-1, 0].flatMap((d) => [1, 2, 3].map((n) => ({ id: `p${d}-${n}`, day: day(d), cents: 100 * n }))));
  await db.batchInsert('source_events', Array.from({ length: EVENTS }, (_, i) => ({ id: i + 1, customer: `c${i % CUSTOMERS}`, cents: 1 + (i % 7) })), 200);
  await db.batchInsert('catalog_items', Array.from({ length: ITEMS }, (_, i) => ({ id: i + 1, title: `item ${i + 1}` })), 100);
}

async function scenario(options: { store: (ws: Workspace) => string; business: (ws: Workspace) => string; redis: string[] }): Promise<void> {
  const ws = new Workspace('cron-examples-');
  const jobsDir = examplesCopy(ws);
  const businessUrl = options.business(ws);
  const db = businessKnex(businessUrl);
  // What every process of the examples gets: the nodes, the manual runs and the forced re-runs.
  const env = {
    SCHEDULER_STORE: options.store(ws),
    ...(options.redis.length > 0 ? { SCHEDULER_REDIS: options.redis.join(',') } : {}),
    SCHEDULER_JOBS_DIR: jobsDir,
    SCHEDULER_HTTP: 'off',
    BUSINESS_DB: businessUrl,
    CARRIER_LOG: ws.path('carrier.jsonl'),
    EXAMPLE_SCHEDULE: '* * * * * *',
    EXAMPLE_LOCK_TTL: `${LOCK_TTL_MS}ms`,
    EXAMPLE_CARRIER_MS: '400',
    EXAMPLE_BATCH: '25',
    EXAMPLE_BATCH_MS: '40',
  };
  const cluster = new Cluster(ws, env);
  try {
    await seed(db);
    const ids = ['e1', 'e2', 'e3'];
    for (const id of ids) cluster.start(id, { SCHEDULER_JOBS_DIR: jobsDir });
    await Promise.all(ids.map((id) => cluster.started(id)));

    // In the middle of the work: a manual delivery run beside the scheduled ones; a node killed with
    // -9 in the middle of a call to the carrier, and restarted; then another node paused past its
    // lease in the middle of its own call.
    const carrier = () => ws.records<{ order: string; tracking: string; runId: string; node: string }>('carrier.jsonl');
    await waitFor('the first shipments', () => carrier().length >= 2, 30_000);
    const manual = runCli(['run-once', 'order-delivery'], { cwd: ws.dir, env });
    const callingNow = (except: string[]) => [...cluster.nodes].find(([id, d]) => !except.includes(id) && d.logs().some((l) => l.msg === 'calling the carrier' && Date.now() - Date.parse(String(l.time)) < 150))?.[0];
    const killed = await waitFor('a node calling the carrier', () => callingNow([]) ?? false, 30_000, 10);
    await cluster.kill(killed);
    await new Promise((r) => setTimeout(r, 1000));
    cluster.start(killed, { SCHEDULER_JOBS_DIR: jobsDir });
    await cluster.started(killed);
    await payOrders(db, ORDERS / 2, ORDERS / 2);
    const paused = await waitFor('another node calling the carrier', () => callingNow([killed]) ?? false, 30_000, 10);
    cluster.nodes.get(paused)!.proc.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, LOCK_TTL_MS * 2));
    cluster.nodes.get(paused)!.proc.kill('SIGCONT');
    const manualRun = await manual;
    expect([0, 1, 3], `manual run-once: ${manualRun.stderr}`).toContain(manualRun.code);

    // Until the work is done: every order delivered, every event imported, a few catalog periods.
    await waitFor('every order delivered and every event imported', async () => {
      const [{ n: paid }] = (await db('orders').where({ status: 'paid' }).count({ n: '*' })) as Array<{ n: number | string }>;
      const cp = (await db('import_checkpoints').first()) as { last_id: number } | undefined;
      return Number(paid) === 0 && cp?.last_id === EVENTS;
    }, 90_000, 250);
    const stops = await cluster.stopAll();
    expect(stops, 'every node stops cleanly').toEqual([0, 0, 0]);

    // order-delivery: the carrier shipped each order once, and the order carries that shipment's tracking number.
    const shipments = carrier();
    const perOrder = new Map<string, string[]>();
    for (const c of shipments) perOrder.set(c.order, [...(perOrder.get(c.order) ?? []), c.tracking]);
    const twice = [...perOrder].filter(([, t]) => t.length !== 1);
    if (twice.length > 0) {
      // What the runs that shipped them were, and what the keys say: the failure explains itself.
      const runs = await cluster.history();
      const shippers = shipments.filter((c) => twice.some(([id]) => id === c.order)).map((c) => ({ ...c, run: runs.find((r) => r.id === String(c.runId)) }));
      const keys = await runCli(['keys', '--json', '--prefix', 'order_delivery:'], { cwd: ws.dir, env });
      const logs = [...cluster.nodes].flatMap(([id, d]) => d.logs().filter((l) => l.job === 'order-delivery' && l.level !== 30).map((l) => ({ node: id, ...l })));
      expect.fail(`orders shipped more than once (paused ${paused}, killed ${killed}): ${JSON.stringify(shippers, null, 1)}\nkeys: ${keys.stdout.slice(0, 4000)}\nlogs: ${JSON.stringify(logs).slice(0, 6000)}`);
    }
    expect(perOrder.size).toBe(ORDERS);
    const orders = (await db('orders').select('id', 'tracking', 'status')) as Array<{ id: string; tracking: string; status: string }>;
    for (const o of orders) expect(o, o.id).toEqual({ id: o.id, status: 'delivered', tracking: perOrder.get(o.id)![0] });

    // settle-business-day: each settled day once, with its payments' total; a forced re-run writes nothing.
    const payments = (await db('payments').select('day', 'cents')) as Array<{ day: string; cents: number }>;
    const settlements = (await db('settlements').select('day', 'total_cents', 'period_key')) as Array<{ day: string; total_cents: number | string; period_key: string }>;
    expect(settlements.length).toBeGreaterThanOrEqual(1);
    for (const s of settlements) expect(Number(s.total_cents), s.day).toBe(payments.filter((p) => p.day === s.day).reduce((a, p) => a + p.cents, 0));
    const forced = await runCli(['run-once', 'settle-business-day', '--period', settlements[0]!.period_key.split('@')[1]!, '--force', '--json'], { cwd: ws.dir, env });
    expect(forced.code, forced.stderr).toBe(0);
    expect((JSON.parse(forced.stdout) as { runs: Array<{ result: { written: boolean } }> }).runs.map((r) => r.result.written)).toEqual([false]);
    expect(Number((await db('settlements').count({ n: '*' }))[0]!.n)).toBe(settlements.length);

    // import-events: every event added once (the totals and the counts add up exactly).
    const totals = (await db('customer_totals').select('customer', 'total_cents', 'events')) as Array<{ customer: string; total_cents: number | string; events: number | string }>;
    const expected = new Map<string, { cents: number; events: number }>();
    for (let i = 0; i < EVENTS; i++) {
      const e = expected.get(`c${i % CUSTOMERS}`) ?? { cents: 0, events: 0 };
      e.cents += 1 + (i % 7);
      e.events += 1;
      expected.set(`c${i % CUSTOMERS}`, e);
    }
    expect(new Map(totals.map((t) => [t.customer, { cents: Number(t.total_cents), events: Number(t.events) }]))).toEqual(expected);

    // reindex-catalog: for every period whose four shards succeeded, each item once, by its shard.
    const history = await cluster.history();
    const shardRuns = history.filter((r) => r.job === 'reindex-catalog' && r.status === 'succeeded');
    const byPeriod = new Map<string, number[]>();
    for (const r of shardRuns) byPeriod.set(r.periodKey, [...(byPeriod.get(r.periodKey) ?? []), (r as unknown as { shard: number }).shard]);
    const whole = [...byPeriod].filter(([, shards]) => shards.length === 4).map(([k]) => k);
    expect([...byPeriod].filter(([, shards]) => new Set(shards).size !== shards.length), 'a shard of a period succeeded twice').toEqual([]);
    expect(whole.length, 'periods with all four shards done').toBeGreaterThanOrEqual(3);
    for (const key of whole.slice(0, 5)) {
      const rows = (await db('catalog_index').where({ period_key: key }).select('item_id', 'shard')) as Array<{ item_id: number; shard: number }>;
      expect(rows.length, key).toBe(ITEMS);
      for (const r of rows) expect(r.shard, `${key} item ${r.item_id}`).toBe(r.item_id % 4);
    }

    // export-period (a command job): one file per period that succeeded, written by that period's run.
    const exported = history.filter((r) => r.job === 'export-period' && r.status === 'succeeded');
    expect(exported.length, `export periods: ${JSON.stringify(history.filter((r) => r.job === 'export-period').map((r) => [r.status, r.reason, r.error]))}`).toBeGreaterThanOrEqual(3);
    const files = readdirSync(ws.path('exports')).filter((f) => f.endsWith('.csv'));
    expect(new Set(files).size).toBe(new Set(exported.map((r) => r.scheduledAt)).size);
    const first = exported[exported.length - 1]!;
    const file = ws.path('exports', `${first.scheduledAt.replace(/:/g, '-')}.csv`);
    const before = readFileSync(file, 'utf8');
    expect(before).toContain(first.periodKey);
    const again = await runCli(['run-once', 'export-period', '--period', first.scheduledAt, '--force'], { cwd: ws.dir, env });
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(file, 'utf8'), 'a forced re-run writes nothing').toBe(before);
  } finally {
    await cluster.killAll();
    rmSync(jobsDir, { recursive: true, force: true });
    await db.destroy();
    ws.cleanup();
  }
}

describe('the idempotency examples under three nodes, a pause and a kill', () => {
  let mariaStore: TestDatabase | undefined;
  let mariaBusiness: TestDatabase | undefined;
  let redis: RedisServer[] = [];
  afterAll(async () => {
    await Promise.all(redis.map((r) => r.cleanup()));
    await mariaStore?.drop();
    await mariaBusiness?.drop();
  });

  // Side by side: each case has its own workspace, databases and Redis; the faults are each case's own nodes.
  it.concurrent('on SQLite (store and business database), no Redis', async () => {
    await scenario({ store: (ws) => ws.sqliteStore(), business: (ws) => `sqlite:${ws.path('business.db')}`, redis: [] });
  });

  it.concurrent('on MariaDB (store and business database) with a Redis master', async () => {
    mariaStore = await createMariaDb('cron_examples_store');
    mariaBusiness = await createMariaDb('cron_examples_biz');
    redis = await startRedisServers(1);
    await scenario({ store: () => mariaStore!.url, business: () => mariaBusiness!.url, redis: redis.map((r) => r.url) });
  });
});
