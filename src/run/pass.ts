/**
 * `run-once` as machinery, in one place for the real pass and its --dry-run: a scheduling pass (owed
 * attempts first, then the reconciler's selection of periods up to now), and the rules of a manual
 * run (`run-once <job>`, `run-once <job> --period <ISO>`).
 */
import { RefusedError, SchedulerError } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { Runtime } from '../runtime.js';
import type { RunRecord, RunStore } from '../store/types.js';
import { isPeriod, latestPeriodAtOrBefore, nextPeriodAfter, periodKey } from '../time/schedule.js';
import type { AttemptResult, Executor } from './execute.js';
import type { PeriodResult } from './period.js';
import { previewReconcile } from './reconcile.js';
import { localDate } from '../calendars/dates.js';

/**
 * One scheduling pass: stale attempts are taken over and due pending attempts run (as a daemon's
 * sweep would), then the periods up to now with no row are run or recorded (the reconciler's rules:
 * catchUp, coalesce, missed). The pass waits for the retries its runs make owed. Never throws for a
 * run; throws when the store cannot be read.
 */
export async function runPass(rt: Runtime, jobs: Job[]): Promise<PeriodResult[]> {
  const byName = new Map(jobs.map((j) => [j.name, j]));
  const owed = await rt.takeover.sweep(byName, { followOwed: true, waitForGrace: true });
  // Periods are due by the store's clock, whatever this machine's says.
  const now = new Date(rt.clock.now());
  await rt.reconciler.declare(jobs, now, 'catch-up');
  const reconciled = await rt.reconciler.reconcile(jobs, { upTo: now, now, followOwed: true });
  const results = [...(await Promise.all(owed)), ...(await Promise.all(reconciled.ran)).flat()];
  await rt.reconciler.flush(true);
  // An attempt of this pass that lost its lease wrote no outcome (its row is no longer provably this
  // process's): once its lease has run out by the store's clock, the pass takes it over like any
  // node's sweep would, and runs the attempt it owes, rather than leave the period to the next pass.
  const lapsed = results.flatMap((r) => r.attempts).filter((a) => !a.recorded && a.status === 'abandoned');
  if (lapsed.length > 0) {
    const waitMs = Math.max(...lapsed.map((a) => byName.get(a.job)?.lockTtlMs ?? 0)) + 1500;
    await new Promise((r) => setTimeout(r, waitMs));
    results.push(...(await Promise.all(await rt.takeover.sweep(byName, { followOwed: true, waitForGrace: true }))));
  }
  return results;
}

/** --dry-run of the pass: the same selection, bodies run with ctx.dryRun, nothing written. */
export async function dryRunPass(rt: Pick<Runtime, 'store' | 'jobStore'>, executor: Executor, jobs: Job[], now = new Date()): Promise<AttemptResult[]> {
  const out: AttemptResult[] = [];
  // A paused job's periods would be recorded skipped (paused) and its owed attempts left pending: not run.
  const paused = await rt.jobStore.paused();
  const byName = new Map(jobs.filter((j) => !paused.has(j.name)).map((j) => [j.name, j]));
  for (const pending of await rt.store.duePending()) {
    const job = byName.get(pending.job);
    if (job) out.push(await executor.dryRun(job, pending.scheduledAt, pending.trigger, pending.attempt, pending.shard));
  }
  const plans = await previewReconcile(rt.store, rt.jobStore, [...byName.values()], { upTo: now, now, fresh: 'catch-up' });
  for (const job of byName.values()) {
    for (const p of plans.get(job.name)?.run ?? []) {
      // A sharded period: the shards that have no row yet.
      const have = (job.shards ?? 1) > 1 ? await rt.store.periodShards(job.name, p) : new Set<number>();
      for (let shard = 0; shard < (job.shards ?? 1); shard++) if (!have.has(shard)) out.push(await executor.dryRun(job, p, 'catch-up', 1, shard));
    }
  }
  return out;
}

/**
 * A --period instant: an ISO instant that is a period of the job, and, when `now` is given, not later
 * than now (by the store's clock, once it can be read; see run-once).
 */
export function parsePeriod(job: Job, text: string, now?: Date): Date {
  const instant = new Date(text);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(text) || Number.isNaN(instant.getTime())) {
    throw new SchedulerError('E_USAGE', `invalid --period ${text}: expected an ISO-8601 instant such as 2026-11-30T18:00:00.000Z`);
  }
  if (!isPeriod(job.schedule, instant)) {
    const before = latestPeriodAtOrBefore(job.schedule, instant);
    const after = nextPeriodAfter(job.schedule, instant);
    throw new SchedulerError('E_NOT_A_PERIOD',
      `--period ${instant.toISOString()} is not a period of job '${job.name}' (${job.schedule.expression}, ${job.timezone}); nearest periods: before ${before?.toISOString() ?? 'none'}, after ${after?.toISOString() ?? 'none'}`);
  }
  if (now && instant.getTime() > now.getTime()) {
    // Run now, it would take the real period's row: the period would then never run at its time.
    const latest = latestPeriodAtOrBefore(job.schedule, now);
    const next = nextPeriodAfter(job.schedule, now);
    throw new SchedulerError('E_USAGE',
      `--period ${instant.toISOString()} of job '${job.name}' is later than now; its next period is due at ${next?.toISOString() ?? 'never'}${latest ? ` (the latest past one is ${latest.toISOString()})` : ''}`);
  }
  return instant;
}

async function refuseIfInFlight(store: RunStore, job: Job): Promise<void> {
  if (job.overlap !== 'skip') return;
  const live = await store.liveRuns(job.name);
  if (live.length > 0) {
    const r = live[0]!;
    throw new RefusedError(`job '${job.name}' has a run in flight (${r.periodKey}, attempt ${r.attempt}, node ${r.nodeId}) and its overlap is 'skip'`);
  }
}

/**
 * The attempt a manual run of `period` takes: 1 when the period has no row; the next one when its
 * last attempt failed, timed out, was abandoned or interrupted (or succeeded, with `force`).
 * Refused while an attempt is in flight or owed, and after success without `force`.
 */
export function manualAttempt(runs: RunRecord[], force: boolean): number {
  const last = runs[runs.length - 1];
  if (last?.status === 'running') throw new RefusedError(`period ${last.periodKey} is in flight (attempt ${last.attempt}, node ${last.nodeId})`);
  if (last?.status === 'pending') {
    throw new RefusedError(`period ${last.periodKey} has attempt ${last.attempt} owed (pending, due ${last.runAt?.toISOString() ?? 'now'}); a node runs it`);
  }
  if (last?.status === 'succeeded' && !force) throw new RefusedError(`period ${last.periodKey} already succeeded (attempt ${last.attempt}); use --force to run it again`);
  return (last?.attempt ?? 0) + 1;
}

/** The refusal of a manual run of a paused job. */
function pausedRefusal(job: string, reason: string | null): RefusedError {
  return new RefusedError(`job '${job}' is paused${reason ? ` (${reason})` : ''}; resume it with 'resume ${job}', or run it anyway with --force`);
}

/** The refusal of a manual run on a date the job's `exclude` names. */
export function calendarRefusal(job: Job, at: Date, excludedBy: string, recorded: boolean): RefusedError {
  const date = localDate(at, job.timezone);
  const what = recorded ? `job '${job.name}' does not run on ${date} (${job.timezone}): excluded by '${excludedBy}'; the run was recorded skipped (calendar)`
    : `period ${periodKey(job.name, at)} of job '${job.name}' is on ${date} (${job.timezone}), excluded by '${excludedBy}'`;
  return new RefusedError(`${what}; use --force to run it anyway`);
}

/**
 * The shards of a sharded period a manual run takes, each at its attempt (manualAttempt per shard):
 * those whose last attempt did not succeed (all, with `force`). Refused while any shard is in flight
 * or owed, and when every shard succeeded (without `force`).
 */
export function manualShards(perShard: Array<{ index: number; runs: RunRecord[] }>, force: boolean): Array<{ index: number; attempt: number }> {
  const out: Array<{ index: number; attempt: number }> = [];
  for (const { index, runs } of perShard) {
    const last = runs[runs.length - 1];
    if (last?.status === 'succeeded' && !force) continue;
    try {
      out.push({ index, attempt: manualAttempt(runs, force) });
    } catch (err) {
      if (err instanceof RefusedError) throw new RefusedError(`shard ${index}: ${err.message}`);
      throw err;
    }
  }
  if (out.length === 0) {
    const key = perShard.find((s) => s.runs.length > 0)?.runs[0]?.periodKey ?? 'the period';
    throw new RefusedError(`period ${key} already succeeded on ${perShard.length === 1 ? `shard ${perShard[0]!.index}` : `every shard (${perShard.length})`}; use --force to run it again`);
  }
  return out;
}

/** What a run by hand took, told once its claim is won (before the body runs). */
export interface ManualStart {
  scheduledAt: Date;
  /** The unsharded attempt, or each shard taken with its attempt. */
  attempt: number;
  shards?: Array<{ index: number; attempt: number }>;
}

/**
 * `run-once <job>` (now, as a manual run) or `run-once <job> --period <ISO>`. Refusals throw
 * RefusedError. A paused job is refused unless `force` (which also runs it, and the retries it owes).
 * So is a period on a date the job's `exclude` names (a run now on such a date is recorded skipped,
 * reason calendar, as a scheduled period would be), unless `force`.
 * A sharded job's manual run is every shard (or `shard` alone), each its own row, all run here.
 */
export async function runManual(rt: Runtime, job: Job, period: Date | undefined, force: boolean, shard?: number, onStarted?: (start: ManualStart) => void): Promise<AttemptResult[]> {
  if (!force) {
    const row = (await rt.jobStore.get([job.name])).get(job.name);
    if (row?.paused) throw pausedRefusal(job.name, row.pausedReason);
  }
  const count = job.shards ?? 1;
  if (shard !== undefined && (!Number.isInteger(shard) || shard < 0 || shard >= count)) {
    throw new SchedulerError('E_USAGE', `invalid --shard ${shard}: job '${job.name}' has ${count} shard${count === 1 ? '' : 's'} (0 to ${count - 1})`);
  }
  const scheduledAt = period ?? new Date(rt.clock.now());
  let attempt = 1;
  let shards: Array<{ index: number; attempt: number }> | undefined = shard !== undefined ? [{ index: shard, attempt: 1 }] : undefined;
  if (period && !force) {
    const excludedBy = job.exclude?.excludedBy(period, job.timezone) ?? null;
    if (excludedBy !== null) throw calendarRefusal(job, period, excludedBy, false);
  }
  if (period) {
    // An attempt of a dead node is declared abandoned first (its lease expired), so it does not block.
    await rt.takeover.takeOverStale(new Map([[job.name, job]]), { waitForGrace: true });
    if (count > 1 || shard !== undefined) {
      const indices = shard !== undefined ? [shard] : Array.from({ length: count }, (_, i) => i);
      shards = manualShards(await Promise.all(indices.map(async (index) => ({ index, runs: await rt.store.periodRuns(job.name, period, index) }))), force);
    } else {
      attempt = manualAttempt(await rt.store.periodRuns(job.name, period), force);
    }
  } else {
    await refuseIfInFlight(rt.store, job);
  }
  const onClaimed = onStarted && ((outcome: PeriodResult['claim']) => {
    if (outcome === 'won' || outcome === 'in-hand') onStarted({ scheduledAt, attempt, ...(shards ? { shards } : {}) });
  });
  const result = await rt.runner.runPeriod(job, scheduledAt, 'manual', { attempt, checkOverlap: 'none', followOwed: true, ignorePause: force, ignoreCalendar: force, ...(shards ? { shards } : {}), ...(onClaimed ? { onClaimed } : {}) });
  if (result.claim === 'stopped' && result.attempts.length === 0) throw new SchedulerError('E_REFUSED', 'this node is stopping: it takes no new claims');
  if (result.claim === 'error') throw new SchedulerError('E_STORE_UNAVAILABLE', result.error ?? 'claim failed');
  // Paused between the check above and the claim: the claim recorded the row skipped (paused).
  if (result.claim === 'skipped-paused' && result.attempts.length === 0) throw pausedRefusal(job.name, null);
  // Run now on an excluded date: the claim recorded the row skipped (calendar).
  if (result.claim === 'skipped-calendar' && result.attempts.length === 0) {
    throw calendarRefusal(job, scheduledAt, job.exclude?.excludedBy(scheduledAt, job.timezone) ?? 'exclude', true);
  }
  if (result.attempts.length === 0) throw new RefusedError(`period ${periodKey(job.name, scheduledAt)} was claimed by another node at the same moment`);
  return result.attempts;
}
