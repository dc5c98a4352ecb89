/**
 * Calendars (`exclude`) end to end, with the real bin/scheduler on SQLite:
 * - two daemons run an every-second job whose zone's "today" (and the days either side) is excluded by
 *   a named calendar, beside a sibling job with no exclude: the excluded job's periods are recorded
 *   skipped (reason calendar) and its body never runs, while the sibling runs;
 * - `next --json` and `list --json` flag those periods skipped; `run-once <job> --period` of one is
 *   refused (exit 3, naming the calendar) and runs with `--force`; `run-once <job>` records the run
 *   skipped (calendar) and says so;
 * - a full outage (no node up across six daily periods, two of them excluded, the latest among them):
 *   a daemon started afterwards records the excluded ones skipped (calendar), runs the latest one NOT
 *   excluded, and records the others coalesced;
 * - `validate` names the job file and the field of a missing or broken calendar, exit 2;
 * - over HTTP: `/api/jobs` shows `exclude`, a re-run of an excluded period is 409 unless `force`; a
 *   calendar edited is picked up by the watch (the job `changed`) and the job runs again.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Daemon, runCli, type CliResult } from '../helpers/cli.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace, type HistoryRun } from '../helpers/workspace.js';
import { waitForLog } from './cluster-scenario.js';
import { Database } from '../../src/store/database.js';
import { KnexJobStore } from '../../src/store/jobs.js';
import { localDate } from '../../src/calendars/dates.js';

const DAY = 86_400_000;
const ZONE = 'Pacific/Kiritimati'; // UTC+14: its "today" is often another date than UTC's

/** A body that appends one line per run to the file named by its environment variable. */
const body = (variable: string, fields: string) => `
import { appendFileSync } from 'node:fs';
export default {
  ${fields}
  run(ctx) {
    if (ctx.dryRun) return 'dry';
    appendFileSync(process.env.${variable}, \`\${ctx.periodKey} \${ctx.attempt} \${ctx.trigger}\\n\`);
  },
};
`;

describe('calendars: excluded periods are recorded skipped (calendar), never run', () => {
  let ws: Workspace;
  let env: Record<string, string>;
  let daemon: Daemon | undefined;
  const cli = (...args: string[]): Promise<CliResult> => runCli(args, { cwd: ws.dir, env });
  const history = async (job: string): Promise<Array<HistoryRun & { reason: string | null }>> => {
    const r = await cli('history', job, '--json', '--limit', '1000');
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };

  beforeAll(async () => {
    ws = new Workspace('cron-calendars-');
    const now = Date.now();
    // Yesterday, today and tomorrow in the job's zone: the test may cross a midnight there.
    const days = [now - DAY, now, now + DAY].map((t) => localDate(new Date(t), ZONE));
    mkdirSync(ws.path('config', 'calendars'), { recursive: true });
    writeFileSync(ws.path('config', 'calendars', 'around-today.json'), JSON.stringify([`${days[0]}/${days[2]}`]));
    ws.writeJob('holiday.mjs', body('HOLIDAY_EFFECTS', `schedule: '* * * * * *', timezone: '${ZONE}', catchUp: '30s', exclude: ['2020-01-01', 'calendar:around-today'],`));
    ws.writeJob('sibling.mjs', body('SIBLING_EFFECTS', `schedule: '* * * * * *', timezone: '${ZONE}', catchUp: '30s',`));
    env = {
      SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_LOG_FORMAT: 'json', SCHEDULER_HTTP: 'off',
      HOLIDAY_EFFECTS: ws.path('holiday.txt'), SIBLING_EFFECTS: ws.path('sibling.txt'), DAILY_EFFECTS: ws.path('daily.txt'),
    };
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop('SIGTERM', 20_000);
    ws?.cleanup();
  }, 60_000);

  it('two daemons: the excluded job is recorded skipped (calendar) once per period, cluster-wide, and never runs; its sibling runs', async () => {
    daemon = new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: 'node-a' } });
    const second = new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: 'node-a2' } });
    try {
      await Promise.all([waitForLog(daemon, 'the daemon to schedule', 'scheduler started'), waitForLog(second, 'the second daemon to schedule', 'scheduler started')]);
      await waitFor('3 more sibling runs', () => ws.lines('sibling.txt').length >= 6, 60_000);
    } finally {
      await second.stop('SIGTERM', 20_000);
    }
    await waitFor('3 sibling runs', () => ws.lines('sibling.txt').length >= 3, 60_000);
    // Settled rows: a claim's row is `running` for the moment between its insert and its calendar skip.
    const skipped = await waitFor('3 holiday periods recorded', async () => {
      const rows = (await history('holiday')).filter((r) => r.status !== 'running');
      return rows.length >= 3 ? rows : false;
    }, 60_000, 300);
    for (const r of skipped) expect(r, JSON.stringify(r)).toMatchObject({ status: 'skipped', reason: 'calendar', attempt: 1 });
    // One row per period, whichever node won it.
    expect(new Set(skipped.map((r) => r.periodKey)).size).toBe(skipped.length);
    expect(ws.lines('holiday.txt')).toEqual([]);
    // A daemon's log says which entry excludes them: either daemon's, since the ranking gives each
    // period to one of them, and by the tick's line or the catch-up's (a node behind on its claims,
    // as on a loaded machine, leaves its ticks' periods to the sweep).
    const says = (l: { msg?: string; excludedBy?: string }) => (l.msg === 'period skipped: its date is excluded' || l.msg === "periods on dates the job's exclude names recorded skipped (calendar)")
      && l.excludedBy === 'calendar:around-today';
    expect([...daemon.logs(), ...second.logs()].some(says)).toBe(true);
    await daemon.stop('SIGTERM', 20_000);
    daemon = undefined;
    expect(ws.lines('holiday.txt')).toEqual([]);
    // Both stopped: every holiday row ended skipped (calendar), none left running.
    for (const r of await history('holiday')) expect(r, JSON.stringify(r)).toMatchObject({ status: 'skipped', reason: 'calendar', attempt: 1 });
    const sibling = await history('sibling');
    expect(sibling.filter((r) => r.status === 'succeeded').length).toBeGreaterThanOrEqual(3);
  });

  it('next --json and list --json flag the excluded periods skipped (calendar), with the entry', async () => {
    const next = await cli('next', 'holiday', '-n', '3', '--json');
    expect(next.code, next.stderr).toBe(0);
    const doc = JSON.parse(next.stdout);
    expect(doc.exclude).toEqual(['2020-01-01', 'calendar:around-today']);
    expect(doc.periods).toHaveLength(3);
    for (const p of doc.periods) expect(p).toMatchObject({ skipped: 'calendar', excludedBy: 'calendar:around-today' });
    const text = await cli('next', 'holiday', '-n', '2');
    expect(text.stdout).toContain('SKIPPED');
    expect(text.stdout).toContain('calendar (calendar:around-today)');
    const sibling = JSON.parse((await cli('next', 'sibling', '-n', '2', '--json')).stdout);
    for (const p of sibling.periods) expect(p.skipped).toBeUndefined();

    const list = await cli('list', '--json');
    expect(list.code, list.stderr).toBe(0);
    const jobs = JSON.parse(list.stdout).jobs as Array<{ name: string; next: string[]; exclude: string[]; nextSkipped: Array<{ at: string; reason: string; excludedBy: string }> }>;
    const holiday = jobs.find((j) => j.name === 'holiday')!;
    expect(holiday.exclude).toEqual(['2020-01-01', 'calendar:around-today']);
    expect(holiday.nextSkipped.map((s) => s.at)).toEqual(holiday.next);
    expect(holiday.nextSkipped[0]).toMatchObject({ reason: 'calendar', excludedBy: 'calendar:around-today' });
    expect(jobs.find((j) => j.name === 'sibling')!.nextSkipped).toEqual([]);
    expect((await cli('list')).stdout).toContain('skipped (calendar)');

    // Across the October DST change in London: 00:30 BST on the 25th is 23:30 UTC on the 24th, and excluded.
    ws.writeJob('london.mjs', body('LONDON_EFFECTS', "schedule: '30 0,23 * * *', timezone: 'Europe/London', exclude: ['2026-10-25'],"));
    const london = await cli('next', 'london', '--from', '2026-10-24T12:00:00Z', '-n', '4', '--json');
    expect(london.code, london.stderr).toBe(0);
    expect((JSON.parse(london.stdout).periods as Array<{ utc: string; local: string; skipped?: string }>).map((p) => [p.utc, p.local, p.skipped ?? null])).toEqual([
      ['2026-10-24T22:30:00.000Z', '2026-10-24T23:30:00+01:00', null],
      ['2026-10-24T23:30:00.000Z', '2026-10-25T00:30:00+01:00', 'calendar'],
      ['2026-10-25T23:30:00.000Z', '2026-10-25T23:30:00+00:00', 'calendar'],
      ['2026-10-26T00:30:00.000Z', '2026-10-26T00:30:00+00:00', null],
    ]);
  });

  it('run-once <job> --dry-run on an excluded date: refused as the real run is (exit 3), nothing run; --force runs the body dry', async () => {
    const dry = await cli('run-once', 'holiday', '--dry-run', '--json');
    expect(dry.code, dry.stdout + dry.stderr).toBe(3);
    expect(JSON.parse(dry.stdout).notRun[0].reason).toContain("excluded by 'calendar:around-today'");
    const forced = await cli('run-once', 'holiday', '--dry-run', '--force', '--json');
    expect(forced.code, forced.stdout + forced.stderr).toBe(0);
    expect(JSON.parse(forced.stdout).runs).toMatchObject([{ job: 'holiday', status: 'succeeded' }]);
    expect(ws.lines('holiday.txt')).toEqual([]);
    // A dry run writes no row.
    expect((await history('holiday')).some((r) => r.trigger === 'manual')).toBe(false);
  });

  it('run-once --period of an excluded period: refused (exit 3) naming the calendar; with --force it runs', async () => {
    const period = (await history('holiday')).at(-1)!.scheduledAt;
    const refused = await cli('run-once', 'holiday', '--period', period);
    expect(refused.code, refused.stdout + refused.stderr).toBe(3);
    expect(refused.stdout).toContain(`excluded by 'calendar:around-today'; use --force to run it anyway`);
    expect(ws.lines('holiday.txt')).toEqual([]);

    const forced = await cli('run-once', 'holiday', '--period', period, '--force', '--json');
    expect(forced.code, forced.stdout + forced.stderr).toBe(0);
    expect(JSON.parse(forced.stdout).runs).toMatchObject([{ job: 'holiday', status: 'succeeded', attempt: 2, trigger: 'manual' }]);
    expect(ws.lines('holiday.txt')).toHaveLength(1);
    const rows = (await history('holiday')).filter((r) => r.scheduledAt === period);
    expect(rows.map((r) => [r.attempt, r.status, r.reason])).toEqual([[2, 'succeeded', null], [1, 'skipped', 'calendar']]);
  });

  it('run-once <job> now, on an excluded date: recorded skipped (calendar), says so, exit 3; --force runs it', async () => {
    const now = await cli('run-once', 'holiday', '--json');
    expect(now.code, now.stdout + now.stderr).toBe(3);
    const report = JSON.parse(now.stdout);
    expect(report.runs).toEqual([]);
    expect(report.notRun[0]).toMatchObject({ job: 'holiday', outcome: 'refused' });
    expect(report.notRun[0].reason).toMatch(/^job 'holiday' does not run on \d{4}-\d\d-\d\d \(Pacific\/Kiritimati\): excluded by 'calendar:around-today'; the run was recorded skipped \(calendar\); use --force to run it anyway$/);
    const manual = (await history('holiday')).filter((r) => r.trigger === 'manual');
    expect(manual).toHaveLength(2);
    expect(manual.some((r) => r.status === 'skipped' && r.reason === 'calendar')).toBe(true);
    expect(ws.lines('holiday.txt')).toHaveLength(1);
    const forced = await cli('run-once', 'holiday', '--force');
    expect(forced.code, forced.stdout + forced.stderr).toBe(0);
    expect(ws.lines('holiday.txt')).toHaveLength(2);
  });

  it('a full outage across six daily periods, two excluded (the latest among them): the excluded ones skipped (calendar), the latest NOT excluded runs, the others coalesced', async () => {
    const now = Date.now();
    const midnight = Math.floor(now / DAY) * DAY;
    // The periods of a daily job at 00:00 UTC while no node was up: the six last ones.
    const periods = Array.from({ length: 6 }, (_, i) => midnight - (5 - i) * DAY);
    const date = (t: number) => new Date(t).toISOString().slice(0, 10);
    // Today's (the latest) and the one two days ago are excluded: one by a date, one by a range.
    ws.writeJob('daily.mjs', body('DAILY_EFFECTS', `schedule: '0 0 * * *', timezone: 'UTC', catchUp: '10d', exclude: ['${date(periods[5]!)}', '${date(periods[3]!)}/${date(periods[3]!)}'],`));
    // The cluster knew the job before the outage: its anchor is just before the first of the six.
    const db = await Database.open({ kind: 'sqlite', path: ws.path('scheduler.db'), url: ws.sqliteStore() });
    try {
      await new KnexJobStore(db).declare([{ name: 'daily', reconciledThrough: periods[0]! - 1000 }]);
    } finally {
      await db.close();
    }
    daemon = new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: 'node-b' } });
    await waitForLog(daemon, 'the daemon to schedule', 'scheduler started');
    const rows = await waitFor('the six periods recorded, the one to run ended', async () => {
      const r = await history('daily');
      return r.length >= 6 && r.every((x) => x.status !== 'running' && x.status !== 'pending') ? r : false;
    }, 60_000, 300);
    await daemon.stop('SIGTERM', 20_000);
    daemon = undefined;
    const byPeriod = new Map(rows.map((r) => [Date.parse(r.scheduledAt), r]));
    expect(rows).toHaveLength(6);
    const seen = periods.map((p) => [date(p), byPeriod.get(p)?.status, byPeriod.get(p)?.reason ?? null]);
    expect(seen).toEqual([
      [date(periods[0]!), 'skipped', 'coalesced'],
      [date(periods[1]!), 'skipped', 'coalesced'],
      [date(periods[2]!), 'skipped', 'coalesced'],
      [date(periods[3]!), 'skipped', 'calendar'],
      [date(periods[4]!), 'succeeded', null],
      [date(periods[5]!), 'skipped', 'calendar'],
    ]);
    expect(byPeriod.get(periods[4]!)!.trigger).toBe('catch-up');
    expect(ws.lines('daily.txt')).toEqual([`daily@${new Date(periods[4]!).toISOString()} 1 catch-up`]);
  });

  it('over HTTP: /api/jobs shows exclude; a re-run of an excluded period is 409 naming the calendar, 202 with force; a calendar edited reloads and the job runs again', async () => {
    daemon = new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: 'node-c', SCHEDULER_HTTP: '127.0.0.1:0' } });
    await waitForLog(daemon, 'the daemon to schedule', 'scheduler started');
    const url = await waitFor('http server listening', () => daemon!.logs().find((l) => l.msg === 'http server listening')?.url as string | undefined, 60_000);
    const api = await (await fetch(`${url}/api/jobs`)).json() as { jobs: Array<{ name: string; exclude?: string[]; nextSkipped?: Array<{ excludedBy: string }> }> };
    const holiday = api.jobs.find((j) => j.name === 'holiday')!;
    expect(holiday.exclude).toEqual(['2020-01-01', 'calendar:around-today']);
    expect(holiday.nextSkipped![0]!.excludedBy).toBe('calendar:around-today');
    expect(api.jobs.find((j) => j.name === 'sibling')!.exclude).toBeUndefined();
    const page = await (await fetch(`${url}/jobs/holiday`)).text();
    expect(page).toContain('<code>2020-01-01, calendar:around-today</code>');
    expect(page).toContain('next skipped');

    const period = (await history('holiday')).find((r) => r.trigger === 'schedule' && r.status === 'skipped' && r.attempt === 1)!.scheduledAt;
    const post = async (body: unknown) => {
      const r = await fetch(`${url}/api/jobs/holiday/periods/${encodeURIComponent(period)}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: r.status, doc: await r.json() as { error?: string } };
    };
    const refused = await post({});
    expect(refused.status).toBe(409);
    expect(refused.doc.error).toContain(`excluded by 'calendar:around-today'; use --force to run it anyway`);
    const before = ws.lines('holiday.txt').length;
    const forced = await post({ force: true });
    expect(forced.status, JSON.stringify(forced.doc)).toBe(202);
    await waitFor('the forced period ran', () => ws.lines('holiday.txt').length === before + 1, 30_000);

    // The calendar no longer names today: the watch reloads, the job is changed (its exclude), and its periods run.
    writeFileSync(ws.path('config', 'calendars', 'around-today.json'), '["2020-01-02"]');
    const changed = await waitFor('the reload', () => daemon!.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('job changed: holiday')), 30_000);
    expect(String(changed.msg)).toContain('exclude');
    await waitFor('a scheduled run of holiday', () => ws.lines('holiday.txt').some((l) => l.endsWith(' 1 schedule')), 30_000);
    await daemon.stop('SIGTERM', 20_000);
    daemon = undefined;
  });

  it('validate: a missing or broken calendar is one line naming the job file and the field, exit 2', async () => {
    const other = new Workspace('cron-calendars-validate-');
    try {
      // With --config, the calendars folder is the one beside that file.
      mkdirSync(other.path('etc', 'calendars'), { recursive: true });
      writeFileSync(other.path('etc', 'scheduler.json'), JSON.stringify({ jobsDir: './jobs' }));
      writeFileSync(other.path('etc', 'calendars', 'broken.ics'), 'BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART:20261225T090000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n');
      writeFileSync(other.path('etc', 'calendars', 'good.json'), '["2026-12-25"]');
      other.writeJob('a.mjs', "export default { schedule: '0 2 * * *', exclude: ['calendar:missing'], async run() {} };\n");
      other.writeJob('b.mjs', "export default { schedule: '0 2 * * *', exclude: ['calendar:broken', '2026-02-30'], async run() {} };\n");
      other.writeJob('c.mjs', "export default { schedule: '0 2 * * *', exclude: ['calendar:good', '2026-12-24/2026-12-26'], async run() {} };\n");
      const r = await runCli(['validate', '--config', 'etc/scheduler.json'], { cwd: other.dir, env: { SCHEDULER_STORE: other.sqliteStore() } });
      expect(r.code, r.stdout + r.stderr).toBe(2);
      const lines = (r.stdout + r.stderr).split('\n').filter((l) => l.includes("field 'exclude'"));
      expect(lines).toHaveLength(3);
      expect(lines[0]).toMatch(/a\.mjs: field 'exclude' entry "calendar:missing": expected a calendar file etc\/calendars\/missing\.json or etc\/calendars\/missing\.ics \(neither exists\)/);
      expect(lines[1]).toMatch(/b\.mjs: field 'exclude' entry "calendar:broken": etc\/calendars\/broken\.ics line 3: a timed event \(DTSTART:20261225T090000Z\)/);
      expect(lines[2]).toMatch(/b\.mjs: field 'exclude' entry "2026-02-30": expected a date 'YYYY-MM-DD'/);
      expect(r.stdout + r.stderr).not.toContain('c.mjs');
    } finally {
      other.cleanup();
    }
  });
});
