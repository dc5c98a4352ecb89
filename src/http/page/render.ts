/**
 * Pure render functions from the status model (src/status/model.ts) to HTML: no I/O, no clock of
 * their own (`now` is passed in), so the same model always gives the same page.
 */
import { shardText } from '../../output/periods.js';
import type { InvalidJobView, JobDetailView, JobView, NodeView, RunView, SummaryView } from '../../status/model.js';
import type { RunStatus } from '../../store/types.js';
import { durationText, relativeCell, relativeInZone, timeCell, zoneText } from './format.js';
import { html, Markup, type Fragment } from './html.js';
import { STYLESHEET } from './style.js';
import { ACTIONS_SCRIPT, jobActions, rerunCell } from './actions.js';

export type JobFilter = 'failing' | 'never' | 'paused' | 'running';
export const JOB_FILTERS: readonly JobFilter[] = ['failing', 'never', 'paused', 'running'];

const FILTER_LABELS: Record<JobFilter, string> = { failing: 'failing', never: 'never ran', paused: 'paused', running: 'running' };

/**
 * failing: the newest attempt ended failed, timed out or abandoned, or a further attempt of such a
 * one is owed (pending, attempt 2 or later); while the newest attempt runs, the newest that ended
 * decides (a job failing every second is seldom without an attempt running).
 */
export function matchesFilter(job: JobView, filter: JobFilter): boolean {
  switch (filter) {
    case 'failing':
      if (job.last === null) return false;
      if (job.last.status === 'running') return job.lastEnded !== null && isFailure(job.lastEnded.status);
      return isFailure(job.last.status) || (job.last.status === 'pending' && job.last.attempt > 1);
    case 'never':
      return job.last === null;
    case 'paused':
      return job.paused !== null;
    case 'running':
      return job.running > 0;
  }
}

function isFailure(status: RunStatus): boolean {
  return status === 'failed' || status === 'timed_out' || status === 'abandoned';
}

// A symbol and the word, not the colour alone, tell the status.
const STATUS_LOOK: Record<RunStatus, { symbol: string; tone: 'ok' | 'bad' | 'warn' | 'busy' | 'idle' }> = {
  succeeded: { symbol: '✓', tone: 'ok' },
  failed: { symbol: '✗', tone: 'bad' },
  timed_out: { symbol: '✗', tone: 'bad' },
  abandoned: { symbol: '✗', tone: 'bad' },
  interrupted: { symbol: '!', tone: 'warn' },
  cancelled: { symbol: '■', tone: 'warn' },
  skipped: { symbol: '–', tone: 'idle' },
  pending: { symbol: '…', tone: 'idle' },
  running: { symbol: '▶', tone: 'busy' },
};

export function statusBadge(status: RunStatus, reason: string | null = null): Markup {
  const look = STATUS_LOOK[status] ?? { symbol: '?', tone: 'idle' };
  return html`<span class="badge ${look.tone}" data-status="${status}">${look.symbol} ${status.replace('_', ' ')}${reason ? html`<span class="reason"> (${reason})</span>` : ''}</span>`;
}

function stateBadge(text: string, tone: 'ok' | 'bad' | 'warn' | 'idle', symbol: string): Markup {
  return html`<span class="badge ${tone}">${symbol} ${text}</span>`;
}

export function jobHref(name: string): string {
  return `/jobs/${encodeURIComponent(name)}`;
}

export interface LayoutOptions {
  title: string;
  refreshSeconds: number;
  now: Date;
  nodeId?: string;
  version?: string;
}

// A constant of this file, never user data, hence raw Markup. Keeps the scroll position across the automatic refresh; the page is complete without it.
const KEEP_SCROLL = `(function(){try{var k='scroll:'+location.pathname+location.search;var y=sessionStorage.getItem(k);if(y)window.scrollTo(0,+y);addEventListener('pagehide',function(){sessionStorage.setItem(k,String(window.scrollY))});}catch(e){}})();`;

export function layout(options: LayoutOptions, body: Fragment): string {
  const refresh = options.refreshSeconds > 0 ? html`<meta http-equiv="refresh" content="${options.refreshSeconds}">` : '';
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${refresh}
<link rel="icon" href="data:,">
<title>${options.title} · cluster-cron</title>
<style>${new Markup(STYLESHEET)}</style>
</head>
<body>
<header><a class="home" href="/">cluster-cron</a>${options.nodeId ? html` <span class="muted">node ${options.nodeId}${options.version ? html` · v${options.version}` : ''}</span>` : ''} <span class="muted">rendered ${options.now.toISOString()}${options.refreshSeconds > 0 ? html`, refreshes every ${options.refreshSeconds}s` : ''}</span></header>
<main>
${body}
</main>
<script>${new Markup(KEEP_SCROLL)}</script>
</body>
</html>
`.value;
}

function quorumBadge(state: SummaryView['redis']): Markup {
  switch (state) {
    case 'ok': return stateBadge('ok', 'ok', '✓');
    case 'degraded': return stateBadge('degraded', 'warn', '!');
    case 'down': return stateBadge('down', 'bad', '✗');
    case 'none': return stateBadge('none (no Redis configured)', 'idle', '–');
  }
}

export function summarySection(summary: SummaryView, now: Date): Markup {
  const tile = (label: string, value: Fragment, tone: 'ok' | 'bad' | 'warn' | 'idle' = 'idle', id?: string) =>
    html`<div class="tile ${tone}"${id ? html` data-summary="${id}"` : ''}><div class="label">${label}</div><div class="value">${value}</div></div>`;
  return html`<section aria-labelledby="summary-h"><h2 id="summary-h">Summary</h2>
<div class="tiles">
${tile('nodes alive', summary.nodesAlive, summary.nodesAlive > 0 ? 'ok' : 'bad', 'nodes')}
${tile('Redis quorum', quorumBadge(summary.redis), 'idle', 'redis')}
${tile(`store (${summary.store.kind})`, summary.store.state === 'ok' ? stateBadge('ok', 'ok', '✓') : stateBadge('down', 'bad', '✗'), 'idle', 'store')}
${tile('jobs', html`${summary.jobs}${summary.invalidJobs > 0 ? html` <span class="small bad-text">+ ${summary.invalidJobs} invalid</span>` : ''}`, 'idle', 'jobs')}
${tile('running', summary.running, summary.running > 0 ? 'ok' : 'idle', 'running')}
${tile('paused', summary.paused, summary.paused > 0 ? 'warn' : 'idle', 'paused')}
${tile('failures, 24 h', summary.failures24h, summary.failures24h > 0 ? 'bad' : 'ok', 'failures')}
${tile('missed, 24 h', summary.missed24h, summary.missed24h > 0 ? 'warn' : 'ok', 'missed')}
${tile('clock offset', `${summary.clockOffsetMs} ms`, Math.abs(summary.clockOffsetMs) >= 1000 ? 'warn' : 'idle', 'clock')}
</div>
<p class="muted small">Cluster-wide figures read from the store ${summary.readAt ? relativeCell(summary.readAt, now) : 'not yet'}.</p>
</section>`;
}

function filterNav(jobs: JobView[], active: JobFilter | null): Markup {
  const link = (filter: JobFilter | null, label: string, count: number) => {
    const href = filter ? `/?filter=${filter}` : '/';
    return html`<a href="${href}"${filter === active ? html` aria-current="page" class="active"` : ''} data-filter="${filter ?? 'all'}">${label} <span class="count">${count}</span></a>`;
  };
  return html`<nav class="filters" aria-label="filters">${link(null, 'all', jobs.length)}${JOB_FILTERS.map((f) => link(f, FILTER_LABELS[f], jobs.filter((j) => matchesFilter(j, f)).length))}</nav>`;
}

function firstLine(text: string | null, max = 120): string | null {
  if (!text) return null;
  const line = text.split('\n', 1)[0]!;
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

function jobRow(job: JobView, now: Date): Markup {
  const [next, ...later] = job.next;
  // While the newest attempt runs (the running column says so), the last run shown is the newest that ended.
  const last = job.last?.status === 'running' && job.lastEnded ? job.lastEnded : job.last;
  return html`<tr data-job="${job.name}">
<td class="name"><a href="${jobHref(job.name)}">${job.name}</a></td>
<td class="wide"><code class="expr">${job.schedule}</code></td>
<td class="wide">${zoneText(job.timezone)}</td>
<td>${next ? timeCell(next, job.timezone, now) : html`<span class="none">none</span>`}${later.length > 0 ? html`<div class="small muted wide">then ${later.slice(0, 2).map((p, i) => html`${i > 0 ? ', ' : ''}${relativeInZone(p, job.timezone, now)}`)}</div>` : ''}</td>
<td>${last ? html`${statusBadge(last.status)}${last.attempt > 1 ? html` <span class="small muted">attempt ${last.attempt}</span>` : ''}<div class="small">${timeCell(last.scheduledAt, job.timezone, now)}</div>${last.error ? html`<div class="error small">${firstLine(last.error)}</div>` : ''}` : html`<span class="badge idle" data-status="never">– never ran</span>`}</td>
<td>${job.running > 0 ? statusBadge('running') : ''}${job.running > 1 ? html` ×${job.running}` : ''}</td>
<td>${job.paused ? html`<span class="badge warn">‖ paused</span><div class="small muted">${job.paused.reason ?? ''} ${relativeCell(job.paused.since, now)}</div>` : ''}</td>
<td class="num wide">${job.failures24h > 0 ? html`<span class="bad-text">${job.failures24h}</span>` : '0'} / ${job.missed24h}</td>
</tr>`;
}

/**
 * The jobs table comes in chunks of JOB_CHUNK_ROWS rows, each its own <table> in a block with
 * `content-visibility: auto`, so that the first frame lays out the chunks on screen and skips the
 * rest (containment does not apply to rows or tbody, internal table boxes; a trace of the single
 * table showed the first frame laying out every row parsed so far). `table-layout: fixed` and one
 * colgroup for all keep the chunks' columns lined up as one table.
 */
export const JOB_CHUNK_ROWS = 50;

// A constant of this file, never user data, hence raw Markup. Widths in style.ts (col.c-*).
const JOB_COLUMNS = new Markup('<colgroup><col class="c-name"><col class="c-schedule wide"><col class="c-zone wide"><col class="c-next"><col class="c-last"><col class="c-running"><col class="c-paused"><col class="c-counts wide"></colgroup>');

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

export function jobsSection(jobs: JobView[], filter: JobFilter | null, now: Date): Markup {
  const shown = filter ? jobs.filter((j) => matchesFilter(j, filter)) : jobs;
  const sorted = [...shown].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return html`<section aria-labelledby="jobs-h"><h2 id="jobs-h">Jobs${filter ? html` <span class="muted">· ${FILTER_LABELS[filter]}</span>` : ''}</h2>
${filterNav(jobs, filter)}
${sorted.length === 0 ? html`<p class="muted" data-empty="jobs">No job${filter ? html` is ${FILTER_LABELS[filter]}` : ''}.</p>` : html`<div class="scroll"><div class="jobs-wide">
${chunks(sorted, JOB_CHUNK_ROWS).map((rows, i) => html`<div class="chunk" style="contain-intrinsic-size:auto ${rows.length * 68}px"><table class="jobs">${JOB_COLUMNS}
${i === 0 ? html`<thead><tr><th>job</th><th class="wide">schedule</th><th class="wide">zone</th><th>next (job's time)</th><th>last run</th><th>running</th><th>paused</th><th class="wide" title="failures / missed periods in the last 24 h">24 h ✗ / missed</th></tr></thead>` : ''}
<tbody>
${rows.map((j) => jobRow(j, now))}
</tbody></table></div>
`)}</div></div>`}
</section>`;
}

export function invalidSection(invalid: InvalidJobView[]): Markup | '' {
  if (invalid.length === 0) return '';
  return html`<section aria-labelledby="invalid-h"><h2 id="invalid-h">Invalid job files <span class="badge bad">✗ ${invalid.length}</span></h2>
<ul class="invalid">${invalid.map((f) => html`<li><code>${f.file}</code>: ${f.problems.join('; ')}</li>`)}</ul></section>`;
}

/** The word `bin/scheduler nodes` uses: the state, or `silent` for a heartbeat gone stale without a stop. */
function nodeStateBadge(node: NodeView): Markup {
  if (node.state === 'stopped') return stateBadge('stopped', 'idle', '–');
  if (!node.alive) return stateBadge('silent', 'bad', '✗');
  return node.state === 'running' ? stateBadge('running', 'ok', '✓') : stateBadge(node.state, 'warn', '!');
}

export function nodesSection(nodes: NodeView[], now: Date): Markup {
  const sorted = [...nodes].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  // After a deploy of new job files: the live nodes whose jobs folders differ.
  const sets = new Set(sorted.filter((n) => n.alive && n.jobSet).map((n) => n.jobSet));
  return html`<section aria-labelledby="nodes-h"><h2 id="nodes-h">Nodes</h2>
${sets.size > 1 ? html`<p><span class="badge warn" data-job-sets>! the live nodes run ${sets.size} different job sets: their jobs folders differ</span></p>` : ''}
${sorted.length === 0 ? html`<p class="muted">No node has written a heartbeat yet.</p>` : html`<div class="scroll"><table class="nodes">
<thead><tr><th>node</th><th>state</th><th>heartbeat</th><th class="wide">host</th><th class="wide">pid</th><th>version</th><th class="wide">job set</th><th>in flight</th><th class="wide">clock offset</th><th class="wide">writes to</th><th class="wide">started</th></tr></thead>
<tbody>
${sorted.map((n) => html`<tr data-node="${n.id}"><td class="id">${n.id}</td><td>${nodeStateBadge(n)}</td><td>${relativeCell(n.heartbeatAt, now)}</td><td class="wide id">${n.host}</td><td class="wide num">${n.pid}</td><td class="id">${n.version}</td><td class="wide id"><code>${n.jobSet ?? '–'}</code></td><td class="num">${n.inFlight}</td><td class="wide num">${n.clockOffsetMs} ms</td><td class="wide id">${n.storeHost ?? '–'}</td><td class="wide">${relativeCell(n.startedAt, now)}</td></tr>`)}
</tbody></table></div>`}
</section>`;
}

/** A section that could not be read: says so without the error's text (it may name hosts or users). */
export function unavailableSection(title: string): Markup {
  return html`<section><h2>${title}</h2><p class="badge bad">✗ could not be read just now (the store may be away); the daemon's log has the error.</p></section>`;
}

export function jobPageBody(detail: JobDetailView, now: Date, actions = false): Markup {
  const { job, runs, periods } = detail;
  // Re-run: on the newest row of each period (the runs are newest first).
  const seen = new Set<string>();
  const newest = runs.map((r) => {
    if (seen.has(r.periodKey)) return false;
    seen.add(r.periodKey);
    return true;
  });
  const fact = (label: string, value: Fragment) => html`<dt>${label}</dt><dd>${value}</dd>`;
  return html`<p><a href="/">← all jobs</a></p>
<h1 class="job-title">${job.name}${job.paused ? html` <span class="badge warn">‖ paused</span>` : ''}${job.running > 0 ? html` ${statusBadge('running')}` : ''}</h1>
${actions ? jobActions(job) : ''}
<dl class="facts">
${fact('schedule', html`<code>${job.schedule}</code>`)}
${fact('zone', zoneText(job.timezone))}
${fact('last run', job.last ? html`${statusBadge(job.last.status)} ${timeCell(job.last.scheduledAt, job.timezone, now)}` : 'never')}
${fact('last success', timeCell(job.lastSuccessAt, job.timezone, now))}
${fact('failures / missed, 24 h', `${job.failures24h} / ${job.missed24h}`)}
${job.paused ? fact('paused', html`${job.paused.reason ?? 'no reason given'}, ${timeCell(job.paused.since, job.timezone, now)}`) : ''}
${fact('overlap', job.overlap)}
${fact('timeout', job.timeout === null ? 'none' : durationText(job.timeout))}
${fact('retries', job.retries)}
${job.shards > 1 ? fact('shards', job.shards) : ''}
${job.exclude && job.exclude.length > 0 ? fact('exclude', html`<code>${job.exclude.join(', ')}</code>${job.nextSkipped && job.nextSkipped.length > 0 ? html` (next skipped: ${timeCell(job.nextSkipped[0]!.at, job.timezone, now)})` : ''}`) : ''}
${fact('file', html`<code>${job.file}</code>`)}
</dl>
<section aria-labelledby="periods-h"><h2 id="periods-h">Next ${periods.length} periods</h2>
${periods.length === 0 ? html`<p class="muted">The expression has no further period.</p>` : html`<div class="scroll"><table class="periods">
<thead><tr><th>#</th><th>job's time</th><th>offset</th><th class="wide">UTC</th><th>DST</th></tr></thead>
<tbody>
${periods.map((p, i) => html`<tr${p.dst ? html` class="dst"` : ''}><td class="num">${i + 1}</td><td>${timeCell(p.utc, job.timezone, now)}</td><td><code>${p.local.slice(19)}</code></td><td class="wide"><code>${p.utc}</code></td><td>${p.dst ? html`<span class="badge warn" data-dst>⇅ DST change: ${p.dst}</span>` : ''}</td></tr>`)}
</tbody></table></div>`}
</section>
<section aria-labelledby="runs-h"><h2 id="runs-h">Last ${runs.length} attempts</h2>
${runs.length === 0 ? html`<p class="muted">No attempt recorded yet.</p>` : html`<div class="scroll"><table class="runs">
<thead><tr><th>period (job's time)</th>${job.shards > 1 ? html`<th>shard</th>` : ''}<th>attempt (log)</th><th class="wide">trigger</th><th class="wide">node</th><th class="wide">started</th><th>duration</th><th>status</th><th>error</th>${actions ? html`<th>action</th>` : ''}</tr></thead>
<tbody>
${runs.map((r, i) => runRow(r, job.timezone, now, job.shards, actions ? rerunCell(r, newest[i]!, job) : ''))}
</tbody></table></div>`}
</section>
${actions ? html`<script>${ACTIONS_SCRIPT}</script>` : ''}`;
}

function runRow(run: RunView, timezone: string, now: Date, shards: number, action: Fragment): Markup {
  return html`<tr data-period="${run.periodKey}"${shards > 1 ? html` data-shard="${run.shard}"` : ''}><td>${timeCell(run.scheduledAt, timezone, now)}</td>${shards > 1 ? html`<td class="num">${shardText(run.shard, shards)}</td>` : ''}<td class="num"><a href="/runs/${encodeURIComponent(run.runId)}/log" title="this attempt's log">${run.attempt}</a></td><td class="wide">${run.trigger}</td><td class="wide id">${run.nodeId}</td><td class="wide">${timeCell(run.startedAt, timezone, now)}</td><td class="num">${durationText(run.durationMs)}</td><td>${statusBadge(run.status, run.reason)}</td><td class="error">${firstLine(run.error, 300) ?? ''}${run.output ? html`<details class="output"><summary>output</summary><pre>${run.output}</pre></details>` : ''}</td>${action}</tr>`;
}

export function notFoundBody(name: string): Markup {
  return html`<p><a href="/">← all jobs</a></p><h1>No job named <code>${name}</code></h1><p>This node has no job of that name (a job file may have been removed, renamed or be invalid).</p>`;
}
