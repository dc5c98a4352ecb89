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
  // One Schedule per (expression, zone), shared by every job that has it: the period math below is
  // remembered per Schedule, so 2,000 every-second jobs cost croner one computation a tick, not 2,000.
  const id = `${timezone}\u0000${expression}`;
  const known = compiled.get(id);
  if (known) return known;
  const schedule = compileNew(expression, timezone);
  if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
  compiled.set(id, schedule);
  return schedule;
}

/** Schedules compiled so far, by zone and expression (a schedule is immutable: croner is asked, never started). */
const compiled = new Map<string, Schedule>();
/** Distinct schedules kept at most (the oldest compiled is dropped first; a job keeps its own). */
const MAX_COMPILED = 50_000;

function compileNew(expression: string, timezone: string): Schedule {
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
  const at = after.getTime();
  const hit = knownNext(schedule, at);
  if (hit !== undefined) return hit === null ? null : new Date(hit);
  // Not known: croner works out the next few periods at once, kept for every job of the schedule
  // (see compileSchedule); a walk that reaches the end of a span (a tick after the next, a sweep
  // going period by period) extends it by many more.
  let spans = knownPeriods.get(schedule);
  if (!spans) knownPeriods.set(schedule, (spans = []));
  const walked = spans.find((span) => !span.exhausted && span.periods.length > 0 && span.periods[span.periods.length - 1] === at);
  const count = walked ? PERIODS_EXTENDED : PERIODS_FIRST;
  const runs = schedule.cron.nextRuns(count, after).map((d) => d.getTime());
  if (walked && walked.periods.length < MAX_SPAN) {
    walked.periods.push(...runs);
    walked.exhausted = runs.length < count;
  } else {
    spans.unshift({ from: at, periods: runs, exhausted: runs.length < count });
    if (spans.length > SPANS_KEPT) spans.length = SPANS_KEPT;
  }
  return runs.length > 0 ? new Date(runs[0]!) : null;
}

/**
 * The first period after `at` from a kept span, null when the schedule has none, undefined when no
 * span covers `at`. A span holds the consecutive periods croner gave after its `from`: none lies
 * between `from` and the first, nor between two neighbours, so any instant in [from, last) finds
 * its answer by bisection, whichever job asks and however far a sweep walks.
 */
function knownNext(schedule: Schedule, at: number): number | null | undefined {
  const spans = knownPeriods.get(schedule);
  if (!spans) return undefined;
  for (const span of spans) {
    const { periods } = span;
    if (at < span.from) continue;
    const last = periods.length > 0 ? periods[periods.length - 1]! : span.from;
    if (at >= last) {
      if (span.exhausted) return null;
      continue;
    }
    let lo = 0;
    let hi = periods.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (periods[mid]! > at) hi = mid;
      else lo = mid + 1;
    }
    return periods[lo]!;
  }
  return undefined;
}

/**
 * Per schedule, a few spans of consecutive periods (the newest first): the tick asks each schedule
 * for one or two instants a tick, the sweep walks each job's periods from its anchor to now, and a
 * node that fell behind walks many; croner's answer for a seconds schedule costs tens of
 * microseconds, which 1,000 jobs walking 30 periods each turned into seconds of a blocked event loop.
 */
const knownPeriods = new WeakMap<Schedule, Array<{ from: number; periods: number[]; exhausted: boolean }>>();
/** Periods computed at once for an instant no span covers (a yearly schedule: four years). */
const PERIODS_FIRST = 4;
/** Periods added at once to a span whose end a walk reached. */
const PERIODS_EXTENDED = 64;
/** A span grows to this many periods at most (then a new one starts). */
const MAX_SPAN = 4096;
/** Spans kept per schedule. */
const SPANS_KEPT = 4;

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
  // A tick asks for the keys of every job at one instant: its ISO text is made once, not per job
  // (toISOString was 5 % of a node's CPU at 1,000 every-second jobs). An invalid date throws as before.
  const ms = instant.getTime();
  if (ms !== lastKeyMs) {
    lastKeyIso = instant.toISOString();
    lastKeyMs = ms;
  }
  return `${job}@${lastKeyIso}`;
}

let lastKeyMs = NaN;
let lastKeyIso = '';

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

const UTC_OFFSET = { shown: '+00:00', ms: 0 };

/** The zone's offset at an instant: as shown (`+hh:mm`) and exactly, in ms (seconds included, as in LMT). */
function zoneOffset(instant: Date, timezone: string): { shown: string; ms: number } {
  if (timezone === 'UTC') return UTC_OFFSET;
  let fmt = offsetFormats.get(timezone);
  if (!fmt) {
    fmt = new Intl.DateTimeFormat('en-US', { timeZone: timezone, timeZoneName: 'longOffset' });
    offsetFormats.set(timezone, fmt);
  }
  const name = fmt.formatToParts(instant).find((p) => p.type === 'timeZoneName')?.value ?? 'GMT';
  const m = /GMT([+-])(\d{2}):(\d{2})(?::(\d{2}))?/.exec(name);
  if (!m) return { shown: '+00:00', ms: 0 };
  const sign = m[1] === '-' ? -1 : 1;
  return { shown: `${m[1]}${m[2]}:${m[3]}`, ms: sign * ((Number(m[2]) * 60 + Number(m[3])) * 60 + Number(m[4] ?? 0)) * 1000 };
}

const two = (n: number) => (n < 10 ? `0${n}` : String(n));

/**
 * Each period in UTC and in the job's zone, with the DST changes marked. One Intl call a period (the
 * offset); the local wall time is the instant shifted by it (what formatLocal says, at a third of
 * its cost: `next -n 100000` of an every-second job took 10 s).
 */
export function describePeriods(schedule: Schedule, after: Date, count: number): PeriodView[] {
  const periods = nextPeriods(schedule, after, count);
  const first = periods[0];
  const zone = schedule.timezone;
  let previousOffset = first ? utcOffset(latestPeriodAtOrBefore(schedule, after) ?? first, zone) : '';
  return periods.map((p) => {
    const offset = zoneOffset(p, zone);
    const w = new Date(p.getTime() + offset.ms);
    const local = `${w.getUTCFullYear()}-${two(w.getUTCMonth() + 1)}-${two(w.getUTCDate())}T${two(w.getUTCHours())}:${two(w.getUTCMinutes())}:${two(w.getUTCSeconds())}${offset.shown}`;
    const view: PeriodView = { utc: p.toISOString(), local };
    if (offset.shown !== previousOffset) view.dst = `UTC offset ${previousOffset} -> ${offset.shown}`;
    previousOffset = offset.shown;
    return view;
  });
}
