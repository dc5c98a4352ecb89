/**
 * The outcomes this node wrote lately, kept so that a store that forgets them can be told again.
 *
 * With asynchronous replication a promoted standby lacks the last rows the old primary committed. A
 * node whose attempt is still in flight finds that out by itself (its heartbeat or outcome write
 * matches nothing: Executor.restoreLostRow). An attempt already written and forgotten by the node
 * would be lost silently: its period has no row, the catch-up claims it again, and only the Redis key
 * kept past the period's catchUp stops a second run. So each node keeps what it wrote for a while and,
 * when the store may have moved (it answered again after an outage, the writer host changed, a lost
 * row was found), reads its recent periods back and writes each missing one again with its outcome.
 *
 * What is kept: entries written in the last RETAIN_MS before the store was last seen well (never
 * pruned while the store is away, so that an outage of any length still checks the tail before it),
 * at most MAX_ENTRIES, results over MAX_RESULT_CHARS left out (noted in the row written back).
 */
import type { RetryPolicy, RunOutcome, RunRecord } from '../store/types.js';

/** How long an outcome is kept after the store was last seen answering. */
export const RETAIN_MS = 30_000;
/** At most this many outcomes are kept (the oldest go first): about 300 B each. */
export const MAX_ENTRIES = 200_000;
/** A result longer than this (JSON characters) is not kept for a write-back. */
export const MAX_RESULT_CHARS = 4096;

export interface SettledAttempt {
  run: Pick<RunRecord, 'id' | 'job' | 'scheduledAt' | 'periodKey' | 'shard' | 'attempt' | 'trigger'>;
  outcome: RunOutcome;
  /** The body's start and end, by the monotonic clock (performance.now). */
  bodyStarted: number;
  bodyEnded: number;
  /** When the outcome was written, by the monotonic clock. */
  writtenAt: number;
  /** The job's lease and retry policy when it was written (the job may be gone by the write-back). */
  leaseMs: number;
  policy: RetryPolicy;
  /** Set once the period was found with another node's row of this attempt or a later one: reported once, not again. */
  settledElsewhere?: boolean;
}

export class SettledLedger {
  private entries: SettledAttempt[] = [];
  private head = 0;

  get size(): number {
    return this.entries.length - this.head;
  }

  add(entry: SettledAttempt): void {
    const { outcome } = entry;
    const resultJson = outcome.resultJson;
    const kept: RunOutcome = resultJson && resultJson.length > MAX_RESULT_CHARS
      ? { ...outcome, resultJson: null, result: undefined, resultNote: `result not written back after a store failover (over ${MAX_RESULT_CHARS} characters)` }
      : outcome;
    this.entries.push({ ...entry, outcome: kept, run: { id: entry.run.id, job: entry.run.job, scheduledAt: entry.run.scheduledAt, periodKey: entry.run.periodKey, shard: entry.run.shard, attempt: entry.run.attempt, trigger: entry.run.trigger } });
    if (this.size > MAX_ENTRIES) this.head++;
    this.compact();
  }

  /** Drops the entries written more than RETAIN_MS before `okAt` (monotonic: the store last answered). */
  prune(okAt: number): void {
    while (this.head < this.entries.length && this.entries[this.head]!.writtenAt < okAt - RETAIN_MS) this.head++;
    this.compact();
  }

  /** The entries kept, oldest first. */
  list(): SettledAttempt[] {
    return this.entries.slice(this.head);
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }
}
