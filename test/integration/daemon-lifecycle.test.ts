/**
 * The daemon's life as an operator sees it: SIGTERM with runs in flight (finished within the grace
 * period, or interrupted past it), broken job files and misbehaving bodies beside good jobs, and a
 * store or Redis quorum that cannot be reached at start.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../helpers/cli.js';
import { jobSource, type Effect } from '../helpers/job-sources.js';
import { freePort, freePorts, waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';
import type { Workspace } from '../helpers/workspace.js';
import { waitForLog } from './cluster-scenario.js';

const { workspace, envOf, start, history } = singleNode('cron-daemon-', 'lifecycle-node');

const effects = (ws: Workspace, event = 'start') => ws.records<Effect>('effects.jsonl').filter((e) => e.event === event);

// Side by side (describe.concurrent): each case has its own workspace and SQLite file, and its time
// bounds are seconds wide (a 1 s grace judged as 0.9-4 s, exits within 8-15 s).
describe.concurrent('daemon lifecycle', () => {
  it('SIGTERM during a 3-second run lets it finish: recorded succeeded, exit 0, nothing new starts', async () => {
    const ws = workspace();
    ws.writeJob('three-seconds.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`, `await sleep(ctx, 3000); record(ctx, 'finished'); return 'done';`));
    const d = start(ws);
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    const [first] = await waitFor('a run to start', () => {
      const s = effects(ws);
      return s.length > 0 ? s : false;
    }, 30_000);

    const signalledAt = Date.now();
    const code = await d.stop('SIGTERM');
    const exitedAt = Date.now();
    expect(code, d.errors).toBe(0);
    // It waited for the body: about the rest of its 3 seconds, far less than the 30 s grace period.
    expect(exitedAt - signalledAt).toBeLessThan(15_000);

    const started = effects(ws);
    const finished = effects(ws, 'finished');
    expect(started, 'only the run in flight at SIGTERM; no period started after it').toEqual([first]);
    expect(finished.map((e) => e.periodKey)).toEqual([first!.periodKey]);
    expect(effects(ws, 'aborted')).toEqual([]);

    const runs = await history(ws);
    const run = runs.find((r) => r.periodKey === first!.periodKey)!;
    expect(run).toMatchObject({ status: 'succeeded', result: 'done', nodeId: 'lifecycle-node' });
    expect(run.durationMs).toBeGreaterThanOrEqual(2900);
    // Periods that came due during the run were skipped for overlap, and recorded as such.
    expect(runs.filter((r) => r.periodKey !== first!.periodKey).every((r) => r.status === 'skipped' && r.reason === 'overlap')).toBe(true);
    expect(d.logs().some((l) => l.msg === 'stopped')).toBe(true);
  });

  it("past the grace period, SIGTERM aborts ctx.signal with 'shutdown' and records 'interrupted'; exit 0 within seconds", async () => {
    const ws = workspace();
    // One body listens to its signal; the other ignores it and keeps a 30 s timer alive.
    ws.writeJob('listens.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`, `await sleep(ctx, 30000); record(ctx, 'finished');`));
    ws.writeJob('ignores.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`, `await new Promise((resolve) => setTimeout(resolve, 30000)); record(ctx, 'finished');`));
    const d = start(ws, { SCHEDULER_GRACE_PERIOD: '1s' });
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    await waitFor('both runs to start', () => new Set(effects(ws).map((e) => e.job)).size === 2, 30_000);

    const signalledAt = Date.now();
    const code = await d.stop('SIGTERM');
    const elapsed = Date.now() - signalledAt;
    expect(code, d.errors).toBe(0);
    expect(elapsed, 'exit soon after the 1 s grace period').toBeLessThan(8000);
    expect(elapsed).toBeGreaterThanOrEqual(900);

    expect(effects(ws, 'aborted').map((e) => [e.job, e.reason])).toEqual([['listens', 'shutdown']]);
    // The signal fired once the 1 s grace period was over, not at SIGTERM and not 30 s later.
    const abortedAfter = effects(ws, 'aborted')[0]!.at - signalledAt;
    expect(abortedAfter).toBeGreaterThanOrEqual(900);
    expect(abortedAfter).toBeLessThan(4000);
    expect(effects(ws, 'finished')).toEqual([]);
    const all = (await history(ws)).filter((r) => r.status !== 'skipped');
    const runs = all.filter((r) => r.status !== 'pending');
    expect(runs.map((r) => [r.job, r.status]).sort()).toEqual([['ignores', 'interrupted'], ['listens', 'interrupted']]);
    for (const r of runs) {
      expect(r.error).toMatch(/shutdown/);
      expect(r.finishedAt).not.toBeNull();
    }
    // Each interrupted period is owed again at once (attempt 2, pending), for any node to resume.
    const owed = all.filter((r) => r.status === 'pending');
    expect(owed.map((r) => [r.job, r.attempt]).sort()).toEqual([['ignores', 2], ['listens', 2]]);
    for (const r of owed) {
      expect(runs.some((i) => i.periodKey === r.periodKey)).toBe(true);
      expect(r.startedAt).toBeNull();
      // At once: both instants are the store's clock in one transaction, read statement by statement
      // (on SQLite a few milliseconds apart on a loaded machine), against a retryDelay of 30 s.
      expect(Date.parse(r.runAt!)).toBeLessThanOrEqual(Date.parse(runs.find((i) => i.periodKey === r.periodKey)!.finishedAt!) + 1000);
    }
    expect(d.logs().some((l) => l.msg === 'grace period over: interrupting in-flight runs')).toBe(true);
  });

  it('broken job files and misbehaving bodies beside a good job: one error line per broken file, the good job keeps its schedule', async () => {
    const ws = workspace();
    ws.writeJob('good.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    ws.writeJob('bad-schedule.mjs', `export default { schedule: '61 * * * *', run() {} };\n`);
    ws.writeJob('explodes.ts', `throw new Error('kaboom while loading');\nexport default {};\n`);
    // Bodies that misbehave at run time: exits the process, throws from a stray callback.
    ws.writeJob('quitter.mjs', jobSource(`schedule: '*/2 * * * * *', catchUp: '5s',`, 'process.exit(3);'));
    ws.writeJob('stray.mjs', jobSource(`schedule: '*/2 * * * * *', catchUp: '5s',`, `setTimeout(() => { throw new Error('stray callback error'); }, 5);`));
    const d = start(ws);
    const starting = await waitForLog(d, 'the daemon to start', 'daemon starting');
    expect(starting.jobs).toEqual(['good', 'quitter', 'stray']);
    expect(starting.invalidFiles).toBe(2);

    const since = Date.now();
    await waitFor('the good job to run 5 periods', () => new Set(effects(ws).filter((e) => e.job === 'good' && new Date(e.scheduledAt).getTime() >= since).map((e) => e.periodKey)).size >= 5, 40_000, 250);
    await waitFor('quitter and stray to have run twice', () => effects(ws).filter((e) => e.job === 'quitter').length >= 2 && effects(ws).filter((e) => e.job === 'stray').length >= 2, 20_000);
    expect(d.proc.exitCode).toBeNull();

    const code = await d.stop('SIGTERM');
    expect(code, d.errors).toBe(0);

    const errorLines = d.output.split('\n').filter((l) => l.includes('"level":"error"'));
    for (const [file, field] of [['bad-schedule.mjs', "'schedule'"], ['explodes.ts', 'kaboom while loading']] as const) {
      const lines = errorLines.filter((l) => l.includes(file));
      expect(lines, `error lines naming ${file}`).toHaveLength(1);
      expect(lines[0]).toContain(field);
    }
    // The stray exception was logged, not fatal.
    expect(d.logs().some((l) => l.level === 'error' && JSON.stringify(l).includes('stray callback error'))).toBe(true);

    const runs = await history(ws);
    const good = runs.filter((r) => r.job === 'good' && r.status !== 'skipped');
    expect(good.length).toBeGreaterThanOrEqual(5);
    expect(good.every((r) => r.status === 'succeeded')).toBe(true);
    const quitter = runs.filter((r) => r.job === 'quitter' && r.status !== 'skipped');
    expect(quitter.length).toBeGreaterThanOrEqual(2);
    for (const r of quitter) {
      expect(r.status).toBe('failed');
      expect(r.error).toMatch(/process\.exit\(3\)/);
    }
    expect(runs.filter((r) => r.job === 'stray' && r.status !== 'skipped').every((r) => r.status === 'succeeded')).toBe(true);
    // Every good body that ran has its succeeded row and vice versa.
    expect(good.map((r) => r.periodKey).sort()).toEqual(effects(ws).filter((e) => e.job === 'good').map((e) => e.periodKey).sort());
  });

  describe('an unreachable store or Redis quorum at start: exit 4, one line, no password', () => {
    const secret = 's3cret-Pa55';
    async function unreachable(extra: Record<string, string>): Promise<CliResult> {
      const ws = workspace();
      ws.writeJob('good.mjs', jobSource(`schedule: '* * * * * *',`));
      const r = await runCli(['run'], { cwd: ws.dir, env: envOf(ws, extra), timeoutMs: 30_000 });
      expect(r.code, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(4);
      const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
      expect(lines, r.stderr).toHaveLength(1);
      // The daemon's stdout carries JSON log lines only (a driver's stack printed there is not one line).
      const notJson = r.stdout.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('{'));
      expect(notJson, `stdout:\n${r.stdout}`).toEqual([]);
      expect(r.stderr + r.stdout).not.toContain(secret);
      expect(effects(ws)).toEqual([]);
      return r;
    }

    it('MySQL/MariaDB: nothing listening, and a refused login', async () => {
      const port = await freePort();
      const refused = await unreachable({ SCHEDULER_STORE: `mysql://app:${secret}@127.0.0.1:${port}/cron` });
      expect(refused.stderr).toContain(`mysql://app:***@127.0.0.1:${port}/cron`);
      const denied = await unreachable({ SCHEDULER_STORE: `mysql://no_such_user:${secret}@127.0.0.1:3306/test` });
      expect(denied.stderr).toMatch(/denied/i);
    });

    it('PostgreSQL: nothing listening', async () => {
      const port = await freePort();
      const r = await unreachable({ SCHEDULER_STORE: `postgres://app:${secret}@127.0.0.1:${port}/cron` });
      expect(r.stderr).toContain(`postgres://app:***@127.0.0.1:${port}/cron`);
    });

  });

  it('SIGHUP with nothing changed reloads and changes nothing (the runs go on); SIGTERM sent while the daemon is still starting is a clean stop', async () => {
    const ws = workspace();
    ws.writeJob('good.mjs', jobSource(`schedule: '* * * * * *',`));
    const d = start(ws);
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    d.proc.kill('SIGHUP');
    const done = await waitFor('the reload to end', () => d.logs().find((l) => /^reload done/.test(String(l.msg))) ?? false, 30_000);
    expect(done).toMatchObject({ added: 0, removed: 0, changed: 0, jobs: ['good'] });
    const before = effects(ws).length;
    await waitFor('the daemon to keep running after SIGHUP', () => effects(ws).length >= before + 2, 15_000);
    expect(await d.stop('SIGTERM')).toBe(0);

    // A SIGTERM at once, before the jobs are loaded and the store is open.
    const early = start(ws);
    // Sent as soon as the program's first line holds the signals: before that, node itself is still
    // starting, and its own SIGTERM handler (there from node's start, to restore the terminal) exits
    // by the signal. So the mark is SIGHUP, which node does not catch and the first line does.
    await waitFor('the program to hold the signals', () => catchesSighup(early.proc.pid), 15_000);
    early.proc.kill('SIGTERM');
    const code = await early.exited;
    expect(code, `a clean exit, not death by the signal\n${early.output}${early.errors}`).toBe(0);
  });

  it('Redis: no master answers at start: the daemon starts anyway, runs its periods through the run row, warns once, stops cleanly', async () => {
    const secret = 's3cret-Pa55';
    const ws = workspace();
    ws.writeJob('good.mjs', jobSource(`schedule: '* * * * * *',`));
    const ports = await freePorts(3);
    const d = start(ws, { SCHEDULER_REDIS: ports.map((p) => `redis://:${secret}@127.0.0.1:${p}`).join(',') });
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    await waitFor('three periods to run', () => effects(ws).length >= 3, 30_000);
    expect(await d.stop('SIGTERM')).toBe(0);
    const warnings = d.logs().filter((l) => l.msg === 'Redis quorum unreachable: claims go on through the run row alone');
    expect(warnings).toHaveLength(1);
    expect(d.output + d.errors).not.toContain(secret);
    const runs = (await history(ws)).filter((r) => r.job === 'good' && r.status !== 'skipped');
    expect(runs.length).toBeGreaterThanOrEqual(3);
    expect(runs.every((r) => r.status === 'succeeded')).toBe(true);
  });
});

/**
 * Whether the process catches SIGHUP now (Linux: bit 1 of SigCgt in /proc/<pid>/status). Node itself
 * catches SIGINT and SIGTERM from its start, so their bits say nothing of the program's handlers.
 */
function catchesSighup(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('SigCgt:'));
    return line !== undefined && (BigInt(`0x${line.slice(7).trim()}`) & 1n) !== 0n;
  } catch {
    return false;
  }
}
