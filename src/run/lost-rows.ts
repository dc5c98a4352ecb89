/**
 * Rows the store lost (a failover to an asynchronous replica that had not received them), found and
 * written back by the node that holds their outcome.
 *
 * An attempt in flight finds out by itself (its heartbeat or outcome write matches nothing:
 * restoreInFlight). An attempt already written would be lost silently, so the outcomes written lately
 * are kept (SettledLedger) and, when the store may have moved (it answered again after an outage, the
 * writer host changed, a lost row was found), read back and written again where the store lacks them
 * (verify). Either way a row is taken back only where no other attempt's body can be behind it.
 */
import { errorMessage, StoreUnavailableError } from '../errors.js';
import type { Logger } from '../log.js';
import type { RetryPolicy, RunOutcome, RunRecord, RunStore } from '../store/types.js';
import type { SchedulerObserver } from '../events/events.js';
import { SettledLedger, type SettledAttempt } from './settled.js';

/** An attempt of a period, as a key (job, instant, shard, attempt). */
function attemptOf(run: Pick<RunRecord, 'job' | 'scheduledAt' | 'shard'>, attempt: number): string {
  return `${run.job}\u0000${run.scheduledAt.getTime()}\u0000${run.shard}\u0000${attempt}`;
}

export class LostRows {
  /** The outcomes written lately, checked again when the store may have moved. */
  private readonly ledger = new SettledLedger();
  private verifying: Promise<void> | null = null;
  private verifyAgain: string | null = null;
  /** The reason of a read-back that failed (the store went away again during it): tried again at the next answer. */
  private verifyOwed: string | null = null;
  /** When the store last answered a sweep (monotonic). */
  private lastAnsweredAt: number | null = null;

  /** `holds(runId)`: whether the executor has that row's attempt in flight (its own write will land). */
  constructor(
    private readonly store: RunStore,
    private readonly nodeId: string,
    private readonly log: Logger,
    private readonly events: SchedulerObserver,
    private readonly holds: (runId: string) => boolean,
  ) {}

  /** An outcome just written: kept for a read-back. */
  remember(entry: SettledAttempt): void {
    this.ledger.add(entry);
  }

  /**
   * The store answered (a sweep went through). Outcomes older than the ledger's window before the
   * previous answer go: after an outage, or a pause of this process, of any length (a managed
   * failover takes 30-120 s), those written just before it are still there for the read-back that
   * follows. Nothing goes while a read-back runs or after one failed (it is tried again here).
   */
  storeAnswered(): void {
    const now = performance.now();
    if (this.verifyOwed !== null && !this.verifying) void this.verify(this.verifyOwed);
    if (!this.verifying && this.verifyOwed === null) this.ledger.prune(this.lastAnsweredAt ?? now);
    this.lastAnsweredAt = now;
  }

  /** How many written outcomes this node keeps for a write-back. */
  get kept(): number {
    return this.ledger.size;
  }

  /**
   * The store may have moved (it answered again after an outage, its writer host changed, a row of
   * this node's was found gone): reads back the periods of the outcomes written lately and writes
   * each one the store no longer has again, with its outcome. Resolves when that is done (a call
   * meanwhile runs once more after it); never throws.
   */
  verify(why: string): Promise<void> {
    if (this.verifying) {
      this.verifyAgain = why;
      return this.verifying;
    }
    this.verifying = (async () => {
      let reason: string | null = why;
      while (reason !== null) {
        this.verifyAgain = null;
        try {
          await this.writeBackLost(reason);
          this.verifyOwed = null;
        } catch (err) {
          this.verifyOwed = reason;
          this.log.warn({ err: { message: errorMessage(err) } }, 'could not read back the outcomes written before the store moved; trying again once it answers');
        }
        reason = this.verifyAgain;
      }
    })().finally(() => {
      this.verifying = null;
    });
    return this.verifying;
  }

  private async writeBackLost(why: string): Promise<void> {
    const entries = this.ledger.list().filter((e) => !e.settledElsewhere);
    if (entries.length === 0) return;
    // One range read per job (100 jobs a statement): the instants that still have a row.
    const spans = new Map<string, { fromMs: number; toMs: number }>();
    for (const e of entries) {
      const at = e.run.scheduledAt.getTime();
      const s = spans.get(e.run.job);
      if (!s) spans.set(e.run.job, { fromMs: at, toMs: at });
      else {
        s.fromMs = Math.min(s.fromMs, at);
        s.toMs = Math.max(s.toMs, at);
      }
    }
    // The instants with an outcome of this node's (of shard 0: a sharded job's other shards are read
    // exactly below). A row left running lost its outcome write: a candidate too.
    const withRows = await this.store.rowsInRanges([...spans].map(([job, s]) => ({ job, ...s, shards: 1, nodeId: this.nodeId, finalOnly: true })));
    const candidates = entries.filter((e) => e.run.shard !== 0 || !withRows.get(e.run.job)?.has(e.run.scheduledAt.getTime()));
    // The attempts this node holds an outcome of: an attempt whose next one is among them is written
    // back owing nothing (that next attempt's own outcome is written back too, not run again).
    const kept = new Set(entries.map((e) => attemptOf(e.run, e.run.attempt)));
    let lost = 0;
    let restored = 0;
    // Earlier attempts first, so that an attempt's row is back before its next attempt's.
    candidates.sort((a, b) => a.run.scheduledAt.getTime() - b.run.scheduledAt.getTime() || a.run.attempt - b.run.attempt);
    for (const e of candidates) {
      const outcome = await this.writeBack(e, kept.has(attemptOf(e.run, e.run.attempt + 1)));
      if (outcome !== 'present') lost++;
      if (outcome === 'restored') restored++;
    }
    this.log.info({ checked: entries.length, lost, restored, why }, lost > 0
      ? 'outcomes written before the store moved read back: some were lost and written again'
      : 'outcomes written before the store moved read back: none lost');
  }

  /**
   * The outcome of a written-back row: tried again while the store is unreachable (a row inserted
   * running and left so would look live for its lease and then be taken over and run again), for
   * half the job's lease at most; after that the takeover judges it as any row whose node went quiet.
   */
  private async endWrittenBack(row: RunRecord, outcome: () => RunOutcome, e: SettledAttempt, policy: RetryPolicy | null = e.policy): Promise<{ written: boolean }> {
    const until = performance.now() + e.leaseMs / 2;
    for (;;) {
      try {
        return await this.store.endAttempt(row, this.nodeId, outcome(), policy);
      } catch (err) {
        if (!(err instanceof StoreUnavailableError) || performance.now() > until) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** One kept outcome whose period showed no row: read exactly, and written again when it is gone. */
  private async writeBack(e: SettledAttempt, nextKept = false): Promise<'present' | 'restored' | 'elsewhere'> {
    const { run } = e;
    const rows = await this.store.periodRuns(run.job, run.scheduledAt, run.shard);
    const mine = rows.find((r) => r.attempt === run.attempt && r.nodeId === this.nodeId);
    if (mine && mine.status !== 'running' && mine.status !== 'pending') return 'present';
    // Held by this node in flight again (a retry of it): its own outcome write will land.
    if (mine && this.holds(mine.id)) return 'present';
    const log = this.log.child({ job: run.job, periodKey: run.periodKey, attempt: run.attempt, ...(run.shard > 0 ? { shard: run.shard } : {}) });
    const now = () => performance.now();
    const outcome = () => ({ ...e.outcome, bodyMsAgo: { started: now() - e.bodyStarted, ended: now() - e.bodyEnded } });
    if (mine?.status === 'running') {
      // The claim survived, the outcome did not: written again on the row (conditional on it still
      // being this node's and running, as every outcome write is).
      const ended = await this.endWrittenBack(mine, outcome, e, nextKept ? null : e.policy);
      if (ended.written) {
        log.error({ runId: mine.id, status: e.outcome.status },
          'the store lost this finished attempt\'s outcome (most likely a failover to a replica that had not received it: asynchronous replication); its outcome written back by this node');
        e.run = { ...e.run, id: mine.id };
        this.events.emit({ type: 'row-lost', job: run.job, periodKey: run.periodKey, scheduledAt: run.scheduledAt, ...(run.shard > 0 ? { shard: run.shard } : {}), attempt: run.attempt, runId: run.id, restored: true });
        return 'restored';
      }
      return 'present';
    }
    let back: RunRecord | null = null;
    const taken = await this.takeBackRow(run, e.leaseMs, rows, true);
    if (taken) {
      // Inserted beside a later attempt's row (the next attempt, owed by this outcome, written back
      // by its own node first), or with this node holding the next attempt's outcome too: this one
      // is written owing nothing.
      const policy = taken.inserted && (taken.laterRow || nextKept) ? null : e.policy;
      if ((await this.endWrittenBack(taken.row, outcome, e, policy)).written) back = taken.row;
    }
    if (back) {
      log.error({ lostRunId: run.id, runId: back.id, status: e.outcome.status },
        'the store lost this finished attempt\'s row (most likely a failover to a replica that had not received it: asynchronous replication); written back by this node with its outcome');
      e.run = { ...e.run, id: back.id };
    } else {
      e.settledElsewhere = true;
      log.error({ lostRunId: run.id, rows: rows.map((r) => `${r.attempt} ${r.status} ${r.nodeId}`) },
        'the store lost this finished attempt\'s row (most likely a failover to a replica that had not received it: asynchronous replication); not written back: the period has another row of this attempt or a later one (it may have run again)');
    }
    this.events.emit({ type: 'row-lost', job: run.job, periodKey: run.periodKey, scheduledAt: run.scheduledAt, ...(run.shard > 0 ? { shard: run.shard } : {}), attempt: run.attempt, runId: run.id, restored: back !== null });
    return back ? 'restored' : 'elsewhere';
  }

  /**
   * A row again for this node's attempt whose own row the store lost: inserted when the period has no
   * row of this attempt (nor, unless `besideLater`, of a later one); another node's skip of it taken
   * over (recorded while the row was gone, coalesced or missed by a catch-up, or an overlap or pause
   * skip: no body ran under it, this node's did); its pending row (an owed attempt's claim lost, the
   * row pending again as before this node claimed it) claimed again, before another node runs it.
   * Null when the period has another live or final row of this attempt. `rows`: the period's rows as
   * read, refreshed in place when a write meets a row written at the same moment (read once more).
   */
  private async takeBackRow(run: SettledAttempt['run'], leaseMs: number, rows: RunRecord[], besideLater: boolean): Promise<{ row: RunRecord; inserted: boolean; laterRow: boolean } | null> {
    for (let tries = 0; tries < 2; tries++) {
      if (tries > 0) rows.splice(0, rows.length, ...(await this.store.periodRuns(run.job, run.scheduledAt, run.shard)));
      const later = rows.filter((r) => r.attempt >= run.attempt);
      const same = later.length === 1 && later[0]!.attempt === run.attempt ? later[0]! : undefined;
      let row: RunRecord | null;
      const inserting = !later.some((r) => r.attempt === run.attempt);
      if (inserting) {
        if (later.length > 0 && !besideLater) return null;
        const inserted = await this.store.insertRun({
          job: run.job, scheduledAt: run.scheduledAt, periodKey: run.periodKey, shard: run.shard, attempt: run.attempt, trigger: run.trigger, nodeId: this.nodeId, leaseMs,
        });
        row = inserted.outcome === 'inserted' ? inserted.run : null;
      } else if (same?.status === 'skipped') {
        row = await this.store.reclaimSkipped(same.id, this.nodeId, leaseMs, run.trigger);
      } else if (same?.status === 'pending') {
        row = await this.store.claimPending(same.id, this.nodeId, leaseMs);
      } else {
        return null;
      }
      // Null: the row changed under this read (an INSERT meeting a row written at the same moment,
      // most often a catch-up's skip): read again and judge that one.
      if (row) return { row, inserted: inserting, laterRow: later.length > 0 };
    }
    return null;
  }

  /**
   * The attempt's row was not found where this node left it (a heartbeat or the outcome write matched
   * nothing). Taken over by another node: null. Gone: the store lost it, most likely by failing over
   * to a replica that had not received it (asynchronous replication); that is said (one error line,
   * the `row-lost` event: the metric and the alert), and a row is taken back for this node's running
   * attempt (takeBackRow; the unique key decides a race with another node's claim), which it returns.
   */
  async restoreInFlight(run: RunRecord, leaseMs: number, log: Logger): Promise<RunRecord | null> {
    const rows = await this.store.periodRuns(run.job, run.scheduledAt, run.shard);
    if (rows.some((r) => r.id === run.id)) return null;
    // (Not beside a later attempt's row: this attempt, still running, would then owe one that exists.)
    const back = (await this.takeBackRow(run, leaseMs, rows, false))?.row ?? null;
    log.error({ lostRunId: run.id, ...(back ? { runId: back.id } : {}) }, back
      ? 'the store lost this attempt\'s row (most likely a failover to a replica that had not received it: asynchronous replication); written back by this node'
      : 'the store lost this attempt\'s row (most likely a failover to a replica that had not received it: asynchronous replication); not written back: the period has a row of this attempt or a later one again');
    this.events.emit({ type: 'row-lost', job: run.job, periodKey: run.periodKey, scheduledAt: run.scheduledAt, ...(run.shard > 0 ? { shard: run.shard } : {}), attempt: run.attempt, runId: run.id, restored: back !== null });
    // Its neighbours written lately may be gone too.
    void this.verify('a row of an attempt in flight was found gone');
    return back;
  }
}
