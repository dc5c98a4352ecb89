/**
 * `audit [--job J] [--since D] [--limit N] [--json]`: the operators' actions (pause, resume, run-once
 * by hand, prune), newest first, as the audit trail recorded them, done or refused.
 */
import type { Command } from 'commander';
import { DEFAULT_AUDIT_LIMIT, MAX_AUDIT_LIMIT, SINCE_EXPECTED, auditView, parseSince, type AuditEntryView } from '../audit/view.js';
import { UsageError } from '../errors.js';
import { openStores } from './lazy.js';
import { withExitStatuses } from './exit.js';
import { parseCount, print, setup, table, withCommonOptions, type CommonOptions } from './common.js';

interface AuditOptions extends CommonOptions {
  job?: string;
  since?: string;
  limit: string;
}

export function auditCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('audit')), { 0: 'ok', 2: 'bad --since or --limit, bad usage or setting', 4: 'store unreachable' })
    .description('the operators\' actions (pause, resume, run-once by hand, prune), newest first: who, what, on which job and period, and whether it was done or refused')
    .option('--job <name>', 'only the actions on this job')
    .option('--since <instant|duration>', 'only the actions at or after an ISO instant, or within a duration back from now (24h, 7d)')
    .option('--limit <n>', `how many entries (at most ${MAX_AUDIT_LIMIT})`, String(DEFAULT_AUDIT_LIMIT))
    .addHelpText('after', `
Examples:
  scheduler audit --since 24h
  scheduler audit --job nightly-report --limit 10 --json`)
    .action(async (options: AuditOptions) => {
      const limit = parseCount('--limit', options.limit, MAX_AUDIT_LIMIT);
      if (options.job !== undefined && options.job.trim() === '') throw new UsageError('invalid --job \'\': expected a job name');
      // The form first (exit 2 before the store is asked); a duration is then counted back from the store's clock.
      if (options.since !== undefined && !parseSince(options.since, 0)) throw new UsageError(`invalid --since ${options.since}: expected ${SINCE_EXPECTED}`);
      const { config } = await setup(options);
      const stores = await openStores(config);
      let entries: AuditEntryView[];
      try {
        const since = options.since === undefined ? undefined : parseSince(options.since, await stores.db.now());
        entries = (await stores.auditStore.list({ job: options.job, since, limit })).map(auditView);
      } finally {
        await stores.close();
      }
      print(options.json, { entries }, () => auditText(entries));
    });
}

/** One row per action; the detail (why refused, what was done) under a refused one. */
export function auditText(entries: AuditEntryView[]): string {
  if (entries.length === 0) return 'no actions recorded';
  const rows = [['AT', 'ACTOR', 'ACTION', 'JOB', 'PERIOD', 'REASON', 'RESULT']];
  for (const e of entries) {
    rows.push([e.at, e.actor, `${e.action}${e.force ? ' --force' : ''}`, e.job ?? '-', e.period ?? '-', e.reason ?? '-', e.result === 'refused' && e.detail ? `refused: ${e.detail}` : e.result]);
  }
  return table(rows);
}
