/**
 * The event-loop watchdog for inline job bodies. A body that runs in the scheduler's thread and
 * computes without awaiting blocks every timer of the node (ticks, heartbeats, other jobs). JavaScript
 * cannot interrupt it, but it can say afterwards who did it: one unref'd interval timer measures its
 * own lateness; a wake-up more than `thresholdMs` late logs one warning naming the inline bodies
 * that were running during the stall (started before its end, not finished before its start) and how
 * long the loop was blocked. Cost: one timer callback every `intervalMs` (250 ms), armed from the
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

interface Entry {
  job: string;
  periodKey: string;
  runId: string;
  startedAt: number;
  endedAt?: number;
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

  /** An inline body starts; call the returned function when it has settled (not at its abort: it may go on). */
  enter(run: { job: string; periodKey: string; runId: string }): () => void {
    this.arm();
    const id = ++this.seq;
    this.bodies.set(id, { job: run.job, periodKey: run.periodKey, runId: run.runId, startedAt: performance.now() });
    return () => {
      const e = this.bodies.get(id);
      if (e && e.endedAt === undefined) e.endedAt = performance.now();
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
      const suspects = [...this.bodies.values()].filter((e) => e.startedAt < now && (e.endedAt === undefined || e.endedAt >= from));
      const jobs = [...new Set(suspects.map((e) => e.job))];
      const ms = Math.round(blockedMs);
      this.log.warn(
        { blockedMs: ms, jobs, runs: suspects.map((e) => ({ job: e.job, periodKey: e.periodKey, runId: e.runId })) },
        jobs.length > 0
          ? `event loop blocked for ${ms} ms while inline job body ${jobs.join(', ')} ran (isolation: 'worker' runs a body in a thread of its own)`
          : `event loop blocked for ${ms} ms; no inline job body was running`,
      );
    }
    for (const [id, e] of this.bodies) if (e.endedAt !== undefined && e.endedAt < now) this.bodies.delete(id);
    this.last = now;
  }
}
