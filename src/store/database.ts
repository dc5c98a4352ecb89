/**
 * The connections to the store, shared by the table stores (runs, jobs; later nodes and idempotency
 * keys): a pool for everything, and a small pool of its own for the statements that keep leases
 * (heartbeats, clock samples), so that a burst of claims cannot starve them. It knows the dialect,
 * reads the store's clock, classifies errors once, bounds every statement by a timeout, and migrates
 * under an advisory lock.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import knexFactory, { type Knex } from 'knex';
import type { StoreConfig } from '../config/config.js';
import { redactText, redactUrl } from '../config/redact.js';
import { errorMessage, StoreUnavailableError } from '../errors.js';
import { dialectFor, type Dialect } from './dialect/index.js';
import { showHost, WriterFinder } from './hosts.js';
import { MIGRATIONS_TABLE, migrationSource } from './migrations.js';

/** How long a node waits for another node's migration before giving up. */
const MIGRATION_LOCK_WAIT_MS = 120_000;
/** A migration's statements (an index built over a large table) may take this long. */
const MIGRATION_STATEMENT_TIMEOUT_MS = 6 * 3600_000;

/** A statement with no lease at stake that has not answered in this time counts as a store that does not answer. */
export const QUERY_TIMEOUT_MS = 10_000;

/**
 * The timeout of the statements that take, keep or end a lease: under a third of it, so that a
 * statement lost on a dead connection (a black-holed socket answers nothing, not even an error) costs
 * one heartbeat, not the lease; the next one goes out on a fresh connection.
 */
export function leaseQueryTimeout(leaseMs: number): number {
  return Math.max(100, Math.min(QUERY_TIMEOUT_MS, Math.floor(leaseMs / 3) - 10));
}

/** knex's message when its pool lends no connection within acquireConnectionTimeout. */
const POOL_WAIT = /Timeout acquiring a connection/;

/** The timeout of the statements run inside `Database.withTimeout` (async context, so transactions inherit it). */
const timeouts = new AsyncLocalStorage<number>();

interface KnexClientInternals {
  config: object;
  query(this: KnexClientInternals, connection: unknown, obj: unknown): Promise<unknown>;
}

/** The knex configs whose statements are bounded (a transaction's client shares its parent's config). */
const boundedConfigs = new WeakMap<object, Dialect>();
const HOOKED = Symbol.for('cluster-cron.boundStatements');

/**
 * Every statement of this knex gets a timeout: past it, the statement's promise is rejected (a
 * KnexTimeoutError, which counts as "store unavailable"), its connection is marked disposed (the pool
 * destroys it instead of lending it again) and its socket is closed at once, so that a transaction's
 * ROLLBACK on it fails at once instead of waiting on a connection that answers nothing. knex has no
 * pool-wide statement timeout: this hooks the query method of the dialect's client class, which
 * knex 3.3 (pinned) calls for every statement; a transaction's client is made from that class (not
 * from the instance) and shares the instance's config, by which the hook knows its own knexes.
 */
function boundStatements(knex: Knex, dialect: Dialect): void {
  const client = knex.client as unknown as KnexClientInternals;
  boundedConfigs.set(client.config, dialect);
  const proto = Object.getPrototypeOf(client) as KnexClientInternals & { [HOOKED]?: true };
  if (Object.prototype.hasOwnProperty.call(proto, HOOKED)) return;
  const query = proto.query;
  proto[HOOKED] = true;
  proto.query = function (this: KnexClientInternals, connection: unknown, obj: unknown) {
    const bounded = boundedConfigs.get(this.config);
    if (!bounded) return query.call(this, connection, obj);
    const ms = timeouts.getStore() ?? QUERY_TIMEOUT_MS;
    const answer = query.call(this, connection, obj);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const err = new Error(`the statement had no answer within ${ms} ms`);
        err.name = 'KnexTimeoutError';
        if (connection && typeof connection === 'object') (connection as { __knex__disposed?: unknown }).__knex__disposed = err;
        bounded.destroyConnection(connection);
        reject(err);
      }, ms);
      answer.then((value) => {
        clearTimeout(timer);
        resolve(value);
      }, (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  };
}

export class Database {
  readonly kind: StoreConfig['kind'];
  readonly dialect: Dialect;
  readonly knex: Knex;
  /** The lease keepers' own pool (the same as `knex` on SQLite, whose driver is synchronous). */
  readonly leaseKnex: Knex;
  /** The store's URL with its password redacted, for messages. */
  readonly shownUrl: string;

  /**
   * The store host this process writes to (`host:port`), for `nodes` and the page; null on SQLite.
   * A single-host URL's host; with a host list, the writer found last.
   */
  storeHost(): string | null {
    if (this.kind === 'sqlite') return null;
    if (this.finder) return this.finder.lastWriter ? showHost(this.finder.lastWriter) : null;
    try {
      const u = new URL(this.shownUrl);
      return `${u.hostname}:${u.port || (this.kind === 'mysql' ? '3306' : '5432')}`;
    } catch {
      return null;
    }
  }

  /**
   * When (monotonic ms) this process last found the store unreachable, or opened it. A node judges
   * other nodes' leases only once it has been connected for longer than them since (see
   * connectedForMs): a holder reconnecting at the same moment must be able to write first.
   */
  private lostAt = performance.now();

  /** How long this process has been connected to the store without a failure to reach it (ms). */
  connectedForMs(): number {
    return performance.now() - this.lostAt;
  }

  private constructor(dialect: Dialect, knex: Knex, leaseKnex: Knex, shownUrl: string, readonly finder: WriterFinder | null) {
    this.kind = dialect.kind;
    this.dialect = dialect;
    this.knex = knex;
    this.leaseKnex = leaseKnex;
    this.shownUrl = shownUrl;
  }

  /** Opens the pools and checks that the store answers (StoreUnavailableError otherwise). */
  static async open(config: StoreConfig): Promise<Database> {
    const dialect = dialectFor(config.kind);
    const shown = redactUrl(config.url);
    // A URL that lists several hosts: one finder for both pools (see hosts.ts).
    const hosts = config.kind === 'sqlite' ? undefined : config.hosts;
    const finder = hosts && hosts.length > 1 && dialect.probeHost ? new WriterFinder(hosts, (h) => dialect.probeHost!(config, h)) : null;
    const knex = knexFactory(dialect.knexConfig(config, finder ?? undefined));
    try {
      // SQLite: a process opening the file while another switches it to WAL (a fresh file, two nodes
      // started at once) meets "database is locked" from the pragma itself, not from a statement the
      // busy timeout covers. That is a moment, never "unreachable": tried again for up to 10 s.
      await (dialect.kind === 'sqlite' ? retryWhileLocked(() => dialect.init(knex), 10_000, /SQLITE_BUSY|database is locked/i) : dialect.init(knex));
    } catch (err) {
      await knex.destroy().catch(() => {});
      throw new StoreUnavailableError(`store ${shown} cannot be reached: ${redactText(errorMessage(err))}`, { cause: err });
    }
    let leaseKnex = knex;
    if (dialect.kind !== 'sqlite') {
      boundStatements(knex, dialect);
      const base = dialect.knexConfig(config, finder ?? undefined);
      // Two connections at most, and a short wait for one: a heartbeat that cannot get a connection
      // soon is better tried again (the next beat) than queued.
      leaseKnex = knexFactory({ ...base, pool: { ...base.pool, min: 0, max: 2 }, acquireConnectionTimeout: 1000 });
      boundStatements(leaseKnex, dialect);
    }
    return new Database(dialect, knex, leaseKnex, shown, finder);
  }

  /**
   * Runs `fn` with every statement it sends bounded by `ms` (see leaseQueryTimeout). Waiting for a
   * connection is bounded by the pool's own acquire timeout (and connecting by the driver's): the call
   * is not abandoned while a statement of it may still commit.
   */
  withTimeout<T>(ms: number, fn: () => Promise<T>): Promise<T> {
    return timeouts.run(ms, fn);
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
    const message = redactText(errorMessage(err));
    // knex's pool gave no connection within acquireConnectionTimeout: this process's own queue of
    // statements (load), not the store's absence, which shows as failed connects and statements.
    if (POOL_WAIT.test(message)) return new StoreUnavailableError(`store ${this.shownUrl} is busy (${what}): no connection of this node's pool was free in time`, { cause: err, busy: true });
    const kind = this.dialect.classify(err);
    if (kind === 'unavailable') {
      this.lostAt = performance.now();
      // The host may have gone, or stopped taking writes (a failover): the next connection searches the list again.
      this.finder?.suspect();
      return new StoreUnavailableError(`store ${this.shownUrl} cannot be reached (${what}): ${message}`, { cause: err });
    }
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

  /**
   * One sample of the store's clock on the lease pool, with the local monotonic instants around it:
   * the store's reading was taken somewhere between `sentAt` and `receivedAt`.
   */
  async clockSample(timeoutMs: number): Promise<{ storeMs: number; sentAt: number; receivedAt: number; wallAtReceive: number }> {
    return this.wrap('read clock', () => this.withTimeout(timeoutMs, async () => {
      const sentAt = performance.now();
      const row = (await this.leaseKnex.first(this.leaseKnex.raw(`${this.dialect.nowMs} as now_ms`))) as { now_ms: number | string };
      const receivedAt = performance.now();
      return { storeMs: Number(row.now_ms), sentAt, receivedAt, wallAtReceive: Date.now() };
    }));
  }

  /** Creates or upgrades the tables; safe when several nodes call it at once. */
  async migrate(): Promise<void> {
    // SQLite: one migration at a time per file within this process. better-sqlite3 waits for a busy
    // file synchronously (busy_timeout), so a second store of this process writing while the first
    // holds its migration's transaction would block the one thread the first needs to commit.
    if (this.kind === 'sqlite') return inProcessTurn(this.shownUrl, () => this.migrateNow());
    return this.migrateNow();
  }

  private async migrateNow(): Promise<void> {
    const config = { tableName: MIGRATIONS_TABLE, migrationSource };
    // An index built on a table of millions of rows takes minutes, not the 10 s of other statements.
    await this.wrap('migrate', () => timeouts.run(MIGRATION_STATEMENT_TIMEOUT_MS, () => this.dialect.withAdvisoryLock(this.knex, 'migrate', MIGRATION_LOCK_WAIT_MS, () =>
      retryWhileLocked(async () => {
        try {
          await this.dialect.prepareMigrations?.(this.knex, MIGRATIONS_TABLE);
          return await this.knex.migrate.latest(config);
        } catch (err) {
          // Holding the advisory lock (MySQL, PostgreSQL), any knex lock row left set is stale (a
          // crashed node). On SQLite, a loser of knex's own lock waits and tries again.
          if (this.kind !== 'sqlite' && /already locked/i.test(errorMessage(err))) await this.knex.migrate.forceFreeMigrationsLock(config);
          throw err;
        }
      }))));
  }

  async close(): Promise<void> {
    await Promise.all([this.knex.destroy(), this.leaseKnex === this.knex ? undefined : this.leaseKnex.destroy()]);
  }
}

/** The migrations of this process, per SQLite file: each waits for the one before it. */
const sqliteTurns = new Map<string, Promise<unknown>>();

function inProcessTurn<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const before = sqliteTurns.get(key) ?? Promise.resolve();
  const mine = before.catch(() => {}).then(fn);
  const settled = mine.catch(() => {});
  sqliteTurns.set(key, settled);
  void settled.then(() => {
    if (sqliteTurns.get(key) === settled) sqliteTurns.delete(key);
  });
  return mine;
}

// "Deadlock found": on Galera, a certification conflict at COMMIT with another node's write (tried again).
async function retryWhileLocked<T>(fn: () => Promise<T>, deadlineMs = 60_000, transientErrors = /already locked|SQLITE_BUSY|database is locked|already exists|Duplicate entry|duplicate key|Deadlock found when trying to get lock/i): Promise<T> {
  const until = Date.now() + deadlineMs;
  let delay = 50;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      const message = errorMessage(err);
      const transient = transientErrors.test(message);
      if (!transient || Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 1000);
    }
  }
}
