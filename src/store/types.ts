/**
 * The run store: the fence of the whole design. A period's body starts only after its row was
 * inserted under the unique key (job, scheduled_at, shard, attempt). Losing that insert is a value
 * ('duplicate'), never an exception; only broken infrastructure throws (StoreUnavailableError or the
 * driver's error as `cause`).
 *
 * Every instant is epoch milliseconds. Instants the store writes itself (started, heartbeat,
 * finished) come from the store's clock, never a node's, so that leases are judged by one clock.
 */
import type { Trigger } from '../jobs/types.js';

export type RunStatus = 'running' | 'succeeded' | 'failed' | 'timed_out' | 'abandoned' | 'skipped' | 'interrupted';
export const FINAL_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'timed_out', 'abandoned', 'skipped', 'interrupted'];
export const RUN_STATUSES: readonly RunStatus[] = ['running', ...FINAL_STATUSES];

export type SkipReason = 'overlap' | 'coalesced' | 'paused';

export interface RunRecord {
  id: string;
  job: string;
  scheduledAt: Date;
  periodKey: string;
  /** 0 until sharding lands; part of the unique key already. */
  shard: number;
  attempt: number;
  trigger: Trigger;
  status: RunStatus;
  /** Why a run was skipped or abandoned. */
  reason: string | null;
  nodeId: string;
  startedAt: Date;
  finishedAt: Date | null;
  durationMs: number | null;
  heartbeatAt: Date | null;
  leaseMs: number;
  result: unknown;
  error: string | null;
  errorStack: string | null;
}

export interface NewRun {
  job: string;
  scheduledAt: Date;
  periodKey: string;
  attempt: number;
  trigger: Trigger;
  nodeId: string;
  leaseMs: number;
  shard?: number;
}

export interface SkippedRun {
  job: string;
  scheduledAt: Date;
  periodKey: string;
  trigger: Trigger;
  nodeId: string;
  reason: SkipReason;
}

export interface RunOutcome {
  status: Exclude<RunStatus, 'running'>;
  result?: unknown;
  error?: string | null;
  errorStack?: string | null;
  reason?: string | null;
}

export interface HistoryQuery {
  job?: string;
  status?: RunStatus;
  limit?: number;
}

export type InsertResult = { outcome: 'inserted'; run: RunRecord } | { outcome: 'duplicate' };

export interface RunStore {
  readonly kind: 'sqlite' | 'mysql' | 'postgres';
  /** Creates or upgrades the tables; safe when several nodes call it at once. */
  migrate(): Promise<void>;
  /** Claims a period's attempt: 'duplicate' when another node (or an earlier call) has it. */
  insertRun(run: NewRun): Promise<InsertResult>;
  /** Records skipped periods; rows that already exist are left as they are. Returns how many were offered. */
  insertSkipped(runs: SkippedRun[]): Promise<number>;
  /**
   * Final write of an attempt, conditional on it still being this node's running attempt.
   * False means the attempt is no longer ours (taken over, or already finished): nothing was written.
   */
  finishRun(runId: string, nodeId: string, outcome: RunOutcome): Promise<boolean>;
  /** Refreshes the heartbeat (store clock) of a running attempt; false when it is no longer ours. */
  heartbeat(runId: string, nodeId: string): Promise<boolean>;
  /** Every attempt of one period, oldest first. */
  periodRuns(job: string, scheduledAt: Date, shard?: number): Promise<RunRecord[]>;
  /** The job's runs with status 'running' whose heartbeat is younger than their lease (store clock). */
  liveRuns(job: string): Promise<RunRecord[]>;
  /** Running attempts whose heartbeat is older than their lease, by the store's clock. */
  staleRuns(): Promise<RunRecord[]>;
  /**
   * Compare-and-set: ends a running attempt whose lease has expired (by the store's clock) with
   * `status` ('abandoned', or 'failed' when the period has abandoned too many attempts). True for
   * exactly one caller; false when the attempt heartbeated again, finished, or another node got there first.
   */
  abandonRun(runId: string, status: 'abandoned' | 'failed', reason: string): Promise<boolean>;
  /** Period instants (epoch ms) of the job that have any row, in [fromMs, toMs]. */
  periodsWithRows(job: string, fromMs: number, toMs: number): Promise<Set<number>>;
  /** The latest run of each job named (by start). */
  lastRuns(jobs: string[]): Promise<Map<string, RunRecord>>;
  history(query: HistoryQuery): Promise<RunRecord[]>;
  /** The store's clock, epoch ms. */
  now(): Promise<number>;
  close(): Promise<void>;
}
