/**
 * Keeping an attempt's lease while it runs: the Redlock extension and the row heartbeat, every third
 * of lockTtl, and self-fencing on the monotonic clock (one watchdog for every attempt in flight).
 * Split from the Executor, which asks it for one keeper per attempt.
 */
import { errorMessage, StoreUnavailableError } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { Lease } from '../claim/lock.js';
import type { RunRecord, RunStore } from '../store/types.js';
import { checkOnRead, monotonicMs } from './lease-proof.js';

/** How often the self-fencing watchdog looks at the attempts in flight. */
const FENCE_CHECK_MS = 100;

/** How long before the store's lease would run out a node stops trusting it: a quarter of it, 250 ms to 5 s. */
export function fenceMargin(lockTtlMs: number): number {
  return Math.min(5000, Math.max(250, Math.floor(lockTtlMs / 4)));
}

/** One attempt's keeping, as the Executor uses it. */
export interface KeptLease {
  /** A worker body's own fencing deadline (shared memory, monotonic ms), for a worker body only. */
  deadline: Float64Array | undefined;
  /** Aborted when the lease is lost (also after the body's own abort for another reason). */
  leaseGone: AbortSignal;
  /** The body has ended: a loss has nothing left to abort (the conditional outcome write says the rest). */
  bodyDone(): void;
  /** The outcome is written or given up: no more beats. */
  stop(): void;
}

export class LeaseKeeper {
  private readonly fences = new Set<() => void>();
  private fenceTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: RunStore,
    private readonly nodeId: string,
    /** Writes back a running row the store lost (a failover to a replica that lacked it). */
    private readonly restoreLostRow: (job: Job, run: RunRecord, log: Logger) => Promise<boolean>,
  ) {}

  /**
   * While the attempt runs: every third of lockTtl, extend the Redlock and write the row heartbeat
   * (store clock). A row that is no longer this attempt's, or a lock held by someone else, aborts
   * ctx.signal with 'lease-lost'. An unreachable Redis or store is not a loss by itself. An abort for
   * another reason (timeout, shutdown) does not stop the keeping: the body may still be being stopped
   * (a command's group gets killAfter), and the outcome is written after; a loss then aborts
   * `leaseGone` (the command's group is then killed at once, and nothing is written).
   */
  keep(job: Job, run: RunRecord, lease: Lease | null, controller: AbortController, log: Logger, claimSentAt: number): KeptLease {
    const every = Math.max(200, Math.floor(job.lockTtlMs / 3));
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    // After the body, a lost lease has nothing left to abort; the conditional outcome write says the rest.
    let bodyDone = false;
    // Self-fencing, on the monotonic clock: the send time of the last beat the store confirmed (the
    // claim, at first). The store's lease runs from a moment after it, so a node that aborts at
    // confirmed + lease - margin aborts before the store can give the lease to another node.
    let confirmedAt = claimSentAt;
    const fenceAfter = job.lockTtlMs - fenceMargin(job.lockTtlMs);
    // The same deadline for a worker body's own check of its signal, on the process-wide monotonic
    // clock (shared memory: made only for a worker body, the one reader of it).
    const deadline = job.isolation === 'worker' && !job.command ? new Float64Array(new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT)) : undefined;
    const share = () => {
      if (deadline) deadline[0] = monotonicMs() + (confirmedAt + fenceAfter - performance.now());
    };
    share();
    const gone = new AbortController();
    const lose = () => {
      gone.abort();
      if (!controller.signal.aborted) controller.abort('lease-lost');
    };
    const fence = () => {
      if (stopped || bodyDone || gone.signal.aborted) return;
      const silent = performance.now() - confirmedAt;
      if (silent <= fenceAfter) return;
      log.warn({ unconfirmedMs: Math.round(silent), lockTtlMs: job.lockTtlMs }, 'lease lost: no confirmed heartbeat for too long (self-fencing); aborting the run');
      lose();
    };
    this.fences.add(fence);
    this.armFences();
    // Reading the signal proves the lease then and there: after a process pause, a body timer due
    // before the watchdog's next check runs first, and its `signal.throwIfAborted()` must already fail.
    checkOnRead(controller.signal, fence);
    const beat = async () => {
      if (stopped || gone.signal.aborted) return;
      let next = every;
      const began = performance.now();
      try {
        const [lock, row] = await Promise.all([
          lease ? lease.extend(job.lockTtlMs) : Promise.resolve('ok' as const),
          // The row's answer confirms the lease as soon as it comes, whatever Redis takes to answer.
          this.store.heartbeat(run.id, this.nodeId, job.lockTtlMs, run).then((owned) => {
            if (owned && !stopped) {
              confirmedAt = Math.max(confirmedAt, began);
              share();
            }
            return owned;
          }, (err: unknown) => {
            if (err instanceof StoreUnavailableError) return 'unavailable' as const;
            throw err;
          }),
        ]);
        if (stopped) return;
        // The row is not this attempt's running row: taken over, or gone (a failover to a replica
        // that lacked it), in which case it is written back and the lease goes on under it.
        if (row === false && !bodyDone && lock !== 'lost' && (await this.restoreLostRow(job, run, log).catch(() => false))) {
          confirmedAt = Math.max(confirmedAt, began);
          share();
        } else if (row === false || lock === 'lost') {
          if (bodyDone) return;
          log.warn({ lock, rowOwned: row }, 'lease lost: aborting the run');
          lose();
          return;
        }
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
    // The first beat is due a third of the lease after the claim was sent (a slow claim beats sooner).
    timer = setTimeout(() => void beat(), Math.max(0, every - (performance.now() - claimSentAt)));
    timer.unref();
    return {
      deadline,
      leaseGone: gone.signal,
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
}
