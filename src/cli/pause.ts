/**
 * `pause <job> [--reason T]` and `resume <job>`: cluster-wide, kept in the jobs table, through the
 * same path as `POST /api/jobs/<name>/pause|resume` (src/actions/pause.ts). No daemon needs to be told,
 * and none has to be running.
 */
import type { Command } from 'commander';
import { errorMessage } from '../errors.js';
import { openStores } from './lazy.js';
import { withExitStatuses } from './exit.js';
import type { Config } from '../config/config.js';
import { jobsOf, print, setup, withCommonOptions, type CommonOptions } from './common.js';
import { cliActor } from '../audit/trail.js';
import { MAX_REASON_CHARS, changePause, describePause, parseReason, type LocalJobs } from '../actions/pause.js';

export { MAX_REASON_CHARS, parseReason };
export type { PauseReport } from '../actions/pause.js';

interface PauseOptions extends CommonOptions {
  reason?: string;
}

export function pauseCommands(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('pause')), {
    0: 'paused (or already paused: a new --reason replaces the old)', 2: 'unknown job or bad --reason', 4: 'store unreachable',
  })
    .description('pause a job cluster-wide: every node skips its periods within one tick (recorded skipped, reason paused) until resume')
    .argument('<job>', 'job name')
    .option('--reason <text>', `why (shown by list, history and the status page; at most ${MAX_REASON_CHARS} characters)`)
    .addHelpText('after', `
Example:
  scheduler pause nightly-report --reason "ledger migration, until 18:00"`)
    .action(async (name: string, options: PauseOptions) => {
      const reason = parseReason(options.reason);
      await change(name, options, true, reason);
    });
  withExitStatuses(withCommonOptions(program.command('resume')), { 0: 'resumed (or was not paused)', 2: 'unknown job', 4: 'store unreachable' })
    .description('resume a paused job cluster-wide: every node runs its periods again within one tick; owed attempts run when due')
    .argument('<job>', 'job name')
    .action(async (name: string, options: CommonOptions) => {
      await change(name, options, false, null);
    });
}

async function change(name: string, options: CommonOptions, pause: boolean, reason: string | null): Promise<void> {
  const { config } = await setup(options);
  const local = await readFolder(config);
  const stores = await openStores(config);
  try {
    const report = await changePause(stores, { job: name, pause, reason, actor: cliActor(), local });
    print(options.json, report, () => describePause(report));
  } finally {
    await stores.close();
  }
}

/** The jobs folder's jobs, or why it cannot be read (the jobs table may still know the job). */
async function readFolder(config: Config): Promise<LocalJobs> {
  try {
    const loaded = await jobsOf(config);
    return { names: loaded.jobs.map((j) => j.name), invalid: loaded.invalid };
  } catch (err) {
    return { error: errorMessage(err) };
  }
}
