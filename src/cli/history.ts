import type { Command } from 'commander';
import { SchedulerError, errorMessage } from '../errors.js';
import { openStores } from './lazy.js';
import { RUN_STATUSES, type RunStatus } from '../store/types.js';
import type { Config } from '../config/config.js';
import type { RunRecord } from '../store/types.js';
import { formatLocal, relativeTime, truncate, zoneOffset } from '../time/display.js';
import { withExitStatuses } from './exit.js';
import { jobsOf, parseCount, print, setup, withCommonOptions, type CommonOptions } from './common.js';
import { knownList, unknownJob } from '../jobs/unknown.js';
import { adjacentPeriods, shardText } from '../output/periods.js';
import { NAME_WIDTH, durationText, fittedTable, runView, wrapParts, type TimeView } from './views.js';

export function historyCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('history')), { 0: 'ok', 2: 'unknown job, bad --limit or --status, bad usage or setting', 4: 'store unreachable' })
    .description('the recorded runs, newest first')
    .argument('[job]', 'only this job')
    .option('--limit <n>', 'how many runs', '50')
    .option('--status <status>', `only runs with this status (${RUN_STATUSES.join(', ')})`)
    .option('--utc', "show times in UTC instead of each job's zone")
    .action(async (job: string | undefined, options: CommonOptions & { limit: string; status?: string; utc?: boolean }) => {
      const limit = parseCount('--limit', options.limit);
      if (options.status !== undefined && !RUN_STATUSES.includes(options.status as RunStatus)) {
        throw new SchedulerError('E_USAGE', `invalid --status ${options.status}: expected one of ${RUN_STATUSES.join(', ')}`);
      }
      const { config } = await setup(options);
      const stores = await openStores(config);
      const store = stores.store;
      try {
        // The rows of one period (its shards) together, where its newest row is.
        const runs = adjacentPeriods(await store.history({ job, status: options.status as RunStatus | undefined, limit }));
        // No row of that name: a typo, most likely. A job that has rows is shown whether or not its
        // file is still in the jobs folder (a removed job keeps its history); one that has none must
        // at least be defined there, else it is refused naming the known jobs.
        if (job !== undefined && runs.length === 0) {
          const any = options.status === undefined ? runs : await store.history({ job, limit: 1 });
          if (any.length === 0) await refuseUnknown(job, config, async () => [...new Set([...(await stores.jobStore.names()), ...(await store.jobNames())])]);
        }
        const defined = options.json || runs.length === 0 ? new Map<string, { timezone: string; shards: number }>() : await jobZones(config);
        print(options.json, runs.map(runView), () => runs.length === 0 ? 'no runs recorded' : historyText(runs, {
          now: new Date(),
          // A removed job's rows (no file to read its zone from) are shown in UTC.
          zoneOf: (name) => (options.utc ? 'UTC' : defined.get(name)?.timezone ?? 'UTC'),
        }, (name) => defined.get(name)?.shards));
      } finally {
        await stores.close();
      }
    });
}

/**
 * Throws unless `job` is defined in the jobs folder (valid, or an invalid file of that name) or known
 * to the cluster (`recorded`: the jobs table, and the names runs were recorded under, of files
 * removed or defined on other nodes). The suggestion and the known jobs are taken from all of them.
 */
async function refuseUnknown(job: string, config: Config, recorded: () => Promise<string[]>): Promise<void> {
  let loaded;
  try {
    loaded = await jobsOf(config);
  } catch (err) {
    const names = await recorded();
    if (names.includes(job)) return;
    throw new SchedulerError('E_UNKNOWN_JOB', `unknown job '${job}': no run recorded under that name, and the jobs folder cannot be read to check it (${errorMessage(err)}); known jobs: ${knownList(names)}`);
  }
  if (loaded.jobs.some((j) => j.name === job)) return;
  const names = await recorded();
  if (names.includes(job)) return;
  throw unknownJob(job, [...new Set([...loaded.jobs.map((j) => j.name), ...names])].sort(), loaded.invalid);
}

/** Each job's zone and shards, from the jobs folder; none when it cannot be read (the rows are then shown in UTC). */
async function jobZones(config: Config): Promise<Map<string, { timezone: string; shards: number }>> {
  try {
    const { jobs } = await jobsOf(config);
    return new Map(jobs.map((j) => [j.name, { timezone: j.timezone, shards: j.shards ?? 1 }]));
  } catch {
    return new Map();
  }
}

/**
 * Runs as text in 100 columns: a row of job, period (in the job's zone, with its offset), attempt,
 * trigger, status and duration; under it the node, the start and the end (or when a pending attempt
 * is due) and the reason; then the error or the result note.
 */
export function historyText(runs: RunRecord[], view: TimeView, shardsOf: (job: string) => number | undefined = () => undefined): string {
  // A SHARD column (`2/4`: ctx.shard.index / count) when a row is of a sharded job.
  const sharded = runs.some((r) => r.shard > 0 || (shardsOf(r.job) ?? 1) > 1);
  const rows: Array<{ cells: string[]; below?: string[] }> = [{ cells: ['JOB', 'PERIOD', ...(sharded ? ['SHARD'] : []), 'ATTEMPT', 'TRIGGER', 'STATUS', 'DURATION'] }];
  for (const r of runs) {
    const zone = view.zoneOf(r.job);
    const at = (d: Date) => formatLocal(d, zone, 'compact');
    const details = [`node ${truncate(r.nodeId, NAME_WIDTH)}`];
    if (r.status === 'pending') details.push(r.runAt ? `due ${at(r.runAt)} (${relativeTime(r.runAt, view.now)})` : 'due now');
    else details.push(`started ${at(r.startedAt)} (${relativeTime(r.startedAt, view.now)})`, `finished ${r.finishedAt ? at(r.finishedAt) : '-'}`);
    if (r.reason) details.push(`reason ${r.reason}`);
    const below = wrapParts(details, '  ');
    const problem = r.error ?? r.resultNote;
    if (problem) below.push(truncate(`  ${r.error ? 'error' : 'note'}: ${problem.split('\n')[0]}`, 100));
    rows.push({
      cells: [truncate(r.job, NAME_WIDTH), `${at(r.scheduledAt)}${zoneOffset(r.scheduledAt, zone)}`, ...(sharded ? [shardText(r.shard, shardsOf(r.job)) || '-'] : []), String(r.attempt), r.trigger, r.status, durationText(r.durationMs)],
      below,
    });
  }
  return fittedTable(rows, []);
}
