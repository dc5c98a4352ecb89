/** The types of the backfills table and its periods (src/store/backfills.ts), below every store, as types.ts. */
/** A backfill's state: the daemons take its periods while it is running. */
export type BackfillStatus = 'running' | 'paused' | 'cancelled' | 'done';
/** A backfill period's state: pending, claimed (a node runs it), or its outcome. */
export type BackfillPeriodState = 'pending' | 'claimed' | 'succeeded' | 'failed' | 'skipped' | 'cancelled';

export interface NewBackfill {
  id: string;
  job: string;
  from: Date;
  to: Date;
  concurrency: number;
  force: boolean;
  createdBy: string;
}

/** How many of a backfill's periods are in each state. */
export type BackfillCounts = Record<BackfillPeriodState, number>;

export interface BackfillRecord extends NewBackfill {
  status: BackfillStatus;
  total: number;
  createdAt: Date;
  updatedAt: Date;
  endedAt: Date | null;
  counts: BackfillCounts;
}

/** A period a node has claimed. */
export interface BackfillPeriod {
  backfillId: string;
  idx: number;
  scheduledAt: Date;
  baseAttempt: number | null;
}

export interface BackfillStore {
  /** Writes the backfill and its periods (in one transaction); returns it as stored. */
  create(backfill: NewBackfill, periods: Date[]): Promise<BackfillRecord>;
  get(id: string): Promise<BackfillRecord | undefined>;
  /** Newest first, with counts; `active`: only running or paused ones. */
  list(options?: { limit?: number; active?: boolean; job?: string }): Promise<BackfillRecord[]>;
  /** The running backfills' ids and jobs (what a daemon takes periods of), without counts. */
  running(): Promise<Array<Pick<BackfillRecord, 'id' | 'job' | 'concurrency' | 'force'>>>;
  /** Compare-and-set of the status; true when it changed. Cancelling marks the pending periods cancelled. */
  setStatus(id: string, from: BackfillStatus[], to: BackfillStatus): Promise<boolean>;
  /**
   * Claims up to `max` periods for `nodeId`, in order, keeping the backfill's live claims (claimed,
   * lease not run out) at most its concurrency, cluster-wide: one transaction that locks the backfill's row.
   * A period taken for the first time gets its base attempt in it (the period's last attempt in the
   * runs table, 0 if none).
   */
  claim(id: string, nodeId: string, leaseMs: number, max: number): Promise<BackfillPeriod[]>;
  /** Extends the leases of these periods while `nodeId` holds them. */
  renew(nodeId: string, periods: Array<{ backfillId: string; idx: number }>, leaseMs: number): Promise<void>;
  /** Sets the period's base attempt unless one is set; returns the one stored. */
  setBase(backfillId: string, idx: number, base: number): Promise<number>;
  /** Records a period's outcome (also when another node took it over meanwhile: the runs table is the truth). */
  finish(backfillId: string, idx: number, state: Exclude<BackfillPeriodState, 'pending' | 'claimed'>, attempt: number | null, status: string): Promise<void>;
  /** Gives claimed periods back (pending), not to be taken for `delayMs`. */
  release(nodeId: string, periods: Array<{ backfillId: string; idx: number }>, delayMs: number): Promise<void>;
  /** Marks a running backfill done once no period is pending or claimed; true when it did. */
  completeIfDone(id: string): Promise<boolean>;
  /** How many periods of the job in [from, to] have a succeeded attempt (a dry run's "would be skipped"). */
  succeededPeriods(job: string, from: Date, to: Date): Promise<number>;
  /** Deletes ended backfills (and their periods) that ended before `olderThan`; returns how many. */
  prune(olderThan: Date, options?: { dryRun?: boolean }): Promise<number>;
}
