/**
 * The reconciling sweep: the store, not a process's memory, says which periods are owed. Every job
 * has an anchor in the jobs table (`reconciled_through`: every period at or before it has a row).
 * Each sweep looks only at the periods after the anchor and up to a little before now, so its cost
 * follows the number of new periods, never the number of rows in the table:
 *
 * - a period with no row that is no older than `catchUp` is claimed and run (`catch-up`); with
 *   `coalesce`, only the latest is, and the others are recorded `skipped` (`coalesced`);
 * - a period with no row older than `catchUp` is recorded `skipped` (`missed`), once across the
 *   cluster (the unique key), and counted;
 * - a period with no row on a date the job's `exclude` names is recorded `skipped` (`calendar`),
 *   old or recent, and never counts as the latest one that coalescing runs: that is the latest
 *   period NOT excluded;
 * - the anchor then moves up to the first period still without a row.
 *
 * A sharded job's period has rows when each of its shards has one: a period with some shards
 * missing is run (its missing shards) or recorded (its missing shards' rows) by the same rules.
 *
 * That covers the periods nobody claimed while every node was down, those whose claim failed on the
 * store, and those whose lock winner died between its lock and its INSERT.
 */
import { noEvents, type SchedulerObserver } from '../events/events.js';
import { errorMessage } from '../errors.js';
import type { Job, Trigger } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { JobStore, PeriodRange, RunStore, SkipReason } from '../store/types.js';
import { latestPeriodAtOrBefore, nextPeriodAfter, periodKey, periodsAfter, type Schedule } from '../time/schedule.js';
import type { PeriodResult, PeriodRunner } from './period.js';

/** At most this many periods older than catchUp are recorded per job and sweep (a long outage takes several sweeps). */
export const MISSED_PER_SWEEP = 2000;
/** At most this many periods within catchUp are looked at per job and sweep, the oldest first. */
export const RECENT_PER_SWEEP = 10_000;
/** How often a node writes the anchors that moved to the jobs table. */
const FLUSH_EVERY_MS = 10_000;
/**
 * How often a node marks all its jobs seen (that it still has them), at a flush: a third of
 * JOB_SEEN_TTL_MS. Every 10 s, writing 10,000 rows was two fifths of an idle node's CPU (0.57 % of a
 * core against 0.37 % without).
 */
export const SEEN_EVERY_MS = 30_000;

export interface ReconcileWindow {
  /** Periods after this instant (the anchor) are looked at. */
  fromExclusive: number;
  /** ...up to this one (inclusive). */
  upTo: number;
  /** Periods older than now - catchUp are missed. */
  now: number;
}

export interface ReconcilePlan {
  /** Older than catchUp, no row: recorded skipped ('missed'). */
  missed: Date[];
  /** No row, superseded by a later period (coalesce): recorded skipped ('coalesced'). */
  coalesced: Date[];
  /** No row, within catchUp: claimed and run, oldest first. */
  run: Date[];
  /** No row, on a date the job's `exclude` names (old or recent): recorded skipped ('calendar'). */
  calendar: Date[];
  /** The anchor once the records above are written: every period at or before it has a row. */
  through: number;
}

/** The periods a sweep looks at: the ranges to read rows for. */
export interface PeriodsToCheck {
  /** Older than catchUp, oldest first. */
  old: Date[];
  /** Within catchUp, oldest first. */
  recent: Date[];
  /** More old periods than MISSED_PER_SWEEP: the next sweep goes on from the last one. */
  truncated: boolean;
  /** More recent periods than RECENT_PER_SWEEP: the latest due period is not among them. */
  recentTruncated?: boolean;
}

export function periodsToCheck(job: Job, w: ReconcileWindow): PeriodsToCheck {
  const missedBound = w.now - job.catchUpMs - 1;
  // A sharded job's period is up to `shards` rows: the bounds are on rows, not periods.
  const shards = job.shards ?? 1;
  const missedLimit = Math.max(1, Math.floor(MISSED_PER_SWEEP / shards));
  const recentLimit = Math.max(1, Math.floor(RECENT_PER_SWEEP / shards));
  const old = w.fromExclusive < missedBound
    ? periodsAfter(job.schedule, new Date(w.fromExclusive), new Date(Math.min(missedBound, w.upTo)), missedLimit + 1)
    : [];
  const truncated = old.length > missedLimit;
  if (truncated) old.length = missedLimit;
  const recentFrom = Math.max(w.fromExclusive, missedBound);
  const recent = w.upTo > recentFrom ? periodsAfter(job.schedule, new Date(recentFrom), new Date(w.upTo), recentLimit + 1) : [];
  const recentTruncated = recent.length > recentLimit;
  if (recentTruncated) recent.length = recentLimit;
  return { old, recent, truncated, recentTruncated };
}

/** The row ranges of the periods to check; a period of a sharded job has rows when each of its `shards` has one. */
export function rangesOf(job: string, periods: { old: Date[]; recent: Date[] }, shards = 1): PeriodRange[] {
  return [periods.old, periods.recent].filter((p) => p.length > 0)
    .map((p) => ({ job, fromMs: p[0]!.getTime(), toMs: p[p.length - 1]!.getTime(), ...(shards > 1 ? { shards } : {}) }));
}

/** Pure: what to record and run, given which periods have rows. */
export function planReconcile(job: Job, w: ReconcileWindow, periods: PeriodsToCheck, withRows: Set<number>): ReconcilePlan {
  const has = (p: Date) => withRows.has(p.getTime());
  const excluded = (p: Date) => job.exclude !== undefined && job.exclude.excludedBy(p, job.timezone) !== null;
  const calendar: Date[] = [];
  const missed: Date[] = [];
  for (const p of periods.old) if (!has(p)) (excluded(p) ? calendar : missed).push(p);
  const missing: Date[] = [];
  for (const p of periods.recent) if (!has(p)) (excluded(p) ? calendar : missing).push(p);
  // The periods that could run: an excluded one is never the latest that coalescing keeps, with a
  // row or not (its row is a calendar skip the tick recorded, or a run forced by hand: neither
  // stands for the missed periods before it).
  let run: Date[] = missing;
  let coalesced: Date[] = [];
  if (job.coalesce && missing.length > 0) {
    const eligible = job.exclude !== undefined ? periods.recent.filter((p) => !excluded(p)) : periods.recent;
    const latest = eligible[eligible.length - 1]!;
    // Run only the latest missed period; when a later period has a row already (or is beyond this
    // sweep's share), none.
    run = has(latest) || periods.recentTruncated ? [] : [latest];
    coalesced = missing.filter((p) => !run.includes(p));
  }
  const recorded = new Set([...missed, ...coalesced, ...calendar].map((p) => p.getTime()));
  let through = w.fromExclusive;
  let complete = true;
  for (const p of [...periods.old, ...periods.recent]) {
    if (!has(p) && !recorded.has(p.getTime())) {
      complete = false;
      break;
    }
    through = p.getTime();
  }
  if (periods.truncated) through = periods.old[periods.old.length - 1]!.getTime();
  else if (complete && !periods.recentTruncated) through = Math.max(through, w.upTo);
  return { missed, coalesced, run, calendar, through };
}

/**
 * A paused job's plan (pure): nothing runs; the periods that would have run or been coalesced, and
 * the missed ones from the pause's instant on, are recorded skipped (paused) instead. Missed periods
 * from before the pause stay missed.
 */
export function pausePlan(plan: ReconcilePlan, pausedAt: number): ReconcilePlan & { paused: Date[] } {
  const missed = plan.missed.filter((p) => p.getTime() < pausedAt);
  const paused = [...plan.missed.filter((p) => p.getTime() >= pausedAt), ...plan.coalesced, ...plan.run].sort((a, b) => a.getTime() - b.getTime());
  return { ...plan, missed, coalesced: [], run: [], paused };
}

/**
 * The anchors of the jobs, read only: a job the cluster has never seen starts with its next period,
 * as a new Kubernetes CronJob does (`fresh: 'next'`, the daemon), or with the periods within its
 * catchUp (`fresh: 'catch-up'`, a run-once pass). A job with rows from before the jobs table existed
 * is anchored at its latest period.
 */
export async function anchors(runs: RunStore, jobStore: JobStore, jobs: Job[], now: Date, fresh: 'next' | 'catch-up'): Promise<Map<string, { through: number; known: boolean }>> {
  const known = await jobStore.get(jobs.map((j) => j.name));
  const out = new Map<string, { through: number; known: boolean }>();
  const unknown: Job[] = [];
  for (const job of jobs) {
    const through = known.get(job.name)?.reconciledThrough;
    if (through !== null && through !== undefined) out.set(job.name, { through, known: true });
    else unknown.push(job);
  }
  const latestOf = unknown.length > 0 ? await runs.latestPeriods(unknown.map((j) => j.name)) : new Map<string, number>();
  for (const job of unknown) {
    const latest = latestOf.get(job.name);
    const anchor = latest !== undefined ? Math.min(latest, now.getTime())
      : fresh === 'next' ? (latestPeriodAtOrBefore(job.schedule, now)?.getTime() ?? now.getTime())
        : now.getTime() - job.catchUpMs - 1;
    out.set(job.name, { through: anchor, known: false });
  }
  return out;
}

/**
 * What a sweep would do now, without writing anything (`run-once --dry-run`): the periods it would
 * run, record missed and coalesced.
 */
export async function previewReconcile(runs: RunStore, jobStore: JobStore, jobs: Job[], options: { upTo: Date; now: Date; fresh: 'next' | 'catch-up' }): Promise<Map<string, ReconcilePlan>> {
  const from = await anchors(runs, jobStore, jobs, options.now, options.fresh);
  const work = jobs.map((job) => {
    const w: ReconcileWindow = { fromExclusive: from.get(job.name)!.through, upTo: options.upTo.getTime(), now: options.now.getTime() };
    return { job, w, periods: periodsToCheck(job, w) };
  });
  const rows = await runs.rowsInRanges(work.flatMap(({ job, periods }) => rangesOf(job.name, periods, job.shards)));
  return new Map(work.map(({ job, w, periods }) => [job.name, planReconcile(job, w, periods, rows.get(job.name) ?? new Set())]));
}

export interface ReconcileOptions {
  /** Look at periods up to this instant (inclusive). */
  upTo: Date;
  now: Date;
  /** Trigger of the latest period when it is due now (a late tick): 'schedule'; otherwise 'catch-up'. */
  latestTrigger?: Trigger;
  /** Run the attempts the claimed periods make owed, too (the run-once pass). */
  followOwed?: boolean;
  /**
   * A job's periods to run that another live node will claim (the start-up catch-up of nodes started
   * together): recorded as planned, but not run here, and the job's anchor stays before them, so
   * that a later sweep looks at them again and runs what that node did not.
   */
  leave?: (job: Job, periods: Date[]) => boolean;
}

export interface ReconcileResult {
  /** One promise per job with periods to run: their results, oldest first. */
  ran: Promise<PeriodResult[]>[];
  missed: number;
  coalesced: number;
}

export class Reconciler {
  /** Per job: every period at or before this instant has a row (this node's view; the table's is a lower bound). */
  private readonly through = new Map<string, number>();
  private lastFlush = 0;
  private lastSeen = 0;
  /** Periods recorded missed by this node (each counted by one node only). */
  missedPeriods = 0;
  /** Jobs whose catch-up runs this node is going through now: not dispatched again meanwhile. */
  private readonly catchingUp = new Set<string>();
  /** Disabled jobs of this node: their anchors follow now, they are not declared seen. */
  private readonly idle = new Set<string>();
  /** Per job: the anchor as the jobs table has it from this node (declared, or last flushed). */
  private readonly flushed = new Map<string, number>();
  /** Per job: its first period after its anchor (`from`), for the schedule it was computed with. */
  private readonly firstAfter = new Map<string, { schedule: Schedule; from: number; next: number }>();
  /** Changes whenever an anchor moves or a job is declared, forgotten or caught up: what `quiet` depends on. */
  private changes = 0;
  /**
   * After a sweep over a list of jobs that found nothing to look at: the earliest first period after an
   * anchor among them. Until upTo reaches it, and while nothing changed, a sweep over the same jobs
   * has nothing to do (a node of 10,000 yearly jobs looks at none of them, every second).
   */
  private readonly quiet = new WeakMap<readonly Job[], { changes: number; until: number }>();

  constructor(
    private readonly runs: RunStore,
    private readonly jobs: JobStore,
    private readonly runner: PeriodRunner,
    private readonly nodeId: string,
    private readonly log: Logger,
    /** The store's clock as this node estimates it (epoch ms). */
    private readonly clock: () => number = Date.now,
    private readonly events: SchedulerObserver = noEvents,
  ) {}

  /**
   * Declares the jobs in the jobs table (new ones with their anchors) and takes up their anchors.
   * `disabled` jobs are not declared (a pending attempt of a job no node runs must end) but their
   * anchors follow now, so that enabling a job again does not record its disabled time as missed.
   */
  async declare(jobs: Job[], now: Date, fresh: 'next' | 'catch-up', disabled: Job[] = []): Promise<void> {
    for (const job of disabled) this.idle.add(job.name);
    if (jobs.length === 0) return;
    this.names = undefined;
    const from = await anchors(this.runs, this.jobs, jobs, now, fresh);
    const rows = await this.jobs.declare(jobs.map((j) => ({ name: j.name, reconciledThrough: from.get(j.name)!.through })));
    for (const job of jobs) {
      const stored = rows.get(job.name)?.reconciledThrough;
      const through = stored ?? from.get(job.name)!.through;
      this.through.set(job.name, Math.max(through, this.through.get(job.name) ?? -Infinity));
      this.changes++;
      if (stored !== null && stored !== undefined) this.flushed.set(job.name, stored);
    }
    this.lastFlush = Date.now();
    this.lastSeen = Date.now();
  }

  /**
   * Jobs this node no longer runs (removed or disabled by a reload): no longer written as seen by
   * this node, so that the cluster recognises them removed once no node has them.
   */
  forget(names: string[]): void {
    this.names = undefined;
    for (const name of names) {
      this.through.delete(name);
      this.flushed.delete(name);
      this.firstAfter.delete(name);
    }
    this.changes++;
  }

  /**
   * A job whose schedule changed (a reload): its anchor moves to `now`, so that the new schedule's
   * periods before the reload (in the reconcile margin behind now) are not run as catch-up.
   */
  restartAt(name: string, now: Date): void {
    if (this.through.has(name)) this.setThrough(name, now.getTime());
  }

  /**
   * One sweep over `jobs` (declared before): records what is missed or coalesced, starts the runs of
   * periods owed (in the background: their promises are returned), and moves the anchors.
   */
  async reconcile(jobs: Job[], options: ReconcileOptions): Promise<ReconcileResult> {
    const out: ReconcileResult = { ran: [], missed: 0, coalesced: 0 };
    const now = options.now.getTime();
    const upTo = options.upTo.getTime();
    // Per list of jobs: the daemon's sweeps go through a few lists in turn (see Scheduler's slices).
    const quiet = this.quiet.get(jobs);
    if (quiet && quiet.changes === this.changes && upTo < quiet.until) return out;
    const changes = this.changes;
    let earliest = Infinity;
    const work: Array<{ job: Job; w: ReconcileWindow; periods: PeriodsToCheck }> = [];
    for (const job of jobs) {
      const from = this.through.get(job.name);
      if (from === undefined || this.catchingUp.has(job.name)) continue;
      // Most jobs at most sweeps: no period between the anchor and upTo, so nothing to look at, and
      // the anchor may stay where it is (it says the same: every period at or before upTo has a row).
      const first = this.firstPeriodAfter(job, from);
      if (first > upTo) {
        earliest = Math.min(earliest, first);
        continue;
      }
      const w: ReconcileWindow = { fromExclusive: from, upTo, now };
      const periods = periodsToCheck(job, w);
      if (periods.old.length === 0 && periods.recent.length === 0) {
        this.setThrough(job.name, upTo);
        continue;
      }
      work.push({ job, w, periods });
    }
    if (work.length === 0) {
      if (changes === this.changes) this.quiet.set(jobs, { changes, until: earliest });
      return out;
    }
    const rows = await this.runs.rowsInRanges(work.flatMap(({ job, periods }) => rangesOf(job.name, periods, job.shards)));
    const plans = work.map(({ job, w, periods }) => ({ job, plan: planReconcile(job, w, periods, rows.get(job.name) ?? new Set()) }));
    // Pauses are read only when a period has no row (rare: the claims record paused periods
    // themselves), so the steady sweep costs no extra statement.
    const paused = plans.some(({ plan }) => plan.missed.length + plan.coalesced.length + plan.run.length > 0) ? await this.jobs.paused() : new Map<string, { pausedAt: number }>();
    const decided = plans.map(({ job, plan: planned }) => {
      const pause = paused.get(job.name);
      return { job, plan: pause ? pausePlan(planned, pause.pausedAt) : { ...planned, paused: [] } };
    });
    // The skipped periods of every job of the sweep in one call (statements of 500 rows), not a
    // statement per job and reason one after another: an overloaded cluster has thousands of jobs
    // with periods to record at each sweep, and a sweep that takes longer than a second makes the
    // next ones wait, while periods go unrecorded.
    const records = decided.flatMap(({ job, plan }) => (['paused', 'missed', 'coalesced', 'calendar'] as const).map((reason) => ({ job, reason, periods: plan[reason] })).filter((r) => r.periods.length > 0));
    let counts: number[];
    try {
      counts = await this.record(records);
    } catch (err) {
      this.log.warn({ jobs: records.length > 0 ? new Set(records.map((r) => r.job.name)).size : 0, err: { message: errorMessage(err) } }, 'could not record skipped periods; the next sweep tries again');
      // The jobs with nothing to record keep going: their anchors move, their catch-up runs.
      const recording = new Set(records.map((r) => r.job.name));
      for (const { job, plan } of decided) if (!recording.has(job.name)) this.settle(job, plan, upTo, options, out);
      return out;
    }
    for (const [n, { job, reason, periods }] of records.entries()) {
      const count = counts[n]!;
      if (count === 0) continue;
      const span = { from: periods[0]!.toISOString(), to: periods[periods.length - 1]!.toISOString() };
      if (reason === 'paused') this.log.info({ job: job.name, paused: count, ...span }, 'periods of a paused job recorded skipped (paused)');
      if (reason === 'calendar') {
        // The entries that exclude them, as the tick's line names its one ('calendar:uk-bank-holidays').
        const by = [...new Set(periods.map((p) => job.exclude?.excludedBy(p, job.timezone) ?? null).filter((e) => e !== null))];
        this.log.info({ job: job.name, calendar: count, ...span, excludedBy: by.join(', ') }, "periods on dates the job's exclude names recorded skipped (calendar)");
      }
      if (reason === 'missed') {
        out.missed += count;
        this.missedPeriods += count;
        this.log.warn({ job: job.name, missed: count, first: span.from, last: span.to, catchUpMs: job.catchUpMs }, 'periods older than catchUp were run by no node: recorded skipped (missed)');
      }
      if (reason === 'coalesced') {
        out.coalesced += count;
        this.log.info({ job: job.name, coalesced: count, ...span }, 'missed periods coalesced into the latest');
      }
    }
    for (const { job, plan } of decided) this.settle(job, plan, upTo, options, out);
    return out;
  }

  /** After its skipped periods are recorded: the job's anchor moves, and its catch-up runs start. */
  private settle(job: Job, plan: ReconcilePlan, upTo: number, options: ReconcileOptions, out: ReconcileResult): void {
    if (plan.run.length > 0 && options.leave?.(job, plan.run)) {
      this.setThrough(job.name, Math.min(plan.through, plan.run[0]!.getTime() - 1));
      return;
    }
    this.setThrough(job.name, plan.through);
    if (plan.run.length > 0) out.ran.push(this.runInOrder(job, plan.run, upTo, options));
  }

  /**
   * Periods of one job run one after the other (oldest first), as catch-up. A period that must wait
   * for another period's live run (overlap 'skip') ends the chain; the next sweep finds it again.
   */
  private async runInOrder(job: Job, periods: Date[], upTo: number, options: ReconcileOptions): Promise<PeriodResult[]> {
    this.catchingUp.add(job.name);
    this.changes++;
    const results: PeriodResult[] = [];
    const latestDue = latestPeriodAtOrBefore(job.schedule, new Date(upTo))?.getTime();
    try {
      for (const p of periods) {
        // Removed by a reload meanwhile: no more of its periods.
        if (!this.through.has(job.name)) break;
        const trigger = p.getTime() === latestDue && options.latestTrigger ? options.latestTrigger : 'catch-up';
        const r = await this.runner.runPeriod(job, p, trigger, { followOwed: options.followOwed });
        results.push(r);
        if (r.claim === 'blocked-overlap' || r.claim === 'in-hand' || r.claim === 'error' || r.claim === 'stopped') break;
      }
    } finally {
      this.catchingUp.delete(job.name);
      this.changes++;
    }
    return results;
  }

  /**
   * Records skipped periods of several jobs in one call; per record, how many rows it inserted (rows
   * another node recorded or ran first are not counted, so a missed period is counted once).
   */
  private async record(records: Array<{ job: Job; reason: SkipReason; periods: Date[] }>): Promise<number[]> {
    if (records.length === 0) return [];
    // Every shard of a sharded period: those that have a row already keep it (and are not counted).
    const owner: number[] = [];
    const rows = records.flatMap(({ job, reason, periods }, n) => periods.flatMap((p) => Array.from({ length: job.shards ?? 1 }, (_, shard) => {
      owner.push(n);
      return { job: job.name, scheduledAt: p, periodKey: periodKey(job.name, p), trigger: 'catch-up' as const, nodeId: this.nodeId, reason, shard };
    })));
    const inserted = await this.runs.insertSkippedEach(rows);
    const counts = records.map(() => 0);
    inserted.forEach((yes, i) => {
      if (yes) counts[owner[i]!]! += 1;
    });
    for (const [n, { job, reason, periods }] of records.entries()) {
      if (counts[n]! > 0) this.events.emit({ type: 'skipped', job: job.name, reason, count: counts[n]!, first: periods[0]!, last: periods[periods.length - 1]! });
    }
    return counts;
  }

  /** The first period of `job` after `from` (epoch ms; Infinity when there is none), kept until the anchor or the schedule changes. */
  private firstPeriodAfter(job: Job, from: number): number {
    const kept = this.firstAfter.get(job.name);
    if (kept && kept.from === from && kept.schedule === job.schedule) return kept.next;
    const next = nextPeriodAfter(job.schedule, new Date(from))?.getTime() ?? Infinity;
    this.firstAfter.set(job.name, { schedule: job.schedule, from, next });
    return next;
  }

  /**
   * The names of the jobs this node marks seen at each flush, as one array kept until the jobs change
   * (the store may keep what it makes of it: with 10,000 jobs, a flush every 10 s made it anew).
   */
  private seenNames(): string[] {
    if (!this.names || this.names.length !== this.through.size) this.names = [...this.through.keys()];
    return this.names;
  }

  private names: string[] | undefined;

  /** Moves a known anchor forward; a job forgotten meanwhile (a reload removed it during a sweep) stays forgotten. */
  private setThrough(job: string, through: number): void {
    const known = this.through.get(job);
    if (known !== undefined && through > known) {
      this.through.set(job, through);
      this.changes++;
    }
  }

  /**
   * Writes this node's anchors to the jobs table (never moving one back), and every SEEN_EVERY_MS
   * marks its jobs as still defined on a live node. At most every FLUSH_EVERY_MS unless forced. Only
   * the anchors that moved since they were last written are written (a job between two periods has
   * none to write); every job is marked seen when the marks are due, or forced.
   */
  async flush(force = false): Promise<void> {
    if (!force && Date.now() - this.lastFlush < FLUSH_EVERY_MS) return;
    this.lastFlush = Date.now();
    const seenDue = force || Date.now() - this.lastSeen >= SEEN_EVERY_MS;
    if (seenDue) this.lastSeen = Date.now();
    // Disabled jobs' anchors move with the store's clock, not this node's.
    const now = this.clock();
    const changed = new Map<string, number>();
    for (const [name, through] of this.through) if (this.flushed.get(name) !== through) changed.set(name, through);
    const moved = [...changed];
    for (const name of this.idle) if (!this.through.has(name)) changed.set(name, now);
    await this.jobs.advance(changed, seenDue ? this.seenNames() : []);
    // A job forgotten meanwhile (a reload) is not remembered again.
    for (const [name, through] of moved) if (this.through.has(name)) this.flushed.set(name, through);
  }
}
