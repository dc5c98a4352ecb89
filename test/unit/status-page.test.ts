import { describe, expect, it } from 'vitest';
import { wallTime, wallTimeByParts } from '../../src/http/page/format.js';
import { createPageHandler } from '../../src/http/page/index.js';
import { FIXTURE_NOW, FixtureReader, HOSTILE_ERROR } from '../helpers/status-fixtures.js';

const page = createPageHandler(new FixtureReader(), { now: () => FIXTURE_NOW, refreshSeconds: 15 });
const get = (path: string) => page(new URL(path, 'http://127.0.0.1'));

/** The job names of the jobs table's rows, in order. */
function jobRows(html: string): string[] {
  return [...html.matchAll(/<tr data-job="([^"]+)">/g)].map((m) => m[1]!);
}

describe('status page handler', () => {
  it('renders / with the summary, every job, the nodes, and a refresh of the configured period', async () => {
    const res = await get('/');
    expect(res?.status).toBe(200);
    const html = res!.html;
    expect(html).toContain('<meta http-equiv="refresh" content="15">');
    expect(html).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    expect(jobRows(html)).toEqual(['berlin-nightly', 'fresh-job', 'long-export', 'order-sync', 'paused-report', 'retrying']);
    expect(html).toMatch(/data-summary="failures"><div class="label">failures, 24 h<\/div><div class="value">3</);
    expect(html).toContain('data-node="node-c"');
    // No external asset: no stylesheet link, no script src, no image.
    expect(html).not.toMatch(/<link rel="stylesheet"|<script src|<img/);
  });

  it('escapes errors, reasons and invalid-file problems written by users', async () => {
    const home = (await get('/'))!.html;
    const job = (await get('/jobs/order-sync'))!.html;
    for (const html of [home, job]) {
      expect(html).not.toContain('<script>window.__injected');
      expect(html).not.toContain('<img src=x');
      expect(html.match(/<script>/g)).toHaveLength(1); // the page's own
    }
    expect(job).toContain('&lt;script&gt;window.__injected = true&lt;/script&gt;');
    expect(home).toContain('migration &lt;b&gt;week&lt;/b&gt;');
    expect(HOSTILE_ERROR).toContain('\n');
    expect(job).not.toContain('at stack (line 2)'); // the first line only
  });

  it('filters on the server, so plain links work without JavaScript', async () => {
    expect(jobRows((await get('/?filter=failing'))!.html)).toEqual(['order-sync', 'retrying']);
    expect(jobRows((await get('/?filter=never'))!.html)).toEqual(['fresh-job']);
    expect(jobRows((await get('/?filter=paused'))!.html)).toEqual(['paused-report']);
    expect(jobRows((await get('/?filter=running'))!.html)).toEqual(['long-export']);
    expect((await get('/'))!.html).toContain('<a href="/?filter=failing" data-filter="failing">failing <span class="count">2</span></a>');
    const bad = await get('/?filter=broken');
    expect(bad?.status).toBe(400);
    expect(bad?.html).toContain('is not one of failing, never, paused, running');
  });

  it('shows times in the job\'s zone with relative times, and UTC on hover', async () => {
    const html = (await get('/jobs/berlin-nightly'))!.html;
    expect(html).toContain('<time title="2026-03-26T02:30:00.000Z (UTC)">2026-03-26 <span>03:30:00 CET</span></time> <span class="rel">in 16h</span>');
    // One DST mark, on the first period after the change.
    expect(html.match(/data-dst/g)).toHaveLength(1);
    expect(html).toMatch(/2026-03-29 <span>03:30:00 CEST<\/span><\/time>.*<code>\+02:00<\/code>.*DST change: UTC offset \+01:00 -&gt; \+02:00/);
    expect(html.match(/<tr data-period=/g)).toHaveLength(30);
  });

  it('answers a job page by its URL-encoded name, 404 for an unknown job, and null for paths that are not the page\'s', async () => {
    expect((await get('/jobs/berlin%2Dnightly'))?.status).toBe(200);
    const missing = await get('/jobs/%3Cnope%3E');
    expect(missing?.status).toBe(404);
    expect(missing?.html).toContain('No job named <code>&lt;nope&gt;</code>');
    expect((await get('/jobs/%E0%A4%A'))?.status).toBe(400);
    for (const path of ['/api/jobs', '/metrics', '/jobs/', '/jobs/a/b', '/favicon.ico']) expect(await get(path)).toBeNull();
  });

  it('shows the parts it could read when the store is away, without the error text', async () => {
    const reader = new FixtureReader();
    reader.jobs = async () => { throw new Error('connect ECONNREFUSED postgres://app@db:5432'); };
    const html = (await createPageHandler(reader, { now: () => FIXTURE_NOW })(new URL('http://x/')))!.html;
    expect(html).toContain('data-summary="nodes"');
    expect(html).toContain('could not be read just now');
    expect(html).not.toContain('ECONNREFUSED');
    expect(html).toContain('<meta http-equiv="refresh" content="10">');
  });

  it('refuses a refresh period that is not a whole number of seconds', () => {
    expect(() => createPageHandler(new FixtureReader(), { refreshSeconds: 1.5 })).toThrow('refreshSeconds is 1.5, expected a whole number of seconds, 0 or more');
    expect(createPageHandler(new FixtureReader(), { refreshSeconds: 0 })).toBeTypeOf('function');
  });
});

describe('wall time in a zone', () => {
  it('reads the same through format() as through formatToParts(), winter and summer, whole and half-hour offsets', () => {
    for (const instant of [new Date('2026-01-15T12:34:56Z'), new Date('2026-07-15T23:59:59Z')]) {
      for (const zone of ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kolkata', 'Australia/Sydney']) {
        expect(wallTime(instant, zone)).toBe(wallTimeByParts(instant, zone));
      }
    }
    expect(wallTime(new Date('2026-07-15T23:59:59Z'), 'America/New_York')).toBe('2026-07-15 19:59:59 GMT-4');
    expect(wallTime(new Date('2026-01-15T12:34:56Z'), 'Europe/Berlin')).toBe('2026-01-15 13:34:56 CET');
  });
});
