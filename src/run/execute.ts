/**
 * One attempt of a period: builds `ctx`, runs the body, enforces `timeout`, keeps the lease (Redlock
 * extension and a row heartbeat written with the store's clock) until the outcome is written, and
 * records the outcome with a write that is conditional on still owning the attempt, in one
 * transaction with the attempt it owes next (a retry, or a resumed interrupted run).
 */
import { randomUUID } from 'node:crypto';
import { errorMessage, StoreUnavailableError } from '../errors.js';
import type { AbortReason, Job, Trigger } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { Lease } from '../claim/lock.js';
import type { FinalStatus, OnceStore, RunOutcome, RunRecord, RunStore } from '../store/types.js';
import { periodKey } from '../time/schedule.js';
import { jitterDelayMs } from '../time/jitter.js';
import { runBody, type BodyOutcome } from './body.js';
import { LoopWatchdog } from './isolation/watchdog.js';
import { STATUS_ON_ABORT } from './body.js';
import { DEFAULT_MAX_RESULT_BYTES } from './outcome.js';
import { noEvents, type SchedulerObserver } from '../events/events.js';
import { fenceMargin, LeaseKeeper } from './lease-keeper.js';
import type { PauseSource } from '../claim/claim.js';
import { LostRows } from './lost-rows.js';
import { StartGates } from './start-gates.js';
import { CancelWatch } from './cancel-watch.js';
import type { RunLogWriter } from '../runlog/writer.js';

export interface AttemptResult {
  job: string;
  periodKey: string;
  scheduledAt: Date;
  attempt: number;
  trigger: Trigger;
  runId: string;
  /** The shard of the period (0 for an unsharded job). */
  shard: number;
  status: FinalStatus;
  result?: unknown;
  error?: string | null;
  durationMs: number;
  /** False when the final write was refused because the attempt was no longer ours. */
  recorded: boolean;
  /** The attempt this one made owed (pending), if any. */
  next: RunRecord | null;
}

interface InFlight {
  controller: AbortController;
  done: Promise<AttemptResult>;
  run: RunRecord;
  /** The body has ended (or was never started): what is left is writing the outcome. */
  bodyEnded?: boolean;
  /** An operator's `cancel`: who and why (its outcome says so). */
  cancelledBy?: { actor: string; reason: string | null };
}

/** An attempt this node holds, for read-only views. */
export interface InFlightRun {
  job: string;
  periodKey: string;
  scheduledAt: Date;
  attempt: number;
  trigger: Trigger;
  runId: string;
  /** When it was claimed, by this node's clock (epoch ms). */
  claimedAt: number;
}

export interface ExecutorOptions {
  /** Results whose JSON is larger are not stored (the `maxResultSize` setting; default 1 MB). */
  maxResultBytes?: number;
  /** Worker bodies: how long after the abort one that has not settled is terminated (default 1 s). */
  workerGraceMs?: number;
  /** The node's clock corrected to the store's (epoch ms): periods start at their instant by it. Default: Date.now. */
  now?: () => number;
  /** Where run-started, run-finished and lease-lost go. */
  events?: SchedulerObserver;
  /** Where ctx.once keeps its keys (none: ctx.once refuses). */
  onceStore?: OnceStore;
  /** The jobs table, read again after a wait before the body longer than a tick (a jittered start); none: not read. */
  pauses?: PauseSource;
  /** Where each attempt's own log goes (none: not stored), and its cap for jobs that set no logMaxSize (the runLogMaxSize setting). */
  runLogs?: { writer: RunLogWriter; maxBytes: number };
}

/**
 * A wait before the body (a jittered start) longer than this (one tick of the claim path) reads the
 * pause again before the body starts: the claim read it at the instant, and "no body starts after
 * `pause` returned plus one tick" must hold for a body that starts later than that too. Shorter waits
 * (a period claimed ahead by the claim-ahead, under 1 s; a small jitter) need no second read: the claim's read bounds them.
 */
export const PAUSE_RECHECK_AFTER_MS = 1000;
/** That read is sent this long before the body's start, so that its round trip is off the fire path (as the claim is). */
const PAUSE_READ_AHEAD_MS = 100;

export interface ExecuteOptions {
  /** Run even when the job is paused (`run-once <job> --force`): no pause is read before a jittered start. */
  ignorePause?: boolean;
  /**
   * Called at the body's start, after the wait: an earlier period's run still live (the attempt is then
   * recorded skipped, reason overlap, and no body runs), or null (see PeriodRunner.overlapAtStart).
   */
  startCheck?: () => Promise<RunRecord | null>;
}

/** The outcome of an attempt aborted before its body began. */
function notStarted(reason: AbortReason): RunOutcome {
  const what = reason === 'shutdown' ? 'interrupted by shutdown before it started' : reason === 'lease-lost' ? 'lease lost before it started'
    : reason === 'cancelled' ? 'cancelled before it started' : 'timed out before it started';
  return { status: STATUS_ON_ABORT[reason] ?? 'failed', error: what, reason };
}

/** A first attempt's lock key outlives its period's catchUp by this much (the reconciler looks 3 s behind now). */
const KEEP_MARGIN_MS = 10_000;
/** A later attempt's lock key is kept this long after its end at least (see the settle in attempt()): longer than a managed database's failover. */
const KEEP_OWED_MS = 120_000;

export class Executor {
  private readonly inFlight = new Map<string, InFlight>();
  /** After a shutdown's abort, attempts claimed later start aborted too (a claim in flight at the signal). */
  private abortedWith: AbortReason | undefined;
  /** Shutdown: from this monotonic instant, outcome writes are tried for their job's lockTtl at most, then left to the takeover. */
  private writesLimitedAt = Infinity;
  /** A second signal: outcome writes are not tried again after this instant. */
  private writeDeadline = Infinity;
  private watchdog: LoopWatchdog | undefined;
  private readonly events: SchedulerObserver;
  /** Rows the store lost: the outcomes written lately, read back when the store may have moved. */
  private readonly lostRows: LostRows;
  /** The attempts waiting for their instant, one timer an instant. */
  private readonly gates = new StartGates(() => this.nowMs());
  private readonly leases: LeaseKeeper;
  /** Operators' `cancel` of the attempts held here. */
  private readonly cancels: CancelWatch;

  constructor(
    private readonly store: RunStore,
    private readonly nodeId: string,
    private readonly log: Logger,
    private readonly options: ExecutorOptions = {},
  ) {
    this.events = options.events ?? noEvents;
    this.leases = new LeaseKeeper(store, nodeId, (job, run, log) => this.restoreLostRow(job, run, log));
    this.cancels = new CancelWatch(store, () => [...this.inFlight.entries()].filter(([, f]) => !f.controller.signal.aborted).map(([runId, f]) => ({
      runId,
      cancel: (by) => {
        f.cancelledBy = by;
        this.log.warn({ job: f.run.job, periodKey: f.run.periodKey, attempt: f.run.attempt, runId, cancelledBy: by.actor, reason: by.reason }, 'run cancelled by an operator: aborting it');
        f.controller.abort('cancelled');
      },
    })), log);
    this.lostRows = new LostRows(store, nodeId, log, this.events, (runId) => this.inFlight.has(runId));
  }

  get size(): number {
    return this.inFlight.size;
  }

  /**
   * Runs one claimed attempt to its recorded end. Never throws. `claimSentAt` (monotonic) is when the
   * statement that claimed the row was sent: the store's lease runs from a moment after it.
   */
  execute(job: Job, run: RunRecord, lease: Lease | null, onDone?: () => void, notBefore?: Date, claimSentAt?: number, options: ExecuteOptions = {}): Promise<AttemptResult> {
    const controller = new AbortController();
    if (this.abortedWith) controller.abort(this.abortedWith);
    const done = this.attempt(job, run, lease, controller, notBefore, claimSentAt ?? performance.now(), options).finally(() => {
      this.inFlight.delete(run.id);
      onDone?.();
    });
    this.inFlight.set(run.id, { controller, done, run: { ...run, claimedAt: run.claimedAt ?? new Date() } });
    this.cancels.arm();
    return done;
  }

  private markBodyEnded(runId: string): void {
    const held = this.inFlight.get(runId);
    if (held) held.bodyEnded = true;
  }

  /** The node's clock corrected to the store's (epoch ms): what bodies start by. */
  nowMs(): number {
    return (this.options.now ?? Date.now)();
  }

  /** Whether this node holds the attempt (claimed, and its outcome not yet written or given up). */
  holds(runId: string): boolean {
    return this.inFlight.has(runId);
  }

  /**
   * Whether this node holds the attempt and its body has ended (or never started): its row still
   * says running until the outcome is written, which under load lags the body by up to a second or
   * more. Overlap 'skip' asks it of an earlier period's live row (see PeriodRunner.overlapAtStart).
   */
  bodyEnded(runId: string): boolean {
    return this.inFlight.get(runId)?.bodyEnded === true;
  }

  /** The attempts this node holds now. */
  running(): InFlightRun[] {
    return [...this.inFlight.values()].map(({ run }) => ({
      job: run.job, periodKey: run.periodKey, scheduledAt: run.scheduledAt, attempt: run.attempt, trigger: run.trigger, runId: run.id,
      claimedAt: run.claimedAt!.getTime(),
    }));
  }

  /** --dry-run: the body with ctx.dryRun, no row, no lock. */
  async dryRun(job: Job, scheduledAt: Date, trigger: Trigger, attempt = 1, shard = 0): Promise<AttemptResult> {
    const fake: RunRecord = {
      id: `dry-run-${randomUUID()}`, job: job.name, scheduledAt, periodKey: periodKey(job.name, scheduledAt), shard,
      attempt, trigger, status: 'running', reason: null, nodeId: this.nodeId, startedAt: new Date(), claimedAt: null, runAt: null, finishedAt: null,
      durationMs: null, heartbeatAt: null, leaseMs: job.lockTtlMs, result: null, resultNote: null, error: null, errorStack: null,
    };
    const controller = new AbortController();
    const started = Date.now();
    const outcome = await this.body(job, fake, controller, true);
    return {
      job: job.name, periodKey: fake.periodKey, scheduledAt, attempt, trigger, runId: fake.id, shard, status: outcome.status,
      result: outcome.result, error: outcome.error ?? null, durationMs: Date.now() - started, recorded: false, next: null,
    };
  }

  /** Aborts every in-flight body with `reason`, and any attempt claimed from now on. */
  abortAll(reason: AbortReason): void {
    this.abortedWith = reason;
    for (const { controller } of this.inFlight.values()) controller.abort(reason);
  }

  /** Resolves when every in-flight attempt has been recorded (or given up, past the write deadline). */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()].map((f) => f.done));
  }

  /**
   * Shutdown: outcome writes that cannot land within their job's lockTtl from now (or `windowMs`,
   * when given) are given up and logged; the rows stay `running` and their lease runs out, so
   * another node takes them over.
   */
  limitWrites(windowMs?: number): void {
    const now = performance.now();
    this.writesLimitedAt = Math.min(this.writesLimitedAt, now);
    if (windowMs !== undefined) this.writeDeadline = Math.min(this.writeDeadline, now + Math.max(0, windowMs));
    for (const wake of this.writeWaiters) wake();
  }

  private deadlineFor(job: Job): number {
    return Math.min(this.writeDeadline, this.writesLimitedAt + job.lockTtlMs);
  }

  private readonly writeWaiters = new Set<() => void>();

  private async attempt(job: Job, run: RunRecord, lease: Lease | null, controller: AbortController, notBefore: Date | undefined, claimSentAt: number, { ignorePause = false, startCheck }: ExecuteOptions): Promise<AttemptResult> {
    const log = this.log.child({ job: job.name, periodKey: run.periodKey, runId: run.id, attempt: run.attempt, ...((job.shards ?? 1) > 1 ? { shard: run.shard } : {}) });
    // The lease is kept from the claim until the outcome has been written, not only while the body runs:
    // a finished run whose outcome waits for the store must not look abandoned meanwhile.
    const keeper = this.leases.keep(job, run, lease, controller, log, claimSentAt);
    // A period claimed ahead of its instant starts at the instant (by the clock corrected to the
    // store's); the lease is kept meanwhile, and an abort meanwhile (shutdown, self-fencing) ends the wait.
    const wait = notBefore ? notBefore.getTime() - this.nowMs() : 0;
    let paused: { reason: string | null } | null = null;
    if (notBefore && wait > 0 && !controller.signal.aborted) {
      // A wait longer than a tick (a jittered start): the pause is read again just before its end.
      if (wait > PAUSE_RECHECK_AFTER_MS && this.options.pauses && !ignorePause) {
        await this.gates.wait(notBefore.getTime() - PAUSE_READ_AHEAD_MS, controller.signal);
        if (!controller.signal.aborted) paused = await this.pauseOf(job.name, log);
      }
      if (!paused) await this.gates.wait(notBefore.getTime(), controller.signal);
    }
    const ref = { job: job.name, periodKey: run.periodKey, scheduledAt: run.scheduledAt, attempt: run.attempt, trigger: run.trigger, runId: run.id, ...(run.shard > 0 ? { shard: run.shard } : {}) };
    if (paused && !controller.signal.aborted) return this.skipAtStart(job, run, lease, log, keeper, { reason: 'paused', pausedReason: paused.reason });
    if (startCheck && !controller.signal.aborted) {
      const running = await startCheck();
      if (running && !controller.signal.aborted) return this.skipAtStart(job, run, lease, log, keeper, { reason: 'overlap', running });
    }
    const started = performance.now();
    if (!controller.signal.aborted) {
      // A scheduled period's delay is from its instant; an owed or manual attempt's from its claim.
      // (A jittered period's from its jittered start.)
      const delayMs = run.trigger === 'schedule' && run.attempt === 1
        ? this.nowMs() - run.scheduledAt.getTime() - jitterDelayMs(run.periodKey, job.jitterMs ?? 0) : started - claimSentAt;
      // After the bodies released at this instant have been called (as their 'run started' lines at debug).
      queueMicrotask(() => this.events.emit({ type: 'run-started', ...ref, delayMs: Math.max(0, Math.round(delayMs)) }));
    }
    // An attempt aborted before its body began (claimed as the node stopped, or its lease unproven by
    // then) does not start it: it ends as an abort would have ended it.
    // The body's own log (ctx.log, a command's output) is stored with the attempt, off the body's path.
    const own = controller.signal.aborted ? null : this.options.runLogs?.writer.open(log, run, { logLevel: job.logLevel ?? 'info', logMaxBytes: job.logMaxBytes ?? this.options.runLogs.maxBytes });
    const { late, ...ending }: BodyOutcome = controller.signal.aborted ? notStarted(controller.signal.reason as AbortReason) : await this.body(job, run, controller, false, own?.logger ?? log, keeper.leaseGone, keeper.deadline, log);
    own?.attemptLog.end();
    let outcome: RunOutcome = ending;
    const ended = performance.now();
    // An inline body aborted by the loss of its lease may still finish: what it settles with before
    // the outcome can be written is what is written (see record).
    let settledLate: RunOutcome | undefined;
    void late?.then((o: RunOutcome) => (settledLate = o));
    keeper.bodyDone();
    this.markBodyEnded(run.id);
    // The lease could not be proven while the body ran (self-fencing, or the row found no longer
    // ours): the body was aborted. What it ended with is still written, conditionally on the row
    // being this attempt's and running (the fence): a body that finished is recorded `succeeded`
    // rather than run again, and one that ended by its signal (or threw after it) is `abandoned`
    // with the next attempt owed, as a takeover would record it, without waiting for its lease.
    if (outcome.reason === 'cancelled') {
      const by = this.inFlight.get(run.id)?.cancelledBy;
      if (by) outcome = { ...outcome, error: `cancelled by ${by.actor}${by.reason ? `: ${by.reason}` : ''}${outcome.error && outcome.error !== 'cancelled' ? ` (${outcome.error})` : ''}` };
    }
    const leaseLost = keeper.leaseGone.aborted || outcome.reason === 'lease-lost';
    if (leaseLost && outcome.status !== 'succeeded') outcome = { ...outcome, status: 'abandoned', reason: 'lease-lost', error: outcome.error ?? 'lease lost' };
    let written;
    try {
      written = await this.record(job, run, outcome, log, started, ended, () => settledLate);
    } finally {
      keeper.stop();
    }
    // The lock key is not released: it names this attempt alone, and whatever the row now says (an
    // outcome, or a lease the takeover will end), every later claim of the period is another
    // attempt with a key of its own or is refused by the row. Releasing it would cost a script call
    // and two commands per master and period; it expires after its lockTtl instead (or is released
    // with the others at a clean stop). The key of a first attempt that ran is kept until its period
    // is older than catchUp: a store that loses the row (an asynchronous replica promoted) cannot by
    // itself make the period run again, since its catch-up claim meets the key. A later attempt's key
    // (a retry, an owed attempt: claimed from a pending row, whatever the period's age) is kept for
    // KEEP_OWED_MS after its end, or as long as the first attempt's if that is longer: a failover that
    // loses the claim of a pending row puts it back to pending, and a node claiming it again meets the key.
    lease?.settle(!written.written ? undefined
      : run.attempt === 1 ? run.scheduledAt.getTime() + job.catchUpMs + KEEP_MARGIN_MS
        : Math.max(run.scheduledAt.getTime() + job.catchUpMs, Date.now() + KEEP_OWED_MS) + KEEP_MARGIN_MS);
    const durationMs = Math.round(ended - started);
    const line = { status: written.status, durationMs, ...(outcome.error ? { error: outcome.error } : {}) };
    if (written.status === 'succeeded') log.info(line, 'run succeeded');
    else log.warn(line, `run ${written.status}`);
    if (written.next) log.info({ nextAttempt: written.next.attempt, runAt: written.next.runAt?.toISOString() }, 'next attempt owed (pending)');
    if (leaseLost) this.events.emit({ type: 'lease-lost', ...ref, cause: outcome.error ?? 'lease lost' });
    this.events.emit({
      type: 'run-finished', ...ref, status: written.status, reason: outcome.reason ?? null, durationMs, error: outcome.error ?? null,
      recorded: written.written, final: written.written && !written.next,
      nextAttempt: written.next ? { attempt: written.next.attempt, runAt: written.next.runAt } : null,
    });
    return {
      job: job.name, periodKey: run.periodKey, scheduledAt: run.scheduledAt, attempt: run.attempt, trigger: run.trigger,
      runId: run.id, shard: run.shard, status: written.status, result: outcome.result, error: outcome.error ?? null, durationMs, recorded: written.written, next: written.next,
    };
  }

  /** The job's pause (one read of the jobs table), or null; a read that fails counts as not paused, as at the claim. */
  private async pauseOf(name: string, log: Logger): Promise<{ reason: string | null } | null> {
    try {
      const row = (await this.options.pauses!.get([name])).get(name);
      return row?.paused ? { reason: row.pausedReason } : null;
    } catch (err) {
      log.warn({ err: { message: errorMessage(err) } }, 'pause state not read before the jittered start: running as not paused');
      return null;
    }
  }

  /**
   * No body runs, and the row is recorded `skipped`, as the claim records such a period: the job was
   * paused while the period waited for its jittered start (reason `paused`), or an earlier period's
   * run that the claim found live is still live at the start (reason `overlap`, see startCheck).
   */
  private async skipAtStart(job: Job, run: RunRecord, lease: Lease | null, log: Logger, keeper: { bodyDone(): void; stop(): void }, why: { reason: 'paused'; pausedReason: string | null } | { reason: 'overlap'; running: RunRecord }): Promise<AttemptResult> {
    keeper.bodyDone();
    this.markBodyEnded(run.id);
    const at = performance.now();
    let written;
    try {
      written = await this.record(job, run, { status: 'skipped', reason: why.reason }, log, at, at);
    } finally {
      keeper.stop();
    }
    // The lock key is left to expire, as after any attempt (see attempt()).
    lease?.settle();
    if (written.written) {
      if (why.reason === 'paused') log.info({ reason: why.pausedReason }, 'period skipped: the job was paused while it waited for its jittered start');
      else log.info({ runningPeriod: why.running.periodKey }, 'period skipped: another run of the job is in flight (overlap: skip)');
      this.events.emit({ type: 'skipped', job: job.name, reason: why.reason, count: 1, first: run.scheduledAt, last: run.scheduledAt });
    }
    return {
      job: job.name, periodKey: run.periodKey, scheduledAt: run.scheduledAt, attempt: run.attempt, trigger: run.trigger,
      runId: run.id, shard: run.shard, status: written.status, error: null, durationMs: 0, recorded: written.written, next: written.next,
    };
  }

  private async body(job: Job, run: RunRecord, controller: AbortController, dryRun: boolean, log?: Logger, leaseGone?: AbortSignal, leaseDeadline?: Float64Array, nodeLog?: Logger): Promise<BodyOutcome> {
    const childLog = log ?? this.log.child({ job: job.name, periodKey: run.periodKey, runId: run.id, attempt: run.attempt, dryRun });
    this.watchdog ??= new LoopWatchdog(this.log);
    return runBody({
      job, run, nodeId: this.nodeId, controller, dryRun, log: childLog, ...(nodeLog ? { nodeLog } : {}), watchdog: this.watchdog,
      maxResultBytes: this.options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES, workerGraceMs: this.options.workerGraceMs,
      // A self-fenced attempt aborts fenceMargin before its lease can run out in the store: its worker must be gone by then.
      leaseLostGraceMs: Math.floor(fenceMargin(job.lockTtlMs) / 2),
      onceStore: this.options.onceStore, events: this.events, leaseGone, leaseDeadline,
    });
  }

  /**
   * Writes the outcome, with what it owes next, by a write conditional on the row still being this
   * attempt's and running: that alone keeps it safe, whatever the lease did meanwhile (a row another
   * node took over refuses it). While the store is unreachable the outcome is kept and tried again
   * every 50-200 ms, for as long as the node lives (at shutdown, until the write deadline: see
   * limitWrites), so that it lands as soon as the store answers. The other nodes give it that
   * chance: none declares the attempt abandoned before it has itself been connected to the store
   * for the attempt's lease since it last lost it (Takeover), and this node never does while it
   * holds the attempt.
   */
  private async record(job: Job, run: RunRecord, outcome: RunOutcome, log: Logger, bodyStarted: number, bodyEnded: number, settledLate?: () => RunOutcome | undefined): Promise<{ written: boolean; status: FinalStatus; next: RunRecord | null }> {
    const policy = { retries: job.retries, retryDelayMs: job.retryDelayMs };
    const every = Math.min(200, Math.max(50, Math.floor(job.lockTtlMs / 10)));
    let attempt: RunOutcome = outcome;
    let warned = false;
    let restored = false;
    for (;;) {
      // A body aborted by the loss of its lease that finished after all, before this write (the store
      // was away meanwhile): it did its work, and is recorded succeeded rather than run again.
      const late = settledLate?.();
      if (late?.status === 'succeeded' && outcome.status === 'abandoned' && attempt === outcome) {
        log.info('the body finished after its lease could not be proven: its own outcome (succeeded) is recorded');
        outcome = attempt = late;
      }
      const sentAt = performance.now();
      try {
        const bodyMsAgo = { started: sentAt - bodyStarted, ended: sentAt - bodyEnded };
        const sentId = run.id;
        const ended = await this.store.endAttempt(run, this.nodeId, { ...attempt, bodyMsAgo }, policy);
        // Refused: the row was taken over, or is gone (then written back, and the outcome with it;
        // a heartbeat in flight may have written it back meanwhile).
        if (!ended.written && (run.id !== sentId || (!restored && (restored = await this.restoreLostRow(job, run, log))))) continue;
        if (ended.written) {
          this.lostRows.remember({ run, outcome: attempt, bodyStarted, bodyEnded, writtenAt: performance.now(), leaseMs: job.lockTtlMs, policy });
        }
        if (!ended.written) log.warn({ status: outcome.status }, 'outcome not recorded: the attempt is no longer this node\'s');
        return ended;
      } catch (err) {
        if (err instanceof StoreUnavailableError) {
          if (performance.now() < this.deadlineFor(job)) {
            if (!warned) log.warn({ err: { message: errorMessage(err) } }, 'store unreachable: keeping the outcome and trying again');
            warned = true;
            await this.pause(every, job);
            continue;
          }
          log.error({ err: { message: errorMessage(err) }, outcome: { status: outcome.status, error: outcome.error } },
            'shutdown: the outcome could not be written before the deadline; the row stays running and is taken over once its lease runs out');
          return { written: false, status: outcome.status, next: null };
        }
        if (attempt === outcome) {
          // The store refused this outcome (not its connection): record the status at least, or the
          // row would be left running and later taken over, running a finished period again.
          log.error({ err: { message: errorMessage(err) } }, 'outcome refused by the store: recording the status alone');
          attempt = { status: outcome.status, reason: outcome.reason ?? null, error: `outcome could not be stored: ${errorMessage(err)}`.slice(0, 2000) };
          continue;
        }
        log.error({ err: { message: errorMessage(err) }, outcome: { status: outcome.status, error: outcome.error } }, 'could not record the outcome');
        return { written: false, status: outcome.status, next: null };
      }
    }
  }

  /** The store answered (a sweep went through): see LostRows.storeAnswered. */
  storeAnswered(): void {
    this.lostRows.storeAnswered();
  }

  /** How many written outcomes this node keeps for a write-back. */
  get settledKept(): number {
    return this.lostRows.kept;
  }

  /**
   * The store may have moved: reads back the outcomes written lately and writes again each one the
   * store no longer has (LostRows.verify). Never throws.
   */
  verifySettled(why: string): Promise<void> {
    return this.lostRows.verify(why);
  }

  /**
   * The attempt's row was not found where this node left it (a heartbeat or the outcome write matched
   * nothing): LostRows.restoreInFlight says so and takes a row back when it can; the attempt then goes
   * on under that row (its id).
   */
  private async restoreLostRow(job: Job, run: RunRecord, log: Logger): Promise<boolean> {
    const back = await this.lostRows.restoreInFlight(run, job.lockTtlMs, log);
    if (!back) return false;
    // The same object, so that every holder of it follows.
    const entry = this.inFlight.get(run.id);
    this.inFlight.delete(run.id);
    Object.assign(run, { id: back.id, startedAt: back.startedAt, heartbeatAt: back.heartbeatAt });
    if (entry) {
      entry.run.id = back.id;
      this.inFlight.set(run.id, entry);
    }
    return true;
  }

  /** A wait between outcome writes that a shutdown's write deadline cuts short. */
  private pause(ms: number, job: Job): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.writeWaiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, Math.min(ms, Math.max(0, this.deadlineFor(job) - performance.now())));
      this.writeWaiters.add(wake);
    });
  }
}
