/** SQLite through better-sqlite3: one file, several processes on one machine (WAL, busy timeout). */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Knex } from 'knex';
import type { StoreConfig } from '../../config/config.js';
import { QUIET_KNEX_LOG, isSocketError, type Dialect, type ErrorClass, onConflictDoNothing } from './types.js';

export const sqliteDialect: Dialect = {
  kind: 'sqlite',

  knexConfig(config: StoreConfig): Knex.Config {
    if (config.kind !== 'sqlite') throw new Error('sqlite dialect needs an sqlite store');
    if (config.path !== ':memory:') mkdirSync(dirname(config.path), { recursive: true });
    return {
      log: QUIET_KNEX_LOG,
      client: 'better-sqlite3',
      connection: { filename: config.path },
      useNullAsDefault: true,
      pool: {
        min: 1, max: 1,
        afterCreate: (conn: { pragma(s: string): unknown }, done: (err: Error | null, c: unknown) => void) => {
          try {
            // Several processes may share the file: WAL lets readers go on, busy_timeout waits for writers.
            conn.pragma('busy_timeout = 10000');
            conn.pragma('journal_mode = WAL');
            conn.pragma('synchronous = NORMAL');
            done(null, conn);
          } catch (err) {
            done(err as Error, conn);
          }
        },
      },
    };
  },

  async init(knex) {
    await knex.raw('select 1 as ok');
  },

  nowMs: "CAST(unixepoch('subsec') * 1000 AS INTEGER)",

  bigint: 'BIGINT',
  tableUsing: (_knex, table) => table,

  ...onConflictDoNothing,

  // better-sqlite3 is synchronous: a statement never waits on a socket.
  destroyConnection() {},

  classify(err): ErrorClass {
    const code = String((err as { code?: string } | undefined)?.code ?? '');
    if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return 'duplicate';
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED') || /database is locked/i.test(String((err as Error)?.message))) return 'transient';
    // better-sqlite3 reports extended result codes (SQLITE_IOERR_WRITE, SQLITE_READONLY_DBMOVED, ...), and
    // refuses a file in a missing directory itself, before SQLite (a TypeError, no code).
    if (code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_READONLY') || isSocketError(err) || /^Cannot open database because the directory does not exist/.test(String((err as Error | undefined)?.message ?? ''))) return 'unavailable';
    if (code === 'SQLITE_AUTH' || code === 'SQLITE_PERM') return 'privilege';
    return 'data';
  },

  inValues(knex, column, values) {
    return knex.raw('?? IN (SELECT value FROM json_each(?))', [column, JSON.stringify(values)]);
  },

  // One file: SQLite serialises writers itself, and a busy writer waits (busy_timeout).
  async withAdvisoryLock(_knex, _name, _deadlineMs, fn) {
    return fn();
  },
  async tryAdvisoryLock(_knex, _name, fn) {
    return fn();
  },

  /**
   * knex's migrator creates its lock table and inserts the one lock row with a read, then an insert:
   * two processes starting at once on a fresh file could both insert, and with two rows its lock
   * (`UPDATE ... WHERE is_locked = 0` must change exactly one row) was refused to every start for
   * good ("Migration table is already locked"). Here each step is one statement, so SQLite's writer
   * lock makes it atomic, and any number of processes may run them at once:
   * - the two tables, as knex creates them (it then finds them and creates nothing);
   * - one lock row: duplicates left by that race are removed, and a missing row inserted;
   * - a committed `is_locked = 1` is stale: on SQLite every migration runs in the one transaction
   *   that takes and frees the lock (no migration disables transactions), so no other process ever
   *   sees a lock that is really held; one left by an older version's crash is freed.
   */
  async prepareMigrations(knex, tableName) {
    const lock = `${tableName}_lock`;
    // Reads first: a file whose tables and lock row are as they should be (every start after the
    // first) gets no write here, so a start never waits for another process's migration to get one.
    const tables = await knex.raw("select name from sqlite_master where type = 'table' and name in (?, ?)", [tableName, lock]) as Array<{ name: string }>;
    if (tables.length === 2) {
      const rows = await knex.raw('select `is_locked` from ??', [lock]) as Array<{ is_locked: number }>;
      if (rows.length === 1 && Number(rows[0]!.is_locked) === 0) return;
    }
    await knex.raw('create table if not exists ?? (`id` integer not null primary key autoincrement, `name` varchar(255), `batch` integer, `migration_time` datetime)', [tableName]);
    await knex.raw('create table if not exists ?? (`index` integer not null primary key autoincrement, `is_locked` integer)', [lock]);
    await knex.raw('delete from ?? where `index` <> (select min(`index`) from ??)', [lock, lock]);
    await knex.raw('insert into ?? (`is_locked`) select 0 where not exists (select 1 from ??)', [lock, lock]);
    await knex.raw('update ?? set `is_locked` = 0 where `is_locked` <> 0', [lock]);
  },
};
