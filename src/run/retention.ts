/**
 * Retention: how old a finished run row may get before it is deleted, and the daemon's background
 * pruning. The rule that keeps pruning from changing what the scheduler does: a period within a
 * job's `catchUp` is claimed only when it has no row, so no row younger than the largest `catchUp`
 * (plus a margin) may go, or the period would run again. `prune` and the daemon both check it.
 */
import { errorMessage } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { AuditStore, BackfillStore, OnceStore, PruneResult, RunStore } from '../store/types.js';
import { formatDuration } from '../time/duration.js';

/** Rows younger than the largest catchUp plus this margin are never pruned (claims ahead, clock skew, late timers). */
export const PRUNE_MARGIN_MS = 3_600_000;
/** The daemon prunes this long after it started... */
export const PRUNE_FIRST_AFTER_MS = 60_000;
/** ...and then this often. */
export const PRUNE_EVERY_MS = 3_600_000;

export interface RetentionCheck {
  ok: boolean;
  /** The shortest age that may be pruned: the largest catchUp plus the margin. */
  minimumMs: number;
  /** The job with the largest catchUp (none when no job is loaded). */
  job: { name: string; catchUpMs: number } | null;
}

/** Is pruning rows older than `olderThanMs` safe for these jobs (enabled or not: a disabled job may be enabled again)? */
export function checkRetention(olderThanMs: number, jobs: readonly Pick<Job, 'name' | 'catchUpMs'>[]): RetentionCheck {
  let largest: RetentionCheck['job'] = null;
  for (const j of jobs) if (!largest || j.catchUpMs > largest.catchUpMs) largest = { name: j.name, catchUpMs: j.catchUpMs };
  const minimumMs = (largest?.catchUpMs ?? 0) + PRUNE_MARGIN_MS;
  return { ok: olderThanMs >= minimumMs, minimumMs, job: largest };
}

/** One line: why `olderThanMs` (given as `setting`) is refused. */
export function retentionRefusal(setting: string, olderThanMs: number, check: RetentionCheck): string {
  const margin = formatDuration(PRUNE_MARGIN_MS);
  const why = check.job
    ? `it would delete rows within the largest catchUp plus a margin of ${margin}: job '${check.job.name}' has catchUp ${formatDuration(check.job.catchUpMs)}`
    : `it is shorter than the margin of ${margin}`;
  return `refused: ${setting} ${formatDuration(olderThanMs)}: ${why}; expected at least ${formatDuration(check.minimumMs)}`;
}

export interface RetentionPrunerOptions {
  store: RunStore;
  /** ctx.once's keys: the expired ones are deleted with each prune. */
  onceStore?: OnceStore;
  /** null: retention off, never prune. */
  retentionMs: number | null;
  /** The audit trail: its rows older than auditRetentionMs (by the store's clock) go with each prune. */
  auditStore?: AuditStore;
  /** null or absent: audit rows are kept for ever. */
  auditRetentionMs?: number | null;
  /** Backfills that ended longer than the retention ago go with each prune of the runs (their periods too). */
  backfillStore?: BackfillStore;
  jobs: readonly Job[];
  log: Logger;
  firstAfterMs?: number;
  everyMs?: number;
}

/**
 * The daemon's background pruning: once PRUNE_FIRST_AFTER_MS after start, then every PRUNE_EVERY_MS,
 * off the tick path (its own timer, its own statements in batches). Several nodes may try at once:
 * the store's advisory lock lets one prune and the others skip. An unsafe retention is logged once
 * and nothing is pruned.
 */
export class RetentionPruner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly abort = new AbortController();
  /** The last result (for tests and a later status page). */
  last: PruneResult | undefined;
  /** Whether run rows are pruned (the retention is on and safe); audit rows follow their own setting. */
  private pruneRuns = false;

  constructor(private readonly options: RetentionPrunerOptions) {}

  /** Arms the first prune; false when the daemon will not prune (retention off or unsafe, and no audit retention). */
  start(): boolean {
    this.pruneRuns = this.runsPrunable();
    if (!this.pruneRuns && !this.pruneAudit()) return false;
    this.schedule(this.options.firstAfterMs ?? PRUNE_FIRST_AFTER_MS);
    return true;
  }

  private runsPrunable(): boolean {
    const { retentionMs, jobs, log } = this.options;
    if (retentionMs === null) {
      log.info('retention is off: finished runs are kept');
      return false;
    }
    const check = checkRetention(retentionMs, jobs);
    if (!check.ok) {
      log.warn({ retention: formatDuration(retentionMs), job: check.job?.name, catchUp: check.job ? formatDuration(check.job.catchUpMs) : undefined, minimum: formatDuration(check.minimumMs) },
        `${retentionRefusal('retention', retentionMs, check)}; the daemon does not prune`);
      return false;
    }
    return true;
  }

  private pruneAudit(): boolean {
    return this.options.auditStore !== undefined && this.options.auditRetentionMs !== undefined && this.options.auditRetentionMs !== null;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.pruneOnce().finally(() => {
        this.running = undefined;
        this.schedule(this.options.everyMs ?? PRUNE_EVERY_MS);
      });
    }, delayMs);
    this.timer.unref();
  }

  private async pruneOnce(): Promise<void> {
    if (this.pruneRuns) await this.pruneRunsOnce();
    if (this.pruneRuns && this.options.backfillStore && !this.abort.signal.aborted) await this.pruneBackfillsOnce();
    if (this.pruneAudit() && !this.abort.signal.aborted) await this.pruneAuditOnce();
  }

  /** Backfills ended before the runs' retention, by the store's clock. */
  private async pruneBackfillsOnce(): Promise<void> {
    const { store, log } = this.options;
    const retention = formatDuration(this.options.retentionMs!);
    try {
      const cutoff = new Date((await store.now()) - this.options.retentionMs!);
      const deleted = await this.options.backfillStore!.prune(cutoff);
      if (deleted > 0) log.info({ deleted, cutoff: cutoff.toISOString(), retention }, `prune: deleted ${deleted} backfill(s) ended more than ${retention} ago`);
    } catch (err) {
      log.warn({ err: { message: errorMessage(err) }, retention }, 'prune of ended backfills failed; trying again at the next interval');
    }
  }

  /** Audit rows older than their retention, by the store's clock; apart from the runs (a failure of one leaves the other). */
  private async pruneAuditOnce(): Promise<void> {
    const { store, log } = this.options;
    const retention = formatDuration(this.options.auditRetentionMs!);
    try {
      const cutoff = new Date((await store.now()) - this.options.auditRetentionMs!);
      const deleted = await this.options.auditStore!.prune(cutoff);
      if (deleted > 0) log.info({ deleted, cutoff: cutoff.toISOString(), auditRetention: retention }, `prune: deleted ${deleted} audit row(s) older than ${retention}`);
    } catch (err) {
      log.warn({ err: { message: errorMessage(err) }, auditRetention: retention }, 'prune of the audit trail failed; trying again at the next interval');
    }
  }

  private async pruneRunsOnce(): Promise<void> {
    const { store, log } = this.options;
    const olderThanMs = this.options.retentionMs!;
    const retention = formatDuration(olderThanMs);
    const started = Date.now();
    try {
      const r = await store.prune({ olderThanMs, signal: this.abort.signal });
      this.last = r;
      const fields = { deleted: r.deleted, cutoff: r.cutoff.toISOString(), retention, batches: r.batches, ms: Date.now() - started };
      if (r.outcome === 'locked') log.info({ retention }, 'prune: another node is pruning now; skipped');
      else if (r.outcome === 'aborted') log.info(fields, 'prune: stopped by shutdown');
      else log.info(fields, `prune: deleted ${r.deleted} finished run(s) older than ${retention}`);
      if (r.outcome === 'pruned' && this.options.onceStore) {
        const keys = await this.options.onceStore.pruneExpired({ signal: this.abort.signal });
        if (keys > 0) log.info({ keys }, `prune: deleted ${keys} expired ctx.once key(s)`);
      }
    } catch (err) {
      log.warn({ err: { message: errorMessage(err) }, retention }, 'prune failed; trying again at the next interval');
    }
  }

  /** Stops the timer; a prune in progress stops after its current batch. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort();
    await this.running;
  }
}
