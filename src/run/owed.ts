/**
 * What is owed after an attempt ends: pure rules, applied by the store inside the transaction that
 * writes the end (so the end and the owed attempt are written together or not at all).
 *
 * - A failure (`failed`, `timed_out`) with retries left owes attempt n + 1 after a backoff:
 *   retryDelay, doubled for each further retry, at most an hour.
 * - An attempt that ended without an outcome of its own (`abandoned`: its node stopped heartbeating;
 *   `interrupted`: its node was stopped past the grace period) owes attempt n + 1 at once, so any node
 *   resumes it. After MAX_UNFINISHED such attempts the period is recorded `failed`: a job that crashes
 *   its node must not crash the whole cluster node by node.
 */
import type { FinalStatus, RetryPolicy, RunStatus } from '../store/types.js';

export const MAX_UNFINISHED = 3;
export const MAX_RETRY_DELAY_MS = 3_600_000;

const FAILURES: ReadonlySet<RunStatus> = new Set(['failed', 'timed_out']);
const UNFINISHED: ReadonlySet<RunStatus> = new Set(['abandoned', 'interrupted']);

export interface EndDecision {
  /** The status to write (the ended attempt's own, or 'failed' at the cap). */
  status: FinalStatus;
  /** Set when the cap turned the status into 'failed'. */
  reason?: string;
  /** The next attempt, due after this many ms; null when nothing more is owed. */
  next: { delayMs: number } | null;
}

export function retryDelayMs(policy: RetryPolicy, retryNumber: number): number {
  return Math.min(policy.retryDelayMs * 2 ** Math.max(0, retryNumber - 1), MAX_RETRY_DELAY_MS);
}

/**
 * @param status how the attempt ended
 * @param earlier the statuses of the period's earlier attempts
 * @param policy the job's retries, or null when the job is unknown here (no retries of failures)
 * @param owe false when nobody can run a next attempt (the job is defined on no live node)
 */
export function decideEnd(status: FinalStatus, earlier: readonly RunStatus[], policy: RetryPolicy | null, owe = true): EndDecision {
  if (FAILURES.has(status)) {
    const retry = earlier.filter((s) => FAILURES.has(s)).length + 1;
    if (!owe || !policy || retry > policy.retries) return { status, next: null };
    return { status, next: { delayMs: retryDelayMs(policy, retry) } };
  }
  if (UNFINISHED.has(status)) {
    const unfinished = earlier.filter((s) => UNFINISHED.has(s)).length + 1;
    if (unfinished >= MAX_UNFINISHED) {
      return { status: 'failed', reason: `${unfinished} attempts ended without an outcome (their nodes stopped heartbeating or were stopped); no further attempt`, next: null };
    }
    return { status, next: owe ? { delayMs: 0 } : null };
  }
  return { status, next: null };
}
