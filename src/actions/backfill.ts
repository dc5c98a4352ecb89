/**
 * Backfills as actions: the one path of `backfill <job> --from --to` and `POST /api/jobs/<name>/backfill`,
 * and of `backfill --pause|--resume|--cancel <id>` and their API twins. Each is audited (action
 * `backfill`, `backfill-pause`, `backfill-resume`, `backfill-cancel`), done or refused. The daemons
 * run the periods (src/backfill/runner.ts); nothing here runs a body.
 *
 * The same command again continues: a running or paused backfill of the job with the same range and
 * force is the one followed, not a new one. Another active backfill of the job whose range overlaps
 * is refused (its periods would race each other's attempts).
 */
import { randomBytes } from 'node:crypto';
import { RefusedError, SchedulerError, UsageError } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { AuditStore, BackfillRecord, BackfillStore } from '../store/types.js';
import type { Database } from '../store/database.js';
import { recordAction } from '../audit/trail.js';
import { backfillPeriods, MAX_BACKFILL_CONCURRENCY } from '../backfill/periods.js';
import { backfillView, type BackfillView } from '../backfill/view.js';

export { backfillView, type BackfillView };

export interface BackfillStores {
  db: Pick<Database, 'now'>;
  backfillStore: BackfillStore;
  auditStore: AuditStore;
}

export interface StartBackfillInput {
  job: Job;
  from: Date;
  to: Date;
  concurrency: number;
  force: boolean;
  dryRun?: boolean;
  actor: string;
  warn?: (line: string) => void;
}

export interface BackfillStart {
  /** Created now, or the running one of the same range continued. */
  created: boolean;
  backfill: BackfillView | null;
  /** --dry-run: what it would take. */
  dryRun?: { total: number; first: string; last: string; alreadySucceeded: number; wouldRun: number };
}

/** A --concurrency value. */
export function parseConcurrency(value: string | number | undefined, flag = '--concurrency'): number {
  if (value === undefined) return 1;
  const n = typeof value === 'number' ? value : /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_BACKFILL_CONCURRENCY) throw new UsageError(`invalid ${flag} ${value}: expected an integer from 1 to ${MAX_BACKFILL_CONCURRENCY}`);
  return n;
}

const rangeText = (from: Date, to: Date) => `${from.toISOString()}/${to.toISOString()}`;

export async function startBackfill(stores: BackfillStores, input: StartBackfillInput): Promise<BackfillStart> {
  const { job, from, to, concurrency, force, actor } = input;
  const audit = (result: 'done' | 'refused', detail: string) => recordAction(stores.auditStore, { actor, action: 'backfill', job: job.name, period: rangeText(from, to), reason: null, force, result, detail }, input.warn);
  try {
    if ((job.shards ?? 1) > 1) throw new UsageError(`job '${job.name}' is sharded (${job.shards} shards): a backfill takes unsharded jobs only; run a sharded period with run-once --period`);
    const now = await stores.db.now();
    const periods = backfillPeriods(job, from, to, new Date(now));
    if (input.dryRun) {
      const alreadySucceeded = force ? 0 : await stores.backfillStore.succeededPeriods(job.name, from, to);
      return { created: false, backfill: null, dryRun: { total: periods.length, first: periods[0]!.toISOString(), last: periods.at(-1)!.toISOString(), alreadySucceeded, wouldRun: periods.length - alreadySucceeded } };
    }
    const active = await stores.backfillStore.list({ active: true, job: job.name, limit: 1000 });
    const same = active.find((b) => b.from.getTime() === from.getTime() && b.to.getTime() === to.getTime() && b.force === force);
    if (same) return { created: false, backfill: backfillView(same) };
    const overlapping = active.find((b) => b.from.getTime() <= to.getTime() && from.getTime() <= b.to.getTime());
    if (overlapping) {
      throw new RefusedError(`backfill ${overlapping.id} of job '${job.name}' (${rangeText(overlapping.from, overlapping.to)}, ${overlapping.status}) overlaps this range; wait for it, or cancel it with 'backfill --cancel ${overlapping.id}'`);
    }
    const id = `bf-${randomBytes(5).toString('hex')}`;
    const created = await stores.backfillStore.create({ id, job: job.name, from, to, concurrency, force, createdBy: actor }, periods);
    await audit('done', `backfill ${id}: ${periods.length} period${periods.length === 1 ? '' : 's'}, concurrency ${concurrency}`);
    return { created: true, backfill: backfillView(created) };
  } catch (err) {
    if (err instanceof SchedulerError && (err.code === 'E_USAGE' || err.code === 'E_REFUSED')) await audit('refused', err.message);
    throw err;
  }
}

export type BackfillChange = 'pause' | 'resume' | 'cancel';

const FROM: Record<BackfillChange, Array<BackfillRecord['status']>> = { pause: ['running'], resume: ['paused'], cancel: ['running', 'paused'] };
const TO: Record<BackfillChange, BackfillRecord['status']> = { pause: 'paused', resume: 'running', cancel: 'cancelled' };

/** Pauses, resumes or cancels a backfill; refused (RefusedError) when it is not in a state that allows it. */
export async function changeBackfill(stores: BackfillStores, id: string, change: BackfillChange, actor: string, warn?: (line: string) => void): Promise<BackfillView> {
  const found = await stores.backfillStore.get(id);
  if (!found) throw new SchedulerError('E_NOT_FOUND', `no backfill ${id}; 'backfill --status' lists them`);
  const audit = (result: 'done' | 'refused', detail: string) => recordAction(stores.auditStore, { actor, action: `backfill-${change}`, job: found.job, period: rangeText(found.from, found.to), reason: null, force: false, result, detail }, warn);
  const changed = await stores.backfillStore.setStatus(id, FROM[change], TO[change]);
  if (!changed) {
    const now = (await stores.backfillStore.get(id))!;
    const message = `backfill ${id} is ${now.status}: it cannot be ${change === 'pause' ? 'paused' : change === 'resume' ? 'resumed' : 'cancelled'}`;
    await audit('refused', message);
    throw new RefusedError(message);
  }
  await audit('done', `backfill ${id} ${TO[change]}`);
  return backfillView((await stores.backfillStore.get(id))!);
}
