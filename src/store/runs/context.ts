/**
 * What every part of the run store works through: the pool, the dialect, and how a statement is
 * wrapped (errors as StoreUnavailableError) and bounded (a third of the lease it takes or keeps).
 */
import type { Knex } from 'knex';
import { leaseQueryTimeout, type Database } from '../database.js';
import { RUNS_TABLE } from '../migrations.js';
import type { RunStore } from '../types.js';

/** Coalesced writes (outcomes, heartbeats): a node's queue is sent at once when it holds this many. */
export const BATCH_MAX = 200;

export class RunsContext {
  readonly kind: RunStore['kind'];
  readonly knex: Knex;
  private columns: Promise<string[]> | undefined;

  constructor(readonly db: Database) {
    this.kind = db.kind;
    this.knex = db.knex;
  }

  wrap<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return this.db.wrap(what, fn);
  }

  /** A statement that takes, keeps or ends a lease: bounded by a third of it (see leaseQueryTimeout). */
  leased<T>(what: string, leaseMs: number | undefined, fn: () => Promise<T>): Promise<T> {
    if (leaseMs === undefined || leaseMs <= 0) return this.wrap(what, fn);
    return this.wrap(what, () => this.db.withTimeout(leaseQueryTimeout(leaseMs), fn));
  }

  table(db: Knex | Knex.Transaction = this.knex): Knex.QueryBuilder {
    return db(RUNS_TABLE);
  }

  /** SQL: the row's lease ran out by the store's clock. */
  get stale(): string {
    return `heartbeat_at + lease_ms < ${this.db.dialect.nowMs}`;
  }

  /**
   * The first statement of a transaction that ends an attempt. MySQL, PostgreSQL: the row's lock, by
   * its primary key alone, so that racing nodes queue on that one lock and hold nothing else (a
   * compare-and-set UPDATE may scan a status index and take gap locks there, which deadlocks with
   * the winner's INSERT of the next attempt on InnoDB). SQLite: nothing; the compare-and-set UPDATE
   * that comes next is the first statement, so the write lock is taken before any read (in WAL mode, a
   * transaction that read first and writes after another node's commit fails with SQLITE_BUSY
   * instead of finding the row no longer running).
   */
  async lockRow(trx: Knex.Transaction, runId: string): Promise<void> {
    if (this.kind === 'sqlite') return;
    await trx(RUNS_TABLE).select('id').where({ id: runId }).forUpdate();
  }

  /** The runs table's columns but `except` (read once: they are fixed by the migrations this process ran or found). */
  async columnsBut(except: string): Promise<string[]> {
    this.columns ??= this.knex(RUNS_TABLE).columnInfo().then((info) => Object.keys(info), (err: unknown) => {
      this.columns = undefined;
      throw err;
    });
    return (await this.columns).filter((c) => c !== except);
  }
}
