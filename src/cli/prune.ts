/**
 * `prune`: delete finished run rows older than the retention (or --older-than), in batches, and the
 * audit trail's rows older than auditRetention. A prune (not a dry run) is itself an entry of the
 * audit trail, done or refused.
 */
import type { Command } from 'commander';
import { ConfigError, UsageError } from '../errors.js';
import { checkRetention, retentionRefusal } from '../run/retention.js';
import { openStores } from './lazy.js';
import { DURATION_EXPECTED, formatDuration, parseDuration } from '../time/duration.js';
import { withExitStatuses } from './exit.js';
import { jobsOf, print, setup, settingOption, withCommonOptions, type CommonOptions } from './common.js';
import { cliActor, recordAction, warnUnrecorded } from '../audit/trail.js';
import type { Config } from '../config/config.js';
import type { Stores } from '../runtime.js';
import type { AuditEntry, AuditResult } from '../store/types.js';

interface PruneOptions extends CommonOptions {
  olderThan?: string;
  dryRun?: boolean;
}

export function pruneCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('prune')), { 0: 'pruned, or counted with --dry-run (skipped while another node prunes)', 2: 'refused (older than allowed: the largest catchUp plus 1h) or bad duration, bad usage or setting', 4: 'store unreachable' })
    .description("delete finished runs older than D (default: the retention setting), in batches; never a job's newest run, a pending or running one, or one younger than the largest catchUp plus 1h")
    .option('--older-than <duration>', 'delete finished runs that started longer ago than this (default: the retention setting)')
    .addOption(settingOption('--retention <duration|off>', 'retention'))
    .addOption(settingOption('--audit-retention <duration|off>', 'auditRetention'))
    .option('--dry-run', 'count what would be deleted; delete nothing')
    .action(async (options: PruneOptions) => {
      let olderThanMs: number | undefined;
      if (options.olderThan !== undefined) {
        olderThanMs = parseDuration(options.olderThan);
        if (olderThanMs === undefined) throw new UsageError(`invalid --older-than ${options.olderThan}: expected ${DURATION_EXPECTED}`);
      }
      const { config, log } = await setup(options);
      const dryRun = options.dryRun === true;
      const source = olderThanMs !== undefined ? '--older-than' : 'retention';
      olderThanMs ??= config.retentionMs ?? undefined;
      if (olderThanMs === undefined) {
        // The runs are kept; the audit trail follows its own setting.
        const stores = await openStores(config);
        let auditDeleted: number;
        try {
          auditDeleted = await pruneAudit(stores, config, dryRun);
          if (!dryRun) await audit(stores, 'done', `retention off: no run deleted; ${auditText(auditDeleted, config)}`);
        } finally {
          await stores.close();
        }
        print(options.json, { outcome: 'off', deleted: 0, dryRun, cutoff: null, olderThan: null, olderThanMs: null, source, auditDeleted }, () =>
          `retention is off and no --older-than was given: nothing pruned${auditDeleted > 0 ? `; ${dryRun ? 'would delete' : 'deleted'} ${auditDeleted} audit row(s)` : ''}`);
        return;
      }

      // A row younger than a job's catchUp is what keeps its period from running again.
      const { jobs, invalid } = await jobsOf(config);
      if (invalid.length > 0) log.warn({ files: invalid.map((f) => f.file) }, 'invalid job files are not counted in the catchUp check');
      const check = checkRetention(olderThanMs, jobs);
      if (!check.ok) {
        const message = retentionRefusal(source, olderThanMs, check);
        // Recorded without the message's own 'refused: ' (the entry's result says it).
        if (!dryRun) await auditRefusal(config, message.replace(/^refused: /, ''));
        throw source === '--older-than' ? new UsageError(message) : new ConfigError(message);
      }

      const stores = await openStores(config);
      try {
        const r = await stores.store.prune({ olderThanMs, dryRun });
        // Expired ctx.once keys go with the history (they already count as absent).
        const expiredKeys = r.outcome === 'pruned' ? await stores.onceStore.pruneExpired({ dryRun }) : 0;
        const auditDeleted = await pruneAudit(stores, config, dryRun);
        const olderThan = formatDuration(olderThanMs);
        const cutoff = r.cutoff.toISOString();
        if (!dryRun) {
          const runs = r.outcome === 'locked' ? 'another node was pruning the runs: none deleted' : `${r.deleted} run row(s) started before ${cutoff} (older than ${olderThan}) and ${expiredKeys} expired ctx.once key(s) deleted`;
          await audit(stores, 'done', `${runs}; ${auditText(auditDeleted, config)}`);
        }
        print(options.json, { outcome: r.outcome, deleted: r.deleted, dryRun, cutoff, olderThan, olderThanMs, source, batches: r.batches, expiredKeys, auditDeleted }, () => {
          if (r.outcome === 'locked') return `another node is pruning now: skipped (nothing deleted; cutoff would have been ${cutoff})`;
          const what = dryRun ? `would delete ${r.deleted} finished run(s)` : `deleted ${r.deleted} finished run(s)`;
          const keys = (expiredKeys > 0 ? `; ${dryRun ? 'would delete' : 'deleted'} ${expiredKeys} expired ctx.once key(s)` : '')
            + (auditDeleted > 0 ? `; ${dryRun ? 'would delete' : 'deleted'} ${auditDeleted} audit row(s) older than ${formatDuration(config.auditRetentionMs!)}` : '');
          return `${what} started before ${cutoff} (older than ${olderThan}, from ${source === 'retention' ? 'the retention setting' : '--older-than'})${keys}${dryRun ? '; dry run: nothing deleted' : ''}`;
        });
      } finally {
        await stores.close();
      }
    });
}

/** Audit rows older than auditRetention by the store's clock (none when it is off); with dryRun, counted. */
async function pruneAudit(stores: Stores, config: Config, dryRun: boolean): Promise<number> {
  if (config.auditRetentionMs === null) return 0;
  return stores.auditStore.prune(new Date((await stores.db.now()) - config.auditRetentionMs), { dryRun });
}

function auditText(deleted: number, config: Config): string {
  return config.auditRetentionMs === null ? 'audit retention off' : `${deleted} audit row(s) older than ${formatDuration(config.auditRetentionMs)} deleted`;
}

const entry = (result: AuditResult, detail: string): AuditEntry => ({ actor: cliActor(), action: 'prune', job: null, period: null, reason: null, force: false, result, detail });

function audit(stores: Stores, result: AuditResult, detail: string): Promise<boolean> {
  return recordAction(stores.auditStore, entry(result, detail));
}

/** A refused prune is recorded too: the store is opened for that alone (a store that cannot be reached costs a warning, not the refusal's exit status). */
async function auditRefusal(config: Config, message: string): Promise<void> {
  let stores: Stores;
  try {
    stores = await openStores(config);
  } catch (err) {
    warnUnrecorded(entry('refused', message), err);
    return;
  }
  try {
    await audit(stores, 'refused', message);
  } finally {
    await stores.close().catch(() => {});
  }
}
