import type { Command } from 'commander';
import { EXIT, withExitStatuses } from './exit.js';
import { jobsOf, print, setup, withCommonOptions, type CommonOptions } from './common.js';

export function validateCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('validate')), { 0: 'the configuration and every job file are valid', 2: 'any problem' })
    .description('load the configuration and every job file; print one line per problem')
    .action(async (options: CommonOptions) => {
      const { config } = await setup(options);
      const { jobs, invalid } = await jobsOf(config);
      const problems = invalid.flatMap((f) => f.problems);
      print(options.json, { valid: problems.length === 0, jobs: jobs.map((j) => j.name), problems: invalid }, () =>
        problems.length === 0 ? `ok: ${jobs.length} job(s) valid in ${config.jobsDir}` : problems.join('\n'));
      process.exitCode = problems.length === 0 ? EXIT.ok : EXIT.invalid;
    });
}
