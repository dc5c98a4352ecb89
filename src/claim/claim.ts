/**
 * The claim protocol: lock first (losers stop there, with no query to the store), then the run row
 * under its unique key. The row, not the lock, is the fence: a node that wins the lock but loses the
 * insert does not run the body. With the Redis quorum unreachable, claims go on through the row alone.
 * With overlap 'skip', the winner of the row records it skipped when an earlier period's run is live.
 */
import { LockUnavailableError, errorMessage } from '../errors.js';
import type { Job, Trigger } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { RunRecord, RunStore } from '../store/types.js';
import { periodKey } from '../time/schedule.js';
import type { Lease, LockProvider } from './lock.js';

export type ClaimResult =
  | { outcome: 'won'; run: RunRecord; lease: Lease | null; release: () => void }
  | { outcome: 'lost-lock' | 'lost-row' | 'skipped-overlap' | 'in-hand'; running?: RunRecord };

export interface ClaimRequest {
  job: Job;
  scheduledAt: Date;
  trigger: Trigger;
  attempt: number;
  /** Check the cluster for a run of this job in flight first (overlap 'skip'). */
  checkOverlap: boolean;
}

export class Claimer {
  /** Periods this process is handling: it never races itself for them (guard ahead of Redis). */
  private readonly inHand = new Set<string>();
  private lockDown = false;

  constructor(
    private readonly store: RunStore,
    private readonly lock: LockProvider,
    private readonly nodeId: string,
    private readonly log: Logger,
  ) {}

  isInHand(key: string): boolean {
    return this.inHand.has(key);
  }

  async claim(req: ClaimRequest): Promise<ClaimResult> {
    const { job, scheduledAt, trigger, attempt } = req;
    const key = periodKey(job.name, scheduledAt);
    if (this.inHand.has(key)) return { outcome: 'in-hand' };
    this.inHand.add(key);
    let lease: Lease | null = null;
    let won = false;
    try {
      try {
        lease = await this.lock.tryAcquire(key, job.lockTtlMs);
        if (lease === null) return { outcome: 'lost-lock' };
        if (this.lockDown) {
          this.lockDown = false;
          this.log.info('Redis quorum is back: claims use Redlock again');
        }
      } catch (err) {
        if (!(err instanceof LockUnavailableError)) throw err;
        if (err.splitVote) {
          this.log.debug({ periodKey: key }, 'Redlock split votes: the run row decides this period');
        } else if (!this.lockDown) {
          this.lockDown = true;
          this.log.warn({ err: { message: errorMessage(err) } }, 'Redis quorum unreachable: claims go on through the run row alone');
        }
      }

      // The overlap check goes out beside the INSERT (one round trip on the path to the body, not two).
      const [inserted, live] = await Promise.all([
        this.store.insertRun({ job: job.name, scheduledAt, periodKey: key, attempt, trigger, nodeId: this.nodeId, leaseMs: job.lockTtlMs }),
        req.checkOverlap ? this.store.liveRuns(job.name) : Promise.resolve([]),
      ]);
      if (inserted.outcome === 'duplicate') return { outcome: 'lost-row' };
      // Only a live run of an EARLIER period blocks this one, so that two periods claimed at the same
      // moment cannot skip each other. The row is ours already: the skip is recorded on it.
      const earlier = live.filter((r) => r.periodKey !== key && r.scheduledAt.getTime() < scheduledAt.getTime());
      if (earlier.length > 0) {
        await this.store.finishRun(inserted.run.id, this.nodeId, { status: 'skipped', reason: 'overlap' });
        return { outcome: 'skipped-overlap', running: earlier[0] };
      }
      won = true;
      return { outcome: 'won', run: inserted.run, lease, release: () => this.inHand.delete(key) };
    } finally {
      if (!won) {
        this.inHand.delete(key);
        if (lease) await lease.release();
      }
    }
  }
}
