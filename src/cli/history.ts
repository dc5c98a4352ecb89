import type { Command } from 'commander';
import { SchedulerError, errorMessage } from '../errors.js';
import { openStore } from '../runtime.js';
import { RUN_STATUSES, type RunStatus } from '../store/types.js';
import type { Config } from '../config/config.js';
import { jobsOf, parseCount, print, setup, table, withCommonOptions, type CommonOptions } from './common.js';
import { unknownJob } from './next.js';
import { durationText, runView } from './views.js';

export function historyCommand(program: Command): void {
  withCommonOptions(program.command('history'))
    .description('the recorded runs, newest first')
    .argument('[job]', 'only this job')
    .option('--limit <n>', 'how many runs', '50')
    .option('--status <status>', `only runs with this status (${RUN_STATUSES.join(', ')})`)
    .action(async (job: string | undefined, options: CommonOptions & { limit: string; status?: string }) => {
      const limit = parseCount('--limit', options.limit);
      if (options.status !== undefined && !RUN_STATUSES.includes(options.status as RunStatus)) {
        throw new SchedulerError('E_USAGE', `invalid --status ${options.status}: expected one of ${RUN_STATUSES.join(', ')}`);
      }
      const { config } = setup(options);
      const store = await openStore(config);
      try {
        const runs = await store.history({ job, status: options.status as RunStatus | undefined, limit });
        // No row of that name: a typo, most likely. A job that has rows is shown whether or not its
        // file is still in the jobs folder (a removed job keeps its history); one that has none must
        // at least be defined there, else it is refused naming the known jobs.
        if (job !== undefined && runs.length === 0) {
          const any = options.status === undefined ? runs : await store.history({ job, limit: 1 });
          if (any.length === 0) await refuseUnknown(job, config);
        }
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

/** Throws unless `job` is defined in the jobs folder (valid, or an invalid file of that name). */
async function refuseUnknown(job: string, config: Config): Promise<void> {
  let loaded;
  try {
    loaded = await jobsOf(config);
  } catch (err) {
    throw new SchedulerError('E_UNKNOWN_JOB', `unknown job '${job}': no run recorded under that name, and the jobs folder cannot be read to check it (${errorMessage(err)})`);
  }
  if (loaded.jobs.some((j) => j.name === job)) return;
  throw unknownJob(job, loaded.jobs.map((j) => j.name), loaded.invalid);
}
