/** PostgreSQL through pg. */
import { createRequire } from 'node:module';
import type { Knex } from 'knex';
import type pgModule from 'pg';
import type { StoreConfig } from '../../config/config.js';
import { QUIET_KNEX_LOG, isSocketError, sessionLocks, type Dialect, type ErrorClass, onConflictDoNothing } from './types.js';

/**
 * pg, loaded when a PostgreSQL store is opened (a node on another store never loads it). int8
 * columns (epoch ms) arrive as strings from pg by default; they fit a double exactly.
 */
let pgLoaded = false;
function loadPg(): void {
  if (pgLoaded) return;
  (createRequire(import.meta.url)('pg') as typeof pgModule).types.setTypeParser(20, (v: string) => Number(v));
  pgLoaded = true;
}

/** SQLSTATE classes and codes: https://www.postgresql.org/docs/current/errcodes-appendix.html */
const TRANSIENT = new Set(['40001', '40P01', '25006', '55P03', '57014', '53200', '53400']);
const UNAVAILABLE = new Set(['57P01', '57P02', '57P03', '53300', '28P01', '28000', '3D000', '08000', '08001', '08003', '08004', '08006', '08P01']);
/**
 * pg's own errors for a client whose connection is gone, with no SQLSTATE: a backend terminated
 * (pg_terminate_backend, idle_session_timeout, a restart) while the connection sat idle is reported
 * on the next query as "Client has encountered a connection error and is not queryable".
 */
const LOST_CONNECTION = /is not queryable|Connection terminated/i;

/**
 * The server's message, for an error that lost its SQLSTATE on the way: knex's migrator re-throws a
 * failure to take its lock row as a bare Error (name 'MigrationLocked') with only the message, e.g.
 * 'update "scheduler_migrations_lock" ... - permission denied for table scheduler_migrations_lock'.
 */
const MESSAGE_CLASSES: Array<[RegExp, ErrorClass]> = [
  [/duplicate key value violates unique constraint/, 'duplicate'],
  [/permission denied for /, 'privilege'],
  [/deadlock detected|could not serialize access|canceling statement due to (lock|statement) timeout|in a read-only transaction/, 'transient'],
];

/** Advisory lock keys: a name hashed to a signed 32-bit integer (the two-key form keeps 0x5c4ed as our namespace). */
function lockKey(name: string): number {
  let h = 0;
  for (const c of Buffer.from(name, 'utf8')) h = (Math.imul(h, 31) + c) | 0;
  return h;
}
const NAMESPACE = 0x5c4ed;

async function tryLock(knex: Knex, conn: unknown, name: string): Promise<boolean> {
  const res = (await knex.raw('SELECT pg_try_advisory_lock(?, ?) AS got', [NAMESPACE, lockKey(name)]).connection(conn)) as { rows: Array<{ got: boolean }> };
  return res.rows[0]?.got === true;
}

async function unlock(knex: Knex, conn: unknown, name: string): Promise<void> {
  await knex.raw('SELECT pg_advisory_unlock(?, ?)', [NAMESPACE, lockKey(name)]).connection(conn);
}

export const postgresDialect: Dialect = {
  kind: 'postgres',

  knexConfig(config: StoreConfig): Knex.Config {
    loadPg();
    return {
      log: QUIET_KNEX_LOG,
      client: 'pg',
      connection: { connectionString: config.url, connectionTimeoutMillis: 5000 },
      pool: { min: 0, max: 4 },
      acquireConnectionTimeout: 10_000,
    };
  },

  async init(knex) {
    await knex.raw('select 1 as ok');
  },

  nowMs: 'CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)',

  bigint: 'BIGINT',
  tableUsing: (_knex, table) => table,

  ...onConflictDoNothing,

  destroyConnection(connection) {
    (connection as { connection?: { stream?: { destroy?: () => void } } } | null)?.connection?.stream?.destroy?.();
  },

  classify(err): ErrorClass {
    const code = String((err as { code?: string } | undefined)?.code ?? '');
    if (!code) {
      const byMessage = MESSAGE_CLASSES.find(([re]) => re.test(String((err as Error | undefined)?.message ?? '')));
      if (byMessage) return byMessage[1];
    }
    if (code === '23505') return 'duplicate';
    if (TRANSIENT.has(code)) return 'transient';
    if (code === '42501') return 'privilege';
    if (UNAVAILABLE.has(code) || code.startsWith('08') || isSocketError(err) || LOST_CONNECTION.test(String((err as Error | undefined)?.message ?? ''))) return 'unavailable';
    return 'data';
  },

  ...sessionLocks(tryLock, unlock),
};
