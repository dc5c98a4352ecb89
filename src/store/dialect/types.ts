/**
 * The SQL that differs between databases, one module per database (as ShedLock keeps one statements
 * source per database); the rules that use it live once, in the table stores. A dialect knows how to
 * connect, the store's clock, the claim insert, how to insert rows that may exist already, how its
 * driver reports errors, and its advisory lock.
 */
import type { Knex } from 'knex';
import type { StoreConfig } from '../../config/config.js';
import type { StoreHost, WriterFinder } from '../hosts.js';

export type StoreKind = StoreConfig['kind'];

/**
 * What a failed statement means. `duplicate`: a unique key already holds the row (a lost race, a value).
 * `transient`: the statement may succeed when tried again (deadlock, lock wait, serialization, a
 * read-only server during a failover, SQLite busy). `unavailable`: the store cannot be reached or
 * refuses this user. `privilege`: the user lacks a privilege (named in the driver's message).
 * `data`: the statement itself is wrong for the data: a real error.
 */
export type ErrorClass = 'duplicate' | 'transient' | 'unavailable' | 'privilege' | 'data';

/** A value a statement sends: knex bindings only, never text spliced into SQL. */
export type RowValues = Record<string, Knex.Value | Knex.Raw>;

export interface Dialect {
  readonly kind: StoreKind;
  /**
   * knex settings for this database (pool, session set-up such as a UTC session zone). With
   * `finder` (a URL that lists several hosts), each new connection goes to the host it names, and
   * the connections made before it moved to another host are not lent again.
   */
  knexConfig(config: StoreConfig, finder?: WriterFinder): Knex.Config;
  /** Why `host` cannot take writes now, or null when it can (a connection of its own, closed after): for a host list. */
  probeHost?(config: StoreConfig, host: StoreHost): Promise<string | null>;
  /** After the first connection: reads what the server supports (e.g. MariaDB's RETURNING). */
  init(knex: Knex): Promise<void>;
  /** An SQL expression: the store's clock in epoch milliseconds, UTC whatever the session's zone. */
  readonly nowMs: string;
  /** The type name that CAST takes for a 64-bit integer (MySQL: SIGNED). */
  readonly bigint: string;
  /**
   * The table for a FROM clause, read through `index` where the database takes a hint (MySQL) and its
   * optimizer is known to choose worse: at millions of rows MariaDB reads `history <job>` through the
   * started_at index backwards (every row of every other job) instead of (job, started_at).
   */
  tableUsing(knex: Knex, table: string, index: string): string | Knex.Raw;
  /**
   * Claims rows under a unique key: the rows inserted, with every column as stored; a row whose key
   * exists already is left out (a lost race is a value, not an exception), in no particular order.
   * One statement for all the rows (PostgreSQL, SQLite: ON CONFLICT DO NOTHING RETURNING; MariaDB:
   * INSERT IGNORE ... RETURNING after checking the values against the columns); MySQL, which has no
   * RETURNING, one statement per row. A value the store refuses fails the call.
   */
  insertClaims(db: Knex | Knex.Transaction, table: string, rows: RowValues[], key: string[]): Promise<Record<string, unknown>[]>;
  /** Inserts rows, leaving those whose key exists untouched; returns how many were inserted. */
  insertMissing(db: Knex | Knex.Transaction, table: string, rows: RowValues[], key: string[]): Promise<number>;
  classify(err: unknown): ErrorClass;
  /** Closes a pooled connection's socket at once (a statement on it did not answer in time). */
  destroyConnection(connection: unknown): void;
  /**
   * Runs `fn` holding a named advisory lock, trying for it until `deadlineMs` (then throws). The lock
   * is the session's: the server frees it if this process dies.
   */
  withAdvisoryLock<T>(knex: Knex, name: string, deadlineMs: number, fn: () => Promise<T>): Promise<T>;
  /** Like withAdvisoryLock, but gives up at once: null when another session holds it. */
  tryAdvisoryLock<T>(knex: Knex, name: string, fn: () => Promise<T>): Promise<T | null>;
  /**
   * `column IN (values)` as one binding whatever the number of values, where the database reads a
   * list from one value (SQLite: json_each): a constant statement text, prepared and formatted once,
   * for the marks of thousands of jobs. Undefined: the caller lists the values (chunks of bindings).
   */
  inValues?(knex: Knex, column: string, values: string[]): Knex.Raw;
  /**
   * Before knex's migrator, holding the 'migrate' lock: whatever its own lock table needs where there is
   * no advisory lock to keep two starts from racing (SQLite; see sqlite.ts).
   */
  prepareMigrations?(knex: Knex, tableName: string): Promise<void>;
}

/** Connection-level failures every Node driver reports the same way. */
const SOCKET_CODES = new Set(['E_NO_WRITER', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN']);

export function isSocketError(err: unknown): boolean {
  const e = err as { code?: string; name?: string; message?: string } | undefined;
  return (
    SOCKET_CODES.has(e?.code ?? '') ||
    e?.name === 'KnexTimeoutError' ||
    /Connection terminated|connect ETIMEDOUT|Timeout acquiring a connection|ECONNREFUSED|ECONNRESET|Connection lost|socket hang up|^timeout expired$|timeout exceeded when trying to connect/i.test(e?.message ?? '')
  );
}

/** Waits between tries for an advisory lock held elsewhere. */
export const LOCK_POLL_MS = 200;

export async function pollUntil<T>(deadlineMs: number, what: string, attempt: () => Promise<T | null>): Promise<T> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const got = await attempt();
    if (got !== null) return got;
    if (Date.now() >= until) throw new Error(`timed out after ${Math.round(deadlineMs / 1000)} s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
  }
}

export const QUIET_KNEX_LOG: Knex.Logger = { warn: () => {}, error: () => {}, debug: () => {}, deprecate: () => {} };

type SessionLockFn = (knex: Knex, conn: unknown, name: string) => Promise<unknown>;

/**
 * withAdvisoryLock and tryAdvisoryLock over a database's session lock (try and unlock statements):
 * the lock is held on one pooled connection for the length of `fn`.
 */
export function sessionLocks(tryLock: (knex: Knex, conn: unknown, name: string) => Promise<boolean>, unlock: SessionLockFn): Pick<Dialect, 'withAdvisoryLock' | 'tryAdvisoryLock'> {
  const holding = async <T>(knex: Knex, name: string, acquire: (conn: unknown) => Promise<boolean>, fn: () => Promise<T>): Promise<T | null> => {
    const conn = await knex.client.acquireConnection();
    try {
      if (!(await acquire(conn))) return null;
      try {
        return await fn();
      } finally {
        await unlock(knex, conn, name);
      }
    } finally {
      await knex.client.releaseConnection(conn);
    }
  };
  return {
    async withAdvisoryLock(knex, name, deadlineMs, fn) {
      // A try-loop with a deadline: a session blocked on the lock would wait forever.
      const acquire = (conn: unknown) => pollUntil(deadlineMs, `the advisory lock '${name}' (another node holds it)`, async () => ((await tryLock(knex, conn, name)) ? true : null));
      return (await holding(knex, name, acquire, fn)) as Awaited<ReturnType<typeof fn>>;
    },
    async tryAdvisoryLock(knex, name, fn) {
      return holding(knex, name, (conn) => tryLock(knex, conn, name), fn);
    },
  };
}

/**
 * insertClaims and insertMissing as `INSERT ... ON CONFLICT (key) DO NOTHING RETURNING` (PostgreSQL;
 * SQLite 3.35+, bundled by better-sqlite3 12): a row whose key exists is absent from the answer, never
 * an exception, and a surrounding PostgreSQL transaction is not aborted as a unique violation would abort it.
 */
export const onConflictDoNothing: Pick<Dialect, 'insertClaims' | 'insertMissing'> = {
  async insertClaims(db, table, rows, key) {
    if (rows.length === 0) return [];
    return (await db(table).insert(rows).onConflict(key).ignore().returning('*')) as Record<string, unknown>[];
  },
  async insertMissing(db, table, rows, key) {
    if (rows.length === 0) return 0;
    const inserted = (await db(table).insert(rows).onConflict(key).ignore().returning(key[0]!)) as unknown[];
    return inserted.length;
  },
};
