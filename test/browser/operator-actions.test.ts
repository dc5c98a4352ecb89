/**
 * The operators' actions over HTTP in headless Chromium, against real daemons (`bin/scheduler run`,
 * SQLite, the HTTP server on a free port), as the issue asks:
 * - a viewer token's job page has no button, and each of the five action paths answers its POSTs 403;
 * - an operator token pauses (with a reason), resumes, runs now and cancels the running attempt from
 *   the job page's buttons (their confirm and prompt dialogs answered), each answer said on the page;
 * - a cross-site form post (text/plain carrying a JSON body, and urlencoded) and a no-cors fetch from a
 *   page of another site are refused (403, logged `http action refused`) and pause nothing: on the
 *   token daemon with the operator's token sent on every request, and on a token-less loopback daemon;
 * - every action stands in the audit trail under the token's name (`ops`), result `done`.
 * A reason typed slower than the page's 10 s refresh still gets its answer shown.
 * The page reads `paused` and `running` from the summaries cache (refreshed every 5 s), so what the
 * page shows after an action is waited for by reloading it, with generous deadlines.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../helpers/browser.js';
import type { Daemon } from '../helpers/cli.js';
import { jobSource } from '../helpers/job-sources.js';
import { waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';
import type { Workspace } from '../helpers/workspace.js';

const node = singleNode('cron-actions-', 'actions-node');
const JOB = 'slow';
/** The next period of `0 0 1 1 *` is 1 January: a job that never runs by itself during the test. */
const SLOW_JOB = jobSource(`schedule: '0 0 1 1 *',`, `await sleep(ctx, 60000);`);
const OPS = randomBytes(16).toString('hex');
const DASH = randomBytes(16).toString('hex');
const LONG = 60_000;

let browser: Browser;
let foreign: { url: (host: string) => string; close(): Promise<void> };

beforeAll(async () => {
  [browser, foreign] = await Promise.all([launchChromium(), serveForeignPages()]);
});

afterAll(async () => {
  await browser?.close();
  await foreign?.close();
});

interface Started { d: Daemon; base: string; ws: Workspace }

/** A daemon with the slow job, its HTTP server on 127.0.0.1:0; `config`: its config/scheduler.json. */
async function startDaemon(config: Record<string, unknown> | null, env: Record<string, string> = {}): Promise<Started> {
  const ws = node.workspace();
  ws.writeJob(`${JOB}.mjs`, SLOW_JOB);
  if (config) {
    mkdirSync(ws.path('config'));
    writeFileSync(ws.path('config', 'scheduler.json'), JSON.stringify(config, null, 2));
  }
  const d = node.start(ws, { SCHEDULER_HTTP: '127.0.0.1:0', ...env });
  const base = await waitFor('http server listening', () => {
    if (!d.alive) throw new Error(`the daemon exited (${d.proc.exitCode}): ${d.errors.slice(-2000)}${d.output.slice(-2000)}`);
    return d.logs().find((l) => l.msg === 'http server listening')?.url as string | undefined;
  }, LONG).catch((err: Error) => { throw new Error(`${err.message}; stderr: ${d.errors.slice(-2000)}`); });
  await d.waitStarted(LONG);
  return { d, base, ws };
}

/** GET (or POST) on the daemon from the test itself, as a script would. */
async function api<T = Record<string, unknown>>(base: string, path: string, token: string | null, init: RequestInit = {}): Promise<{ status: number; doc: T }> {
  const headers: Record<string, string> = { ...(init.headers as Record<string, string> | undefined) };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${base}${path}`, { ...init, headers });
  const text = await res.text();
  let doc: unknown = text;
  try { doc = JSON.parse(text); } catch { /* not JSON: kept as text */ }
  return { status: res.status, doc: doc as T };
}

interface JobDoc { job: { paused: { reason: string | null } | null; running: number } }
interface RunDoc { runId: string; trigger: string; status: string; error: string | null; attempt: number }
interface AuditDoc { actor: string; action: string; job: string | null; result: string; reason: string | null; detail: string | null }

const jobState = async (base: string, token: string | null) => {
  const r = await api<JobDoc>(base, `/api/jobs/${JOB}`, token);
  if (r.status !== 200) throw new Error(`GET /api/jobs/${JOB}: ${r.status} ${JSON.stringify(r.doc)}`);
  return r.doc.job;
};
const runsOf = async (base: string, token: string | null) => (await api<{ runs: RunDoc[] }>(base, `/api/runs?job=${JOB}`, token)).doc.runs;

/** Waits until the summaries cache (paused, running) has been read after `after` (epoch ms, store clock ≈ ours on SQLite). */
async function cacheReadAfter(base: string, token: string | null, after: number): Promise<void> {
  await waitFor('a summaries read after the attempts', async () => {
    const { doc } = await api<{ readAt: string | null }>(base, '/api/summary', token);
    return doc.readAt !== null && Date.parse(doc.readAt) > after;
  }, LONG, 250);
}

/** The five action paths of the job. */
const ACTION_PATHS = [
  `/api/jobs/${JOB}/run`,
  `/api/jobs/${JOB}/periods/${encodeURIComponent('2027-01-01T00:00:00.000Z')}/run`,
  `/api/jobs/${JOB}/pause`,
  `/api/jobs/${JOB}/resume`,
  `/api/jobs/${JOB}/cancel`,
];

/** A context whose every request (the page's own fetch calls included) carries `token`. */
async function contextFor(token: string | null): Promise<BrowserContext> {
  return browser.newContext({ viewport: { width: 1280, height: 800 }, ...(token ? { extraHTTPHeaders: { authorization: `Bearer ${token}` } } : {}) });
}

/** Console errors and uncaught exceptions of a page. */
function watch(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console: ${msg.text()}`); });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  return problems;
}

/** Opens `url` again and again (the page may be reloading itself) until `selector` is on it. */
async function reloadUntil(page: Page, url: string, selector: string, what: string): Promise<void> {
  await waitFor(what, async () => {
    await page.goto(url, { waitUntil: 'load', timeout: 30_000 });
    return (await page.locator(selector).count()) > 0;
  }, LONG, 500);
}

/** Clicks an action button (its dialog answered by the page's handler) and returns the line the page says. */
async function act(page: Page, action: string): Promise<string> {
  await page.click(`button.act[data-action="${action}"]`, { timeout: 30_000 });
  const said = await page.waitForSelector('.action-result.ok, .action-result.bad', { timeout: LONG }).catch((err: Error) => {
    throw new Error(`the page never said the answer to '${action}' (reloaded under the request?): ${err.message.split('\n')[0]}`);
  });
  return ((await said.textContent()) ?? '').trim();
}

/**
 * The page of another site: `/form?target=&enctype=` posts an auto-submitted form to target (text/plain
 * carries a body that parses as JSON, the classic trick); `/blank` is an empty page to fetch from.
 */
async function serveForeignPages(): Promise<{ url: (host: string) => string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://foreign.invalid');
    const target = url.searchParams.get('target') ?? '';
    const enctype = url.searchParams.get('enctype') ?? 'text/plain';
    const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
    const field = enctype === 'text/plain'
      ? `<input type="hidden" name="${esc('{"reason":"csrf')}" value="${esc('"}')}">` // body: {"reason":"csrf="}
      : '<input type="hidden" name="reason" value="csrf">';
    const html = url.pathname === '/form'
      ? `<!doctype html><title>another site</title><form method="post" action="${esc(target)}" enctype="${esc(enctype)}">${field}</form><script>document.forms[0].submit()</script>`
      : '<!doctype html><title>another site</title><p>nothing here</p>';
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (host) => `http://${host}:${port}`,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/**
 * From pages of other origins (127.0.0.1 on another port: same site, other origin; localhost: another
 * site), a form post of each kind and a no-cors fetch to the job's pause: each reaches the daemon and
 * is refused, and the job is still not paused once the summaries have been read again.
 */
async function crossSiteRefused(target: { d: Daemon; base: string }, token: string | null): Promise<void> {
  const pause = `${target.base}/api/jobs/${JOB}/pause`;
  const refusedBefore = target.d.logs().filter((l) => l.msg === 'http action refused').length;
  const context = await contextFor(token);
  const page = await context.newPage();
  let attempts = 0;
  try {
    for (const host of ['127.0.0.1', 'localhost']) {
      for (const enctype of ['text/plain', 'application/x-www-form-urlencoded']) {
        const answered = page.waitForResponse((r) => r.url() === pause && r.request().method() === 'POST', { timeout: LONG });
        await page.goto(`${foreign.url(host)}/form?target=${encodeURIComponent(pause)}&enctype=${encodeURIComponent(enctype)}`, { waitUntil: 'load', timeout: LONG });
        const res = await answered;
        attempts++;
        expect(res.status(), `form post (${enctype}) from ${host}: ${await res.text()}`).toBe(403);
        // Chromium says where the post comes from: the first check refuses it.
        expect(await res.text()).toContain(`forbidden: a ${host === 'localhost' ? 'cross-site' : 'same-site'} request cannot take an action`);
      }
      // A fetch in no-cors mode may post a "simple" request (its JSON content type is dropped for text/plain).
      await page.goto(`${foreign.url(host)}/blank`, { waitUntil: 'load', timeout: LONG });
      const answered = page.waitForResponse((r) => r.url() === pause && r.request().method() === 'POST', { timeout: LONG });
      const type = await page.evaluate(async (url) => {
        const res = await fetch(url, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ reason: 'csrf' }) });
        return res.type;
      }, pause);
      expect(type).toBe('opaque');
      expect((await answered).status(), `no-cors fetch from ${host}`).toBe(403);
      attempts++;
    }
  } finally {
    await context.close();
  }
  const at = Date.now();
  // Each attempt was refused by the access check (and logged so), none reached the action.
  await waitFor('the refusals in the daemon log', () => target.d.logs().filter((l) => l.msg === 'http action refused').length - refusedBefore >= attempts, LONG);
  await cacheReadAfter(target.base, token, at);
  expect((await jobState(target.base, token)).paused).toBeNull();
}

// Concurrent: the second test waits out the page's refresh, the first its daemon's cache refreshes.
describe.concurrent('operator actions of a real daemon, in Chromium', () => {
  it('a viewer sees no button and is refused; an operator pauses, resumes, runs and cancels from the page; other sites are refused; the audit trail names the token', async () => {
    const { d, base } = await startDaemon({
      httpTokens: [
        { name: 'ops', role: 'operator', env: 'OPS_TOKEN' },
        { name: 'dash', role: 'viewer', sha256: createHash('sha256').update(DASH).digest('hex') },
      ],
    }, { OPS_TOKEN: OPS });
    const jobUrl = `${base}/jobs/${JOB}`;

    // Without a token: 401; an action path is not a GET.
    expect((await api(base, `/api/jobs/${JOB}`, null)).status).toBe(401);
    expect((await api(base, `/api/jobs/${JOB}/pause`, OPS)).status).toBe(405);

    // 1. The viewer: the page, without a button; every action refused from the page itself.
    {
      const context = await contextFor(DASH);
      const page = await context.newPage();
      const res = await page.goto(jobUrl, { waitUntil: 'load', timeout: LONG });
      expect(res?.status()).toBe(200);
      expect(await page.locator('h1').textContent()).toContain(JOB);
      expect(await page.locator('button').count()).toBe(0);
      expect(await page.locator('.actions').count()).toBe(0);
      const answers = await page.evaluate(async (paths) => Promise.all(paths.map(async (p) => {
        const r = await fetch(p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        return { path: p, status: r.status, error: ((await r.json()) as { error?: string }).error ?? '' };
      })), ACTION_PATHS);
      for (const a of answers) {
        expect(a.status, `${a.path}: ${a.error}`).toBe(403);
        expect(a.error).toContain("the token 'dash' is a viewer");
      }
      await context.close();
    }

    // 3a. Other sites, through the operator's browser (the token sent on every request): refused.
    await crossSiteRefused({ d, base }, OPS);

    // 2. The operator, from the job page's buttons.
    const context = await contextFor(OPS);
    const page = await context.newPage();
    const problems = watch(page);
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.type());
      void (dialog.type() === 'prompt' ? dialog.accept(dialog.message().startsWith('Pause') ? 'db upgrade' : 'stuck upstream') : dialog.accept());
    });
    await page.goto(jobUrl, { waitUntil: 'load', timeout: LONG });
    const shown = async () => page.$$eval('button.act', (bs) => bs.map((b) => b.getAttribute('data-action')));
    expect(await shown()).toEqual(['run', 'pause']);

    // Pause… with a reason.
    expect(await act(page, 'pause')).toMatch(/^Pause: done/);
    await waitFor('the job paused on /api/jobs', async () => (await jobState(base, OPS)).paused?.reason === 'db upgrade', LONG, 250);
    await reloadUntil(page, jobUrl, 'button.act[data-action="resume"]', 'the page showing the job paused');
    expect(await page.locator('h1').textContent()).toContain('paused');
    expect(await shown()).toEqual(['run', 'resume']);

    // Resume.
    expect(await act(page, 'resume')).toMatch(/^Resume: done/);
    await waitFor('the job resumed on /api/jobs', async () => (await jobState(base, OPS)).paused === null, LONG, 250);
    await reloadUntil(page, jobUrl, 'button.act[data-action="pause"]', 'the page showing the job resumed');
    expect(await page.locator('h1').textContent()).not.toContain('paused');

    // Run now: an attempt by hand, running (its body waits a minute unless cancelled).
    expect(await act(page, 'run')).toMatch(/^Run now: done \(/);
    const running = await waitFor('the manual attempt running on /api/runs', async () => (await runsOf(base, OPS)).find((r) => r.trigger === 'manual' && r.status === 'running'), LONG, 250);
    await reloadUntil(page, jobUrl, 'button.act[data-action="cancel"]', 'the page offering to cancel the running attempt');
    expect(await page.locator('h1').textContent()).toContain('running');

    // Cancel running… with a reason: the attempt ends cancelled.
    expect(await act(page, 'cancel')).toMatch(/^Cancel running: done/);
    const cancelled = await waitFor('the attempt recorded cancelled', async () => (await runsOf(base, OPS)).find((r) => r.runId === running.runId && r.status === 'cancelled'), LONG, 250);
    expect(cancelled.error).toMatch(/cancelled by ops/);
    expect(dialogs).toEqual(['prompt', 'confirm', 'confirm', 'prompt']);
    expect(problems).toEqual([]);
    await context.close();

    // 4. The audit trail: each action under the token's name, done; nothing from the other sites.
    const { status, doc } = await api<{ entries: AuditDoc[] }>(base, `/api/audit?job=${JOB}`, OPS);
    expect(status).toBe(200);
    const trail = doc.entries.map((e) => ({ actor: e.actor, action: e.action, result: e.result, reason: e.reason })).reverse();
    expect(trail).toEqual([
      { actor: 'ops', action: 'pause', result: 'done', reason: 'db upgrade' },
      { actor: 'ops', action: 'resume', result: 'done', reason: null },
      { actor: 'ops', action: 'run', result: 'done', reason: null },
      { actor: 'ops', action: 'cancel', result: 'done', reason: 'stuck upstream' },
    ]);
    expect(await d.stop('SIGTERM')).toBe(0);
  });

  it('a token-less loopback daemon refuses the same cross-site posts, and still acts for its own page', async () => {
    const target = await startDaemon(null);
    await crossSiteRefused(target, null);
    expect((await api<{ entries: AuditDoc[] }>(target.base, '/api/audit', null)).doc.entries).toEqual([]);

    // Its own page (same origin, no token) may act: the refusals above were not of every POST. The
    // reason is typed slower than the page's own refresh (every 10 s): the answer is still shown (the
    // refresh that fell due meanwhile no longer reloads the page under the request).
    const context = await contextFor(null);
    const page = await context.newPage();
    const problems = watch(page);
    await page.goto(`${target.base}/jobs/${JOB}`, { waitUntil: 'load', timeout: LONG });
    const loadedAt = Date.now();
    const refreshMs = Number(await page.getAttribute('meta[http-equiv="refresh"]', 'content')) * 1000;
    expect(refreshMs).toBeGreaterThan(0);
    page.on('dialog', (dialog) => {
      setTimeout(() => void dialog.accept('own page'), Math.max(0, loadedAt + refreshMs + 1000 - Date.now()));
    });
    expect(await page.locator('button.act').count()).toBeGreaterThan(0);
    expect(await act(page, 'pause')).toMatch(/^Pause: done/);
    expect(Date.now() - loadedAt).toBeGreaterThan(refreshMs);
    expect(problems).toEqual([]);
    await context.close();
    const { doc } = await api<{ entries: AuditDoc[] }>(target.base, '/api/audit', null);
    expect(doc.entries.map((e) => [e.actor, e.action, e.result, e.reason])).toEqual([['anonymous@actions-node', 'pause', 'done', 'own page']]);
    expect(await target.d.stop('SIGTERM')).toBe(0);
  });
});
