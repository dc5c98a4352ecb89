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
import type { FinalStatus, RunOutcome, RunRecord, RunStore } from '../store/types.js';
import { periodKey } from '../time/schedule.js';
import { runBody } from './body.js';
import { LoopWatchdog } from './isolation/watchdog.js';
import { DEFAULT_MAX_RESULT_BYTES } from './outcome.js';

export interface AttemptResult {
  job: string;
  periodKey: string;
  scheduledAt: Date;
  attempt: number;
  trigger: Trigger;
  runId: string;
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
}

export interface ExecutorOptions {
  /** Results whose JSON is larger are not stored (the `maxResultSize` setting; default 1 MB). */
  maxResultBytes?: number;
  /** Worker bodies: how long after the abort one that has not settled is terminated (default 1 s). */
  workerGraceMs?: number;
}

/** How often the self-fencing watchdog looks at the attempts in flight. */
const FENCE_CHECK_MS = 100;

/** How long before the store's lease would run out a node stops trusting it: a quarter of it, 250 ms to 5 s. */
export function fenceMargin(lockTtlMs: number): number {
  return Math.min(5000, Math.max(250, Math.floor(lockTtlMs / 4)));
}

export class Executor {
  private readonly inFlight = new Map<string, InFlight>();
  private readonly fences = new Set<() => void>();
  private fenceTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  private watchdog: LoopWatchdog | undefined;

  constructor(
    private readonly store: RunStore,
    private readonly nodeId: string,
    private readonly log: Logger,
    private readonly options: ExecutorOptions = {},
  ) {}

  get size(): number {
    return this.inFlight.size;
  }

  /** Runs one claimed attempt to its recorded end. Never throws. */
  execute(job: Job, run: RunRecord, lease: Lease | null, onDone?: () => void, notBefore?: Date): Promise<AttemptResult> {
    const controller = new AbortController();
    const done = this.attempt(job, run, lease, controller, notBefore).finally(() => {
      this.inFlight.delete(run.id);
      onDone?.();
    });
    this.inFlight.set(run.id, { controller, done });
    return done;
  }

  /** --dry-run: the body with ctx.dryRun, no row, no lock. */
  async dryRun(job: Job, scheduledAt: Date, trigger: Trigger, attempt = 1): Promise<AttemptResult> {
    const fake: RunRecord = {
      id: `dry-run-${randomUUID()}`, job: job.name, scheduledAt, periodKey: periodKey(job.name, scheduledAt), shard: 0,
      attempt, trigger, status: 'running', reason: null, nodeId: this.nodeId, startedAt: new Date(), runAt: null, finishedAt: null,
      durationMs: null, heartbeatAt: null, leaseMs: job.lockTtlMs, result: null, resultNote: null, error: null, errorStack: null,
    };
    const controller = new AbortController();
    const started = Date.now();
    const outcome = await this.body(job, fake, controller, true);
    return {
      job: job.name, periodKey: fake.periodKey, scheduledAt, attempt, trigger, runId: fake.id, status: outcome.status,
      result: outcome.result, error: outcome.error ?? null, durationMs: Date.now() - started, recorded: false, next: null,
    };
  }

  /** Aborts every in-flight body with reason 'shutdown'. */
  abortAll(reason: AbortReason): void {
    for (const { controller } of this.inFlight.values()) controller.abort(reason);
  }

  /** Resolves when every in-flight attempt has been recorded. */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight.values()].map((f) => f.done));
  }

  /** After this, outcome writes that fail are given up (and logged) instead of retried forever. */
  markStopping(): void {
    this.stopping = true;
  }

  private async attempt(job: Job, run: RunRecord, lease: Lease | null, controller: AbortController, notBefore?: Date): Promise<AttemptResult> {
    const log = this.log.child({ job: job.name, periodKey: run.periodKey, runId: run.id, attempt: run.attempt });
    // The lease is kept from the claim until the outcome has been written, not only while the body runs:
    // a finished run whose outcome waits for the store must not look abandoned meanwhile.
    const keeper = this.keepLease(job, run, lease, controller, log);
    // A period claimed ahead of its instant starts at the instant; the lease is kept meanwhile.
    const wait = notBefore ? notBefore.getTime() - Date.now() : 0;
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const started = Date.now();
    const outcome = await this.body(job, run, controller, false, log);
    keeper.bodyDone();
    let ended;
    try {
      ended = await this.record(job, run, outcome, log);
    } finally {
      keeper.stop();
    }
    if (lease) await lease.release();
    const durationMs = Date.now() - started;
    const line = { status: ended.status, durationMs, ...(outcome.error ? { error: outcome.error } : {}) };
    if (ended.status === 'succeeded') log.info(line, 'run succeeded');
    else log.warn(line, `run ${ended.status}`);
    if (ended.next) log.info({ nextAttempt: ended.next.attempt, runAt: ended.next.runAt?.toISOString() }, 'next attempt owed (pending)');
    return {
      job: job.name, periodKey: run.periodKey, scheduledAt: run.scheduledAt, attempt: run.attempt, trigger: run.trigger,
      runId: run.id, status: ended.status, result: outcome.result, error: outcome.error ?? null, durationMs, recorded: ended.written, next: ended.next,
    };
  }

  private async body(job: Job, run: RunRecord, controller: AbortController, dryRun: boolean, log?: Logger): Promise<RunOutcome> {
    const childLog = log ?? this.log.child({ job: job.name, periodKey: run.periodKey, runId: run.id, attempt: run.attempt, dryRun });
    this.watchdog ??= new LoopWatchdog(this.log);
    return runBody({
      job, run, nodeId: this.nodeId, controller, dryRun, log: childLog, watchdog: this.watchdog,
      maxResultBytes: this.options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES, workerGraceMs: this.options.workerGraceMs,
      // A self-fenced attempt aborts fenceMargin before its lease can run out in the store: its worker must be gone by then.
      leaseLostGraceMs: Math.floor(fenceMargin(job.lockTtlMs) / 2),
    });
  }

  /**
   * While the attempt runs: every third of lockTtl, extend the Redlock and write the row heartbeat
   * (store clock). A row that is no longer this attempt's, or a lock held by someone else, aborts
   * ctx.signal with 'lease-lost'. An unreachable Redis or store is not a loss by itself.
   */
  private keepLease(job: Job, run: RunRecord, lease: Lease | null, controller: AbortController, log: Logger): { bodyDone(): void; stop(): void } {
    const every = Math.max(200, Math.floor(job.lockTtlMs / 3));
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    // After the body, a lost lease has nothing left to abort; the conditional outcome write says the rest.
    let bodyDone = false;
    // Self-fencing, on the monotonic clock: the send time of the last beat the store confirmed (the
    // claim, at first). The store's lease runs from a moment after it, so a node that aborts at
    // confirmed + lease - margin aborts before the store can give the lease to another node.
    let confirmedAt = performance.now();
    const fenceAfter = job.lockTtlMs - fenceMargin(job.lockTtlMs);
    const fence = () => {
      if (stopped || bodyDone || controller.signal.aborted) return;
      const silent = performance.now() - confirmedAt;
      if (silent <= fenceAfter) return;
      log.warn({ unconfirmedMs: Math.round(silent), lockTtlMs: job.lockTtlMs }, 'lease lost: no confirmed heartbeat for too long (self-fencing); aborting the run');
      controller.abort('lease-lost');
    };
    this.fences.add(fence);
    this.armFences();
    const beat = async () => {
      if (stopped || controller.signal.aborted) return;
      let next = every;
      const began = performance.now();
      try {
        const [lock, row] = await Promise.all([
          lease ? lease.extend(job.lockTtlMs) : Promise.resolve('ok' as const),
          this.store.heartbeat(run.id, this.nodeId).catch((err: unknown) => {
            if (err instanceof StoreUnavailableError) return 'unavailable' as const;
            throw err;
          }),
        ]);
        if (stopped) return;
        if (row === false || lock === 'lost') {
          if (bodyDone) return;
          log.warn({ lock, rowOwned: row }, 'lease lost: aborting the run');
          controller.abort('lease-lost');
          return;
        }
        if (row === true) confirmedAt = Math.max(confirmedAt, began);
        // While the store is away, beat often so that the row is fresh again as soon as it answers.
        if (row === 'unavailable') next = Math.min(every, 200);
      } catch (err) {
        log.warn({ err: { message: errorMessage(err) } }, 'lease keeping failed');
      }
      // The interval runs from the start of this beat, not from its answer: an answer that took longer
      // than the interval (the process was paused or its event loop blocked while the beat was in
      // flight) says only that the lease was ours before the stall, so the next beat goes at once.
      next = Math.max(0, next - (performance.now() - began));
      if (!stopped) {
        timer = setTimeout(() => void beat(), next);
        timer.unref();
      }
    };
    timer = setTimeout(() => void beat(), every);
    timer.unref();
    return {
      bodyDone: () => {
        bodyDone = true;
      },
      stop: () => {
        stopped = true;
        if (timer) clearTimeout(timer);
        this.fences.delete(fence);
        this.armFences();
      },
    };
  }

  /**
   * One watchdog for every attempt in flight, every FENCE_CHECK_MS. It is a timer like the bodies' own:
   * after a process pause it fires among the first (its due time is the oldest), so a paused attempt
   * is aborted before its body's timers go on.
   */
  private armFences(): void {
    if (this.fences.size > 0 && !this.fenceTimer) {
      this.fenceTimer = setInterval(() => {
        for (const check of this.fences) check();
      }, FENCE_CHECK_MS);
      this.fenceTimer.unref();
    } else if (this.fences.size === 0 && this.fenceTimer) {
      clearInterval(this.fenceTimer);
      this.fenceTimer = undefined;
    }
  }

  /**
   * Writes the outcome, with what it owes next. While the store is unreachable the outcome is kept
   * and tried again at the heartbeat cadence (the lease is kept meanwhile), so that it lands as soon
   * as the store answers, before any other node may judge the lease.
   */
  private async record(job: Job, run: RunRecord, outcome: RunOutcome, log: Logger): Promise<{ written: boolean; status: FinalStatus; next: RunRecord | null }> {
    const policy = { retries: job.retries, retryDelayMs: job.retryDelayMs };
    const every = Math.min(200, Math.max(50, Math.floor(job.lockTtlMs / 10)));
    let attempt: RunOutcome = outcome;
    let warned = false;
    for (;;) {
      try {
        const ended = await this.store.endAttempt(run, this.nodeId, attempt, policy);
        if (!ended.written) log.warn({ status: outcome.status }, 'outcome not recorded: the attempt is no longer this node\'s');
        return ended;
      } catch (err) {
        if (err instanceof StoreUnavailableError && !this.stopping) {
          if (!warned) log.warn({ err: { message: errorMessage(err) } }, 'store unreachable: keeping the outcome and trying again');
          warned = true;
          await new Promise((r) => setTimeout(r, every));
          continue;
        }
        if (attempt === outcome && !(err instanceof StoreUnavailableError)) {
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
}
