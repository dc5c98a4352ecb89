/** A backfill as `--json`, `backfill --status`, the API and the page show it. */
import type { BackfillRecord } from '../store/types.js';

export interface BackfillView {
  id: string;
  job: string;
  from: string;
  to: string;
  concurrency: number;
  force: boolean;
  status: BackfillRecord['status'];
  total: number;
  /** Succeeded, or skipped (already succeeded, a calendar, a pause). */
  done: number;
  failed: number;
  running: number;
  pending: number;
  counts: BackfillRecord['counts'];
  createdAt: string;
  createdBy: string;
  endedAt: string | null;
}

export function backfillView(b: BackfillRecord): BackfillView {
  const c = b.counts;
  return {
    id: b.id, job: b.job, from: b.from.toISOString(), to: b.to.toISOString(), concurrency: b.concurrency, force: b.force, status: b.status,
    total: b.total, done: c.succeeded + c.skipped, failed: c.failed + c.cancelled, running: c.claimed, pending: c.pending, counts: c,
    createdAt: b.createdAt.toISOString(), createdBy: b.createdBy, endedAt: b.endedAt?.toISOString() ?? null,
  };
}

