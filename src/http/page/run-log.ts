/**
 * The page of one attempt's stored log, `/runs/<id>/log`: each line with its time, level and stream,
 * wrapped to the page's width. It reloads every few seconds while the attempt runs (as the page does),
 * and stops once the attempt has ended.
 */
import type { RunLogView } from '../../status/model.js';
import { html, type Markup } from './html.js';
import { jobHref } from './render.js';

/** While the attempt runs, the page reloads this often (seconds). */
export const RUN_LOG_REFRESH_SECONDS = 3;

export function runLogBody(view: RunLogView): Markup {
  const r = view.run;
  return html`<p><a href="${jobHref(r.job)}">← ${r.job}</a></p>
<h1>Log of ${r.job}, attempt ${r.attempt}</h1>
<p class="muted">period <code>${r.scheduledAt}</code> · ${r.status}${r.reason ? html` (${r.reason})` : ''} · node <span class="id">${r.nodeId}</span> · trigger ${r.trigger} · run ${view.runId} · ${view.lines.length} line${view.lines.length === 1 ? '' : 's'}${view.done ? '' : ' so far'}</p>
${view.lines.length === 0 ? html`<p class="muted">No line stored${view.done ? '' : ' yet'}.</p>` : html`<pre class="runlog">${view.lines.map((l) => html`<span class="lv-${l.level}${l.stream === 'note' ? ' note' : ''}">${l.at.slice(11, 23)} ${l.level.toUpperCase().padEnd(5)}${l.stream === 'log' ? '' : ` [${l.stream}]`} ${l.line}${l.fields ? ` ${JSON.stringify(l.fields)}` : ''}</span>\n`)}</pre>`}
<p class="muted">The same as JSON: <a href="/api/runs/${encodeURIComponent(view.runId)}/log">/api/runs/${view.runId}/log</a>; from a shell: <code>scheduler logs ${r.job} --run ${view.runId}${view.done ? '' : ' --follow'}</code></p>`;
}
