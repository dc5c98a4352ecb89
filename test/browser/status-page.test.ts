/**
 * The status page in real headless Chromium: loads clean, shows the counts, filters by plain links,
 * leads to a job page with its attempts and next periods (DST marked), fits a phone, refreshes.
 * Served from a fixture reader for now; the Chromium part is in test/helpers/browser.ts.
 */
import { statSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPageHandler } from '../../src/http/page/index.js';
import {
  LAPTOP, PHONE, clickFilter, horizontalOverflow, jobNames, launchChromium, openJob, screenshot, servePage, summaryTiles, tableRows, visit,
} from '../helpers/browser.js';
import { expectNoOverflow, overflowOffenders } from '../helpers/overflow.js';
import { FIXTURE_NOW, FixtureReader, LONG_INVALID, LONG_NODES, fixtureJobs, longContentJobs } from '../helpers/status-fixtures.js';

let browser: Browser;
let server: Awaited<ReturnType<typeof servePage>>;

beforeAll(async () => {
  // A refresh longer than the test, so that no reload lands between a click and its assertion.
  server = await servePage(createPageHandler(new FixtureReader(), { now: () => FIXTURE_NOW, refreshSeconds: 600 }));
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

function expectWritten(path: string): void {
  expect(statSync(path).size).toBeGreaterThan(1000);
}

describe('status page in Chromium', () => {
  it('loads without console errors or failed requests and shows the summary counts and every job', async () => {
    const { page, problems, close } = await visit(browser, server.baseUrl, '/');
    expect(await page.title()).toBe('status · cluster-cron');
    expect(await summaryTiles(page)).toMatchObject({
      nodes: '2', redis: '! degraded', store: '✓ ok', jobs: '6 + 1 invalid', running: '1', paused: '1', failures: '3', missed: '1',
    });
    expect(await jobNames(page)).toEqual(['berlin-nightly', 'fresh-job', 'long-export', 'order-sync', 'paused-report', 'retrying']);
    // The error with markup in it is shown as text and never ran.
    expect(await page.locator('tr[data-job="order-sync"] .error').textContent()).toBe('<script>window.__injected = true</script><img src=x onerror="window.__injected=true">boom');
    expect(await page.evaluate('typeof window.__injected')).toBe('undefined');
    expect(await page.$$eval('tr[data-node]', (rows) => rows.map((r) => (r.querySelectorAll('td')[1]?.textContent ?? '').trim()))).toEqual(['✓ running', '✓ running', '– stopped', '✗ silent']);
    expectWritten(await screenshot(page, 'status-page-laptop'));
    await expectNoOverflow(page, '/', { scroll: 'none' });
    expect(problems).toEqual([]);
    await close();
  });

  it('filters failing jobs by a plain link, then a click on a job name opens its attempts and next 10 periods with the DST change marked', async () => {
    const { page, problems, close } = await visit(browser, server.baseUrl, '/');
    await clickFilter(page, 'failing');
    expect(await jobNames(page)).toEqual(['order-sync', 'retrying']);
    expect(await page.locator('nav.filters a[aria-current="page"]').getAttribute('data-filter')).toBe('failing');
    expectWritten(await screenshot(page, 'status-page-failing'));
    await expectNoOverflow(page, '/?filter=failing', { scroll: 'none' });

    await clickFilter(page, 'never');
    expect(await jobNames(page)).toEqual(['fresh-job']);
    await Promise.all([page.waitForURL((url) => url.search === '', { timeout: 60_000 }), page.click('nav.filters a[data-filter="all"]')]);
    await openJob(page, 'berlin-nightly');
    expect(await page.locator('h1').textContent()).toBe('berlin-nightly');
    const runs = await tableRows(page, 'runs');
    expect(runs).toHaveLength(30);
    expect(runs[0]![0]).toContain('2026-03-25 03:30:00 CET');
    expect(runs[3]!.join(' | ')).toMatch(/✗ failed.*upstream refused$/);
    const periods = await tableRows(page, 'periods');
    expect(periods).toHaveLength(10);
    expect(periods.map((row) => row[2])).toEqual(['+01:00', '+01:00', '+01:00', ...Array(7).fill('+02:00')]);
    const marked = periods.flatMap((row, i) => (row[4] ? [[i, row[4]]] : []));
    expect(marked).toEqual([[3, '⇅ DST change: UTC offset +01:00 -> +02:00']]);
    expect(periods[3]![1]).toContain('2026-03-29 03:30:00 CEST');
    expectWritten(await screenshot(page, 'status-page-job'));
    await expectNoOverflow(page, '/jobs/berlin-nightly', { scroll: 'none' });
    expect(problems).toEqual([]);
    await close();
  });

  it('fits a phone (390×844): nothing overflows its box or the page on / and on a job page, wide tables scroll in their wrapper', async () => {
    for (const [path, name] of [['/', 'status-page-phone'], ['/jobs/order-sync', 'status-page-job-phone']] as const) {
      const { page, problems, close } = await visit(browser, server.baseUrl, path, PHONE);
      expect(await page.evaluate('window.innerWidth')).toBe(PHONE.width);
      expect(await horizontalOverflow(page)).toBe(0);
      await expectNoOverflow(page, path);
      expectWritten(await screenshot(page, name));
      expect(problems).toEqual([]);
      await close();
    }
  });

  it("opens an attempt's log from its row on the job page: every line in order, long lines wrapped, nothing overflows on a laptop or a phone", async () => {
    for (const viewport of [LAPTOP, PHONE]) {
      const { page, problems, close } = await visit(browser, server.baseUrl, '/jobs/order-sync', viewport);
      const link = page.locator('table.runs tbody tr').first().locator('a[title="this attempt\'s log"]');
      const href = await link.getAttribute('href');
      expect(href).toMatch(/^\/runs\/\d+\/log$/);
      await Promise.all([page.waitForURL(`**${href}`), link.click()]);
      expect(await page.locator('h1').textContent()).toBe('Log of order-sync, attempt 1');
      const lines = await page.$$eval('pre.runlog > span', (spans) => spans.map((s) => (s.textContent ?? '').trim()));
      expect(lines).toHaveLength(5);
      expect(lines[0]).toMatch(/ INFO {2}starting the export of <b>orders<\/b> \{"batch":1,"password":"\*\*\*"\}$/);
      expect(lines[1]).toContain('[stdout] a line with no space to break at');
      expect(lines[2]).toMatch(/WARN {2}\[stderr\] retrying/);
      expect(lines[3]).toContain('[note] 1200 line(s) (98765 bytes) cut here');
      expect(await page.evaluate('document.querySelector("pre.runlog b")')).toBeNull();
      await expectNoOverflow(page, `${href} at ${viewport.width}px`, { scroll: 'none' });
      expectWritten(await screenshot(page, `status-page-run-log-${viewport === PHONE ? 'phone' : 'laptop'}`));
      expect(problems).toEqual([]);
      await close();
    }
  });

  it('shows a long jobs table in chunks whose columns line up with the header, on a laptop and on a phone', async () => {
    // 130 jobs: three chunks of at most JOB_CHUNK_ROWS (50), each its own table, the later ones off screen.
    const base = fixtureJobs();
    const many = Array.from({ length: 130 }, (_, i) => ({ ...base[i % base.length]!, name: `job-${String(i).padStart(3, '0')}` }));
    const big = await servePage(createPageHandler(new FixtureReader(many), { now: () => FIXTURE_NOW, refreshSeconds: 600 }));
    try {
      for (const viewport of [undefined, PHONE]) {
        const { page, problems, close } = await visit(browser, big.baseUrl, '/', viewport);
        expect(await jobNames(page)).toEqual(many.map((j) => j.name));
        // A string, as the browser's globals are not in the test's types.
        expect(await page.evaluate(`[...document.querySelectorAll('.chunk')].map((c) => [getComputedStyle(c).contentVisibility, c.querySelectorAll('tbody tr').length, c.querySelectorAll('thead').length])`)).toEqual([['auto', 50, 1], ['auto', 50, 0], ['auto', 30, 0]]);
        await page.locator('tr[data-job="job-129"]').scrollIntoViewIfNeeded();
        // Each visible cell of the last row starts and ends where its header does.
        const edges = (selector: string) => page.$$eval(selector, (cells) => cells.filter((c) => c.getBoundingClientRect().width > 0).map((c) => { const r = c.getBoundingClientRect(); return [Math.round(r.left), Math.round(r.right)]; }));
        const header = await edges('table.jobs thead th');
        expect(header.length).toBe(viewport ? 5 : 8);
        expect(await edges('tr[data-job="job-129"] td')).toEqual(header);
        expect(await horizontalOverflow(page)).toBe(0);
        await expectNoOverflow(page, '/ (130 jobs)', { scroll: viewport ? 'wrappers' : 'none' });
        expect(problems).toEqual([]);
        await close();
      }
    } finally {
      await big.close();
    }
  });

  it('fits a laptop (1280 px) and a phone (390 px) with long content: nothing overflows its box or the page, wide tables scroll inside their wrapper on a phone only', async () => {
    // Long names, expressions, zones, errors, reasons, node ids and hosts; Redis not configured.
    const jobs = longContentJobs();
    const long = await servePage(createPageHandler(new FixtureReader(jobs, () => FIXTURE_NOW, { redis: 'none', nodes: LONG_NODES, invalid: LONG_INVALID }), { now: () => FIXTURE_NOW, refreshSeconds: 600 }));
    // The store away: the sections that could not be read say so in a long badge; Redis down.
    const away = new FixtureReader(fixtureJobs(), () => FIXTURE_NOW, { redis: 'down' });
    away.jobs = async () => { throw new Error('store away'); };
    away.nodes = async () => { throw new Error('store away'); };
    const down = await servePage(createPageHandler(away, { now: () => FIXTURE_NOW, refreshSeconds: 600 }));
    try {
      const pages = [
        // The job pages of the long jobs (one per run status); the fixture's own are checked above.
        ...['/', '/?filter=paused', ...jobs.slice(fixtureJobs().length).map((j) => `/jobs/${encodeURIComponent(j.name)}`)].map((path) => [long.baseUrl, path] as const),
        [down.baseUrl, '/'] as const,
      ];
      for (const viewport of [LAPTOP, PHONE]) {
        const width = viewport === PHONE ? 'phone' : 'laptop';
        for (const [base, path] of pages) {
          const { page, problems, close } = await visit(browser, base, path, viewport);
          // Every run's output opened, as a click on `output` would.
          await page.evaluate(`document.querySelectorAll('details').forEach((d) => { d.open = true; })`);
          const where = `${path}${base === down.baseUrl ? ' (store away)' : ''}`;
          if (path === '/' && base === long.baseUrl) {
            expect(await summaryTiles(page)).toMatchObject({ redis: '– none (no Redis configured)' });
            expectWritten(await screenshot(page, `status-page-long-${width}`));
          }
          if (path === `/jobs/${jobs.at(-7)!.name}`) expectWritten(await screenshot(page, `status-page-long-job-${width}`));
          if (base === down.baseUrl) expectWritten(await screenshot(page, `status-page-away-${width}`));
          await expectNoOverflow(page, where, { scroll: viewport === PHONE ? 'wrappers' : 'none' });
          expect(problems).toEqual([]);
          await close();
        }
      }
    } finally {
      await long.close();
      await down.close();
    }
  });

  it('the overflow check names what overflows: an ellipsis-cut badge, text spilling out of its box, an element past the viewport; a scrolling wrapper only when nothing may scroll', async () => {
    const sample = await servePage(async () => ({ status: 200, html: `<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1"><style>
      body{margin:0;font:14px sans-serif} .card{width:100px} .cut{display:inline-block;max-width:100%;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
      .wrap{overflow-x:auto;width:200px} .wrap table{width:400px} .spill{width:50px;white-space:nowrap} .far{margin-left:1000px;width:200px}
      </style></head><body>
      <div class="card"><span class="cut" id="badge">– none (no Redis configured)</span></div>
      <div class="wrap" id="wrapper"><table><tr><td>a table wider than its wrapper, which scrolls</td></tr></table></div>
      <div class="spill" id="spill">a line that spills out of its box</div>
      <div class="fits">a line that fits</div>
      <div class="far" id="far">past the right edge</div>
      </body></html>` }));
    try {
      const { page, close } = await visit(browser, sample.baseUrl, '/', PHONE);
      const offenders = await overflowOffenders(page);
      expect(offenders.find((o) => o.startsWith('document:'))).toBe(`document: 1200px wide in a ${PHONE.width}px viewport (it scrolls sideways)`);
      expect(offenders.find((o) => o.startsWith('span#badge'))).toMatch(/^span#badge: content \d+px wide in a \d+px box, its text cut by an ellipsis, text "– none \(no Redis configured\)"$/);
      expect(offenders.find((o) => o.startsWith('div#spill'))).toMatch(/^div#spill: content \d+px wide in a 50px box, text "a line that spills out of its box"$/);
      expect(offenders.find((o) => o.startsWith('div#far'))).toBe('div#far: spans x 1000px..1200px (200px), outside the viewport at 0px..390px, text "past the right edge"');
      expect(offenders).toHaveLength(4);
      // On a laptop's terms nothing may scroll sideways, not even a wrapper made for it.
      expect((await overflowOffenders(page, { scroll: 'none' })).find((o) => o.startsWith('div#wrapper'))).toMatch(/^div#wrapper: content 400px wide in a 200px box \(it scrolls sideways\)/);
      await expect(expectNoOverflow(page, 'the sample')).rejects.toThrow(/^the sample at 390px: 4 element\(s\) overflow\n  - document: /);
      await close();
    } finally {
      await sample.close();
    }
  });

  it('shows a 404 page for an unknown job', async () => {
    const { page, problems, close } = await visit(browser, server.baseUrl, '/jobs/no-such-job');
    expect(await page.locator('h1').textContent()).toBe('No job named no-such-job');
    // Chromium reports the 404 of the document itself (as a response and on the console), nothing else.
    expect(problems).toContain(`HTTP 404: ${server.baseUrl}/jobs/no-such-job`);
    expect(problems.filter((p) => !p.includes('404'))).toEqual([]);
    await close();
  });

  it('reloads by itself at the configured period', async () => {
    const fast = await servePage(createPageHandler(new FixtureReader(), { now: () => FIXTURE_NOW, refreshSeconds: 1 }));
    try {
      const { page, problems, close } = await visit(browser, fast.baseUrl, '/');
      // Two reloads, each seen to its load event; closing right after one leaves a second before the next.
      await new Promise<void>((resolve, reject) => {
        let loads = 0;
        const timer = setTimeout(() => reject(new Error(`${loads} reloads in 30 s, expected 2 at 1 s each`)), 30_000);
        page.on('load', () => { if (++loads === 2) { clearTimeout(timer); resolve(); } });
      });
      expect(fast.hits.get('/')).toBeGreaterThanOrEqual(3);
      expect([...fast.hits.keys()]).toEqual(['/']); // nothing else fetched, not even a favicon
      expect(problems).toEqual([]);
      await close();
    } finally {
      await fast.close();
    }
  });
});
