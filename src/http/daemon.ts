/**
 * The HTTP server of `bin/scheduler run`, in two steps: bind() before the store is opened (a
 * configured address in use is exit 2 before any claim), attach() once the runtime and the
 * scheduler exist. Until attached, /healthz answers 200 (a starting process is alive) and the rest 503.
 */
import type { Config } from '../config/config.js';
import type { Scheduler, SchedulerSnapshot } from '../daemon/scheduler.js';
import type { InvalidJobFile, Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { Runtime } from '../runtime.js';
import type { ListedNode } from '../store/types.js';
import { createStatusReader } from '../status/reader.js';
import type { StatusReader } from '../status/model.js';
import { apiRoute, type AuditSource } from './api.js';
import { SchedulerMetrics } from './metrics.js';
import { HttpServer, json, type Reply } from './server.js';
import { actionRouter, type ActionContext } from './actions.js';
import type { Caller } from './access.js';
import { StoreProbe, SummaryCache } from './summaries.js';
import { createPageHandler } from './page/index.js';

/** /healthz fails when the tick loop's pulse (the once-a-second sweep timer) is older than this. */
export const PULSE_STALE_MS = 10_000;

export type PageHook = (url: URL, view: { actions: boolean }) => Promise<{ status: number; html: string } | null>;

export interface AttachOptions {
  rt: Runtime;
  scheduler: Scheduler;
  jobs: Job[];
  invalid: InvalidJobFile[];
  listNodes?: () => Promise<ListedNode[]>;
  /** The version of the job set this node runs now (after a reload, the new one). */
  jobSet?: () => string | null;
}

interface Attached {
  snapshot: () => SchedulerSnapshot;
  storeUp: () => boolean;
  reader: StatusReader;
  audit: AuditSource;
  actions: ActionContext;
  metrics: SchedulerMetrics;
  jobs: Job[];
  invalid: InvalidJobFile[];
  stop: () => void;
}

export class DaemonHttp {
  private server: HttpServer | null = null;
  private parts: Attached | null = null;

  /** The status page over the current reader (made again when a reload changes the jobs). */
  private page: PageHook | null = null;

  constructor(private readonly config: Config, private readonly log: Logger, private readonly version: string) {}

  /** The bound URL, or null (off, or the default address was in use). */
  get url(): string | null {
    return this.server?.url ?? null;
  }

  async bind(): Promise<string | null> {
    const { http, httpOrigin, httpTokens, nodeId } = this.config;
    if (http === 'off') return null;
    const server = new HttpServer({
      host: http.host, port: http.port, origin: httpOrigin, tokens: httpTokens, nodeId, log: this.log,
      open: { '/healthz': () => this.healthz(), '/readyz': () => this.readyz(), '/metrics': () => this.metrics() },
      guarded: [apiRoute(() => this.parts?.reader ?? null, () => this.parts?.audit ?? null), (url, caller) => this.pageRoute(url, caller)],
      actions: actionRouter(() => this.parts?.actions ?? null),
    });
    const url = await server.start();
    if (url) this.server = server;
    return url;
  }

  attach(o: AttachOptions): void {
    const { rt, scheduler, jobs, invalid } = o;
    // On the main pool, not the lease keepers' (two connections that heartbeats must always find free).
    // None for SQLite: a statement on a local file never hangs on a network, so the sweep's own say suffices.
    const probe = rt.db.kind === 'sqlite' ? null : new StoreProbe(() => rt.db.withTimeout(1000, () => rt.db.now()));
    const cache = new SummaryCache({ store: rt.store, jobStore: rt.jobStore, onceStore: rt.onceStore, log: this.log, now: () => rt.clock.now() });
    const snapshot = () => scheduler.snapshot();
    const storeUp = () => snapshot().store === 'ok' && (probe?.answers() ?? true);
    const metrics = new SchedulerMetrics({
      jobs: jobs.map((j) => j.name),
      next: () => new Map(snapshot().jobs.map((s) => [s.job.name, s.next])),
      redis: () => snapshot().redis,
      storeUp,
      clockOffsetMs: () => snapshot().clockOffsetMs,
      ...(o.jobSet ? { jobSet: o.jobSet } : {}),
    }, cache, this.version, { onRunEnded: () => cache.refreshSoon() });
    const removeObserver = rt.events.add(metrics);
    const readerOf = (current: Job[], bad: InvalidJobFile[]) => createStatusReader({
      nodeId: this.config.nodeId, version: this.version, storeKind: rt.store.kind, snapshot, jobs: current, invalid: bad, cache, store: rt.store, runLogs: rt.runLogStore, storeUp,
      now: () => rt.clock.now(), backfills: rt.backfillStore, ...(o.listNodes ? { listNodes: o.listNodes } : {}), ...(o.jobSet ? { jobSet: o.jobSet } : {}),
    });
    const reader = readerOf(jobs, invalid);
    this.readerOf = readerOf;
    this.pageOf = (r) => createPageHandler(r, { now: () => new Date(rt.clock.now()) });
    this.page = this.pageOf(reader);
    if (this.server) {
      // Background reads only serve the server: none when it is off.
      probe?.start();
      cache.start();
    }
    const actions: ActionContext = {
      rt, jobs, invalid, nodeId: this.config.nodeId, log: this.log, track: (p) => scheduler.track(p), stopping: () => snapshot().stopping,
      refreshViews: () => cache.fresh(),
    };
    this.parts = { snapshot, storeUp, reader, audit: { store: rt.auditStore, now: () => rt.clock.now(), backfills: rt.backfillStore }, actions, metrics, jobs, invalid, stop: () => { probe?.stop(); cache.stop(); removeObserver(); } };
  }

  private readerOf: ((jobs: Job[], invalid: InvalidJobFile[]) => StatusReader) | null = null;
  private pageOf: ((reader: StatusReader) => PageHook) | null = null;

  /** After a reload: the views and the per-job series follow the new set of jobs. */
  setJobs(jobs: Job[], invalid: InvalidJobFile[]): void {
    if (!this.parts || !this.readerOf) return;
    this.parts.metrics.setJobs(jobs.map((j) => j.name));
    const reader = this.readerOf(jobs, invalid);
    this.parts = { ...this.parts, reader, jobs, invalid, actions: { ...this.parts.actions, jobs, invalid } };
    this.page = this.pageOf?.(reader) ?? null;
  }

  async close(): Promise<void> {
    this.parts?.stop();
    await this.server?.close();
    this.server = null;
  }

  private healthz(): Reply {
    const s = this.parts?.snapshot();
    if (!s || s.sinceLastPulseMs === null) return json(200, { status: 'ok', starting: true });
    if (s.sinceLastPulseMs > PULSE_STALE_MS && !s.stopping) return json(503, { status: 'tick loop stalled', sinceLastPulseMs: s.sinceLastPulseMs });
    return json(200, { status: 'ok', sinceLastPulseMs: s.sinceLastPulseMs });
  }

  private readyz(): Reply {
    const p = this.parts;
    if (!p) return json(503, { status: 'not ready', reason: 'starting', store: 'down', redis: 'none', jobs: 0, invalidJobs: 0 });
    const s = p.snapshot();
    const store = p.storeUp() ? 'ok' : 'down';
    const reason = s.startedAt === null ? 'starting' : s.stopping ? 'stopping' : store === 'down' ? 'store down' : null;
    return json(reason ? 503 : 200, {
      status: reason ? 'not ready' : 'ready', ...(reason ? { reason } : {}),
      store, redis: s.redis, jobs: p.jobs.length, invalidJobs: p.invalid.length,
    });
  }

  private async metrics(): Promise<Reply> {
    if (!this.parts) return json(503, { error: 'starting' });
    const { contentType, body } = await this.parts.metrics.scrape();
    return { status: 200, contentType, body };
  }

  private async pageRoute(url: URL, caller: Caller): Promise<Reply | null> {
    // Before the runtime is attached there is nothing to show: 503, as /readyz says.
    if (!this.page) return url.pathname === '/' || url.pathname.startsWith('/jobs/') ? json(503, { error: 'starting' }) : null;
    // A viewer's page has no action buttons (its POSTs would be 403 anyway).
    const r = await this.page(url, { actions: caller.role === 'operator' });
    return r ? { status: r.status, body: r.html, contentType: 'text/html; charset=utf-8' } : null;
  }
}
