/**
 * An attempt's stored log as the readers show it: JSON (`logs --json`, /api/runs/<id>/log) and text
 * (`scheduler logs`, the page).
 */
import type { RunLogLine } from './types.js';

export interface RunLogLineView {
  seq: number;
  /** ISO instant. */
  at: string;
  level: string;
  stream: RunLogLine['stream'];
  line: string;
  /** The line's own fields, or null. */
  fields: Record<string, unknown> | null;
}

export function logLineView(l: RunLogLine): RunLogLineView {
  let fields: Record<string, unknown> | null = null;
  if (l.fields !== null) {
    try {
      fields = JSON.parse(l.fields) as Record<string, unknown>;
    } catch {
      fields = { text: l.fields };
    }
  }
  return { seq: l.seq, at: new Date(l.at).toISOString(), level: l.level, stream: l.stream, line: l.line, fields };
}

/** One line of text: `2026-12-07T06:00:00.125Z INFO  message {"fields"}` (the stream named unless ctx.log's). */
export function logLineText(l: RunLogLine): string {
  const stream = l.stream === 'log' ? '' : ` [${l.stream}]`;
  return `${new Date(l.at).toISOString()} ${l.level.toUpperCase().padEnd(5)}${stream} ${l.line}${l.fields ? ` ${l.fields}` : ''}`;
}

/** An attempt is over: its log gets no more lines (but the notes its node writes just after). */
export const ENDED_STATUSES: ReadonlySet<string> = new Set(['succeeded', 'failed', 'timed_out', 'abandoned', 'skipped', 'interrupted', 'cancelled']);
