/** Instants given on the command line. */
import { UsageError } from '../errors.js';

const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|([+-])(\d{2})(?::?(\d{2}))?)$/i;

export const INSTANT_EXPECTED = 'an ISO-8601 instant: a date and time with Z or an offset, such as 2026-11-30T18:00:00.000Z or 2026-11-30T19:00+01:00';

/**
 * An ISO-8601 instant (date, time, and `Z` or a UTC offset), or undefined. Stricter than `Date.parse`,
 * which rolls 2026-02-30 over into March and reads a time without a zone as local time.
 */
export function parseInstant(text: string): Date | undefined {
  const m = ISO_INSTANT.exec(text.trim());
  if (!m) return undefined;
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number) as [number, number, number, number, number];
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const ms = m[7] === undefined ? 0 : Math.floor(Number(`0.${m[7]}`) * 1000);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day > daysInMonth) return undefined;
  let offsetMinutes = 0;
  if (m[8]!.toUpperCase() !== 'Z') {
    const h = Number(m[10]);
    const min = m[11] === undefined ? 0 : Number(m[11]);
    if (h > 23 || min > 59) return undefined;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (h * 60 + min);
  }
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // not Date.UTC, which maps the years 0-99 to 1900-1999
  date.setUTCHours(hour, minute, second, ms);
  date.setTime(date.getTime() - offsetMinutes * 60_000);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/** An ISO instant given by a flag or a field (`what` names it in the refusal); undefined when not given. */
export function parseInstantFlag(what: string, value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  const at = new Date(value);
  if (Number.isNaN(at.getTime()) || !/^\d{4}-\d{2}-\d{2}T/.test(value)) throw new UsageError(`invalid ${what} ${value}: expected an ISO instant such as 2026-12-07T06:00:00Z`);
  return at;
}
