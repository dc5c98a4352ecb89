/**
 * The status page's hook for the HTTP server: `/` (with `?filter=`) and `/jobs/<name>`, server-side
 * rendered from a StatusReader; anything else is not the page's (null), so the server answers it.
 */
import type { StatusReader } from '../../status/model.js';
import { html, type Fragment } from './html.js';
import { runLogBody, RUN_LOG_REFRESH_SECONDS } from './run-log.js';
import { backfillsSection } from './backfills.js';
import { invalidSection, jobPageBody, jobsSection, JOB_FILTERS, layout, nodesSection, notFoundBody, summarySection, unavailableSection, type JobFilter } from './render.js';

export interface PageResponse {
  status: number;
  html: string;
}

/** `actions`: the caller may act (an operator): the job page shows its buttons. */
export type PageHook = (url: URL, view?: { actions: boolean }) => Promise<PageResponse | null>;

export interface PageOptions {
  /** Seconds between the page's own reloads (`<meta http-equiv="refresh">`); 0: no reload. Default 10. */
  refreshSeconds?: number;
  now?: () => Date;
}

export const DEFAULT_REFRESH_SECONDS = 10;

const JOB_PATH = /^\/jobs\/([^/]+)$/;
const RUN_LOG_PATH = /^\/runs\/(\d{1,18})\/log$/;

export function createPageHandler(reader: StatusReader, options: PageOptions = {}): PageHook {
  const refreshSeconds = options.refreshSeconds ?? DEFAULT_REFRESH_SECONDS;
  if (!Number.isInteger(refreshSeconds) || refreshSeconds < 0) {
    throw new Error(`status page: refreshSeconds is ${String(refreshSeconds)}, expected a whole number of seconds, 0 or more`);
  }
  const clock = options.now ?? (() => new Date());

  return async (url, view = { actions: false }) => {
    if (url.pathname === '/') return home(reader, url, refreshSeconds, clock(), view.actions);
    const match = JOB_PATH.exec(url.pathname);
    if (match) return jobPage(reader, match[1]!, refreshSeconds, clock(), view.actions);
    const log = RUN_LOG_PATH.exec(url.pathname);
    if (log) return runLogPage(reader, log[1]!, clock());
    return null;
  };
}

async function home(reader: StatusReader, url: URL, refreshSeconds: number, now: Date, actions = false): Promise<PageResponse> {
  const asked = url.searchParams.get('filter');
  if (asked !== null && asked !== '' && !(JOB_FILTERS as readonly string[]).includes(asked)) {
    const body = html`<h1>Unknown filter</h1><p>filter=<code>${asked}</code> is not one of ${JOB_FILTERS.join(', ')}. <a href="/">All jobs</a></p>`;
    return { status: 400, html: layout({ title: 'unknown filter', refreshSeconds: 0, now }, body) };
  }
  const filter = asked ? (asked as JobFilter) : null;
  // Each part is shown if it could be read: a store away must not blank the whole page.
  // The nodes table is read once: the summary counts the live nodes of the same read.
  const nodesRead = reader.nodes();
  const [summary, jobs, nodes, backfills] = await Promise.allSettled([nodesRead.then((n) => reader.summary(n)), reader.jobs(), nodesRead, reader.backfills?.() ?? Promise.resolve([])]);
  const invalid = safely(() => reader.invalid(), []);
  const body: Fragment = [
    summary.status === 'fulfilled' ? summarySection(summary.value, now) : unavailableSection('Summary'),
    jobs.status === 'fulfilled' ? jobsSection(jobs.value, filter, now) : unavailableSection('Jobs'),
    invalidSection(invalid),
    backfills.status === 'fulfilled' ? backfillsSection(backfills.value, now, actions) : unavailableSection('Backfills'),
    nodes.status === 'fulfilled' ? nodesSection(nodes.value, now) : unavailableSection('Nodes'),
  ];
  const identity = summary.status === 'fulfilled' ? { nodeId: summary.value.nodeId, version: summary.value.version } : {};
  return { status: 200, html: layout({ title: filter ? `jobs: ${filter}` : 'status', refreshSeconds, now, ...identity }, body) };
}

async function jobPage(reader: StatusReader, encoded: string, refreshSeconds: number, now: Date, actions: boolean): Promise<PageResponse> {
  let name: string;
  try {
    name = decodeURIComponent(encoded);
  } catch {
    return { status: 400, html: layout({ title: 'bad job name', refreshSeconds: 0, now }, html`<h1>Bad job name</h1><p><code>${encoded}</code> is not a valid URL-encoded name. <a href="/">All jobs</a></p>`) };
  }
  let detail: Awaited<ReturnType<StatusReader['job']>>;
  try {
    detail = await reader.job(name);
  } catch {
    return { status: 503, html: layout({ title: name, refreshSeconds, now }, html`<p><a href="/">← all jobs</a></p><h1>${name}</h1>${unavailableSection('Job')}`) };
  }
  if (!detail) return { status: 404, html: layout({ title: 'no such job', refreshSeconds: 0, now }, notFoundBody(name)) };
  return { status: 200, html: layout({ title: name, refreshSeconds, now }, jobPageBody(detail, now, actions)) };
}

async function runLogPage(reader: StatusReader, runId: string, now: Date): Promise<PageResponse> {
  let view: Awaited<ReturnType<StatusReader['runLog']>>;
  try {
    view = await reader.runLog(runId, { limit: 100_000 });
  } catch {
    return { status: 503, html: layout({ title: `run ${runId}`, refreshSeconds: RUN_LOG_REFRESH_SECONDS, now }, html`<p><a href="/">← all jobs</a></p>${unavailableSection('Log')}`) };
  }
  if (!view) return { status: 404, html: layout({ title: 'no such run', refreshSeconds: 0, now }, html`<p><a href="/">← all jobs</a></p><h1>No run ${runId}</h1><p>No attempt has that id (it may have been pruned).</p>`) };
  return { status: 200, html: layout({ title: `log of ${view.run.job} attempt ${view.run.attempt}`, refreshSeconds: view.done ? 0 : RUN_LOG_REFRESH_SECONDS, now }, runLogBody(view)) };
}

function safely<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}
