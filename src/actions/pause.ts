/**
 * Pause and resume, cluster-wide, kept in the jobs table: the one path of `pause`/`resume` and of
 * `POST /api/jobs/<name>/pause|resume`. Every node reads the pause on its claims (src/claim/claim.ts),
 * so no daemon needs to be told: from at most one tick later the job's periods are recorded skipped
 * (reason paused) and no body starts; owed attempts stay pending until resume.
 *
 * Known jobs: the valid jobs of the caller's jobs folder, and every job in the jobs table (declared by
 * some node, or paused by name before), since a job may be defined only on other nodes. A job that no
 * live node declares (not yet deployed, or removed long ago) is still accepted, with a note saying so.
 */
import { SchedulerError, UsageError } from '../errors.js';
import type { InvalidJobFile } from '../jobs/types.js';
import type { AuditStore, JobStore } from '../store/types.js';
import type { Database } from '../store/database.js';
import { JOB_SEEN_TTL_MS } from '../run/takeover.js';
import { formatLocal, relativeTime } from '../time/display.js';
import { recordAction } from '../audit/trail.js';
import { knownList, unknownJob } from '../jobs/unknown.js';

/** The column's size (migration 0006), in characters. */
export const MAX_REASON_CHARS = 500;

/** What `pause` / `resume` print with --json, and what the API answers. */
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

/** A reason: one line of at most MAX_REASON_CHARS characters; empty means none. `what` names it in the refusal. */
export function parseReason(text: string | undefined, what = '--reason'): string | null {
  if (text === undefined || text.trim() === '') return null;
  const chars = [...text].length;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(text) || chars > MAX_REASON_CHARS) {
    throw new UsageError(`invalid ${what} (${chars} characters${/[\n\r]/.test(text) ? ', several lines' : ''}): expected one line of at most ${MAX_REASON_CHARS} characters without control characters`);
  }
  return text.trim();
}

/** The jobs the caller knows of its own: its folder's, or why the folder cannot be read. */
export type LocalJobs = { names: string[]; invalid: InvalidJobFile[] } | { error: string };

export interface PauseStores {
  db: Pick<Database, 'now'>;
  jobStore: JobStore;
  auditStore: AuditStore;
}

export interface PauseInput {
  job: string;
  pause: boolean;
  reason: string | null;
  actor: string;
  local: LocalJobs;
  /** Where a failed audit write is said (the CLI: stderr; a daemon: its log). */
  warn?: (line: string) => void;
}

export async function changePause(stores: PauseStores, input: PauseInput): Promise<PauseReport> {
  const { job: name, pause, reason } = input;
  await refuseUnknown(name, input.local, stores.jobStore);
  const outcome = await stores.jobStore.setPaused(name, pause, reason);
  const row = (await stores.jobStore.get([name])).get(name);
  const now = await stores.db.now();
  // seen_at 0: the row was made by a pause, no node has declared the job.
  const seenAt = row && row.seenAt > 0 ? row.seenAt : null;
  const report: PauseReport = {
    job: name, action: pause ? 'pause' : 'resume', changed: outcome === 'changed', paused: row?.paused ?? pause,
    reason: row?.pausedReason ?? null, since: row?.pausedAt ? new Date(row.pausedAt).toISOString() : null,
    declaredAt: seenAt === null ? null : new Date(seenAt).toISOString(), declaredRecently: seenAt !== null && now - seenAt < JOB_SEEN_TTL_MS,
    at: new Date(now).toISOString(),
  };
  const unchanged = pause ? 'already paused' : 'was not paused: nothing changed';
  await recordAction(stores.auditStore, {
    actor: input.actor, action: report.action, job: name, period: null, reason, force: false, result: 'done', detail: report.changed ? null : unchanged,
  }, input.warn);
  return report;
}

/** The line `pause` / `resume` print, and a note when no live node has the job. */
export function describePause(r: PauseReport): string {
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

/** Throws (E_UNKNOWN_JOB) unless the job is a valid job of the caller's or is in the jobs table. */
async function refuseUnknown(name: string, local: LocalJobs, jobStore: JobStore): Promise<void> {
  const names = 'names' in local ? local.names : [];
  if (names.includes(name)) return;
  const table = await jobStore.names();
  if (table.includes(name)) return;
  const known = [...new Set([...names, ...table])].sort();
  if ('error' in local) {
    throw new SchedulerError('E_UNKNOWN_JOB', `unknown job '${name}': not in the jobs table, and the jobs folder cannot be read to check it (${local.error}); known jobs: ${knownList(known)}`);
  }
  throw unknownJob(name, known, local.invalid);
}
