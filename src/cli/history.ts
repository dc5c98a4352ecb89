import type { Command } from 'commander';
import { SchedulerError } from '../errors.js';
import { openStore } from '../runtime.js';
import { RUN_STATUSES, type RunStatus } from '../store/types.js';
import { print, setup, table, withCommonOptions, type CommonOptions } from './common.js';
import { durationText, runView } from './views.js';

export function historyCommand(program: Command): void {
  withCommonOptions(program.command('history'))
    .description('the recorded runs, newest first')
    .argument('[job]', 'only this job')
    .option('--limit <n>', 'how many runs', '50')
    .option('--status <status>', `only runs with this status (${RUN_STATUSES.join(', ')})`)
    .action(async (job: string | undefined, options: CommonOptions & { limit: string; status?: string }) => {
      const limit = Number(options.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 100_000) {
        throw new SchedulerError('E_USAGE', `invalid --limit ${options.limit}: expected a whole number from 1 to 100000`);
      }
      if (options.status !== undefined && !RUN_STATUSES.includes(options.status as RunStatus)) {
        throw new SchedulerError('E_USAGE', `invalid --status ${options.status}: expected one of ${RUN_STATUSES.join(', ')}`);
      }
      const { config } = setup(options);
      const store = await openStore(config);
      try {
        const runs = await store.history({ job, status: options.status as RunStatus | undefined, limit });
        print(options.json, runs.map(runView), () => runs.length === 0 ? 'no runs recorded' : table([
          ['JOB', 'PERIOD', 'ATTEMPT', 'TRIGGER', 'STATUS', 'NODE', 'STARTED', 'FINISHED', 'DURATION', 'ERROR / NOTE'],
          ...runs.map((r) => [
            r.job, r.scheduledAt.toISOString(), String(r.attempt), r.trigger,
            r.reason ? `${r.status} (${r.reason})` : r.status === 'pending' ? `pending (due ${r.runAt?.toISOString() ?? '?'})` : r.status,
            r.nodeId, r.status === 'pending' ? '' : r.startedAt.toISOString(),
            r.finishedAt?.toISOString() ?? '', durationText(r.durationMs), (r.error ?? r.resultNote ?? '').split('\n')[0]!.slice(0, 80),
          ]),
        ]));
      } finally {
        await store.close();
      }
    });
}
