import type { Command } from 'commander';
import { openStores } from './lazy.js';
import { formatDuration } from '../time/duration.js';
import { EXIT, withExitStatuses } from './exit.js';
import { truncate } from '../time/display.js';
import { MAX_COUNT, jobsOf, parseCount, print, setup, withCommonOptions, type CommonOptions } from './common.js';
import { NAME_WIDTH, TEXT_WIDTH, datedText, fittedTable, runView, whenText, wrapParts, wrapText } from './views.js';

export function listCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('list')), { 0: 'ok', 2: 'a job file is invalid (the valid jobs are still listed), bad -n, bad usage or setting', 4: 'store unreachable' })
    .description('every job: schedule, time zone, next runs, last run and its status; invalid files with their error')
    .option('-n, --count <n>', `how many next periods per job (1 to ${MAX_COUNT}; the table shows the first unless -n is given)`, '3')
    .option('--utc', "show times in UTC instead of each job's zone")
    .action(async (options: CommonOptions & { count: string; utc?: boolean }, cmd: Command) => {
      const count = parseCount('-n', options.count);
      // The table shows one next period per job, or all of them when -n was asked for.
      const allInTable = cmd.getOptionValueSource('count') === 'cli';
      const { config } = await setup(options);
      const { jobs, invalid } = await jobsOf(config);
      const { nextPeriods } = await import('../time/schedule.js');
      const stores = await openStores(config);
      let last;
      let paused;
      try {
        [last, paused] = await Promise.all([stores.store.lastRuns(jobs.map((j) => j.name)), stores.jobStore.paused()]);
      } finally {
        await stores.close();
      }
      const now = new Date();
      // The next periods on dates the job's `exclude` names: listed in `next` (the schedule's), and here with the entry.
      const skippedOf = (j: (typeof jobs)[number], next: Date[]) => next.flatMap((d) => {
        const excludedBy = j.exclude?.excludedBy(d, j.timezone) ?? null;
        return excludedBy === null ? [] : [{ at: d.toISOString(), reason: 'calendar' as const, excludedBy }];
      });
      const views = jobs.map((j) => ({
        name: j.name,
        file: j.file,
        schedule: j.schedule.expression,
        timezone: j.timezone,
        enabled: j.enabled,
        // A command job runs in a process (group) of its own.
        isolation: j.command ? 'process' : j.isolation ?? 'inline',
        ...(j.command ? { command: j.command.source, cwd: j.command.cwd, killAfterMs: j.command.killAfterMs } : {}),
        next: j.enabled ? nextPeriods(j.schedule, now, count).map((d) => d.toISOString()) : [],
        // `exclude`: the entries as written; `nextSkipped`: those of `next` it excludes (recorded skipped, reason calendar).
        exclude: j.exclude ? [...j.exclude.entries] : [],
        nextSkipped: j.enabled ? skippedOf(j, nextPeriods(j.schedule, now, count)) : [],
        timeoutMs: j.timeoutMs,
        lockTtlMs: j.lockTtlMs,
        overlap: j.overlap,
        catchUpMs: j.catchUpMs,
        coalesce: j.coalesce,
        retries: j.retries,
        retryDelayMs: j.retryDelayMs,
        // `jitter`: each period's body starts at its instant + a delay of [0, jitterMs) derived from its key.
        jitterMs: j.jitterMs ?? 0,
        shards: j.shards ?? 1,
        lastRun: last.has(j.name) ? runView(last.get(j.name)!) : null,
        // Cluster-wide (`pause <job>`): its periods are recorded skipped (paused); `since` is the store's clock.
        paused: paused.has(j.name) ? { reason: paused.get(j.name)!.reason, since: new Date(paused.get(j.name)!.pausedAt).toISOString() } : null,
      }));
      print(options.json, { jobs: views, invalid }, () => {
        // Times in each job's zone (or UTC with --utc), with how far they are from now; every line fits 100 columns.
        const zoneOf = (v: { timezone: string }) => (options.utc ? 'UTC' : v.timezone);
        const rows: Array<{ cells: string[]; below?: string[] }> = [{ cells: ['JOB', 'SCHEDULE', 'TIMEZONE', options.utc ? 'NEXT (UTC)' : 'NEXT'] }];
        for (const v of views) {
          const zone = zoneOf(v);
          const next = v.next.map((n) => new Date(n));
          const last = v.lastRun ? `last ${whenText(new Date(v.lastRun.scheduledAt), zone, now)} ${v.lastRun.status}` : 'last -';
          const skipped = new Set(v.nextSkipped.map((s) => s.at));
          const opts = `${v.exclude.length > 0 ? `exclude=${v.exclude.join(',')} ` : ''}overlap=${v.overlap} catchUp=${formatDuration(v.catchUpMs)}${v.retries ? ` retries=${v.retries}` : ''}${v.timeoutMs ? ` timeout=${formatDuration(v.timeoutMs)}` : ''}${v.shards > 1 ? ` shards=${v.shards}` : ''}${v.jitterMs ? ` jitter=${formatDuration(v.jitterMs)}` : ''}`;
          const cmd = 'command' in v && v.command !== undefined ? [`command ${typeof v.command === 'string' ? v.command : JSON.stringify(v.command)}`] : [];
          const below = wrapParts([last, opts, ...cmd], '  ');
          if (allInTable && next.length > 0) below.push(...wrapParts(datedText(next, zone, now).map((t, i) => (skipped.has(v.next[i]!) ? `${t} (skipped: calendar)` : t)), '  next ', TEXT_WIDTH, ', '));
          rows.push({
            cells: [truncate(v.name, NAME_WIDTH), v.schedule, v.timezone, !v.enabled ? 'disabled' : v.paused ? pausedText(v.paused.reason, 30) : next[0] ? `${whenText(next[0], zone, now)}${skipped.has(v.next[0]!) ? ' skipped (calendar)' : ''}` : '-'],
            below,
          });
        }
        // A long expression or zone is cut, never its next time; a row with a cut cell says the whole
        // name, expression and zone on the line under it (a cut `*/3 * * * * *` would read as 5 fields).
        const lines = [fittedTable(rows, [1, 2], TEXT_WIDTH, 8, (row, cut) => {
          const v = views[row - 1]!;
          const whole = [
            ...(v.name.length > NAME_WIDTH ? [`job ${v.name}`] : []),
            ...(cut.includes(1) ? [`schedule ${v.schedule}`] : []),
            ...(cut.includes(2) ? [`zone ${v.timezone}`] : []),
          ];
          return whole.length > 0 ? wrapParts(whole, '  ') : [];
        })];
        // Each problem wrapped to the width, without the file's path again (--json and `validate` have it as loaded).
        for (const f of invalid) {
          lines.push(`INVALID ${f.file}:`);
          for (const p of f.problems) lines.push(...wrapText(p.startsWith(`${f.file}: `) ? p.slice(f.file.length + 2) : p, '  ', '    '));
        }
        return lines.join('\n');
      });
      process.exitCode = invalid.length > 0 ? EXIT.invalid : EXIT.ok;
    });
}

/** The NEXT column of a paused job: `paused (<reason>)`, a long reason cut (--json has it whole). */
function pausedText(reason: string | null, width = 60): string {
  if (!reason) return 'paused';
  return `paused (${truncate(reason, width)})`;
}
