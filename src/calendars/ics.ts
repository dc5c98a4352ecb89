/**
 * The part of iCalendar (RFC 5545) a holiday calendar uses: VEVENTs of whole days. Lines are
 * unfolded (a line starting with a space or a tab continues the one before) whether they end in CRLF
 * or LF. Each event is `DTSTART;VALUE=DATE:20261225` with an optional `DTEND;VALUE=DATE` (exclusive:
 * a two-day event ends on the third day) or `DURATION:P2D`; no end is one day. `RRULE:FREQ=YEARLY`
 * (with `UNTIL` or `COUNT`, and `INTERVAL`) repeats it every year on the same month and day, without
 * the dates of its `EXDATE`s. Cancelled events (`STATUS:CANCELLED`) exclude nothing. Anything a
 * scheduler could only guess at is refused with its line: a timed event (a DTSTART with a time), a
 * rule other than a plain yearly one.
 */
import { MAX_RANGE_DAYS, MAX_RANGE_YEARS, parseBasicDate, partsOf } from './dates.js';
import type { CalendarDays, YearlyEvent } from './types.js';

/** One problem of a calendar file: the line it is on (1-based, of the file as written) and what is wrong. */
export class CalendarFileError extends Error {
  constructor(readonly line: number | null, message: string) {
    super(message);
  }
}

interface Line { text: string; line: number }

/** Unfolded content lines, each with the number of the file line it starts on. */
function unfold(text: string): Line[] {
  const raw = text.replace(/^\uFEFF/, '').split(/\r\n|\n|\r/);
  const out: Line[] = [];
  raw.forEach((l, i) => {
    if ((l.startsWith(' ') || l.startsWith('\t')) && out.length > 0) out[out.length - 1]!.text += l.slice(1);
    else if (l.trim() !== '') out.push({ text: l, line: i + 1 });
  });
  return out;
}

interface Property { name: string; params: Map<string, string>; value: string }

function property(l: Line): Property {
  // NAME;PARAM=VALUE;PARAM="QUOTED:VALUE":value
  let i = 0;
  let quoted = false;
  for (; i < l.text.length; i++) {
    const c = l.text[i];
    if (c === '"') quoted = !quoted;
    else if (c === ':' && !quoted) break;
  }
  if (i >= l.text.length) throw new CalendarFileError(l.line, `not an iCalendar content line (no ':'): ${short(l.text)}`);
  const [name, ...params] = l.text.slice(0, i).split(';');
  const map = new Map<string, string>();
  for (const p of params) {
    const eq = p.indexOf('=');
    if (eq > 0) map.set(p.slice(0, eq).toUpperCase(), p.slice(eq + 1).replace(/^"|"$/g, '').toUpperCase());
  }
  return { name: name!.toUpperCase(), params: map, value: l.text.slice(i + 1).trim() };
}

function short(text: string): string {
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** A DATE value (an all-day event's day), refusing a DATE-TIME (a timed event). */
function dateValue(p: Property, line: number): number {
  const isDate = p.params.get('VALUE') === 'DATE' || /^\d{8}$/.test(p.value);
  if (!isDate || /T/i.test(p.value)) {
    throw new CalendarFileError(line, `a timed event (${p.name}:${short(p.value)}): expected all-day events only (${p.name};VALUE=DATE:20261225)`);
  }
  const day = parseBasicDate(p.value);
  if (day === undefined) throw new CalendarFileError(line, `${p.name}:${short(p.value)} is not a date (expected YYYYMMDD, a day that exists)`);
  return day;
}

/** DURATION of an all-day event: whole days or weeks (P1D, P2W). */
function durationDays(p: Property, line: number): number {
  const m = /^\+?P(?:(\d+)W|(\d+)D)$/i.exec(p.value);
  if (!m) throw new CalendarFileError(line, `DURATION:${short(p.value)}: expected whole days or weeks (P1D, P2W) for an all-day event`);
  return m[1] !== undefined ? Number(m[1]) * 7 : Number(m[2]);
}

interface EventDraft {
  line: number;
  start?: number;
  end?: number;
  days?: number;
  endLine?: number;
  rrule?: { value: string; line: number };
  exdates: number[];
  cancelled: boolean;
}

/** The days an iCalendar file excludes. Throws CalendarFileError naming the line of the first problem. */
export function parseIcs(text: string): CalendarDays {
  const lines = unfold(text);
  const out: CalendarDays = { days: [], ranges: [], yearly: [] };
  if (lines.length === 0 || lines[0]!.text.trim().toUpperCase() !== 'BEGIN:VCALENDAR') {
    throw new CalendarFileError(lines[0]?.line ?? 1, 'expected an iCalendar file starting with BEGIN:VCALENDAR');
  }
  let event: EventDraft | null = null;
  // Components nested in an event (VALARM) are skipped whole.
  let nested = 0;
  let ended = false;
  for (const l of lines) {
    const p = property(l);
    if (p.name === 'BEGIN') {
      const what = p.value.toUpperCase();
      if (event) nested++;
      else if (what === 'VEVENT') event = { line: l.line, exdates: [], cancelled: false };
      continue;
    }
    if (p.name === 'END') {
      const what = p.value.toUpperCase();
      if (event && nested > 0) nested--;
      else if (event && what === 'VEVENT') {
        addEvent(out, event);
        event = null;
      } else if (what === 'VCALENDAR') ended = true;
      continue;
    }
    if (!event || nested > 0) continue;
    if (p.name === 'DTSTART') event.start = dateValue(p, l.line);
    else if (p.name === 'DTEND') {
      event.end = dateValue(p, l.line);
      event.endLine = l.line;
    } else if (p.name === 'DURATION') {
      event.days = durationDays(p, l.line);
      event.endLine = l.line;
    } else if (p.name === 'RRULE') event.rrule = { value: p.value, line: l.line };
    else if (p.name === 'EXDATE') {
      for (const v of p.value.split(',')) event.exdates.push(dateValue({ ...p, value: v.trim() }, l.line));
    } else if (p.name === 'STATUS' && p.value.toUpperCase() === 'CANCELLED') event.cancelled = true;
  }
  if (event) throw new CalendarFileError(event.line, 'BEGIN:VEVENT with no END:VEVENT');
  if (!ended) throw new CalendarFileError(lines[lines.length - 1]!.line, 'no END:VCALENDAR (the file is cut short?)');
  return out;
}

function addEvent(out: CalendarDays, e: EventDraft): void {
  if (e.start === undefined) throw new CalendarFileError(e.line, 'a VEVENT with no DTSTART');
  if (e.cancelled) return;
  // DTEND is exclusive (RFC 5545 3.6.1): an event of one day ends the next day.
  const length = e.end !== undefined ? e.end - e.start : (e.days ?? 1);
  if (length < 1) throw new CalendarFileError(e.endLine ?? e.line, 'the event ends before it starts (DTEND is exclusive: a one-day event ends the next day)');
  if (length > MAX_RANGE_DAYS) throw new CalendarFileError(e.endLine ?? e.line, `the event lasts ${length} days: expected at most ${MAX_RANGE_YEARS} years`);
  if (e.rrule) {
    out.yearly.push(yearly(e.start, length, e.rrule, e.exdates));
    return;
  }
  if (length === 1) out.days.push(e.start);
  else out.ranges.push([e.start, e.start + length - 1]);
}

/** A plain yearly rule: FREQ=YEARLY with INTERVAL, UNTIL or COUNT, and BYMONTH/BYMONTHDAY only if they repeat DTSTART's. */
function yearly(start: number, length: number, rule: { value: string; line: number }, exdates: number[]): YearlyEvent {
  const parts = new Map<string, string>();
  for (const part of rule.value.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0) parts.set(part.slice(0, eq).toUpperCase(), part.slice(eq + 1).toUpperCase());
  }
  const { year, month, day } = partsOf(start);
  const refuse = (why: string) => new CalendarFileError(rule.line, `RRULE:${short(rule.value)}: ${why}; expected a plain yearly rule (RRULE:FREQ=YEARLY, with UNTIL, COUNT or INTERVAL), or one event per date`);
  if (parts.get('FREQ') !== 'YEARLY') throw refuse('only FREQ=YEARLY is understood');
  const ev: YearlyEvent = { month, day, length, fromYear: year, interval: 1, untilDay: null, count: null, except: exdates };
  for (const [key, value] of parts) {
    if (key === 'FREQ' || key === 'WKST') continue;
    if (key === 'INTERVAL' && /^[1-9]\d*$/.test(value)) ev.interval = Number(value);
    else if (key === 'COUNT' && /^[1-9]\d*$/.test(value)) ev.count = Number(value);
    else if (key === 'UNTIL') {
      const u = parseBasicDate(value.slice(0, 8));
      if (u === undefined || !/^\d{8}(T\d{6}Z?)?$/.test(value)) throw refuse(`UNTIL=${value} is not a date`);
      ev.untilDay = u;
    } else if (key === 'BYMONTH' && Number(value) === month) continue;
    else if (key === 'BYMONTHDAY' && Number(value) === day) continue;
    else throw refuse(`${key}=${value} is not understood`);
  }
  return ev;
}
