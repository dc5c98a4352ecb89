/** The daemon's cadences and horizons: how far ahead it claims, when it is behind, what the sweeps look at. */

/** Upper bound on one timer, so that a wall-clock jump is noticed within this time. */
export const MAX_TIMER_MS = 30_000;
/**
 * Periods are claimed (lock, then row) at least this long before their instant, and their bodies
 * start at the instant: the claim's round trips (Redlock, a durable INSERT) are then off the fire
 * path. As Quartz acquires triggers ahead of their fire time.
 */
export const CLAIM_AHEAD_MS = 100;
/**
 * ... and further ahead when this node's claims take longer (a tick of hundreds of periods on a busy
 * store: measured 60-215 ms at 2,000 every-second jobs on 2 cores), so that they still answer before
 * the instant: half as long again as the slowest claim of the last 30 s, plus 20 ms, up to this.
 * Under a second (an every-second job's next period must not fall inside one tick's horizon), and
 * short of the sweeps, which run half a second off the whole seconds.
 */
export const CLAIM_AHEAD_MAX_MS = 450;

/** How far ahead of its instant a node whose slowest recent claim took `slowestClaimMs` claims a period. */
export function claimAheadMs(slowestClaimMs: number): number {
  return Math.min(CLAIM_AHEAD_MAX_MS, Math.max(CLAIM_AHEAD_MS, Math.ceil(slowestClaimMs * 1.5 + 20)));
}
/**
 * A node whose oldest claim in progress has waited this long is behind: its CPU, its pool or its
 * store cannot keep up with its ticks. Its ticks then race no period (they are left to the other
 * nodes' step-in and to the catch-up sweep, which runs the latest missed period of a job and
 * records the older ones coalesced, in a few statements) until its claims answer in time again.
 * Without this, an overloaded node keeps claiming rows it cannot run in time: each stays running
 * past the next period, which is then recorded skipped (overlap) at the full cost of a claim, and
 * the queues grow until pool waits time out (measured at 2,000 every-second jobs on 2 cores:
 * 301 of 40,000 periods ran). A claim takes milliseconds; 750 ms is far outside that, and short of the next tick of an every-second job.
 */
export const BEHIND_AFTER_MS = 750;
/** At most one "behind" warning per this long (the count of deferred periods is in the metrics). */
export const BEHIND_WARN_EVERY_MS = 10_000;
/**
 * The reconciler looks at periods up to this long before now: a tick claims its period ahead of the
 * instant, so a period without a row this old was not claimed (or its claim failed).
 */
export const RECONCILE_MARGIN_MS = 3000;
/**
 * Each sweep reconciles one of this many slices of the jobs, in turn, so each job every 5 s: every
 * node reading every job's newest periods every second cost more than all the claims of 2,000
 * every-second jobs (measured: CPU per period 0.51-0.63 ms with it, 0.35 ms without), and five
 * periods of a job cost one range read as one does. The first sweep, and the first after the store
 * comes back, reconcile every job (the catch-up after downtime).
 */
export const RECONCILE_SLICES = 5;
/** At start, the first tick waits at most this long for the start-up catch-up's claims (see catchUpAtStart). */
export const STARTUP_CATCH_UP_LEAD_MS = 500;
