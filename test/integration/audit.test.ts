/**
 * The audit trail as operators meet it: the real `bin/scheduler` on a SQLite store in a temp folder.
 * pause, resume, run-once by hand, a re-run refused and then forced, prune done and refused each
 * leave one entry (who, what, job, period, reason, force, result); `audit` reads them newest first
 * with its filters; an audit write that fails changes no exit status; GET /api/audit answers the same.
 */
import { hostname, userInfo } from 'node:os';
import Sqlite from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { Daemon, runCli, type CliResult } from '../helpers/cli.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';

/** A job no daemon runs by itself in a test's time (1 January, 00:00). */
const YEARLY = "export default { schedule: '0 0 1 1 *', async run() { return 'by hand'; } };\n";
const PERIOD = '2024-01-01T00:00:00.000Z';
const TOKEN = 'tok-audit-5e4d3c2b';
const ACTOR = `${userInfo().username}@${hostname()}`;

interface Entry { at: string; actor: string; action: string; job: string | null; period: string | null; reason: string | null; force: boolean; result: string; detail: string | null }

const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function project(): { ws: Workspace; cli: (args: string[], env?: Record<string, string>) => Promise<CliResult> } {
  const ws = new Workspace('cron-it-audit-');
  cleanups.push(() => ws.cleanup());
  ws.writeJob('yearly.mjs', YEARLY);
  const env = { SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: ws.jobsDir };
  return { ws, cli: (args, extra = {}) => runCli(args, { cwd: ws.dir, env: { ...env, ...extra } }) };
}

function expectCode(r: CliResult, code: number): void {
  expect(r.code, `exit code\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(code);
}

async function entries(cli: ReturnType<typeof project>['cli'], ...args: string[]): Promise<Entry[]> {
  const r = await cli(['audit', '--json', ...args]);
  expectCode(r, 0);
  return (JSON.parse(r.stdout) as { entries: Entry[] }).entries;
}

const shape = (e: Entry) => [e.actor, e.action, e.job, e.period, e.reason, e.force, e.result];

describe('the audit trail', () => {
  it('every operator action from the CLI is one entry, done or refused; audit reads them newest first, filtered by --job, --limit and --since', async () => {
    const { cli } = project();
    expectCode(await cli(['pause', 'yearly', '--reason', 'ledger migration']), 0);
    expectCode(await cli(['resume', 'yearly']), 0);
    expectCode(await cli(['run-once', 'yearly']), 0);
    expectCode(await cli(['run-once', 'yearly', '--period', PERIOD]), 0);
    const refused = await cli(['run-once', 'yearly', '--period', PERIOD]);
    expectCode(refused, 3);
    expectCode(await cli(['run-once', 'yearly', '--period', PERIOD, '--force']), 0);
    expectCode(await cli(['prune']), 0);
    expectCode(await cli(['prune', '--older-than', '1m']), 2);
    // Not actions: a dry run, a read.
    expectCode(await cli(['prune', '--dry-run']), 0);
    expectCode(await cli(['run-once', 'yearly', '--dry-run']), 0);

    const all = await entries(cli);
    expect(all.map(shape)).toEqual([
      [ACTOR, 'prune', null, null, null, false, 'refused'],
      [ACTOR, 'prune', null, null, null, false, 'done'],
      [ACTOR, 'rerun', 'yearly', PERIOD, null, true, 'done'],
      [ACTOR, 'rerun', 'yearly', PERIOD, null, false, 'refused'],
      [ACTOR, 'rerun', 'yearly', PERIOD, null, false, 'done'],
      [ACTOR, 'run', 'yearly', expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/), null, false, 'done'],
      [ACTOR, 'resume', 'yearly', null, null, false, 'done'],
      [ACTOR, 'pause', 'yearly', null, 'ledger migration', false, 'done'],
    ]);
    expect(all[0]!.detail).toMatch(/^--older-than 1m: .*catchUp/);
    expect(all[1]!.detail).toMatch(/^0 run row\(s\) started before \S+Z \(older than 30d\) and 0 expired ctx\.once key\(s\) deleted; 0 audit row\(s\) older than 90d deleted$/);
    // A run by hand is recorded when its claim is won, before its body runs (the run's outcome is its history's).
    expect(all[2]!.detail).toMatch(/^attempt 2 started on \S+$/);
    expect(all[3]!.detail).toBe(`period yearly@${PERIOD} already succeeded (attempt 1); use --force to run it again`);
    expect(refused.stdout + refused.stderr).toContain(all[3]!.detail!);
    expect(all[4]!.detail).toMatch(/^attempt 1 started on \S+$/);
    expect(all[6]!.detail).toBeNull();
    for (let i = 1; i < all.length; i++) expect(Date.parse(all[i - 1]!.at)).toBeGreaterThanOrEqual(Date.parse(all[i]!.at));

    // The filters.
    expect((await entries(cli, '--job', 'yearly', '--limit', '2')).map((e) => [e.action, e.result])).toEqual([['rerun', 'done'], ['rerun', 'refused']]);
    expect(await entries(cli, '--job', 'nope')).toEqual([]);
    expect(await entries(cli, '--since', all[4]!.at)).toEqual(all.slice(0, 5));
    expect(await entries(cli, '--since', '1h')).toEqual(all);
    expect(await entries(cli, '--since', '2099-01-01T00:00:00Z')).toEqual([]);
    const bad = await cli(['audit', '--since', 'lately']);
    expectCode(bad, 2);
    expect(bad.stderr).toMatch(/invalid --since lately: expected an ISO-8601 instant .* or a duration/);
    expectCode(await cli(['audit', '--limit', '0']), 2);

    // As text: one row per action, a refusal's why in its result.
    const text = await cli(['audit', '--limit', '5']);
    expectCode(text, 0);
    const lines = text.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^AT\s+ACTOR\s+ACTION\s+JOB\s+PERIOD\s+REASON\s+RESULT$/);
    expect(lines).toHaveLength(6);
    expect(lines[3]).toContain('rerun --force');
    expect(lines[4]).toContain(`refused: period yearly@${PERIOD} already succeeded`);
  }, 180_000);

  it('an audit write that fails leaves the action and its exit status as they are, with one warning line', async () => {
    const { ws, cli } = project();
    expectCode(await cli(['run-once', 'yearly', '--period', PERIOD]), 0);
    // The store refuses every audit row from here on (a trigger on the table), the rest of it works.
    const db = new Sqlite(ws.path('scheduler.db'));
    db.exec("CREATE TRIGGER audit_refused BEFORE INSERT ON scheduler_audit BEGIN SELECT RAISE(ABORT, 'audit rows refused by the test'); END");
    db.close();

    const paused = await cli(['pause', 'yearly', '--reason', 'r']);
    expectCode(paused, 0);
    expect(paused.stdout).toContain("paused job 'yearly'");
    const warnings = paused.stderr.split('\n').filter((l) => l.includes('audit trail'));
    expect(warnings).toEqual([expect.stringMatching(/^scheduler: warning: the audit trail could not record pause yearly \(done\): .*audit rows refused by the test/)]);
    const refused = await cli(['run-once', 'yearly', '--period', PERIOD]);
    expectCode(refused, 3);
    expect(refused.stderr).toMatch(/could not record rerun yearly \(refused\)/);
    expectCode(await cli(['run-once', 'yearly', '--period', PERIOD, '--force']), 0);
    expectCode(await cli(['prune', '--older-than', '1m']), 2);
    expect((await entries(cli)).map((e) => [e.action, e.result])).toEqual([['rerun', 'done']]);
  }, 120_000);

  it('GET /api/audit: the same entries behind the token, with job, since and limit; bad values are 400 naming the parameter', async () => {
    const { ws, cli } = project();
    expectCode(await cli(['pause', 'yearly', '--reason', 'over http']), 0);
    expectCode(await cli(['resume', 'yearly']), 0);
    expectCode(await cli(['run-once', 'yearly']), 0);
    const expected = await entries(cli);
    const d = new Daemon([], { cwd: ws.dir, env: { SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_HTTP: '127.0.0.1:0', SCHEDULER_HTTP_TOKEN: TOKEN } });
    cleanups.push(async () => void (await d.stop('SIGKILL', 5000)));
    const url = await waitFor('http server listening', () => d.logs().find((l) => l.msg === 'http server listening')?.url as string | undefined, 60_000);
    const auth = { headers: { authorization: `Bearer ${TOKEN}` } };
    const get = async (path: string, init: RequestInit = auth) => {
      const res = await fetch(`${url}${path}`, init);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    await waitFor('/api to answer', async () => ((await get('/api/audit')).status === 200 ? true : undefined), 60_000);
    expect((await get('/api/audit', {})).status).toBe(401);
    expect(await get('/api/audit')).toEqual({ status: 200, body: { entries: expected } });
    expect((await get('/api/audit?job=yearly&limit=2')).body).toEqual({ entries: expected.slice(0, 2) });
    expect((await get(`/api/audit?since=${encodeURIComponent(expected[1]!.at)}`)).body).toEqual({ entries: expected.slice(0, 2) });
    expect((await get('/api/audit?since=1h')).body).toEqual({ entries: expected });
    expect((await get('/api/audit?job=nope')).body).toEqual({ entries: [] });
    for (const [query, parameter] of [['since=lately', 'since'], ['limit=0', 'limit'], ['limit=5000', 'limit'], ['job=', 'job']]) {
      const r = await get(`/api/audit?${query}`);
      expect(r.status, query).toBe(400);
      expect(r.body.parameter, query).toBe(parameter);
    }
    expect(await d.stop('SIGTERM')).toBe(0);
  }, 120_000);
});
