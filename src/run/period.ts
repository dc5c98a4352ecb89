/**
 * A period's attempt from claim to its recorded end: attempt 1 of a period (a tick, a catch-up, a
 * manual run), or an owed attempt (a pending row). Shared by the daemon and the `run-once` pass, so
 * both follow one set of rules. What is owed after an attempt lives in the store (a pending row);
 * `followOwed` makes this process wait for and run it too (the `run-once` pass, which has no sweep).
 */
import { createHash } from 'node:crypto';
import { errorMessage } from '../errors.js';
import { neverBeaten, type Claimer, type ClaimResult, type OverlapCheck } from '../claim/claim.js';
import type { Job, Trigger } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { RunRecord, RunStore } from '../store/types.js';
import { periodKey } from '../time/schedule.js';
import { jitterDelayMs } from '../time/jitter.js';
import type { AttemptResult, Executor } from './execute.js';
import { noEvents, type ClaimOutcome, type SchedulerObserver } from '../events/events.js';

const CLAIM_OUTCOME: Record<ClaimResult['outcome'], ClaimOutcome | null> = {
  won: 'won', 'lost-lock': 'lost_lock', 'lost-row': 'lost_row', 'skipped-overlap': 'skipped', 'blocked-overlap': 'blocked', 'in-hand': null,
  'skipped-paused': 'skipped', paused: null, 'skipped-calendar': 'skipped',
};

export interface PeriodResult {
  job: string;
  periodKey: string;
  scheduledAt: Date;
  /** The shard (a sharded job's result of one shard); absent on an unsharded job's and on a whole sharded period's result. */
  shard?: number;
  /** A sharded period: each shard's result (the fields above combine them: the attempts of all, the claim most telling of them). */
  shards?: PeriodResult[];
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
  /** Run even on a date the job's `exclude` names (`run-once <job> [--period ISO] --force`). */
  ignoreCalendar?: boolean;
  /** A sharded job: only these shards, each at its attempt (a manual run of a period). Default: every shard, at `attempt`. */
  shards?: Array<{ index: number; attempt: number }>;
  /**
   * Called once, as soon as the first attempt's claim has an outcome (before its body runs): a run
   * by hand over HTTP answers then, and the audit trail records it. A sharded period: once every
   * shard's claim has one, with the most telling (CLAIM_RANK).
   */
  onClaimed?: (outcome: PeriodResult['claim']) => void;
}

/**
 * How long a node that won a shard of a period leaves the period's other shards to the other nodes
 * before it claims those still free: a claim lost to another node costs one Redis round trip, so
 * 150 ms is ample for every node woken at the same tick to win a shard of its own first.
 */
export const SHARD_SPREAD_MS = 150;
/**
 * How long a period's start waits, at most, for an earlier run that still looks live to be seen
 * ended before the period is skipped for overlap (see overlapAtStart), and how often it reads again.
 */
export const OVERLAP_SETTLE_MS = 1000;
const OVERLAP_RECHECK_MS = 200;
/** After the spread, the free shards are claimed this many at once (a lone node with 1000 shards). */
const SHARD_CLAIMS_AT_ONCE = 8;

/** Of the shards' claim outcomes, the one a sharded period's result reports (the first found in this order). */
const CLAIM_RANK: Array<PeriodResult['claim']> = ['error', 'stopped', 'blocked-overlap', 'in-hand', 'won', 'skipped-calendar', 'skipped-paused', 'paused', 'skipped-overlap', 'lost-row', 'lost-lock'];

/** Where a node starts in a period's shards: derived from its id and the period, so that nodes start apart. */
export function firstShard(nodeId: string, key: string, count: number): number {
  return createHash('sha256').update(`${nodeId}|${key}`).digest().readUInt32BE(0) % count;
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

  /** How long this node's oldest claim in progress has waited (see Claimer.oldestClaimAgeMs). */
  claimsBehindMs(): number {
    return this.claimer.oldestClaimAgeMs();
  }

  /** The slowest row claim of the last 30 s (see Claimer.recentSlowestClaimMs). */
  recentSlowestClaimMs(): number {
    return this.claimer.recentSlowestClaimMs();
  }

  /** No new claims after this; waits for owed attempts end at once. */
  stop(): void {
    this.stopped = true;
    for (const wake of this.sleepers) wake();
  }

  /**
   * Claims an attempt of a period by inserting its row, and runs it. Never throws. A sharded job's
   * period is claimed shard by shard (see runShards).
   */
  async runPeriod(job: Job, scheduledAt: Date, trigger: Trigger, options: RunPeriodOptions = {}): Promise<PeriodResult> {
    const attempt = options.attempt ?? 1;
    // jitter: a period's first attempt (scheduled or caught up, not a manual run) starts no earlier
    // than its instant + the delay its key derives; the claim (and so the row, the key and the
    // missed/catchUp judgement) stays at the instant.
    const jitter = trigger === 'manual' || trigger === 'backfill' || attempt > 1 ? 0 : jitterDelayMs(periodKey(job.name, scheduledAt), job.jitterMs ?? 0);
    const notBefore = jitter > 0 ? new Date(Math.max(options.notBefore?.getTime() ?? 0, scheduledAt.getTime() + jitter)) : options.notBefore;
    const opts = { ...options, notBefore };
    // At most once, whichever comes first: the claim's outcome, or the result (a claim that threw).
    let told = options.onClaimed === undefined;
    const tell = (outcome: PeriodResult['claim']) => {
      if (told) return;
      told = true;
      options.onClaimed!(outcome);
    };
    const run = (job.shards ?? 1) > 1 || options.shards ? this.runShards(job, scheduledAt, trigger, opts, tell) : this.runShard(job, scheduledAt, trigger, opts, 0, attempt, tell);
    if (told) return run;
    return run.then((r) => {
      tell(r.claim);
      return r;
    });
  }

  private runShard(job: Job, scheduledAt: Date, trigger: Trigger, options: RunPeriodOptions, shard: number, attempt: number, onClaim?: (outcome: PeriodResult['claim']) => void): Promise<PeriodResult> {
    const check: OverlapCheck = job.overlap === 'allow' ? 'none' : (options.checkOverlap ?? (trigger === 'schedule' ? 'tick' : 'wait'));
    // A tick's claim ahead of the body's start judges an earlier live run again at the start (see overlapAtStart).
    const deferOverlap = check === 'tick' && options.notBefore !== undefined;
    return this.attempts(job, scheduledAt, attempt, trigger, options, () => this.claimer.claim({ job, scheduledAt, trigger, attempt, checkOverlap: check, ignorePause: options.ignorePause, ignoreCalendar: options.ignoreCalendar, shard, deferOverlap }), shard, onClaim);
  }

  /**
   * A sharded period: each shard is claimed and run like a period of its own (its row, attempts,
   * overlap and pause). Spread across nodes: each node claims one shard at once, starting at a shard
   * derived from its id and the period and going on to the next while it loses; once it has won one,
   * it leaves the rest to the other nodes for SHARD_SPREAD_MS, then claims those still free. A lone
   * node so runs every shard, and three nodes on four shards each win one before any wins two. A
   * manual run (a period no other node knows) claims every shard at once. A caught-up period claims
   * only the shards that have no row yet.
   */
  private async runShards(job: Job, scheduledAt: Date, trigger: Trigger, options: RunPeriodOptions, onClaimed?: (outcome: PeriodResult['claim']) => void): Promise<PeriodResult> {
    const key = periodKey(job.name, scheduledAt);
    const count = job.shards ?? 1;
    let todo = options.shards ?? Array.from({ length: count }, (_, index) => ({ index, attempt: options.attempt ?? 1 }));
    if (trigger === 'catch-up' && !options.shards) {
      try {
        const have = await this.store.periodShards(job.name, scheduledAt);
        todo = todo.filter((s) => !have.has(s.index));
      } catch (err) {
        this.log.error({ job: job.name, periodKey: key, err: { message: errorMessage(err) } }, 'claim failed');
        return { job: job.name, periodKey: key, scheduledAt, claim: 'error', attempts: [], error: errorMessage(err), shards: [] };
      }
    }
    const runs: Array<Promise<PeriodResult>> = [];
    const outcomes: Array<PeriodResult['claim']> = [];
    // Starts a shard's claim and run; resolves with the claim's outcome (the run goes on).
    const start = async (s: { index: number; attempt: number }): Promise<PeriodResult['claim']> => {
      let claimed: (o: PeriodResult['claim']) => void = () => {};
      const outcome = new Promise<PeriodResult['claim']>((resolve) => (claimed = resolve));
      const run = this.runShard(job, scheduledAt, trigger, options, s.index, s.attempt, claimed);
      runs.push(run);
      const o = await Promise.race([outcome, run.then((r) => r.claim)]);
      outcomes.push(o);
      return o;
    };
    const lanes = async (list: Array<{ index: number; attempt: number }>) => {
      let next = 0;
      await Promise.all(Array.from({ length: Math.min(SHARD_CLAIMS_AT_ONCE, list.length) }, async () => {
        while (next < list.length && !this.stopped) await start(list[next++]!);
      }));
    };
    if (trigger === 'manual') {
      await lanes(todo);
      if (outcomes.length > 0) onClaimed?.(CLAIM_RANK.find((c) => outcomes.includes(c)) ?? 'lost-row');
    } else if (todo.length > 0) {
      const first = firstShard(this.claimer.nodeId, key, todo.length);
      const order = [...todo.slice(first), ...todo.slice(0, first)];
      let i = 0;
      let won = false;
      while (i < order.length && !won && !this.stopped) {
        const outcome = await start(order[i++]!);
        if (outcome === 'error' || outcome === 'stopped') break;
        won = outcome === 'won';
      }
      if (won && i < order.length) {
        await this.sleep(SHARD_SPREAD_MS);
        await lanes(order.slice(i));
      }
    }
    const shards = (await Promise.all(runs)).sort((a, b) => (a.shard ?? 0) - (b.shard ?? 0));
    const claim = CLAIM_RANK.find((c) => shards.some((r) => r.claim === c)) ?? (this.stopped ? 'stopped' : 'lost-row');
    const error = shards.find((r) => r.error)?.error;
    return { job: job.name, periodKey: key, scheduledAt, claim, attempts: shards.flatMap((r) => r.attempts), shards, ...(error ? { error } : {}) };
  }

  /** Claims an owed (pending) attempt by compare-and-set, and runs it. Never throws. */
  async runPending(job: Job, pending: RunRecord, options: Pick<RunPeriodOptions, 'followOwed'> = {}): Promise<PeriodResult> {
    return this.attempts(job, pending.scheduledAt, pending.attempt, pending.trigger, options, () => this.claimer.claimPending(job, pending), pending.shard);
  }

  private async attempts(job: Job, scheduledAt: Date, attempt: number, trigger: Trigger, options: RunPeriodOptions, claimFirst: () => Promise<ClaimResult>, shard = 0, onClaim?: (outcome: PeriodResult['claim']) => void): Promise<PeriodResult> {
    const key = periodKey(job.name, scheduledAt);
    const result: PeriodResult = { job: job.name, periodKey: key, scheduledAt, claim: 'stopped', attempts: [], ...((job.shards ?? 1) > 1 ? { shard } : {}) };
    try {
      return await this.attemptsOf(job, scheduledAt, attempt, trigger, options, claimFirst, shard, result, onClaim);
    } finally {
      onClaim?.(result.claim);
    }
  }

  private async attemptsOf(job: Job, scheduledAt: Date, attempt: number, trigger: Trigger, options: RunPeriodOptions, claimFirst: () => Promise<ClaimResult>, shard: number, result: PeriodResult, onClaim?: (outcome: PeriodResult['claim']) => void): Promise<PeriodResult> {
    const key = result.periodKey;
    const where = { job: job.name, periodKey: key, ...(result.shard !== undefined ? { shard } : {}) };
    let claimNext = claimFirst;
    for (let n = attempt; ; ) {
      if (this.stopped) return result;
      let claim: ClaimResult;
      const ref = { job: job.name, periodKey: key, scheduledAt, attempt: n, trigger };
      try {
        claim = await claimNext();
      } catch (err) {
        this.events.emit({ type: 'claim', ...ref, outcome: 'error' });
        this.log.error({ ...where, attempt: n, err: { message: errorMessage(err) } }, 'claim failed');
        if (result.attempts.length === 0) {
          result.claim = 'error';
          result.error = errorMessage(err);
          onClaim?.('error');
        }
        return result;
      }
      if (result.attempts.length === 0) {
        result.claim = claim.outcome;
        onClaim?.(claim.outcome);
      }
      const counted = CLAIM_OUTCOME[claim.outcome];
      // A claim whose overlap is judged at the start is counted then (won, or skipped).
      if (counted && !(claim.outcome === 'won' && claim.overlapWith)) this.events.emit({ type: 'claim', ...ref, outcome: counted });
      if (claim.outcome === 'skipped-overlap') this.events.emit({ type: 'skipped', job: job.name, reason: 'overlap', count: 1, first: scheduledAt, last: scheduledAt });
      if (claim.outcome === 'skipped-paused') this.events.emit({ type: 'skipped', job: job.name, reason: 'paused', count: 1, first: scheduledAt, last: scheduledAt });
      if (claim.outcome === 'skipped-calendar') this.events.emit({ type: 'skipped', job: job.name, reason: 'calendar', count: 1, first: scheduledAt, last: scheduledAt });
      if (claim.outcome !== 'won') {
        if (claim.outcome === 'skipped-calendar') {
          this.log.info({ ...where, excludedBy: claim.excludedBy }, 'period skipped: its date is excluded');
        } else if (claim.outcome === 'skipped-paused') {
          this.log.info({ ...where, reason: claim.pausedReason }, 'period skipped: the job is paused');
        } else if (claim.outcome === 'skipped-overlap') {
          this.log.info({ ...where, runningPeriod: claim.running?.periodKey }, 'period skipped: another run of the job is in flight (overlap: skip)');
        } else {
          this.log.debug({ ...where, attempt: n, outcome: claim.outcome }, 'attempt not claimed');
        }
        return result;
      }
      const notBefore = n === attempt ? options.notBefore : undefined;
      const startCheck = claim.overlapWith ? this.overlapAtStart(job, claim.run, claim.overlapWith, ref) : undefined;
      const outcome = await this.executor.execute(job, claim.run, claim.lease, claim.release, notBefore, claim.sentAt, { ignorePause: options.ignorePause, startCheck });
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

  /**
   * A tick's claim made ahead of its start found an earlier period's run live beside its INSERT (it
   * may have answered after the start, under load). Overlap 'skip' means "a body of the job is still
   * running at this period's start", and a row that says running is not always proof of that: an
   * outcome is written after its body ends, batched with others, and under load the write lags the
   * body by a second or more (at a cold start of 2,000 every-second jobs, 1,812 periods were skipped
   * behind bodies that had ended 0.5-1.5 s before). So at the start each earlier live run is judged:
   * - this node's: its body has ended (Executor.bodyEnded): no overlap; it is still held: running;
   * - another node's that its holder has beaten since its claim (a body that has run for lockTtl / 3):
   *   running;
   * - else (another node's young row, or one of this node's it no longer holds): not known. The live
   *   runs are read again every OVERLAP_RECHECK_MS while one is not known, for at most
   *   OVERLAP_SETTLE_MS, and the period starts (late) once none is left.
   * A run known to be running, or one still not known at the end, skips the period; two bodies of
   * the job never run at once either way. A read that fails counts as still running: the claim saw
   * it live.
   */
  private overlapAtStart(job: Job, run: RunRecord, seen: RunRecord, ref: { job: string; periodKey: string; scheduledAt: Date; attempt: number; trigger: Trigger }): () => Promise<RunRecord | null> {
    const judge = (r: RunRecord): 'ended' | 'running' | 'unknown' => {
      if (r.nodeId === this.claimer.nodeId) return this.executor.bodyEnded(r.id) ? 'ended' : this.executor.holds(r.id) ? 'running' : 'unknown';
      return neverBeaten(r) ? 'unknown' : 'running';
    };
    /** The run that skips the period now (running), one to wait for (unknown), or none. */
    const verdict = (live: RunRecord[]): { running?: RunRecord; unknown?: RunRecord } => {
      const judged = live.map((r) => ({ r, j: judge(r) }));
      return { running: judged.find((x) => x.j === 'running')?.r, unknown: judged.find((x) => x.j === 'unknown')?.r };
    };
    return async () => {
      const until = performance.now() + OVERLAP_SETTLE_MS;
      let v = verdict([seen]);
      while (!v.running && v.unknown && !this.stopped) {
        const live = await this.claimer.earlierLiveRuns(job, run).catch((err: unknown) => {
          this.log.warn({ job: job.name, periodKey: run.periodKey, err: { message: errorMessage(err) } }, 'overlap not read again at the start: the earlier run counts as still running');
          return undefined;
        });
        if (live === undefined) break;
        v = verdict(live);
        if (v.running || !v.unknown || performance.now() >= until) break;
        await this.sleep(Math.min(OVERLAP_RECHECK_MS, Math.max(0, until - performance.now())));
      }
      const running = v.running ?? v.unknown ?? null;
      this.events.emit({ type: 'claim', ...ref, outcome: running ? 'skipped' : 'won' });
      return running;
    };
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
