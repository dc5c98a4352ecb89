/** Times as the page shows them: wall time in a zone, relative to `now`, and the UTC instant on hover. */
import { formatDuration } from '../../time/duration.js';
import { html, type Markup } from './html.js';
import { relativeTime } from '../../time/display.js';

const wallFormats = new Map<string, Intl.DateTimeFormat>();

function wallFormat(timezone: string): Intl.DateTimeFormat {
  let fmt = wallFormats.get(timezone);
  if (!fmt) {
    // sv-SE writes `2026-03-29 03:30:00 CEST` by itself: format() is 3x cheaper than formatToParts().
    fmt = new Intl.DateTimeFormat('sv-SE', {
      timeZone: timezone, hourCycle: 'h23', timeZoneName: 'short',
      year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
    wallFormats.set(timezone, fmt);
  }
  return fmt;
}

const WALL_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \S+$/;
// Jobs share instants (the top of the hour) and keep them across refreshes: 1,000 rows format each once.
const wallTimes = new Map<string, string>();
const WALL_TIMES_MAX = 20_000;

/** `2026-03-29 03:30:00 CEST`: the wall time in the zone with the zone's short name (or offset). */
export function wallTime(instant: Date, timezone: string): string {
  const key = `${timezone} ${instant.getTime()}`;
  let text = wallTimes.get(key);
  if (text === undefined) {
    text = wallFormat(timezone).format(instant).replace('\u2212', '-');
    if (!WALL_TIME.test(text)) text = wallTimeByParts(instant, timezone); // an ICU without sv-SE data
    if (wallTimes.size >= WALL_TIMES_MAX) wallTimes.clear();
    wallTimes.set(key, text);
  }
  return text;
}

const partFormats = new Map<string, Intl.DateTimeFormat>();

/** The same text through formatToParts(), for an ICU without sv-SE data. */
export function wallTimeByParts(instant: Date, timezone: string): string {
  let fmt = partFormats.get(timezone);
  if (!fmt) {
    fmt = new Intl.DateTimeFormat('en-GB', {
      timeZone: timezone, hourCycle: 'h23', timeZoneName: 'short',
      year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
    partFormats.set(timezone, fmt);
  }
  const p: Record<string, string> = {};
  for (const part of fmt.formatToParts(instant)) p[part.type] = part.value;
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.timeZoneName}`;
}

/** `in 3m`, `2h ago`, `now`: the largest unit only, as `list` and `history` show it. */
export { relativeTime };

/** A `<time>` (no datetime attribute: the title has it, and a 1,000-row table pays for every byte) with the wall time in the zone, the relative time, and UTC in the title. The wall time may wrap after its date in a narrow column (`<span>` around the clock and the zone: no class, as a 1,000-row table pays for every byte); the relative time does not. */
export function timeCell(iso: string | null, timezone: string, now: Date): Markup {
  if (iso === null) return html`<span class="none">–</span>`;
  const instant = new Date(iso);
  if (Number.isNaN(instant.getTime())) return html`${iso}`;
  const wall = wallTime(instant, timezone);
  const cut = wall.indexOf(' ');
  // The date, then the clock and the zone kept together (a zone like `GMT-4` must not break at its hyphen).
  const text = cut > 0 ? html`${wall.slice(0, cut)} <span>${wall.slice(cut + 1)}</span>` : wall;
  return html`<time title="${instant.toISOString()} (UTC)">${text}</time> <span class="rel">${relativeTime(instant, now)}</span>`;
}

/** Relative only, the wall time in the zone and UTC on hover: for the later periods of a row. */
export function relativeInZone(iso: string, timezone: string, now: Date): Markup {
  const instant = new Date(iso);
  if (Number.isNaN(instant.getTime())) return html`${iso}`;
  return html`<time title="${wallTime(instant, timezone)} · ${instant.toISOString()} (UTC)">${relativeTime(instant, now)}</time>`;
}

/** An IANA zone that may wrap after each `/` in a narrow column (`America/<wbr>Argentina/<wbr>Cordoba`). */
export function zoneText(timezone: string): Markup {
  return html`${timezone.split('/').map((part, i) => html`${i > 0 ? html`/<wbr>` : ''}${part}`)}`;
}

/** Relative only (nodes' heartbeats), UTC on hover. */
export function relativeCell(iso: string | null, now: Date): Markup {
  if (iso === null) return html`<span class="none">–</span>`;
  const instant = new Date(iso);
  if (Number.isNaN(instant.getTime())) return html`${iso}`;
  return html`<time title="${instant.toISOString()} (UTC)">${relativeTime(instant, now)}</time>`;
}

export function durationText(ms: number | null): string {
  if (ms === null) return '–';
  if (ms < 0) return '0ms';
  return formatDuration(Math.round(ms));
}
