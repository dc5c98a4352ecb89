/**
 * The owed-work sweep, run by every node once a second (and by a `run-once` pass):
 *
 * 1. Takeover, whatever the job: a running attempt whose lease expired by the store's clock (its node
 *    crashed, or paused past its lease) is ended `abandoned` by compare-and-set, and attempt n + 1 is
 *    inserted `pending` in the same transaction (needing no job definition). When the job is defined
 *    on no live node (removed), nothing more is owed.
 * 2. Due pending attempts (retries, takeovers, interrupted runs) of the jobs this node has are
 *    claimed by compare-and-set behind the same lock-then-row rule, and run. A pending attempt of a
 *    job no live node defines is ended `abandoned`. Those of a paused job stay pending until `resume`.
 *
 * A job is "defined on a live node" when this node has it (enabled), or when a node declared it in
 * the jobs table within JOB_SEEN_TTL_MS (every node marks its enabled jobs seen every 30 s).
 */
import { StoreUnavailableError, errorMessage } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { JobStore, RunRecord, RunStore } from '../store/types.js';
import type { PeriodResult, PeriodRunner } from './period.js';
import type { InDoubtClaims } from '../claim/in-doubt.js';
import { noEvents, type SchedulerObserver } from '../events/events.js';

/** Three seen marks (every SEEN_EVERY_MS, see Reconciler's flush) missed in a row: no live node has the job. */
export const JOB_SEEN_TTL_MS = 90_000;

export interface SweepOptions {
  /** Judge leases (false just after the store came back: live runs have not heartbeated yet). */
  takeover?: boolean;
  /** Run the attempts the claimed ones make owed, too (the run-once pass). */
  followOwed?: boolean;
  /** Wait out the grace of stale attempts instead of leaving them to a later sweep (a run-once pass: see takeOverStale). */
  waitForGrace?: boolean;
}

/** The longest a run-once pass waits for the grace of a stale attempt (a lease can be set to hours). */
const MAX_GRACE_WAIT_MS = 120_000;

export class Takeover {
  constructor(
    private readonly runs: RunStore,
    private readonly jobStore: JobStore,
    private readonly runner: PeriodRunner,
    private readonly nodeId: string,
    private readonly log: Logger,
    private readonly events: SchedulerObserver = noEvents,
    /** Whether this node holds the attempt itself (its outcome still to be written): never taken over here. */
    private readonly holds: (runId: string) => boolean = () => false,
    /** This node's claims whose answer was lost, resolved at each sweep (see InDoubtClaims). */
    private readonly inDoubt?: InDoubtClaims,
  ) {}

  /**
   * One sweep over the node's enabled jobs. Returns the runs it started (in the background). Throws
   * when the store cannot be read.
   */
  async sweep(jobs: Map<string, Job>, options: SweepOptions = {}): Promise<Promise<PeriodResult>[]> {
    const started: Promise<PeriodResult>[] = [];
    if (options.takeover !== false) await this.takeOverStale(jobs, { waitForGrace: options.waitForGrace });
    // Before the due attempts are read: a row given back now is run by this very sweep.
    if (this.inDoubt && this.inDoubt.size > 0) await this.inDoubt.resolve(this.runs, this.nodeId, this.holds, this.log);
    const due = await this.runs.duePending();
    // Owed attempts of a paused job stay pending until `resume` (read only when something is due;
    // the claim reads the pause again, for a pause that lands meanwhile).
    const paused = due.some((p) => jobs.has(p.job)) ? await this.jobStore.paused() : new Map<string, unknown>();
    for (const pending of due) {
      const job = jobs.get(pending.job);
      if (job) {
        if (!paused.has(job.name)) started.push(this.runner.runPending(job, pending, { followOwed: options.followOwed }));
      } else await this.abandonIfUndefined(pending);
    }
    return started;
  }

  /**
   * Ends the stale running attempts (any job), owing the next attempt where a live node defines the job.
   *
   * The grace (Chubby's, after a master failover): an attempt is judged only by a node that has been
   * connected to the store for at least that attempt's lease since it last lost it. After an outage
   * of the store every node reconnects at about the same moment, the lease of every attempt has run
   * out by the store's clock, and a holder whose body finished meanwhile is writing its outcome: it
   * gets a whole lease to do so before anyone may declare its attempt abandoned. A node never judges
   * an attempt it holds itself. With `waitForGrace` (a short-lived run-once pass) the call waits out
   * the grace of the stale attempts it finds (up to MAX_GRACE_WAIT_MS) rather than leave them.
   */
  async takeOverStale(jobs: Map<string, Job>, { waitForGrace = false }: { waitForGrace?: boolean } = {}): Promise<void> {
    if (waitForGrace) {
      const held = (await this.runs.staleRuns()).filter((r) => !this.holds(r.id) && r.leaseMs > this.runs.connectedForMs());
      const waitMs = Math.min(MAX_GRACE_WAIT_MS, Math.max(0, ...held.map((r) => r.leaseMs)) - this.runs.connectedForMs());
      if (held.length > 0 && waitMs > 0) {
        this.log.info({ staleAttempts: held.length, waitMs: Math.ceil(waitMs) }, 'attempts whose lease ran out: waiting one lease after connecting before declaring them abandoned (their nodes may be writing their outcomes)');
        await new Promise((r) => setTimeout(r, waitMs + 50));
      }
    }
    for (const run of await this.runs.staleRuns(500, this.runs.connectedForMs())) {
      if (this.holds(run.id)) continue;
      const defined = jobs.has(run.job) || (await this.seenRecently(run.job));
      const reason = `lease expired: node ${run.nodeId} stopped heartbeating${defined ? '' : '; the job is defined on no live node'}`;
      const ended = await this.runs.takeOver(run, this.nodeId, reason, defined);
      if (!ended) continue;
      const log = this.log.child({ job: run.job, periodKey: run.periodKey, attempt: run.attempt, deadNode: run.nodeId });
      this.events.emit({
        type: 'takeover', job: run.job, periodKey: run.periodKey, scheduledAt: run.scheduledAt, ...(run.shard > 0 ? { shard: run.shard } : {}), attempt: run.attempt, deadNode: run.nodeId,
        result: ended.status === 'cancelled' ? 'cancelled' : ended.status === 'failed' ? 'failed' : ended.next ? 'owed' : 'dropped',
      });
      if (ended.status === 'cancelled') {
        // An operator had asked to cancel it: nothing is owed.
        log.warn('attempt cancelled (its cancel was asked before its node stopped heartbeating); nothing more is owed');
        continue;
      }
      if (ended.status === 'failed') log.error('period failed: too many attempts ended without an outcome');
      else if (ended.next) log.warn({ nextAttempt: ended.next.attempt }, 'attempt abandoned (lease expired): the next attempt is owed');
      else log.warn('attempt abandoned (lease expired); its job is defined on no live node, nothing more is owed');
    }
  }

  /** A pending attempt of a job this node does not run: left to the nodes that have it, abandoned once none does. */
  private async abandonIfUndefined(pending: RunRecord): Promise<void> {
    if (await this.seenRecently(pending.job)) return;
    const reason = 'owed attempt not run: the job is defined on no live node';
    if (await this.runs.abandonPending(pending.id, reason)) {
      this.log.warn({ job: pending.job, periodKey: pending.periodKey, attempt: pending.attempt }, reason);
    }
  }

  private async seenRecently(job: string): Promise<boolean> {
    const row = (await this.jobStore.get([job])).get(job);
    if (!row) return false;
    return (await this.runs.now()) - row.seenAt < JOB_SEEN_TTL_MS;
  }

  /** Why the last safeSweep() could not read the store (null when it could). */
  lastError: string | null = null;
  /** The last failure was this node's pool being full (load), not the store being away. */
  lastErrorBusy = false;

  /** sweep() that logs instead of throwing; null when the store could not be read. */
  async safeSweep(jobs: Map<string, Job>, options: SweepOptions = {}): Promise<Promise<PeriodResult>[] | null> {
    try {
      const started = await this.sweep(jobs, options);
      this.lastError = null;
      this.lastErrorBusy = false;
      return started;
    } catch (err) {
      this.lastError = errorMessage(err);
      this.lastErrorBusy = err instanceof StoreUnavailableError && err.busy;
      this.log.warn({ err: { message: errorMessage(err) } }, 'owed-work sweep failed');
      return null;
    }
  }
}
