/**
 * The page's backfills: the newest, each with its progress and, for an operator, pause, resume and
 * cancel buttons (the same POSTs as `backfill --pause|--resume|--cancel <id>`).
 */
import type { BackfillView } from '../../backfill/view.js';
import { ACTIONS_SCRIPT } from './actions.js';
import { relativeCell } from './format.js';
import { html, type Markup } from './html.js';

const api = (id: string, change: string) => `/api/backfills/${encodeURIComponent(id)}/${change}`;

function button(label: string, change: string, b: BackfillView, confirm: string): Markup {
  return html`<button type="button" class="act" data-action="backfill-${change}" data-url="${api(b.id, change)}" data-confirm="${confirm}">${label}</button>`;
}

function buttons(b: BackfillView): Markup | '' {
  if (b.status !== 'running' && b.status !== 'paused') return '';
  const what = `backfill ${b.id} of '${b.job}'`;
  return html`<div class="actions" role="group" aria-label="backfill actions">
${b.status === 'running' ? button('Pause', 'pause', b, `Pause ${what}? Running periods end; no new one starts.`) : button('Resume', 'resume', b, `Resume ${what}?`)}
${button('Cancel', 'cancel', b, `Cancel ${what}? Its pending periods are recorded cancelled.`)}
<span class="action-result" role="status" aria-live="polite"></span>
</div>`;
}

const BADGE: Record<BackfillView['status'], string> = { running: 'busy', paused: 'warn', cancelled: 'bad', done: 'ok' };

/** Empty when there is no backfill. */
export function backfillsSection(list: BackfillView[], now: Date, actions: boolean): Markup | '' {
  if (list.length === 0) return '';
  const withButtons = actions && list.some((b) => b.status === 'running' || b.status === 'paused');
  return html`<section aria-labelledby="backfills-h"><h2 id="backfills-h">Backfills</h2>
<div class="scroll"><table class="backfills">
<thead><tr><th>id</th><th>job</th><th>state</th><th>progress</th><th class="wide">range</th><th class="wide">by</th><th>started</th>${actions ? html`<th></th>` : ''}</tr></thead>
<tbody>
${list.map((b) => html`<tr data-backfill="${b.id}"><td class="id">${b.id}</td><td class="id">${b.job}</td><td><span class="badge ${BADGE[b.status]}">${b.status}</span></td>
<td class="num"><progress max="${String(b.total)}" value="${String(b.done + b.failed)}"></progress> ${String(b.done + b.failed)}/${String(b.total)}${b.failed > 0 ? html` <span class="badge bad">${String(b.failed)} failed</span>` : ''}${b.running > 0 ? html` · ${String(b.running)} running` : ''}</td>
<td class="wide id">${b.from} → ${b.to}</td><td class="wide id">${b.createdBy}</td><td>${relativeCell(b.createdAt, now)}</td>${actions ? html`<td>${buttons(b)}</td>` : ''}</tr>`)}
</tbody></table></div>
${withButtons ? html`<script>${ACTIONS_SCRIPT}</script>` : ''}
</section>`;
}
