/** MySQL 8 and MariaDB 10.6+ through mysql2. */
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import type { Knex } from 'knex';
import type { StoreConfig } from '../../config/config.js';
import { parseStoreHosts, showHost, type StoreHost, type WriterFinder } from '../hosts.js';
import { redactText } from '../../config/redact.js';
import { errorMessage } from '../../errors.js';
import { QUIET_KNEX_LOG, isSocketError, pollUntil, sessionLocks, type Dialect, type ErrorClass, type RowValues } from './types.js';

/** MariaDB 10.5 and later know INSERT ... RETURNING (MySQL does not): e.g. '10.11.19-MariaDB-0+deb12u1'. */
export function mariaDbWithReturning(version: string): boolean {
  const m = /^(\d+)\.(\d+)\./.exec(version);
  if (!m || !/mariadb/i.test(version)) return false;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > 10 || (major === 10 && minor >= 5);
}

// errno values: https://mariadb.com/kb/en/mariadb-error-codes/ and MySQL's server error reference.
const TRANSIENT = new Set([
  1205, // ER_LOCK_WAIT_TIMEOUT
  1213, // ER_LOCK_DEADLOCK (on Galera also a certification conflict at COMMIT: another node's writeset won)
  1792, // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION (this transaction's own READ ONLY, not the host's)
  1317, // ER_QUERY_INTERRUPTED
  1969, // ER_STATEMENT_TIMEOUT (MariaDB max_statement_time)
  3024, // ER_QUERY_TIMEOUT (MySQL max_execution_time)
]);
// 4031: MySQL 8.0.24+ ER_CLIENT_INTERACTION_TIMEOUT (disconnected for inactivity, wait_timeout).
// "This host cannot take writes now", the next one of a host list may: 1290 ER_OPTION_PREVENTS_STATEMENT
// (--read-only, a demoted primary), 1836 ER_READ_ONLY_MODE, 1047 ER_UNKNOWN_COM_ERROR ("WSREP has not
// yet prepared node for application use": a Galera node outside the primary component, or joining).
const UNAVAILABLE = new Set([1040, 1045, 1049, 1053, 1927, 2002, 2003, 2006, 2013, 1152, 1158, 1159, 1160, 1161, 4031, 1290, 1836, 1047]);
/** The errors that say this host cannot take writes now (read-only, outside the primary component). */
const NOT_WRITABLE = new Set([1290, 1836, 1047]);
const NOT_WRITABLE_MESSAGE = /WSREP has not yet prepared node|--read-only option|server is running in read-only mode/i;

/** The host refused a write as read-only or outside Galera's primary component (not a lost connection). */
export function notWritable(err: unknown): boolean {
  const e = err as { errno?: number; message?: string } | undefined;
  return NOT_WRITABLE.has(Number(e?.errno ?? 0)) || (!e?.errno && NOT_WRITABLE_MESSAGE.test(String(e?.message ?? '')));
}
const PRIVILEGE = new Set([1142, 1143, 1044, 1227, 1370]);
const UNAVAILABLE_CODES = new Set(['PROTOCOL_CONNECTION_LOST', 'PROTOCOL_SEQUENCE_TIMEOUT', 'ER_CON_COUNT_ERROR', 'ER_ACCESS_DENIED_ERROR', 'ER_BAD_DB_ERROR', 'ER_SERVER_SHUTDOWN']);

/**
 * The lock name: per database, so that schedulers of different databases do not wait for each other.
 * GET_LOCK takes 64 characters at most: a longer name is hashed whole (cutting it would cut the
 * database name, and two databases sharing a long prefix would block each other).
 */
const FULL_LOCK_NAME = "CONCAT('scheduler:', ?, ':', DATABASE())";
const LOCK_NAME = `IF(CHAR_LENGTH(${FULL_LOCK_NAME}) <= 64, ${FULL_LOCK_NAME}, CONCAT('scheduler:', SHA1(${FULL_LOCK_NAME})))`;
const lockBindings = (name: string): string[] => [name, name, name];

async function tryLock(knex: Knex, conn: unknown, name: string): Promise<boolean> {
  const [rows] = (await knex.raw(`SELECT GET_LOCK(${LOCK_NAME}, 0) AS got`, lockBindings(name)).connection(conn)) as unknown as [Array<{ got: number | null }>];
  return Number(rows[0]?.got) === 1;
}

async function unlock(knex: Knex, conn: unknown, name: string): Promise<void> {
  await knex.raw(`SELECT RELEASE_LOCK(${LOCK_NAME})`, lockBindings(name)).connection(conn);
}

/**
 * Galera: the causality checks of every session (wsrep_sync_wait bits 1 READ, 2 UPDATE/DELETE,
 * 4 INSERT/REPLACE): a statement first waits until this node has applied every write the cluster
 * committed before it. The reads that decide (the overlap check, the sweeps, a takeover's candidates)
 * then see every committed row, and a claim INSERT sent again after a certification conflict meets
 * the winner's row (a duplicate: a lost race) instead of conflicting with it again.
 */
export const GALERA_SYNC_WAIT = 7;

type RawConnection = { query(sql: string, cb: (err: Error | null, rows?: unknown) => void): void };

/** Whether the server is a Galera node (wsrep_on = ON; MySQL has no such variable: an empty answer). */
function wsrepOn(rows: unknown): boolean {
  const row = (rows as Array<{ Value?: unknown; value?: unknown }> | undefined)?.[0];
  return String(row?.Value ?? row?.value ?? '').toUpperCase() === 'ON';
}

/** A new session: UTC, and on a Galera node its causality checks (GALERA_SYNC_WAIT). */
function setUpSession(conn: RawConnection, done: (err: Error | null, c: unknown) => void): void {
  // A UTC session, whatever the server's zone: DATETIME conversions never step at a DST change.
  conn.query("SET time_zone = '+00:00'", (err) => {
    if (err) return done(err, conn);
    conn.query("SHOW VARIABLES LIKE 'wsrep_on'", (err2, rows) => {
      if (err2 || !wsrepOn(rows)) return done(err2, conn);
      conn.query(`SET SESSION wsrep_sync_wait = ${GALERA_SYNC_WAIT}`, (err3) => done(err3, conn));
    });
  });
}

/**
 * Galera's named locks. GET_LOCK is the node's own there (not replicated): three nodes each on its own
 * Galera node all "held" the migration lock at once and migrated side by side ("Duplicate column
 * name"). So a lock is a row under a unique name, which certification gives to one node cluster-wide
 * (the other's INSERT meets the row, or a certification conflict at COMMIT); it expires unless its
 * holder refreshes it (a holder that died frees it after GALERA_LOCK_TTL_MS, by the store's clock).
 */
export const GALERA_LOCKS_TABLE = 'scheduler_locks';
const GALERA_LOCK_TTL_MS = 30_000;
const GALERA_LOCK_REFRESH_MS = 5_000;

function isDeadlock(err: unknown): boolean {
  const e = err as { errno?: number; message?: string } | undefined;
  return Number(e?.errno ?? 0) === 1213 || /Deadlock found|WSREP detected deadlock/i.test(String(e?.message ?? ''));
}

function galeraLocks(nowMs: string): Pick<Dialect, 'withAdvisoryLock' | 'tryAdvisoryLock'> {
  let table: Promise<unknown> | undefined;
  const ensureTable = (knex: Knex): Promise<unknown> => {
    table ??= knex.raw('CREATE TABLE IF NOT EXISTS ?? (name VARCHAR(64) NOT NULL PRIMARY KEY, holder VARCHAR(191) NOT NULL, expires_at BIGINT NOT NULL) ENGINE=InnoDB', [GALERA_LOCKS_TABLE]);
    table.catch(() => (table = undefined));
    return table;
  };
  /** True: this holder has the lock now. False: another holder has it (or won it at this moment). */
  const tryTake = async (knex: Knex, name: string, holder: string): Promise<boolean> => {
    await ensureTable(knex);
    try {
      await knex(GALERA_LOCKS_TABLE).where('name', name).andWhere('expires_at', '<', knex.raw(nowMs)).del();
      await knex(GALERA_LOCKS_TABLE).insert({ name, holder, expires_at: knex.raw(`${nowMs} + ?`, [GALERA_LOCK_TTL_MS]) });
      return true;
    } catch (err) {
      if (classifyMysql(err) === 'duplicate' || isDeadlock(err)) return false;
      throw err;
    }
  };
  const holding = async <T>(knex: Knex, name: string, holder: string, fn: () => Promise<T>): Promise<T> => {
    let refresh: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      // One refresh at a time; one that fails is tried again at the next interval (the row outlives a few).
      refresh = refresh.then(() => knex(GALERA_LOCKS_TABLE).where({ name, holder }).update({ expires_at: knex.raw(`${nowMs} + ?`, [GALERA_LOCK_TTL_MS]) })).catch(() => {});
    }, GALERA_LOCK_REFRESH_MS);
    try {
      return await fn();
    } finally {
      clearInterval(timer);
      await refresh;
      // Not freed (the store away): it expires.
      await knex(GALERA_LOCKS_TABLE).where({ name, holder }).del().catch(() => {});
    }
  };
  const holderId = (): string => `${hostname()}:${process.pid}:${randomBytes(6).toString('hex')}`;
  return {
    async withAdvisoryLock(knex, name, deadlineMs, fn) {
      const holder = holderId();
      await pollUntil(deadlineMs, `the lock '${name}' (another node holds it)`, async () => ((await tryTake(knex, name, holder)) ? true : null));
      return holding(knex, name, holder, fn);
    },
    async tryAdvisoryLock(knex, name, fn) {
      const holder = holderId();
      if (!(await tryTake(knex, name, holder))) return null;
      return holding(knex, name, holder, fn);
    },
  };
}

/** A pooled connection is to the host a host list writes to now (or last, while it searches). */
function onWriter(conn: unknown, finder: WriterFinder): boolean {
  const writer = finder.current ?? finder.lastWriter;
  const c = (conn as { config?: { host?: string; port?: number } } | null)?.config;
  return writer !== null && String(c?.host ?? '').replace(/^\[(.*)\]$/, '$1') === writer.host && Number(c?.port) === writer.port;
}

/** The store URL with its host list replaced by one host (user, password, database and parameters kept). */
function hostUri(url: string, host: StoreHost): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/(?:[^/?#]*@)?)[^/?#]*/i, `$1${showHost(host)}`);
}

/** One host of a MySQL/MariaDB host list. */
export interface MysqlHost {
  host: string;
  port: number;
}

type QueryRows = (sql: string) => Promise<Array<Record<string, unknown>>>;

/**
 * Why the server behind `query` cannot take this node's writes now, or null when it can: read-only
 * (`@@global.read_only`: a replica, a demoted primary; MySQL's super_read_only sets it too), or a
 * Galera node not ready (outside the primary component, joining, a donor, desynced).
 */
export async function mysqlWriteRefusal(query: QueryRows): Promise<string | null> {
  const [ro] = await query('SELECT @@global.read_only AS ro');
  if (Number(ro?.ro ?? 0) !== 0) return 'read-only (read_only = ON)';
  if (!wsrepOn(await query("SHOW VARIABLES LIKE 'wsrep_on'"))) return null;
  const status = new Map((await query("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_cluster_status', 'wsrep_local_state_comment')")).map((r) => [String(r.Variable_name ?? r.variable_name), String(r.Value ?? r.value)]));
  if (status.get('wsrep_cluster_status') !== 'Primary') return `outside the primary component (wsrep_cluster_status = ${status.get('wsrep_cluster_status') ?? 'unknown'})`;
  if (status.get('wsrep_ready') !== 'ON') return 'not ready (wsrep_ready = OFF)';
  if (status.get('wsrep_local_state_comment') !== 'Synced') return `not synced (wsrep_local_state_comment = ${status.get('wsrep_local_state_comment') ?? 'unknown'})`;
  return null;
}

/**
 * probe(host) for a host list: a connection of its own to `host` (closed after), then
 * mysqlWriteRefusal. Null: it takes writes; otherwise why not ("down: connect ECONNREFUSED ...",
 * "read-only ...", "outside the primary component ..."), for the log line naming each host.
 */
export async function probeMysqlHost(target: MysqlHost, auth: { user?: string; password?: string; database?: string }, timeoutMs = 3000): Promise<string | null> {
  const mysql = createRequire(import.meta.url)('mysql2/promise') as typeof import('mysql2/promise');
  let conn: import('mysql2/promise').Connection | undefined;
  try {
    conn = await mysql.createConnection({ host: target.host, port: target.port, user: auth.user, password: auth.password, database: auth.database, connectTimeout: timeoutMs });
  } catch (err) {
    return `down: ${redactText(errorMessage(err))}`;
  }
  try {
    const c = conn;
    return await mysqlWriteRefusal(async (sql) => (await c.query({ sql, timeout: timeoutMs }))[0] as Array<Record<string, unknown>>);
  } catch (err) {
    return `${notWritable(err) ? 'refuses writes' : 'does not answer'}: ${redactText(errorMessage(err))}`;
  } finally {
    conn.destroy();
  }
}

async function insertOne(db: Knex | Knex.Transaction, table: string, row: RowValues, withReturning: boolean): Promise<Record<string, unknown> | null> {
  try {
    if (withReturning) {
      // MariaDB has INSERT ... RETURNING; knex's MySQL dialect does not emit it.
      const q = db(table).insert(row).toSQL().toNative();
      const [rows] = (await db.raw(`${q.sql} returning *`, q.bindings as Knex.RawBinding[])) as unknown as [Record<string, unknown>[]];
      return rows[0] ?? null;
    }
    // MySQL: no RETURNING. The insert and the read of its id go over one connection (a transaction),
    // so the row read back is the one this statement wrote.
    const read = async (trx: Knex.Transaction) => {
      const [id] = await trx(table).insert(row);
      return (await trx(table).where({ id }).first()) as Record<string, unknown>;
    };
    return 'commit' in db ? await read(db as Knex.Transaction) : await (db as Knex).transaction(read);
  } catch (err) {
    if (classifyMysql(err) === 'duplicate') return null;
    throw err;
  }
}

/**
 * INSERT IGNORE ... RETURNING * (MariaDB 10.5+): many rows in one statement, a row whose key exists
 * skipped and absent from the answer. IGNORE also turns every other error of a row into a warning
 * and a mangled value (a string cut to the column, NULL written as '', a number clamped), which a
 * strict plain INSERT refuses: so the rows are checked against the columns first (checkRows), and
 * the statement is sent only when every value fits as given.
 */
async function insertIgnoreReturning(db: Knex | Knex.Transaction, table: string, rows: RowValues[]): Promise<Record<string, unknown>[]> {
  const q = db(table).insert(rows).toSQL().toNative();
  if (!/^insert into /i.test(q.sql)) throw new Error(`unexpected insert statement: ${q.sql.slice(0, 40)}`);
  const [stored] = (await db.raw(`insert ignore ${q.sql.slice('insert '.length)} returning *`, q.bindings as Knex.RawBinding[])) as unknown as [Record<string, unknown>[]];
  return stored;
}

/**
 * On Galera, a claim INSERT in a transaction of its own, so that a certification conflict fails its
 * COMMIT (1213, a lost race: tried again, the winner's row is then seen). Autocommitted, MariaDB
 * 10.11's INSERT IGNORE ... RETURNING turns the conflict at its implicit commit into a warning and
 * returns the row it did not keep: two nodes inserting the same period on two nodes both got it
 * back 290 times of 300 here (one row stored), and both ran the body (a duplicate start seen in the
 * Galera fault test). In a transaction the loser's COMMIT fails instead (291 of 300 here, 0 both).
 */
function inOwnCommit<T>(db: Knex | Knex.Transaction, galera: boolean, fn: (db: Knex | Knex.Transaction) => Promise<T>): Promise<T> {
  if (!galera || 'commit' in db) return fn(db);
  return (db as Knex).transaction((trx) => fn(trx));
}

/** A column as the server defines it, for the checks a strict INSERT makes. */
interface ColumnRule {
  nullable: boolean;
  /** NOT NULL, no default, not auto_increment: a row must give it. */
  required: boolean;
  kind: 'chars' | 'bytes' | 'integer' | 'other';
  /** chars: characters (VARCHAR); bytes: bytes (TEXT types). */
  max: number;
  /** Stores any character (utf8mb4): otherwise a non-ASCII string is left to the server. */
  anyText: boolean;
  range: [bigint, bigint] | null;
  /** `range` as numbers, clamped to the safe integers (a safe integer inside it fits). */
  numberRange: [number, number] | null;
}

type ColumnRules = Map<string, ColumnRule>;

const INTEGER_BITS: Record<string, number> = { tinyint: 8, smallint: 16, mediumint: 24, int: 32, integer: 32, bigint: 64 };

async function readColumnRules(db: Knex | Knex.Transaction, table: string): Promise<ColumnRules> {
  const rows = (await db('information_schema.columns')
    .select({ name: 'column_name', nullable: 'is_nullable', dflt: 'column_default', extra: 'extra', type: 'data_type', chars: 'character_maximum_length', bytes: 'character_octet_length', charset: 'character_set_name', full: 'column_type' })
    .whereRaw('table_schema = DATABASE()').andWhere('table_name', table)) as Array<{
    name: string; nullable: string; dflt: string | null; extra: string | null; type: string; chars: number | string | null; bytes: number | string | null; charset: string | null; full: string;
  }>;
  const rules: ColumnRules = new Map();
  for (const r of rows) {
    const type = r.type.toLowerCase();
    const bits = INTEGER_BITS[type];
    const unsigned = /unsigned/i.test(r.full);
    const range: [bigint, bigint] | null = bits ? (unsigned ? [0n, (1n << BigInt(bits)) - 1n] : [-(1n << BigInt(bits - 1)), (1n << BigInt(bits - 1)) - 1n]) : null;
    const safe = (b: bigint) => Number(b < BigInt(Number.MIN_SAFE_INTEGER) ? BigInt(Number.MIN_SAFE_INTEGER) : b > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : b);
    rules.set(r.name, {
      nullable: r.nullable === 'YES',
      required: r.nullable !== 'YES' && r.dflt === null && !/auto_increment/i.test(r.extra ?? ''),
      kind: type === 'varchar' || type === 'char' ? 'chars' : /text$/.test(type) ? 'bytes' : bits ? 'integer' : 'other',
      max: Number(type === 'varchar' || type === 'char' ? r.chars : r.bytes) || 0,
      anyText: /^utf8mb4/i.test(r.charset ?? ''),
      range,
      numberRange: range ? [safe(range[0]), safe(range[1])] : null,
    });
  }
  return rules;
}

/** The error a strict INSERT gets from the server, shaped as mysql2 reports it (so it is classified alike). */
function refused(errno: number, code: string, sqlState: string, message: string): Error {
  return Object.assign(new Error(message), { errno, code, sqlState, sqlMessage: message });
}

const isRaw = (v: unknown): boolean => typeof v === 'object' && v !== null && typeof (v as { toSQL?: unknown }).toSQL === 'function';

/**
 * Whether every value fits its column as given, as a strict INSERT would judge it; throws the error
 * that INSERT would have got for the first value that does not (too long, NULL into NOT NULL, a
 * required column left out, out of range). False: a value it cannot judge (left to a strict insert).
 * Raw SQL values are the store's own expressions (its clock) and are not judged.
 */
function checkRows(rules: ColumnRules, rows: RowValues[]): boolean {
  for (const row of rows) for (const name in row) if (!rules.has(name)) return false;
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    const at = i + 1;
    for (const [name, rule] of rules) {
      const value = row[name];
      if (value === undefined) {
        if (rule.required) throw refused(1364, 'ER_NO_DEFAULT_FOR_FIELD', 'HY000', `Field '${name}' doesn't have a default value`);
        continue;
      }
      if (value === null) {
        if (!rule.nullable) throw refused(1048, 'ER_BAD_NULL_ERROR', '23000', `Column '${name}' cannot be null`);
        continue;
      }
      if (isRaw(value)) continue;
      if (rule.kind === 'chars' || rule.kind === 'bytes') {
        if (typeof value !== 'string' && typeof value !== 'number') return false;
        const text = String(value);
        if (!rule.anyText && /[^\u0000-\u007f]/.test(text)) return false;
        // Counted only when the cheap bound does not settle it (a tick checks 500 rows of a dozen
        // columns): characters <= UTF-16 units, and UTF-8 bytes <= 3 per UTF-16 unit.
        if (rule.kind === 'chars' ? text.length <= rule.max : text.length * 3 <= rule.max) continue;
        const size = rule.kind === 'chars' ? [...text].length : Buffer.byteLength(text, 'utf8');
        if (size > rule.max) throw refused(1406, 'ER_DATA_TOO_LONG', '22001', `Data too long for column '${name}' at row ${at}`);
      } else if (rule.kind === 'integer') {
        // A safe integer within the column's range as a number: no BigInt made.
        if (typeof value === 'number' && Number.isSafeInteger(value) && value >= rule.numberRange![0] && value <= rule.numberRange![1]) continue;
        let n: bigint;
        if (typeof value === 'number' && Number.isInteger(value)) n = BigInt(value);
        else if (typeof value === 'bigint') n = value;
        else if (typeof value === 'string' && /^-?\d{1,20}$/.test(value)) n = BigInt(value);
        else return false;
        if (n < rule.range![0] || n > rule.range![1]) throw refused(1264, 'ER_WARN_DATA_OUT_OF_RANGE', '22003', `Out of range value for column '${name}' at row ${at}`);
      } else {
        return false;
      }
    }
  }
  return true;
}

/**
 * The driver's message, for an error that lost its code on the way: knex's migrator re-throws a
 * failure to take its lock row as a bare Error (name 'MigrationLocked') with only the message, e.g.
 * "update `scheduler_migrations_lock` ... - UPDATE command denied to user 'app'@'10.0.0.5' for table ...".
 */
const MESSAGE_CLASSES: Array<[RegExp, ErrorClass]> = [
  [/Duplicate entry .* for key/, 'duplicate'],
  [/command denied to user|Access denied for user '[^']*'@'[^']*' to database/, 'privilege'],
  [/Deadlock found when trying to get lock|WSREP detected deadlock|Lock wait timeout exceeded|in a READ ONLY transaction|max_statement_time exceeded/i, 'transient'],
  [NOT_WRITABLE_MESSAGE, 'unavailable'],
];

export function classifyMysql(err: unknown): ErrorClass {
  const e = err as { code?: string; errno?: number; fatal?: boolean; message?: string } | undefined;
  const errno = Number(e?.errno ?? 0);
  if (!errno && !e?.code) {
    const byMessage = MESSAGE_CLASSES.find(([re]) => re.test(String(e?.message ?? '')));
    if (byMessage) return byMessage[1];
  }
  if (e?.code === 'ER_DUP_ENTRY' || errno === 1062) return 'duplicate';
  if (TRANSIENT.has(errno)) return 'transient';
  if (PRIVILEGE.has(errno)) return 'privilege';
  if (UNAVAILABLE.has(errno) || UNAVAILABLE_CODES.has(e?.code ?? '') || e?.fatal === true || isSocketError(err)) return 'unavailable';
  return 'data';
}

// UTC_TIMESTAMP is UTC whatever the session or server zone (ShedLock's choice);
// UNIX_TIMESTAMP(CURRENT_TIMESTAMP) converts through the session zone and steps by an hour at a fall-back.
const NOW_MS = "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)";

/** A dialect per store: what the server supports is read at connection. */
export function mysqlDialect(): Dialect {
  let withReturning = false;
  /** The server is a Galera node (read at init): named locks are rows (galeraLocks), not GET_LOCK. */
  let galera = false;
  /** The session's sql_mode is strict (null: not read yet). */
  let strict: boolean | null = null;
  const rulesByTable = new Map<string, Promise<ColumnRules>>();
  const sessionLock = sessionLocks(tryLock, unlock);
  const galeraLock = galeraLocks(NOW_MS);
  /** The columns of `table` as the server defines them, read once (again after a row named a column not among them). */
  const columnRules = async (db: Knex | Knex.Transaction, table: string): Promise<ColumnRules> => {
    let read = rulesByTable.get(table);
    if (!read) {
      read = readColumnRules(db, table);
      rulesByTable.set(table, read);
      read.catch(() => rulesByTable.delete(table));
    }
    return read;
  };
  return {
    kind: 'mysql',

    knexConfig(config: StoreConfig, finder?: WriterFinder): Knex.Config {
      const options = { timezone: 'Z', connectTimeout: 5000, supportBigNumbers: true, bigNumberStrings: false };
      return {
        log: QUIET_KNEX_LOG,
        client: 'mysql2',
        // A host list: each new connection to the host the finder names (see hosts.ts); the ones
        // made before it suspected that host are not lent again.
        connection: finder
          ? async () => {
            const host = await finder.writer();
            const generation = finder.generation;
            return { ...options, uri: hostUri(config.url, host), expirationChecker: () => finder.current === null || finder.generation !== generation } as unknown as Knex.MySql2ConnectionConfig;
          }
          : { uri: config.url, ...options } as Knex.MySql2ConnectionConfig & { uri: string },
        // (The clock expression below does not depend on the session's zone either.)
        // With a host list, a pooled connection is lent only while its host is the writer: knex's expiry
        // check refuses one connection per change of host and then lends the others again, which
        // for a partitioned Galera node (alive, answering 1047) or a demoted primary failed a
        // statement on each of them in turn.
        pool: { min: 0, max: 4, afterCreate: setUpSession, ...(finder ? { validate: (conn: unknown) => onWriter(conn, finder) } : {}) },
        acquireConnectionTimeout: 10_000,
      };
    },

    async probeHost(config, host) {
      const u = parseStoreHosts(config.url, 'mysql');
      return probeMysqlHost(host, { user: u.user, password: u.password, database: u.database });
    },

    async init(knex) {
      const [rows] = (await knex.raw('select version() as version, @@SESSION.sql_mode as mode')) as unknown as [Array<{ version: string; mode: string | null }>];
      withReturning = mariaDbWithReturning(String(rows[0]?.version ?? ''));
      strict = /STRICT_(TRANS|ALL)_TABLES/i.test(String(rows[0]?.mode ?? ''));
      const [wsrep] = (await knex.raw("SHOW VARIABLES LIKE 'wsrep_on'")) as unknown as [unknown];
      galera = wsrepOn(wsrep);
    },

    nowMs: NOW_MS,
    bigint: 'SIGNED',
    tableUsing: (knex, table, index) => knex.raw('?? FORCE INDEX (??)', [table, index]),

    async insertClaims(db, table, rows) {
      // One row, or a server without RETURNING (MySQL): one strict statement per row. A multi-row
      // plain INSERT fails whole on one duplicate.
      const out: Record<string, unknown>[] = [];
      if (withReturning && rows.length > 1) {
        // A session that is not strict gets the same warnings and mangled values from a plain INSERT.
        if (strict === false || checkRows(await columnRules(db, table), rows)) return inOwnCommit(db, galera, (d) => insertIgnoreReturning(d, table, rows));
        // A value the check cannot judge (a type it does not know, a column it has not read: read
        // the columns again next time): strict, row by row.
        rulesByTable.delete(table);
      }
      for (const row of rows) {
        const stored = await inOwnCommit(db, galera, (d) => insertOne(d, table, row, withReturning));
        if (stored) out.push(stored);
      }
      return out;
    },

    async insertMissing(db, table, rows, key) {
      if (rows.length === 0) return 0;
      if (rows.length === 1) {
        // One row: the server's reply cannot tell an insert from a kept duplicate (FOUND_ROWS), so
        // insert it plainly; a duplicate fails this statement only.
        try {
          await db(table).insert(rows[0]!);
          return 1;
        } catch (err) {
          if (classifyMysql(err) === 'duplicate') return 0;
          throw err;
        }
      }
      // A no-op ON DUPLICATE KEY UPDATE skips the conflicting rows only (not INSERT IGNORE, which also
      // turns a NULL written as '' or a truncated name into a warning).
      const q = db(table).insert(rows).onConflict(key).merge({ [key[0]!]: db.ref(key[0]!) } as never).toSQL().toNative();
      const [header] = (await db.raw(q.sql, q.bindings as Knex.RawBinding[])) as unknown as [{ info?: string }];
      // mysql2 connects with FOUND_ROWS, so affectedRows counts kept duplicates too; the server's info
      // line ("Records: 3  Duplicates: 1  Warnings: 0") tells them apart.
      const m = /Records:\s*(\d+)\s+Duplicates:\s*(\d+)/.exec(header?.info ?? '');
      if (!m) throw new Error(`unexpected reply to a multi-row insert: ${JSON.stringify(header?.info ?? null)}`);
      return Number(m[1]) - Number(m[2]);
    },

    classify: classifyMysql,

    destroyConnection(connection) {
      // mysql2's destroy() only ends the stream (a FIN a black hole never answers): destroy the socket.
      const c = connection as { stream?: { destroy?: () => void }; destroy?: () => void } | null;
      c?.stream?.destroy?.();
      c?.destroy?.();
    },

    withAdvisoryLock: (knex, name, deadlineMs, fn) => (galera ? galeraLock : sessionLock).withAdvisoryLock(knex, name, deadlineMs, fn),
    tryAdvisoryLock: (knex, name, fn) => (galera ? galeraLock : sessionLock).tryAdvisoryLock(knex, name, fn),
  };
}
