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

export type RunStatus = 'pending' | 'running' | 'succeeded' | 'failed' | 'timed_out' | 'abandoned' | 'skipped' | 'interrupted' | 'cancelled';
export type FinalStatus = Exclude<RunStatus, 'pending' | 'running'>;
export const FINAL_STATUSES: readonly FinalStatus[] = ['succeeded', 'failed', 'timed_out', 'abandoned', 'skipped', 'interrupted', 'cancelled'];
export const RUN_STATUSES: readonly RunStatus[] = ['pending', 'running', ...FINAL_STATUSES];

export type SkipReason = 'overlap' | 'coalesced' | 'missed' | 'paused' | 'calendar';

/**
 * An attempt's unique key, matched beside its row id by the writes that keep or end the attempt:
 * after a failover to a replica that lacked the row, the new primary may hand the same id to another
 * row (MySQL's AUTO_INCREMENT follows the rows it has; SQLite reuses the highest rowid), and a write
 * by id alone would then heartbeat or end another attempt instead of finding this one gone.
 */
export interface AttemptKey {
  job: string;
  scheduledAt: Date;
  shard: number;
  attempt: number;
}

export interface RunRecord {
  id: string;
  job: string;
  scheduledAt: Date;
  periodKey: string;
  /** The shard of the period (`shards: N`: 0..N-1; 0 for an unsharded job); part of the unique key. */
  shard: number;
  attempt: number;
  trigger: Trigger;
  status: RunStatus;
  /** Why a run was skipped or abandoned. */
  reason: string | null;
  /** The node that runs (or ran) the attempt; for a pending attempt, the node that made it owed. */
  nodeId: string;
  /**
   * When the body started (store clock), written with the outcome; until then (running, pending, and
   * rows written before migration 0005) the claim instant.
   */
  startedAt: Date;
  /** When the attempt was claimed (store clock; a tick claims 100 ms ahead of the instant); null on rows from before migration 0005. */
  claimedAt: Date | null;
  /** A pending attempt is due at this instant (store clock); null otherwise. */
  runAt: Date | null;
  finishedAt: Date | null;
  durationMs: number | null;
  heartbeatAt: Date | null;
  leaseMs: number;
  result: unknown;
  /** Why the body's result was not stored as returned (over `maxResultSize`, not JSON-serialisable); null otherwise. */
  resultNote: string | null;
  error: string | null;
  errorStack: string | null;
  /** A command job's last 64 KiB of stdout and stderr ('' when it printed nothing); null for other jobs, and rows from before migration 0010. */
  output?: string | null;
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
  /** Default 0. */
  shard?: number;
}

export interface RunOutcome {
  status: FinalStatus;
  result?: unknown;
  /**
   * The result as JSON, already checked against the size limit (the executor's); when absent, `result`
   * is serialised by the store with the default limit (1 MB).
   */
  resultJson?: string | null;
  /** Why the result was not stored as returned. */
  resultNote?: string | null;
  error?: string | null;
  errorStack?: string | null;
  reason?: string | null;
  /** A command job's output tail (stored in the output column). */
  output?: string | null;
  /**
   * How long before this write was sent the body started and ended, by the node's monotonic clock:
   * the store turns them into started_at and finished_at on its own clock, so that a row's times
   * need no agreement between clocks and exclude the claim-ahead and any wait for the store.
   */
  bodyMsAgo?: { started: number; ended: number };
}

export interface HistoryQuery {
  job?: string;
  status?: RunStatus;
  limit?: number;
  /** Read at most this many characters plus one of each run's output, its end (views that show a little of it); default all. */
  outputChars?: number;
}

export type InsertResult = { outcome: 'inserted'; run: RunRecord } | { outcome: 'duplicate' };

/** What a job's definition says about further attempts after a failure. */
export interface RetryPolicy {
  retries: number;
  retryDelayMs: number;
}

/** How an attempt ended, as written: its status (the cap may turn it into 'failed') and the attempt now owed, if any. */
export interface EndResult {
  /** False when the attempt was no longer this node's (or no longer stale): nothing was written. */
  written: boolean;
  status: FinalStatus;
  /** The pending attempt inserted in the same transaction. */
  next: RunRecord | null;
}

export interface PeriodRange {
  job: string;
  /** Inclusive bounds, epoch ms. */
  fromMs: number;
  toMs: number;
  /** The job's shards (default 1): a period counts as having rows when each shard 0..shards-1 has one. */
  shards?: number;
  /** Only rows of this node count (a node reading back what it wrote). */
  nodeId?: string;
  /** Only rows with a final status count (not running or pending: an outcome was written). */
  finalOnly?: boolean;
}

export interface PruneOptions {
  /** Rows whose started_at is older than this long before now (the store's clock) may go. */
  olderThanMs: number;
  /** Count what would be deleted, delete nothing. */
  dryRun?: boolean;
  /** Ids per DELETE (default 1000). */
  batchSize?: number;
  /** Checked between batches: an aborted prune stops after the batch in hand (what was deleted stays counted). */
  signal?: AbortSignal;
}

export interface PruneResult {
  /** 'locked': another node holds the prune lock; nothing was read or deleted. 'aborted': stopped by the signal. */
  outcome: 'pruned' | 'locked' | 'aborted';
  /** Rows deleted (with dryRun: rows that would be). */
  deleted: number;
  /** Rows whose started_at is before this instant (store clock) were candidates. */
  cutoff: Date;
  dryRun: boolean;
  /** DELETE statements sent (0 with dryRun). */
  batches: number;
}

export interface RunStore {
  readonly kind: 'sqlite' | 'mysql' | 'postgres';
  /** Creates or upgrades the tables; safe when several nodes call it at once. */
  migrate(): Promise<void>;
  /** Claims a period's attempt: 'duplicate' when another node (or an earlier call) has it. insertRuns([run])[0]. */
  insertRun(run: NewRun): Promise<InsertResult>;
  /**
   * Claims many attempts (a tick's periods) in one statement per 500 rows (PostgreSQL, SQLite,
   * MariaDB 10.5+; MySQL, which has no INSERT ... RETURNING: one per row). The results in input
   * order: 'inserted' with the row as stored (store-clock stamps included), or 'duplicate' (another
   * node, an earlier call, or an earlier input of this call with the same key has it). Its
   * statements are bounded by the smallest lease of the batch. A value the store refuses (a NOT NULL
   * column left empty, a name too long) throws, and nothing of that value's chunk of 500 is inserted.
   */
  insertRuns(runs: NewRun[]): Promise<InsertResult[]>;
  /** Records skipped periods; rows that already exist are left as they are. Returns how many were inserted. */
  insertSkipped(runs: SkippedRun[]): Promise<number>;
  /**
   * insertSkipped that says, per input, whether this call inserted its row (false: the row existed,
   * or an earlier input of this call had the same key): one statement per 500 rows where the dialect
   * returns inserted rows (MySQL 8: one per row), so that a sweep records the skipped periods of many
   * jobs at once and still counts each job's own.
   */
  insertSkippedEach(runs: SkippedRun[]): Promise<boolean[]>;
  /**
   * Final write of an attempt, conditional on it still being this node's running attempt.
   * False means the attempt is no longer ours (taken over, or already finished): nothing was written.
   */
  finishRun(runId: string, nodeId: string, outcome: RunOutcome, leaseMs?: number, key?: AttemptKey): Promise<boolean>;
  /**
   * Ends a running attempt of this node, in one transaction with what is owed next: a failure with
   * retries left inserts attempt n + 1 'pending' at now + backoff; an attempt that ended without an
   * outcome of its own (abandoned, interrupted) inserts it at once, up to MAX_UNFINISHED (then the
   * period is recorded 'failed'). `policy` null: no retries (the job is unknown). Called again after
   * a try whose answer was lost but which committed, it recognises this node's own outcome in the row
   * and answers `written: true` with the attempt that try owed (nothing is written twice).
   * Outcomes that owe nothing (succeeded, skipped) of one node, called at about the same moment (one
   * turn of the event loop), go out as one UPDATE; each caller still gets its own answer or error.
   */
  endAttempt(run: RunRecord, nodeId: string, outcome: RunOutcome, policy: RetryPolicy | null): Promise<EndResult>;
  /**
   * Takeover, needing no job definition: compare-and-set of a running attempt whose lease expired
   * (store clock) to 'abandoned' and, when `owe`, attempt n + 1 'pending' at once, in one transaction.
   * Null when the attempt heartbeated again, finished, or another node got there first.
   */
  takeOver(run: RunRecord, nodeId: string, reason: string, owe: boolean): Promise<EndResult | null>;
  /** Pending attempts due now (store clock), the longest due first. */
  duePending(limit?: number): Promise<RunRecord[]>;
  /** Compare-and-set of a due pending attempt to running, for this node; null when another node has it. */
  claimPending(runId: string, nodeId: string, leaseMs: number): Promise<RunRecord | null>;
  /** Gives back an owed attempt this node just claimed (it must wait, e.g. for overlap): running -> pending, due again at once. */
  releasePending(runId: string, nodeId: string): Promise<boolean>;
  /**
   * Turns a `skipped` row (no body ran under it) into this node's running attempt, for an outcome
   * written back: the store lost the row of an attempt this node ran, and a catch-up or a claim
   * recorded the period skipped meanwhile. Null when the row is no longer skipped.
   */
  reclaimSkipped(runId: string, nodeId: string, leaseMs: number, trigger: Trigger): Promise<RunRecord | null>;
  /** Ends a pending attempt nobody can run (its job is defined on no live node). */
  abandonPending(runId: string, reason: string): Promise<boolean>;
  /**
   * Refreshes the heartbeat (store clock) of a running attempt; false when it is no longer ours.
   * Heartbeats of one node called within one turn of the event loop go out as one UPDATE (bounded by
   * the smallest of their leases).
   */
  heartbeat(runId: string, nodeId: string, leaseMs?: number, key?: AttemptKey): Promise<boolean>;
  /** Every attempt of one period, oldest first. */
  periodRuns(job: string, scheduledAt: Date, shard?: number): Promise<RunRecord[]>;
  /** One attempt by its id (scheduler logs --run, the API), or null. */
  runById(runId: string): Promise<RunRecord | null>;
  /** Asks the node that holds a running attempt to cancel it (`cancel`); false: the attempt is not running. */
  requestCancel(runId: string, by: { actor: string; reason: string | null }): Promise<boolean>;
  /** Of these running attempts, those whose cancel was asked: run id -> who and why. */
  cancelRequests(runIds: string[]): Promise<Map<string, { actor: string; reason: string | null }>>;
  /** The job's runs with status 'running' whose heartbeat is younger than their lease (store clock); of one shard only, when given. */
  liveRuns(job: string, leaseMs?: number, shard?: number): Promise<RunRecord[]>;
  /**
   * liveRuns of many jobs in one statement (per 500 jobs), shards included: job -> its live runs
   * ordered by scheduled_at (then shard, attempt); every job named has an entry, [] when it has none.
   */
  liveRunsOf(jobs: string[], leaseMs?: number): Promise<Map<string, RunRecord[]>>;
  /**
   * Running attempts whose heartbeat is older than their lease, by the store's clock, the stalest
   * first; with `maxLeaseMs`, only those whose lease is at most that long.
   */
  staleRuns(limit?: number, maxLeaseMs?: number): Promise<RunRecord[]>;
  /**
   * How long this process has been connected to the store since it last found it unreachable (or
   * opened it), by its monotonic clock: the grace a holder gets to write first (see Takeover).
   */
  connectedForMs(): number;
  /** The store host this process writes to (`host:port`; a host list's current writer), null on SQLite. */
  storeHost(): string | null;
  /** Period instants (epoch ms) of the job that have a row (of each of its `shards`, default 1), in [fromMs, toMs]. */
  periodsWithRows(job: string, fromMs: number, toMs: number, shards?: number): Promise<Set<number>>;
  /** The shards of one period that have any row. */
  periodShards(job: string, scheduledAt: Date): Promise<Set<number>>;
  /** Of `jobs`, those with any row of the period at `scheduledAt` (the step-in check: one statement per 500 jobs). */
  jobsWithRowAt(scheduledAt: Date, jobs: string[]): Promise<Set<string>>;
  /** periodsWithRows for many ranges in one statement: job -> instants with a row (of each shard). */
  rowsInRanges(ranges: PeriodRange[]): Promise<Map<string, Set<number>>>;
  /** The latest period instant of the job that has a row other than a manual run's, or null. */
  latestPeriod(job: string): Promise<number | null>;
  /** latestPeriod of many jobs at once: job -> instant, for the jobs that have such a row. */
  latestPeriods(jobs: string[]): Promise<Map<string, number>>;
  /** The latest run of each job named (by start). */
  lastRuns(jobs: string[]): Promise<Map<string, RunRecord>>;
  history(query: HistoryQuery): Promise<RunRecord[]>;
  /** Every job name that has a row, sorted (a removed job's history still names it). */
  jobNames(): Promise<string[]>;
  /**
   * Cluster-wide facts of every job the jobs table knows, in ONE statement (the status page's and
   * /metrics' cache): the newest row, the last success, and failures and missed periods whose row
   * started at or after `sinceMs` (store clock).
   */
  jobSummaries(sinceMs: number): Promise<Map<string, JobSummary>>;
  /** The store's clock, epoch ms. */
  now(): Promise<number>;
  /**
   * Deletes finished rows (not 'pending' or 'running') whose started_at is older than the cutoff,
   * in batches, under the advisory lock 'prune' (another node pruning: outcome 'locked', nothing done).
   * Never deleted: a job's newest row (by started_at, id), a pending or running row, and any row of a
   * period that still has a pending or running attempt (its earlier attempts count for the retry rules).
   */
  prune(options: PruneOptions): Promise<PruneResult>;
  close(): Promise<void>;
}

/** A job as the cluster knows it (the `scheduler_jobs` table). */
export interface JobRecord {
  name: string;
  /** Store clock, epoch ms. */
  firstSeenAt: number;
  /** Store clock: the last time a node declared the job. */
  seenAt: number;
  /** Every period of the job at or before this instant has a row (epoch ms); the catch-up anchor. */
  reconciledThrough: number | null;
  /** Paused cluster-wide (`pause <job>`): its periods are recorded skipped (reason 'paused'). */
  paused: boolean;
  pausedReason: string | null;
  /** Store clock, epoch ms; null when not paused. */
  pausedAt: number | null;
}

/** What `pause` / `resume` did. */
export type PauseChange = 'changed' | 'unchanged';

export interface JobStore {
  get(names: string[]): Promise<Map<string, JobRecord>>;
  /** Inserts jobs not in the table yet (others are left as they are), then marks every named one seen. */
  declare(jobs: Array<{ name: string; reconciledThrough: number | null }>): Promise<Map<string, JobRecord>>;
  /** Moves reconciled_through forward (never back), and marks the `seen` jobs (default: all of them) as declared by a live node. */
  advance(through: Map<string, number>, seen?: string[]): Promise<void>;
  /** Pauses (or resumes, with paused false) a job cluster-wide; creates its row when the cluster has not seen it yet. */
  setPaused(name: string, paused: boolean, reason?: string | null): Promise<PauseChange>;
  /** The paused jobs and why, in one statement (every node reads it on its sweep and claims). */
  paused(): Promise<Map<string, { reason: string | null; pausedAt: number }>>;
  /** Every job name in the table (jobs any node declared, or that were paused by name), sorted. */
  names(): Promise<string[]>;
}

export type NodeState = 'running' | 'stopping' | 'stopped';

/** A node's row in the nodes table (`scheduler_nodes`), written by its own sweep. Instants: store clock, epoch ms. */
export interface NodeRecord {
  id: string;
  host: string;
  pid: number;
  version: string;
  startedAt: number;
  heartbeatAt: number;
  inFlight: number;
  clockOffsetMs: number;
  state: NodeState;
  /** The start of the process that wrote the row, as /proc tells it (`<boot id>:<start in clock ticks>`); null without /proc or from before the column. */
  procStart: string | null;
  /** The store host the node writes to (`host:port`), as of its last heartbeat; null on SQLite, before its first beat, or from before the column. */
  storeHost: string | null;
  /** The version of the job set it runs (a hash of its jobs folder's files), as of its last heartbeat; null before its first beat, for a CLI, or from before the column. */
  jobSet: string | null;
}

/** The process a node row belongs to: the one that registered it. */
export interface NodeOwner {
  id: string;
  /** `os.hostname()` of the machine (or container) it runs on. */
  host: string;
  pid: number;
}

/**
 * The row one process registered: heartbeats and state changes match it whole, its start included,
 * so that a twin that took the id over (same host name and pid: containers given one fixed host
 * name) is noticed rather than shared.
 */
export interface RegisteredNode extends NodeOwner {
  /** Store clock, epoch ms. */
  startedAt: number;
}

export interface NodeRegistration extends NodeOwner {
  version: string;
  clockOffsetMs: number;
  /** This process's start stamp (see NodeRecord.procStart); absent or null where there is no /proc. */
  procStart?: string | null;
}

/** Whether a process of this host is alive: its pid, and the start stamp its row holds (null: judge by the pid alone). */
export type PidAlive = (pid: number, procStart: string | null) => boolean;

/** A node row as read, judged by the store's clock when it was read. */
export interface ListedNode extends NodeRecord {
  /** Not stopped, and its heartbeat is fresher than NODE_ALIVE_MS by the store's clock. */
  alive: boolean;
  /** How long before the read it last beat, by the store's clock. */
  heartbeatAgeMs: number;
}

export type RegisterResult =
  /** `previous`: the row of the same id this one replaced (a restart, a crashed process), null for a new id. */
  | { outcome: 'registered'; node: RegisteredNode; previous: ListedNode | null }
  /** Another live process holds the id: nothing was written. */
  | { outcome: 'held'; holder: ListedNode };

export interface NodeStore {
  /**
   * Writes this process's row (state 'running', started and heartbeat now by the store's clock),
   * unless another live process holds the id: a row 'running' or 'stopping' with a fresh heartbeat,
   * whose host differs from ours, or whose host is ours and whose pid is another one that
   * `pidAlive` says is alive (given the row's start stamp, so that a reused pid is not the old process). Compare-and-set on the row read: of two processes registering the
   * same id at once, one wins and the other sees the winner's row.
   */
  register(node: NodeRegistration, pidAlive: PidAlive): Promise<RegisterResult>;
  /** The heartbeat (store clock) with what the node is doing; false when the row is no longer this process's. */
  beat(owner: RegisteredNode, status: { inFlight: number; clockOffsetMs: number; state: NodeState; storeHost?: string | null; jobSet?: string | null }): Promise<boolean>;
  /** Sets the state (and the heartbeat); 'stopped' also zeroes the runs in flight. False when the row is not this process's. */
  setState(owner: RegisteredNode, state: NodeState): Promise<boolean>;
  /** The row of one node id, judged by the store's clock; null when there is none. */
  get(id: string): Promise<ListedNode | null>;
  /** Nodes that beat (or stopped) within `recentMs` by the store's clock, by id. */
  list(options: { recentMs: number }): Promise<ListedNode[]>;
  /** Deletes the rows of nodes stopped or silent for longer than `olderThanMs` (default 7 days); returns how many. */
  forgetGone(olderThanMs?: number): Promise<number>;
}

/** Cluster-wide facts about a job, read from the runs table in one statement for all jobs. */
export interface JobSummary {
  job: string;
  /** The newest row by period (any status), with its status; null when the job never ran. */
  last: { scheduledAt: number; status: RunStatus; finishedAt: number | null; attempt: number; error: string | null } | null;
  /** The finish of the newest succeeded attempt (store clock), null if none. */
  lastSuccessAt: number | null;
  /**
   * The newest row by period that ended (neither running nor pending), with its status: what the
   * job last came to while its next attempt runs (an every-second job is seldom without one).
   */
  lastEnded: { scheduledAt: number; status: RunStatus; finishedAt: number | null; attempt: number; error: string | null } | null;
  /** Within the window asked for: periods that ended failed/timed_out/abandoned with nothing owed, and missed periods. */
  failures: number;
  missed: number;
  /** Rows running now. */
  running: number;
}

/** A ctx.once key's state (`scheduler_once_keys`). */
export type OnceStatus = 'processing' | 'succeeded' | 'failed';
export const ONCE_STATUSES: readonly OnceStatus[] = ['processing', 'succeeded', 'failed'];

/** The attempt that asks: every write is fenced by its run row (running, this node, this attempt, lease fresh by the store's clock). */
export interface OnceCaller {
  job: string;
  runId: string;
  attempt: number;
  nodeId: string;
}

/** A key as read, judged by the store's clock at the read. Instants: store clock, epoch ms. */
export interface OnceRecord {
  key: string;
  /** The job whose run took the key last. */
  job: string;
  status: OnceStatus;
  fingerprint: string | null;
  /** The stored result as JSON (succeeded); null for `undefined` or when not succeeded. */
  resultJson: string | null;
  error: string | null;
  /** How many times fn was started for the key (since it was created or expired). */
  attempts: number;
  /** The compare-and-set token: bumped by every write. */
  version: number;
  /** The run (attempt) that took the key last: the holder while it is processing, the last run after. */
  holder: { runId: string; attempt: number; nodeId: string };
  firstRunId: string;
  createdAt: number;
  updatedAt: number;
  expiresAt: number;
  /** The holder's run row is running on its node at its attempt with a fresh lease (store clock). */
  holderLive: boolean;
  /** Past expires_at (and not processing under a live holder): counts as absent. */
  expired: boolean;
}

export type OnceTakeResult =
  /** The caller holds the key (processing); `version` is its token for settle. */
  | { outcome: 'taken'; version: number; attempts: number }
  /** Another caller wrote the key first, or since `seen` was read: read it again and decide again. */
  | { outcome: 'changed' }
  /** The caller's attempt no longer owns its run row: nothing was written. */
  | { outcome: 'fenced' };

export interface OnceQuery {
  /** Keys that start with this (compared byte-wise). */
  prefix?: string;
  status?: OnceStatus;
  job?: string;
  /** Default 100. */
  limit?: number;
}

export interface OnceStore {
  /** One statement: the key with its holder's liveness and its expiry judged by the store's clock; null when absent. */
  read(key: string): Promise<OnceRecord | null>;
  /**
   * Takes the key for the caller (processing, holder = caller), fenced by the caller's run row in
   * the same statement: inserted when `seen` is null, otherwise a compare-and-set on `seen.version`
   * of a key that may be taken (failed, expired, or processing under a holder no longer live).
   */
  take(key: string, caller: OnceCaller, options: { fingerprint: string | null; ttlMs: number }, seen: OnceRecord | null): Promise<OnceTakeResult>;
  /** Ends the caller's hold (compare-and-set on `version`, fenced by its run row); false: nothing written. */
  settle(key: string, caller: OnceCaller, version: number, outcome: { status: 'succeeded'; resultJson: string | null } | { status: 'failed'; error: string }): Promise<boolean>;
  /** Keys for `scheduler keys`, most recently written first (expired ones included, flagged). */
  list(query: OnceQuery): Promise<OnceRecord[]>;
  /** Keys not expired whose fn was started more than once. */
  retried(): Promise<number>;
  /** Deletes expired keys (not one processing under a live holder), in batches; returns how many (with dryRun: would). */
  pruneExpired(options?: { dryRun?: boolean; batchSize?: number; signal?: AbortSignal }): Promise<number>;
}

/** Operator actions the audit trail records (`cancel` and `backfill` are for the commands to come). */
export type AuditAction = 'pause' | 'resume' | 'run' | 'rerun' | 'prune' | 'cancel' | 'backfill' | 'backfill-pause' | 'backfill-resume' | 'backfill-cancel';
export const AUDIT_ACTIONS: readonly AuditAction[] = ['pause', 'resume', 'run', 'rerun', 'prune', 'cancel', 'backfill', 'backfill-pause', 'backfill-resume', 'backfill-cancel'];
/** `done`: the action took effect; `refused`: it did not, and `detail` says why. */
export type AuditResult = 'done' | 'refused';

/** One operator action, as recorded (`scheduler_audit`). */
export interface AuditEntry {
  /** Who: `user@host` from the CLI, the token's name over HTTP (at most 200 characters). */
  actor: string;
  action: AuditAction;
  job: string | null;
  /** The period (an ISO instant) or range (`from/to`) acted on, if any (at most 64 characters). */
  period: string | null;
  reason: string | null;
  force: boolean;
  result: AuditResult;
  /** Why it was refused, or what was done (e.g. `3 run rows deleted`). */
  detail: string | null;
}

export interface AuditRecord extends AuditEntry {
  id: string;
  /** When (store clock), epoch ms. */
  at: number;
}

export interface AuditQuery {
  job?: string;
  /** Only rows at or after this instant (store clock). */
  since?: Date;
  limit: number;
}

export interface AuditStore {
  /** Writes one row, stamped by the store's clock; returns it as stored. */
  record(entry: AuditEntry): Promise<AuditRecord>;
  /** Newest first (at, then id). */
  list(query: AuditQuery): Promise<AuditRecord[]>;
  /** Deletes the rows older than `olderThan` (with dryRun: counts them); returns how many. */
  prune(olderThan: Date, options?: { dryRun?: boolean }): Promise<number>;
}


// Backfills and their periods (BackfillStore), in a file of their own.
export type * from './backfill-types.js';
