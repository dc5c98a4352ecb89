/**
 * Opening the parts a command needs, in order, and closing them in reverse order.
 */
import type { Config } from './config/config.js';
import { LockUnavailableError } from './errors.js';
import { Claimer } from './claim/claim.js';
import type { LockProvider } from './claim/lock.js';
import { NoLockProvider } from './claim/no-lock.js';
import type { Logger } from './log.js';
import { Executor } from './run/execute.js';
import { PeriodRunner } from './run/period.js';
import { Reconciler } from './run/reconcile.js';
import { Takeover } from './run/takeover.js';
import { Database } from './store/database.js';
import { KnexAuditStore } from './store/audit.js';
import { KnexBackfillStore } from './store/backfills.js';
import { KnexJobStore } from './store/jobs.js';
import { KnexNodeStore } from './store/nodes.js';
import { KnexOnceStore } from './store/once.js';
import { KnexRunStore } from './store/runs.js';
import type { AuditStore, BackfillStore, JobStore, NodeStore, OnceStore, RunStore } from './store/types.js';
import { StoreClock } from './time/store-clock.js';
import { EventBus } from './events/events.js';
import { KnexRunLogStore } from './store/run-logs.js';
import type { RunLogStore } from './runlog/types.js';
import { RunLogWriter } from './runlog/writer.js';
import { configSecrets, Redactor } from './runlog/format.js';
import type { SchedulerObserver } from './events/events.js';

/** The store's tables over one pool. */
export interface Stores {
  db: Database;
  store: RunStore;
  jobStore: JobStore;
  nodeStore: NodeStore;
  /** ctx.once's keys. */
  onceStore: OnceStore;
  /** Each attempt's stored log. */
  runLogStore: RunLogStore;
  /** The operators' actions (`audit`). */
  auditStore: AuditStore;
  /** Backfills and their periods (`backfill`). */
  backfillStore: BackfillStore;
  close(): Promise<void>;
}

export interface Runtime extends Stores {
  lock: LockProvider;
  claimer: Claimer;
  executor: Executor;
  runner: PeriodRunner;
  takeover: Takeover;
  reconciler: Reconciler;
  /** The store's clock as this node estimates it: what periods fire by. */
  clock: StoreClock;
  /** What happens on this node, for metrics, the status page, alerts and the terminal (see events/). */
  events: EventBus;
  /** Sends the attempts' logs to the store; close() lets it finish first (at most RUN_LOG_DRAIN_MS). */
  runLogs: RunLogWriter;
}

/** At close, how long the attempts' last log lines may take to reach the store (a daemon has sent them before). */
const RUN_LOG_DRAIN_MS = 1500;

/** The writer of the attempts' logs (runs of `run` and `run-once`). */
export function runLogWriter(stores: Stores, config: Config, log: Logger, events: SchedulerObserver, now?: () => number): RunLogWriter {
  return new RunLogWriter({
    store: stores.runLogStore, redactor: new Redactor(configSecrets(config)), log, now,
    counters: { dropped: (job, count) => events.emit({ type: 'run-log-dropped', job, count }) },
  });
}

/** Waits for the writer to send what it holds, at most `ms`. */
export async function drainRunLogs(writer: RunLogWriter, ms = RUN_LOG_DRAIN_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([writer.drain(), new Promise<void>((r) => { timer = setTimeout(r, ms); })]);
  clearTimeout(timer);
}

/** Opens the store and migrates it (under a lock). */
export async function openStores(config: Config): Promise<Stores> {
  const db = await Database.open(config.store);
  try {
    await db.migrate();
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }
  return { db, store: new KnexRunStore(db), jobStore: new KnexJobStore(db), nodeStore: new KnexNodeStore(db), onceStore: new KnexOnceStore(db), runLogStore: new KnexRunLogStore(db), auditStore: new KnexAuditStore(db), backfillStore: new KnexBackfillStore(db), close: () => db.close() };
}

/** The runs table alone (history, list, migrate): closing it closes its pool. */
export async function openStore(config: Config): Promise<RunStore> {
  const { db } = await openStores(config);
  return new KnexRunStore(db, true);
}

/** ioredis and redlock are loaded only when Redis is configured. */
export async function createLockProvider(config: Config, log: Logger): Promise<LockProvider> {
  if (config.redis.length === 0) return new NoLockProvider();
  const { RedlockProvider } = await import('./claim/redlock-provider.js');
  return new RedlockProvider({ urls: config.redis, prefix: config.redisPrefix, log });
}

export async function openRuntime(config: Config, log: Logger, events: EventBus = new EventBus(log)): Promise<Runtime> {
  const stores = await openStores(config);
  const finder = stores.db.finder;
  if (finder) {
    finder.log = (level, fields, msg) => log[level](fields, msg);
    log.info({ storeHost: stores.db.storeHost(), hosts: finder.hosts.length, passedOver: finder.passedOver }, 'store: a host list; writing to the first host that takes writes');
  }
  const lock = await createLockProvider(config, log).catch(async (err: unknown) => {
    await stores.close().catch(() => {});
    throw err;
  });
  let lockDown: LockUnavailableError | undefined;
  try {
    await lock.connect();
  } catch (err) {
    if (err instanceof LockUnavailableError && err.unreachable) {
      // Losing Redis slows claims down but stops nothing, a node's start included.
      lockDown = err;
    } else {
      await lock.close().catch(() => {});
      await stores.close().catch(() => {});
      throw err;
    }
  }
  const { store, jobStore, db } = stores;
  // SQLite's clock is this machine's own: nothing to estimate.
  const clock = new StoreClock(db.kind === 'sqlite' ? null : (timeoutMs) => db.clockSample(timeoutMs), log);
  await clock.start();
  const claimer = new Claimer(store, lock, config.nodeId, log, jobStore);
  if (lockDown) claimer.lockUnavailable(lockDown);
  const runLogs = runLogWriter(stores, config, log, events, () => clock.now());
  const executor = new Executor(store, config.nodeId, log, { maxResultBytes: config.maxResultBytes, now: () => clock.now(), events, onceStore: stores.onceStore, pauses: jobStore, runLogs: { writer: runLogs, maxBytes: config.runLogMaxBytes } });
  const runner = new PeriodRunner(store, claimer, executor, log, events);
  const takeover = new Takeover(store, jobStore, runner, config.nodeId, log, events, (runId) => executor.holds(runId), claimer.inDoubt);
  const reconciler = new Reconciler(store, jobStore, runner, config.nodeId, log, () => clock.now(), events);
  return {
    ...stores, lock, claimer, executor, runner, takeover, reconciler, clock, events, runLogs,
    async close() {
      await drainRunLogs(runLogs);
      clock.stop();
      await lock.close().catch(() => {});
      await stores.close().catch(() => {});
    },
  };
}
