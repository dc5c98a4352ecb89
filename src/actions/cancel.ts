/**
 * Cancel: the one path of `cancel <job>` and `POST /api/jobs/<name>/cancel`. The request is written
 * on the attempt's row; the node that holds it reads it within about a second (CANCEL_POLL_MS) and
 * aborts ctx.signal with reason 'cancelled' (a command gets SIGTERM, then SIGKILL after its killAfter;
 * a worker body is terminated after its grace). The attempt is recorded `cancelled`, with who asked
 * and why, and is neither owed again nor retried. Every running shard of the period is cancelled.
 */
import { SchedulerError } from '../errors.js';
import { recordAction } from '../audit/trail.js';
import type { AuditStore, RunRecord, RunStore } from '../store/types.js';

export interface CancelReport {
  job: string;
  period: string | null;
  /** The attempts asked to stop, and how each ended (null: not ended within the wait). */
  cancelled: Array<{ runId: string; shard: number; attempt: number; nodeId: string; status: string | null; error: string | null }>;
}

export interface CancelInput {
  job: string;
  /** That period's running attempts; default: the job's latest running period. */
  period?: Date;
  reason: string | null;
  actor: string;
  /** How long to wait for the attempts to end (0: do not wait). */
  waitMs: number;
  warn?: (line: string) => void;
}

/** Asks, records and waits. Throws E_REFUSED when nothing was running, or when every attempt ended otherwise first. */
export async function cancelRunning(stores: { store: RunStore; auditStore: AuditStore }, input: CancelInput): Promise<CancelReport> {
  const { job, period, reason, actor } = input;
  const audit = (result: 'done' | 'refused', at: string | null, detail: string) =>
    recordAction(stores.auditStore, { actor, action: 'cancel', job, period: at, reason, force: false, result, detail }, input.warn);
  const running = await runningAttempts(stores.store, job, period);
  const at = running[0]?.scheduledAt.toISOString() ?? period?.toISOString() ?? null;
  if (running.length === 0) {
    const why = `nothing to cancel: no attempt of '${job}'${period ? ` for the period ${period.toISOString()}` : ''} is running`;
    await audit('refused', at, why);
    throw new SchedulerError('E_REFUSED', why);
  }
  const asked: RunRecord[] = [];
  for (const r of running) if (await stores.store.requestCancel(r.id, { actor, reason })) asked.push(r);
  if (asked.length === 0) {
    const why = `nothing to cancel: the attempt of '${job}' ended before the request`;
    await audit('refused', at, why);
    throw new SchedulerError('E_REFUSED', why);
  }
  await audit('done', at, asked.map((r) => `attempt ${r.attempt}${r.shard > 0 ? ` shard ${r.shard}` : ''} on ${r.nodeId}`).join(', '));
  const ended = input.waitMs > 0 ? await waitEnded(stores.store, asked, input.waitMs) : new Map<string, RunRecord>();
  const report: CancelReport = {
    job, period: at,
    cancelled: asked.map((r) => {
      const e = ended.get(r.id);
      return { runId: r.id, shard: r.shard, attempt: r.attempt, nodeId: r.nodeId, status: e?.status ?? null, error: e?.error ?? null };
    }),
  };
  // Every attempt ended otherwise (it finished just before the request was read): nothing was cancelled.
  if (report.cancelled.every((c) => c.status !== null && c.status !== 'cancelled')) {
    throw new SchedulerError('E_REFUSED', `nothing cancelled: ${report.cancelled.map((c) => `attempt ${c.attempt}${c.shard > 0 ? ` shard ${c.shard}` : ''} ended ${c.status}`).join(', ')} before the cancel took effect`);
  }
  return report;
}

/** The running rows of the period (every shard), or of the job's latest running period. */
async function runningAttempts(store: RunStore, job: string, period: Date | undefined): Promise<RunRecord[]> {
  if (period) {
    const shards = [...(await store.periodShards(job, period))];
    const rows = (await Promise.all((shards.length > 0 ? shards : [0]).map((shard) => store.periodRuns(job, period, shard)))).flat();
    return rows.filter((r) => r.status === 'running');
  }
  const running = await store.history({ job, status: 'running', limit: 1000 });
  if (running.length === 0) return [];
  const latest = Math.max(...running.map((r) => r.scheduledAt.getTime()));
  return running.filter((r) => r.scheduledAt.getTime() === latest);
}

/** Each attempt's row once it has ended, within waitMs. */
async function waitEnded(store: RunStore, runs: RunRecord[], waitMs: number): Promise<Map<string, RunRecord>> {
  const until = Date.now() + waitMs;
  const ended = new Map<string, RunRecord>();
  while (ended.size < runs.length && Date.now() < until) {
    for (const r of runs) {
      if (ended.has(r.id)) continue;
      const now = await store.runById(r.id);
      if (now && now.status !== 'running') ended.set(r.id, now);
    }
    if (ended.size < runs.length) await new Promise((res) => setTimeout(res, 250));
  }
  return ended;
}
