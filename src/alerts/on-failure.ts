/**
 * A job's `onFailure(ctx, outcome)`, called once per failed period by the node that recorded the
 * final failure (so once across the cluster), after the outcome is written: an observer of the events,
 * in the background, bounded by a timeout, its errors logged with the job's name. It runs in the
 * daemon's own thread (a job with `isolation: 'worker'` too: its file is loaded there as well).
 */
import { errorMessage } from '../errors.js';
import type { SchedulerEvent, SchedulerObserver } from '../events/events.js';
import type { FailureContext, FailureOutcome, Job } from '../jobs/types.js';
import type { Logger } from '../log.js';

/** The timeout of a job that sets none. */
export const ON_FAILURE_TIMEOUT_MS = 30_000;

export class FailureHooks implements SchedulerObserver {
  private jobs = new Map<string, Job>();
  private readonly inFlight = new Set<Promise<void>>();

  constructor(jobs: Job[], private readonly nodeId: string, private readonly log: Logger) {
    this.setJobs(jobs);
  }

  /** The definitions whose hook is called (after a reload: the new ones). */
  setJobs(jobs: Job[]): void {
    this.jobs = new Map(jobs.filter((j) => typeof j.onFailure === 'function').map((j) => [j.name, j]));
  }

  emit(event: SchedulerEvent): void {
    if (this.jobs.size === 0) return;
    let outcome: FailureOutcome;
    if (event.type === 'run-finished') {
      if (!event.recorded || !event.final || (event.status !== 'failed' && event.status !== 'timed_out')) return;
      outcome = { status: event.status, error: event.error, attempt: event.attempt, period: event.scheduledAt, periodKey: event.periodKey, trigger: event.trigger, shard: event.shard ?? 0 };
    } else if (event.type === 'takeover' && event.result === 'failed') {
      outcome = {
        status: 'failed', error: `attempt ${event.attempt} abandoned (node ${event.deadNode} stopped heartbeating) and no attempt is left`,
        attempt: event.attempt, period: event.scheduledAt, periodKey: event.periodKey, trigger: null, shard: event.shard ?? 0,
      };
    } else {
      return;
    }
    const job = this.jobs.get(event.job);
    if (!job) return;
    const p = this.call(job, outcome).finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  private async call(job: Job, outcome: FailureOutcome): Promise<void> {
    const timeoutMs = job.timeoutMs ?? ON_FAILURE_TIMEOUT_MS;
    const log = this.log.child({ job: job.name, periodKey: outcome.periodKey, hook: 'onFailure' });
    const controller = new AbortController();
    const ctx: FailureContext = { job: job.name, scheduledAt: outcome.period, periodKey: outcome.periodKey, attempt: outcome.attempt, nodeId: this.nodeId, signal: controller.signal, log };
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => {
        controller.abort('timeout');
        resolve('timeout');
      }, timeoutMs);
    });
    try {
      // Called from a microtask of its own: a synchronous throw is caught like a rejection.
      const result = await Promise.race([Promise.resolve().then(() => job.onFailure!(ctx, outcome)), timedOut]);
      if (result === 'timeout') log.error({ timeoutMs }, `onFailure of job ${job.name} did not finish within ${timeoutMs} ms; left in the background`);
    } catch (err) {
      log.error({ err: { message: errorMessage(err) } }, `onFailure of job ${job.name} failed: ${errorMessage(err)}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits (at most `ms`) for the calls in progress. */
  async drain(ms: number): Promise<void> {
    if (this.inFlight.size === 0) return;
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((r) => setTimeout(r, ms).unref())]);
  }
}
