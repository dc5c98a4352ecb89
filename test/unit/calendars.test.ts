/**
 * Calendars (`exclude`): the dates and ranges of a job, JSON and iCalendar files, the predicate on a
 * period in the job's zone (across DST, and where the UTC date is not the local one), each problem of
 * a job file on one line, and the catch-up's plan (excluded periods recorded calendar, the latest NOT
 * excluded one run).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CalendarSource, parseJsonCalendar } from '../../src/calendars/calendar.js';
import { localDate, parseDate } from '../../src/calendars/dates.js';
import { resolveExclude, type Exclusion } from '../../src/calendars/exclude.js';
import { CalendarFileError, parseIcs } from '../../src/calendars/ics.js';
import { loadJobs } from '../../src/jobs/load.js';
import { validateJob } from '../../src/jobs/validate.js';
import { jobFingerprint } from '../../src/daemon/reload.js';
import { planReconcile, periodsToCheck } from '../../src/run/reconcile.js';
import { compileSchedule, periodsBetween } from '../../src/time/schedule.js';
import { removeTempDirs, tempDir } from './_fixtures.js';

afterAll(removeTempDirs);

const noop = async () => {};
const FILE = 'jobs/holiday-job.ts';

function calendarsDir(files: Record<string, string>): string {
  const dir = tempDir('cron-calendars-');
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

function exclusion(entries: unknown, files: Record<string, string> = {}): Exclusion {
  const r = resolveExclude(entries, new CalendarSource(calendarsDir(files)));
  expect(r.problems).toEqual([]);
  return r.exclusion!;
}

/** The local date in the zone, by another route than the code under test (sv-SE prints YYYY-MM-DD). */
function independentLocalDate(at: Date, zone: string): string {
  return at.toLocaleString('sv-SE', { timeZone: zone }).slice(0, 10);
}

const ics = (...lines: string[]) => ['BEGIN:VCALENDAR', 'VERSION:2.0', 'PRODID:-//test//EN', ...lines, 'END:VCALENDAR'].join('\r\n');

describe('dates', () => {
  it('reads YYYY-MM-DD and refuses impossible dates', () => {
    expect(parseDate('2026-12-25')).toBe(Date.UTC(2026, 11, 25) / 86_400_000);
    expect(parseDate('2028-02-29')).toBeDefined();
    for (const bad of ['2026-02-29', '2026-02-30', '2026-13-01', '2026-00-10', '2026-1-01', '26-12-25', '2026-12-25T00:00', '']) expect(parseDate(bad), bad).toBeUndefined();
  });

  it('reads the local date of an instant in a zone', () => {
    expect(localDate(new Date('2026-12-26T02:00:00Z'), 'America/New_York')).toBe('2026-12-25');
    expect(localDate(new Date('2026-12-25T16:30:00Z'), 'Asia/Shanghai')).toBe('2026-12-26');
    expect(localDate(new Date('2026-12-25T23:59:59.999Z'), 'UTC')).toBe('2026-12-25');
  });
});

describe('a JSON calendar', () => {
  it('is a list of dates and ranges', () => {
    const c = parseJsonCalendar('["2026-12-25", "2026-12-31/2027-01-01"]');
    expect(c.days).toHaveLength(1);
    expect(c.ranges).toHaveLength(1);
  });

  it('refuses what is not a list of dates, naming the entry', () => {
    expect(() => parseJsonCalendar('{"dates": []}')).toThrow(/expected a JSON list of dates/);
    expect(() => parseJsonCalendar('["2026-12-25", 20261226]')).toThrow(/entry 2 = 20261226/);
    expect(() => parseJsonCalendar('["2026-02-30"]')).toThrow(/entry 1 = "2026-02-30"/);
    expect(() => parseJsonCalendar('["2026-12-26/2026-12-24"]')).toThrow(/reversed/);
    expect(() => parseJsonCalendar('[')).toThrow(/not valid JSON/);
  });
});

describe('an iCalendar file', () => {
  it('reads one-day and multi-day all-day events (DTEND exclusive), CRLF and folded lines', () => {
    const text = ics(
      'BEGIN:VEVENT', 'UID:1', 'DTSTART;VALUE=DATE:20261225', 'DTEND;VALUE=DATE:20261226', 'SUMMARY:Christmas Day', 'END:VEVENT',
      // A three-day event, DTEND on the fourth day; its DTSTART folded over two lines (a space continues it).
      'BEGIN:VEVENT', 'UID:2', 'DTSTART;VALUE=DATE:2027', ' 0101', 'DTEND;VALUE=DATE:20270104', 'SUMMARY:A long,', '\tfolded summary', 'END:VEVENT',
      // No DTEND: one day. DURATION of two days.
      'BEGIN:VEVENT', 'UID:3', 'DTSTART;VALUE=DATE:20260501', 'END:VEVENT',
      'BEGIN:VEVENT', 'UID:4', 'DTSTART;VALUE=DATE:20260601', 'DURATION:P2D', 'END:VEVENT',
      // Cancelled: excludes nothing.
      'BEGIN:VEVENT', 'UID:5', 'DTSTART;VALUE=DATE:20260701', 'STATUS:CANCELLED', 'END:VEVENT',
    );
    const e = exclusion(['calendar:uk'], { 'uk.ics': text });
    const on = (d: string) => e.excludedBy(new Date(`${d}T12:00:00Z`), 'UTC');
    expect(on('2026-12-25')).toBe('calendar:uk');
    expect(on('2026-12-26')).toBeNull();
    expect(on('2026-12-31')).toBeNull();
    for (const d of ['2027-01-01', '2027-01-02', '2027-01-03']) expect(on(d), d).toBe('calendar:uk');
    expect(on('2027-01-04')).toBeNull();
    expect(on('2026-05-01')).toBe('calendar:uk');
    expect(on('2026-05-02')).toBeNull();
    expect(on('2026-06-02')).toBe('calendar:uk');
    expect(on('2026-06-03')).toBeNull();
    expect(on('2026-07-01')).toBeNull();
    // The same file with LF endings reads the same.
    const lf = exclusion(['calendar:uk'], { 'uk.ics': text.replace(/\r\n/g, '\n') });
    expect(lf.excludedBy(new Date('2027-01-02T12:00:00Z'), 'UTC')).toBe('calendar:uk');
  });

  it('repeats a plain yearly event (RRULE:FREQ=YEARLY) from its first year on, without its EXDATEs, up to UNTIL', () => {
    const e = exclusion(['calendar:fixed'], {
      'fixed.ics': ics(
        'BEGIN:VEVENT', 'DTSTART;VALUE=DATE:20251225', 'DTEND;VALUE=DATE:20251227', 'RRULE:FREQ=YEARLY', 'EXDATE;VALUE=DATE:20271225', 'END:VEVENT',
        'BEGIN:VEVENT', 'DTSTART;VALUE=DATE:20240501', 'RRULE:FREQ=YEARLY;UNTIL=20260501', 'END:VEVENT',
        // 29 February: only in leap years.
        'BEGIN:VEVENT', 'DTSTART;VALUE=DATE:20240229', 'RRULE:FREQ=YEARLY;COUNT=3', 'END:VEVENT',
        // A New Year's Eve event of two days: the occurrence that began last year covers 1 January.
        'BEGIN:VEVENT', 'DTSTART;VALUE=DATE:20251231', 'DURATION:P2D', 'RRULE:FREQ=YEARLY', 'END:VEVENT',
      ),
    });
    const on = (d: string) => e.excludedBy(new Date(`${d}T12:00:00Z`), 'UTC') !== null;
    expect([on('2024-12-25'), on('2025-12-25'), on('2026-12-26'), on('2027-12-25'), on('2030-12-25'), on('2030-12-27')]).toEqual([false, true, true, false, true, false]);
    expect([on('2024-05-01'), on('2026-05-01'), on('2027-05-01')]).toEqual([true, true, false]);
    // COUNT=3 counts occurrences, not years: 2024, 2028, 2032.
    expect([on('2024-02-29'), on('2028-02-29'), on('2032-02-29'), on('2036-02-29'), on('2027-03-01')]).toEqual([true, true, true, false, false]);
    expect([on('2026-01-01'), on('2027-01-01'), on('2027-01-02'), on('2025-01-01')]).toEqual([true, true, false, false]);
  });

  it('refuses timed events and rules it does not understand, naming the line', () => {
    const timed = ics('BEGIN:VEVENT', 'DTSTART:20261225T090000Z', 'DTEND:20261225T100000Z', 'END:VEVENT');
    try {
      parseIcs(timed);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(CalendarFileError);
      expect((err as CalendarFileError).line).toBe(5);
      expect((err as Error).message).toMatch(/a timed event \(DTSTART:20261225T090000Z\): expected all-day events only/);
    }
    expect(() => parseIcs(ics('BEGIN:VEVENT', 'DTSTART;VALUE=DATE:20261225', 'RRULE:FREQ=MONTHLY', 'END:VEVENT'))).toThrow(/only FREQ=YEARLY/);
    expect(() => parseIcs(ics('BEGIN:VEVENT', 'DTSTART;VALUE=DATE:20261225', 'RRULE:FREQ=YEARLY;BYDAY=MO', 'END:VEVENT'))).toThrow(/BYDAY=MO is not understood/);
    expect(() => parseIcs(ics('BEGIN:VEVENT', 'DTSTART;VALUE=DATE:20261225', 'DTEND;VALUE=DATE:20261225', 'END:VEVENT'))).toThrow(/ends before it starts/);
    expect(() => parseIcs(ics('BEGIN:VEVENT', 'SUMMARY:x', 'END:VEVENT'))).toThrow(/no DTSTART/);
    expect(() => parseIcs('["2026-12-25"]')).toThrow(/BEGIN:VCALENDAR/);
    expect(() => parseIcs('BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20261225\r\n')).toThrow(/no END:VEVENT/);
  });
});

describe('the predicate, in the job\'s zone', () => {
  it('Europe/London, 00:30 and 23:30 around the last Sundays of March and October: the local date decides', () => {
    const zone = 'Europe/London';
    const schedule = compileSchedule('30 0,23 * * *', zone);
    const e = exclusion(['2026-03-29', '2026-10-25']);
    for (const [from, to] of [['2026-03-26T00:00:00Z', '2026-04-01T00:00:00Z'], ['2026-10-22T00:00:00Z', '2026-10-28T00:00:00Z']]) {
      const periods = periodsBetween(schedule, new Date(from!), new Date(to!));
      expect(periods.length).toBeGreaterThanOrEqual(11);
      for (const p of periods) {
        const local = independentLocalDate(p, zone);
        const expected = local === '2026-03-29' || local === '2026-10-25' ? local : null;
        expect(e.excludedBy(p, zone), `${p.toISOString()} (${local} in London)`).toBe(expected);
      }
    }
    // The ones where the UTC date is another day: 00:30 BST on 25 October is 23:30 UTC on the 24th.
    expect(e.excludedBy(new Date('2026-10-24T23:30:00Z'), zone)).toBe('2026-10-25');
    expect(e.excludedBy(new Date('2026-10-24T22:30:00Z'), zone)).toBeNull();
    // 23:30 BST on 29 March is 22:30 UTC that day; 23:30 GMT on the 28th is not excluded.
    expect(e.excludedBy(new Date('2026-03-29T22:30:00Z'), zone)).toBe('2026-03-29');
    expect(e.excludedBy(new Date('2026-03-28T23:30:00Z'), zone)).toBeNull();
  });

  it('America/New_York: 21:00 on 25 December is 02:00 UTC on the 26th, excluded; 21:00 on the 24th is not', () => {
    const e = exclusion(['2026-12-25']);
    expect(e.excludedBy(new Date('2026-12-26T02:00:00Z'), 'America/New_York')).toBe('2026-12-25');
    expect(e.excludedBy(new Date('2026-12-25T02:00:00Z'), 'America/New_York')).toBeNull();
    // The same instants read in UTC: the other way round.
    expect(e.excludedBy(new Date('2026-12-26T02:00:00Z'), 'UTC')).toBeNull();
    expect(e.excludedBy(new Date('2026-12-25T02:00:00Z'), 'UTC')).toBe('2026-12-25');
  });

  it('names the entry that excludes: a date, a range (inclusive), a calendar; the job\'s own dates first', () => {
    const e = exclusion(['calendar:h', '2026-12-24/2026-12-26', '2027-01-01'], { 'h.json': '["2027-01-01", "2027-05-01"]' });
    const on = (d: string) => e.excludedBy(new Date(`${d}T12:00:00Z`), 'UTC');
    expect([on('2026-12-23'), on('2026-12-24'), on('2026-12-26'), on('2026-12-27')]).toEqual([null, '2026-12-24/2026-12-26', '2026-12-24/2026-12-26', null]);
    expect(on('2027-01-01')).toBe('2027-01-01');
    expect(on('2027-05-01')).toBe('calendar:h');
    expect(e.entries).toEqual(['calendar:h', '2026-12-24/2026-12-26', '2027-01-01']);
  });
});

describe('validation: each problem of exclude on one line naming the file and the field', () => {
  const dir = calendarsDir({
    'ok.json': '["2026-12-25"]',
    'broken.ics': ics('BEGIN:VEVENT', 'DTSTART:20261225T090000Z', 'END:VEVENT'),
    'broken-json.json': '["2026-12-25", "tomorrow"]',
    'twice.json': '[]',
    'twice.ics': ics(),
  });
  const problems = (exclude: unknown) => {
    const { job, problems } = validateJob(FILE, { schedule: '0 2 * * *', exclude, run: noop }, 'UTC', {}, FILE, undefined, new CalendarSource(dir));
    expect(job).toBeUndefined();
    for (const p of problems) {
      expect(p.startsWith(`${FILE}: field 'exclude' `), p).toBe(true);
      expect(p).not.toContain('\n');
    }
    return problems;
  };

  it('accepts dates, ranges and calendars that exist', () => {
    const { job, problems } = validateJob(FILE, { schedule: '0 2 * * *', exclude: ['2026-12-25', '2026-12-24/2026-12-26', 'calendar:ok'], run: noop }, 'UTC', {}, FILE, undefined, new CalendarSource(dir));
    expect(problems).toEqual([]);
    expect(job!.exclude!.entries).toHaveLength(3);
    // No exclude: no predicate at all.
    expect(validateJob(FILE, { schedule: '0 2 * * *', run: noop }, 'UTC').job!.exclude).toBeUndefined();
  });

  it('refuses bad dates, reversed and too long ranges, and what is not a list', () => {
    expect(problems(['2026-02-30'])).toEqual([`${FILE}: field 'exclude' entry "2026-02-30": expected a date 'YYYY-MM-DD' (such as '2026-12-25'), a date that exists`]);
    expect(problems(['2026-12-26/2026-12-24'])[0]).toMatch(/entry "2026-12-26\/2026-12-24": .*reversed/);
    expect(problems(['2026-01-01/2037-01-01'])[0]).toMatch(/at most 10 years/);
    expect(problems(['2026-12-25', 'holidays'])).toHaveLength(1);
    expect(problems(['holidays:uk'])[0]).toMatch(/a named calendar is 'calendar:<name>'/);
    expect(problems('2026-12-25')[0]).toMatch(/field 'exclude' = "2026-12-25": expected a list of dates/);
    expect(problems([20261225])[0]).toMatch(/entry 20261225: expected a list/);
  });

  it('refuses a calendar that is missing, broken or ambiguous, naming its file (and line)', () => {
    expect(problems(['calendar:nope'])[0]).toMatch(/entry "calendar:nope": expected a calendar file .*nope\.json or .*nope\.ics \(neither exists\)/);
    expect(problems(['calendar:broken'])[0]).toMatch(/entry "calendar:broken": .*broken\.ics line 5: a timed event \(DTSTART:20261225T090000Z\)/);
    expect(problems(['calendar:broken-json'])[0]).toMatch(/broken-json\.json: entry 2 = "tomorrow"/);
    expect(problems(['calendar:twice'])[0]).toMatch(/both .*twice\.json and .*twice\.ics exist/);
    expect(problems(['calendar:../ok'])[0]).toMatch(/expected a calendar name/);
  });

  it('the loader reads calendars from the folder it is given; the fingerprint follows their content', async () => {
    const jobs = tempDir('cron-calendar-jobs-');
    writeFileSync(join(jobs, 'h.mjs'), "export default { schedule: '0 2 * * *', exclude: ['calendar:ok'], async run() {} };\n");
    const cals = calendarsDir({ 'ok.json': '["2026-12-25"]' });
    const first = await loadJobs(jobs, 'UTC', { cwd: jobs, calendarsDir: cals });
    expect(first.invalid).toEqual([]);
    expect(first.jobs[0]!.exclude!.excludedBy(new Date('2026-12-25T02:00:00Z'), 'UTC')).toBe('calendar:ok');
    writeFileSync(join(cals, 'ok.json'), '["2026-12-26"]');
    const second = await loadJobs(jobs, 'UTC', { cwd: jobs, calendarsDir: cals });
    expect(second.jobs[0]!.exclude!.excludedBy(new Date('2026-12-25T02:00:00Z'), 'UTC')).toBeNull();
    expect(jobFingerprint(first.jobs[0]!, 'x').exclude).not.toBe(jobFingerprint(second.jobs[0]!, 'x').exclude);
    // A calendar named but missing: the job is invalid, the line names the job file and the field.
    const missing = await loadJobs(jobs, 'UTC', { cwd: jobs, calendarsDir: join(cals, 'none') });
    expect(missing.jobs).toEqual([]);
    expect(missing.invalid[0]!.problems[0]).toMatch(/^h\.mjs: field 'exclude' entry "calendar:ok": expected a calendar file/);
  });
});

describe('the catch-up plan after a full outage', () => {
  const job = (exclude: string[], coalesce = true) => validateJob('jobs/hourly.ts', { schedule: '0 * * * *', timezone: 'America/New_York', catchUp: '1d', coalesce, exclude, run: noop }, 'UTC').job!;
  // Every node down from 2026-12-24 20:00 to 2026-12-25 03:30 New York time: periods 21:00 ... 03:00.
  const w = { fromExclusive: Date.parse('2026-12-25T01:00:00Z'), upTo: Date.parse('2026-12-25T08:30:00Z'), now: Date.parse('2026-12-25T08:30:00Z') };

  it('records the excluded periods calendar and runs the latest period that is NOT excluded (others coalesced)', () => {
    // 25 December in New York: 00:00 ... 03:00 local (05:00Z ... 08:00Z) excluded, the latest among them.
    const j = job(['2026-12-25']);
    const plan = planReconcile(j, w, periodsToCheck(j, w), new Set());
    expect(plan.calendar.map((d) => d.toISOString())).toEqual(['2026-12-25T05:00:00.000Z', '2026-12-25T06:00:00.000Z', '2026-12-25T07:00:00.000Z', '2026-12-25T08:00:00.000Z']);
    expect(plan.run.map((d) => d.toISOString())).toEqual(['2026-12-25T04:00:00.000Z']);
    expect(plan.coalesced.map((d) => d.toISOString())).toEqual(['2026-12-25T02:00:00.000Z', '2026-12-25T03:00:00.000Z']);
    expect(plan.missed).toEqual([]);
    // The anchor stops before the period still to run (it has no row until its claim).
    expect(plan.through).toBe(Date.parse('2026-12-25T03:00:00Z'));
  });

  it('a later excluded period with a row (the tick recorded it skipped at start) does not stand for the missed ones', () => {
    const j = job(['2026-12-25']);
    const plan = planReconcile(j, w, periodsToCheck(j, w), new Set([Date.parse('2026-12-25T08:00:00Z')]));
    expect(plan.run.map((d) => d.toISOString())).toEqual(['2026-12-25T04:00:00.000Z']);
    expect(plan.calendar).toHaveLength(3);
  });

  it('with coalesce false, runs every period not excluded; a period with a row already is left alone', () => {
    const j = job(['2026-12-24'], false);
    const rows = new Set([Date.parse('2026-12-25T06:00:00Z')]);
    const plan = planReconcile(j, w, periodsToCheck(j, w), rows);
    expect(plan.calendar.map((d) => d.toISOString())).toEqual(['2026-12-25T02:00:00.000Z', '2026-12-25T03:00:00.000Z', '2026-12-25T04:00:00.000Z']);
    expect(plan.run.map((d) => d.toISOString())).toEqual(['2026-12-25T05:00:00.000Z', '2026-12-25T07:00:00.000Z', '2026-12-25T08:00:00.000Z']);
  });

  it('periods older than catchUp on an excluded date are recorded calendar, not missed', () => {
    const j = validateJob('jobs/hourly.ts', { schedule: '0 * * * *', timezone: 'UTC', catchUp: '1h', exclude: ['2026-12-25'], run: noop }, 'UTC').job!;
    const ww = { fromExclusive: Date.parse('2026-12-24T21:30:00Z'), upTo: Date.parse('2026-12-25T03:30:00Z'), now: Date.parse('2026-12-25T03:30:00Z') };
    const plan = planReconcile(j, ww, periodsToCheck(j, ww), new Set());
    expect(plan.missed.map((d) => d.toISOString())).toEqual(['2026-12-24T22:00:00.000Z', '2026-12-24T23:00:00.000Z']);
    expect(plan.calendar.map((d) => d.toISOString())).toEqual(['2026-12-25T00:00:00.000Z', '2026-12-25T01:00:00.000Z', '2026-12-25T02:00:00.000Z', '2026-12-25T03:00:00.000Z']);
    expect(plan.run).toEqual([]);
    expect(plan.through).toBe(ww.upTo);
  });
});
