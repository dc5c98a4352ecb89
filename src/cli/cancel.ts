/**
 * `cancel <job> [--period ISO] [--reason T]`: stops a running attempt wherever it runs. The request
 * is written on the attempt's row; the node that holds it reads it within about a second
 * (CANCEL_POLL_MS) and aborts ctx.signal with reason 'cancelled' (a command gets SIGTERM, then SIGKILL
 * after its killAfter; a worker body is terminated after its grace). The attempt is recorded
 * `cancelled`, with who asked and why, and is neither owed again nor retried. Every shard of the
 * period that is running is cancelled. The command waits for the outcome (at most --wait).
 */
import type { Command } from 'commander';
import { SchedulerError, UsageError } from '../errors.js';
import { openStores } from './lazy.js';
import { withExitStatuses } from './exit.js';
import { parseInstantFlag, print, setup, withCommonOptions, type CommonOptions } from './common.js';
import { parseReason } from './pause.js';
import { cliActor, recordAction } from '../audit/trail.js';
import { parseDuration, DURATION_EXPECTED } from '../time/duration.js';
import type { RunRecord, RunStore } from '../store/types.js';

interface CancelOptions extends CommonOptions {
  period?: string;
  reason?: string;
  wait: string;
}

export interface CancelReport {
  job: string;
  period: string | null;
  /** The attempts asked to stop, and how each ended (null: not ended within --wait). */
  cancelled: Array<{ runId: string; shard: number; attempt: number; nodeId: string; status: string | null; error: string | null }>;
}

export function cancelCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('cancel')), { 0: 'cancelled', 2: 'bad usage or setting', 3: 'nothing running', 4: 'store unreachable' })
    .description("stop a running attempt wherever it runs: ctx.signal aborts (reason 'cancelled'), a command gets SIGTERM then SIGKILL; recorded cancelled, not retried")
    .argument('<job>', 'the job')
    .option('--period <iso>', "that period's running attempt (default: the job's latest running one)")
    .option('--reason <text>', 'why (kept with the outcome and in the audit trail)')
    .option('--wait <duration>', 'how long to wait for the attempt to end', '60s')
    .action(async (job: string, options: CancelOptions) => {
      const reason = parseReason(options.reason);
      const waitMs = parseDuration(options.wait);
      if (waitMs === undefined) throw new UsageError(`invalid --wait ${options.wait}: expected ${DURATION_EXPECTED}`);
      const period = parseInstantFlag('--period', options.period);
      const { config } = await setup(options);
      const stores = await openStores(config);
      const actor = cliActor();
      try {
        const running = await runningAttempts(stores.store, job, period);
        const at = running[0]?.scheduledAt.toISOString() ?? period?.toISOString() ?? null;
        if (running.length === 0) {
          const why = `nothing to cancel: no attempt of '${job}'${period ? ` for the period ${period.toISOString()}` : ''} is running`;
          await recordAction(stores.auditStore, { actor, action: 'cancel', job, period: at, reason, force: false, result: 'refused', detail: why });
          throw new SchedulerError('E_REFUSED', why);
        }
        const asked: RunRecord[] = [];
        for (const r of running) if (await stores.store.requestCancel(r.id, { actor, reason })) asked.push(r);
        if (asked.length === 0) {
          const why = `nothing to cancel: the attempt of '${job}' ended before the request`;
          await recordAction(stores.auditStore, { actor, action: 'cancel', job, period: at, reason, force: false, result: 'refused', detail: why });
          throw new SchedulerError('E_REFUSED', why);
        }
        await recordAction(stores.auditStore, { actor, action: 'cancel', job, period: at, reason, force: false, result: 'done', detail: asked.map((r) => `attempt ${r.attempt}${r.shard > 0 ? ` shard ${r.shard}` : ''} on ${r.nodeId}`).join(', ') });
        const ended = await waitEnded(stores.store, asked, waitMs);
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
        print(options.json, report, () => report.cancelled.map((c) => `${job} ${at} attempt ${c.attempt}${c.shard > 0 ? ` shard ${c.shard}` : ''} on ${c.nodeId}: ${c.status === null ? `cancel asked; not ended within ${options.wait}` : c.status}${c.error ? ` (${c.error})` : ''}`).join('\n'));
      } finally {
        await stores.close();
      }
    });
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
