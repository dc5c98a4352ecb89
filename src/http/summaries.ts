/**
 * Cluster-wide facts of the jobs (last success, failures and missed periods in 24 h, paused), read
 * from the store in the background so that a scrape or a page view sends no statement: any node's
 * answer tells the cluster's truth, at most a refresh old while someone looks (see
 * SUMMARY_UNWATCHED_MS). Three statements per refresh, whatever the number of jobs:
 * RunStore.jobSummaries, JobStore.paused and OnceStore.retried.
 */
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { JobStore, JobSummary, OnceStore, RunStore } from '../store/types.js';

export const SUMMARY_EVERY_MS = 5000;
export const SUMMARY_WINDOW_MS = 86_400_000;
/**
 * Nobody looks at the figures when no page view, API call or scrape read them within
 * SUMMARY_UNWATCHED_MS; they are then read every SUMMARY_UNWATCHED_EVERY_MS only. The statement's
 * cost grows with the jobs (10,000 jobs on SQLite: 60-250 ms of the node's CPU, with its garbage;
 * every 5 s that was most of an idle node's), and nothing shows the figures meanwhile. The first
 * look after a quiet spell gets figures up to that old (their readAt says so) and asks for fresh
 * ones at once.
 */
export const SUMMARY_UNWATCHED_MS = 60_000;
export const SUMMARY_UNWATCHED_EVERY_MS = 300_000;

export interface SummaryCacheOptions {
  store: RunStore;
  jobStore: JobStore;
  /** ctx.once's keys: the count of keys tried more than once (a third statement, on an index range). */
  onceStore?: OnceStore;
  log: Logger;
  /** The store's clock as this node estimates it (epoch ms). */
  now: () => number;
  everyMs?: number;
}

export class SummaryCache {
  private figures = {
    summaries: new Map<string, JobSummary>(),
    paused: new Map<string, { reason: string | null; pausedAt: number }>(),
    onceRetried: 0,
  };
  /** When the figures were read (store clock, epoch ms); null before the first read. */
  readAt: number | null = null;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | null = null;
  private again = false;
  private failing = false;
  /** When the figures were last looked at (performance.now()). */
  private lastLook = -Infinity;

  constructor(private readonly options: SummaryCacheOptions) {}

  get summaries(): Map<string, JobSummary> {
    this.looked();
    return this.figures.summaries;
  }

  get paused(): Map<string, { reason: string | null; pausedAt: number }> {
    this.looked();
    return this.figures.paused;
  }

  /** ctx.once keys (not expired) whose fn was started more than once. */
  get onceRetried(): number {
    this.looked();
    return this.figures.onceRetried;
  }

  start(): void {
    void this.refresh();
    const everyMs = this.options.everyMs ?? SUMMARY_EVERY_MS;
    this.timer = setInterval(() => {
      const now = performance.now();
      if (now - this.lastLook < SUMMARY_UNWATCHED_MS || now - this.lastReadStart >= SUMMARY_UNWATCHED_EVERY_MS) void this.refresh();
    }, everyMs);
    this.timer.unref();
  }

  /** A look after a quiet spell (and figures older than one refresh): fresh figures are read now, for the next look. */
  private looked(): void {
    const now = performance.now();
    const quiet = now - this.lastLook >= SUMMARY_UNWATCHED_MS;
    this.lastLook = now;
    if (quiet && this.timer && now - this.lastReadStart >= (this.options.everyMs ?? SUMMARY_EVERY_MS)) void this.refresh();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.soon) clearTimeout(this.soon);
    this.timer = undefined;
    this.soon = undefined;
  }

  private soon: NodeJS.Timeout | undefined;
  private lastReadStart = -Infinity;

  /**
   * A run of this node just ended: read again now, or a second after the last read started, so that
   * many short runs cost at most one read a second.
   */
  refreshSoon(): void {
    if (this.soon || !this.timer) return;
    const wait = Math.max(0, this.lastReadStart + 1000 - performance.now());
    this.soon = setTimeout(() => {
      this.soon = undefined;
      void this.refresh();
    }, wait);
    this.soon.unref();
  }

  /** A read that starts after this call: an action just changed the store, and its answer and the page reloaded after it must show it. */
  async fresh(): Promise<void> {
    if (this.inFlight) await this.inFlight.catch(() => {});
    await this.refresh().catch(() => {});
  }

  /** Reads now; a read in progress is followed by one more. */
  refresh(): Promise<void> {
    if (this.inFlight) {
      this.again = true;
      return this.inFlight;
    }
    this.inFlight = this.read().finally(() => {
      this.inFlight = null;
      if (this.again) {
        this.again = false;
        void this.refresh();
      }
    });
    return this.inFlight;
  }

  private async read(): Promise<void> {
    const { store, jobStore, onceStore, log, now } = this.options;
    const at = now();
    this.lastReadStart = performance.now();
    try {
      const [summaries, paused, retried] = await Promise.all([store.jobSummaries(at - SUMMARY_WINDOW_MS), jobStore.paused(), onceStore ? onceStore.retried() : 0]);
      this.figures = { summaries, paused, onceRetried: retried };
      this.readAt = at;
      if (this.failing) log.info('job summaries read again from the store');
      this.failing = false;
    } catch (err) {
      // The last figures stay (their readAt says how old they are); said once per outage.
      if (!this.failing) log.warn({ err: { message: errorMessage(err) } }, 'job summaries could not be read from the store; the status page and metrics show the last figures');
      this.failing = true;
    }
  }
}

/**
 * Whether the store answers, for /readyz and scheduler_store_up: the scheduler's sweep says 'down'
 * only after a statement failed (up to its 10 s timeout when the network is black-holed), so a clock
 * read on the main pool (never the lease keepers' connections, which heartbeats must always find
 * free), bounded by 1 s, runs every second too, one at a time; the store is 'ok' when the sweep says
 * so and the last such read succeeded within STORE_FRESH_MS.
 */
export const STORE_FRESH_MS = 3000;

export class StoreProbe {
  private lastOk = performance.now();
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  constructor(private readonly read: () => Promise<unknown>, private readonly everyMs = 1000) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = true;
      void this.read().then(() => { this.lastOk = performance.now(); }, () => {}).finally(() => { this.busy = false; });
    }, this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  answers(): boolean {
    return performance.now() - this.lastOk <= STORE_FRESH_MS;
  }
}
