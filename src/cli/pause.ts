/**
 * `pause <job> [--reason T]` and `resume <job>`: cluster-wide, kept in the jobs table. Every node
 * reads the pause on its claims (see src/claim/claim.ts), so no daemon needs to be told and none has
 * to be running: from at most one tick after `pause` returns, the job's periods are recorded
 * skipped (reason paused) and no body starts; owed attempts stay pending until `resume`.
 *
 * Known jobs: the valid jobs of this node's jobs folder, and every job in the jobs table (declared
 * by some node, or paused by name before), since a job may be defined only on other nodes. Names
 * stay in the table for good, so a job that no live node declares (not yet deployed, or removed
 * long ago) is still accepted (a pause before a deploy is legitimate), with a note saying so.
 */
import type { Command } from 'commander';
import { SchedulerError, UsageError, errorMessage } from '../errors.js';
import type { LoadedJobs } from '../jobs/load.js';
import { openStores } from './lazy.js';
import { withExitStatuses } from './exit.js';
import type { JobStore } from '../store/types.js';
import type { Config } from '../config/config.js';
import { jobsOf, print, setup, withCommonOptions, type CommonOptions } from './common.js';
import { knownList, unknownJob } from './next.js';
import { JOB_SEEN_TTL_MS } from '../run/takeover.js';
import { formatLocal, relativeTime } from '../time/display.js';
import { cliActor, recordAction } from '../audit/trail.js';

/** The column's size (migration 0006), in characters. */
export const MAX_REASON_CHARS = 500;

interface PauseOptions extends CommonOptions {
  reason?: string;
}

/** What `pause` / `resume` print with --json. */
export interface PauseReport {
  job: string;
  action: 'pause' | 'resume';
  /** False when the job already was in that state. */
  changed: boolean;
  paused: boolean;
  reason: string | null;
  /** When it was paused (store clock, ISO), null when it is not paused. */
  since: string | null;
  /** When a node last declared the job (store clock, ISO); null when none ever has. */
  declaredAt: string | null;
  /** A live node declared it within JOB_SEEN_TTL_MS (90 s; every node marks its jobs seen every 30 s). */
  declaredRecently: boolean;
  /** The store's clock when this ran (ISO): what the note's relative time is measured from. */
  at: string;
}

/** `--reason`: one line of at most MAX_REASON_CHARS characters; empty means none. */
export function parseReason(text: string | undefined): string | null {
  if (text === undefined || text.trim() === '') return null;
  const chars = [...text].length;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(text) || chars > MAX_REASON_CHARS) {
    throw new UsageError(`invalid --reason (${chars} characters${/[\n\r]/.test(text) ? ', several lines' : ''}): expected one line of at most ${MAX_REASON_CHARS} characters without control characters`);
  }
  return text.trim();
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
  const folder = await readFolder(config);
  const stores = await openStores(config);
  let report: PauseReport;
  try {
    await refuseUnknown(name, folder, stores.jobStore);
    const outcome = await stores.jobStore.setPaused(name, pause, reason);
    const row = (await stores.jobStore.get([name])).get(name);
    const now = await stores.db.now();
    // seen_at 0: the row was made by a pause, no node has declared the job.
    const seenAt = row && row.seenAt > 0 ? row.seenAt : null;
    report = {
      job: name, action: pause ? 'pause' : 'resume', changed: outcome === 'changed', paused: row?.paused ?? pause,
      reason: row?.pausedReason ?? null, since: row?.pausedAt ? new Date(row.pausedAt).toISOString() : null,
      declaredAt: seenAt === null ? null : new Date(seenAt).toISOString(), declaredRecently: seenAt !== null && now - seenAt < JOB_SEEN_TTL_MS,
      at: new Date(now).toISOString(),
    };
    const unchanged = pause ? 'already paused' : 'was not paused: nothing changed';
    await recordAction(stores.auditStore, {
      actor: cliActor(), action: report.action, job: name, period: null, reason, force: false, result: 'done', detail: report.changed ? null : unchanged,
    });
  } finally {
    await stores.close();
  }
  print(options.json, report, () => describe(report));
}

/** The line `pause` / `resume` print, and a note when no live node has the job. */
export function describe(r: PauseReport): string {
  const line = outcomeLine(r);
  const note = declaredNote(r);
  return note ? `${line}\n${note}` : line;
}

function outcomeLine(r: PauseReport): string {
  const why = r.reason ? ` (reason: ${r.reason})` : '';
  if (r.action === 'pause') {
    const what = r.changed ? `paused job '${r.job}'${why}` : `job '${r.job}' was already paused since ${r.since}${why}`;
    return `${what}: every node honours it within one tick (1 s); its periods are recorded skipped (paused) until 'resume ${r.job}'`;
  }
  return r.changed
    ? `resumed job '${r.job}': every node runs its periods again within one tick (1 s); its owed attempts run when due`
    : `job '${r.job}' was not paused: nothing changed`;
}

/** A job no live node declares: a typo of a name still in the table, or a job not deployed yet. */
function declaredNote(r: PauseReport): string | null {
  if (r.declaredRecently) return null;
  const applies = r.action === 'pause' ? 'the pause is kept and applies to the nodes that define it when they run' : 'nothing runs it until a node that defines it runs';
  if (r.declaredAt === null) return `note: no node has declared '${r.job}' yet; ${applies}`;
  const at = new Date(r.declaredAt);
  return `note: no live node has declared '${r.job}' since ${formatLocal(at, 'UTC', 'minute')} UTC (${relativeTime(at, new Date(r.at))}); ${applies}`;
}

type Folder = { loaded: LoadedJobs } | { error: string };

/** The jobs folder, or why it cannot be read (the jobs table may still know the job). */
async function readFolder(config: Config): Promise<Folder> {
  try {
    return { loaded: await jobsOf(config) };
  } catch (err) {
    return { error: errorMessage(err) };
  }
}

/** Throws (exit 2) unless the job is a valid job of the folder or is in the jobs table. */
async function refuseUnknown(name: string, folder: Folder, jobStore: JobStore): Promise<void> {
  const local = 'loaded' in folder ? folder.loaded.jobs.map((j) => j.name) : [];
  if (local.includes(name)) return;
  const table = await jobStore.names();
  if (table.includes(name)) return;
  const known = [...new Set([...local, ...table])].sort();
  if ('error' in folder) {
    throw new SchedulerError('E_UNKNOWN_JOB', `unknown job '${name}': not in the jobs table, and the jobs folder cannot be read to check it (${folder.error}); known jobs: ${knownList(known)}`);
  }
  throw unknownJob(name, known, folder.loaded.invalid);
}
