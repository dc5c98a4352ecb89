/**
 * Period math: pure functions of (expression, zone, reference instant). No timers here.
 *
 * A period is the instant croner yields for the expression in the zone, expressed in UTC. Every node
 * derives the same instants from the same inputs (croner is pinned exactly for that reason), so the
 * moment a timer actually fired never enters a period key.
 */
import { Cron } from 'croner';

export interface Schedule {
  readonly expression: string;
  readonly timezone: string;
  readonly cron: Cron;
}

export function isValidTimezone(timezone: string): boolean {
  if (typeof timezone !== 'string' || timezone === '') return false;
  // A formatter costs about 0.1 ms, and every job is checked two or three times at each load:
  // 10,000 jobs spent 2 s here. The valid zones are few (the IANA list), so they are remembered.
  if (VALID_ZONES.has(timezone)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    VALID_ZONES.add(timezone);
    return true;
  } catch {
    return false;
  }
}

const VALID_ZONES = new Set<string>();

/**
 * The nicknames of Vixie cron, as croner 11 reads them (it expands them itself; the same table is
 * kept here to validate them, say what they mean, and refuse `@reboot` and made-up ones clearly).
 * Matched case-insensitively, like croner.
 */
export const NICKNAMES: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

/** The 5-field expression a nickname stands for (`@daily` -> `0 0 * * *`); undefined for anything else. */
export function expandNickname(expression: string): string | undefined {
  const key = expression.trim().toLowerCase();
  return Object.hasOwn(NICKNAMES, key) ? NICKNAMES[key] : undefined;
}

/**
 * Compiles an expression (5 fields, or 6 with seconds first, or a nickname such as `@daily`) in a
 * zone. Throws an Error whose message says what is wrong, without the croner prefix noise.
 */
export function compileSchedule(expression: string, timezone: string): Schedule {
  if (!isValidTimezone(timezone)) throw new Error(`unknown time zone '${timezone}'`);
  const trimmed = expression.trim();
  if (trimmed.startsWith('@')) {
    if (expandNickname(trimmed) === undefined) {
      const known = `the nicknames are ${Object.keys(NICKNAMES).join(', ')}`;
      throw new Error(trimmed.toLowerCase() === '@reboot'
        ? `@reboot is not supported, a cluster has no single start; ${known}`
        : `unknown nickname '${trimmed}'; ${known}`);
    }
  } else {
    const fields = trimmed.split(/\s+/).length;
    if (fields !== 5 && fields !== 6) {
      throw new Error(`expected 5 fields (minute hour day month weekday) or 6 (seconds first), got ${fields}`);
    }
  }
  let cron: Cron;
  try {
    // UTC as a fixed offset: the same instants, without croner asking Intl for the wall clock at
    // each step (a period computed in 45 us instead of 150: start-up and the sweeps compute
    // several per job).
    cron = new Cron(expression.trim(), { ...(timezone === 'UTC' ? { utcOffset: 0 } : { timezone }), paused: true, mode: '5-or-6-parts' });
  } catch (err) {
    throw new Error(String((err as Error).message).replace(/^CronPattern:\s*/, ''));
  }
  sharePatternTables(cron);
  const schedule: Schedule = { expression, timezone, cron };
  // The first period from now is what the scheduler asks first: kept (see nextPeriodAfter).
  if (nextPeriodAfter(schedule, new Date()) === null && cron.nextRun(new Date(0)) === null) {
    throw new Error('the expression never matches a date (for example the 31st of February)');
  }
  return schedule;
}

/**
 * croner 11 keeps, per pattern, a table per field of the values it allows: 10,000 entries for the
 * years (80 KB, most of a loaded job's memory: 10,000 jobs held 800 MB of them), about 225 for the
 * other fields (1.8 KB). It writes them only while parsing the expression, and reads the year table
 * only when the year is not `*` (an expression of 5 or 6 fields never has a year), so patterns share
 * equal tables: one year table for all, and one per distinct content of each other field (most jobs
 * have the same seconds, months, weekdays...). Should a croner upgrade change these internals,
 * nothing is shared and nothing else changes (croner is pinned exactly).
 */
function sharePatternTables(cron: Cron): void {
  const pattern = (cron as unknown as { _states?: { pattern?: Record<string, unknown> } })._states?.pattern;
  if (!pattern) return;
  if (pattern.starYear === true && Array.isArray(pattern.year) && pattern.year.length === EVERY_YEAR.length) pattern.year = EVERY_YEAR;
  for (const field of SHARED_FIELDS) {
    const table = pattern[field];
    if (!Array.isArray(table) || table.length > 64) continue;
    const key = `${field}:${table.join(',')}`;
    const shared = SHARED_TABLES.get(key);
    if (shared) pattern[field] = shared;
    else SHARED_TABLES.set(key, table);
  }
}

const EVERY_YEAR: readonly number[] = new Array<number>(10_000).fill(1);
const SHARED_FIELDS = ['second', 'minute', 'hour', 'day', 'month', 'dayOfWeek', 'nearestWeekdays'] as const;
/** One table per field and content; as many as distinct fields were ever loaded (a few hundred entries at most in practice). */
const SHARED_TABLES = new Map<string, unknown[]>();

/** The latest period at or before `at`, or null when there is none. */
export function latestPeriodAtOrBefore(schedule: Schedule, at: Date): Date | null {
  // previousRuns() is strictly before its reference; one millisecond later includes `at` itself.
  const [prev] = schedule.cron.previousRuns(1, new Date(at.getTime() + 1));
  return prev ?? null;
}

/** The first period strictly after `after`. */
export function nextPeriodAfter(schedule: Schedule, after: Date): Date | null {
  // The sweeps ask every job, every second, for its first period after an anchor that moves a little
  // each time: for a yearly job croner then works out the same instant, 1,000 jobs blocking the
  // event loop for tens of milliseconds a second. The last answers are kept: when `after` is in
  // [a, n) for a kept (a, n), no period lies in (a, n), so the first one after `after` is n.
  const at = after.getTime();
  let kept = recentNext.get(schedule);
  if (kept) {
    for (const k of kept) {
      if (at >= k.after && (k.next === null || at < k.next)) return k.next === null ? null : new Date(k.next);
    }
  } else {
    kept = [];
    recentNext.set(schedule, kept);
  }
  const next = schedule.cron.nextRun(after);
  kept.unshift({ after: at, next: next === null ? null : next.getTime() });
  if (kept.length > KEPT_NEXT) kept.length = KEPT_NEXT;
  return next;
}

/** Per schedule, its last few (after, first period after it) answers: the sweep asks two ranges per job. */
const recentNext = new WeakMap<Schedule, Array<{ after: number; next: number | null }>>();
const KEPT_NEXT = 4;

export function nextPeriods(schedule: Schedule, after: Date, count: number): Date[] {
  return schedule.cron.nextRuns(count, after);
}

/**
 * Periods in (fromExclusive, toInclusive], oldest first, at most `limit` of them (the latest ones are
 * kept when there are more).
 */
export function periodsBetween(schedule: Schedule, fromExclusive: Date, toInclusive: Date, limit = 10_000): Date[] {
  const out: Date[] = [];
  let cursor = latestPeriodAtOrBefore(schedule, toInclusive);
  while (cursor && cursor.getTime() > fromExclusive.getTime() && out.length < limit) {
    out.push(cursor);
    const [prev] = schedule.cron.previousRuns(1, cursor);
    cursor = prev ?? null;
  }
  return out.reverse();
}

/** Periods in (fromExclusive, toInclusive], oldest first, at most `limit` of them (the oldest ones are kept). */
export function periodsAfter(schedule: Schedule, fromExclusive: Date, toInclusive: Date, limit: number): Date[] {
  const out: Date[] = [];
  let cursor = nextPeriodAfter(schedule, fromExclusive);
  while (cursor && cursor.getTime() <= toInclusive.getTime() && out.length < limit) {
    out.push(cursor);
    cursor = nextPeriodAfter(schedule, cursor);
  }
  return out;
}

export function isPeriod(schedule: Schedule, instant: Date): boolean {
  return latestPeriodAtOrBefore(schedule, instant)?.getTime() === instant.getTime();
}

export function periodKey(job: string, instant: Date): string {
  return `${job}@${instant.toISOString()}`;
}

const offsetFormats = new Map<string, Intl.DateTimeFormat>();

/** UTC offset of the zone at an instant, as `+hh:mm`. */
export function utcOffset(instant: Date, timezone: string): string {
  let fmt = offsetFormats.get(timezone);
  if (!fmt) {
    fmt = new Intl.DateTimeFormat('en-US', { timeZone: timezone, timeZoneName: 'longOffset' });
    offsetFormats.set(timezone, fmt);
  }
  const name = fmt.formatToParts(instant).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const match = /GMT([+-]\d{2}:\d{2})?/.exec(name);
  return match?.[1] ?? '+00:00';
}

const localFormats = new Map<string, Intl.DateTimeFormat>();

/** Local wall time in the zone: `YYYY-MM-DDTHH:mm:ss±hh:mm`. */
export function formatLocal(instant: Date, timezone: string): string {
  let fmt = localFormats.get(timezone);
  if (!fmt) {
    fmt = new Intl.DateTimeFormat('en-CA', {
      timeZone: timezone, hourCycle: 'h23',
      year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
    localFormats.set(timezone, fmt);
  }
  const p = Object.fromEntries(fmt.formatToParts(instant).map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}:${p.second}${utcOffset(instant, timezone)}`;
}

export interface PeriodView {
  utc: string;
  local: string;
  /** Set when the zone's UTC offset changed since the previous period (a DST transition in between). */
  dst?: string;
}

export function describePeriods(schedule: Schedule, after: Date, count: number): PeriodView[] {
  const periods = nextPeriods(schedule, after, count);
  const first = periods[0];
  let previousOffset = first ? utcOffset(latestPeriodAtOrBefore(schedule, after) ?? first, schedule.timezone) : '';
  return periods.map((p) => {
    const offset = utcOffset(p, schedule.timezone);
    const view: PeriodView = { utc: p.toISOString(), local: formatLocal(p, schedule.timezone) };
    if (offset !== previousOffset) view.dst = `UTC offset ${previousOffset} -> ${offset}`;
    previousOffset = offset;
    return view;
  });
}
