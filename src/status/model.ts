/**
 * What the read-only views show (the status page, `/api`, `/readyz`), as plain JSON-ready values:
 * one model, so that the page and the API never disagree. Instants are ISO strings (UTC); local
 * times are rendered in the job's zone by the views. Nothing here may carry a secret: the store is
 * named by its kind only, Redis by the quorum's state.
 */
import type { QuorumState } from '../claim/lock.js';
import type { NodeState, RunStatus } from '../store/types.js';
import type { RunLogLineView } from '../runlog/view.js';
import type { BackfillView } from '../backfill/view.js';

export interface SummaryView {
  nodeId: string;
  version: string;
  /** Nodes with a fresh heartbeat in the nodes table. */
  nodesAlive: number;
  store: { kind: 'sqlite' | 'mysql' | 'postgres'; state: 'ok' | 'down' };
  redis: QuorumState;
  jobs: number;
  invalidJobs: number;
  paused: number;
  running: number;
  /** Cluster-wide, over the last 24 h (read from the store). */
  failures24h: number;
  missed24h: number;
  clockOffsetMs: number;
  /** When the cluster-wide figures were read from the store (ISO), null before the first read. */
  readAt: string | null;
}

export interface JobView {
  name: string;
  schedule: string;
  timezone: string;
  /** The next periods (ISO, UTC); the first is the next run. */
  next: string[];
  last: { scheduledAt: string; status: RunStatus; finishedAt: string | null; attempt: number; error: string | null } | null;
  /** The newest period's attempt that ended (neither running nor pending): what the job last came to. */
  lastEnded: { scheduledAt: string; status: RunStatus; finishedAt: string | null; attempt: number; error: string | null } | null;
  lastSuccessAt: string | null;
  paused: { reason: string | null; since: string } | null;
  /** Attempts of the job running now, cluster-wide. */
  running: number;
  failures24h: number;
  missed24h: number;
  overlap: 'skip' | 'allow';
  timeout: number | null;
  retries: number;
  /** `shards: N` (1: unsharded). */
  shards: number;
  file: string;
  /** The job's `exclude` entries as written; absent when it has none. */
  exclude?: string[];
  /** Those of `next` on an excluded date (recorded skipped, reason calendar), with the entry; absent when the job has no `exclude`. */
  nextSkipped?: Array<{ at: string; reason: 'calendar'; excludedBy: string }>;
}

export interface RunView {
  /** The attempt's run id (its log: /runs/<id>/log, /api/runs/<id>/log). */
  runId: string;
  job: string;
  scheduledAt: string;
  periodKey: string;
  /** The shard of the period (0 for an unsharded job). */
  shard: number;
  attempt: number;
  trigger: string;
  status: RunStatus;
  reason: string | null;
  nodeId: string;
  startedAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  /** The first line of the error, at most 300 characters. */
  error: string | null;
  /** In a job's detail: the instant is a period of its schedule (a run now's is not), so the period can be re-run. */
  period?: boolean;
  /** A command job's output: the last OUTPUT_IN_VIEW characters of the stored tail (`history --json` has all 64 KiB); null for other jobs. */
  output?: string | null;
}

/** An attempt's stored log (GET /api/runs/<id>/log). */
export interface RunLogView {
  runId: string;
  run: RunView;
  lines: RunLogLineView[];
  /** The last seq returned (ask again with ?after= it for what follows). */
  next: number;
  /** The attempt has ended and every line it had was returned. */
  done: boolean;
}

export interface PeriodView {
  utc: string;
  /** `YYYY-MM-DDTHH:mm:ss±hh:mm` in the job's zone. */
  local: string;
  /** Set when the zone's offset differs from the previous period's (a DST change in between). */
  dst: string | null;
}

export interface JobDetailView {
  job: JobView;
  /** The last 100 attempts, newest first, the rows of one period (its shards) together. */
  runs: RunView[];
  /** The next 10 periods, with DST changes marked. */
  periods: PeriodView[];
}

export interface NodeView {
  id: string;
  host: string;
  pid: number;
  version: string;
  startedAt: string;
  heartbeatAt: string;
  inFlight: number;
  clockOffsetMs: number;
  state: NodeState;
  /** Heartbeat fresh (by the store's clock). */
  alive: boolean;
  /** The store host the node writes to (`host:port`), as of its last heartbeat; null on SQLite or not known yet. */
  storeHost: string | null;
  /** The version (a hash) of the job set it runs, as of its last heartbeat; null not known yet. */
  jobSet: string | null;
}

export interface InvalidJobView {
  file: string;
  problems: string[];
}

export interface RunsQuery {
  job?: string;
  status?: RunStatus;
  limit?: number;
}

/** Everything the views read, from one place. No method may query the store once per job. */
export interface StatusReader {
  /** `nodes`: the nodes the caller read for the same view (the status page), so that they are read once. */
  summary(nodes?: readonly NodeView[]): Promise<SummaryView>;
  jobs(): Promise<JobView[]>;
  /** null: no such job on this node. */
  job(name: string): Promise<JobDetailView | null>;
  runs(query: RunsQuery): Promise<RunView[]>;
  /** An attempt's stored log after `afterSeq`; null: no such run. */
  runLog(runId: string, options?: { afterSeq?: number; limit?: number }): Promise<RunLogView | null>;
  nodes(): Promise<NodeView[]>;
  /** The newest backfills (none without a backfills table). */
  backfills?(): Promise<BackfillView[]>;
  invalid(): InvalidJobView[];
}
