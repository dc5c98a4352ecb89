/** `prune`: delete finished run rows older than the retention (or --older-than), in batches. */
import type { Command } from 'commander';
import { ConfigError, UsageError } from '../errors.js';
import { checkRetention, retentionRefusal } from '../run/retention.js';
import { openStores } from './lazy.js';
import { DURATION_EXPECTED, formatDuration, parseDuration } from '../time/duration.js';
import { withExitStatuses } from './exit.js';
import { jobsOf, print, setup, settingOption, withCommonOptions, type CommonOptions } from './common.js';

interface PruneOptions extends CommonOptions {
  olderThan?: string;
  dryRun?: boolean;
}

export function pruneCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('prune')), { 0: 'pruned, or counted with --dry-run (skipped while another node prunes)', 2: 'refused (older than allowed: the largest catchUp plus 1h) or bad duration, bad usage or setting', 4: 'store unreachable' })
    .description("delete finished runs older than D (default: the retention setting), in batches; never a job's newest run, a pending or running one, or one younger than the largest catchUp plus 1h")
    .option('--older-than <duration>', 'delete finished runs that started longer ago than this (default: the retention setting)')
    .addOption(settingOption('--retention <duration|off>', 'retention'))
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
        print(options.json, { outcome: 'off', deleted: 0, dryRun, cutoff: null, olderThan: null, olderThanMs: null, source }, () =>
          'retention is off and no --older-than was given: nothing pruned');
        return;
      }

      // A row younger than a job's catchUp is what keeps its period from running again.
      const { jobs, invalid } = await jobsOf(config);
      if (invalid.length > 0) log.warn({ files: invalid.map((f) => f.file) }, 'invalid job files are not counted in the catchUp check');
      const check = checkRetention(olderThanMs, jobs);
      if (!check.ok) {
        const message = retentionRefusal(source, olderThanMs, check);
        throw source === '--older-than' ? new UsageError(message) : new ConfigError(message);
      }

      const stores = await openStores(config);
      try {
        const r = await stores.store.prune({ olderThanMs, dryRun });
        // Expired ctx.once keys go with the history (they already count as absent).
        const expiredKeys = r.outcome === 'pruned' ? await stores.onceStore.pruneExpired({ dryRun }) : 0;
        const olderThan = formatDuration(olderThanMs);
        const cutoff = r.cutoff.toISOString();
        print(options.json, { outcome: r.outcome, deleted: r.deleted, dryRun, cutoff, olderThan, olderThanMs, source, batches: r.batches, expiredKeys }, () => {
          if (r.outcome === 'locked') return `another node is pruning now: skipped (nothing deleted; cutoff would have been ${cutoff})`;
          const what = dryRun ? `would delete ${r.deleted} finished run(s)` : `deleted ${r.deleted} finished run(s)`;
          const keys = expiredKeys > 0 ? `; ${dryRun ? 'would delete' : 'deleted'} ${expiredKeys} expired ctx.once key(s)` : '';
          return `${what} started before ${cutoff} (older than ${olderThan}, from ${source === 'retention' ? 'the retention setting' : '--older-than'})${keys}${dryRun ? '; dry run: nothing deleted' : ''}`;
        });
      } finally {
        await stores.close();
      }
    });
}
