/**
 * Each attempt's log, written off the body's path: a body's lines go into its AttemptLog (the sink
 * of its logger, see hook.ts), which keeps a head and a tail within the attempt's cap; the node's
 * RunLogWriter sends every attempt's new lines to the store in batches, one at a time, every
 * FLUSH_MS. A slow or absent store never slows a body: lines wait in memory, within a bound for the
 * whole node (MAX_QUEUED_BYTES); past it the oldest are dropped, counted
 * (`scheduler_run_log_dropped_total`) and said at the end of their attempt's log.
 */
import { pino } from 'pino';
import type { Logger } from '../log.js';
import { errorMessage } from '../errors.js';
import { RUN_LOG_SINK, RUN_LOG_STREAM, type RunLogSink } from './hook.js';
import { fieldsJson, lineOf, type Redactor } from './format.js';
import type { RunLogCut, RunLogLine, RunLogStore, RunLogStream } from './types.js';

/** How often queued lines are sent (a body's line is in the store within about this, plus the write). */
export const FLUSH_MS = 200;
/** Lines a statement carries at most (the store chunks them further). */
const BATCH_LINES = 2000;
/** What the node keeps in memory for the store at most, all attempts together. */
export const MAX_QUEUED_BYTES = 16 * 1024 * 1024;
/** A line's cost against the cap, beyond its text: its time, level, stream and seq. */
const LINE_OVERHEAD = 32;

/** pino's own table of levels (and `silent`, which stores and prints nothing). */
const LEVEL_LABELS: Record<number, string> = pino.levels.labels;
export const LEVEL_VALUES: Record<string, number> = { ...pino.levels.values, silent: Infinity };

interface Queued extends RunLogLine {
  bytes: number;
  /** Pushed out of the tail before it was sent: not sent. */
  dead?: boolean;
  /** In the writer's queue (not yet sent or dropped). */
  queued?: boolean;
  /** The note that takes the cut lines' place: once it is stored, the cut is not deleted again. */
  closesCut?: boolean;
  owner: AttemptLog;
}

export interface RunLogCounters {
  /** Lines that could not be stored (the store away too long, or the node's bound reached). */
  dropped(job: string, n: number): void;
}

/**
 * One attempt's log. The head (the first half of the cap) is kept whole; past it the latest half of
 * the cap is kept as a tail: lines pushed out of it are deleted from the store (or never sent), and at
 * the end one note takes the place of the first of them, saying what was cut.
 */
export class AttemptLog implements RunLogSink {
  readonly printFrom: number;
  readonly storeFrom: number;
  private seq = 0;
  private headBytes = 0;
  private headFull = false;
  private readonly tail: Queued[] = [];
  private tailBytes = 0;
  private cutFrom = 0;
  private cutTo = 0;
  private cutLines = 0;
  private cutBytes = 0;
  private droppedLines = 0;
  private ended = false;
  /** Of this attempt's lines, those in the writer's queue. */
  pending = 0;

  constructor(
    private readonly writer: RunLogWriter,
    readonly runId: string,
    readonly job: string,
    private readonly capBytes: number,
    levels: { print: string; store: string },
    private readonly runKeys: () => ReadonlySet<string>,
    private readonly root: object,
  ) {
    this.printFrom = LEVEL_VALUES[levels.print] ?? 30;
    this.storeFrom = LEVEL_VALUES[levels.store] ?? 30;
  }

  add(level: number, stream: 'log' | 'stdout' | 'stderr', args: unknown[], logger: object): void {
    if (this.ended) return;
    // A child's own bindings (ctx.log.child({ step })) are the line's fields; the run's are not.
    const bound = logger === this.root || stream !== 'log' ? {} : ownBindings(logger, this.runKeys());
    const { line, fields } = lineOf(args, bound, this.writer.redactor);
    this.push({ level: LEVEL_LABELS[level] ?? String(level), stream, line, fields });
  }

  /** A command's output line (already cut to its own bound) or a worker's line. */
  push(l: { level: string; stream: RunLogStream; line: string; fields: string | null; at?: number }): void {
    if (this.ended && l.stream !== 'note') return;
    const q: Queued = { runId: this.runId, seq: ++this.seq, at: l.at ?? this.writer.now(), level: l.level, stream: l.stream, line: l.line, fields: l.fields, bytes: l.line.length + (l.fields?.length ?? 0) + LINE_OVERHEAD, owner: this };
    if (!this.headFull && this.headBytes + q.bytes <= this.capBytes / 2) {
      this.headBytes += q.bytes;
    } else {
      this.headFull = true;
      this.tail.push(q);
      this.tailBytes += q.bytes;
      while (this.tailBytes > this.capBytes / 2 && this.tail.length > 0) {
        const out = this.tail.shift()!;
        this.tailBytes -= out.bytes;
        out.dead = true;
        if (out.queued) this.writer.died(out);
        if (this.cutLines === 0) this.cutFrom = out.seq;
        this.cutTo = out.seq;
        this.cutLines += 1;
        this.cutBytes += out.bytes;
      }
    }
    this.writer.enqueue(q);
  }

  /** A worker's line (pino's JSON): stored at or above the job's level; whether it is to be printed. */
  workerLine(json: string): boolean {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(json) as Record<string, unknown>;
    } catch {
      return true;
    }
    const level = typeof o.level === 'number' ? o.level : LEVEL_VALUES[String(o.level)] ?? 30;
    if (level >= this.storeFrom && !this.ended) {
      const { level: _l, time: _t, msg, pid: _p, hostname: _h, ...rest } = o;
      const own: Record<string, unknown> = {};
      const runKeys = this.runKeys();
      for (const [k, v] of Object.entries(rest)) if (!runKeys.has(k)) own[k] = v;
      this.push({
        level: LEVEL_LABELS[level] ?? String(level), stream: 'log', line: lineOf([typeof msg === 'string' ? msg : ''], {}, this.writer.redactor).line,
        fields: fieldsJson(own, this.writer.redactor),
      });
    }
    return level >= this.printFrom;
  }

  /** Lines the writer could not keep for the store. */
  lost(n: number): void {
    this.droppedLines += n;
  }

  private cutClosed = false;

  /** The lines to delete from the store (sent with each batch of this attempt until its note is stored). */
  cutRange(): RunLogCut | null {
    return this.cutLines > 0 && !this.cutClosed ? { runId: this.runId, fromSeq: this.cutFrom, toSeq: this.cutTo } : null;
  }

  closeCut(): void {
    this.cutClosed = true;
  }

  /** The attempt has ended: its notes go last, and its lines are sent at once. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.cutLines > 0) {
      // In the place of the first line cut: after the head, before the tail.
      const note = `${this.cutLines} line(s) (${this.cutBytes} bytes) cut here: the log keeps its first and last ${Math.floor(this.capBytes / 2)} bytes (logMaxSize ${this.capBytes})`;
      this.writer.enqueue({ runId: this.runId, seq: this.cutFrom, at: this.writer.now(), level: 'warn', stream: 'note', line: note, fields: null, bytes: 0, owner: this, closesCut: true });
    }
    // Nothing waiting and nothing lost (most bodies): no note can follow.
    if (this.pending === 0 && this.droppedLines === 0) return;
    this.writer.ended(this);
  }

  /** The note of lines the store did not get, once they are known (after the attempt's last batch). */
  droppedNote(): void {
    if (this.droppedLines === 0) return;
    const n = this.droppedLines;
    this.droppedLines = 0;
    this.writer.enqueue({ runId: this.runId, seq: ++this.seq, at: this.writer.now(), level: 'warn', stream: 'note', line: `${n} line(s) of this log were not stored (the store did not answer in time, or the node's buffer was full)`, fields: null, bytes: 0, owner: this });
  }
}

function ownBindings(logger: object, runKeys: ReadonlySet<string>): Record<string, unknown> {
  const all = (logger as { bindings?: () => Record<string, unknown> }).bindings?.() ?? {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(all)) if (!runKeys.has(k)) out[k] = v;
  return out;
}

export interface RunLogWriterOptions {
  store: RunLogStore;
  redactor: Redactor;
  log: Logger;
  counters?: RunLogCounters;
  /** The node's clock corrected to the store's (epoch ms). */
  now?: () => number;
  flushMs?: number;
  maxQueuedBytes?: number;
}

export class RunLogWriter {
  readonly redactor: Redactor;
  private queue: Queued[] = [];
  private queuedBytes = 0;
  /** Of queuedBytes, the lines pushed out of their tails since they were queued. */
  private deadBytes = 0;
  private readonly endedLogs = new Set<AttemptLog>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private warnedAt = 0;
  private readonly idle = new Set<() => void>();

  constructor(private readonly options: RunLogWriterOptions) {
    this.redactor = options.redactor;
  }

  now(): number {
    return (this.options.now ?? Date.now)();
  }

  /**
   * The attempt's log, and the logger its body writes to (a child of `log` at the lower of the
   * node's and the job's levels, whose lines at or above the job's are stored); null when the cap is 0.
   */
  open(log: Logger, run: { id: string; job: string }, job: { logLevel: string; logMaxBytes: number }): { attemptLog: AttemptLog; logger: Logger } | null {
    if (job.logMaxBytes <= 0 || job.logLevel === 'silent') return null;
    const print = log.level;
    // A level of its own only when the job stores below what the node prints (pino regenerates its methods for it).
    const logger = (LEVEL_VALUES[job.logLevel] ?? 30) < (LEVEL_VALUES[print] ?? 30) ? log.child({}, { level: job.logLevel }) : log.child({});
    // The run's own bindings, left out of a child logger's line: read once, when such a line comes.
    let runKeys: ReadonlySet<string> | undefined;
    const attemptLog = new AttemptLog(this, run.id, run.job, job.logMaxBytes, { print, store: job.logLevel }, () => (runKeys ??= new Set(Object.keys(log.bindings()))), logger);
    (logger as unknown as Record<symbol, unknown>)[RUN_LOG_SINK] = attemptLog;
    return { attemptLog, logger };
  }

  enqueue(q: Queued): void {
    q.queued = true;
    q.owner.pending += 1;
    this.queue.push(q);
    this.queuedBytes += q.bytes;
    this.bound();
    this.arm();
  }

  /** A queued line pushed out of its attempt's tail: it will not be sent. */
  died(q: Queued): void {
    this.deadBytes += q.bytes;
  }

  /**
   * The node's bound: lines pushed out of their tails go first (a log far over its cap, written while
   * the store is away, must not push its own head out), then the oldest, each counted against its attempt.
   */
  private bound(): void {
    const max = this.options.maxQueuedBytes ?? MAX_QUEUED_BYTES;
    if (this.queuedBytes <= max) return;
    if (this.deadBytes > max / 4) {
      this.queue = this.queue.filter((q) => {
        if (q.dead) {
          q.queued = false;
          q.owner.pending -= 1;
        }
        return !q.dead;
      });
      this.queuedBytes -= this.deadBytes;
      this.deadBytes = 0;
    }
    while (this.queuedBytes > max && this.queue.length > 1) this.remove(this.queue.shift()!, true);
  }

  /** Out of the queue: sent, or dropped (counted unless it was dead or a note). */
  private remove(q: Queued, dropped: boolean): void {
    q.queued = false;
    q.owner.pending -= 1;
    this.queuedBytes -= q.bytes;
    if (q.dead) this.deadBytes -= q.bytes;
    else if (dropped && q.stream !== 'note') this.drop(q.owner, 1);
  }

  ended(a: AttemptLog): void {
    this.endedLogs.add(a);
    this.arm();
  }

  private drop(owner: AttemptLog, n: number): void {
    owner.lost(n);
    this.options.counters?.dropped(owner.job, n);
  }

  private arm(delay = this.options.flushMs ?? FLUSH_MS): void {
    if (this.flushing) return;
    if (this.timer && delay > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flushing = this.flush().finally(() => {
        this.flushing = undefined;
        if (this.queue.length > 0 || this.endedLogs.size > 0) this.arm();
        else for (const done of this.idle) done();
      });
    }, delay);
    this.timer.unref();
  }

  /** One batch: the live lines of the queue's head and the cuts of every attempt in it. */
  private async flush(): Promise<void> {
    const batch = this.queue.splice(0, BATCH_LINES);
    const owners = new Set(batch.map((q) => q.owner));
    const lines = batch.filter((q) => !q.dead);
    const cuts = [...owners].map((o) => o.cutRange()).filter((c): c is RunLogCut => c !== null);
    try {
      if (lines.length > 0 || cuts.length > 0) {
        await this.options.store.write({ lines: lines.map(({ bytes: _b, dead: _d, owner: _o, closesCut: _c, ...l }) => l), cuts });
      }
      for (const q of batch) {
        this.remove(q, false);
        if (q.closesCut) q.owner.closeCut();
      }
      // Attempts that ended with nothing left to send: their note of lost lines, if any, goes next.
      for (const a of this.endedLogs) {
        if (a.pending > 0) continue;
        this.endedLogs.delete(a);
        a.droppedNote();
      }
    } catch (err) {
      // Kept for the next flush (at the queue's head, in order), within the node's bound.
      this.queue.unshift(...batch);
      if (Date.now() - this.warnedAt > 30_000) {
        this.warnedAt = Date.now();
        this.options.log.warn({ err: { message: errorMessage(err) }, queuedLines: this.queue.length }, 'run logs not stored yet: keeping their lines and trying again');
      }
      await new Promise((r) => setTimeout(r, 500).unref());
      this.bound();
    }
  }

  /** Resolves once everything queued has been sent or dropped (at a clean stop, with a deadline of the caller's). */
  drain(): Promise<void> {
    if (this.queue.length === 0 && this.endedLogs.size === 0 && !this.flushing) return Promise.resolve();
    this.arm(0);
    return new Promise((resolve) => {
      const done = () => {
        this.idle.delete(done);
        resolve();
      };
      this.idle.add(done);
    });
  }
}

/** A worker's formatted JSON line or a command's line: into the attempt log of `log`, if it has one. */
export function attemptLogOf(log: object): AttemptLog | undefined {
  const sink = (log as Record<symbol, unknown>)[RUN_LOG_SINK];
  return sink instanceof AttemptLog ? sink : undefined;
}

export { RUN_LOG_STREAM };
