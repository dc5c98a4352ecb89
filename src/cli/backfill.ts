/**
 * `backfill <job> --from ISO --to ISO [--concurrency N] [--dry-run] [--force] [--detach]`: records a
 * backfill (src/actions/backfill.ts) that the daemons run, then follows it to its end: a progress bar
 * on a terminal, plain lines otherwise, one JSON line a second with --json. Closing the terminal
 * stops the following, not the backfill; the same command again follows it on.
 *
 * `backfill --status`, `--pause <id>`, `--resume <id>`, `--cancel <id>`: every backfill, or one changed.
 */
import type { Command } from 'commander';
import { SchedulerError, UsageError } from '../errors.js';
import { openStores } from './lazy.js';
import { EXIT, withExitStatuses } from './exit.js';
import { jobsOf, parseInstantFlag, print, setup, table, withCommonOptions, type CommonOptions } from './common.js';
import { unknownJob } from '../jobs/unknown.js';
import { cliActor } from '../audit/trail.js';
import { backfillView, changeBackfill, parseConcurrency, startBackfill, type BackfillChange, type BackfillView } from '../actions/backfill.js';
import type { Stores } from '../runtime.js';

interface BackfillOptions extends CommonOptions {
  from?: string;
  to?: string;
  concurrency?: string;
  dryRun?: boolean;
  force?: boolean;
  detach?: boolean;
  status?: boolean;
  pause?: string;
  resume?: string;
  cancel?: string;
}

/** How often the follower reads the backfill's counts. */
const FOLLOW_MS = 500;
/** The window the rate is measured over. */
const RATE_WINDOW_MS = 10_000;
/** Without a terminal and without --json: a line this often. */
const PLAIN_LINE_MS = 5000;

export function backfillCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('backfill')), {
    0: 'every period succeeded (or was skipped)', 1: 'a period failed, or the backfill was cancelled', 2: 'bad range or usage', 3: 'refused', 4: 'store unreachable',
  })
    .description('run every period of a job\'s schedule in [--from, --to] once, on the daemons, at most --concurrency at once cluster-wide; or show, pause, resume, cancel backfills')
    .argument('[job]', 'the job to backfill')
    .option('--from <iso>', 'the first instant of the range (inclusive)')
    .option('--to <iso>', 'the last instant of the range (inclusive; not later than now)')
    .option('--concurrency <n>', 'periods run at once, cluster-wide (1 to 1000)', '1')
    .option('--force', 'also run periods that already succeeded')
    .option('--dry-run', 'count the periods it would take, write nothing')
    .option('--detach', 'record the backfill and return at once, without following it')
    .option('--status', 'every backfill and its progress, newest first')
    .option('--pause <id>', 'pause a backfill: no new period starts (those running end)')
    .option('--resume <id>', 'resume a paused backfill')
    .option('--cancel <id>', 'cancel a backfill: its pending periods are recorded cancelled (those running end)')
    .addHelpText('after', `
Examples:
  scheduler backfill hourly-report --from 2026-11-01T00:00:00Z --to 2026-11-30T23:00:00Z --concurrency 8
  scheduler backfill hourly-report --from 2026-11-01T00:00:00Z --to 2026-11-30T23:00:00Z --dry-run
  scheduler backfill --status
  scheduler backfill --cancel bf-3f9a2c1d0e`)
    .action(async (name: string | undefined, options: BackfillOptions) => {
      const changes = (['pause', 'resume', 'cancel'] as const).filter((c) => options[c] !== undefined);
      const modes = changes.length + (options.status ? 1 : 0);
      if (modes > 1) throw new UsageError('give one of --status, --pause <id>, --resume <id>, --cancel <id>');
      if (modes === 1 && name !== undefined) throw new UsageError(`--status, --pause, --resume and --cancel take no job name (got '${name}')`);
      if (modes === 0 && name === undefined) throw new UsageError('a job is needed: backfill <job> --from <ISO> --to <ISO>, or backfill --status');
      const from = parseInstantFlag('--from', options.from);
      const to = parseInstantFlag('--to', options.to);
      if (modes === 0 && (!from || !to)) throw new UsageError('--from and --to are both needed: backfill <job> --from <ISO> --to <ISO>');
      const concurrency = parseConcurrency(options.concurrency);
      const { config } = await setup(options);
      if (options.status || changes.length > 0) {
        const stores = await openStores(config);
        try {
          if (options.status) {
            const list = (await stores.backfillStore.list({ limit: 100 })).map(backfillView);
            print(options.json, { backfills: list }, () => statusTable(list));
          } else {
            const change: BackfillChange = changes[0]!;
            const view = await changeBackfill(stores, options[change]!, change, cliActor());
            print(options.json, view, () => `backfill ${view.id} of ${view.job}: ${view.status}`);
          }
        } finally {
          await stores.close();
        }
        return;
      }
      const { jobs, invalid } = await jobsOf(config);
      const job = jobs.find((j) => j.name === name);
      if (!job) throw unknownJob(name!, jobs.map((j) => j.name), invalid);
      const stores = await openStores(config);
      try {
        const start = await startBackfill(stores, { job, from: from!, to: to!, concurrency, force: options.force === true, dryRun: options.dryRun === true, actor: cliActor() });
        if (start.dryRun) {
          const d = start.dryRun;
          print(options.json, { dryRun: true, job: job.name, ...d }, () => `${job.name}: ${d.total} period${d.total === 1 ? '' : 's'} from ${d.first} to ${d.last}; ${options.force ? 'all would run (--force)' : `${d.alreadySucceeded} already succeeded (skipped), ${d.wouldRun} would run`}; nothing written`);
          return;
        }
        const b = start.backfill!;
        const said = `backfill ${b.id} of ${b.job}: ${start.created ? 'created' : `continued (${b.status})`}, ${b.total} periods, concurrency ${b.concurrency}${start.created ? '' : ` (the running one of this range; its concurrency stays ${b.concurrency})`}`;
        if (options.detach) {
          print(options.json, { ...b, created: start.created }, () => said);
          return;
        }
        process.stderr.write(`${said}\n`);
        const live = (await stores.nodeStore.list({ recentMs: 60_000 })).filter((n) => n.alive);
        if (live.length === 0) process.stderr.write('scheduler: warning: no daemon is running; the backfill waits for one (scheduler run)\n');
        const end = await follow(stores, b.id, options.json === true);
        // Interrupted: 130, as a shell reports a command ended by Ctrl-C.
        if (end === 'interrupted') process.exitCode = 130;
        else if (end.failed > 0 || end.status === 'cancelled') process.exitCode = EXIT.failed;
      } finally {
        await stores.close();
      }
    });
}

function statusTable(list: BackfillView[]): string {
  if (list.length === 0) return 'no backfill';
  return table([
    ['ID', 'JOB', 'STATUS', 'DONE', 'FAILED', 'RUNNING', 'TOTAL', 'RANGE', 'BY'],
    ...list.map((b) => [b.id, b.job, b.status, String(b.done), String(b.failed), String(b.running), String(b.total), `${b.from} to ${b.to}`, b.createdBy]),
  ]);
}

/** ETA text: 41s, 12m 5s, 2h 3m. */
function etaText(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

/** Follows the backfill until it is done or cancelled; Ctrl-C leaves it to the daemons. */
async function follow(stores: Stores, id: string, json: boolean): Promise<BackfillView | 'interrupted'> {
  const tty = !json && process.stderr.isTTY === true;
  const samples: Array<{ at: number; n: number }> = [];
  let lastPlain = 0;
  let interrupted = false;
  const onInt = () => {
    interrupted = true;
  };
  process.once('SIGINT', onInt);
  process.once('SIGTERM', onInt);
  try {
    for (;;) {
      const found = await stores.backfillStore.get(id).catch((err: unknown) => {
        if (err instanceof SchedulerError && err.code === 'E_STORE_UNAVAILABLE') return null; // the store may be failing over: read again
        throw err;
      });
      if (found === undefined) throw new SchedulerError('E_NOT_FOUND', `backfill ${id} is gone (pruned?)`);
      if (found) {
        const v = backfillView(found);
        const now = performance.now();
        samples.push({ at: now, n: v.done + v.failed });
        while (samples.length > 2 && samples[0]!.at < now - RATE_WINDOW_MS) samples.shift();
        const first = samples[0]!;
        const rate = now - first.at > 0 ? ((v.done + v.failed - first.n) * 1000) / (now - first.at) : 0;
        const left = v.total - v.done - v.failed;
        const eta = rate > 0 ? left / rate : Infinity;
        const ended = v.status === 'done' || v.status === 'cancelled';
        if (json) {
          process.stdout.write(`${JSON.stringify({ type: ended ? 'end' : 'progress', ...v, rate: Math.round(rate * 10) / 10, etaSeconds: Number.isFinite(eta) ? Math.round(eta) : null })}\n`);
        } else if (tty) {
          const width = 30;
          const filled = v.total > 0 ? Math.round(((v.done + v.failed) / v.total) * width) : width;
          process.stderr.write(`\r\x1b[K[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${v.done + v.failed}/${v.total} done ${v.done} failed ${v.failed} running ${v.running} · ${rate.toFixed(1)}/s · ETA ${ended ? '0s' : etaText(eta)}${v.status === 'paused' ? ' · paused' : ''}`);
          if (ended) process.stderr.write('\n');
        } else if (ended || now - lastPlain >= PLAIN_LINE_MS) {
          lastPlain = now;
          process.stderr.write(`backfill ${id}: ${v.status}, ${v.done} done, ${v.failed} failed, ${v.running} running, ${v.total} in all, ${rate.toFixed(1)}/s\n`);
        }
        if (ended) {
          if (!json) process.stdout.write(`backfill ${id} of ${v.job} ${v.status === 'done' ? 'done' : 'cancelled'}: ${v.counts.succeeded} succeeded, ${v.counts.skipped} skipped, ${v.counts.failed} failed, ${v.counts.cancelled} cancelled, of ${v.total}\n`);
          return v;
        }
      }
      if (interrupted) {
        if (tty) process.stderr.write('\n');
        process.stderr.write(`backfill ${id} goes on in the daemons; the same command follows it again, 'backfill --status' shows it, 'backfill --cancel ${id}' stops it\n`);
        return 'interrupted';
      }
      await new Promise((r) => setTimeout(r, FOLLOW_MS));
    }
  } finally {
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onInt);
  }
}
