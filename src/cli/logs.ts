/**
 * `logs <job> [--period ISO | --run ID] [--attempt N] [--follow] [--json]`: an attempt's stored log
 * (its ctx.log lines and a command's output, in order), the job's latest attempt by default. With
 * `--follow`, a running attempt's lines as they reach the store, from whichever node runs it, until
 * it ends. Read from the store only: no daemon needs to answer.
 */
import type { Command } from 'commander';
import { SchedulerError, UsageError } from '../errors.js';
import { openStores } from './lazy.js';
import { withExitStatuses } from './exit.js';
import { parseInstantFlag, print, setup, withCommonOptions, type CommonOptions } from './common.js';
import type { RunRecord, RunStore } from '../store/types.js';
import type { RunLogLine, RunLogStore } from '../runlog/types.js';
import { ENDED_STATUSES, logLineText, logLineView } from '../runlog/view.js';
import { runView } from '../status/reader.js';

/** How often --follow reads the store for new lines (a line is there about FLUSH_MS after the body wrote it). */
export const FOLLOW_POLL_MS = 250;

interface LogsOptions extends CommonOptions {
  period?: string;
  run?: string;
  attempt?: string;
  follow?: boolean;
}

export function logsCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('logs')), { 0: 'ok', 2: 'unknown job or run, bad usage or setting', 4: 'store unreachable' })
    .description("an attempt's stored log: its ctx.log lines and a command's output, in order (the job's latest attempt by default)")
    .argument('<job>', 'the job')
    .option('--period <iso>', "an attempt of this period (its instant, as history shows it); the latest attempt unless --attempt")
    .option('--run <id>', 'the attempt with this run id (history --json, the page)')
    .option('--attempt <n>', 'this attempt of the period (1 is the first)')
    .option('--follow', "show a running attempt's lines as they come, from any node, until it ends")
    .action(async (job: string, options: LogsOptions) => {
      if (options.period !== undefined && options.run !== undefined) throw new UsageError('--period and --run name an attempt each: give one of them');
      const attempt = options.attempt === undefined ? undefined : Number(options.attempt);
      if (attempt !== undefined && !(Number.isInteger(attempt) && attempt >= 1)) throw new UsageError(`invalid --attempt ${options.attempt}: expected a whole number from 1`);
      if (attempt !== undefined && options.run !== undefined) throw new UsageError('--attempt goes with --period (or the latest period), not with --run');
      const period = parseInstantFlag('--period', options.period);
      const { config } = await setup(options);
      const stores = await openStores(config);
      try {
        const run = await findRun(stores.store, job, { period, runId: options.run, attempt });
        if (options.follow) {
          await follow(stores.store, stores.runLogStore, run, options.json === true);
          return;
        }
        const lines = await readAll(stores.runLogStore, run.id);
        print(options.json, { run: runView(run), lines: lines.map(logLineView) }, () => [header(run), ...(lines.length === 0 ? ['(no lines stored)'] : lines.map(logLineText))].join('\n'));
      } finally {
        await stores.close();
      }
    });
}

function header(r: RunRecord): string {
  return `# ${r.job} ${r.scheduledAt.toISOString()} attempt ${r.attempt} (run ${r.id}): ${r.status}${r.reason ? ` (${r.reason})` : ''}, node ${r.nodeId}, trigger ${r.trigger}`;
}

/** The attempt named by the flags; a SchedulerError (exit 2) naming what was not found. */
async function findRun(store: RunStore, job: string, q: { period?: Date; runId?: string; attempt?: number }): Promise<RunRecord> {
  if (q.runId !== undefined) {
    const run = await store.runById(q.runId);
    if (!run || run.job !== job) throw new SchedulerError('E_UNKNOWN_JOB', `no run ${q.runId} of job '${job}'${run ? ` (that run is of job '${run.job}')` : ''}`);
    return run;
  }
  let at = q.period;
  if (at === undefined) {
    // The latest attempt that started a body (pending and skipped rows have no log).
    const recent = await store.history({ job, limit: 50 });
    if (recent.length === 0) throw new SchedulerError('E_UNKNOWN_JOB', `no run recorded for job '${job}'`);
    const latest = recent.find((r) => r.status !== 'pending' && r.status !== 'skipped') ?? recent[0]!;
    if (q.attempt === undefined) return latest;
    at = latest.scheduledAt;
  }
  const runs = (await store.periodRuns(job, at)).filter((r) => r.status !== 'pending');
  if (runs.length === 0) throw new SchedulerError('E_UNKNOWN_JOB', `no attempt of job '${job}' for the period ${at.toISOString()}`);
  if (q.attempt === undefined) return runs[runs.length - 1]!;
  const found = runs.find((r) => r.attempt === q.attempt);
  if (!found) throw new SchedulerError('E_UNKNOWN_JOB', `no attempt ${q.attempt} of job '${job}' for the period ${at.toISOString()} (attempts: ${runs.map((r) => r.attempt).join(', ')})`);
  return found;
}

async function readAll(logs: RunLogStore, runId: string, afterSeq = 0): Promise<RunLogLine[]> {
  const out: RunLogLine[] = [];
  let after = afterSeq;
  for (;;) {
    const page = await logs.read(runId, { afterSeq: after, limit: 10_000 });
    out.push(...page);
    if (page.length < 10_000) return out;
    after = page[page.length - 1]!.seq;
  }
}

/** Prints the lines so far, then new ones as they come, until the attempt has ended and its last lines are read. */
async function follow(store: RunStore, logs: RunLogStore, first: RunRecord, json: boolean): Promise<void> {
  const show = (l: RunLogLine) => process.stdout.write(`${json ? JSON.stringify(logLineView(l)) : logLineText(l)}\n`);
  if (!json) process.stdout.write(`${header(first)}\n`);
  let after = 0;
  let run = first;
  // After the attempt ends its node sends its last lines (and notes) within a flush or two.
  let quietAfterEnd = 0;
  for (;;) {
    const lines = await readAll(logs, run.id, after);
    for (const l of lines) show(l);
    if (lines.length > 0) after = lines[lines.length - 1]!.seq;
    if (ENDED_STATUSES.has(run.status)) {
      quietAfterEnd = lines.length > 0 ? 0 : quietAfterEnd + 1;
      if (quietAfterEnd >= 3) break;
    }
    await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
    run = (await store.runById(run.id)) ?? run;
  }
  if (json) process.stdout.write(`${JSON.stringify({ ended: true, status: run.status, reason: run.reason })}\n`);
  else process.stdout.write(`# ended: ${run.status}${run.reason ? ` (${run.reason})` : ''}\n`);
}
