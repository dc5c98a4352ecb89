/**
 * `run-once`: one scheduling pass (the periods within catchUp that have no row), or named jobs run by
 * hand now, or one period of a job run by hand (`--period`).
 */
import type { Command } from 'commander';
import { RefusedError, SchedulerError } from '../errors.js';
import type { Job } from '../jobs/types.js';
import { openRuntime, openStore, type Runtime } from '../runtime.js';
import { Executor, type AttemptResult } from '../run/execute.js';
import type { PeriodResult } from '../run/period.js';
import { isPeriod, latestPeriodAtOrBefore, nextPeriodAfter, periodKey, periodsBetween } from '../time/schedule.js';
import type { RunStore } from '../store/types.js';
import type { Logger } from '../log.js';
import { EXIT } from './exit.js';
import { jobsOf, print, setup, table, withCommonOptions, type CommonOptions } from './common.js';
import { unknownJob } from './next.js';
import { durationText } from './views.js';

interface RunOnceOptions extends CommonOptions {
  period?: string;
  force?: boolean;
  dryRun?: boolean;
}

interface Report {
  runs: AttemptResult[];
  notRun: Array<{ job: string; periodKey?: string; outcome: string; reason?: string }>;
  invalid: Array<{ file: string; problems: string[] }>;
}

const FAILED = new Set(['failed', 'timed_out', 'abandoned', 'interrupted']);

export function runOnceCommand(program: Command): void {
  withCommonOptions(program.command('run-once'))
    .description('one scheduling pass and exit; or run the named jobs now, by hand')
    .argument('[jobs...]', 'run these jobs now (manual runs) instead of a scheduling pass')
    .option('--period <iso>', 'with one job: run that cron period by hand')
    .option('--force', 'with --period: run a period that already succeeded')
    .option('--dry-run', 'run bodies with ctx.dryRun = true; no run row, no lock')
    .addHelpText('after', `
Exit: 0 all ran (or nothing was due), 1 a run failed, 2 bad usage or job files, 3 refused, 4 store or Redis unreachable.

Examples:
  scheduler run-once                                   # a pass, for a systemd timer or a Kubernetes CronJob
  scheduler run-once nightly-report                    # run a job now, by hand
  scheduler run-once nightly-report --period 2026-11-30T18:00:00.000Z
  scheduler run-once nightly-report --dry-run --json`)
    .action(async (names: string[], options: RunOnceOptions) => {
      if (options.period !== undefined && names.length !== 1) {
        throw new SchedulerError('E_USAGE', '--period needs exactly one job name: run-once <job> --period <ISO instant>');
      }
      if (options.force && options.period === undefined) throw new SchedulerError('E_USAGE', '--force only applies with --period');
      const { config, log } = setup(options);
      const { jobs, invalid } = await jobsOf(config);
      for (const f of invalid) for (const p of f.problems) log.error(p);
      const selected: Job[] = [];
      for (const name of names) {
        const job = jobs.find((j) => j.name === name);
        if (!job) throw unknownJob(name, jobs.map((j) => j.name), invalid);
        selected.push(job);
      }
      let period: Date | undefined;
      if (options.period !== undefined) {
        period = parsePeriod(selected[0]!, options.period);
      }
      const report: Report = { runs: [], notRun: [], invalid };
      if (options.dryRun) {
        await dryRun(config, log, names.length > 0 ? selected : jobs.filter((j) => j.enabled), names.length > 0, period, report);
      } else {
        const rt = await openRuntime(config, log);
        try {
          if (names.length === 0) await pass(rt, jobs.filter((j) => j.enabled), report);
          else await manual(rt, selected, period, options.force === true, report);
        } finally {
          await rt.close();
        }
      }
      print(options.json, report, () => render(report));
      const failed = report.runs.some((r) => FAILED.has(r.status)) || report.notRun.some((n) => n.outcome === 'error');
      const refused = report.notRun.some((n) => n.outcome === 'refused');
      process.exitCode = failed ? EXIT.failed : refused ? EXIT.refused : invalid.length > 0 ? EXIT.invalid : EXIT.ok;
    });
}

function parsePeriod(job: Job, text: string): Date {
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
  return instant;
}

function collect(report: Report, results: PeriodResult[]): void {
  for (const r of results) {
    report.runs.push(...r.attempts);
    if (r.attempts.length === 0) {
      report.notRun.push({ job: r.job, periodKey: r.periodKey, outcome: r.claim, ...(r.error ? { reason: r.error } : {}) });
    }
  }
}

/** The scheduling pass: for every job, what catch-up would do now. */
async function pass(rt: Runtime, jobs: Job[], report: Report): Promise<void> {
  // Attempts whose node died are taken over first, as a daemon would.
  const takeovers = await rt.takeover.sweep(new Map(jobs.map((j) => [j.name, j])));
  const now = new Date();
  const results = await Promise.all(jobs.map((job) => rt.runner.catchUp(job, now, { latestTrigger: 'catch-up' })));
  for (const r of results) collect(report, r.ran);
  collect(report, await Promise.all(takeovers));
}

async function refuseIfInFlight(store: RunStore, job: Job): Promise<void> {
  if (job.overlap !== 'skip') return;
  const live = await store.liveRuns(job.name);
  if (live.length > 0) {
    const r = live[0]!;
    throw new RefusedError(`job '${job.name}' has a run in flight (${r.periodKey}, attempt ${r.attempt}, node ${r.nodeId}) and its overlap is 'skip'`);
  }
}

async function manual(rt: Runtime, jobs: Job[], period: Date | undefined, force: boolean, report: Report): Promise<void> {
  await Promise.all(jobs.map(async (job) => {
    try {
      const scheduledAt = period ?? new Date();
      let attempt = 1;
      if (period) {
        // An attempt of a dead node is declared abandoned first (its lease expired), so it does not block.
        await rt.takeover.sweep(new Map([[job.name, job]]), { restart: false });
        const runs = await rt.store.periodRuns(job.name, period);
        const last = runs[runs.length - 1];
        if (last?.status === 'running') {
          throw new RefusedError(`period ${last.periodKey} is in flight (attempt ${last.attempt}, node ${last.nodeId})`);
        }
        if (last?.status === 'succeeded' && !force) {
          throw new RefusedError(`period ${last.periodKey} already succeeded (attempt ${last.attempt}); use --force to run it again`);
        }
        attempt = (last?.attempt ?? 0) + 1;
      } else {
        await refuseIfInFlight(rt.store, job);
      }
      const claim = await rt.claimer.claim({ job, scheduledAt, trigger: 'manual', attempt, checkOverlap: false });
      if (claim.outcome !== 'won') {
        throw new RefusedError(`period ${periodKey(job.name, scheduledAt)} was claimed by another node at the same moment`);
      }
      report.runs.push(await rt.executor.execute(job, claim.run, claim.lease, claim.release));
    } catch (err) {
      if (!(err instanceof RefusedError)) throw err;
      report.notRun.push({ job: job.name, outcome: 'refused', reason: err.message });
    }
  }));
}

async function dryRun(config: Parameters<typeof openStore>[0], log: Logger, jobs: Job[], byName: boolean, period: Date | undefined, report: Report): Promise<void> {
  const store = await openStore(config);
  try {
    const executor = new Executor(store, config.nodeId, log);
    const now = new Date();
    for (const job of jobs) {
      let due: Date[];
      if (byName) due = [period ?? now];
      else {
        const candidates = periodsBetween(job.schedule, new Date(now.getTime() - job.catchUpMs - 1), now);
        const withRows = candidates.length ? await store.periodsWithRows(job.name, candidates[0]!.getTime(), now.getTime()) : new Set<number>();
        const missing = candidates.filter((p) => !withRows.has(p.getTime()));
        due = job.coalesce ? missing.slice(-1) : missing;
      }
      for (const p of due) report.runs.push(await executor.dryRun(job, p, byName ? 'manual' : 'catch-up'));
    }
  } finally {
    await store.close();
  }
}

function render(report: Report): string {
  const lines: string[] = [];
  if (report.runs.length > 0) {
    lines.push(table([
      ['JOB', 'PERIOD', 'ATTEMPT', 'TRIGGER', 'STATUS', 'DURATION', 'ERROR'],
      ...report.runs.map((r) => [r.job, r.scheduledAt.toISOString(), String(r.attempt), r.trigger, r.status, durationText(r.durationMs), r.error ?? '']),
    ]));
  }
  for (const n of report.notRun) {
    lines.push(`${n.job}${n.periodKey ? ` ${n.periodKey}` : ''}: not run (${n.outcome})${n.reason ? `: ${n.reason}` : ''}`);
  }
  if (lines.length === 0) lines.push('nothing was due');
  return lines.join('\n');
}
