/** `run`: the daemon. Its machinery loads when the command runs (see daemon.ts). */
import type { Command } from 'commander';
import { withExitStatuses } from './exit.js';
import { settingOption, withCommonOptions, type CommonOptions } from './common.js';

export function runCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('run'), { json: false }), {
    0: 'a clean stop (SIGTERM or SIGINT)',
    2: 'bad usage or setting (a configured HTTP address in use included), or the node id held by another live process, at start or while running',
    4: 'store unreachable at start',
  })
    .description('the daemon: schedule every valid job until SIGTERM or SIGINT; SIGHUP reloads the config file and the jobs folder')
    .addOption(settingOption('--grace-period <duration>', 'gracePeriod'))
    .addOption(settingOption('--http <addr>', 'http'))
    .addOption(settingOption('--alert-webhook <url>', 'alertWebhook'))
    .addOption(settingOption('--retention <duration|off>', 'retention'))
    .action(async (options: CommonOptions) => (await import('./daemon.js')).runDaemon(options));
}
