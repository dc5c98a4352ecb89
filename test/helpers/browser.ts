/**
 * Headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core, which downloads no browser
 * of its own) pointed at a status page by its base URL: a fixture server now, a real daemon later.
 * Records what a user would notice: console errors, uncaught exceptions, failed requests.
 */
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { PageHook } from '../../src/http/page/index.js';

export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];
/** Screenshots land here (gitignored), for a person to look at after a run. */
export const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));

export const LAPTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
}

export interface Visit {
  page: Page;
  /** Console errors, page errors and failed or 4xx/5xx requests seen since the page was opened. */
  problems: string[];
  close(): Promise<void>;
}

/** A fresh context (own viewport, no shared cache) on `baseUrl + path`, waited until `load`. */
export async function visit(browser: Browser, baseUrl: string, path: string, viewport = LAPTOP): Promise<Visit> {
  const context = await browser.newContext({ viewport, isMobile: viewport.width < 600, hasTouch: viewport.width < 600 });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console: ${msg.text()}`); });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()} ${req.failure()?.errorText ?? ''}`));
  page.on('response', (res) => { if (res.status() >= 400) problems.push(`HTTP ${res.status()}: ${res.url()}`); });
  await page.goto(new URL(path, baseUrl).toString(), { waitUntil: 'load', timeout: 60_000 });
  return { page, problems, close: () => context.close() };
}

/** A full-page PNG under test-artifacts/; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** The summary's tiles as shown: `{ nodes: '2', failures: '3', ... }`. */
export async function summaryTiles(page: Page): Promise<Record<string, string>> {
  return page.$$eval('[data-summary]', (tiles) => Object.fromEntries(tiles.map((t) => [t.getAttribute('data-summary'), (t.querySelector('.value')?.textContent ?? '').trim()])));
}

/** The job names in the jobs table, in the order shown. */
export async function jobNames(page: Page): Promise<string[]> {
  return page.$$eval('table.jobs tbody tr', (rows) => rows.map((r) => (r.querySelector('td.name')?.textContent ?? '').trim()));
}

/** Clicks a filter link (a plain link: the server filters) and waits for the page it leads to. */
export async function clickFilter(page: Page, filter: string): Promise<void> {
  await Promise.all([page.waitForURL((url) => url.searchParams.get('filter') === filter, { timeout: 60_000 }), page.click(`nav.filters a[data-filter="${filter}"]`)]);
  await page.waitForLoadState('load');
}

/** Clicks a job's name in the jobs table and waits for its page. */
export async function openJob(page: Page, name: string): Promise<void> {
  await Promise.all([page.waitForURL((url) => url.pathname === `/jobs/${encodeURIComponent(name)}`, { timeout: 60_000 }), page.getByRole('link', { name, exact: true }).click()]);
  await page.waitForLoadState('load');
}

/** The job page's tables as text, row by row. */
export async function tableRows(page: Page, table: 'runs' | 'periods'): Promise<string[][]> {
  return page.$$eval(`table.${table} tbody tr`, (rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => (td.textContent ?? '').trim())));
}

/** How far the document is wider than the viewport (0: no horizontal scroll of the page itself). */
export async function horizontalOverflow(page: Page): Promise<number> {
  // A string: the type-check has no DOM library.
  return page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
}

/** Serves a page hook on 127.0.0.1 (404 for what it does not answer), counting the requests per path. */
export async function servePage(hook: PageHook): Promise<{ baseUrl: string; hits: Map<string, number>; close(): Promise<void> }> {
  const hits = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    hits.set(url.pathname, (hits.get(url.pathname) ?? 0) + 1);
    hook(url).then((answer) => {
      if (!answer) { res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n'); return; }
      res.writeHead(answer.status, { 'content-type': 'text/html; charset=utf-8' }).end(answer.html);
    }, () => res.writeHead(500).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}`, hits, close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}
