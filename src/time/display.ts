/**
 * Instants as people read them: wall-clock time in a job's zone, and how far from now. Pure
 * functions (the caller passes `now`), shared by `list`, `history` and the daemon's terminal lines.
 */

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'longOffset',
    });
    formatters.set(zone, f);
  }
  return f;
}

export interface LocalParts {
  year: string; month: string; day: string; hour: string; minute: string; second: string;
  /** The zone's offset at that instant: `Z`, `+08`, `-03:30`. */
  offset: string;
}

/** The wall-clock fields of `date` in `zone` (an IANA name; `UTC` for UTC). */
export function localParts(date: Date, zone: string): LocalParts {
  const p: Record<string, string> = {};
  for (const part of formatter(zone).formatToParts(date)) p[part.type] = part.value;
  // longOffset reads `GMT`, `GMT+00:00`, `GMT+08:00` or `GMT-03:30`.
  const gmt = (p.timeZoneName ?? 'GMT').replace(/^GMT/, '');
  const offset = gmt === '' || /^[+-]00:00$/.test(gmt) ? 'Z' : gmt.replace(/:00$/, '');
  return { year: p.year!, month: p.month!, day: p.day!, hour: p.hour!, minute: p.minute!, second: p.second!, offset };
}

/**
 * `date` in `zone`: `full` is `2026-12-01 14:00:03`, `minute` is `2026-12-01 14:00`, `compact` is
 * `12-01 14:00:03` (the year left out to fit narrow tables).
 */
export function formatLocal(date: Date, zone: string, style: 'full' | 'minute' | 'compact' = 'full'): string {
  const p = localParts(date, zone);
  const time = style === 'minute' ? `${p.hour}:${p.minute}` : `${p.hour}:${p.minute}:${p.second}`;
  return style === 'compact' ? `${p.month}-${p.day} ${time}` : `${p.year}-${p.month}-${p.day} ${time}`;
}

/** The zone's offset at `date`: `Z`, `+08`, `+05:30`. */
export function zoneOffset(date: Date, zone: string): string {
  return localParts(date, zone).offset;
}

/**
 * How far `date` is from `now`, in its largest whole unit: `in 3m`, `2h ago`, `in 45s`, `3d ago`,
 * `now` under a second. Whole units are floored, so `in 59s` never reads `in 1m` early.
 */
export function relativeTime(date: Date, now: Date): string {
  const ms = date.getTime() - now.getTime();
  const abs = Math.abs(ms);
  if (abs < 1000) return 'now';
  const text = abs < 60_000 ? `${Math.floor(abs / 1000)}s`
    : abs < 3_600_000 ? `${Math.floor(abs / 60_000)}m`
      : abs < 172_800_000 ? `${Math.floor(abs / 3_600_000)}h`
        : `${Math.floor(abs / 86_400_000)}d`;
  return ms > 0 ? `in ${text}` : `${text} ago`;
}

/** `text` cut to `width` characters, the last one `…` when it was longer. */
export function truncate(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`;
}
