/**
 * Named calendars (`exclude: ['calendar:<name>']`): files in the calendars folder beside the config
 * file (`config/calendars/` by default), `<name>.json` (a JSON list of dates 'YYYY-MM-DD' and ranges
 * 'YYYY-MM-DD/YYYY-MM-DD') or `<name>.ics` (an iCalendar file of all-day events, see ics.ts). Each is
 * read once per load of the jobs, however many jobs name it.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { errorMessage } from '../errors.js';
import { DATE_EXPECTED, MAX_RANGE_DAYS, MAX_RANGE_YEARS, parseDate } from './dates.js';
import { CalendarFileError, parseIcs } from './ics.js';
import type { CalendarDays } from './types.js';

export type { CalendarDays, YearlyEvent } from './types.js';

export interface Calendar extends CalendarDays {
  name: string;
  /** The file as shown in messages. */
  file: string;
  /** A short hash of the file's content (a reload sees a calendar changed). */
  hash: string;
}

/** A calendar's name: the file name without `.json` / `.ics`. */
export const CALENDAR_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** One entry of a list of dates (a job's `exclude`, a JSON calendar): a date or an inclusive range. */
export function parseDateEntry(text: string): { day: number } | { range: [number, number] } | { problem: string } {
  const slash = text.indexOf('/');
  if (slash < 0) {
    const day = parseDate(text);
    return day === undefined ? { problem: `expected ${DATE_EXPECTED}, a date that exists` } : { day };
  }
  const from = parseDate(text.slice(0, slash));
  const to = parseDate(text.slice(slash + 1));
  if (from === undefined || to === undefined) return { problem: "expected a range 'YYYY-MM-DD/YYYY-MM-DD' of two dates that exist (inclusive)" };
  if (to < from) return { problem: 'expected a range whose first date is not after its last (the range is reversed)' };
  if (to - from + 1 > MAX_RANGE_DAYS) return { problem: `expected a range of at most ${MAX_RANGE_YEARS} years` };
  return { range: [from, to] };
}

/** A JSON calendar: a list of dates and ranges. Throws CalendarFileError. */
export function parseJsonCalendar(text: string): CalendarDays {
  let list: unknown;
  try {
    list = JSON.parse(text);
  } catch (err) {
    throw new CalendarFileError(null, `not valid JSON (${errorMessage(err)})`);
  }
  if (!Array.isArray(list)) throw new CalendarFileError(null, "expected a JSON list of dates, such as [\"2026-12-25\", \"2026-12-31/2027-01-01\"]");
  const out: CalendarDays = { days: [], ranges: [], yearly: [] };
  list.forEach((entry, i) => {
    if (typeof entry !== 'string') throw new CalendarFileError(null, `entry ${i + 1} = ${JSON.stringify(entry)}: expected ${DATE_EXPECTED} or a range 'YYYY-MM-DD/YYYY-MM-DD'`);
    const parsed = parseDateEntry(entry);
    if ('problem' in parsed) throw new CalendarFileError(null, `entry ${i + 1} = "${entry}": ${parsed.problem}`);
    if ('day' in parsed) out.days.push(parsed.day);
    else out.ranges.push(parsed.range);
  });
  return out;
}

/**
 * The calendars of one load of the jobs: the folder, and each calendar read (or its problem) kept
 * for the other jobs that name it.
 */
export class CalendarSource {
  private readonly read = new Map<string, Calendar | { problem: string }>();

  /** `cwd`: files inside it are shown relative to it. */
  constructor(readonly dir: string, private readonly cwd: string = process.cwd()) {}

  private shown(file: string): string {
    const r = relative(this.cwd, file);
    return r.startsWith('..') ? file : r;
  }

  /** The calendar `name`, or the one line saying why it cannot be used (without the job's file and field). */
  get(name: string): Calendar | { problem: string } {
    let c = this.read.get(name);
    if (!c) {
      c = this.load(name);
      this.read.set(name, c);
    }
    return c;
  }

  private load(name: string): Calendar | { problem: string } {
    if (!CALENDAR_NAME.test(name)) return { problem: 'expected a calendar name of letters, digits, . _ - (the file name without .json or .ics)' };
    const json = join(this.dir, `${name}.json`);
    const ics = join(this.dir, `${name}.ics`);
    const found = [json, ics].filter((f) => existsSync(f));
    if (found.length === 0) return { problem: `expected a calendar file ${this.shown(json)} or ${this.shown(ics)} (neither exists)` };
    if (found.length > 1) return { problem: `expected one calendar file named ${name}: both ${this.shown(json)} and ${this.shown(ics)} exist` };
    const file = found[0]!;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      return { problem: `${this.shown(file)} cannot be read: ${errorMessage(err)}` };
    }
    try {
      const days = file.endsWith('.json') ? parseJsonCalendar(text) : parseIcs(text);
      return { ...days, name, file: this.shown(file), hash: createHash('sha256').update(text).digest('hex').slice(0, 12) };
    } catch (err) {
      if (err instanceof CalendarFileError) return { problem: `${this.shown(file)}${err.line !== null ? ` line ${err.line}` : ''}: ${err.message}` };
      return { problem: `${this.shown(file)}: ${errorMessage(err)}` };
    }
  }
}
