/**
 * `list`, `history` and `nodes` as people read them: every line within 100 columns whatever the names, times
 * in the job's zone (UTC with --utc) with how far from now, and every field history promises.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { historyText } from '../../src/cli/history.js';
import { nodesText } from '../../src/cli/nodes.js';
import { datedText, whenText } from '../../src/cli/views.js';
import type { ListedNode, RunRecord } from '../../src/store/types.js';
import { runCli } from '../helpers/cli.js';
import { removeTempDirs, tempDir } from './_fixtures.js';

afterAll(removeTempDirs);

const LONG_NAME = 'settlement-of-the-previous-business-day-x'; // 41 characters
const now = new Date('2026-12-01T08:00:00Z');

function run(over: Partial<RunRecord>): RunRecord {
  const scheduledAt = over.scheduledAt ?? new Date('2026-12-01T06:00:00Z');
  return {
    id: '1', job: LONG_NAME, scheduledAt, periodKey: `${over.job ?? LONG_NAME}@${scheduledAt.toISOString()}`, shard: 0, attempt: 1,
    trigger: 'catch-up', status: 'failed', reason: null, nodeId: 'a-node-name-that-is-far-too-long-to-print-whole-1234',
    startedAt: new Date('2026-12-01T06:00:00.100Z'), claimedAt: new Date('2026-12-01T06:00:00.050Z'), runAt: null,
    finishedAt: new Date('2026-12-01T06:00:03.350Z'), durationMs: 3250, heartbeatAt: null, leaseMs: 30_000, result: null, resultNote: null,
    error: `Error: ${'the upstream refused the settlement batch because '.repeat(4)}\n    at stack`, errorStack: null, ...over,
  };
}

describe('history text', () => {
  const zones: Record<string, string> = { [LONG_NAME]: 'Asia/Kolkata', short: 'Asia/Shanghai' };
  const view = { now, zoneOf: (job: string) => zones[job] ?? 'UTC' };

  it('fits 100 columns and shows job, period, attempt, trigger, status, node, started, finished, duration and error', () => {
    const text = historyText([run({})], view);
    const lines = text.split('\n');
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(100);
    expect(lines[0]).toMatch(/^JOB +PERIOD +ATTEMPT +TRIGGER +STATUS +DURATION$/);
    // The name cut to 30 with an ellipsis; the period in Kolkata's time with its offset.
    expect(lines[1]).toMatch(/^settlement-of-the-previous-bu… {2}12-01 11:30:00\+05:30 {2}1 +catch-up {2}failed {2}3\.25s$/);
    expect(lines[2]).toBe('  node a-node-name-that-is-far-too-l… · started 12-01 11:30:00 (1h ago) · finished 12-01 11:30:03');
    expect(lines[3]).toMatch(/^ {2}error: Error: the upstream refused .*…$/);
    expect(lines[3]).toHaveLength(100);
  });

  it('a pending attempt shows when it is due; a skipped one its reason; a removed job is in UTC; the zone of --utc is UTC', () => {
    const pending = run({ job: 'short', attempt: 2, status: 'pending', runAt: new Date('2026-12-01T08:03:00Z'), finishedAt: null, durationMs: null, error: null });
    const skipped = run({ job: 'gone', status: 'skipped', reason: 'coalesced', durationMs: null, error: null, trigger: 'schedule' });
    const lines = historyText([pending, skipped], view).split('\n');
    expect(lines[1]).toMatch(/^short +12-01 14:00:00\+08 +2 +catch-up +pending$/);
    expect(lines[2]).toMatch(/^ {2}node \S+ · due 12-01 16:03:00 \(in 3m\)$/);
    expect(lines[3]).toMatch(/^gone +12-01 06:00:00Z +1 +schedule +skipped$/);
    // Details that do not fit the line go on the next one.
    expect(lines.slice(4)).toEqual([expect.stringMatching(/^ {2}node \S+ · started 12-01 06:00:00 \(1h ago\) · finished 12-01 06:00:03$/), '  reason coalesced']);
    const utc = historyText([pending], { now, zoneOf: () => 'UTC' }).split('\n');
    expect(utc[1]).toMatch(/^short +12-01 06:00:00Z /);
    expect(utc[2]).toContain('due 12-01 08:03:00 (in 3m)');
  });
});

describe('list text', () => {
  it('fits 100 columns with a long name, expression and zone; next and last in the job\'s zone, or UTC with --utc', async () => {
    const dir = join(tempDir('cron-unit-text-'), 'jobs');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a.mjs'), `export default { name: '${LONG_NAME}', schedule: '0 0,15,30,45 9-17 * * 1-5', timezone: 'America/Argentina/Buenos_Aires', retries: 3, timeout: '10m', async run() {} };`);
    writeFileSync(join(dir, 'b.mjs'), `export default { name: 'tokyo-midnight', schedule: '@daily', timezone: 'Asia/Tokyo', async run() {} };`);
    const store = `sqlite:${join(tempDir('cron-unit-text-store-'), 's.db')}`;
    const local = await runCli(['list', '-n', '20', '--jobs', dir], { env: { SCHEDULER_STORE: store }, timeoutMs: 30_000 });
    expect(local.code, local.stderr).toBe(0);
    const lines = local.stdout.trimEnd().split('\n');
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(100);
    expect(lines.find((l) => l.startsWith('settlement-of-the-previous-bu… '))).toBeDefined();
    const tokyo = lines.find((l) => l.startsWith('tokyo-midnight '))!;
    // (With the year on the last day of a year: the next midnight is in the next one.)
    expect(tokyo).toMatch(/ @daily +Asia\/Tokyo +(?:\d{4}-)?\d\d-\d\d 00:00:00 \(in \d+[smh]\)$/);
    expect(lines[lines.indexOf(tokyo) + 1]).toBe('  last - · overlap=skip catchUp=15m');

    // The cut expression and zone are printed whole on the row's next line.
    const long = lines.indexOf(lines.find((l) => l.startsWith('settlement-of-the-previous-bu… '))!);
    expect(lines[long + 1]).toBe(`  job ${LONG_NAME} · schedule 0 0,15,30,45 9-17 * * 1-5`);
    expect(lines[long + 2]).toBe('  zone America/Argentina/Buenos_Aires');

    const utc = await runCli(['list', '--utc', '--jobs', dir], { env: { SCHEDULER_STORE: store }, timeoutMs: 30_000 });
    expect(utc.code, utc.stderr).toBe(0);
    expect(utc.stdout).toMatch(/^JOB +SCHEDULE +TIMEZONE +NEXT \(UTC\)$/m);
    expect(utc.stdout).toMatch(/^tokyo-midnight +@daily +Asia\/Tokyo +(?:\d{4}-)?\d\d-\d\d 15:00:00 \(in \d+[smh]\)$/m);
  });

  it('fits 100 columns with an invalid file, a 6-field expression and a long zone: problems wrapped without the path, cut cells whole below', async () => {
    const dir = join(tempDir('cron-unit-text-'), 'jobs');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a.mjs'), `export default { name: 'every-third-second', schedule: '*/3 * * * * *', timezone: 'America/Argentina/Buenos_Aires', async run() {} };`);
    writeFileSync(join(dir, 'b.mjs'), `export default { name: 'nightly-report-for-the-finance-team', schedule: '0 0,15,30,45 9-17 * * 1-5', timezone: 'America/Indiana/Indianapolis', async run() {} };`);
    writeFileSync(join(dir, 'bad.mjs'), `export default { name: 'bad', schedule: '* * * *', timezone: 'Mars/Olympus', async run() {} };`);
    const store = `sqlite:${join(tempDir('cron-unit-text-store-'), 's.db')}`;
    const text = await runCli(['list', '--jobs', dir], { env: { SCHEDULER_STORE: store }, timeoutMs: 30_000 });
    expect(text.code, text.stderr).toBe(2);
    const lines = text.stdout.trimEnd().split('\n');
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(100);
    const third = lines.findIndex((l) => l.startsWith('every-third-second '));
    expect(lines[third]).toContain(' */3 * * * * * ');
    expect(lines[third + 1]).toBe('  zone America/Argentina/Buenos_Aires');
    const nightly = lines.findIndex((l) => l.startsWith('nightly-report-for-the-financ… '));
    expect(lines[nightly + 1]).toBe('  job nightly-report-for-the-finance-team · schedule 0 0,15,30,45 9-17 * * 1-5');
    expect(lines[nightly + 2]).toBe('  zone America/Indiana/Indianapolis');
    const invalid = lines.findIndex((l) => /^INVALID \S*bad\.mjs:$/.test(l));
    expect(invalid).toBeGreaterThan(0);
    const problems = lines.slice(invalid + 1);
    // No path again; the schedule problem wrapped at a space onto an indented line, with nothing lost.
    expect(problems.every((l) => !l.includes('bad.mjs'))).toBe(true);
    expect(problems.join(' ').replace(/\s+/g, ' ')).toContain(`field 'schedule' = "* * * *": expected a valid cron expression (expected 5 fields (minute hour day month weekday) or 6 (seconds first), got 4)`);
    expect(problems.some((l) => /^ {4}\S/.test(l))).toBe(true);
    // --json keeps each problem whole, as loaded.
    const json = await runCli(['list', '--json', '--jobs', dir], { env: { SCHEDULER_STORE: store }, timeoutMs: 30_000 });
    const problem = JSON.parse(json.stdout).invalid[0].problems.find((p: string) => p.includes("'schedule'"));
    expect(problem).toMatch(/^\S*bad\.mjs: field 'schedule' = .*got 4\)$/);
  });

  it('shows the year of periods not all in the current year: six @yearly periods are six years, not six 01-01', async () => {
    // Pure: within this year (in the zone) no year; any period in another year: all with theirs.
    const at = (iso: string) => new Date(iso);
    expect(datedText([at('2026-12-02T00:00:00Z'), at('2026-12-03T00:00:00Z')], 'UTC', now)).toEqual(['12-02 00:00:00', '12-03 00:00:00']);
    expect(datedText([at('2026-12-31T12:00:00Z'), at('2027-01-01T00:00:00Z')], 'UTC', now)).toEqual(['2026-12-31 12:00:00', '2027-01-01 00:00:00']);
    // The year is the zone's: 31 Dec 20:00 UTC is already 2027 in Tokyo.
    expect(whenText(at('2026-12-31T20:00:00Z'), 'Asia/Tokyo', now)).toBe('2027-01-01 05:00:00 (in 30d)');
    expect(whenText(at('2026-12-31T20:00:00Z'), 'UTC', now)).toBe('12-31 20:00:00 (in 30d)');

    const dir = join(tempDir('cron-unit-text-'), 'jobs');
    mkdirSync(dir);
    writeFileSync(join(dir, 'y.mjs'), `export default { name: 'yearly', schedule: '@yearly', async run() {} };`);
    const store = `sqlite:${join(tempDir('cron-unit-text-store-'), 's.db')}`;
    const r = await runCli(['list', '-n', '6', '--jobs', dir], { env: { SCHEDULER_STORE: store }, timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(100);
    const year = new Date().getUTCFullYear();
    expect(lines[1]).toMatch(new RegExp(`^yearly +@yearly +UTC +${year + 1}-01-01 00:00:00 \\(in \\d+d\\)$`));
    const shown = lines.filter((l) => l.startsWith('  next ')).join(', ').replace(/ {2}next /g, '').split(', ');
    expect(shown).toEqual(Array.from({ length: 6 }, (_, i) => `${year + 1 + i}-01-01 00:00:00`));
  });
});

describe('nodes text', () => {
  const node = (over: Partial<ListedNode>): ListedNode => ({
    id: 'a-node-name-that-is-far-too-long-to-print-whole-1234', host: 'ip-10-0-112-134.eu-west-1.compute.internal', pid: 4_194_303,
    version: '10.20.300-beta.1', startedAt: 0, heartbeatAt: 99 * 86_400_000, inFlight: 1000, clockOffsetMs: -999_900, state: 'stopping',
    procStart: null, storeHost: null, jobSet: null, alive: true, heartbeatAgeMs: 23 * 3600_000 + 59 * 60_000, ...over,
  });

  it('has a PID column (the pid a refused start names) and fits 100 columns with the widest values', () => {
    const text = nodesText([node({}), node({ id: 'web-1', host: 'db-2', pid: 4242, version: '0.1.0', startedAt: 1000, heartbeatAt: 61_000, heartbeatAgeMs: 1200, inFlight: 0, clockOffsetMs: 12, state: 'running' })]);
    const lines = text.split('\n');
    expect(lines[0]).toMatch(/^ID\s+HOST\s+PID\s+VERSION\s+STARTED\s+HEARTBEAT\s+RUNS\s+OFFSET\s+STATE$/);
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(100);
    expect(lines[1]).toMatch(/^a-node-name-that-…\s+ip-10-0-112-…\s+4194303\s+10.20.…\s+99d23h ago\s+23h59m ago\s+1000\s+-999\.9s\s+stopping$/);
    expect(lines[2]).toMatch(/^web-1\s+db-2\s+4242\s+0\.1\.0\s+1m01s ago\s+1\.2s ago\s+0\s+\+12ms\s+running$/);
    expect(nodesText([])).toBe('no node has run in the last 24 h');
  });

  it('says below the table which store host the live nodes write to, one line a host', () => {
    const text = nodesText([
      node({ id: 'web-1', storeHost: 'pg-b:5432' }), node({ id: 'web-2', storeHost: 'pg-a:5432' }), node({ id: 'web-3', storeHost: 'pg-b:5432' }),
      node({ id: 'web-4', storeHost: 'pg-a:5432', alive: false }), node({ id: 'web-5', storeHost: null }),
    ]);
    const lines = text.split('\n');
    expect(lines.slice(-2)).toEqual(['writes to pg-b:5432: web-1, web-3', 'writes to pg-a:5432: web-2']);
    expect(lines.length).toBe(1 + 5 + 2);
  });
});
