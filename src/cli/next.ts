import type { Command } from 'commander';
import { SchedulerError } from '../errors.js';
import { describePeriods } from '../time/schedule.js';
import { jobsOf, print, setup, table, withCommonOptions, type CommonOptions } from './common.js';

export function nextCommand(program: Command): void {
  withCommonOptions(program.command('next'))
    .description("the next periods of a job, in the job's zone and in UTC, flagging DST transitions")
    .argument('<job>', 'job name')
    .option('-n, --count <n>', 'how many periods', '5')
    .action(async (name: string, options: CommonOptions & { count: string }) => {
      const count = Number(options.count);
      if (!Number.isInteger(count) || count < 1 || count > 1000) {
        throw new SchedulerError('E_USAGE', `invalid -n ${options.count}: expected a whole number from 1 to 1000`);
      }
      const { config } = setup(options);
      const { jobs, invalid } = await jobsOf(config);
      const job = jobs.find((j) => j.name === name);
      if (!job) throw unknownJob(name, jobs.map((j) => j.name), invalid);
      const periods = describePeriods(job.schedule, new Date(), count);
      print(options.json, { job: job.name, timezone: job.timezone, schedule: job.schedule.expression, periods }, () =>
        `${job.name}  ${job.schedule.expression}  (${job.timezone})\n` +
        table([['LOCAL', 'UTC', 'DST'], ...periods.map((p) => [p.local, p.utc, p.dst ?? ''])]));
    });
}

export function unknownJob(name: string, known: string[], invalid: { file: string; problems: string[] }[]): SchedulerError {
  const broken = invalid.find((f) => f.file.replace(/^.*\//, '').replace(/\.[^.]+$/, '') === name);
  if (broken) return new SchedulerError('E_JOB_INVALID', `job '${name}' is invalid: ${broken.problems.join('; ')}`);
  return new SchedulerError('E_UNKNOWN_JOB', `unknown job '${name}'; known jobs: ${known.join(', ') || '(none)'}`);
}
