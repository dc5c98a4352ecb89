import type { Command } from 'commander';
import { SchedulerError } from '../errors.js';
import { unknownJob } from '../jobs/unknown.js';
import { INSTANT_EXPECTED, parseInstant } from '../time/instant.js';
import { withExitStatuses } from './exit.js';
import { MAX_COUNT, jobsOf, parseCount, print, setup, table, withCommonOptions, type CommonOptions } from './common.js';

export function nextCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('next')), { 0: 'ok (also when the schedule has fewer periods left than asked)', 2: 'unknown job, bad -n or --from, bad usage or setting' })
    .description("the next periods of a job, in the job's zone and in UTC, flagging DST transitions")
    .argument('<job>', 'job name')
    .option('-n, --count <n>', `how many periods (1 to ${MAX_COUNT})`, '5')
    .option('--from <iso>', 'the periods after this instant instead of after now (ISO-8601 with Z or an offset)')
    .action(async (name: string, options: CommonOptions & { count: string; from?: string }) => {
      const count = parseCount('-n', options.count);
      let from = new Date();
      if (options.from !== undefined) {
        const parsed = parseInstant(options.from);
        if (!parsed) throw new SchedulerError('E_USAGE', `invalid --from ${options.from}: expected ${INSTANT_EXPECTED}`);
        from = parsed;
      }
      const { config } = await setup(options);
      const { jobs, invalid } = await jobsOf(config);
      const [{ describePeriods, expandNickname, periodKey }, { jitterDelayMs }] = await Promise.all([import('../time/schedule.js'), import('../time/jitter.js')]);
      const job = jobs.find((j) => j.name === name);
      if (!job) throw unknownJob(name, jobs.map((j) => j.name), invalid);
      // A jittered job: when each period's body starts (its instant + the delay derived from its key).
      const jitterMs = job.jitterMs ?? 0;
      // A period on a date the job's `exclude` names: shown, flagged skipped (calendar) with the entry that excludes it.
      const exclusion = job.exclude;
      const periods = describePeriods(job.schedule, from, count).map((p) => {
        const excludedBy = exclusion ? exclusion.excludedBy(new Date(p.utc), job.timezone) : null;
        const withStart = jitterMs > 0 && excludedBy === null
          ? { ...p, start: new Date(Date.parse(p.utc) + jitterDelayMs(periodKey(job.name, new Date(p.utc)), jitterMs)).toISOString() } : p;
        return excludedBy !== null ? { ...withStart, skipped: 'calendar' as const, excludedBy } : withStart;
      });
      const anySkipped = periods.some((p) => 'skipped' in p);
      const expanded = expandNickname(job.schedule.expression);
      // Fewer than asked: the schedule has no later period (croner computes none from the year 3000
      // on), which a silent short list would hide.
      const exhausted = periods.length < count;
      print(options.json, { job: job.name, timezone: job.timezone, schedule: job.schedule.expression, from: from.toISOString(), ...(jitterMs > 0 ? { jitterMs } : {}), ...(exclusion ? { exclude: exclusion.entries } : {}), exhausted, periods }, () =>
        `${job.name}  ${job.schedule.expression}${expanded ? ` (${expanded})` : ''}  (${job.timezone})  after ${from.toISOString()}\n` +
        (periods.length === 0 ? 'no further period' : table([['LOCAL', 'UTC', ...(jitterMs > 0 ? ['START (UTC, jitter)'] : []), 'DST', ...(anySkipped ? ['SKIPPED'] : [])],
          ...periods.map((p) => [p.local, p.utc, ...(jitterMs > 0 ? ['start' in p ? p.start : '-'] : []), p.dst ?? '', ...(anySkipped ? ['excludedBy' in p ? `calendar (${p.excludedBy})` : ''] : [])])])));
      // After the list, where a person reading its end looks; on stderr, so that stdout stays the list.
      if (exhausted) {
        const after = periods.length > 0 ? periods[periods.length - 1]!.utc : from.toISOString();
        process.stderr.write(`scheduler: the schedule has no more periods after ${after} (${periods.length} of ${count} shown; no period is computed from the year 3000 on)\n`);
      }
    });
}

