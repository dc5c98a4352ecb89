/**
 * The daemon's tick loop: one timer for all jobs, armed CLAIM_AHEAD_MS before the earliest next
 * period. On waking, the periods that are due are computed from the expressions (never from the
 * moment the timer fired) and claimed in parallel; their bodies start at the period instant. Periods
 * skipped by a late wake-up (a pause, a blocked event loop) go through the reconciler at once.
 *
 * A sweep once a second does the rest from the store: takes over attempts whose lease expired, runs
 * the owed (pending) attempts that are due, and reconciles the recent periods (those with no row run
 * as catch-up, or are recorded missed). What is owed lives in the store; this process only executes it.
 */
import { errorMessage } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { RunStore } from '../store/types.js';
import { nextPeriodAfter, periodKey } from '../time/schedule.js';
import { MEMBERSHIP_EVERY_MS, STEP_IN_AFTER_MS, type Racers } from '../claim/racers.js';
import type { Executor } from '../run/execute.js';
import type { PeriodRunner } from '../run/period.js';
import type { Reconciler } from '../run/reconcile.js';
import type { Takeover } from '../run/takeover.js';
import type { InFlightRun } from '../run/execute.js';
import type { QuorumState } from '../claim/lock.js';
import { noEvents, type SchedulerObserver } from '../events/events.js';
import { ANCHORS_FLUSH_MS, WRITE_MARGIN_MS } from './stop-budget.js';
import { NODE_ALIVE_MS } from '../store/nodes.js';
import { MAX_TIMER_MS, CLAIM_AHEAD_MS, CLAIM_AHEAD_MAX_MS, claimAheadMs, BEHIND_AFTER_MS, BEHIND_WARN_EVERY_MS, RECONCILE_MARGIN_MS, RECONCILE_SLICES, STARTUP_CATCH_UP_LEAD_MS } from './cadence.js';

export { CLAIM_AHEAD_MS, CLAIM_AHEAD_MAX_MS, claimAheadMs, BEHIND_AFTER_MS, RECONCILE_MARGIN_MS, RECONCILE_SLICES, STARTUP_CATCH_UP_LEAD_MS } from './cadence.js';

/** How often each node sweeps: takeover, due pending attempts, reconciling. */
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
  reconciler: Reconciler;
  log: Logger;
  now?: () => Date;
  events?: SchedulerObserver;
  /** The Redis quorum's state (looked at on each sweep). Default 'none'. */
  lockState?: () => QuorumState;
  /** The clock offset to the store (looked at on each sweep). */
  clockReading?: () => { offsetMs: number; rttMs: number };
  /** Called at every sweep, even while the previous one still runs (the node's heartbeat; it must not throw or block). */
  onSweep?: () => void;
  /** Which periods this node races first, steps in for, or leaves to others (none: it races every period, as a lone node). */
  racers?: Racers;
}

/** What the scheduler is doing, for read-only views (status page, /readyz, /api). */
export interface SchedulerSnapshot {
  /** When start() finished declaring the jobs (epoch ms), null before. */
  startedAt: number | null;
  stopping: boolean;
  store: 'ok' | 'down';
  storeError: string | null;
  redis: QuorumState;
  clockOffsetMs: number;
  /** Milliseconds since the sweep timer last fired (the tick loop's pulse); null before the first. */
  sinceLastPulseMs: number | null;
  jobs: Array<{ job: Job; next: Date | null }>;
  inFlight: InFlightRun[];
}

export class Scheduler {
  /** Replaced as a whole (replaceJobs), never mutated in length: the tick and the sweep read it between awaits. */
  private states: JobState[];
  private readonly tracked = new Set<Promise<unknown>>();
  private timer: NodeJS.Timeout | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private sweepStart: NodeJS.Timeout | undefined;
  private sweeping = false;
  /** A sweep's reconcile in progress (it runs beside the next sweeps' takeovers). */
  private reconciling = false;
  /** Set while the store cannot be read. */
  private storeDown = false;
  /** No takeover before this instant (ms), just after the store came back. */
  private quietUntil = 0;
  private stopped = false;
  private readonly now: () => Date;
  private readonly events: SchedulerObserver;
  private startedAt: number | null = null;
  /** When start() finished declaring (monotonic ms): see unsureOfRacers. */
  private startedAtMono = -Infinity;
  private lastPulse: number | null = null;
  private storeError: string | null = null;
  /** The store's writer host at the last sweep that reached it (null on SQLite). */
  private storeHostSeen: string | null = null;
  /** The read-back of recent outcomes after the store moved, awaited by the next reconcile. */
  private readBack: Promise<void> | null = null;
  private redisState: QuorumState = 'none';
  private clockOffsetMs = 0;
  /** The longest lockTtl of any job scheduled since start (a removed job's run may still be in flight at shutdown). */
  private longestLockTtlMs = 0;
  /** Step-in checks armed (see stepIn). */
  private readonly stepIns = new Set<NodeJS.Timeout>();
  /** Periods deferred since the last "behind" warning, and when that was (see BEHIND_AFTER_MS). */
  private deferredSinceWarn = 0;
  private behindWarnedAt = -Infinity;
  private behind = false;

  constructor(private readonly options: SchedulerOptions) {
    this.now = options.now ?? (() => new Date());
    this.events = options.events ?? noEvents;
    this.redisState = options.lockState?.() ?? 'none';
    this.states = options.jobs.filter((j) => j.enabled).map((job) => ({ job, cursor: new Date(0), next: null }));
  }

  /** Declares the jobs, then the tick loop and the sweeps (the first sweep catches up). */
  async start(): Promise<void> {
    const { log, reconciler } = this.options;
    const now = this.now();
    await reconciler.declare(this.states.map((s) => s.job), now, 'next', this.options.jobs.filter((j) => !j.enabled));
    await this.options.racers?.refresh();
    // The tick starts from now, not from before the declaration (seconds with thousands of jobs):
    // periods that fell in between are the reconciler's (catch-up), not a late timer's.
    const ready = this.now();
    for (const state of this.states) {
      state.cursor = ready;
      state.next = nextPeriodAfter(state.job.schedule, ready);
      state.afterNext = state.next ? nextPeriodAfter(state.job.schedule, state.next) : null;
    }
    this.startedAt = Date.now();
    this.startedAtMono = performance.now();
    this.lastPulse = performance.now();
    log.info({ jobs: this.states.map((s) => ({ job: s.job.name, next: s.next?.toISOString() ?? null })) }, 'scheduler started');
    await this.catchUpAtStart(ready);
    this.arm();
    // Sweeps run half a second off the whole seconds, where ticks of most schedules fall.
    const phase = (SWEEP_EVERY_MS + 500 - (this.now().getTime() % SWEEP_EVERY_MS)) % SWEEP_EVERY_MS;
    // Tracked: a sweep in progress at a shutdown may still start claims, which the shutdown waits for.
    this.sweepStart = setTimeout(() => {
      this.track(this.sweep());
      this.sweeper = setInterval(() => {
        this.lastPulse = performance.now();
        this.track(this.sweep());
      }, SWEEP_EVERY_MS);
    }, phase);
  }

  /**
   * The start-up catch-up: every period up to `ready` (the tick's cursor) is decided in one plan, at
   * once. The sweeps look only at periods 3 s old and the tick only after `ready`, so before this the
   * periods of those last 3 s (among them the one due during the start-up) were left to later sweeps,
   * each of which planned them apart from the rest of the outage: with `coalesce` a second catch-up
   * ran (the first not the latest), or the latest missed period was recorded coalesced behind a
   * period the tick had run meanwhile. One plan runs the latest missed period, and only it.
   * The first tick waits (at most STARTUP_CATCH_UP_LEAD_MS) for this plan's claims to answer, since
   * a period the tick claims ahead counts as a live run, which a catch-up claim waits behind.
   */
  private async catchUpAtStart(ready: Date): Promise<void> {
    const { reconciler, runner, log } = this.options;
    // The first sweep's reconcile waits for this one (the same periods, planned twice).
    this.reconciling = true;
    const planned = (async () => {
      try {
        // A job with one period to run, which a node known alive ranks ahead of this one, is left to
        // that node: its tick or its own start-up catch-up claims it (nodes started together, each
        // claiming every job's period at once, multiplied a cold start's load). The sweeps run what
        // it does not. Several periods of a job (an outage) run here, in order, as before.
        const { racers } = this.options;
        const leave = (job: Job, periods: Date[]) => racers !== undefined && periods.length === 1 && (job.shards ?? 1) === 1
          && !racers.firstProven(periodKey(job.name, periods[0]!));
        const result = await reconciler.reconcile(this.states.map((s) => s.job), { upTo: ready, now: ready, leave });
        for (const p of result.ran) this.track(p);
        // It was the full reconcile the first sweep would have made; the sweeps go on by slices.
        this.fullReconcile = false;
      } catch (err) {
        log.warn({ err: { message: errorMessage(err) } }, 'start-up catch-up failed; the sweeps catch up instead');
      } finally {
        this.reconciling = false;
      }
    })();
    this.track(planned);
    const until = performance.now() + STARTUP_CATCH_UP_LEAD_MS;
    const answered = (async () => {
      await planned;
      while (runner.claimsBehindMs() > 0 && performance.now() < until && !this.stopped) await sleep(2);
    })();
    await Promise.race([answered, sleep(STARTUP_CATCH_UP_LEAD_MS)]);
  }

  /**
   * Replaces the scheduled jobs (a reload): new ones are declared and start with their next period
   * from now, as a job seen for the first time does; removed ones are no longer ticked (their
   * in-flight runs go on in the executor, and the shutdown still waits for them); a changed one
   * keeps its cursor when its schedule is the same, and its in-flight run ends with the definition
   * it started with. The array is swapped in one synchronous step, between ticks and sweeps.
   */
  async replaceJobs(jobs: Job[]): Promise<void> {
    if (this.stopped) return;
    const { reconciler } = this.options;
    const enabled = jobs.filter((j) => j.enabled);
    const previous = new Map(this.states.map((s) => [s.job.name, s]));
    const now = this.now();
    await reconciler.declare(enabled.filter((j) => !previous.has(j.name)), now, 'next', jobs.filter((j) => !j.enabled));
    if (this.stopped) return;
    const keep = new Set(enabled.map((j) => j.name));
    reconciler.forget([...previous.keys()].filter((name) => !keep.has(name)));
    this.states = enabled.map((job) => {
      const before = previous.get(job.name);
      if (before && before.job.schedule.expression === job.schedule.expression && before.job.schedule.timezone === job.schedule.timezone) {
        return { ...before, job };
      }
      // A new schedule starts from now: none of its periods before the reload is owed.
      if (before) reconciler.restartAt(job.name, now);
      const next = nextPeriodAfter(job.schedule, now);
      return { job, cursor: now, next, afterNext: next ? nextPeriodAfter(job.schedule, next) : null };
    });
    // A removed job's run may still be in flight at the shutdown, whose last wait covers its lockTtl.
    this.longestLockTtlMs = Math.max(this.longestLockTtlMs, ...[...previous.values()].map((s) => s.job.lockTtlMs));
    if (this.timer) clearTimeout(this.timer);
    this.arm();
  }

  snapshot(): SchedulerSnapshot {
    return {
      startedAt: this.startedAt,
      stopping: this.stopped,
      store: this.storeDown ? 'down' : 'ok',
      storeError: this.storeError,
      redis: this.redisState,
      clockOffsetMs: this.clockOffsetMs,
      sinceLastPulseMs: this.lastPulse === null ? null : Math.round(performance.now() - this.lastPulse),
      jobs: this.states.map((s) => ({ job: s.job, next: s.next })),
      inFlight: this.options.executor.running(),
    };
  }

  /** The Redis quorum's and the clock's state, as events when they change. */
  private observeDependencies(): void {
    const redis = this.options.lockState?.() ?? 'none';
    if (redis !== this.redisState) {
      this.redisState = redis;
      this.events.emit({ type: 'redis', state: redis });
    }
    const clock = this.options.clockReading?.();
    if (clock && clock.offsetMs !== this.clockOffsetMs) {
      this.clockOffsetMs = clock.offsetMs;
      this.events.emit({ type: 'clock', offsetMs: clock.offsetMs, rttMs: clock.rttMs });
    }
  }

  /** Takeover of expired leases, due pending attempts, and the reconciling of recent periods. */
  private async sweep(): Promise<void> {
    this.observeDependencies();
    this.options.onSweep?.();
    void this.options.racers?.refresh();
    if (this.sweeping || this.stopped) return;
    this.sweeping = true;
    const { takeover, reconciler, log } = this.options;
    try {
      const now = this.now();
      const { jobs, byName, slices } = this.sweptJobs();
      const started = await takeover.safeSweep(byName, { takeover: now.getTime() >= this.quietUntil && !this.storeDown });
      // A full pool (this node's load) is not the store being down: nothing to flag, the next sweep tries again.
      if (started === null && takeover.lastErrorBusy) return;
      if (started === null) {
        if (!this.storeDown) this.events.emit({ type: 'store', state: 'down', ...(takeover.lastError ? { error: takeover.lastError } : {}) });
        this.storeError = takeover.lastError;
        this.storeDown = true;
        return;
      }
      const { executor } = this.options;
      executor.storeAnswered();
      const host = this.options.store.storeHost();
      // The store may have moved: the outcomes written lately are read back (a promoted asynchronous
      // replica can lack them) before the catch-up looks for periods without a row.
      let moved: string | null = null;
      if (this.storeDown) moved = 'the store answered again after an outage';
      else if (host !== null && this.storeHostSeen !== null && host !== this.storeHostSeen) moved = `the store's writer moved from ${this.storeHostSeen} to ${host}`;
      this.storeHostSeen = host ?? this.storeHostSeen;
      if (moved) this.readBack = executor.verifySettled(moved);
      if (this.storeDown) {
        this.storeDown = false;
        this.storeError = null;
        this.events.emit({ type: 'store', state: 'ok' });
        // Live runs could not heartbeat while the store was away: give them time to do so before
        // judging any lease, so that an outage of the store alone causes no takeover.
        this.quietUntil = now.getTime() + 2 * SWEEP_EVERY_MS;
        this.fullReconcile = true;
        log.info('store answers again: catching up periods missed meanwhile');
      }
      for (const p of started) this.track(p);
      if (this.stopped || this.reconciling) return;
      // In the background: a reconcile that records thousands of skipped periods (an overloaded
      // node: 12-32 s a sweep at 8,000 every-second jobs on 2 cores) must not hold back the next
      // sweeps' takeovers and owed attempts, which go on every second beside it.
      this.reconciling = true;
      const part = this.reconcileNow(jobs, slices);
      this.track((async () => {
        try {
          await this.readBack;
          const result = await reconciler.reconcile(part, { upTo: new Date(now.getTime() - RECONCILE_MARGIN_MS), now });
          for (const p of result.ran) this.track(p);
          await reconciler.flush();
        } catch (err) {
          log.warn({ err: { message: errorMessage(err) } }, 'sweep failed');
        } finally {
          this.reconciling = false;
        }
      })());
    } catch (err) {
      log.warn({ err: { message: errorMessage(err) } }, 'sweep failed');
    } finally {
      this.sweeping = false;
    }
  }

  /** The jobs of `states` as the sweep reads them, made again only when `states` is replaced (not every second). */
  private sweptJobs(): { jobs: Job[]; byName: Map<string, Job>; slices: Job[][] } {
    if (this.swept?.states !== this.states) {
      const jobs = this.states.map((s) => s.job);
      const slices = Array.from({ length: RECONCILE_SLICES }, (_, i) => jobs.filter((_, n) => n % RECONCILE_SLICES === i));
      this.swept = { states: this.states, jobs, byName: new Map(jobs.map((j) => [j.name, j])), slices };
    }
    return this.swept;
  }

  private swept: { states: JobState[]; jobs: Job[]; byName: Map<string, Job>; slices: Job[][] } | undefined;
  /** Sweeps that reconciled, for the turn of the slices. */
  private sweeps = 0;
  /** When each slice was last reconciled (monotonic ms). */
  private sliceAt: number[] = [];
  /** The next sweep reconciles every job (the first, and the first after the store came back). */
  private fullReconcile = true;

  /**
   * The jobs this sweep reconciles: the next slice in turn, and with it any slice not reconciled for
   * RECONCILE_SLICES sweeps' time (sweeps that take longer than a second, on a node that cannot keep
   * up, must not leave each job's periods unrecorded for five such sweeps); every job when asked.
   */
  private reconcileNow(jobs: Job[], slices: Job[][]): Job[] {
    const now = performance.now();
    if (this.sliceAt.length !== slices.length) this.sliceAt = slices.map(() => now);
    if (this.fullReconcile) {
      this.fullReconcile = false;
      this.sliceAt.fill(now);
      return jobs;
    }
    const turn = this.sweeps++ % slices.length;
    const due = slices.map((_, i) => i === turn || now - this.sliceAt[i]! >= RECONCILE_SLICES * SWEEP_EVERY_MS);
    for (const [i, yes] of due.entries()) if (yes) this.sliceAt[i] = now;
    if (due.every(Boolean)) return jobs;
    return due.filter(Boolean).length === 1 ? slices[turn]! : slices.flatMap((s, i) => (due[i] ? s : []));
  }

  /** Keeps `p` in the shutdown's wait (a sweep, a tick, a run by hand started over HTTP). */
  track(p: Promise<unknown>): void {
    this.tracked.add(p);
    void p.finally(() => this.tracked.delete(p));
  }

  private arm(): void {
    if (this.stopped) return;
    let earliest = Infinity;
    for (const s of this.states) if (s.next && s.next.getTime() < earliest) earliest = s.next.getTime();
    if (earliest === Infinity) return;
    const delay = Math.max(0, Math.min(earliest - this.claimAhead() - this.now().getTime(), MAX_TIMER_MS));
    this.timer = setTimeout(() => this.tick(), delay);
  }

  private tick(): void {
    if (this.stopped) return;
    const now = this.now();
    const horizon = now.getTime() + this.claimAhead();
    const { runner } = this.options;
    const advanced: JobState[] = [];
    const late: Job[] = [];
    let lateMs = 0;
    /** Periods this node steps in for if no row appears (second-ranked), by instant and rank. */
    const stepIn = new Map<string, { at: Date; rank: number; jobs: Job[] }>();
    const behindMs = runner.claimsBehindMs();
    const behind = behindMs >= BEHIND_AFTER_MS;
    let deferred = 0;
    for (const state of this.states) {
      if (!state.next || state.next.getTime() > horizon) continue;
      const { job } = state;
      const first = state.next;
      const second = state.afterNext !== undefined ? state.afterNext : nextPeriodAfter(job.schedule, first);
      advanced.push(state);
      state.afterNext = undefined;
      if ((!second || second.getTime() > horizon) && now.getTime() - first.getTime() <= job.catchUpMs) {
        // The regular case: exactly one period is due (or about to be: its body waits for the instant).
        state.cursor = first;
        state.next = second;
        const rank = this.rankOf(job, first);
        if (rank === 0 && behind) deferred++;
        else if (rank === 0) this.track(runner.runPeriod(job, first, 'schedule', { notBefore: first }));
        else if (!behind && (rank === 1 || this.unsureOfRacers(job, first))) {
          const k = `${first.getTime()}/${rank}`;
          (stepIn.get(k) ?? stepIn.set(k, { at: first, rank, jobs: [] }).get(k)!).jobs.push(job);
        }
        continue;
      }
      // Woken late past several periods, or past the job's catchUp (a process paused for hours): the
      // reconciler looks at them at once (it runs the latest as 'schedule' if it is within catchUp, the
      // others as coalesce says, and records the older ones missed).
      state.cursor = now;
      state.next = nextPeriodAfter(job.schedule, now);
      lateMs = Math.max(lateMs, now.getTime() - first.getTime());
      late.push(job);
    }
    if (late.length > 0) {
      // One line for the tick, not one per job (a stalled process with 2,000 jobs).
      this.options.log.warn({ jobs: late.length, ...(late.length === 1 ? { job: late[0]!.name } : { first: late.slice(0, 5).map((j) => j.name) }), lateMs }, 'timer woke late past several periods: catching up');
      this.catchUpLate(late);
    }
    for (const s of stepIn.values()) this.stepIn(s.at, s.jobs, s.rank * STEP_IN_AFTER_MS);
    this.noteBehind(behind, behindMs, deferred);
    // Off the claim path: the claims above are on the wire already.
    for (const state of advanced) state.afterNext = state.next ? nextPeriodAfter(state.job.schedule, state.next) : null;
    this.arm();
  }

  /**
   * The catch-up of jobs a late timer woke past several periods, one at a time: a node that cannot
   * keep up wakes late tick after tick, and catch-ups of thousands of jobs side by side (each reading
   * and recording the same periods, each starting a run per job) only dig it deeper. Jobs that woke
   * late while one is in progress wait for it, and go together in the next, from that moment.
   */
  private catchUpLate(jobs: Job[]): void {
    for (const job of jobs) this.lateJobs.set(job.name, job);
    if (this.catchingUpLate) return;
    this.catchingUpLate = true;
    this.track((async () => {
      try {
        while (this.lateJobs.size > 0 && !this.stopped) {
          const batch = [...this.lateJobs.values()];
          this.lateJobs.clear();
          const now = this.now();
          try {
            const r = await this.options.reconciler.reconcile(batch, { upTo: now, now, latestTrigger: 'schedule' });
            for (const p of r.ran) this.track(p);
          } catch (err) {
            this.options.log.warn({ err: { message: errorMessage(err) } }, 'catch-up after a late timer failed; the sweep tries again');
          }
        }
      } finally {
        this.catchingUpLate = false;
      }
    })());
  }

  private readonly lateJobs = new Map<string, Job>();
  private catchingUpLate = false;

  /** How far ahead of their instant this node claims periods now (see CLAIM_AHEAD_MAX_MS). */
  private claimAhead(): number {
    return claimAheadMs(this.options.runner.recentSlowestClaimMs());
  }

  /** The "behind" state of a tick (see BEHIND_AFTER_MS): an event per deferral, a warning per 10 s, a line when caught up. */
  private noteBehind(behind: boolean, behindMs: number, deferred: number): void {
    if (deferred > 0) {
      this.events.emit({ type: 'deferred', count: deferred, behindMs: Math.round(behindMs) });
      this.deferredSinceWarn += deferred;
    }
    const now = performance.now();
    if (behind && now - this.behindWarnedAt >= BEHIND_WARN_EVERY_MS) {
      this.options.log.warn({ oldestClaimMs: Math.round(behindMs), deferred: this.deferredSinceWarn },
        `node behind: its oldest claim has waited over ${BEHIND_AFTER_MS} ms; its ticks leave their periods to the other nodes and the catch-up sweep until it catches up`);
      this.behindWarnedAt = now;
      this.deferredSinceWarn = 0;
    } else if (!behind && this.behind) {
      this.options.log.info({ deferred: this.deferredSinceWarn }, 'node caught up: its ticks race their periods again');
      this.deferredSinceWarn = 0;
      this.behindWarnedAt = -Infinity;
    }
    this.behind = behind;
  }

  /**
   * For NODE_ALIVE_MS after the start (and one more read of the list), nodes listed alive may have
   * died before this one started (a whole cluster killed, one node back: the dead keep their shares
   * until their heartbeats age out), so no period is left to the sweep then: those ranked to the
   * dead were caught up 3-8 s late, or with `coalesce` recorded coalesced behind the next period.
   * A node ranked third or further steps in for a period then only while no node ranked ahead of it
   * is known alive (Racers.firstProven: seen beating since this node began, or started together
   * with it): a node known alive, or the second-ranked node, claims the period.
   */
  private unsureOfRacers(job: Job, at: Date): boolean {
    const { racers } = this.options;
    if (!racers?.unsure || performance.now() - this.startedAtMono >= NODE_ALIVE_MS + MEMBERSHIP_EVERY_MS) return false;
    return racers.firstProven(periodKey(job.name, at));
  }

  /** This node's rank for a period: 0 races it at the tick. A sharded job's shards spread by their own rule: every node races. */
  private rankOf(job: Job, at: Date): number {
    const { racers } = this.options;
    if (!racers || racers.size === 1 || (job.shards ?? 1) > 1) return 0;
    return racers.rank(periodKey(job.name, at));
  }

  /**
   * The second-ranked node's part: STEP_IN_AFTER_MS after the instant, the periods among `jobs` that
   * have no row yet (their first-ranked node is dead, stopping, or has not claimed them) are claimed
   * here, late, as the tick would have (one statement for the check). Those both nodes miss are the
   * reconciling sweep's, except just after the start (see unsureOfRacers): then the nodes ranked
   * further down step in too, rank r at r x STEP_IN_AFTER_MS.
   */
  private stepIn(at: Date, jobs: Job[], afterMs = STEP_IN_AFTER_MS): void {
    const timer = setTimeout(() => {
      this.stepIns.delete(timer);
      if (this.stopped) return;
      // A reload meanwhile: the jobs as they are now, removed ones left out.
      const current = new Map(this.states.map((s) => [s.job.name, s.job]));
      const names = jobs.map((j) => j.name).filter((n) => current.has(n));
      this.track(this.options.store.jobsWithRowAt(at, names).then((have) => {
        const missing = names.filter((n) => !have.has(n));
        if (missing.length === 0 || this.stopped) return;
        this.options.log.info({ periods: missing.length, scheduledAt: at.toISOString(), rank: Math.round(afterMs / STEP_IN_AFTER_MS), jobs: missing.slice(0, 5) }, 'periods with no row after their instant: claiming them here (their first-ranked node did not)');
        for (const name of missing) this.track(this.options.runner.runPeriod(current.get(name)!, at, 'schedule'));
      }, (err: unknown) => {
        this.options.log.warn({ err: { message: errorMessage(err) } }, 'step-in check failed; the sweep runs the periods nobody claimed');
      }));
    }, Math.max(0, at.getTime() + afterMs - this.now().getTime()));
    this.stepIns.add(timer);
  }


  /**
   * The shutdown, as one chain of deadlines: no new claims; in-flight runs (claims in flight at the
   * signal included) may finish within the grace period; then they are aborted with reason
   * 'shutdown' (recorded 'interrupted', the next attempt owed at once); then outcome writes get at most
   * their job's lockTtl to land (the store may be down), and what could not be written is logged and
   * left to the takeover. `force()` (a second signal) cuts every remaining wait short.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    for (const t of this.stepIns) clearTimeout(t);
    this.stepIns.clear();
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.sweepStart) clearTimeout(this.sweepStart);
    const { runner, executor, log } = this.options;
    runner.stop();
    log.info({ inFlight: executor.size, graceMs }, 'stopping: no new claims; waiting for in-flight runs');
    let forced = false;
    let wakeForced = () => {};
    const forcedNow = new Promise<void>((resolve) => (wakeForced = resolve));
    this.forceStop = () => {
      forced = true;
      executor.limitWrites(0);
      wakeForced();
    };
    // Everything started before the signal, and what it starts in turn: sweeps and ticks in progress,
    // their claims, the attempts they won.
    const settled = async () => {
      while (this.tracked.size > 0 || executor.size > 0) {
        await Promise.allSettled([...this.tracked]);
        await executor.drain();
      }
    };
    const finished = settled();
    const inGrace = await Promise.race([finished.then(() => true), sleep(graceMs).then(() => false), forcedNow.then(() => false)]);
    if (!inGrace) {
      if (!forced) log.warn({ inFlight: executor.size }, 'grace period over: interrupting in-flight runs');
      executor.abortAll('shutdown');
      executor.limitWrites(forced ? 0 : undefined);
      // Bounded: each outcome write gives up at its deadline (its job's lockTtl; at once after a second signal).
      const longest = Math.max(0, this.longestLockTtlMs, ...this.states.map((st) => st.job.lockTtlMs));
      await Promise.race([finished, sleep(longest + WRITE_MARGIN_MS), forcedNow.then(() => sleep(WRITE_MARGIN_MS))]);
    }
    // Whatever is still on its way (a claim that wins from now on) starts aborted, and is recorded so.
    executor.abortAll('shutdown');
    // The catch-up anchors, if the store answers soon: the next start reads the periods again anyway.
    await Promise.race([this.options.reconciler.flush(true).catch(() => {}), sleep(forced ? 0 : ANCHORS_FLUSH_MS)]);
  }

  private forceStop: () => void = () => {};

  /** A second signal: interrupt in-flight runs now, and stop waiting for their outcome writes. */
  force(): void {
    this.forceStop();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
