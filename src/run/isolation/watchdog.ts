/**
 * The event-loop watchdog for inline job bodies. A body that runs in the scheduler's thread and
 * computes without awaiting blocks every timer of the node (ticks, heartbeats, other jobs). JavaScript
 * cannot interrupt it, but it can say afterwards who did it: one unref'd interval timer measures its
 * own lateness; a wake-up more than `thresholdMs` late logs one warning naming the inline bodies
 * that were running during the stall (started before its end, not finished before its start) and how
 * long the loop was blocked. When the stall happened in the synchronous part of a body's call (the
 * code before its first `await`, timed for free around the call), that body alone is named; a body
 * that blocks after an `await` cannot be told apart from the others running at that moment, so all of
 * them are named. Cost: one timer callback every `intervalMs` (250 ms), armed from the
 * first inline body on; nothing per run but a map entry.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../log.js';

export interface WatchdogOptions {
  /** How often the timer is due (ms). */
  intervalMs?: number;
  /** How late it must wake to count as a blocked loop (ms). */
  thresholdMs?: number;
}

export const WATCHDOG_INTERVAL_MS = 250;
export const WATCHDOG_THRESHOLD_MS = 1000;
/** At most this many jobs (and runs) are named in a watchdog line; `jobCount` says how many there were. */
export const NAMED_JOBS = 10;

interface Entry {
  job: string;
  periodKey: string;
  runId: string;
  startedAt: number;
  endedAt?: number;
  /** How long the synchronous part of its call took (ms), once it has returned. */
  syncMs?: number;
}

export interface WatchedBody {
  /** The call `run(ctx)` has returned (its promise, or its value): the synchronous part is over. */
  returned(): void;
  /** The body has settled (not at its abort: it may go on). */
  ended(): void;
}

export class LoopWatchdog {
  private readonly bodies = new Map<number, Entry>();
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private last = 0;
  private readonly intervalMs: number;
  private readonly thresholdMs: number;

  constructor(private readonly log: Logger, options: WatchdogOptions = {}) {
    this.intervalMs = options.intervalMs ?? WATCHDOG_INTERVAL_MS;
    this.thresholdMs = options.thresholdMs ?? WATCHDOG_THRESHOLD_MS;
  }

  /** An inline body is about to be called. */
  enter(run: { job: string; periodKey: string; runId: string }): WatchedBody {
    this.arm();
    const id = ++this.seq;
    const entry: Entry = { job: run.job, periodKey: run.periodKey, runId: run.runId, startedAt: performance.now() };
    this.bodies.set(id, entry);
    return {
      returned: () => {
        entry.syncMs ??= performance.now() - entry.startedAt;
      },
      ended: () => {
        entry.endedAt ??= performance.now();
      },
    };
  }

  /** Stops the timer (tests; the daemon leaves it on). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    if (this.timer) return;
    this.last = performance.now();
    this.timer = setInterval(() => this.check(), this.intervalMs);
    this.timer.unref();
  }

  private check(): void {
    const now = performance.now();
    const blockedMs = now - this.last - this.intervalMs;
    if (blockedMs >= this.thresholdMs) {
      const from = this.last;
      let suspects = [...this.bodies.values()].filter((e) => e.startedAt < now && (e.endedAt === undefined || e.endedAt >= from));
      // A body whose synchronous part took most of the stall did it.
      const sync = suspects.filter((e) => e.syncMs !== undefined && e.syncMs >= blockedMs / 2);
      if (sync.length > 0) suspects = sync;
      const jobs = [...new Set(suspects.map((e) => e.job))];
      const ms = Math.round(blockedMs);
      // A node running hundreds of bodies at once names a few (one line stays one readable line).
      const named = jobs.length > NAMED_JOBS ? `${jobs.slice(0, NAMED_JOBS).join(', ')} and ${jobs.length - NAMED_JOBS} more` : jobs.join(', ');
      this.log.warn(
        {
          blockedMs: ms, jobs: jobs.slice(0, NAMED_JOBS), jobCount: jobs.length,
          runs: suspects.slice(0, NAMED_JOBS).map((e) => ({ job: e.job, periodKey: e.periodKey, runId: e.runId })),
        },
        jobs.length > 0
          ? `event loop blocked for ${ms} ms while inline job body ${named} ran (isolation: 'worker' runs a body in a thread of its own)`
          : `event loop blocked for ${ms} ms; no inline job body was running`,
      );
    }
    for (const [id, e] of this.bodies) if (e.endedAt !== undefined && e.endedAt < now) this.bodies.delete(id);
    this.last = now;
  }
}
