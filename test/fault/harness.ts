/**
 * The fault suite's harness: a cluster of real `bin/scheduler run` processes against a store and
 * Redis servers this suite owns, and job bodies that record their own side effects (JSON lines with
 * event, period key, attempt, node and time), independent of the scheduler's rows. All of it lives in
 * test/harness/ (plain ESM, shared with bench/faults.mjs).
 */
export { Cluster } from '../harness/cluster.mjs';
export { byPeriod, duplicateStarts, overlappingAttempts, secondsBetween } from '../harness/effects.mjs';
export { attemptJob, faultJob, soonSchedule, type FaultEffect as Effect } from '../harness/job-sources.mjs';
export { StoreProxy } from '../harness/proxy.mjs';
export { plantLockKey } from '../harness/redis.mjs';
