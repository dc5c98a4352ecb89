/**
 * The job page's action buttons, for an operator only (a viewer's page has none): run now, pause
 * (asking a reason) or resume, cancel the running attempt, and re-run a period from its row. Each
 * asks for confirmation, then POSTs JSON to the API (the same route a script would use; the browser
 * sends the page's own Origin, and whatever Authorization a proxy or the browser adds), and says the
 * answer in one line before the page reloads.
 */
import type { JobView, RunView } from '../../status/model.js';
import { FINAL_STATUSES } from '../../store/types.js';
import { html, Markup, type Fragment } from './html.js';

const api = (job: string, tail: string) => `/api/jobs/${encodeURIComponent(job)}/${tail}`;

function button(label: string, action: string, url: string, confirm: string, extra: { reason?: boolean; force?: boolean } = {}): Markup {
  return html`<button type="button" class="act" data-action="${action}" data-url="${url}" data-confirm="${confirm}"${extra.reason ? html` data-reason` : ''}${extra.force ? html` data-force` : ''}>${label}</button>`;
}

/** The bar under the job's title. */
export function jobActions(job: JobView): Markup {
  return html`<div class="actions" role="group" aria-label="actions">
${button('Run now', 'run', api(job.name, 'run'), `Run '${job.name}' now, on this node?${job.paused ? ' It is paused: it runs anyway (force).' : ''}`, { force: job.paused !== null })}
${job.paused
    ? button('Resume', 'resume', api(job.name, 'resume'), `Resume '${job.name}' on every node?`)
    : button('Pause…', 'pause', api(job.name, 'pause'), `Pause '${job.name}' on every node? Reason (optional):`, { reason: true })}
${job.running > 0 ? button('Cancel running…', 'cancel', api(job.name, 'cancel'), `Cancel the running attempt of '${job.name}', wherever it runs? Reason (optional):`, { reason: true }) : ''}
<span class="action-result" role="status" aria-live="polite"></span>
</div>`;
}

const ENDED = new Set<string>(FINAL_STATUSES);

/** A re-run button for the newest row of each ended period (a succeeded one asks for force). */
export function rerunCell(run: RunView, newestOfPeriod: boolean, job: JobView): Fragment {
  if (!newestOfPeriod || !ENDED.has(run.status) || run.period === false) return html`<td></td>`;
  const force = run.status === 'succeeded';
  const question = `Run the period ${run.scheduledAt} of '${job.name}' again, on this node?${force ? ' It already succeeded: it runs again (force).' : ''}`;
  return html`<td>${button('Re-run', 'rerun', api(job.name, `periods/${encodeURIComponent(run.scheduledAt)}/run`), question, { force })}</td>`;
}

// A constant of this file, never user data, hence raw Markup. Without it the buttons do nothing (the page still reads).
// window.stop() once the question is answered: it cancels the page's own refresh (<meta http-equiv="refresh">,
// also one that fell due while the dialog was open), which would otherwise reload the page under the
// request and lose its answer; the page reloads itself 1.5 s after a success, and a refusal stays shown.
export const ACTIONS_SCRIPT = new Markup(`(function(){
function say(b,t,ok){var bar=b.closest('.actions')||document.querySelector('.actions');var out=bar&&bar.querySelector('.action-result');if(out){out.textContent=t;out.className='action-result '+(ok?'ok':'bad');}}
document.addEventListener('click',function(e){var b=e.target.closest&&e.target.closest('button.act');if(!b)return;
var body={};var q=b.getAttribute('data-confirm');
if(b.hasAttribute('data-reason')){var r=window.prompt(q,'');if(r===null)return;if(r.trim())body.reason=r.trim();}else if(!window.confirm(q))return;
if(b.hasAttribute('data-force'))body.force=true;
if(window.stop)window.stop();
b.disabled=true;
fetch(b.getAttribute('data-url'),{method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify(body),credentials:'same-origin'})
.then(function(res){return res.json().catch(function(){return {};}).then(function(doc){
if(res.ok){say(b,b.textContent.replace('…','')+': done'+(doc.period?' ('+doc.period+')':''),true);setTimeout(function(){location.reload();},1500);}
else{b.disabled=false;say(b,'refused ('+res.status+'): '+(doc.error||res.statusText),false);}});})
.catch(function(err){b.disabled=false;say(b,'failed: '+err,false);});});})();`);
