/** How runs are shown by `history`, `list` and `run-once`. */
import type { RunRecord } from '../store/types.js';

export function runView(r: RunRecord) {
  return {
    id: r.id,
    job: r.job,
    scheduledAt: r.scheduledAt.toISOString(),
    periodKey: r.periodKey,
    attempt: r.attempt,
    trigger: r.trigger,
    status: r.status,
    reason: r.reason,
    nodeId: r.nodeId,
    // The claim (a tick claims up to 100 ms ahead of the instant); null for rows from before it was recorded.
    claimedAt: r.claimedAt?.toISOString() ?? null,
    // The body's start (until the outcome is written: the claim). A pending attempt has not started: it is due at runAt.
    startedAt: r.status === 'pending' ? null : r.startedAt.toISOString(),
    runAt: r.runAt?.toISOString() ?? null,
    finishedAt: r.finishedAt?.toISOString() ?? null,
    durationMs: r.durationMs,
    error: r.error,
    result: r.result,
    resultNote: r.resultNote,
  };
}

export function durationText(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '';
  return ms < 1000 ? `${ms}ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
}
