/** The command line of `bin/scheduler`. Errors are mapped to exit statuses here, in one place. */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { redactText } from '../config/redact.js';
import { SchedulerError, errorMessage } from '../errors.js';
import { commandName, withGlobalOptions } from './common.js';
import { EXIT, EXIT_MEANINGS, exitCodeFor } from './exit.js';
import { auditCommand } from './audit.js';
import { historyCommand } from './history.js';
import { logsCommand } from './logs.js';
import { cancelCommand } from './cancel.js';
import { backfillCommand } from './backfill.js';
import { keysCommand } from './keys.js';
import { listCommand } from './list.js';
import { migrateCommand } from './migrate.js';
import { nextCommand } from './next.js';
import { nodesCommand } from './nodes.js';
import { pauseCommands } from './pause.js';
import { pruneCommand } from './prune.js';
import { runOnceCommand } from './run-once.js';
import { runCommand } from './run.js';
import { releaseSignals } from './signals.js';
import { validateCommand } from './validate.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

export function buildProgram(): Command {
  const program = withGlobalOptions(new Command('scheduler'))
    .description('Cluster-safe cron: every period of every job runs once across all nodes.')
    .version(pkg.version)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    // The common flags before the command are the program's; after it, the command's own.
    .enablePositionalOptions()
    .addHelpText('after', `
Examples:
  scheduler run                                        # the daemon, SQLite in ./data, jobs from ./jobs
  SCHEDULER_STORE=mysql://app:pw@db/app SCHEDULER_REDIS=redis://r1,redis://r2,redis://r3 scheduler run
  scheduler run-once                                   # one pass: due periods without a row run, then exit
  scheduler run-once nightly-report                    # run a job by hand now
  scheduler list --json
  scheduler next nightly-report -n 10
  scheduler next nightly-report -n 20 --from 2027-03-01T00:00:00Z   # after that instant
  scheduler validate
  scheduler history nightly-report --limit 20 --status failed
  scheduler logs nightly-report --follow               # the latest attempt's own log, live from whichever node runs it
  scheduler prune --older-than 90d --dry-run           # how many finished runs older than 90 days would go
  scheduler nodes                                      # the live and recently stopped nodes
  scheduler keys --prefix order_delivery: --status failed   # ctx.once keys, for audits
  scheduler pause nightly-report --reason "db upgrade" # cluster-wide, within one tick; 'resume nightly-report' undoes it
  scheduler audit --since 24h                          # who paused, resumed, ran or pruned what, newest first

Exit statuses: ${Object.entries(EXIT_MEANINGS).map(([code, meaning]) => `${code} ${meaning}`).join(', ')}.`);
  for (const add of [runCommand, runOnceCommand, listCommand, nextCommand, validateCommand, historyCommand, logsCommand, keysCommand, migrateCommand, pruneCommand, nodesCommand, pauseCommands, cancelCommand, backfillCommand, auditCommand]) add(program);
  // `--version` after a command too (`scheduler run --version`): with positional options the
  // program's own flags are read before the command only.
  for (const cmd of program.commands) cmd.version(pkg.version).exitOverride();
  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  const realExit = process.exit.bind(process);
  // Job bodies run in this process: a body that calls process.exit() gets an error instead of
  // taking the node down (its run is recorded failed). The CLI itself exits through `finish`.
  process.exit = ((code?: number) => {
    throw new Error(`process.exit(${code ?? ''}) was called by a job body; the scheduler refuses to exit`);
  }) as typeof process.exit;
  const finish = (code: number) => {
    process.exitCode = code;
    // Exit only after stdout has drained (a pipe truncates output otherwise); end even if a job
    // body that ignored its signal still holds the event loop.
    process.stdout.write('', () => process.stderr.write('', () => realExit(code)));
  };
  // Only the daemon keeps the signals that came while it loaded (see signals.ts).
  if (commandName(program, argv) !== 'run') releaseSignals();
  try {
    await program.parseAsync(argv);
    finish(typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok);
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander has printed its message already.
      const ok = err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help';
      finish(ok ? EXIT.ok : EXIT.invalid);
      return;
    }
    const code = err instanceof SchedulerError ? exitCodeFor(err.code) : EXIT.failed;
    const verbose = process.env.SCHEDULER_LOG_LEVEL === 'debug' || process.env.SCHEDULER_LOG_LEVEL === 'trace' || argv.includes('debug');
    process.stderr.write(`scheduler: ${redactText(errorMessage(err))}\n`);
    if (verbose && err instanceof Error && err.stack) process.stderr.write(`${redactText(err.stack)}\n`);
    finish(code);
  }
}
