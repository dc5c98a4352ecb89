/** `run`: the daemon. Its machinery loads when the command runs (see daemon.ts). */
import type { Command } from 'commander';
import { withCommonOptions, type CommonOptions } from './common.js';

export function runCommand(program: Command): void {
  withCommonOptions(program.command('run'), { json: false })
    .description('the daemon: schedule every valid job until SIGTERM or SIGINT; SIGHUP reloads the config file and the jobs folder')
    .option('--grace-period <duration>', 'how long in-flight runs may finish after SIGTERM (SCHEDULER_GRACE_PERIOD, default 30s)')
    .option('--http <addr>', "the HTTP server's address (probes /healthz /readyz, /metrics, /api, status page): host:port, host:0 for any free port, or off (SCHEDULER_HTTP, default 127.0.0.1:9464)")
    .option('--alert-webhook <url>', 'POST a JSON alert here on failed, timed-out, missed and abandoned periods and lost dependencies (SCHEDULER_ALERT_WEBHOOK, default none)')
    .option('--retention <duration|off>', 'finished runs older than this are pruned in the background, hourly (SCHEDULER_RETENTION, default 30d)')
    .action(async (options: CommonOptions) => (await import('./daemon.js')).runDaemon(options));
}
