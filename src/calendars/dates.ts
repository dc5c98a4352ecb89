/**
 * Calendar dates as day numbers (days since 1970-01-01, the proleptic Gregorian calendar), and the
 * local date of an instant in a time zone. A date here is a wall-calendar date with no zone: a job's
 * period is on an excluded date when its instant, read in the job's zone, falls on that date.
 */

const DAY_MS = 86_400_000;
/** Refused: ranges (a job's `exclude`, a calendar's entries, a multi-day event) longer than this. */
export const MAX_RANGE_YEARS = 10;
export const MAX_RANGE_DAYS = MAX_RANGE_YEARS * 366;

export const DATE_EXPECTED = "a date 'YYYY-MM-DD' (such as '2026-12-25')";

/** The day number of `y-m-d`, or undefined when that date does not exist (2026-02-30, month 13). */
export function dayOf(year: number, month: number, day: number): number | undefined {
  if (!Number.isInteger(year) || !Number.isInteger(month) || !Number.isInteger(day)) return undefined;
  // Four-digit years only (Date.UTC reads 0-99 as 1900-1999).
  if (year < 1000 || year > 9999 || month < 1 || month > 12 || day < 1 || day > 31) return undefined;
  const ms = Date.UTC(year, month - 1, day);
  const d = new Date(ms);
  if (d.getUTCFullYear() !== year || d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day) return undefined;
  return Math.round(ms / DAY_MS);
}

/** `YYYY-MM-DD` -> its day number; undefined when the text is not such a date, or the date does not exist. */
export function parseDate(text: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!m) return undefined;
  return dayOf(Number(m[1]), Number(m[2]), Number(m[3]));
}

/** `YYYYMMDD` (iCalendar's DATE value) -> its day number. */
export function parseBasicDate(text: string): number | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})$/.exec(text);
  if (!m) return undefined;
  return dayOf(Number(m[1]), Number(m[2]), Number(m[3]));
}

/** The day number -> `YYYY-MM-DD`. */
export function dateText(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

/** The parts of a day number. */
export function partsOf(day: number): { year: number; month: number; day: number } {
  const d = new Date(day * DAY_MS);
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit', calendar: 'gregory', numberingSystem: 'latn' });
    formatters.set(zone, f);
  }
  return f;
}

/** The day number of the date `at` falls on in `zone` (an IANA zone, checked before). */
export function localDay(at: Date, zone: string): number {
  let year = 0;
  let month = 0;
  let day = 0;
  for (const p of formatter(zone).formatToParts(at)) {
    if (p.type === 'year') year = Number(p.value);
    else if (p.type === 'month') month = Number(p.value);
    else if (p.type === 'day') day = Number(p.value);
  }
  return dayOf(year, month, day)!;
}

/** The local date of `at` in `zone`: `YYYY-MM-DD`. */
export function localDate(at: Date, zone: string): string {
  return dateText(localDay(at, zone));
}
