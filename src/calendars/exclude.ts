/**
 * A job's `exclude`: dates ('2026-12-25'), inclusive ranges ('2026-12-24/2026-12-26') and named
 * calendars ('calendar:uk-holidays'), resolved when the job is loaded into a predicate on a period:
 * is its instant, read in the job's zone, on an excluded date, and which entry says so. A period on
 * an excluded date is recorded skipped (reason calendar) by the claim and by the catch-up, never run
 * unless forced by hand. Asking costs one Intl read and a few lookups.
 */
import { createHash } from 'node:crypto';
import type { Calendar, CalendarSource } from './calendar.js';
import { parseDateEntry } from './calendar.js';
import { dayOf, localDay, partsOf } from './dates.js';

export const CALENDAR_PREFIX = 'calendar:';

/** A resolved `exclude`. */
export interface Exclusion {
  /** The entries as the job file wrote them. */
  readonly entries: readonly string[];
  /** The entry (as written) that excludes the period `at` in `zone`, or null when none does. */
  excludedBy(at: Date, zone: string): string | null;
  /** Changes when the entries or a named calendar's content change (a reload sees the job changed). */
  readonly fingerprint: string;
}

interface Range { from: number; to: number; entry: string }

class DateExclusion implements Exclusion {
  private readonly days = new Map<number, string>();
  private readonly ranges: Range[] = [];
  private readonly yearly: Array<{ ev: Calendar['yearly'][number]; except: Set<number>; entry: string }> = [];
  /** The earliest range's first day and the longest range, for a binary search over starts. */
  private longest = 0;

  constructor(readonly entries: readonly string[], readonly fingerprint: string) {}

  addDay(day: number, entry: string): void {
    if (!this.days.has(day)) this.days.set(day, entry);
  }

  addRange(from: number, to: number, entry: string): void {
    this.ranges.push({ from, to, entry });
  }

  addYearly(ev: Calendar['yearly'][number], entry: string): void {
    this.yearly.push({ ev, except: new Set(ev.except), entry });
  }

  seal(): void {
    this.ranges.sort((a, b) => a.from - b.from);
    for (const r of this.ranges) this.longest = Math.max(this.longest, r.to - r.from);
  }

  excludedBy(at: Date, zone: string): string | null {
    const day = localDay(at, zone);
    return this.byDay(day);
  }

  /** The entry excluding the day number `day`, or null. */
  byDay(day: number): string | null {
    const hit = this.days.get(day);
    if (hit !== undefined) return hit;
    if (this.ranges.length > 0) {
      // The ranges starting at or before `day` and no earlier than `day - longest`.
      let lo = 0;
      let hi = this.ranges.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (this.ranges[mid]!.from <= day) lo = mid + 1;
        else hi = mid;
      }
      for (let i = lo - 1; i >= 0 && this.ranges[i]!.from >= day - this.longest; i--) {
        if (this.ranges[i]!.to >= day) return this.ranges[i]!.entry;
      }
    }
    for (const y of this.yearly) if (inYearly(y.ev, y.except, day)) return y.entry;
    return null;
  }
}

/** Is `day` in an occurrence of the yearly event (this year's, or one that began last year)? */
function inYearly(ev: Calendar['yearly'][number], except: Set<number>, day: number): boolean {
  const { year } = partsOf(day);
  for (const y of [year, year - 1]) {
    const n = y - ev.fromYear;
    if (n < 0 || n % ev.interval !== 0) continue;
    // A date that does not exist that year (29 February) has no occurrence, and is not counted (RFC 5545 3.3.10).
    const start = dayOf(y, ev.month, ev.day);
    if (start === undefined || except.has(start)) continue;
    if (ev.count !== null && occurrencesBefore(ev, y) >= ev.count) continue;
    if (ev.untilDay !== null && start > ev.untilDay) continue;
    if (day >= start && day < start + ev.length) return true;
  }
  return false;
}

/** How many occurrences the yearly event has before year `y` (stops counting at its COUNT). */
function occurrencesBefore(ev: Calendar['yearly'][number], y: number): number {
  let n = 0;
  for (let year = ev.fromYear; year < y && n < ev.count!; year += ev.interval) if (dayOf(year, ev.month, ev.day) !== undefined) n++;
  return n;
}

/**
 * Resolves a job's `exclude` value. Each problem is one line without the job's file and field (the
 * caller adds them): the entry as written, and what was expected.
 */
export function resolveExclude(value: unknown, calendars: CalendarSource): { exclusion?: Exclusion; problems: string[] } {
  const problems: string[] = [];
  const listExpected = "a list of dates 'YYYY-MM-DD', ranges 'YYYY-MM-DD/YYYY-MM-DD' and calendars 'calendar:<name>'";
  if (!Array.isArray(value)) return { problems: [`${show(value)}: expected ${listExpected}`] };
  const h = createHash('sha256');
  const found: Array<{ entry: string; apply: (e: DateExclusion) => void }> = [];
  for (const entry of value) {
    if (typeof entry !== 'string') {
      problems.push(`entry ${show(entry)}: expected ${listExpected}`);
      continue;
    }
    h.update(`${entry}\n`);
    if (entry.startsWith(CALENDAR_PREFIX)) {
      const name = entry.slice(CALENDAR_PREFIX.length);
      const cal = calendars.get(name);
      if ('problem' in cal) {
        problems.push(`entry "${entry}": ${cal.problem}`);
        continue;
      }
      h.update(`${cal.hash}\n`);
      found.push({ entry, apply: (e) => {
        for (const d of cal.days) e.addDay(d, entry);
        for (const [from, to] of cal.ranges) e.addRange(from, to, entry);
        for (const y of cal.yearly) e.addYearly(y, entry);
      } });
      continue;
    }
    const parsed = parseDateEntry(entry);
    if ('problem' in parsed) {
      problems.push(`entry "${entry}": ${parsed.problem}${entry.includes(':') ? " (a named calendar is 'calendar:<name>')" : ''}`);
      continue;
    }
    found.push({ entry, apply: (e) => ('day' in parsed ? e.addDay(parsed.day, entry) : e.addRange(parsed.range[0], parsed.range[1], entry)) });
  }
  if (problems.length > 0) return { problems };
  if (found.length === 0) return { problems };
  // The job's own dates first: a period both on a listed date and in a calendar names the date.
  const exclusion = new DateExclusion(value as string[], h.digest('hex').slice(0, 12));
  for (const f of [...found.filter((f) => !f.entry.startsWith(CALENDAR_PREFIX)), ...found.filter((f) => f.entry.startsWith(CALENDAR_PREFIX))]) f.apply(exclusion);
  exclusion.seal();
  return { exclusion, problems };
}

function show(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
