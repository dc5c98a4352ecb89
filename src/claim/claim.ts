/**
 * The claim protocol: lock first (losers stop there, with no query to the store), then the row. The
 * row, not the lock, is the fence: a node that wins the lock but loses the row does not run the body.
 * With the Redis quorum unreachable, claims go on through the row alone.
 *
 * Two rows can be claimed: attempt 1 of a period is an INSERT under the unique key (the tick's fast
 * path); an owed attempt (a retry, a takeover, a resumed interrupted run) is a `pending` row, claimed
 * by compare-and-set. The lock key is per attempt, so a stale key of attempt n never blocks n + 1.
 *
 * Overlap 'skip' is checked for every attempt, in both directions (as Kubernetes' Forbid):
 * - a scheduled tick ('tick') inserts its row and, beside it, looks for a live run of an earlier
 *   period; if there is one, its row is recorded skipped (reason overlap). No extra round trip. A
 *   tick's claim made ahead of the body's start (`deferOverlap`) keeps its row instead, and the
 *   overlap is read again at the start (earlierLiveRuns): that run may end before it.
 * - a catch-up period and an owed attempt ('wait') first look for a live run of any other period of
 *   the job and, if there is one, wait (no row is written; a pending row stays pending). After
 *   claiming they look again for an earlier period's live run, so that of two claims racing, the
 *   earlier period runs and the later one is recorded skipped (or given back, if it was pending).
 *
 * Shards (`shards: N`): each shard of a period is claimed like a period of its own (its own row, lock
 * key and attempts); overlap 'skip' is per shard (shard i of a period waits for, or is skipped by, a
 * live run of shard i of an earlier period only).
 *
 * Pause (`pause <job>`, the jobs table) is read on the claim path too, beside the INSERT like the
 * tick's overlap check, so it costs the body no extra round trip. A paused job's inserted row is
 * recorded skipped (reason paused); a paused job's owed attempt is not claimed (it stays pending).
 * Why one read at the claim is enough for "every node honours a pause within one tick": every claim
 * path sends that read at or after its period's instant minus the claim-ahead (100 ms, at most
 * CLAIM_AHEAD_MAX_MS = 450 ms on a node whose claims are slow) by the node's estimate of the store's
 * clock (a tick claims only periods within the claim-ahead of now; catch-up and owed attempts are
 * claimed after their instant), and the store evaluates it after it was sent. A pause committed
 * before `pause` returned at P is therefore seen by the claim of every period later than P + the
 * claim-ahead (plus the estimate's error, under a millisecond on a LAN). A second read just before
 * the body of a period claimed ahead would narrow the claim-ahead to a round trip, but would put a round
 * trip back on the fire path; the bound asked for (one tick, 1 s) holds without it. A body that
 * waits longer than a tick after its claim (a jittered start) is another matter: the executor reads
 * the pause again 100 ms before that start, and a paused job's row is then recorded skipped (paused).
 *
 * A period on a date the job's `exclude` names (src/calendars/) is judged before the INSERT, with no
 * read (the job's predicate, resolved when it was loaded); the inserted row is then recorded skipped
 * (reason calendar) at once, before and instead of the pause and overlap checks, so that the skip is
 * recorded once cluster-wide under the unique row. `ignoreCalendar` (a run by hand with --force) runs it.
 */
import { LockUnavailableError, errorMessage } from '../errors.js';
import type { Job, Trigger } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { InsertResult, JobRecord, JobStore, NewRun, RunRecord, RunStore } from '../store/types.js';
import { batched } from '../batch/coalescer.js';
import { periodKey } from '../time/schedule.js';
import type { Lease, LockProvider } from './lock.js';
import { InDoubtClaims } from './in-doubt.js';

export type ClaimResult =
  /**
   * `sentAt`: when the statement that claimed the row was sent (monotonic ms); the store's lease runs from after it.
   * `overlapWith`: a claim with `deferOverlap` found an earlier period's run live; whether it still is
   * at the body's start decides (see earlierLiveRuns).
   */
  | { outcome: 'won'; run: RunRecord; lease: Lease | null; release: () => void; sentAt: number; overlapWith?: RunRecord }
  | { outcome: 'lost-lock' | 'lost-row' | 'skipped-overlap' | 'blocked-overlap' | 'in-hand'; running?: RunRecord }
  /** 'skipped-paused': the job is paused; the inserted row was recorded skipped (paused). 'paused': an owed attempt left pending. */
  | { outcome: 'skipped-paused' | 'paused'; pausedReason: string | null; running?: undefined }
  /** The period is on a date the job's `exclude` names: the inserted row was recorded skipped (calendar). `excludedBy`: the entry. */
  | { outcome: 'skipped-calendar'; excludedBy: string; running?: undefined };

/** How overlap 'skip' is checked (see above). */
export type OverlapCheck = 'none' | 'tick' | 'wait';

export interface ClaimRequest {
  job: Job;
  scheduledAt: Date;
  trigger: Trigger;
  attempt: number;
  checkOverlap: OverlapCheck;
  /** Run even when the job is paused (`run-once <job> --force`). */
  ignorePause?: boolean;
  /** Run even when the period is on a date the job's `exclude` names (`run-once <job> [--period ISO] --force`). */
  ignoreCalendar?: boolean;
  /** The shard of the period (default 0). */
  shard?: number;
  /**
   * A tick's claim made ahead of its body's start: an earlier period's live run found beside the
   * INSERT does not skip the period at once (that run may end before the start); the row is kept and
   * returned with `overlapWith`, and the overlap is judged again at the start (earlierLiveRuns).
   */
  deferOverlap?: boolean;
}

/** Where the claim reads whether a job is paused (the jobs table). */
export type PauseSource = Pick<JobStore, 'get'>;

/** Claims per batch of store calls (the store splits larger statements itself). */
const CLAIMS_PER_BATCH = 1000;
/** Batches of each kind in flight at once: later claims wait and go together (see Coalescer). */
const BATCHES_IN_FLIGHT = 1;

/** How far back the slowest claim is remembered (see recentSlowestClaimMs). */
const RECENT_CLAIMS_SECONDS = 30;

/** Not paused: the answer when there is no source or the claim ignores pauses. */
const NOT_PAUSED = Promise.resolve(null);

/** The Redlock resource of an attempt: `<job>@<ISO>` for attempt 1, `<job>@<ISO>#<n>` after. */
export function attemptLockKey(key: string, attempt: number): string {
  return attempt > 1 ? `${key}#${attempt}` : key;
}

/**
 * A shard of a period, as a claim names it (lock resource, in-process guard): the period key for
 * shard 0 (so an unsharded job's keys are what they always were), `<job>@<ISO>#s<i>` for the others.
 */
export function shardKey(key: string, shard: number): string {
  return shard > 0 ? `${key}#s${shard}` : key;
}

/** Live runs of the same shard of the job's other periods (only the earlier ones, with `earlierOnly`). */
function others(live: RunRecord[], key: string, scheduledAt: Date, earlierOnly: boolean, shard: number): RunRecord[] {
  return live.filter((r) => r.periodKey !== key && r.shard === shard && (!earlierOnly || r.scheduledAt.getTime() < scheduledAt.getTime()));
}

/**
 * A running row its holder has not beaten since its claim (its first beat comes a third of its lease
 * after it, 200 ms at least): it may have no body behind it (a claim in doubt).
 */
/**
 * A claim (its INSERT and the reads beside it) that took this long came through a store incident:
 * the never-beaten rows it meets may be claims in doubt (see claim()). Healthy claims take
 * milliseconds; a node behind under load, a few hundred.
 */
export const CLAIM_THROUGH_INCIDENT_MS = 2000;

export function neverBeaten(r: RunRecord): boolean {
  const claimed = (r.claimedAt ?? r.startedAt).getTime();
  return r.heartbeatAt === null || r.heartbeatAt.getTime() - claimed < 100;
}

export class Claimer {
  /** Periods this process is handling: it never races itself for them (guard ahead of Redis). */
  private readonly inHand = new Set<string>();
  /** Claims whose answer was lost (they may have committed): resolved by the sweep once the store answers. */
  readonly inDoubt = new InDoubtClaims();
  readonly nodeId: string;
  private lockDown = false;
  private pauseWarnedAt = -Infinity;
  /** Claims in progress (lock and row), by when each began (monotonic ms); a Map keeps the oldest first. */
  private readonly begun = new Map<number, number>();
  private claimSeq = 0;
  /** The slowest row claim that ended in each of the last seconds (monotonic second, ms). */
  private readonly slowest: Array<{ second: number; ms: number }> = [];
  /**
   * The claims of one turn of the event loop (a tick's periods, their lock answers arriving together)
   * reach the store together: their rows in one INSERT, their overlap checks in one read, their
   * pauses in one read, whatever the number of jobs.
   */
  private readonly insert = batched<NewRun, InsertResult>(CLAIMS_PER_BATCH, (runs) => this.store.insertRuns(runs), BATCHES_IN_FLIGHT);
  private readonly liveRuns = batched<{ job: string; leaseMs: number }, RunRecord[]>(CLAIMS_PER_BATCH, async (items) => {
    const live = await this.store.liveRunsOf([...new Set(items.map((i) => i.job))], Math.min(...items.map((i) => i.leaseMs)));
    return items.map((i) => live.get(i.job) ?? []);
  }, BATCHES_IN_FLIGHT);
  private readonly pauseRead = batched<string, JobRecord | undefined>(CLAIMS_PER_BATCH, async (names) => {
    const rows = await this.pauses!.get([...new Set(names)]);
    return names.map((n) => rows.get(n));
  }, BATCHES_IN_FLIGHT);

  constructor(
    private readonly store: RunStore,
    private readonly lock: LockProvider,
    nodeId: string,
    private readonly log: Logger,
    /** The jobs table, for pauses; none: nothing is ever paused (tests of the claim alone). */
    private readonly pauses?: PauseSource,
  ) {
    this.nodeId = nodeId;
  }

  /** The job's pause, or null when it is not paused (or the claim ignores pauses). */
  private pauseOf(job: string, ignore = false): Promise<{ reason: string | null } | null> {
    if (!this.pauses || ignore) return NOT_PAUSED;
    // A read that fails must not fail the claim: it goes out beside the INSERT, which may have won
    // the row already, and a won row with no one running it would wait for its lease to run out.
    return this.pauseRead(job).then((row) => {
      return row?.paused ? { reason: row.pausedReason } : null;
    }, (err: unknown) => {
      // Once every 30 s at most: while the store is away every claim meets it, and says so itself.
      const now = performance.now();
      const level = now - this.pauseWarnedAt >= 30_000 ? 'warn' : 'debug';
      if (level === 'warn') this.pauseWarnedAt = now;
      this.log[level]({ job, err: { message: errorMessage(err) } }, 'pause state not read: claiming as not paused');
      return null;
    });
  }

  /** The quorum could not be reached (at start): say so once; claims go through the row until it answers. */
  lockUnavailable(err: Error): void {
    if (this.lockDown) return;
    this.lockDown = true;
    this.log.warn({ err: { message: errorMessage(err) } }, 'Redis quorum unreachable: claims go on through the run row alone');
  }

  /**
   * How long the oldest claim still in progress has waited for its lock and row (0: none): the
   * node's own measure of being behind. A claim's round trips take milliseconds; one waiting for
   * a second means this node (its CPU, its pool, its store) cannot keep up with its ticks.
   */
  oldestClaimAgeMs(): number {
    for (const began of this.begun.values()) return performance.now() - began;
    return 0;
  }

  /**
   * The slowest row claim (lock, INSERT and the reads beside it) that ended in the last 30 s: how far
   * ahead of their instant this node's ticks must claim for the bodies to start on time.
   */
  recentSlowestClaimMs(): number {
    const second = Math.floor(performance.now() / 1000);
    let most = 0;
    for (const b of this.slowest) if (b.second > second - RECENT_CLAIMS_SECONDS) most = Math.max(most, b.ms);
    return most;
  }

  private noteClaimTime(ms: number): void {
    const second = Math.floor(performance.now() / 1000);
    const last = this.slowest.at(-1);
    if (last?.second === second) last.ms = Math.max(last.ms, ms);
    else this.slowest.push({ second, ms });
    while (this.slowest.length > 0 && this.slowest[0]!.second <= second - RECENT_CLAIMS_SECONDS) this.slowest.shift();
  }

  isInHand(key: string, shard = 0): boolean {
    return this.inHand.has(shardKey(key, shard));
  }

  /** Claims attempt `attempt` of a period by inserting its row. */
  claim(req: ClaimRequest): Promise<ClaimResult> {
    const { job, scheduledAt, trigger, attempt, checkOverlap: check, ignorePause } = req;
    const shard = req.shard ?? 0;
    const key = periodKey(job.name, scheduledAt);
    // A pure check, no round trip: the skip is recorded on the row once it is ours, so once cluster-wide.
    const excludedBy = req.ignoreCalendar || !job.exclude ? null : job.exclude.excludedBy(scheduledAt, job.timezone);
    return this.guarded(shardKey(key, shard), attempt, job.lockTtlMs, async () => {
      const ttl = job.lockTtlMs;
      if (check === 'wait') {
        const live = others(await this.liveRuns({ job: job.name, leaseMs: ttl }), key, scheduledAt, false, shard);
        if (live.length > 0) return { outcome: 'blocked-overlap', running: live[0] };
      }
      // The tick's overlap check and the pause go out beside the INSERT (one round trip on the path to
      // the body, not two).
      const sentAt = performance.now();
      const doubt = { job: job.name, scheduledAt, periodKey: key, shard, attempt };
      const insert = this.insert({ job: job.name, scheduledAt, periodKey: key, attempt, trigger, nodeId: this.nodeId, leaseMs: ttl, shard }).catch((err: unknown) => {
        this.inDoubt.note(doubt, err);
        throw err;
      });
      try {
        const [inserted, live, paused] = await Promise.all([
          insert,
          check !== 'none' && excludedBy === null ? this.liveRuns({ job: job.name, leaseMs: ttl }) : Promise.resolve([]),
          this.pauseOf(job.name, ignorePause || excludedBy !== null),
        ]);
        if (inserted.outcome === 'duplicate') return { outcome: 'lost-row' };
        // On an excluded date the period would not run paused or not: the calendar is the reason recorded.
        if (excludedBy !== null) {
          await this.store.endAttempt(inserted.run, this.nodeId, { status: 'skipped', reason: 'calendar' }, null);
          return { outcome: 'skipped-calendar', excludedBy };
        }
        // The row is ours: the pause is recorded on it, so that the period is skipped once, cluster-wide.
        if (paused) {
          await this.store.endAttempt(inserted.run, this.nodeId, { status: 'skipped', reason: 'paused' }, null);
          return { outcome: 'skipped-paused', pausedReason: paused.reason };
        }
        // Only a live run of an EARLIER period blocks now, so that two periods claimed at the same moment
        // cannot skip each other. The row is ours already: the skip is recorded on it (coalesced with
        // the node's other outcomes: under load, skips come by the hundred).
        const earlier = others(live, key, scheduledAt, true, shard);
        // A catch-up, or a claim that took CLAIM_THROUGH_INCIDENT_MS or more (it came through a store
        // incident: a failover, a cut), meeting only rows their holders have not beaten since their
        // claim: such a row may be another node's claim in doubt (its answer lost as the store went
        // away: no body behind it), which that node gives back once its store answers. It proves no
        // body runs, so this period is not skipped because of it: its row is given back pending, and
        // the owed-work sweep claims it once no earlier run is live (it waits behind a body that does
        // run): late, not never. Seen on Galera: a node killed, two periods skipped, first as
        // catch-ups, then as ticks whose claims answered 5 s late, after the failover.
        const throughIncident = trigger === 'catch-up' || performance.now() - sentAt >= CLAIM_THROUGH_INCIDENT_MS;
        if (earlier.length > 0 && req.deferOverlap && !(throughIncident && earlier.every(neverBeaten))) return { outcome: 'won', run: inserted.run, sentAt, overlapWith: earlier[0] };
        if (earlier.length > 0 && throughIncident && earlier.every(neverBeaten)) {
          await this.store.releasePending(inserted.run.id, this.nodeId);
          return { outcome: 'blocked-overlap', running: earlier[0] };
        }
        if (earlier.length > 0) {
          await this.store.endAttempt(inserted.run, this.nodeId, { status: 'skipped', reason: 'overlap' }, null);
          return { outcome: 'skipped-overlap', running: earlier[0] };
        }
        return { outcome: 'won', run: inserted.run, sentAt };
      } catch (err) {
        // The INSERT may answer after a read beside it failed: wait for it, to know whether the row is ours.
        const ours = await insert.then((r) => r.outcome === 'inserted', () => false);
        // Our row committed, but the claim failed after it (a read beside the INSERT, the skip written
        // after it): a running row with no body, which would look live for a whole lease (later
        // periods of an overlap 'skip' job skipped because of it). Given back once the store answers.
        if (ours) this.inDoubt.committed(doubt);
        throw err;
      }
    }, true);
  }

  /**
   * The live runs of earlier periods of `run`'s job (the same shard), oldest first: the overlap check
   * of a claim made with `deferOverlap`, again at the body's start (the reads of one moment in one statement).
   */
  async earlierLiveRuns(job: Job, run: RunRecord): Promise<RunRecord[]> {
    const live = await this.liveRuns({ job: job.name, leaseMs: job.lockTtlMs });
    return others(live, run.periodKey, run.scheduledAt, true, run.shard);
  }

  /**
   * Claims an owed (pending) attempt by compare-and-set. With overlap 'skip', it waits (stays pending)
   * while another period of the job has a live run.
   */
  claimPending(job: Job, pending: RunRecord, options: { ignorePause?: boolean } = {}): Promise<ClaimResult> {
    const skip = job.overlap === 'skip';
    const { periodKey: key, scheduledAt, shard } = pending;
    return this.guarded(shardKey(key, shard), pending.attempt, job.lockTtlMs, async () => {
      const ttl = job.lockTtlMs;
      // A paused job's owed attempt stays pending (no write at all): it runs after `resume`.
      const [before, pausedBefore] = await Promise.all([skip ? this.liveRuns({ job: job.name, leaseMs: ttl }) : Promise.resolve([]), this.pauseOf(job.name, options.ignorePause)]);
      if (pausedBefore) return { outcome: 'paused', pausedReason: pausedBefore.reason };
      const live = others(before, key, scheduledAt, false, shard);
      if (live.length > 0) return { outcome: 'blocked-overlap', running: live[0] };
      const sentAt = performance.now();
      const doubt = { job: job.name, scheduledAt, periodKey: key, shard, attempt: pending.attempt };
      const run = await this.store.claimPending(pending.id, this.nodeId, ttl).catch((err: unknown) => {
        this.inDoubt.note(doubt, err);
        throw err;
      });
      if (!run) return { outcome: 'lost-row' };
      try {
        // With overlap 'skip', again after the compare-and-set, beside the overlap check (no extra round
        // trip): a pause that landed meanwhile gives the attempt back.
        const [after, pausedAfter] = skip
          ? await Promise.all([this.liveRuns({ job: job.name, leaseMs: ttl }), this.pauseOf(job.name, options.ignorePause)])
          : [[], null];
        if (pausedAfter) {
          await this.store.releasePending(run.id, this.nodeId);
          return { outcome: 'paused', pausedReason: pausedAfter.reason };
        }
        const earlier = others(after, key, scheduledAt, true, shard);
        if (earlier.length > 0) {
          await this.store.releasePending(run.id, this.nodeId);
          return { outcome: 'blocked-overlap', running: earlier[0] };
        }
        return { outcome: 'won', run, sentAt };
      } catch (err) {
        // Claimed, but the reads after it or the give-back failed: a running row of ours with no body.
        this.inDoubt.committed(doubt);
        throw err;
      }
    });
  }

  /** The in-process guard and the lock around a row claim; the lock is let go unless the claim won. */
  private async guarded(key: string, attempt: number, ttlMs: number, claimRow: () => Promise<ClaimResult | { outcome: 'won'; run: RunRecord; sentAt: number; overlapWith?: RunRecord }>, inserting = false): Promise<ClaimResult> {
    if (this.inHand.has(key)) return { outcome: 'in-hand' };
    this.inHand.add(key);
    const seq = ++this.claimSeq;
    this.begun.set(seq, performance.now());
    let lease: Lease | null = null;
    let won = false;
    let settled = false;
    try {
      try {
        lease = await this.lock.tryAcquire(attemptLockKey(key, attempt), ttlMs);
        // An answer, won or lost, is the quorum's: a node that loses every race knows it is back too.
        if (this.lockDown) {
          this.lockDown = false;
          this.log.info('Redis quorum is back: claims use Redlock again');
        }
        if (lease === null) return { outcome: 'lost-lock' };
      } catch (err) {
        if (!(err instanceof LockUnavailableError)) throw err;
        if (err.splitVote) {
          this.log.debug({ periodKey: key }, 'Redlock split votes: the run row decides this period');
        } else {
          this.lockUnavailable(err);
        }
      }
      const result = await claimRow();
      // An inserted row exists (another's, or ours recorded skipped): nothing will claim this attempt's
      // key again, so it is left to expire rather than released (no further command for a lost
      // period). Not so for an owed attempt whose compare-and-set found it not yet due by the store's
      // clock: it is claimed again with this key.
      settled = inserting && (result.outcome === 'lost-row' || result.outcome === 'skipped-overlap' || result.outcome === 'skipped-paused' || result.outcome === 'skipped-calendar');
      if (result.outcome !== 'won') return result;
      won = true;
      return { ...result, lease, release: () => this.inHand.delete(key) };
    } finally {
      if (inserting) this.noteClaimTime(performance.now() - this.begun.get(seq)!);
      this.begun.delete(seq);
      if (!won) {
        this.inHand.delete(key);
        // Released when the attempt may be claimed again with the same key (it waits for an overlap
        // or a pause, or the store failed): this node's own key would otherwise refuse it.
        if (lease && !settled) await lease.release();
        else lease?.settle();
      }
    }
  }
}
