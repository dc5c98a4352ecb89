/**
 * The status page of a real daemon (`bin/scheduler run`, SQLite, its HTTP server on a free port) in
 * headless Chromium: the page a user opens, over rows the daemon's own runs wrote. It loads without
 * console errors or failed requests, the failing filter shows the failing job only, a paused job is
 * marked, and a click on a job leads to its attempts; nothing overflows at a laptop's or a phone's
 * width (test/helpers/overflow.ts). Screenshots go to test-artifacts/.
 */
import { statSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { jobSource } from '../helpers/job-sources.js';
import { PHONE, clickFilter, jobNames, launchChromium, openJob, screenshot, summaryTiles, tableRows, visit } from '../helpers/browser.js';
import { expectNoOverflow } from '../helpers/overflow.js';
import { waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';

const node = singleNode('cron-page-', 'page-node');
let browser: Browser;

beforeAll(async () => {
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
});

describe('status page of a real daemon, in Chromium', () => {
  it('shows the runs the daemon recorded: failing filter, the paused job, a click through to a job page', async () => {
    const ws = node.workspace();
    // Even and odd seconds. The summaries are read again a second after a run ends, so the reads can
    // lock onto the instants, where one job's next attempt is always claimed ahead and running: what
    // it last came to is then its newest attempt that ended (`lastEnded`), which the page shows.
    ws.writeJob('steady.mjs', jobSource(`schedule: '*/2 * * * * *',`));
    ws.writeJob('broken.mjs', jobSource(`schedule: '1-59/2 * * * * *',`, `throw new Error('upstream <b>refused</b>');`));
    ws.writeJob('yearly.mjs', jobSource(`schedule: '@yearly', timezone: 'Asia/Shanghai',`));
    ws.writeJob('held.mjs', jobSource(`schedule: '* * * * * *',`));
    const paused = await runCli(['pause', 'held', '--reason', 'db upgrade'], { cwd: ws.dir, env: node.envOf(ws) });
    expect(paused.code, paused.stderr).toBe(0);

    const d = node.start(ws, { SCHEDULER_HTTP: '127.0.0.1:0' });
    const base = await waitFor('http server listening', () => d.logs().find((l) => l.msg === 'http server listening')?.url as string | undefined, 60_000);
    // Runs of both kinds recorded, and the summaries cache (refreshed every 5 s) has read them.
    let seen: unknown = 'no answer yet';
    await waitFor('a success and a failure on /api/jobs', async () => {
      const { jobs } = (await (await fetch(`${base}/api/jobs`)).json()) as { jobs: Array<{ name: string; lastEnded: { status: string } | null }> };
      const status = new Map(jobs.map((j) => [j.name, j.lastEnded?.status]));
      seen = Object.fromEntries(status);
      return status.get('steady') === 'succeeded' && status.get('broken') === 'failed';
    }, 60_000, 500).catch((err: Error) => {
      // Self-explaining: what /api/jobs said last, and what the daemon logged.
      const logs = d.logs().filter((l) => Number(l.level) >= 40).slice(-20);
      throw new Error(`${err.message}; last /api/jobs statuses ${JSON.stringify(seen)}; daemon exit ${d.proc.exitCode}; its warnings: ${JSON.stringify(logs)}; stderr: ${d.errors.slice(-2000)}`);
    });

    const { page, problems, close } = await visit(browser, base, '/');
    expect(await jobNames(page)).toEqual(['broken', 'held', 'steady', 'yearly']);
    expect(await page.locator('tr[data-job="held"]').textContent()).toContain('db upgrade');
    expect(statSync(await screenshot(page, 'daemon-status-page')).size).toBeGreaterThan(1000);
    // Issue 22: at a laptop's width the Redis card's badge (no Redis here) and the jobs table fit.
    expect(await summaryTiles(page)).toMatchObject({ redis: '– none (no Redis configured)' });
    await expectNoOverflow(page, '/ (daemon)', { scroll: 'none' });

    await clickFilter(page, 'failing');
    expect(await jobNames(page)).toEqual(['broken']);
    expect(await page.locator('tr[data-job="broken"] .error').textContent()).toContain('upstream <b>refused</b>');
    await clickFilter(page, 'paused');
    expect(await jobNames(page)).toEqual(['held']);
    await clickFilter(page, 'never');
    expect(await jobNames(page)).toEqual(['yearly']);

    await Promise.all([page.waitForURL((url) => url.search === '', { timeout: 60_000 }), page.click('nav.filters a[data-filter="all"]')]);
    await openJob(page, 'steady');
    // The title names the job; an every-second job may be mid-run, which the title badges.
    expect(await page.locator('h1').textContent()).toMatch(/^steady( ▶ running)?$/);
    // The newest row may be the current second's attempt, claimed ahead and still running: any succeeded one.
    const runs = await tableRows(page, 'runs');
    expect(runs.length).toBeGreaterThan(0);
    expect(runs.map((r) => r.join(' | ')).filter((r) => /succeeded/.test(r)).length, runs.map((r) => r.join(' | ')).join('\n')).toBeGreaterThan(0);
    expect(await tableRows(page, 'periods')).toHaveLength(10);
    expect(statSync(await screenshot(page, 'daemon-job-page')).size).toBeGreaterThan(1000);
    await expectNoOverflow(page, '/jobs/steady (daemon)', { scroll: 'none' });
    expect(problems).toEqual([]);
    await close();

    // And on a phone, where the wide tables scroll inside their wrappers.
    for (const [path, name] of [['/', 'daemon-status-page-phone'], ['/jobs/broken', 'daemon-job-page-phone']] as const) {
      const phone = await visit(browser, base, path, PHONE);
      expect(statSync(await screenshot(phone.page, name)).size).toBeGreaterThan(1000);
      await expectNoOverflow(phone.page, `${path} (daemon)`);
      expect(phone.problems).toEqual([]);
      await phone.close();
    }
    expect(await d.stop('SIGTERM')).toBe(0);
  });
});
