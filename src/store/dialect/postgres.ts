/** PostgreSQL through pg. */
import { createRequire } from 'node:module';
import type { Knex } from 'knex';
import type pgModule from 'pg';
import type { StoreConfig } from '../../config/config.js';
import { redactText } from '../../config/redact.js';
import { errorMessage } from '../../errors.js';
import type { StoreHost, WriterFinder } from '../hosts.js';
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

/** A probe of one host of a list: connect and one query, each bounded by this. */
const PROBE_TIMEOUT_MS = 3000;

/** The store URL with its host list replaced by `host` (pg takes one host: user, password, database and parameters kept). */
function hostUrl(url: string, host: StoreHost): string {
  const shown = host.host.includes(':') ? `[${host.host}]:${host.port}` : `${host.host}:${host.port}`;
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/(?:[^/?#]*@)?)[^/?#]*/i, `$1${shown}`).replace(/([?&])target_session_attrs=[^&]*&?/, '$1').replace(/[?&]$/, '');
}

/**
 * knex's connection provider for a host list: each new connection goes to the writer the finder
 * names; once it suspects that host (an error of the kind a failover gives), the connections made
 * before are not lent again (their expiry) and the next one goes where the next search says.
 */
function writerConnection(config: StoreConfig, finder: WriterFinder): () => Promise<Knex.PgConnectionConfig & { expirationChecker: () => boolean }> {
  return async () => {
    const host = await finder.writer();
    const generation = finder.generation;
    return { connectionString: hostUrl(config.url, host), connectionTimeoutMillis: 5000, expirationChecker: () => finder.current === null || finder.generation !== generation };
  };
}

/** A pooled pg client is to the host the list writes to now (or last, while it searches). */
function onWriter(conn: unknown, finder: WriterFinder): boolean {
  const writer = finder.current ?? finder.lastWriter;
  const c = conn as { host?: string; port?: number; connectionParameters?: { host?: string; port?: number } } | null;
  const host = String(c?.connectionParameters?.host ?? c?.host ?? '').replace(/^\[(.*)\]$/, '$1');
  return writer !== null && host === writer.host && Number(c?.connectionParameters?.port ?? c?.port) === writer.port;
}

/** SQLSTATE classes and codes: https://www.postgresql.org/docs/current/errcodes-appendix.html */
// 25006 (read-only transaction): this host is no longer the primary (a failover); the next host of a list may be.
const TRANSIENT = new Set(['40001', '40P01', '55P03', '57014', '53200', '53400']);
const UNAVAILABLE = new Set(['25006', '57P01', '57P02', '57P03', '53300', '28P01', '28000', '3D000', '08000', '08001', '08003', '08004', '08006', '08P01']);
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
  [/deadlock detected|could not serialize access|canceling statement due to (lock|statement) timeout/, 'transient'],
  [/in a read-only transaction/, 'unavailable'],
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

  knexConfig(config: StoreConfig, finder?: WriterFinder): Knex.Config {
    loadPg();
    return {
      log: QUIET_KNEX_LOG,
      client: 'pg',
      connection: finder ? writerConnection(config, finder) : { connectionString: config.url, connectionTimeoutMillis: 5000 },
      // With a host list, a pooled connection is lent only while its host is the writer (knex's
      // expiry check alone refuses one connection per change of host and lends the others again).
      pool: { min: 0, max: 4, ...(finder ? { validate: (conn: unknown) => onWriter(conn, finder) } : {}) },
      acquireConnectionTimeout: 10_000,
    };
  },

  async init(knex) {
    await knex.raw('select 1 as ok');
  },

  async probeHost(config, host) {
    const pg = createRequire(import.meta.url)('pg') as typeof pgModule;
    const attrs = config.kind === 'postgres' ? config.targetSessionAttrs ?? 'any' : 'any';
    const client = new pg.Client({ connectionString: hostUrl(config.url, host), connectionTimeoutMillis: PROBE_TIMEOUT_MS, statement_timeout: PROBE_TIMEOUT_MS, query_timeout: PROBE_TIMEOUT_MS });
    // A connection that fails after connect (the server goes away under it) must not crash the process.
    client.on('error', () => {});
    try {
      await client.connect();
    } catch (err) {
      return `down: ${redactText(errorMessage(err))}`;
    }
    try {
      if (attrs === 'any') return null;
      const { rows } = await client.query<{ recovery: boolean; ro: string }>("SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS ro");
      if (rows[0]?.recovery) return 'in recovery (a standby)';
      if (attrs === 'read-write' && rows[0]?.ro === 'on') return 'read-only (default_transaction_read_only = on)';
      return null;
    } catch (err) {
      return `does not answer: ${redactText(errorMessage(err))}`;
    } finally {
      void client.end().catch(() => {});
    }
  },

  // statement_timestamp(): one value for the whole statement, as MySQL's NOW(3) and SQLite's 'now'
  // (clock_timestamp() is read at each evaluation: two stamps one statement writes, a row's started_at
  // and heartbeat_at, came out a millisecond apart). It still moves from statement to statement.
  nowMs: 'CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000) AS BIGINT)',

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
