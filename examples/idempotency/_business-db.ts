// The business database the idempotency examples write to: a stand-in for your own (orders, payments,
// a ledger). Not the scheduler's store: the examples only show how a job keeps ITS effects once.
//
// BUSINESS_DB names it: `sqlite:<path>` (the default: `sqlite:./data/examples/business.db`),
// `mysql://user:pass@host:port/db` or `postgres://user:pass@host:port/db`. One knex pool per process
// (kept on globalThis: every job file imports this helper afresh).
//
// Files starting with `_` are helpers: the scheduler does not load them as jobs.
import knexFactory, { type Knex } from 'knex';

const POOLS = Symbol.for('cluster-cron.examples.businessDb');
type Pools = Map<string, { db: Knex; ready: Promise<void> }>;

export function businessDbUrl(): string {
  return process.env.BUSINESS_DB || 'sqlite:./data/examples/business.db';
}

function connect(url: string): Knex {
  if (url.startsWith('sqlite:')) {
    return knexFactory({ client: 'better-sqlite3', connection: { filename: url.slice('sqlite:'.length) }, useNullAsDefault: true, pool: { min: 1, max: 1, afterCreate: (conn: { pragma(s: string): void }, done: (err: Error | null) => void) => {
      conn.pragma('journal_mode = WAL');
      conn.pragma('busy_timeout = 10000');
      done(null);
    } } });
  }
  if (url.startsWith('mysql:')) return knexFactory({ client: 'mysql2', connection: url, pool: { min: 0, max: 4 } });
  if (url.startsWith('postgres:') || url.startsWith('postgresql:')) return knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 4 } });
  throw new Error(`BUSINESS_DB: expected sqlite:<path>, mysql://... or postgres://..., got ${url.split(':')[0]}:...`);
}

/** The business database, with the examples' tables created if missing. */
export async function businessDb(): Promise<Knex> {
  const pools: Pools = ((globalThis as Record<symbol, unknown>)[POOLS] as Pools | undefined) ?? new Map();
  (globalThis as Record<symbol, unknown>)[POOLS] = pools;
  const url = businessDbUrl();
  let entry = pools.get(url);
  if (!entry) {
    const db = connect(url);
    entry = { db, ready: createTables(db) };
    pools.set(url, entry);
    entry.ready.catch(() => pools.delete(url));
  }
  await entry.ready;
  return entry.db;
}

/** Whether an error is a unique-key violation, on any of the three databases. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errno?: number };
  return e.code === 'ER_DUP_ENTRY' || e.code === '23505' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || e.code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** The examples' tables. Several nodes may start at once: a table another node just created is fine. */
export async function createTables(db: Knex): Promise<void> {
  const tables: Array<[string, (t: Knex.CreateTableBuilder) => void]> = [
    // order-delivery: the orders to deliver (the carrier keeps its own records, see order-delivery.ts).
    ['orders', (t) => {
      t.string('id', 64).primary();
      t.string('address', 200).notNullable();
      t.integer('cents').notNullable();
      t.string('status', 16).notNullable(); // paid -> delivered
      t.string('tracking', 64).nullable();
    }],
    // settle-business-day: payments, and one settlement per business day (the day is the key).
    ['payments', (t) => {
      t.string('id', 64).primary();
      t.string('day', 10).notNullable();
      t.integer('cents').notNullable();
    }],
    ['settlements', (t) => {
      t.string('day', 10).primary();
      t.bigInteger('total_cents').notNullable();
      t.integer('payments').notNullable();
      t.string('period_key', 160).notNullable();
      t.string('run_id', 64).notNullable();
    }],
    // import-events: an event log imported into per-customer totals in batches, with a checkpoint.
    ['source_events', (t) => {
      t.integer('id').primary();
      t.string('customer', 64).notNullable();
      t.integer('cents').notNullable();
    }],
    ['customer_totals', (t) => {
      t.string('customer', 64).primary();
      t.bigInteger('total_cents').notNullable();
      t.integer('events').notNullable();
    }],
    ['import_checkpoints', (t) => {
      t.string('name', 64).primary();
      t.integer('last_id').notNullable();
      t.string('period_key', 160).nullable();
    }],
    // reindex-catalog (sharded): the catalog items, and the index each shard writes.
    ['catalog_items', (t) => {
      t.integer('id').primary();
      t.string('title', 200).notNullable();
    }],
    ['catalog_index', (t) => {
      t.integer('item_id').notNullable();
      t.string('period_key', 160).notNullable();
      t.integer('shard').notNullable();
      t.primary(['item_id', 'period_key']);
    }],
  ];
  for (const [name, build] of tables) {
    if (await db.schema.hasTable(name)) continue;
    try {
      await db.schema.createTable(name, build);
    } catch (err) {
      if (!(await db.schema.hasTable(name))) throw err;
    }
  }
}
