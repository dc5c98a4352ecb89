/**
 * A period's attempt from claim to its recorded end: attempt 1 of a period (a tick, a catch-up, a
 * manual run), or an owed attempt (a pending row). Shared by the daemon and the `run-once` pass, so
 * both follow one set of rules. What is owed after an attempt lives in the store (a pending row);
 * `followOwed` makes this process wait for and run it too (the `run-once` pass, which has no sweep).
 */
import { errorMessage } from '../errors.js';
import type { Claimer, ClaimResult, OverlapCheck } from '../claim/claim.js';
import type { Job, Trigger } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { RunRecord, RunStore } from '../store/types.js';
import { periodKey } from '../time/schedule.js';
import { jitterDelayMs } from '../time/jitter.js';
import type { AttemptResult, Executor } from './execute.js';
import { noEvents, type ClaimOutcome, type SchedulerObserver } from '../events/events.js';

const CLAIM_OUTCOME: Record<ClaimResult['outcome'], ClaimOutcome | null> = {
  won: 'won', 'lost-lock': 'lost_lock', 'lost-row': 'lost_row', 'skipped-overlap': 'skipped', 'blocked-overlap': 'blocked', 'in-hand': null,
  'skipped-paused': 'skipped', paused: null,
};

export interface PeriodResult {
  job: string;
  periodKey: string;
  scheduledAt: Date;
  /** How the claim of the first attempt ended; 'error' when the store failed while claiming. */
  claim: ClaimResult['outcome'] | 'error' | 'stopped';
  attempts: AttemptResult[];
  error?: string;
}

export interface RunPeriodOptions {
  /** The attempt to insert (a manual run of a period that has attempts already). Default 1. */
  attempt?: number;
  /** Overlap check of the claim (see Claimer). Default, for overlap 'skip': 'tick' for a scheduled period, 'wait' otherwise. */
  checkOverlap?: OverlapCheck;
  /** The first attempt's body starts no earlier than this (a period claimed ahead of its instant). */
  notBefore?: Date;
  /** Wait for and run the attempts this one makes owed (retries), as long as they are not claimed elsewhere. */
  followOwed?: boolean;
  /** Run even when the job is paused, the owed attempts followed too (`run-once <job> --force`). */
  ignorePause?: boolean;
}

export class PeriodRunner {
  private stopped = false;
  private readonly sleepers = new Set<() => void>();

  constructor(
    private readonly store: RunStore,
    private readonly claimer: Claimer,
    private readonly executor: Executor,
    private readonly log: Logger,
    private readonly events: SchedulerObserver = noEvents,
  ) {}

  /** No new claims after this; waits for owed attempts end at once. */
  stop(): void {
    this.stopped = true;
    for (const wake of this.sleepers) wake();
  }

  /** Claims an attempt of a period by inserting its row, and runs it. Never throws. */
  async runPeriod(job: Job, scheduledAt: Date, trigger: Trigger, options: RunPeriodOptions = {}): Promise<PeriodResult> {
    const attempt = options.attempt ?? 1;
    const check: OverlapCheck = job.overlap === 'allow' ? 'none' : (options.checkOverlap ?? (trigger === 'schedule' ? 'tick' : 'wait'));
    // jitter: a period's first attempt (scheduled or caught up, not a manual run) starts no earlier
    // than its instant + the delay its key derives; the claim (and so the row, the key and the
    // missed/catchUp judgement) stays at the instant.
    const jitter = trigger === 'manual' || attempt > 1 ? 0 : jitterDelayMs(periodKey(job.name, scheduledAt), job.jitterMs ?? 0);
    const notBefore = jitter > 0 ? new Date(Math.max(options.notBefore?.getTime() ?? 0, scheduledAt.getTime() + jitter)) : options.notBefore;
    return this.attempts(job, scheduledAt, attempt, trigger, { ...options, notBefore }, () => this.claimer.claim({ job, scheduledAt, trigger, attempt, checkOverlap: check, ignorePause: options.ignorePause }));
  }

  /** Claims an owed (pending) attempt by compare-and-set, and runs it. Never throws. */
  async runPending(job: Job, pending: RunRecord, options: Pick<RunPeriodOptions, 'followOwed'> = {}): Promise<PeriodResult> {
    return this.attempts(job, pending.scheduledAt, pending.attempt, pending.trigger, options, () => this.claimer.claimPending(job, pending));
  }

  private async attempts(job: Job, scheduledAt: Date, attempt: number, trigger: Trigger, options: RunPeriodOptions, claimFirst: () => Promise<ClaimResult>): Promise<PeriodResult> {
    const key = periodKey(job.name, scheduledAt);
    const result: PeriodResult = { job: job.name, periodKey: key, scheduledAt, claim: 'stopped', attempts: [] };
    let claimNext = claimFirst;
    for (let n = attempt; ; ) {
      if (this.stopped) return result;
      let claim: ClaimResult;
      const ref = { job: job.name, periodKey: key, scheduledAt, attempt: n, trigger };
      try {
        claim = await claimNext();
      } catch (err) {
        this.events.emit({ type: 'claim', ...ref, outcome: 'error' });
        this.log.error({ job: job.name, periodKey: key, attempt: n, err: { message: errorMessage(err) } }, 'claim failed');
        if (result.attempts.length === 0) {
          result.claim = 'error';
          result.error = errorMessage(err);
        }
        return result;
      }
      if (result.attempts.length === 0) result.claim = claim.outcome;
      const counted = CLAIM_OUTCOME[claim.outcome];
      if (counted) this.events.emit({ type: 'claim', ...ref, outcome: counted });
      if (claim.outcome === 'skipped-overlap') this.events.emit({ type: 'skipped', job: job.name, reason: 'overlap', count: 1, first: scheduledAt, last: scheduledAt });
      if (claim.outcome === 'skipped-paused') this.events.emit({ type: 'skipped', job: job.name, reason: 'paused', count: 1, first: scheduledAt, last: scheduledAt });
      if (claim.outcome !== 'won') {
        if (claim.outcome === 'skipped-paused') {
          this.log.info({ job: job.name, periodKey: key, reason: claim.pausedReason }, 'period skipped: the job is paused');
        } else if (claim.outcome === 'skipped-overlap') {
          this.log.info({ job: job.name, periodKey: key, runningPeriod: claim.running?.periodKey }, 'period skipped: another run of the job is in flight (overlap: skip)');
        } else {
          this.log.debug({ job: job.name, periodKey: key, attempt: n, outcome: claim.outcome }, 'attempt not claimed');
        }
        return result;
      }
      const outcome = await this.executor.execute(job, claim.run, claim.lease, claim.release, n === attempt ? options.notBefore : undefined, claim.sentAt);
      result.attempts.push(outcome);
      const next = outcome.next;
      if (!options.followOwed || !next || this.stopped) return result;
      // Wait until it is due by the store's clock, then claim it like any node would.
      const due = (next.runAt?.getTime() ?? 0) - (await this.store.now().catch(() => Date.now()));
      if (due > 0) await this.sleep(due);
      n = next.attempt;
      claimNext = () => this.claimer.claimPending(job, next, { ignorePause: options.ignorePause });
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }
}
