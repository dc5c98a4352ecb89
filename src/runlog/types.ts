/**
 * Each attempt's own log, as stored: the types, below everything that uses them (the store, the
 * writer on the body's side, and the readers: `scheduler logs`, the API, the page). Imports nothing.
 */

/** Where a line came from: ctx.log, a command's stdout or stderr, or the scheduler's own note about the log (what was cut or not stored). */
export type RunLogStream = 'log' | 'stdout' | 'stderr' | 'note';

/** One stored line of an attempt's log. */
export interface RunLogLine {
  /** The attempt's run id. */
  runId: string;
  /** Its place in the attempt's log, from 1; a line cut from the middle leaves a gap, filled by the note that says so. */
  seq: number;
  /** When it was written (epoch ms, the node's clock corrected to the store's). */
  at: number;
  /** The pino level's label: trace, debug, info, warn, error, fatal. */
  level: string;
  stream: RunLogStream;
  /** The message (a command's output line). */
  line: string;
  /** The line's own fields as JSON (redacted), or null. */
  fields: string | null;
}

/** Lines cut from the middle of a log (head and tail kept): deleted by their seq range. */
export interface RunLogCut {
  runId: string;
  fromSeq: number;
  toSeq: number;
}

export interface RunLogStore {
  /**
   * One batch: the cuts first (lines of the middle that the tail pushed out), then the new lines.
   * A line already stored (the same run and seq: a batch sent again after its answer was lost) is left as it is.
   */
  write(batch: { lines: RunLogLine[]; cuts: RunLogCut[] }): Promise<void>;
  /** An attempt's lines after `afterSeq` (0: from the start), in order, at most `limit` (default 10,000). */
  read(runId: string, options?: { afterSeq?: number; limit?: number }): Promise<RunLogLine[]>;
}
