/**
 * `run-once`: one scheduling pass (the periods within catchUp that have no row), or named jobs run by
 * hand now, or one period of a job run by hand (`--period`).
 */
import type { Command } from 'commander';
import { RefusedError, SchedulerError } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { Runtime } from '../runtime.js';
import { openRuntime, openStores } from './lazy.js';
import type { AttemptResult } from '../run/execute.js';
import type { PeriodResult } from '../run/period.js';
import { EXIT, withExitStatuses } from './exit.js';
import { jobsOf, print, setup, table, withCommonOptions, type CommonOptions } from './common.js';
import { unknownJob } from '../jobs/unknown.js';
import { durationText } from './views.js';
import { cliActor } from '../audit/trail.js';

interface RunOnceOptions extends CommonOptions {
  period?: string;
  force?: boolean;
  dryRun?: boolean;
  shard?: string;
}

interface Report {
  runs: AttemptResult[];
  notRun: Array<{ job: string; periodKey?: string; outcome: string; reason?: string }>;
  invalid: Array<{ file: string; problems: string[] }>;
}

// A cancelled run did not do its work either: a timer or a CronJob running run-once must not read it as done.
const FAILED = new Set(['failed', 'timed_out', 'abandoned', 'interrupted', 'cancelled']);

export function runOnceCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('run-once')), {
    0: 'all ran (or nothing was due)', 1: "a period's last attempt failed (or was cancelled)", 2: 'bad usage or job files', 3: 'refused', 4: 'store or Redis unreachable',
  })
    .description('one scheduling pass and exit; or run the named jobs now, by hand')
    .argument('[jobs...]', 'run these jobs now (manual runs) instead of a scheduling pass')
    .option('--period <iso>', 'with one job: run that cron period by hand')
    .option('--force', 'with named jobs: run a paused job, or on a date its exclude names; with --period: also run a period that already succeeded or is excluded')
    .option('--shard <index>', 'with one sharded job: run only this shard (0 to shards-1), now or of --period')
    .option('--dry-run', 'run bodies with ctx.dryRun = true; no run row, no lock')
    .addHelpText('after', `
Examples:
  scheduler run-once                                   # a pass, for a systemd timer or a Kubernetes CronJob
  scheduler run-once nightly-report                    # run a job now, by hand
  scheduler run-once nightly-report --period 2026-11-30T18:00:00.000Z
  scheduler run-once nightly-report --dry-run --json`)
    .action(async (names: string[], options: RunOnceOptions) => {
      if (options.period !== undefined && names.length !== 1) {
        throw new SchedulerError('E_USAGE', '--period needs exactly one job name: run-once <job> --period <ISO instant>');
      }
      if (options.shard !== undefined && names.length !== 1) {
        throw new SchedulerError('E_USAGE', '--shard needs exactly one job name: run-once <job> --shard <index> [--period <ISO instant>]');
      }
      const shard = options.shard === undefined ? undefined : /^\d+$/.test(options.shard) ? Number(options.shard) : NaN;
      if (options.force && names.length === 0) throw new SchedulerError('E_USAGE', '--force only applies to named jobs: run-once <job> --force (a paused job), run-once <job> --period <ISO> --force');
      const { config, log } = await setup(options);
      // The run machinery only once the flags are known good (see common.ts).
      const [{ Executor }, { calendarRefusal, dryRunPass, parsePeriod, runPass }, { attachAlerts }] = await Promise.all([
        import('../run/execute.js'), import('../run/pass.js'), import('../alerts/index.js'),
      ]);
      const { jobs, invalid } = await jobsOf(config);
      for (const f of invalid) for (const p of f.problems) log.error(p);
      const selected: Job[] = [];
      for (const name of names) {
        const job = jobs.find((j) => j.name === name);
        if (!job) throw unknownJob(name, jobs.map((j) => j.name), invalid);
        selected.push(job);
      }
      if (shard !== undefined && (!Number.isInteger(shard) || shard >= (selected[0]!.shards ?? 1))) {
        const count = selected[0]!.shards ?? 1;
        throw new SchedulerError('E_USAGE', `invalid --shard ${options.shard}: job '${selected[0]!.name}' has ${count} shard${count === 1 ? '' : 's'} (0 to ${count - 1})`);
      }
      let period: Date | undefined;
      if (options.period !== undefined) {
        // The form now (exit 2 before any server is asked); whether it is later than now is judged by
        // the store's clock once it answers (below), by this machine's for a dry run.
        period = parsePeriod(selected[0]!, options.period, options.dryRun ? new Date() : undefined);
      }
      const report: Report = { runs: [], notRun: [], invalid };
      if (options.dryRun) {
        const stores = await openStores(config);
        try {
          const executor = new Executor(stores.store, config.nodeId, log, { maxResultBytes: config.maxResultBytes, onceStore: stores.onceStore });
          if (names.length > 0) {
            for (const job of selected) {
              // As the real run: a date the job's exclude names is refused unless --force (nothing is recorded in a dry run).
              const at = period ?? new Date();
              const excludedBy = options.force ? null : job.exclude?.excludedBy(at, job.timezone) ?? null;
              if (excludedBy !== null) {
                report.notRun.push({ job: job.name, outcome: 'refused', reason: calendarRefusal(job, at, excludedBy, false).message });
                continue;
              }
              const indices = shard !== undefined ? [shard] : Array.from({ length: job.shards ?? 1 }, (_, i) => i);
              for (const i of indices) report.runs.push(await executor.dryRun(job, period ?? new Date(), 'manual', 1, i));
            }
          } else {
            report.runs.push(...(await dryRunPass(stores, executor, jobs.filter((j) => j.enabled))));
          }
        } finally {
          await stores.close();
        }
      } else {
        const rt = await openRuntime(config, log);
        // Failed periods of this pass alert and call onFailure as the daemon's do.
        const alerts = attachAlerts(config, rt, jobs, log, { oneShot: true });
        try {
          if (period) period = parsePeriod(selected[0]!, options.period!, new Date(rt.clock.now()));
          if (names.length === 0) collect(report, await runPass(rt, jobs.filter((j) => j.enabled)));
          else await manual(rt, selected, period, options.force === true, report, shard);
        } finally {
          await alerts.stop();
          await rt.close();
        }
      }
      print(options.json, report, () => render(report, new Map(jobs.map((j) => [j.name, j.shards ?? 1]))));
      // A period is judged by its last attempt here: a failure that a later attempt of the same period
      // (a retry this process waited for) made good is in the report and the history, not in the exit code.
      const failed = finalAttempts(report.runs).some((r) => FAILED.has(r.status)) || report.notRun.some((n) => n.outcome === 'error');
      const refused = report.notRun.some((n) => n.outcome === 'refused');
      process.exitCode = failed ? EXIT.failed : refused ? EXIT.refused : invalid.length > 0 ? EXIT.invalid : EXIT.ok;
    });
}

/** The last attempt of each period (each shard of a sharded period) in the report. */
function finalAttempts(runs: AttemptResult[]): AttemptResult[] {
  const last = new Map<string, AttemptResult>();
  for (const r of runs) {
    const key = `${r.periodKey}#${r.shard}`;
    const seen = last.get(key);
    if (!seen || r.attempt > seen.attempt) last.set(key, r);
  }
  return [...last.values()];
}

function collect(report: Report, results: PeriodResult[]): void {
  for (const r of results) {
    report.runs.push(...r.attempts);
    if (r.attempts.length === 0 && r.claim !== 'in-hand') {
      report.notRun.push({ job: r.job, periodKey: r.periodKey, outcome: r.claim, ...(r.error ? { reason: r.error } : {}) });
    }
  }
}

async function manual(rt: Runtime, jobs: Job[], period: Date | undefined, force: boolean, report: Report, shard?: number): Promise<void> {
  const { runByHand } = await import('../actions/run.js');
  const actor = cliActor();
  await Promise.all(jobs.map(async (job) => {
    try {
      report.runs.push(...(await runByHand(rt, { job, ...(period ? { period } : {}), force, ...(shard !== undefined ? { shard } : {}), actor })));
    } catch (err) {
      if (!(err instanceof RefusedError)) throw err;
      report.notRun.push({ job: job.name, outcome: 'refused', reason: err.message });
    }
  }));
}

function render(report: Report, shardsOf: Map<string, number>): string {
  const lines: string[] = [];
  if (report.runs.length > 0) {
    // A SHARD column (`2/4`) when a sharded job ran.
    const sharded = report.runs.some((r) => (shardsOf.get(r.job) ?? 1) > 1);
    const shardCell = (r: AttemptResult) => (sharded ? [(shardsOf.get(r.job) ?? 1) > 1 ? `${r.shard}/${shardsOf.get(r.job)}` : '-'] : []);
    lines.push(table([
      ['JOB', 'PERIOD', ...(sharded ? ['SHARD'] : []), 'ATTEMPT', 'TRIGGER', 'STATUS', 'DURATION', 'ERROR'],
      ...report.runs.map((r) => [r.job, r.scheduledAt.toISOString(), ...shardCell(r), String(r.attempt), r.trigger, r.status, durationText(r.durationMs), r.error ?? '']),
    ]));
  }
  for (const n of report.notRun) {
    lines.push(`${n.job}${n.periodKey ? ` ${n.periodKey}` : ''}: not run (${n.outcome})${n.reason ? `: ${n.reason}` : ''}`);
  }
  if (lines.length === 0) lines.push('nothing was due');
  return lines.join('\n');
}
