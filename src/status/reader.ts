/**
 * The read model behind the status page and /api: the scheduler's snapshot, the loaded jobs, the
 * invalid files and the summary cache (memory), plus one `history` statement where runs are asked
 * for. Never a statement per job; never a secret (the store by its kind, Redis by its state).
 */
import { adjacentPeriods } from '../output/periods.js';
import { hostname } from 'node:os';
import type { InvalidJobFile, Job } from '../jobs/types.js';
import type { SchedulerSnapshot } from '../daemon/scheduler.js';
import type { BackfillStore, JobSummary, ListedNode, RunRecord, RunStore } from '../store/types.js';
import { backfillView } from '../backfill/view.js';
import { nodeView } from '../nodes/view.js';
import { describePeriods, isPeriod, nextPeriods } from '../time/schedule.js';
import type { SummaryCache } from '../http/summaries.js';
import type { InvalidJobView, JobDetailView, JobView, NodeView, RunView, RunsQuery, StatusReader, SummaryView } from './model.js';
import type { RunLogStore } from '../runlog/types.js';
import { ENDED_STATUSES, logLineView } from '../runlog/view.js';

const NEXT_IN_LIST = 3;

export interface StatusReaderOptions {
  nodeId: string;
  version: string;
  storeKind: RunStore['kind'];
  snapshot: () => SchedulerSnapshot;
  jobs: Job[];
  invalid: InvalidJobFile[];
  cache: SummaryCache;
  store: Pick<RunStore, 'history' | 'storeHost' | 'runById'>;
  /** The attempts' stored logs; without it, runLog() finds none. */
  runLogs?: RunLogStore;
  /** Whether the store answers (the scheduler's sweep and the readiness probe together). */
  storeUp: () => boolean;
  /** The version of the job set this node runs (its own row in the nodes view before its first beat). */
  jobSet?: () => string | null;
  /** The store's clock as this node estimates it (epoch ms). */
  now: () => number;
  /** The nodes table (another part writes it); without it, this node alone from its snapshot. */
  listNodes?: () => Promise<ListedNode[]>;
  /** The backfills table; without it, none. */
  backfills?: Pick<BackfillStore, 'list'>;
}

/** The backfills the page shows (the newest; `backfill --status` and /api/backfills list more). */
const BACKFILLS_ON_PAGE = 10;

/** The first line of an error, at most 300 characters. */
export function firstLine(text: string | null | undefined): string | null {
  if (text === null || text === undefined) return null;
  const line = text.split('\n', 1)[0]!.trim();
  return line.length > 300 ? `${line.slice(0, 299)}…` : line;
}

const iso = (ms: number | null | undefined): string | null => (ms === null || ms === undefined ? null : new Date(ms).toISOString());

export function runView(r: RunRecord): RunView {
  const pending = r.status === 'pending';
  return {
    runId: r.id, job: r.job, scheduledAt: r.scheduledAt.toISOString(), periodKey: r.periodKey, shard: r.shard, attempt: r.attempt, trigger: r.trigger, status: r.status,
    reason: r.reason, nodeId: r.nodeId, startedAt: pending ? null : r.startedAt.toISOString(), finishedAt: r.finishedAt?.toISOString() ?? null,
    durationMs: r.durationMs, error: firstLine(r.error),
    ...(r.output !== undefined && r.output !== null ? { output: lastChars(r.output, OUTPUT_IN_VIEW) } : {}),
  };
}

/** How much of a command job's output the page and /api show per run (a job page has 100 runs). */
export const OUTPUT_IN_VIEW = 2000;

function lastChars(text: string, n: number): string {
  return text.length <= n ? text : `…${text.slice(text.length - n)}`;
}

export function createStatusReader(o: StatusReaderOptions): StatusReader {
  const byName = new Map(o.jobs.map((j) => [j.name, j]));
  // croner's nextRuns costs ~0.1 ms a job, the most of `/`'s render with 1,000 jobs; the periods after
  // `at` stay those computed at an earlier instant until the first of them passes.
  const upcoming = new WeakMap<Job, { from: number; next: Date[] }>();
  const nextOf = (job: Job, at: Date): Date[] => {
    const known = upcoming.get(job);
    const t = at.getTime();
    if (known && known.next.length === NEXT_IN_LIST && t >= known.from && t < known.next[0]!.getTime()) return known.next;
    const next = nextPeriods(job.schedule, at, NEXT_IN_LIST);
    upcoming.set(job, { from: t, next });
    return next;
  };

  const jobView = (job: Job, summary: JobSummary | undefined, at: Date): JobView => {
    const paused = o.cache.paused.get(job.name);
    const last = summary?.last ?? null;
    const ended = summary?.lastEnded ?? null;
    return {
      name: job.name,
      schedule: job.schedule.expression,
      timezone: job.timezone,
      next: job.enabled ? nextOf(job, at).map((d) => d.toISOString()) : [],
      last: last ? { scheduledAt: iso(last.scheduledAt)!, status: last.status, finishedAt: iso(last.finishedAt), attempt: last.attempt, error: firstLine(last.error) } : null,
      lastEnded: ended ? { scheduledAt: iso(ended.scheduledAt)!, status: ended.status, finishedAt: iso(ended.finishedAt), attempt: ended.attempt, error: firstLine(ended.error) } : null,
      lastSuccessAt: iso(summary?.lastSuccessAt),
      paused: paused ? { reason: paused.reason, since: iso(paused.pausedAt)! } : null,
      running: summary?.running ?? 0,
      failures24h: summary?.failures ?? 0,
      missed24h: summary?.missed ?? 0,
      overlap: job.overlap,
      timeout: job.timeoutMs,
      retries: job.retries,
      shards: job.shards ?? 1,
      file: job.file,
      ...(job.exclude ? excludeView(job, job.enabled ? nextOf(job, at) : []) : {}),
    };
  };

  const selfNode = (): NodeView => {
    const s = o.snapshot();
    const now = o.now();
    return {
      id: o.nodeId, host: hostname(), pid: process.pid, version: o.version,
      startedAt: iso(s.startedAt) ?? new Date(now).toISOString(), heartbeatAt: new Date(now).toISOString(),
      inFlight: s.inFlight.length, clockOffsetMs: s.clockOffsetMs, state: s.stopping ? 'stopping' : 'running', alive: true,
      storeHost: o.store.storeHost(),
      jobSet: o.jobSet?.() ?? null,
    };
  };

  const reader: StatusReader = {
    async summary(read?: readonly NodeView[]): Promise<SummaryView> {
      const s = o.snapshot();
      let failures = 0;
      let missed = 0;
      let running = 0;
      for (const sum of o.cache.summaries.values()) {
        failures += sum.failures;
        missed += sum.missed;
        running += sum.running;
      }
      const nodes = o.listNodes ? (read ?? (await reader.nodes())).filter((n) => n.alive).length : 1;
      return {
        nodeId: o.nodeId, version: o.version, nodesAlive: nodes,
        store: { kind: o.storeKind, state: o.storeUp() ? 'ok' : 'down' },
        redis: s.redis,
        jobs: o.jobs.length,
        invalidJobs: o.invalid.length,
        paused: o.jobs.filter((j) => o.cache.paused.has(j.name)).length,
        running,
        failures24h: failures,
        missed24h: missed,
        clockOffsetMs: s.clockOffsetMs,
        readAt: iso(o.cache.readAt),
      };
    },
    async jobs() {
      const at = new Date(o.now());
      return o.jobs.map((j) => jobView(j, o.cache.summaries.get(j.name), at));
    },
    async job(name) {
      const job = byName.get(name);
      if (!job) return null;
      const at = new Date(o.now());
      const runs = await o.store.history({ job: name, limit: 100, outputChars: OUTPUT_IN_VIEW });
      return {
        job: jobView(job, o.cache.summaries.get(name), at),
        // A run now's instant is no period of the schedule: re-run by period applies to the others only.
        runs: adjacentPeriods(runs).map((r) => ({ ...runView(r), period: isPeriod(job.schedule, r.scheduledAt) })),
        periods: job.enabled ? describePeriods(job.schedule, at, 10).map((p) => ({ utc: p.utc, local: p.local, dst: p.dst ?? null })) : [],
      } satisfies JobDetailView;
    },
    async runs(query: RunsQuery) {
      return adjacentPeriods(await o.store.history({ job: query.job, status: query.status, limit: query.limit ?? 100, outputChars: OUTPUT_IN_VIEW })).map(runView);
    },
    async runLog(runId, options = {}) {
      const run = await o.store.runById(runId);
      if (!run) return null;
      const limit = options.limit ?? 5000;
      const lines = o.runLogs ? await o.runLogs.read(runId, { afterSeq: options.afterSeq, limit }) : [];
      const next = lines.length > 0 ? lines[lines.length - 1]!.seq : options.afterSeq ?? 0;
      return { runId, run: runView(run), lines: lines.map(logLineView), next, done: ENDED_STATUSES.has(run.status) && lines.length < limit };
    },
    async nodes() {
      if (!o.listNodes) return [selfNode()];
      // Liveness judged by the store's clock, in the nodes table's own statement.
      return (await o.listNodes()).map(nodeView);
    },
    async backfills() {
      return o.backfills ? (await o.backfills.list({ limit: BACKFILLS_ON_PAGE })).map(backfillView) : [];
    },
    invalid(): InvalidJobView[] {
      return o.invalid.map((f) => ({ file: f.file, problems: f.problems.map((p) => firstLine(p) ?? '') }));
    },
  };
  return reader;
}

/** A job's `exclude` as the views show it: its entries, and which of its next periods it excludes. */
function excludeView(job: Job, next: Date[]): Pick<JobView, 'exclude' | 'nextSkipped'> {
  const exclusion = job.exclude!;
  return {
    exclude: [...exclusion.entries],
    nextSkipped: next.flatMap((d) => {
      const excludedBy = exclusion.excludedBy(d, job.timezone);
      return excludedBy === null ? [] : [{ at: d.toISOString(), reason: 'calendar' as const, excludedBy }];
    }),
  };
}
