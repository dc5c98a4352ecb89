/**
 * The daemon's output under a terminal: one short line per log line (pino-pretty, single line), one
 * line per run outcome (from the `run-finished` event), and the per-run log lines that JSON keeps
 * (`run started`, `run succeeded`, ...) shown at debug only. JSON logs are not touched: this is only
 * the destination of the logger when stdout is a TTY.
 */
import { writeSync } from 'node:fs';
import { prettyFactory } from 'pino-pretty';
import type { SchedulerEvent, SchedulerObserver } from '../events/events.js';
import { formatLocal, localParts, relativeTime, truncate } from '../time/display.js';

/** Lines the daemon logs at info for JSON readers that a person at a terminal reads as the run line instead. */
export const TERMINAL_DEBUG_MESSAGES: ReadonlySet<string> = new Set([
  'run started', 'run succeeded', 'run failed', 'run timed_out', 'run abandoned', 'run interrupted', 'run skipped',
  'next attempt owed (pending)',
  // A period skipped (the job paused, overlap: skip, an excluded date) is a run line too (a `skipped` event).
  'period skipped: the job is paused', 'period skipped: another run of the job is in flight (overlap: skip)',
  'period skipped: its date is excluded',
  'periods of a paused job recorded skipped (paused)', "periods on dates the job's exclude names recorded skipped (calendar)",
  // The start-up summary replaces these (see summary.ts): it says the status page's address.
  'daemon starting', 'scheduler started', 'http server listening',
]);

const DEBUG = 20;

export interface TerminalOptions {
  fd: number;
  colorize: boolean;
  /** The logger's level now (it may change after start). */
  levelValue: () => number;
  /** Show the per-run lines at debug (the daemon); other commands keep them as they are. */
  demoteRunLines: boolean;
}

/** A pino destination (one JSON line per write) that prints readable lines, and other lines of ours. */
export class TerminalOutput {
  private readonly pretty: (line: unknown) => string;
  /** The same, with `err` and `error` printed as plain fields (the one-line text errorLine gives them). */
  private readonly prettyOneLine: (line: unknown) => string;
  constructor(private readonly options: TerminalOptions) {
    const common = {
      colorize: options.colorize, singleLine: true, translateTime: 'SYS:HH:MM:ss',
      // The node is named once, in the start-up summary; the run id is in the store.
      ignore: 'pid,hostname,node,runId',
      // The same time as the run lines, without brackets.
      customPrettifiers: { time: (t: string | object) => String(t) },
    };
    this.pretty = prettyFactory(common);
    this.prettyOneLine = prettyFactory({ ...common, errorLikeObjectKeys: [] });
  }

  /** pino's side: one JSON log line. */
  write(line: string): void {
    let record: Record<string, unknown> | undefined;
    try {
      const parsed = JSON.parse(line) as unknown;
      record = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
    } catch {
      record = undefined;
    }
    if (!record) {
      this.print(this.pretty(line));
      return;
    }
    // The run line says the same (a failure in red), so a warned failure goes to debug too.
    if (this.options.demoteRunLines && typeof record.msg === 'string' && TERMINAL_DEBUG_MESSAGES.has(record.msg)) {
      if (this.options.levelValue() > DEBUG) return;
      record = { ...record, level: 'debug' };
    }
    // pino-pretty prints an error's stack on lines of its own, whatever singleLine says: one line
    // reads `TypeError: boom` instead (JSON logs keep the stack; at debug the terminal shows it too).
    if (this.options.levelValue() > DEBUG) {
      for (const key of ERROR_KEYS) if (key in record) record = { ...record, [key]: errorLine(record[key]) };
      this.print(this.prettyOneLine(JSON.stringify(record)));
      return;
    }
    this.print(this.pretty(JSON.stringify(record)));
  }

  /** Lines of our own (the summary, run lines), each prefixed with the time like the log lines. */
  lines(lines: string[], now = new Date()): void {
    const time = this.options.colorize ? `\x1b[2m${clock(now)}\x1b[22m` : clock(now);
    this.print(lines.map((l, i) => (i === 0 ? `${time} ${l}` : `         ${l}`)).join('\n') + '\n');
  }

  colour(text: string, code: number): string {
    return this.options.colorize ? `\x1b[${code}m${text}\x1b[39m` : text;
  }

  private print(text: string): void {
    // Synchronous, like the JSON destination: a line is out before the process can die.
    try {
      writeSync(this.options.fd, text);
    } catch {
      // A closed terminal must not break the daemon.
    }
  }
}

/** The fields pino-pretty prints as an error (its `errorLikeObjectKeys`). */
const ERROR_KEYS = ['err', 'error'] as const;

/** A serialized error as one line: `TypeError: boom` (the first line of its message); anything else as it is. */
export function errorLine(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const { type, message, stack } = value as { type?: unknown; message?: unknown; stack?: unknown };
  const text = typeof message === 'string' ? message : typeof stack === 'string' ? stack : undefined;
  if (text === undefined) return value;
  const first = text.split('\n')[0]!;
  const named = typeof type === 'string' && type !== '' && type !== 'Object';
  if (first === '') return named ? type : value;
  return named && !first.startsWith(`${type}:`) ? `${type}: ${first}` : first;
}

function clock(d: Date): string {
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

/** `1.2s`, `850ms`, `2m05s`. */
export function shortDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return s < 3600 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

type RunFinished = Extract<SchedulerEvent, { type: 'run-finished' }>;

/**
 * The run line: `✓ nightly-report  2026-12-01 14:00 Asia/Shanghai  succeeded  1.2s`, then what is
 * worth knowing about an attempt that was not a plain scheduled success (its trigger, attempt,
 * error, the retry owed, an outcome this node could not record).
 */
export function runLine(e: RunFinished, zone: string, now: Date, colour: (text: string, code: number) => string = (t) => t): string {
  const ok = e.status === 'succeeded';
  const mark = ok ? colour('✓', 32) : e.status === 'skipped' ? colour('-', 33) : colour('✗', 31);
  const period = periodText(e.scheduledAt, zone);
  const parts = [`${mark} ${e.job}`, period, ok ? e.status : colour(e.status, 31), shortDuration(e.durationMs)];
  const notes: string[] = [];
  if (e.trigger !== 'schedule') notes.push(e.trigger);
  if (e.attempt > 1) notes.push(`attempt ${e.attempt}`);
  if (e.nextAttempt) {
    const due = e.nextAttempt.runAt ? relativeTime(e.nextAttempt.runAt, now) : 'now';
    notes.push(`attempt ${e.nextAttempt.attempt} due ${due}`);
  }
  if (!e.recorded) notes.push('not recorded');
  let line = parts.join('  ');
  if (notes.length > 0) line += `  (${notes.join(', ')})`;
  if (e.error) line += `: ${truncate(e.error.split('\n')[0]!, Math.max(20, 100 - line.length))}`;
  return line;
}

type Skipped = Extract<SchedulerEvent, { type: 'skipped' }>;

/** Skips a person is told of by a line: a paused job's periods, a period whose run overlapped (`overlap: skip`), a period on an excluded date. */
const SKIP_LINE_REASONS: ReadonlySet<Skipped['reason']> = new Set(['paused', 'overlap', 'calendar']);

/** The period in `zone`: `2026-12-01 14:00 Asia/Shanghai`, with seconds when it has some. */
function periodText(at: Date, zone: string): string {
  return `${formatLocal(at, zone, localParts(at, zone).second !== '00' ? 'full' : 'minute')} ${zone}`;
}

/**
 * The line of a skip: `- nightly-report  2026-12-01 14:00 Asia/Shanghai  skipped  (paused)`, or for
 * several periods at once (recorded by the catch-up) `- nightly-report  3 periods 2026-12-01 14:00 to
 * 2026-12-01 14:02 UTC  skipped  (paused)`.
 */
export function skipLine(e: Skipped, zone: string, colour: (text: string, code: number) => string = (t) => t): string {
  const when = e.count === 1 ? periodText(e.first, zone) : `${e.count} periods ${periodText(e.first, zone).replace(` ${zone}`, '')} to ${periodText(e.last, zone)}`;
  return `${colour('-', 33)} ${e.job}  ${when}  skipped  (${e.reason === 'overlap' ? 'overlap: a run is in flight' : e.reason === 'calendar' ? 'calendar: an excluded date' : e.reason})`;
}

/** Prints one run line per `run-finished` event this node emits, and one per paused or overlapping skip. */
export class RunLineObserver implements SchedulerObserver {
  constructor(private readonly out: TerminalOutput, private readonly zoneOf: (job: string) => string | undefined) {}
  emit(event: SchedulerEvent): void {
    const colour = (t: string, c: number) => this.out.colour(t, c);
    const now = new Date();
    if (event.type === 'run-finished') this.out.lines([runLine(event, this.zoneOf(event.job) ?? 'UTC', now, colour)], now);
    else if (event.type === 'skipped' && SKIP_LINE_REASONS.has(event.reason)) this.out.lines([skipLine(event, this.zoneOf(event.job) ?? 'UTC', colour)], now);
  }
}
