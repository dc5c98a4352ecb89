/**
 * One connection pool to the store, shared by the table stores (runs, jobs; later nodes and
 * idempotency keys). It knows the dialect, reads the store's clock, classifies errors once, and
 * migrates under an advisory lock.
 */
import knexFactory, { type Knex } from 'knex';
import type { StoreConfig } from '../config/config.js';
import { redactText, redactUrl } from '../config/redact.js';
import { errorMessage, StoreUnavailableError } from '../errors.js';
import { dialectFor, type Dialect } from './dialect/index.js';
import { MIGRATIONS_TABLE, migrationSource } from './migrations.js';

/** How long a node waits for another node's migration before giving up. */
const MIGRATION_LOCK_WAIT_MS = 120_000;

export class Database {
  readonly kind: StoreConfig['kind'];
  readonly dialect: Dialect;
  readonly knex: Knex;
  /** The store's URL with its password redacted, for messages. */
  readonly shownUrl: string;

  private constructor(dialect: Dialect, knex: Knex, shownUrl: string) {
    this.kind = dialect.kind;
    this.dialect = dialect;
    this.knex = knex;
    this.shownUrl = shownUrl;
  }

  /** Opens the pool and checks that the store answers (StoreUnavailableError otherwise). */
  static async open(config: StoreConfig): Promise<Database> {
    const dialect = dialectFor(config.kind);
    const shown = redactUrl(config.url);
    const knex = knexFactory(dialect.knexConfig(config));
    try {
      await dialect.init(knex);
    } catch (err) {
      await knex.destroy().catch(() => {});
      throw new StoreUnavailableError(`store ${shown} cannot be reached: ${redactText(errorMessage(err))}`, { cause: err });
    }
    return new Database(dialect, knex, shown);
  }

  /** The store's clock as an SQL expression (epoch ms), for values the store writes itself. */
  nowRaw(): Knex.Raw {
    return this.knex.raw(this.dialect.nowMs);
  }

  /** `now + ms` by the store's clock. */
  nowPlus(ms: number): Knex.Raw {
    return this.knex.raw(`${this.dialect.nowMs} + ?`, [Math.max(0, Math.round(ms))]);
  }

  /**
   * Runs a statement, mapping failures by their class: a store that cannot be reached, and a
   * transient failure (deadlock, lock wait, failover, busy), become StoreUnavailableError, which
   * callers try again; a missing privilege becomes one that names it; anything else is a real error.
   */
  async wrap<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.error(err, what);
    }
  }

  error(err: unknown, what: string): Error {
    if (err instanceof StoreUnavailableError) return err;
    const kind = this.dialect.classify(err);
    const message = redactText(errorMessage(err));
    if (kind === 'unavailable') return new StoreUnavailableError(`store ${this.shownUrl} cannot be reached (${what}): ${message}`, { cause: err });
    if (kind === 'transient') return new StoreUnavailableError(`store ${this.shownUrl} failed transiently (${what}): ${message}`, { cause: err, transient: true });
    if (kind === 'privilege') return new StoreUnavailableError(`store ${this.shownUrl}: the store user lacks a privilege (${what}): ${message}`, { cause: err });
    return err instanceof Error ? err : new Error(String(err));
  }

  /** One transaction (one connection); its statements are classified like any other. */
  transaction<T>(what: string, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.wrap(what, () => this.knex.transaction(fn));
  }

  async now(): Promise<number> {
    return this.wrap('read clock', async () => {
      const row = (await this.knex.first(this.knex.raw(`${this.dialect.nowMs} as now_ms`))) as { now_ms: number | string };
      return Number(row.now_ms);
    });
  }

  /** Creates or upgrades the tables; safe when several nodes call it at once. */
  async migrate(): Promise<void> {
    const config = { tableName: MIGRATIONS_TABLE, migrationSource };
    await this.wrap('migrate', () => this.dialect.withAdvisoryLock(this.knex, 'migrate', MIGRATION_LOCK_WAIT_MS, () =>
      retryWhileLocked(async () => {
        try {
          return await this.knex.migrate.latest(config);
        } catch (err) {
          // Holding the advisory lock (MySQL, PostgreSQL), any knex lock row left set is stale (a
          // crashed node). On SQLite, a loser of knex's own lock waits and tries again.
          if (this.kind !== 'sqlite' && /already locked/i.test(errorMessage(err))) await this.knex.migrate.forceFreeMigrationsLock(config);
          throw err;
        }
      })));
  }

  async close(): Promise<void> {
    await this.knex.destroy();
  }
}

async function retryWhileLocked<T>(fn: () => Promise<T>, deadlineMs = 60_000): Promise<T> {
  const until = Date.now() + deadlineMs;
  let delay = 50;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      const message = errorMessage(err);
      const transient = /already locked|SQLITE_BUSY|database is locked|already exists|Duplicate entry|duplicate key/i.test(message);
      if (!transient || Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 1000);
    }
  }
}
