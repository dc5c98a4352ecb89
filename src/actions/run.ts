/**
 * A run by hand: the one path of `run-once <job> [--period ISO] [--force]` and of
 * `POST /api/jobs/<name>/run` and `/periods/<ISO>/run`, with the rules of src/run/pass.ts runManual
 * (refused while in flight or owed, after success without force, while paused without force). The
 * audit trail records it when its claim is won, before the body runs (so a run whose node dies is
 * still in the trail), or when it is refused.
 */
import { RefusedError } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { Runtime } from '../runtime.js';
import type { AttemptResult } from '../run/execute.js';
import { runManual, type ManualStart } from '../run/pass.js';
import { recordAction } from '../audit/trail.js';

export interface RunByHandInput {
  job: Job;
  /** Re-run this period; absent: run now. */
  period?: Date;
  force: boolean;
  shard?: number;
  actor: string;
  /** Told once the claim is won (the HTTP action answers then). */
  onStarted?: (start: ManualStart) => void;
  warn?: (line: string) => void;
}

/** Runs the attempts to their end (retries the run makes owed included); throws RefusedError when refused. */
export async function runByHand(rt: Runtime, input: RunByHandInput): Promise<AttemptResult[]> {
  const { job, period, force, shard, actor } = input;
  const audit = (result: 'done' | 'refused', at: Date | undefined, detail: string) => recordAction(rt.auditStore, {
    actor, action: period ? 'rerun' : 'run', job: job.name, period: at ? at.toISOString() : null, reason: null, force, result,
    // A refusal of one shard names it; a start lists the shards it took.
    detail: shard === undefined || result === 'done' ? detail : `shard ${shard}: ${detail}`,
  }, input.warn);
  let recorded: Promise<unknown> = Promise.resolve();
  try {
    return await runManual(rt, job, period, force, shard, (start) => {
      recorded = audit('done', start.scheduledAt, startedText(start, rt.claimer.nodeId));
      input.onStarted?.(start);
    });
  } catch (err) {
    if (err instanceof RefusedError) await audit('refused', period, err.message);
    throw err;
  } finally {
    await recorded;
  }
}

/** `attempt 2 started on node-a`, or the shards taken: `shards 0 (attempt 1), 3 (attempt 2) started on node-a`. */
export function startedText(start: ManualStart, nodeId: string): string {
  if (!start.shards) return `attempt ${start.attempt} started on ${nodeId}`;
  return `shard${start.shards.length === 1 ? '' : 's'} ${start.shards.map((s) => `${s.index} (attempt ${s.attempt})`).join(', ')} started on ${nodeId}`;
}
