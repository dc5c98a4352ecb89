/** `keys`: ctx.once's keys, for audits: key, status, attempts made, first and last run, result or error. */
import type { Command } from 'commander';
import { UsageError } from '../errors.js';
import { openStores } from './lazy.js';
import { ONCE_STATUSES, type OnceRecord, type OnceStatus } from '../store/types.js';
import { withExitStatuses } from './exit.js';
import { parseCount, print, setup, table, withCommonOptions, type CommonOptions } from './common.js';

interface KeysOptions extends CommonOptions {
  prefix?: string;
  status?: string;
  job?: string;
  limit: string;
}

/** A key as `keys --json` prints it. */
export function keyView(r: OnceRecord) {
  let result: unknown = null;
  if (r.resultJson !== null) {
    try {
      result = JSON.parse(r.resultJson);
    } catch {
      result = r.resultJson;
    }
  }
  return {
    key: r.key, job: r.job, status: r.status, attempts: r.attempts, fingerprint: r.fingerprint,
    firstRunId: r.firstRunId, lastRunId: r.holder.runId, lastAttempt: r.holder.attempt, lastNodeId: r.holder.nodeId,
    // A processing key whose holder is gone is taken over by its next caller.
    holderLive: r.status === 'processing' ? r.holderLive : null,
    result, error: r.error,
    createdAt: new Date(r.createdAt).toISOString(), updatedAt: new Date(r.updatedAt).toISOString(), expiresAt: new Date(r.expiresAt).toISOString(), expired: r.expired,
  };
}

const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

export function keysCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('keys')), { 0: 'ok', 2: 'bad --status or --limit, bad usage or setting', 4: 'store unreachable' })
    .description('the ctx.once keys, most recently written first: key, status, attempts made, first and last run, result or error')
    .option('--prefix <p>', 'only keys that start with this')
    .option('--status <status>', `only keys with this status (${ONCE_STATUSES.join(', ')})`)
    .option('--job <job>', 'only keys last taken by a run of this job')
    .option('--limit <n>', 'how many keys', '100')
    .action(async (options: KeysOptions) => {
      const limit = parseCount('--limit', options.limit);
      if (options.status !== undefined && !ONCE_STATUSES.includes(options.status as OnceStatus)) {
        throw new UsageError(`invalid --status ${options.status}: expected one of ${ONCE_STATUSES.join(', ')}`);
      }
      const { config } = await setup(options);
      const stores = await openStores(config);
      let keys: OnceRecord[];
      try {
        keys = await stores.onceStore.list({ prefix: options.prefix, status: options.status as OnceStatus | undefined, job: options.job, limit });
      } finally {
        await stores.close();
      }
      print(options.json, keys.map(keyView), () => keys.length === 0 ? 'no ctx.once keys' : table([
        ['KEY', 'STATUS', 'ATTEMPTS', 'FIRST RUN', 'LAST RUN', 'RESULT / ERROR'],
        ...keys.map((k) => {
          const status = k.expired ? `${k.status} (expired)` : k.status === 'processing' && !k.holderLive ? 'processing (holder gone)' : k.status;
          const outcome = k.status === 'failed' ? `error: ${(k.error ?? '').split('\n')[0]}` : k.status === 'succeeded' ? (k.resultJson ?? 'undefined') : '-';
          return [cut(k.key, 36), status, String(k.attempts), k.firstRunId, `${k.holder.runId} (${cut(k.holder.nodeId, 14)})`, cut(outcome, 40)];
        }),
      ]));
    });
}
