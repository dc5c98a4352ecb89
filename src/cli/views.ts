/** How runs are shown by `history`, `list` and `run-once`. */
import type { RunRecord } from '../store/types.js';
import { formatLocal, localParts, relativeTime, truncate } from '../time/display.js';

export function runView(r: RunRecord) {
  return {
    id: r.id,
    job: r.job,
    scheduledAt: r.scheduledAt.toISOString(),
    periodKey: r.periodKey,
    // The shard of the period (`shards: N`: 0..N-1; 0 for an unsharded job).
    shard: r.shard,
    attempt: r.attempt,
    trigger: r.trigger,
    status: r.status,
    reason: r.reason,
    nodeId: r.nodeId,
    // The claim (a tick claims up to 100 ms ahead of the instant); null for rows from before it was recorded.
    claimedAt: r.claimedAt?.toISOString() ?? null,
    // The body's start (until the outcome is written: the claim). A pending attempt has not started: it is due at runAt.
    startedAt: r.status === 'pending' ? null : r.startedAt.toISOString(),
    runAt: r.runAt?.toISOString() ?? null,
    finishedAt: r.finishedAt?.toISOString() ?? null,
    durationMs: r.durationMs,
    error: r.error,
    result: r.result,
    resultNote: r.resultNote,
    // A command job's last 64 KiB of stdout and stderr; null for other jobs.
    output: r.output ?? null,
  };
}

export function durationText(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '';
  return ms < 1000 ? `${ms}ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
}

/** The width every line of `list` and `history` text fits in. */
export const TEXT_WIDTH = 100;
/** Job names longer than this are cut (with `…`) in tables. */
export const NAME_WIDTH = 30;

/** How `list` and `history` show instants: in the job's zone (`UTC` with `--utc`), relative to `now`. */
export interface TimeView {
  now: Date;
  /** The zone to show a job's times in. */
  zoneOf(job: string): string;
}

/** `12-01 14:00:03 (in 3m)`; `2027-01-01 00:00:00 (in 30d)` in another year than `now` (in that zone). */
export function whenText(at: Date, zone: string, now: Date): string {
  return `${datedText([at], zone, now)[0]} (${relativeTime(at, now)})`;
}

/**
 * Instants in `zone` as `12-01 14:00:03`, or all with their year (`2027-01-01 00:00:00`) when any is
 * in another year than `now`: six `@yearly` periods must not read as the same `01-01 00:00:00`.
 */
export function datedText(instants: Date[], zone: string, now: Date): string[] {
  const year = localParts(now, zone).year;
  const style = instants.every((d) => localParts(d, zone).year === year) ? 'compact' : 'full';
  return instants.map((d) => formatLocal(d, zone, style));
}

/**
 * Parts joined with ` · ` on lines of at most `width` characters, each line starting with `indent`;
 * a part longer than a line is cut.
 */
export function wrapParts(parts: string[], indent: string, width = TEXT_WIDTH, separator = ' · '): string[] {
  const lines: string[] = [];
  let line = '';
  for (const part of parts) {
    if (line !== '' && indent.length + line.length + separator.length + part.length <= width) line += separator + part;
    else {
      if (line !== '') lines.push(indent + line);
      line = truncate(part, width - indent.length);
    }
  }
  if (line !== '') lines.push(indent + line);
  return lines;
}

/**
 * `text` broken at spaces into lines of at most `width` characters, the first starting with
 * `indent`, the next ones with `hanging`; a word longer than a line is split. Nothing is cut.
 */
export function wrapText(text: string, indent: string, hanging = indent, width = TEXT_WIDTH): string[] {
  const lines: string[] = [];
  const room = () => Math.max(1, width - (lines.length === 0 ? indent : hanging).length);
  const push = (line: string) => lines.push((lines.length === 0 ? indent : hanging) + line);
  let line = '';
  for (let word of text.split(/\s+/).filter((w) => w !== '')) {
    if (line !== '' && line.length + 1 + word.length <= room()) {
      line += ` ${word}`;
      continue;
    }
    if (line !== '') push(line);
    while (word.length > room()) {
      const r = room();
      push(word.slice(0, r));
      word = word.slice(r);
    }
    line = word;
  }
  if (line !== '') push(line);
  return lines;
}

/**
 * A padded table whose rows fit `width`: the `shrink` columns (widest first) are cut with `…` until
 * they do. Each row may carry lines of its own, printed under it; `whenCut` gives the lines printed
 * first under a row whose cells were cut (their whole values), given the indexes of those cells.
 */
export function fittedTable(
  rows: Array<{ cells: string[]; below?: string[] }>,
  shrink: number[],
  width = TEXT_WIDTH,
  minWidth = 8,
  whenCut?: (row: number, cut: number[]) => string[],
): string {
  if (rows.length === 0) return '';
  const widths = rows[0]!.cells.map((_, i) => rows.reduce((w, r) => Math.max(w, (r.cells[i] ?? '').length), 0));
  const total = () => widths.reduce((a, b) => a + b, 0) + 2 * (widths.length - 1);
  while (total() > width) {
    const candidates = shrink.filter((i) => widths[i]! > minWidth);
    if (candidates.length === 0) break;
    const widest = candidates.reduce((a, b) => (widths[b]! > widths[a]! ? b : a));
    widths[widest] = widths[widest]! - 1;
  }
  const out: string[] = [];
  rows.forEach((r, index) => {
    out.push(r.cells.map((c, i) => (i === r.cells.length - 1 ? truncate(c, widths[i]!) : truncate(c, widths[i]!).padEnd(widths[i]!))).join('  ').trimEnd());
    const cut = r.cells.flatMap((c, i) => (c.length > widths[i]! ? [i] : []));
    if (cut.length > 0 && whenCut) out.push(...whenCut(index, cut));
    out.push(...(r.below ?? []));
  });
  return out.join('\n');
}
