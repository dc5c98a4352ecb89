/**
 * The operators' actions over HTTP (issue 22, item 2) on real daemons: two `bin/scheduler run` on one
 * MariaDB database, node-a serving HTTP with named tokens (an operator, a viewer, and
 * SCHEDULER_HTTP_TOKEN as `default`), node-b with none (token-less, on loopback). Each action answers
 * in JSON what it did, refuses what its command refuses with the same words, and stands in the audit
 * trail under the token's name; a viewer gets 403 on every POST and changes nothing; a run by hand in a
 * terminal cancelled over HTTP ends run-once with exit 1. Counted from the
 * bodies' own records.
 */
import { createHash } from 'node:crypto';
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

/** Yearly (never due in the test): runs by hand only. Records start and end; the long one waits for its signal. */
const JOB = (ms: number) => `
import { appendFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
export default {
  schedule: '0 0 1 1 *',
  async run(ctx) {
    rec({ ev: 'start', job: ctx.job, key: ctx.periodKey, attempt: ctx.attempt, node: ctx.nodeId, trigger: ctx.trigger });
    await new Promise((resolve) => { const t = setTimeout(resolve, ${ms}); ctx.signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }); });
    rec({ ev: 'end', job: ctx.job, key: ctx.periodKey, reason: ctx.signal.aborted ? String(ctx.signal.reason) : null });
    if (ctx.signal.aborted) throw new Error('stopped');
  },
};
`;

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const OPS = 'ops-token-7Qe2';
const DASH = 'dash-token-Vb81';
const LEGACY = 'legacy-token-Zp44';

async function httpUrl(d: Daemon): Promise<string> {
  return waitFor('http server listening', () => d.logs().find((l) => l.msg === 'http server listening')?.url as string | undefined, 60_000);
}

describe('actions over HTTP', () => {
  it('run now, re-run, pause, resume and cancel: each as its command does, answered in JSON, audited under the token name; a viewer gets 403 on every POST', async () => {
    const db = await createMariaDb('cron_http_actions');
    dbs.push(db);
    const ws = new Workspace('cron-http-actions-');
    workspaces.push(ws);
    ws.writeJob('quick.mjs', JOB(50));
    ws.writeJob('long.mjs', JOB(120_000));
    ws.writeJob('scheduler.json', JSON.stringify({ httpTokens: [{ name: 'ops', role: 'operator', env: 'OPS_TOKEN' }, { name: 'dash', role: 'viewer', sha256: sha(DASH) }] }), ws.path('config'));
    const env = { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_GRACE_PERIOD: '1s', SIDE_EFFECTS: ws.path('effects.txt') };
    const a = new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: 'node-a', SCHEDULER_HTTP: '127.0.0.1:0', OPS_TOKEN: OPS, SCHEDULER_HTTP_TOKEN: LEGACY } });
    // node-b: no config file's tokens (another file), no token at all: loopback actions for anyone local.
    ws.writeJob('none.json', '{}', ws.path('config'));
    const b = new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: 'node-b', SCHEDULER_HTTP: '127.0.0.1:0', SCHEDULER_CONFIG: ws.path('config/none.json') } });
    daemons.push(a, b);
    await Promise.all(daemons.map((d) => d.waitStarted()));
    const [urlA, urlB] = await Promise.all([httpUrl(a), httpUrl(b)]);
    const cli = (args: string[]) => runCli(args, { cwd: ws.dir, env: { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_CONFIG: ws.path('config/none.json') } });
    const history = async (job: string): Promise<HistoryRun[]> => JSON.parse((await cli(['history', job, '--json', '--limit', '100'])).stdout) as HistoryRun[];
    const effects = () => ws.lines('effects.txt').map((l) => JSON.parse(l) as { ev: string; job: string; key: string; attempt: number; node: string; reason?: string | null });
    const act = async (url: string, path: string, body: unknown, token?: string) => {
      const r = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });
      return { status: r.status, doc: (await r.json()) as Record<string, unknown> & { error?: string } };
    };
    const paused = async (job: string) => (JSON.parse((await cli(['list', '--json'])).stdout) as { jobs: Array<{ name: string; paused: unknown }> }).jobs.find((j) => j.name === job)?.paused ?? null;

    // Reads: 401 without a token, 200 for the viewer; the viewer's every action 403, nothing changed.
    expect((await fetch(`${urlA}/api/jobs`)).status).toBe(401);
    expect((await fetch(`${urlA}/api/jobs`, { headers: { authorization: `Bearer ${DASH}` } })).status).toBe(200);
    const actions: Array<[string, unknown]> = [
      ['/api/jobs/quick/run', {}], ['/api/jobs/quick/periods/2026-01-01T00:00:00.000Z/run', { force: true }],
      ['/api/jobs/quick/pause', { reason: 'viewer tries' }], ['/api/jobs/quick/resume', {}], ['/api/jobs/quick/cancel', {}],
    ];
    for (const [path, body] of actions) {
      const r = await act(urlA, path, body, DASH);
      expect(r.status, path).toBe(403);
      expect(r.doc.error).toBe("forbidden: the token 'dash' is a viewer; actions need an operator token");
      expect((await act(urlA, path, body)).status, `${path} without a token`).toBe(401);
    }
    expect(await paused('quick')).toBeNull();
    expect(effects()).toEqual([]);

    // Pause with a reason; a run now of the paused job is refused with the words of run-once; resume.
    const p = await act(urlA, '/api/jobs/quick/pause', { reason: 'ledger migration' }, OPS);
    expect(p.status).toBe(200);
    expect(p.doc).toMatchObject({ job: 'quick', action: 'pause', changed: true, paused: true, reason: 'ledger migration' });
    expect(await paused('quick')).toMatchObject({ reason: 'ledger migration' });
    const refusedRun = await act(urlA, '/api/jobs/quick/run', {}, OPS);
    const cliRefusal = await cli(['run-once', 'quick']);
    expect(refusedRun.status).toBe(409);
    expect(cliRefusal.code).toBe(3);
    expect(cliRefusal.stdout + cliRefusal.stderr).toContain(refusedRun.doc.error!);
    const r = await act(urlA, '/api/jobs/quick/resume', {}, OPS);
    expect(r.doc).toMatchObject({ action: 'resume', changed: true, paused: false });
    expect(await paused('quick')).toBeNull();

    // Run now: answered 202 once claimed, with the attempt's id; the body runs once, on node-a.
    const now = await act(urlA, '/api/jobs/quick/run', {}, OPS);
    expect(now.status).toBe(202);
    const attempts = now.doc.attempts as Array<{ runId: string; attempt: number }>;
    expect(now.doc).toMatchObject({ action: 'run', job: 'quick', nodeId: 'node-a', started: true });
    expect(attempts).toHaveLength(1);
    const period = now.doc.period as string;
    await waitFor('the run now succeeded', async () => (await history('quick')).some((x) => x.scheduledAt === period && x.status === 'succeeded'), 30_000, 200);
    expect(effects().filter((e) => e.ev === 'start').map((e) => [e.key, e.attempt, e.node])).toEqual([[`quick@${period}`, 1, 'node-a']]);

    // Re-run of a past period of the schedule: it runs; again, refused as run-once --period refuses it
    // (it succeeded); then forced, as attempt 2.
    const P = '2026-01-01T00:00:00.000Z';
    const first = await act(urlA, `/api/jobs/quick/periods/${encodeURIComponent(P)}/run`, {}, OPS);
    expect(first.status).toBe(202);
    expect(first.doc).toMatchObject({ action: 'rerun', period: P, force: false, attempts: [{ attempt: 1 }] });
    await waitFor('the period ran', async () => (await history('quick')).some((x) => x.scheduledAt === P && x.status === 'succeeded'), 30_000, 200);
    const again = await act(urlA, `/api/jobs/quick/periods/${encodeURIComponent(P)}/run`, {}, OPS);
    const cliAgain = await cli(['run-once', 'quick', '--period', P]);
    expect(again.status).toBe(409);
    expect(again.doc.error).toBe(`period quick@${P} already succeeded (attempt 1); use --force to run it again`);
    expect(cliAgain.code).toBe(3);
    expect(cliAgain.stdout + cliAgain.stderr).toContain(again.doc.error!);
    const forced = await act(urlA, `/api/jobs/quick/periods/${encodeURIComponent(P)}/run`, { force: true }, OPS);
    expect(forced.status).toBe(202);
    expect(forced.doc).toMatchObject({ action: 'rerun', period: P, force: true, attempts: [{ attempt: 2 }] });
    await waitFor('attempt 2 succeeded', async () => (await history('quick')).some((x) => x.scheduledAt === P && x.attempt === 2 && x.status === 'succeeded'), 30_000, 200);
    expect(effects().filter((e) => e.ev === 'start').map((e) => [e.key, e.attempt])).toEqual([[`quick@${period}`, 1], [`quick@${P}`, 1], [`quick@${P}`, 2]]);
    // A period that is not one of the schedule, and a body field that is not one: 400, named.
    const notPeriod = await act(urlA, '/api/jobs/quick/periods/2026-01-01T00:00:01.000Z/run', {}, OPS);
    expect(notPeriod.status).toBe(400);
    expect(notPeriod.doc.error).toMatch(/is not a period of job 'quick'/);
    expect((await act(urlA, '/api/jobs/quick/run', { forse: true }, OPS)).doc.error).toBe('unknown field(s) in the body: forse');
    expect((await act(urlA, '/api/jobs/nope/pause', {}, OPS)).status).toBe(404);

    // Cancel over HTTP on node-a (the legacy token, 'default') of an attempt running on node-b (started
    // there by a token-less loopback request): recorded cancelled once, by 'default', with the reason.
    const started = await act(urlB, '/api/jobs/long/run', {});
    expect(started.status).toBe(202);
    expect(started.doc.nodeId).toBe('node-b');
    const longPeriod = started.doc.period as string;
    await waitFor('the long body started', () => effects().some((e) => e.job === 'long' && e.ev === 'start'), 30_000, 100);
    const asked = Date.now();
    const c = await act(urlA, '/api/jobs/long/cancel', { reason: 'wrong ledger' }, LEGACY);
    expect(c.status, JSON.stringify(c.doc)).toBe(200);
    console.log(`[http-actions] cancel over HTTP answered ${Date.now() - asked} ms after the request`);
    expect(c.doc).toMatchObject({ job: 'long', period: longPeriod, cancelled: [{ attempt: 1, nodeId: 'node-b', status: 'cancelled', error: 'cancelled by default: wrong ledger' }] });
    expect(effects().filter((e) => e.job === 'long').map((e) => [e.ev, e.reason ?? null])).toEqual([['start', null], ['end', 'cancelled']]);
    const nothing = await act(urlA, '/api/jobs/long/cancel', {}, OPS);
    expect(nothing.status).toBe(409);
    expect(nothing.doc.error).toBe("nothing to cancel: no attempt of 'long' is running");
    expect((await history('long')).map((x) => [x.attempt, x.status])).toEqual([[1, 'cancelled']]);

    // The audit trail: each action under its token's name (the token-less one as anonymous@node-b).
    const audit = await (await fetch(`${urlA}/api/audit?limit=100`, { headers: { authorization: `Bearer ${DASH}` } })).json() as { entries: Array<{ actor: string; action: string; job: string; result: string; reason: string | null; force: boolean }> };
    const cliActor = `${userInfo().username}@${hostname()}`;
    const seen = audit.entries.map((e) => `${e.actor === cliActor ? 'cli' : e.actor} ${e.action} ${e.job} ${e.result}${e.force ? ' force' : ''}`).reverse();
    expect(seen).toEqual([
      'ops pause quick done', 'ops run quick refused', 'cli run quick refused', 'ops resume quick done', 'ops run quick done',
      'ops rerun quick done', 'ops rerun quick refused', 'cli rerun quick refused', 'ops rerun quick done force',
      'anonymous@node-b run long done', 'default cancel long done', 'ops cancel long refused',
    ]);
    expect(audit.entries.find((e) => e.action === 'pause')!.reason).toBe('ledger migration');

    // A run by hand in a terminal (run-once holds the attempt), cancelled over HTTP: run-once exits 1,
    // the attempt recorded cancelled.
    const terminal = runCli(['run-once', 'long', '--json'], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_CONFIG: ws.path('config/none.json'), SIDE_EFFECTS: ws.path('effects.txt') } });
    await waitFor('the terminal\'s long body started', () => effects().filter((e) => e.job === 'long' && e.ev === 'start').length === 2, 30_000, 100);
    const fromHttp = await act(urlA, '/api/jobs/long/cancel', { reason: 'from the page' }, OPS);
    expect(fromHttp.status, JSON.stringify(fromHttp.doc)).toBe(200);
    const ended = await terminal;
    expect(ended.code, ended.stderr).toBe(1);
    expect((JSON.parse(ended.stdout) as { runs: Array<{ status: string; error: string }> }).runs.map((x) => [x.status, x.error])).toEqual([['cancelled', 'cancelled by ops: from the page']]);
  });
});
