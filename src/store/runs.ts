/**
 * The runs table (`scheduler_runs`) over knex: SQLite, MySQL/MariaDB and PostgreSQL. What differs
 * between the databases is in ./dialect/; the rules are here, once, one concern a module in ./runs/:
 * claims.ts (claim and insert), heartbeats.ts (lease and heartbeat), outcomes.ts and
 * outcome-batch.ts (outcome), sweeps.ts (stale and pending rows), reads.ts, retention.ts (prune),
 * over rows.ts (the row and its shared rules) and context.ts (the pool, wrapping and timeouts).
 */
import type { StoreConfig } from '../config/config.js';
import type { Trigger } from '../jobs/types.js';
import { Database } from './database.js';
import type {
  AttemptKey, EndResult, HistoryQuery, InsertResult, JobSummary, NewRun, PeriodRange, PruneOptions, PruneResult, RetryPolicy, RunOutcome, RunRecord, RunStore, SkippedRun,
} from './types.js';
import * as cancels from './runs/cancels.js';
import * as claims from './runs/claims.js';
import { RunsContext } from './runs/context.js';
import { Heartbeats } from './runs/heartbeats.js';
import { CoalescedOutcomes } from './runs/outcome-batch.js';
import { OWING, endOwing, finishRun } from './runs/outcomes.js';
import * as reads from './runs/reads.js';
import { prune } from './runs/retention.js';
import * as sweeps from './runs/sweeps.js';

export { storableText } from './runs/rows.js';

export class KnexRunStore implements RunStore {
  readonly kind: RunStore['kind'];
  private readonly ctx: RunsContext;
  /**
   * Outcomes that owe nothing (succeeded, skipped) and heartbeats, of runs that end or beat at about
   * the same moment: one UPDATE per node and flush (see Coalescer), each caller answered as alone.
   */
  private readonly outcomes: CoalescedOutcomes;
  private readonly heartbeats: Heartbeats;

  /** @param ownsDb close() closes the pool too (a store opened on its own). */
  constructor(private readonly db: Database, private readonly ownsDb = false) {
    this.kind = db.kind;
    this.ctx = new RunsContext(db);
    this.outcomes = new CoalescedOutcomes(this.ctx);
    this.heartbeats = new Heartbeats(this.ctx);
  }

  /** Opens a pool of its own and checks that the store answers (StoreUnavailableError otherwise). */
  static async open(config: StoreConfig): Promise<KnexRunStore> {
    return new KnexRunStore(await Database.open(config), true);
  }

  connectedForMs(): number {
    return this.db.connectedForMs();
  }

  storeHost(): string | null {
    return this.db.storeHost();
  }

  migrate(): Promise<void> {
    return this.db.migrate();
  }

  // Claim and insert.

  async insertRun(run: NewRun): Promise<InsertResult> {
    return (await this.insertRuns([run]))[0]!;
  }

  insertRuns(runs: NewRun[]): Promise<InsertResult[]> {
    return claims.insertRuns(this.ctx, runs);
  }

  insertSkippedEach(runs: SkippedRun[]): Promise<boolean[]> {
    return claims.insertSkippedEach(this.ctx, runs);
  }

  async insertSkipped(runs: SkippedRun[]): Promise<number> {
    return (await this.insertSkippedEach(runs)).filter(Boolean).length;
  }

  claimPending(runId: string, nodeId: string, leaseMs: number): Promise<RunRecord | null> {
    return claims.claimPending(this.ctx, runId, nodeId, leaseMs);
  }

  releasePending(runId: string, nodeId: string): Promise<boolean> {
    return claims.releasePending(this.ctx, runId, nodeId);
  }

  reclaimSkipped(runId: string, nodeId: string, leaseMs: number, trigger: Trigger): Promise<RunRecord | null> {
    return claims.reclaimSkipped(this.ctx, runId, nodeId, leaseMs, trigger);
  }

  // Lease and heartbeat.

  heartbeat(runId: string, nodeId: string, leaseMs?: number, key?: AttemptKey): Promise<boolean> {
    return this.heartbeats.heartbeat(runId, nodeId, leaseMs, key);
  }

  // Outcome.

  finishRun(runId: string, nodeId: string, outcome: RunOutcome, leaseMs?: number, key?: AttemptKey): Promise<boolean> {
    return finishRun(this.ctx, runId, nodeId, outcome, leaseMs, key);
  }

  async endAttempt(run: RunRecord, nodeId: string, outcome: RunOutcome, policy: RetryPolicy | null): Promise<EndResult> {
    // The common case (succeeded, skipped) owes nothing: one conditional UPDATE, shared with the
    // outcomes of this node's other runs that end at the same moment (CoalescedOutcomes).
    if (!OWING.has(outcome.status)) return this.outcomes.add(nodeId, { run, outcome });
    return endOwing(this.ctx, run, nodeId, outcome, policy);
  }

  // Owed-work sweeps.

  staleRuns(limit?: number, maxLeaseMs?: number): Promise<RunRecord[]> {
    return sweeps.staleRuns(this.ctx, limit, maxLeaseMs);
  }

  takeOver(run: RunRecord, nodeId: string, reason: string, owe: boolean): Promise<EndResult | null> {
    return sweeps.takeOver(this.ctx, run, nodeId, reason, owe);
  }

  duePending(limit?: number): Promise<RunRecord[]> {
    return sweeps.duePending(this.ctx, limit);
  }

  abandonPending(runId: string, reason: string): Promise<boolean> {
    return sweeps.abandonPending(this.ctx, runId, reason);
  }

  // Reads.

  runById(runId: string): Promise<RunRecord | null> {
    return reads.runById(this.ctx, runId);
  }

  requestCancel(runId: string, by: { actor: string; reason: string | null }): Promise<boolean> {
    return cancels.requestCancel(this.ctx, runId, by);
  }

  cancelRequests(runIds: string[]): Promise<Map<string, { actor: string; reason: string | null }>> {
    return cancels.cancelRequests(this.ctx, runIds);
  }

  periodRuns(job: string, scheduledAt: Date, shard?: number): Promise<RunRecord[]> {
    return reads.periodRuns(this.ctx, job, scheduledAt, shard);
  }

  liveRuns(job: string, leaseMs?: number, shard?: number): Promise<RunRecord[]> {
    return reads.liveRuns(this.ctx, job, leaseMs, shard);
  }

  liveRunsOf(jobs: string[], leaseMs?: number): Promise<Map<string, RunRecord[]>> {
    return reads.liveRunsOf(this.ctx, jobs, leaseMs);
  }

  async periodsWithRows(job: string, fromMs: number, toMs: number, shards = 1): Promise<Set<number>> {
    return (await this.rowsInRanges([{ job, fromMs, toMs, shards }])).get(job) ?? new Set();
  }

  periodShards(job: string, scheduledAt: Date): Promise<Set<number>> {
    return reads.periodShards(this.ctx, job, scheduledAt);
  }

  jobsWithRowAt(scheduledAt: Date, jobs: string[]): Promise<Set<string>> {
    return reads.jobsWithRowAt(this.ctx, scheduledAt, jobs);
  }

  rowsInRanges(ranges: PeriodRange[]): Promise<Map<string, Set<number>>> {
    return reads.rowsInRanges(this.ctx, ranges);
  }

  async latestPeriod(job: string): Promise<number | null> {
    return (await this.latestPeriods([job])).get(job) ?? null;
  }

  latestPeriods(jobs: string[]): Promise<Map<string, number>> {
    return reads.latestPeriods(this.ctx, jobs);
  }

  lastRuns(jobs: string[]): Promise<Map<string, RunRecord>> {
    return reads.lastRuns(this.ctx, jobs);
  }

  jobNames(): Promise<string[]> {
    return reads.jobNames(this.ctx);
  }

  history(query: HistoryQuery): Promise<RunRecord[]> {
    return reads.history(this.ctx, query);
  }

  jobSummaries(sinceMs: number): Promise<Map<string, JobSummary>> {
    return reads.jobSummaries(this.ctx, sinceMs);
  }

  now(): Promise<number> {
    return this.db.now();
  }

  // Retention.

  prune(options: PruneOptions): Promise<PruneResult> {
    return prune(this.ctx, options);
  }

  async close(): Promise<void> {
    // Writes queued for coalescing are sent (and answered) before the pool goes.
    await Promise.all([this.outcomes.drain(), this.heartbeats.drain()]);
    if (this.ownsDb) await this.db.close();
  }
}
