/**
 * Takeover of attempts whose node stopped heartbeating (crash, kill -9, a pause past the lease): one
 * node declares the attempt abandoned by compare-and-set on the row (leases judged by the store's
 * clock), then claims attempt + 1 of the same period through the same lock-then-row path. A period
 * that has abandoned MAX_ABANDONED attempts is recorded failed instead: a job that crashes its node
 * must not crash the whole cluster node by node.
 */
import { errorMessage } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { RunStore } from '../store/types.js';
import type { PeriodResult, PeriodRunner } from './period.js';

export const MAX_ABANDONED = 3;

export class Takeover {
  constructor(
    private readonly store: RunStore,
    private readonly runner: PeriodRunner,
    private readonly log: Logger,
  ) {}

  /**
   * One sweep: declares stale attempts of the given jobs abandoned and starts their next attempts.
   * Returns the takeover runs as promises (they run in the background).
   */
  async sweep(jobs: Map<string, Job>, options: { restart?: boolean } = {}): Promise<Promise<PeriodResult>[]> {
    const started: Promise<PeriodResult>[] = [];
    const stale = await this.store.staleRuns();
    for (const run of stale) {
      const job = jobs.get(run.job);
      if (!job) continue; // a job this node does not know (another version's): leave it to the nodes that do
      const attempts = await this.store.periodRuns(run.job, run.scheduledAt, run.shard);
      const abandonedBefore = attempts.filter((a) => a.status === 'abandoned' && a.attempt < run.attempt).length;
      const giveUp = abandonedBefore + 1 >= MAX_ABANDONED;
      const status = giveUp ? 'failed' : 'abandoned';
      const reason = giveUp
        ? `abandoned ${abandonedBefore + 1} attempts (each node stopped heartbeating); no further takeover`
        : `lease expired: node ${run.nodeId} stopped heartbeating`;
      if (!(await this.store.abandonRun(run.id, status, reason))) continue;
      const log = this.log.child({ job: run.job, periodKey: run.periodKey, attempt: run.attempt, deadNode: run.nodeId });
      if (giveUp) {
        log.error({ abandoned: abandonedBefore + 1 }, 'period failed: too many abandoned attempts');
        continue;
      }
      if (options.restart === false) {
        log.warn('attempt abandoned (lease expired)');
        continue;
      }
      log.warn('attempt abandoned (lease expired): taking over with the next attempt');
      started.push(this.runner.runPeriod(job, run.scheduledAt, run.trigger, { firstAttempt: run.attempt + 1, checkOverlap: false, lockWaitMs: job.lockTtlMs }));
    }
    return started;
  }

  /** sweep() that logs instead of throwing; null when the store could not be read. */
  async safeSweep(jobs: Map<string, Job>): Promise<Promise<PeriodResult>[] | null> {
    try {
      return await this.sweep(jobs);
    } catch (err) {
      this.log.warn({ err: { message: errorMessage(err) } }, 'takeover sweep failed');
      return null;
    }
  }
}
