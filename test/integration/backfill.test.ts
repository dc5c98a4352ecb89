/**
 * `scheduler backfill` through the real `bin/scheduler` (issue 23, item 1): two daemons on one MariaDB
 * database, one serving HTTP. A dry run writes nothing; a backfill runs every period of its range once
 * as trigger `backfill` (in the job's zone, across a DST change), skips those that already succeeded
 * (all of them with --force), honours a body that fails (exit 1); pause, resume and cancel from the
 * command and the API; the API starts one and lists them; bad ranges are one line and exit 2; every
 * action is in the audit trail. Counted from the bodies' own records.
 */
import { hostname, userInfo } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { Daemon, runCli } from '../helpers/cli.js';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace, type HistoryRun } from '../helpers/workspace.js';

const dbs: TestDatabase[] = [];
const daemons: Daemon[] = [];
const workspaces: Workspace[] = [];

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop('SIGTERM')));
  for (const db of dbs) await db.drop();
  for (const w of workspaces) w.cleanup();
});

/** Hourly at :30 in Europe/London; a body records itself; the periods of 2026-03-03 fail. */
const HOURLY = `
import { appendFileSync } from 'node:fs';
export default {
  schedule: '30 * * * *', timezone: 'Europe/London',
  async run(ctx) {
    appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ job: ctx.job, key: ctx.periodKey, trigger: ctx.trigger, attempt: ctx.attempt, node: ctx.nodeId }) + '\\n');
    if (ctx.scheduledAt.toISOString().startsWith('2026-03-03')) throw new Error('bad day');
  },
};
`;

/** Every minute, slow (2 s): a backfill of it can be paused and cancelled while it runs. */
const SLOW = `
import { appendFileSync } from 'node:fs';
export default {
  schedule: '* * * * *',
  async run(ctx) {
    appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ job: ctx.job, key: ctx.periodKey, trigger: ctx.trigger, attempt: ctx.attempt, node: ctx.nodeId }) + '\\n');
    await new Promise((r) => setTimeout(r, 2000));
  },
};
`;

interface Effect { job: string; key: string; trigger: string; attempt: number; node: string }
interface View { id: string; job: string; status: string; total: number; done: number; failed: number; running: number; pending: number; counts: Record<string, number>; createdBy: string }

async function httpUrl(d: Daemon): Promise<string> {
  return waitFor('http server listening', () => d.logs().find((l) => l.msg === 'http server listening')?.url as string | undefined, 60_000);
}

describe('scheduler backfill', () => {
  it('runs each period of the range once on the daemons; skips what succeeded unless --force; dry run, pause, resume, cancel, status and the API; audited', async () => {
    const db = await createMariaDb('cron_backfill');
    dbs.push(db);
    const ws = new Workspace('cron-backfill-');
    workspaces.push(ws);
    ws.writeJob('hourly.mjs', HOURLY);
    ws.writeJob('slow.mjs', SLOW);
    const env = { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_GRACE_PERIOD: '1s', SIDE_EFFECTS: ws.path('effects.txt') };
    daemons.push(new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: 'node-a', SCHEDULER_HTTP: '127.0.0.1:0' } }));
    daemons.push(new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: 'node-b', SCHEDULER_HTTP: 'off' } }));
    await Promise.all(daemons.map((d) => d.waitStarted()));
    const url = await httpUrl(daemons[0]!);
    const cli = (args: string[], timeoutMs = 120_000) => runCli(args, { cwd: ws.dir, env: { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir }, timeoutMs });
    const effects = (job: string) => ws.lines('effects.txt').map((l) => JSON.parse(l) as Effect).filter((e) => e.job === job);
    const actor = `${userInfo().username}@${hostname()}`;
    const post = async (path: string, body: unknown) => {
      const r = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: r.status, doc: (await r.json()) as Record<string, unknown> & { error?: string; backfill?: View } };
    };

    // Four days of hourly periods (96, in UTC as in London: a whole-hour offset). London's clocks go
    // forward on 2026-03-29 at 01:00 UTC, so that local day (given with its offsets) holds 23.
    const from = '2026-03-27T00:00:00Z';
    const to = '2026-03-30T23:59:59Z';
    const dry = await cli(['backfill', 'hourly', '--from', from, '--to', to, '--dry-run', '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, total: 96, alreadySucceeded: 0, wouldRun: 96, first: '2026-03-27T00:30:00.000Z', last: '2026-03-30T23:30:00.000Z' });
    expect(JSON.parse((await cli(['backfill', '--status', '--json'])).stdout)).toEqual({ backfills: [] });
    expect(effects('hourly')).toEqual([]);

    const run = await cli(['backfill', 'hourly', '--from', from, '--to', to, '--concurrency', '4']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^backfill bf-[0-9a-f]{10} of hourly done: 96 succeeded, 0 skipped, 0 failed, 0 cancelled, of 96$/m);
    const ran = effects('hourly');
    expect(ran).toHaveLength(96);
    expect(new Set(ran.map((e) => e.key)).size).toBe(96);
    expect(ran.every((e) => e.trigger === 'backfill' && e.attempt === 1)).toBe(true);
    // Spread over both nodes.
    expect(new Set(ran.map((e) => e.node))).toEqual(new Set(['node-a', 'node-b']));
    const history = JSON.parse((await cli(['history', 'hourly', '--json', '--limit', '1000'])).stdout) as HistoryRun[];
    expect(history.filter((h) => h.trigger === 'backfill' && h.status === 'succeeded')).toHaveLength(96);

    // Again: every period already succeeded, so all are skipped; with --force all run again, as attempt 2.
    const again = await cli(['backfill', 'hourly', '--from', from, '--to', to, '--json']);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout.trim().split('\n').at(-1)!)).toMatchObject({ type: 'end', status: 'done', counts: { succeeded: 0, skipped: 96 } });
    expect(effects('hourly')).toHaveLength(96);
    const forced = await cli(['backfill', 'hourly', '--from', '2026-03-29T00:00:00+00:00', '--to', '2026-03-29T23:59:59+01:00', '--force', '--concurrency', '3']);
    expect(forced.code, forced.stderr).toBe(0);
    const day = effects('hourly').slice(96);
    expect(day).toHaveLength(23);
    expect(day.every((e) => e.attempt === 2)).toBe(true);

    // A body that fails: recorded failed, the command exits 1 (and the next backfill of that range runs them again).
    const failing = await cli(['backfill', 'hourly', '--from', '2026-03-03T00:00:00Z', '--to', '2026-03-03T05:59:00Z']);
    expect(failing.code).toBe(1);
    expect(failing.stdout).toMatch(/done: 0 succeeded, 0 skipped, 6 failed, 0 cancelled, of 6/);

    // Bad ranges: one line each, exit 2, nothing recorded.
    for (const [args, words] of [
      [['--from', to, '--to', from], /bad range: --to .* is before --from/],
      [['--from', from, '--to', '2099-01-01T00:00:00Z'], /bad range: --to .* is later than now/],
      [['--from', '2026-03-27T00:00:00Z', '--to', '2026-03-27T00:10:00Z'], /bad range: no period of job 'hourly'/],
      [['--from', '2000-01-01T00:00:00Z', '--to', '2026-01-01T00:00:00Z'], /holds more than 100,000 periods/],
      [['--from', 'yesterday', '--to', to], /--from/],
      [['--from', from, '--to', to, '--concurrency', '0'], /invalid --concurrency 0/],
    ] as const) {
      const bad = await cli(['backfill', 'hourly', ...args]);
      expect(bad.code, args.join(' ')).toBe(2);
      expect(bad.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
      expect(bad.stderr).toMatch(words);
    }
    const unknown = await cli(['backfill', 'nope', '--from', from, '--to', to]);
    expect(unknown.code).toBe(2);

    // Pause, resume and cancel, from the API and the command, on a running backfill of the slow job.
    const slowTo = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 3_600_000);
    const slowFrom = new Date(slowTo.getTime() - 29 * 60_000);
    const started = await post('/api/jobs/slow/backfill', { from: slowFrom.toISOString(), to: slowTo.toISOString(), concurrency: 2 });
    expect(started.status, started.doc.error).toBe(202);
    const id = started.doc.backfill!.id;
    expect(started.doc.backfill).toMatchObject({ job: 'slow', status: 'running', total: 30, concurrency: 2, createdBy: 'anonymous@node-a' });
    // The same range again continues it (200, not a new one); an overlapping range is refused (409).
    expect((await post('/api/jobs/slow/backfill', { from: slowFrom.toISOString(), to: slowTo.toISOString(), concurrency: 2 })).doc).toMatchObject({ created: false, backfill: { id } });
    const overlap = await post('/api/jobs/slow/backfill', { from: slowFrom.toISOString(), to: new Date(slowTo.getTime() - 60_000).toISOString() });
    expect(overlap.status).toBe(409);
    expect(overlap.doc.error).toContain(`backfill ${id} of job 'slow'`);
    const status = async () => (JSON.parse((await cli(['backfill', '--status', '--json'])).stdout) as { backfills: View[] }).backfills.find((b) => b.id === id)!;
    await waitFor('two slow periods done', async () => (await status()).done >= 2, 60_000, 300);
    // At most 2 at once, cluster-wide.
    const paused = await post(`/api/backfills/${id}/pause`, {});
    expect(paused.status).toBe(200);
    expect(paused.doc.backfill).toMatchObject({ status: 'paused' });
    // Paused: what ran ends, nothing new starts.
    await waitFor('the running periods to end', async () => (await status()).running === 0, 30_000, 300);
    // (The slow job's own schedule runs beside it, every minute: only the backfill's runs are counted.)
    const backfilled = () => effects('slow').filter((e) => e.trigger === 'backfill').length;
    const atPause = backfilled();
    await new Promise((r) => setTimeout(r, 3000));
    expect(backfilled()).toBe(atPause);
    expect((await cli(['backfill', '--pause', id])).code).toBe(3);
    const resumed = await cli(['backfill', '--resume', id, '--json']);
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ id, status: 'running' });
    await waitFor('more slow periods', () => backfilled() > atPause, 30_000, 200);
    const cancelled = await cli(['backfill', '--cancel', id]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stdout).toContain(`backfill ${id} of slow: cancelled`);
    await waitFor('the cancelled backfill to settle', async () => (await status()).running === 0, 30_000, 300);
    const end = await status();
    expect(end.status).toBe('cancelled');
    expect(end.counts.cancelled).toBeGreaterThan(0);
    expect(end.done + end.counts.cancelled + end.counts.failed).toBe(30);
    const slowRan = effects('slow').filter((e) => e.trigger === 'backfill');
    expect(slowRan).toHaveLength(end.done);
    expect(new Set(slowRan.map((e) => e.key)).size).toBe(slowRan.length);
    expect((await cli(['backfill', '--resume', id])).code).toBe(3);
    expect((await cli(['backfill', '--cancel', 'bf-0000000000'])).code).toBe(2);

    // GET /api/backfills lists them all, newest first; ?active=true none now.
    const listed = (await (await fetch(`${url}/api/backfills`)).json()) as { backfills: View[] };
    expect(listed.backfills[0]!.id).toBe(id);
    expect(listed.backfills).toHaveLength(5);
    expect(((await (await fetch(`${url}/api/backfills?active=true`)).json()) as { backfills: View[] }).backfills).toEqual([]);

    // The page lists them, with their progress.
    const page = await (await fetch(`${url}/`)).text();
    expect(page).toContain('<h2 id="backfills-h">Backfills</h2>');
    expect(page).toMatch(new RegExp(`<tr data-backfill="${id}">.*cancelled`, 's'));

    // The audit trail: each start, change and refusal, with its actor.
    const audit = (JSON.parse((await cli(['audit', '--json', '--limit', '100'])).stdout) as { entries: Array<{ actor: string; action: string; job: string; result: string; force: boolean }> }).entries;
    const mine = audit.filter((a) => a.action.startsWith('backfill'));
    expect(mine.filter((a) => a.action === 'backfill' && a.result === 'done' && a.actor === actor)).toHaveLength(4);
    expect(mine.filter((a) => a.action === 'backfill' && a.force)).toHaveLength(1);
    expect(mine.find((a) => a.action === 'backfill' && a.job === 'slow' && a.result === 'done')?.actor).toBe('anonymous@node-a');
    expect(mine.filter((a) => a.action === 'backfill-pause' && a.result === 'done')).toHaveLength(1);
    expect(mine.filter((a) => a.action === 'backfill-pause' && a.result === 'refused')).toHaveLength(1);
    expect(mine.filter((a) => a.action === 'backfill-resume' && a.result === 'done')).toHaveLength(1);
    expect(mine.filter((a) => a.action === 'backfill-cancel' && a.result === 'done')).toHaveLength(1);
    expect(mine.filter((a) => a.action === 'backfill' && a.result === 'refused').length).toBeGreaterThanOrEqual(4);
  }, 300_000);
});
