/**
 * Each attempt's stored log through the real `bin/scheduler` (issue 22, item 1): two daemons on one
 * MariaDB database; a body's ctx.log lines, a command's stdout and stderr and a worker-isolated
 * body's lines are stored with their attempt, in order, redacted, and read by `scheduler logs` from
 * another process and by `GET /api/runs/<id>/log`; `logs --follow` shows a running body's lines
 * while it runs, from whichever node runs it, and ends when the attempt ends.
 */
import { spawn } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, Daemon, cleanEnv, runCli } from '../helpers/cli.js';
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

/** Every 6 s; writes 12 lines 250 ms apart (each with the time it wrote it), records each to a side-effect file. */
const TALKER = `
import { appendFileSync } from 'node:fs';
export default {
  schedule: '*/6 * * * * *',
  logLevel: 'debug',
  async run(ctx) {
    for (let i = 1; i <= 12; i++) {
      const wrote = Date.now();
      ctx.log.info({ i, wrote, password: 'hunter2' }, 'step %d of 12', i);
      appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ key: ctx.periodKey, node: ctx.nodeId, i }) + '\\n');
      await new Promise((r) => setTimeout(r, 250));
    }
    ctx.log.debug('stored at debug, not printed at info');
    return { ok: true };
  },
};
`;

const COMMAND = JSON.stringify({ schedule: '*/3 * * * * *', command: 'echo "out one"; echo "err one" >&2; echo "out two"' });

const WORKER = `
export default {
  schedule: '*/3 * * * * *',
  isolation: 'worker',
  async run(ctx) {
    ctx.log.info({ in: 'worker' }, 'from the worker');
    ctx.log.child({ step: 2 }).warn('a child line');
  },
};
`;

interface FollowLine { seq?: number; at?: string; line?: string; fields?: Record<string, unknown>; ended?: boolean; status?: string; arrived: number }

describe('scheduler logs', () => {
  it("stores each attempt's lines (ctx.log, a command's stdout and stderr, a worker body's), reads them from another process and over HTTP, and follows a running one live", async () => {
    const db = await createMariaDb('cron_runlogs');
    dbs.push(db);
    const ws = new Workspace('cron-runlogs-');
    workspaces.push(ws);
    ws.writeJob('talker.mjs', TALKER);
    ws.writeJob('shell.json', COMMAND);
    ws.writeJob('isolated.mjs', WORKER);
    const env = { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_LOG_LEVEL: 'info', SIDE_EFFECTS: ws.path('effects.txt') };
    for (const node of ['node-a', 'node-b']) {
      daemons.push(new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: node, SCHEDULER_HTTP: '127.0.0.1:0' } }));
    }
    await Promise.all(daemons.map((d) => d.waitStarted()));

    // A talker attempt is running: follow it from a third process, as an operator would.
    const history = async (): Promise<HistoryRun[]> => {
      const r = await runCli(['history', '--json', '--limit', '200'], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url } });
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as HistoryRun[];
    };
    const running = await waitFor('a talker attempt running', async () => (await history()).find((r) => r.job === 'talker' && r.status === 'running') ?? false, 60_000, 200);
    const followed: FollowLine[] = [];
    const follower = spawn(process.execPath, [BIN, 'logs', 'talker', '--follow', '--json'], { cwd: ws.dir, env: cleanEnv({ SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir }) });
    let pending = '';
    let stderr = '';
    follower.stderr.on('data', (d) => (stderr += d));
    follower.stdout.on('data', (d) => {
      pending += d;
      for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
        followed.push({ ...(JSON.parse(pending.slice(0, nl)) as FollowLine), arrived: Date.now() });
        pending = pending.slice(nl + 1);
      }
    });
    const code = await new Promise<number | null>((resolve) => follower.on('close', resolve));
    expect(code, stderr).toBe(0);
    const lines = followed.filter((l) => l.seq !== undefined);
    const end = followed.find((l) => l.ended);
    expect(end?.status).toBe('succeeded');
    // Every step, in order, the password hidden, and the debug line (the job's logLevel) stored too.
    expect(lines.map((l) => l.line)).toEqual([...Array.from({ length: 12 }, (_, i) => `step ${i + 1} of 12`), 'stored at debug, not printed at info']);
    for (const l of lines.slice(0, 12)) expect(l.fields?.password).toBe('***');
    // Live: the lines of the steps reached the follower while the body was still writing the next ones.
    const lastStepWrote = Number(lines[11]!.fields!.wrote);
    const earlyArrivals = lines.slice(0, 6).filter((l) => l.arrived < lastStepWrote);
    expect(earlyArrivals.length, 'lines shown before the body wrote its last step').toBeGreaterThanOrEqual(4);
    // The attempt followed is the one that was running, on the node that ran it (side effects agree).
    const effects = ws.lines('effects.txt').map((l) => JSON.parse(l) as { key: string; node: string; i: number }).filter((e) => e.key === running.periodKey);
    expect(effects.map((e) => e.i)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    const lags = lines.slice(0, 12).map((l) => l.arrived - Number(l.fields!.wrote));
    console.log(`[run-logs] follow: node ${effects[0]!.node}'s lines shown ${Math.min(...lags)}-${Math.max(...lags)} ms after the body wrote them (median ${lags.sort((a, b) => a - b)[6]} ms)`);

    // The node printed the steps but not the debug line; stored or not, the body's stdout is as before.
    const printer = daemons.find((d) => d.nodeId === effects[0]!.node)!;
    const printed = printer.logs().filter((l) => l.periodKey === running.periodKey && l.job === 'talker');
    expect(printed.filter((l) => typeof l.msg === 'string' && (l.msg as string).startsWith('step '))).toHaveLength(12);
    expect(printed.some((l) => l.msg === 'stored at debug, not printed at info')).toBe(false);

    // A command job's stdout and stderr, in order, each under its stream.
    const shell = await waitFor('a shell attempt with its output stored', async () => {
      const r = await runCli(['logs', 'shell', '--json'], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url } });
      if (r.code !== 0) return false;
      const doc = JSON.parse(r.stdout) as { run: { status: string }; lines: Array<{ stream: string; line: string; level: string }> };
      return doc.run.status === 'succeeded' && doc.lines.length >= 3 ? doc : false;
    }, 60_000, 500);
    expect(shell.lines.filter((l) => l.stream === 'stdout').map((l) => l.line)).toEqual(['out one', 'out two']);
    expect(shell.lines.filter((l) => l.stream === 'stderr').map((l) => [l.line, l.level])).toEqual([['err one', 'warn']]);

    // A worker-isolated body's lines, with a child logger's field.
    const isolated = await waitFor('an isolated attempt with its lines stored', async () => {
      const r = await runCli(['logs', 'isolated', '--json'], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url } });
      if (r.code !== 0) return false;
      const doc = JSON.parse(r.stdout) as { run: { runId: string; status: string }; lines: Array<{ line: string; fields: Record<string, unknown> | null }> };
      return doc.run.status === 'succeeded' && doc.lines.length >= 2 ? doc : false;
    }, 60_000, 500);
    expect(isolated.lines.map((l) => [l.line, l.fields])).toEqual([['from the worker', { in: 'worker' }], ['a child line', { step: 2 }]]);

    // The text form, by run id, from a process that is no node.
    const text = await runCli(['logs', 'isolated', '--run', isolated.run.runId], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url } });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^# isolated \\S+ attempt 1 \\(run ${isolated.run.runId}\\): succeeded`));
    expect(text.stdout).toMatch(/Z INFO {2}from the worker \{"in":"worker"\}\n/);
    expect(text.stdout).toMatch(/Z WARN {2}a child line \{"step":2\}\n/);

    // Over HTTP, from either node: the same lines, and ?after= pages.
    const listening = daemons[0]!.logs().find((l) => l.msg === 'http server listening');
    const base = String(listening?.url);
    const api = await fetch(`${base}/api/runs/${isolated.run.runId}/log`);
    expect(api.status).toBe(200);
    const body = (await api.json()) as { run: { job: string }; lines: Array<{ seq: number; line: string }>; next: number; done: boolean };
    expect(body.run.job).toBe('isolated');
    expect(body.lines.map((l) => l.line)).toEqual(['from the worker', 'a child line']);
    expect(body.done).toBe(true);
    const after = (await (await fetch(`${base}/api/runs/${isolated.run.runId}/log?after=${body.lines[0]!.seq}`)).json()) as { lines: Array<{ line: string }> };
    expect(after.lines.map((l) => l.line)).toEqual(['a child line']);
    expect((await fetch(`${base}/api/runs/999999999/log`)).status).toBe(404);
    expect((await fetch(`${base}/api/runs/1/log?after=x`)).status).toBe(400);

    // What is not there: exit 2 with one line naming it.
    const unknown = await runCli(['logs', 'nosuchjob'], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url } });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim()).toBe("scheduler: no run recorded for job 'nosuchjob'");
    const wrongRun = await runCli(['logs', 'talker', '--run', isolated.run.runId], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url } });
    expect(wrongRun.code).toBe(2);
    expect(wrongRun.stderr).toContain(`no run ${isolated.run.runId} of job 'talker' (that run is of job 'isolated')`);
    const both = await runCli(['logs', 'talker', '--run', '1', '--period', '2026-01-01T00:00:00Z'], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url } });
    expect(both.code).toBe(2);
  });
});
