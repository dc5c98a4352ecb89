/**
 * The daemon's tick loop: one timer for all jobs, armed CLAIM_AHEAD_MS before the earliest next
 * period. On waking, the periods that are due are computed from the expressions (never from the
 * moment the timer fired) and claimed in parallel; their bodies start at the period instant. Periods
 * skipped by a late wake-up (a pause, a blocked event loop) go through catch-up. A sweep once a second
 * takes over attempts whose lease expired and catches up after the store was away.
 */
import type { Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { RunStore } from '../store/types.js';
import { nextPeriodAfter } from '../time/schedule.js';
import type { Executor } from '../run/execute.js';
import type { PeriodRunner } from '../run/period.js';
import type { Takeover } from '../run/takeover.js';

/** Upper bound on one timer, so that a wall-clock jump is noticed within this time. */
const MAX_TIMER_MS = 30_000;
/**
 * Periods are claimed (lock, then row) this long before their instant, and their bodies start at the
 * instant: the claim's round trips (Redlock, a durable INSERT) are then off the fire path. As Quartz
 * acquires triggers ahead of their fire time.
 */
export const CLAIM_AHEAD_MS = 100;
/** How often each node looks for attempts whose lease expired (takeover) and for the store's return. */
const SWEEP_EVERY_MS = 1000;

interface JobState {
  job: Job;
  /** The last period this process has dispatched (or the start instant). */
  cursor: Date;
  /** The first period after the cursor; null when the expression has no further instant. */
  next: Date | null;
  /**
   * The period after `next`, computed ahead of time (after a tick has dispatched its claims), so
   * that a tick sends its lock requests before doing any croner work. Undefined: not computed yet.
   */
  afterNext?: Date | null;
}

export interface SchedulerOptions {
  jobs: Job[];
  store: RunStore;
  runner: PeriodRunner;
  executor: Executor;
  takeover: Takeover;
  log: Logger;
  now?: () => Date;
}

export class Scheduler {
  private readonly states: JobState[];
  private readonly tracked = new Set<Promise<unknown>>();
  private timer: NodeJS.Timeout | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private sweepStart: NodeJS.Timeout | undefined;
  private sweeping = false;
  /** Set while the store cannot be read; periods since then are caught up when it answers again. */
  private storeDownSince: Date | undefined;
  /** No takeover before this instant (ms), just after the store came back. */
  private quietUntil = 0;
  private stopped = false;
  private readonly now: () => Date;

  constructor(private readonly options: SchedulerOptions) {
    this.now = options.now ?? (() => new Date());
    this.states = options.jobs.filter((j) => j.enabled).map((job) => ({ job, cursor: new Date(0), next: null }));
  }

  /** Catch-up for every job (in the background), then the tick loop. */
  async start(): Promise<void> {
    const { store, runner, log } = this.options;
    const now = this.now();
    const last = await store.lastRuns(this.states.map((s) => s.job.name));
    for (const state of this.states) {
      state.cursor = now;
      state.next = nextPeriodAfter(state.job.schedule, now);
      state.afterNext = state.next ? nextPeriodAfter(state.job.schedule, state.next) : null;
      // A job with no row at all is new: like a new Kubernetes CronJob, it starts with its next
      // period. Otherwise periods missed since its last recorded one are caught up (or counted).
      const fromExclusive = last.get(state.job.name)?.scheduledAt;
      if (fromExclusive) this.track(runner.catchUp(state.job, now, { fromExclusive, latestTrigger: 'catch-up' }));
    }
    log.info({ jobs: this.states.map((s) => ({ job: s.job.name, next: s.next?.toISOString() ?? null })) }, 'scheduler started');
    this.arm();
    // Sweeps run half a second off the whole seconds, where ticks of most schedules fall.
    const phase = (SWEEP_EVERY_MS + 500 - (this.now().getTime() % SWEEP_EVERY_MS)) % SWEEP_EVERY_MS;
    this.sweepStart = setTimeout(() => {
      void this.sweep();
      this.sweeper = setInterval(() => void this.sweep(), SWEEP_EVERY_MS);
    }, phase);
  }

  /** Takeover of expired leases; catch-up after the store comes back. */
  private async sweep(): Promise<void> {
    if (this.sweeping || this.stopped) return;
    this.sweeping = true;
    try {
      const now = this.now();
      if (this.storeDownSince) {
        try {
          await this.options.store.now();
        } catch {
          return;
        }
        const since = this.storeDownSince;
        this.storeDownSince = undefined;
        // Live runs could not heartbeat while the store was away: give them time to do so before
        // judging any lease, so that an outage of the store alone causes no takeover.
        this.quietUntil = now.getTime() + 2 * SWEEP_EVERY_MS;
        this.options.log.info({ since: since.toISOString() }, 'store answers again: catching up periods missed meanwhile');
        for (const state of this.states) {
          this.track(this.options.runner.catchUp(state.job, now, { fromExclusive: new Date(since.getTime() - 1000), latestTrigger: 'catch-up' }));
        }
        return;
      }
      if (now.getTime() < this.quietUntil) return;
      const jobs = new Map(this.states.map((s) => [s.job.name, s.job]));
      const started = await this.options.takeover.safeSweep(jobs);
      if (started === null) {
        this.storeDownSince ??= now;
        return;
      }
      for (const p of started) this.track(p);
    } finally {
      this.sweeping = false;
    }
  }

  private track(p: Promise<unknown>): void {
    this.tracked.add(p);
    void p.finally(() => this.tracked.delete(p));
  }

  private arm(): void {
    if (this.stopped) return;
    let earliest = Infinity;
    for (const s of this.states) if (s.next && s.next.getTime() < earliest) earliest = s.next.getTime();
    if (earliest === Infinity) return;
    const delay = Math.max(0, Math.min(earliest - CLAIM_AHEAD_MS - this.now().getTime(), MAX_TIMER_MS));
    this.timer = setTimeout(() => this.tick(), delay);
  }

  private tick(): void {
    if (this.stopped) return;
    const now = this.now();
    const horizon = now.getTime() + CLAIM_AHEAD_MS;
    const { runner } = this.options;
    const advanced: JobState[] = [];
    for (const state of this.states) {
      if (!state.next || state.next.getTime() > horizon) continue;
      const { job } = state;
      const first = state.next;
      const second = state.afterNext !== undefined ? state.afterNext : nextPeriodAfter(job.schedule, first);
      advanced.push(state);
      state.afterNext = undefined;
      if (!second || second.getTime() > horizon) {
        // The regular case: exactly one period is due (or about to be: its body waits for the instant).
        state.cursor = first;
        state.next = second;
        this.track(runner.runPeriod(job, first, 'schedule', { notBefore: first }).then((r) => {
          // A claim that failed on the store is caught up once the store answers again.
          if (r.claim === 'error') this.storeDownSince ??= new Date(first.getTime());
        }));
        continue;
      }
      // Woken late past several periods: the latest runs as 'schedule', the rest go through catch-up.
      const fromExclusive = state.cursor;
      state.cursor = now;
      state.next = nextPeriodAfter(job.schedule, now);
      this.options.log.warn({ job: job.name, since: fromExclusive.toISOString(), lateMs: now.getTime() - first.getTime() }, 'timer woke late past several periods: catching up');
      this.track(runner.catchUp(job, now, { fromExclusive, latestTrigger: 'schedule' }));
    }
    // Off the claim path: the claims above are on the wire already.
    for (const state of advanced) state.afterNext = state.next ? nextPeriodAfter(state.job.schedule, state.next) : null;
    this.arm();
  }


  /**
   * Stops claiming, lets in-flight runs finish within the grace period, then aborts the rest with
   * reason 'shutdown' (recorded 'interrupted'). `force()` cuts the grace short.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.sweepStart) clearTimeout(this.sweepStart);
    const { runner, executor, log } = this.options;
    runner.stop();
    log.info({ inFlight: executor.size, graceMs }, 'stopping: no new claims; waiting for in-flight runs');
    const graceOver = new Promise<'grace'>((resolve) => {
      this.forceStop = () => resolve('grace');
      setTimeout(() => resolve('grace'), graceMs).unref();
    });
    const drained = executor.drain().then(() => 'drained' as const);
    if ((await Promise.race([drained, graceOver])) === 'grace' && executor.size > 0) {
      log.warn({ inFlight: executor.size }, 'grace period over: interrupting in-flight runs');
      executor.abortAll('shutdown');
    }
    await executor.drain();
    executor.markStopping();
    await Promise.allSettled([...this.tracked]);
  }

  private forceStop: () => void = () => {};

  /** A second signal: interrupt in-flight runs now (they are still recorded). */
  force(): void {
    this.forceStop();
  }
}
