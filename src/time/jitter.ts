/**
 * `jitter`: a period's body starts this long after its instant, the same on every node. Derived from
 * the period key alone (SHA-256, the first 48 bits, modulo the job's jitter), so no node needs to
 * agree with another about anything but the key, which they already do.
 */
import { createHash } from 'node:crypto';
import { nextPeriods, type Schedule } from './schedule.js';

/** The delay of one period's start, in [0, jitterMs). 0 when the job has no jitter. */
export function jitterDelayMs(periodKey: string, jitterMs: number): number {
  if (!(jitterMs > 0)) return 0;
  const digest = createHash('sha256').update(periodKey).digest();
  return digest.readUIntBE(0, 6) % Math.floor(jitterMs);
}

/** How many of the next periods the shortest gap is taken over, at validation. */
export const JITTER_GAP_PERIODS = 300;

/**
 * The shortest gap between consecutive periods of the schedule over its next JITTER_GAP_PERIODS
 * periods from `from`; Infinity when it has fewer than two. A jitter must be shorter, or a period's
 * start would fall after the next period's instant.
 */
export function shortestGapMs(schedule: Schedule, from = new Date()): number {
  const periods = nextPeriods(schedule, from, JITTER_GAP_PERIODS);
  let gap = Infinity;
  for (let i = 1; i < periods.length; i++) gap = Math.min(gap, periods[i]!.getTime() - periods[i - 1]!.getTime());
  return gap;
}
