/**
 * A period from claim to its last attempt, and catch-up of periods that have no row yet. Shared by
 * the daemon's tick loop and by the `run-once` pass, so both follow one set of rules.
 */
import { errorMessage } from '../errors.js';
import type { Claimer, ClaimResult } from '../claim/claim.js';
import type { Job, Trigger } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { RunStore } from '../store/types.js';
import { periodKey, periodsBetween } from '../time/schedule.js';
import type { AttemptResult, Executor } from './execute.js';

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
  /** The attempt to claim first (a takeover claims attempt n + 1 of a period). Default 1. */
  firstAttempt?: number;
  /** Record the period 'skipped' (overlap) when the job has a live run elsewhere. Default: overlap 'skip' and attempt 1. */
  checkOverlap?: boolean;
  /**
   * Keep trying the lock for this long when it is held (a takeover: the dead holder's key may outlive
   * its row lease by a little clock drift). Default 0: a tick's race is lost at once.
   */
  lockWaitMs?: number;
  /** The first attempt's body starts no earlier than this (a period claimed ahead of its instant). */
  notBefore?: Date;
}

export interface CatchUpOptions {
  /** Periods after this instant are considered (older than catchUp ones are counted as missed). */
  fromExclusive?: Date;
  /** Trigger of the latest due period: 'schedule' on a regular tick, 'catch-up' otherwise. */
  latestTrigger: Trigger;
}

export interface CatchUpResult {
  ran: PeriodResult[];
  coalesced: number;
  missed: number;
}

const MAX_RETRY_DELAY_MS = 3_600_000;

export class PeriodRunner {
  private stopped = false;
  private readonly sleepers = new Set<() => void>();
  /** Periods older than catchUp that no node ran, since start. */
  missedPeriods = 0;

  constructor(
    private readonly store: RunStore,
    private readonly claimer: Claimer,
    private readonly executor: Executor,
    private readonly nodeId: string,
    private readonly log: Logger,
  ) {}

  /** No new claims or retries after this; pending retry delays end at once. */
  stop(): void {
    this.stopped = true;
    for (const wake of this.sleepers) wake();
  }

  /** Claims a period and runs it, with its retries. Never throws. */
  async runPeriod(job: Job, scheduledAt: Date, trigger: Trigger, options: RunPeriodOptions = {}): Promise<PeriodResult> {
    const key = periodKey(job.name, scheduledAt);
    const result: PeriodResult = { job: job.name, periodKey: key, scheduledAt, claim: 'stopped', attempts: [] };
    const firstAttempt = options.firstAttempt ?? 1;
    const checkOverlap = options.checkOverlap ?? (job.overlap === 'skip' && firstAttempt === 1);
    let attempt = firstAttempt;
    const claimStarted = Date.now();
    for (;;) {
      if (this.stopped) return result;
      let claim: ClaimResult;
      try {
        claim = await this.claimer.claim({ job, scheduledAt, trigger, attempt, checkOverlap: checkOverlap && attempt === firstAttempt });
      } catch (err) {
        this.log.error({ job: job.name, periodKey: key, attempt, err: { message: errorMessage(err) } }, 'claim failed');
        if (result.attempts.length === 0) {
          result.claim = 'error';
          result.error = errorMessage(err);
        }
        return result;
      }
      if (claim.outcome === 'lost-lock' && options.lockWaitMs && Date.now() - claimStarted < options.lockWaitMs) {
        await this.sleep(200);
        continue;
      }
      if (result.attempts.length === 0) result.claim = claim.outcome;
      if (claim.outcome !== 'won') {
        if (claim.outcome === 'skipped-overlap') {
          this.log.info({ job: job.name, periodKey: key, runningPeriod: claim.running?.periodKey }, 'period skipped: an earlier run of the job is in flight (overlap: skip)');
        } else {
          this.log.debug({ job: job.name, periodKey: key, attempt, outcome: claim.outcome }, 'period not claimed');
        }
        return result;
      }
      const outcome = await this.executor.execute(job, claim.run, claim.lease, claim.release, attempt === firstAttempt ? options.notBefore : undefined);
      result.attempts.push(outcome);
      const retriable = outcome.status === 'failed' || outcome.status === 'timed_out';
      if (!retriable || attempt > job.retries || this.stopped) return result;
      const delay = Math.min(job.retryDelayMs * 2 ** (attempt - 1), MAX_RETRY_DELAY_MS);
      this.log.info({ job: job.name, periodKey: key, attempt: attempt + 1, delayMs: delay }, 'retry scheduled');
      await this.sleep(delay);
      attempt += 1;
    }
  }

  /**
   * Periods within catchUp that have no row: with coalesce, the latest runs and the others are
   * recorded skipped ('coalesced'); without, all run in order. Older ones are logged and counted.
   */
  async catchUp(job: Job, now: Date, options: CatchUpOptions): Promise<CatchUpResult> {
    const out: CatchUpResult = { ran: [], coalesced: 0, missed: 0 };
    const windowStart = new Date(now.getTime() - job.catchUpMs - 1);
    try {
      if (options.fromExclusive && options.fromExclusive < windowStart) {
        out.missed = await this.countMissed(job, options.fromExclusive, windowStart);
      }
      const from = options.fromExclusive && options.fromExclusive > windowStart ? options.fromExclusive : windowStart;
      const due = periodsBetween(job.schedule, from, now);
      if (due.length === 0) return out;
      const latest = due[due.length - 1]!;
      const withRows = await this.store.periodsWithRows(job.name, due[0]!.getTime(), latest.getTime());
      const missing = due.filter((p) => !withRows.has(p.getTime()));
      if (missing.length === 0) return out;
      let toRun = missing;
      if (job.coalesce) {
        const latestMissing = withRows.has(latest.getTime()) ? [] : [latest];
        const skipped = missing.filter((p) => p !== latest || latestMissing.length === 0);
        if (skipped.length > 0 && !this.stopped) {
          await this.store.insertSkipped(skipped.map((p) => ({
            job: job.name, scheduledAt: p, periodKey: periodKey(job.name, p), trigger: 'catch-up' as const,
            nodeId: this.nodeId, reason: 'coalesced' as const,
          })));
          out.coalesced = skipped.length;
          this.log.info({ job: job.name, coalesced: skipped.length, from: skipped[0]!.toISOString(), to: skipped[skipped.length - 1]!.toISOString() }, 'missed periods coalesced into the latest');
        }
        toRun = latestMissing;
      }
      for (const p of toRun) {
        const trigger = p === latest ? options.latestTrigger : 'catch-up';
        out.ran.push(await this.runPeriod(job, p, trigger));
      }
    } catch (err) {
      this.log.error({ job: job.name, err: { message: errorMessage(err) } }, 'catch-up failed');
    }
    return out;
  }

  /** Periods in (from, to] that have no row: they fell older than catchUp while no node ran them. */
  private async countMissed(job: Job, fromExclusive: Date, toInclusive: Date): Promise<number> {
    const periods = periodsBetween(job.schedule, fromExclusive, toInclusive, 100_000);
    if (periods.length === 0) return 0;
    const withRows = await this.store.periodsWithRows(job.name, periods[0]!.getTime(), periods[periods.length - 1]!.getTime());
    const missed = periods.filter((p) => !withRows.has(p.getTime()));
    if (missed.length > 0) {
      this.missedPeriods += missed.length;
      this.log.warn({
        job: job.name, missed: missed.length, first: missed[0]!.toISOString(), last: missed[missed.length - 1]!.toISOString(), catchUpMs: job.catchUpMs,
      }, 'periods older than catchUp were not run by any node and will not be');
    }
    return missed.length;
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
