/**
 * `cancel <job> [--period ISO] [--reason T]`: stops a running attempt wherever it runs, through the
 * same path as `POST /api/jobs/<name>/cancel` (src/actions/cancel.ts). The command waits for the
 * outcome (at most --wait).
 */
import type { Command } from 'commander';
import { UsageError } from '../errors.js';
import { openStores } from './lazy.js';
import { withExitStatuses } from './exit.js';
import { parseInstantFlag, print, setup, withCommonOptions, type CommonOptions } from './common.js';
import { parseReason } from '../actions/pause.js';
import { cancelRunning } from '../actions/cancel.js';
import { cliActor } from '../audit/trail.js';
import { parseDuration, DURATION_EXPECTED } from '../time/duration.js';

export type { CancelReport } from '../actions/cancel.js';

interface CancelOptions extends CommonOptions {
  period?: string;
  reason?: string;
  wait: string;
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
      try {
        const report = await cancelRunning(stores, { job, ...(period ? { period } : {}), reason, actor: cliActor(), waitMs });
        const at = report.period;
        print(options.json, report, () => report.cancelled.map((c) => `${job} ${at} attempt ${c.attempt}${c.shard > 0 ? ` shard ${c.shard}` : ''} on ${c.nodeId}: ${c.status === null ? `cancel asked; not ended within ${options.wait}` : c.status}${c.error ? ` (${c.error})` : ''}`).join('\n'));
      } finally {
        await stores.close();
      }
    });
}
