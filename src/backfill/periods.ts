/**
 * The periods a backfill takes: every period of the job's schedule in [from, to], in the job's time
 * zone (DST as `next` shows it), at most MAX_BACKFILL_PERIODS.
 */
import { SchedulerError } from '../errors.js';
import type { Job } from '../jobs/types.js';
import { periodsAfter } from '../time/schedule.js';

export const MAX_BACKFILL_PERIODS = 100_000;
/** At most this many attempts of a backfill's periods run at once, cluster-wide. */
export const MAX_BACKFILL_CONCURRENCY = 1000;
export const DEFAULT_BACKFILL_CONCURRENCY = 1;

/** The periods in [from, to], oldest first; a bad range throws E_USAGE (exit 2). */
export function backfillPeriods(job: Job, from: Date, to: Date, now: Date): Date[] {
  if (to.getTime() < from.getTime()) throw new SchedulerError('E_USAGE', `bad range: --to ${to.toISOString()} is before --from ${from.toISOString()}`);
  if (to.getTime() > now.getTime()) {
    // A period later than now is the schedule's: a backfill's row would take it before its time.
    throw new SchedulerError('E_USAGE', `bad range: --to ${to.toISOString()} is later than now (${now.toISOString()}); a backfill takes past periods only`);
  }
  const periods = periodsAfter(job.schedule, new Date(from.getTime() - 1), to, MAX_BACKFILL_PERIODS + 1);
  if (periods.length > MAX_BACKFILL_PERIODS) {
    throw new SchedulerError('E_USAGE', `bad range: ${from.toISOString()} to ${to.toISOString()} holds more than ${MAX_BACKFILL_PERIODS.toLocaleString('en-US')} periods of job '${job.name}' (${job.schedule.expression}); split it`);
  }
  if (periods.length === 0) {
    throw new SchedulerError('E_USAGE', `bad range: no period of job '${job.name}' (${job.schedule.expression}, ${job.timezone}) falls in ${from.toISOString()} to ${to.toISOString()}`);
  }
  return periods;
}
