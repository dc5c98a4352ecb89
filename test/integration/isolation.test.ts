/**
 * Killable job code (`isolation: 'worker'`) and outcomes that say what happened, through the real
 * `bin/scheduler` (daemon and run-once) on SQLite: a `for (;;) {}` body is recorded timed_out and its
 * worker terminated while the node's other jobs keep their schedule; ctx and ctx.log work in the
 * worker; shutdown past the grace period and process.exit() in a worker; the event-loop watchdog for
 * inline bodies; results over the limit or not JSON-serialisable; thrown non-Errors.
 */
import { readFileSync } from 'node:fs';
import Sqlite from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../helpers/cli.js';
import { jobSource, type Effect } from '../helpers/job-sources.js';
import { waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';
import type { HistoryRun, Workspace } from '../helpers/workspace.js';
import { waitForLog } from './cluster-scenario.js';

const { workspace, envOf, start, history } = singleNode('cron-isolation-', 'iso-node');

function runOnce(ws: Workspace, args: string[], extra: Record<string, string> = {}): Promise<CliResult> {
  return runCli(['run-once', ...args], { cwd: ws.dir, env: envOf(ws, extra), timeoutMs: 60_000 });
}

const effects = (ws: Workspace, event = 'start') => ws.records<Effect>('effects.jsonl').filter((e) => e.event === event);

/** JSON log lines of a run-once (stderr). */
function stderrLogs(r: CliResult): Array<Record<string, unknown>> {
  return r.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** CPU time (user + system, ms) of a process so far. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/** A 6-field expression that fires once a minute, at the second `secondsAhead` from now. */
function onceAMinuteFromNow(secondsAhead: number): string {
  return `${new Date(Date.now() + secondsAhead * 1000).getUTCSeconds()} * * * * *`;
}

type RunView = HistoryRun & { resultNote: string | null };

describe("isolation: 'worker'", () => {
  it('a for (;;) {} body with timeout 2s is recorded timed_out within 3 s and its worker terminated; an every-second inline job misses no second; SIGTERM exits 0', async () => {
    const ws = workspace();
    ws.writeJob('tick.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    ws.writeJob('spin.mjs', jobSource(`schedule: '${onceAMinuteFromNow(6)}', timeout: '2s', isolation: 'worker',`, 'for (;;) {}'));
    const d = start(ws);
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');

    const spinStart = await waitFor('the spinning body to start', () => effects(ws).find((e) => e.job === 'spin') ?? false, 90_000);
    const [spin] = await waitFor('the spinning run to be recorded', async () => {
      const runs = (await history(ws, 'spin')).filter((r) => r.status !== 'running');
      return runs.length > 0 ? runs : false;
    }, 30_000, 250);
    expect(spin).toMatchObject({ status: 'timed_out', periodKey: spinStart.periodKey, attempt: 1 });
    expect(spin!.error).toMatch(/timed out after 2000ms/);
    const finishedAt = Date.parse(spin!.finishedAt!);
    expect(finishedAt - Date.parse(spin!.startedAt!), 'recorded within 3 s of the claim').toBeLessThanOrEqual(3000);
    expect(finishedAt - spinStart.at, 'recorded within 3 s of the body start').toBeLessThanOrEqual(3000);

    // The worker is terminated half a second after its timeout: the process stops burning a core.
    await waitForLog(d, 'the worker to be terminated', 'the body did not end within 500 ms of its signal (timeout): terminating its worker', 15_000);
    const pid = d.proc.pid!;
    const cpuBefore = cpuMs(pid);
    const wallBefore = Date.now();
    const tickAfter = Date.now();
    await waitFor('two more ticks', () => effects(ws).filter((e) => e.job === 'tick' && e.at > tickAfter).length >= 2, 20_000);
    const cpuUsed = cpuMs(pid) - cpuBefore;
    const wall = Date.now() - wallBefore;
    expect(cpuUsed, `CPU ${cpuUsed} ms over ${wall} ms: the spinning worker still runs`).toBeLessThan(wall * 0.5);

    expect(await d.stop('SIGTERM')).toBe(0);

    // Every second from a second before the spin started to a second after it was recorded has its
    // tick, on time (a blocked main thread would have made them late, then catch-up or missed).
    const ticks = (await history(ws, 'tick')).filter((r) => r.status !== 'skipped');
    const bySecond = new Map(ticks.map((r) => [Date.parse(r.scheduledAt), r]));
    const tickStarts = new Map(effects(ws).filter((e) => e.job === 'tick').map((e) => [Date.parse(e.scheduledAt), e.at]));
    const from = Math.floor(spinStart.at / 1000) * 1000 - 1000;
    for (let s = from; s <= Math.floor(finishedAt / 1000) * 1000 + 1000; s += 1000) {
      const r = bySecond.get(s);
      expect(r, `tick of ${new Date(s).toISOString()}`).toBeDefined();
      expect(r!.status).toBe('succeeded');
      expect(r!.trigger).toBe('schedule');
      expect(tickStarts.get(s)! - s, `tick of ${new Date(s).toISOString()} started late`).toBeLessThan(900);
    }
  });

  // This case and the next side by side (it.concurrent): run-once and list on a workspace of their
  // own each, judging no time. The daemon cases around them judge ticks and CPU, and run alone.
  it.concurrent('ctx in a worker: the same fields, a working signal, and ctx.log lines bound like an inline one; a child logger too; --dry-run', async () => {
    const ws = workspace();
    const body = `
      const { isMainThread, threadId } = await import('node:worker_threads');
      record(ctx, 'ctx', { isMainThread, threadId, scheduledAtIsDate: ctx.scheduledAt instanceof Date, signalIsAbortSignal: ctx.signal instanceof AbortSignal, aborted: ctx.signal.aborted, logIsFunction: typeof ctx.log.info });
      ctx.log.info({ from: 'the worker' }, 'hello from the worker');
      ctx.log.child({ step: 'two' }).warn('a child line');
      return { threadId, job: ctx.job };`;
    ws.writeJob('in-worker.mjs', jobSource(`schedule: '0 0 1 1 *', isolation: 'worker',`, body));
    ws.writeJob('in-line.mjs', jobSource(`schedule: '0 0 1 1 *',`, `ctx.log.info({ from: 'inline' }, 'hello inline');`));
    const r = await runOnce(ws, ['in-worker', 'in-line']);
    expect(r.code, r.stderr).toBe(0);

    const [w] = effects(ws, 'ctx');
    expect(w).toMatchObject({ isMainThread: false, scheduledAtIsDate: true, signalIsAbortSignal: true, aborted: false, logIsFunction: 'function' });
    const started = effects(ws).find((e) => e.job === 'in-worker')!;
    const [run] = (await history(ws, 'in-worker')) as RunView[];
    expect(run).toMatchObject({ status: 'succeeded', result: { threadId: w!.threadId, job: 'in-worker' }, resultNote: null });
    expect(started).toMatchObject({ job: 'in-worker', periodKey: run!.periodKey, scheduledAt: run!.scheduledAt, attempt: 1, trigger: 'manual', nodeId: 'iso-node', runId: run!.id, dryRun: false });

    const logs = stderrLogs(r);
    const hello = logs.find((l) => l.msg === 'hello from the worker');
    const child = logs.find((l) => l.msg === 'a child line');
    const inline = logs.find((l) => l.msg === 'hello inline');
    expect(hello).toMatchObject({ level: 'info', node: 'iso-node', job: 'in-worker', periodKey: run!.periodKey, runId: run!.id, attempt: 1, from: 'the worker' });
    expect(child).toMatchObject({ level: 'warn', job: 'in-worker', runId: run!.id, step: 'two' });
    // The same keys, in the same order, as an inline body's line.
    expect(Object.keys(hello!)).toEqual(Object.keys(inline!));
    expect(typeof hello!.time).toBe('string');

    const dry = await runOnce(ws, ['in-worker', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(effects(ws).filter((e) => e.job === 'in-worker').map((e) => e.dryRun)).toEqual([false, true]);
  });

  it.concurrent('the isolation setting is the default of jobs that do not set their own; a bad value is refused with one line', async () => {
    const ws = workspace();
    const body = `const { isMainThread } = await import('node:worker_threads'); return { isMainThread };`;
    ws.writeJob('default.mjs', jobSource(`schedule: '0 0 1 1 *',`, body));
    ws.writeJob('own.mjs', jobSource(`schedule: '0 0 1 1 *', isolation: 'inline',`, body));
    const r = await runOnce(ws, ['default', 'own', '--json'], { SCHEDULER_ISOLATION: 'worker' });
    expect(r.code, r.stderr).toBe(0);
    const byJob = new Map((await history(ws)).map((x) => [x.job, x.result]));
    expect(byJob.get('default')).toEqual({ isMainThread: false });
    expect(byJob.get('own')).toEqual({ isMainThread: true });

    const list = await runCli(['list', '--json'], { cwd: ws.dir, env: envOf(ws, { SCHEDULER_ISOLATION: 'worker' }) });
    expect(list.code, list.stderr).toBe(0);
    const listed = (JSON.parse(list.stdout) as { jobs: Array<{ name: string; isolation: string }> }).jobs;
    expect(listed.map((j) => [j.name, j.isolation])).toEqual([['default', 'worker'], ['own', 'inline']]);

    const bad = await runOnce(ws, ['default'], { SCHEDULER_ISOLATION: 'thread' });
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toEqual(["scheduler: invalid setting SCHEDULER_ISOLATION=thread: expected 'inline' or 'worker'"]);

    ws.writeJob('typo.mjs', `export default { schedule: '0 0 1 1 *', isolation: 'process', run() {} };\n`);
    const v = await runCli(['validate'], { cwd: ws.dir, env: envOf(ws) });
    expect(v.code).toBe(2);
    expect(v.stdout + v.stderr).toContain(`typo.mjs: field 'isolation' = "process": expected 'inline' or 'worker'`);
  });

  it('a worker body that ignores its timeout is terminated half a second after its timeout: its side effects stop, the node goes on', async () => {
    const ws = workspace();
    ws.writeJob('tick.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    // Ignores ctx.signal: keeps writing every 100 ms.
    ws.writeJob('deaf.mjs', jobSource(`schedule: '${onceAMinuteFromNow(5)}', timeout: '1s', isolation: 'worker',`,
      `setInterval(() => record(ctx, 'still-running'), 100); await new Promise(() => {});`));
    const d = start(ws);
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    const killed = await waitForLog(d, 'the worker to be terminated', 'the body did not end within 500 ms of its signal (timeout): terminating its worker', 90_000);
    const killedAt = Date.parse(String(killed.time));
    expect(effects(ws, 'still-running').length).toBeGreaterThan(5);
    await waitFor('three more ticks', () => effects(ws).filter((e) => e.job === 'tick' && e.at > killedAt + 200).length >= 3, 20_000);
    const late = effects(ws, 'still-running').filter((e) => e.at > killedAt + 200);
    expect(late, 'side effects after the worker was terminated').toEqual([]);
    expect(await d.stop('SIGTERM')).toBe(0);
    const [deaf] = await history(ws, 'deaf');
    expect(deaf).toMatchObject({ status: 'timed_out' });
  });

  it("lease loss (another node took the row) aborts the worker's ctx.signal with 'lease-lost', and a body that goes on is terminated within half the self-fencing margin", async () => {
    const ws = workspace();
    ws.writeJob('tick.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    // Sees its signal (records the reason) but does not stop.
    ws.writeJob('stubborn.mjs', jobSource(`schedule: '${onceAMinuteFromNow(5)}', lockTtl: '1s', isolation: 'worker',`,
      `ctx.signal.addEventListener('abort', () => record(ctx, 'aborted', { reason: ctx.signal.reason }));
       setInterval(() => record(ctx, 'still-running'), 100); await new Promise(() => {});`));
    const d = start(ws, { SCHEDULER_GRACE_PERIOD: '1s' }); // attempt 2 is as stubborn
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    await waitFor('the stubborn body to run', () => effects(ws, 'still-running').length > 0, 90_000);
    // Another node's takeover, as the store sees it: the row is no longer this node's.
    const db = new Sqlite(ws.path('scheduler.db'));
    try {
      db.pragma('busy_timeout = 10000');
      const changed = db.prepare("UPDATE scheduler_runs SET node_id = 'other-node' WHERE job = 'stubborn' AND status = 'running'").run().changes;
      expect(changed).toBe(1);
    } finally {
      db.close();
    }
    const [aborted] = await waitFor('the abort in the worker', () => {
      const a = effects(ws, 'aborted');
      return a.length > 0 ? a : false;
    }, 15_000);
    expect(aborted!.reason).toBe('lease-lost');
    // lockTtl 1s: the self-fencing margin is 250 ms, so the worker gets half of it (125 ms), not the 1 s of a timeout.
    const killed = await waitForLog(d, 'the worker to be terminated', 'the body did not end within 125 ms of its signal (lease-lost): terminating its worker', 15_000);
    const killedAt = Date.parse(String(killed.time));
    expect(killedAt - aborted!.at).toBeGreaterThanOrEqual(100);
    expect(killedAt - aborted!.at).toBeLessThan(1000);
    await waitFor('three more ticks', () => effects(ws).filter((e) => e.job === 'tick' && e.at > killedAt + 200).length >= 3, 20_000);
    // The row, abandoned by the sweep once its lease ran out, is owed again as attempt 2 (which runs its
    // own worker); attempt 1's worker wrote nothing after it was terminated.
    const first = effects(ws, 'still-running')[0]!;
    expect(first.attempt).toBe(1);
    expect(effects(ws, 'still-running').filter((e) => e.runId === first.runId && e.at > killedAt + 200), 'side effects after the worker was terminated').toEqual([]);
    expect(await d.stop('SIGTERM')).toBe(0);
    expect(d.logs().some((l) => l.job === 'stubborn' && l.msg === 'lease lost: aborting the run')).toBe(true);
  });

  it('SIGTERM past the grace period: a worker body that ignores its signal is recorded interrupted and the node exits 0 promptly', async () => {
    const ws = workspace();
    ws.writeJob('spin.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s', isolation: 'worker',`, 'for (;;) {}'));
    const d = start(ws, { SCHEDULER_GRACE_PERIOD: '1s' });
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    await waitFor('the spinning body to start', () => effects(ws).length > 0, 30_000);
    const signalledAt = Date.now();
    const code = await d.stop('SIGTERM');
    const elapsed = Date.now() - signalledAt;
    expect(code, d.errors).toBe(0);
    expect(elapsed, 'exit soon after the 1 s grace period').toBeLessThan(6000);
    expect(elapsed).toBeGreaterThanOrEqual(900);
    const runs = (await history(ws, 'spin')).filter((r) => r.status !== 'skipped');
    expect(runs.filter((r) => r.status !== 'pending').map((r) => r.status)).toEqual(['interrupted']);
    expect(runs.filter((r) => r.status === 'pending').map((r) => r.attempt)).toEqual([2]);
    expect(d.logs().some((l) => l.msg === 'stopped')).toBe(true);
  });

  it('process.exit() in a worker body ends its worker, not the node: recorded failed with a clear error; the next job runs', async () => {
    const ws = workspace();
    ws.writeJob('quitter.mjs', jobSource(`schedule: '0 0 1 1 *', isolation: 'worker',`, 'process.exit(3);'));
    ws.writeJob('after.mjs', jobSource(`schedule: '0 0 1 1 *',`, `return 'still here';`));
    const r = await runOnce(ws, ['quitter', 'after']);
    expect(r.code, r.stderr).toBe(1);
    const byJob = new Map((await history(ws)).map((x) => [x.job, x]));
    expect(byJob.get('quitter')!.status).toBe('failed');
    expect(byJob.get('quitter')!.error).toBe("process.exit(3) was called by the job body: it ended the body's worker (exit code 3), not the node");
    expect(byJob.get('after')).toMatchObject({ status: 'succeeded', result: 'still here' });
  });
});

describe('the event-loop watchdog (inline bodies)', () => {
  it('an inline body that blocks the loop for 1.5 s is named in one warning with the blocked time', async () => {
    const ws = workspace();
    ws.writeJob('tick.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    ws.writeJob('hog.mjs', jobSource(`schedule: '${onceAMinuteFromNow(5)}',`, `const t = Date.now(); while (Date.now() - t < 1500) {} return 'done';`));
    const d = start(ws);
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    const line = await waitFor('the watchdog line', () => d.logs().find((l) => typeof l.msg === 'string' && l.msg.startsWith('event loop blocked') && (l.jobs as string[]).includes('hog')) ?? false, 90_000);
    expect(line.level).toBe('warn');
    expect(line.jobs).toEqual(['hog']);
    expect(line.blockedMs).toBeGreaterThanOrEqual(1200);
    expect(line.blockedMs).toBeLessThan(5000);
    expect(line.msg).toMatch(/^event loop blocked for \d+ ms while inline job body hog ran/);
    const [hog] = await waitFor('the hog run', async () => {
      const runs = (await history(ws, 'hog')).filter((r) => r.status === 'succeeded');
      return runs.length > 0 ? runs : false;
    }, 20_000, 250);
    expect((line.runs as Array<{ runId: string }>)[0]!.runId).toBe(hog!.id);
    expect(await d.stop('SIGTERM')).toBe(0);
    // One line for the one stall (a stall of the shared machine itself would name no job, or the tick job only).
    expect(d.logs().filter((l) => typeof l.msg === 'string' && l.msg.startsWith('event loop blocked') && (l.jobs as string[]).includes('hog'))).toHaveLength(1);
  });
});

// run-once on a workspace of its own per case, judging no time: side by side.
describe.concurrent('outcomes that say what happened', () => {
  const results = {
    big: `return 'x'.repeat(3000);`,
    fits: `return 'y'.repeat(1000);`,
    bigint: `return { total: 12345678901234567890n };`,
    circular: `const a = { name: 'a' }; a.self = a; return a;`,
  };

  for (const isolation of ['inline', 'worker'] as const) {
    it(`${isolation}: a result over maxResultSize or not JSON-serialisable is stored null with a resultNote and a warning; one that fits is stored`, async () => {
      const ws = workspace();
      for (const [name, body] of Object.entries(results)) ws.writeJob(`${name}.mjs`, jobSource(`schedule: '0 0 1 1 *', isolation: '${isolation}',`, body));
      const r = await runOnce(ws, Object.keys(results), { SCHEDULER_MAX_RESULT_SIZE: '2KB' });
      expect(r.code, r.stderr).toBe(0);
      const byJob = new Map(((await history(ws)) as RunView[]).map((x) => [x.job, x]));
      for (const job of Object.keys(results)) expect(byJob.get(job)!.status, job).toBe('succeeded');
      expect(byJob.get('fits')).toMatchObject({ result: 'y'.repeat(1000), resultNote: null });
      expect(byJob.get('big')).toMatchObject({ result: null, resultNote: 'result not stored: its JSON is 3002 bytes, over the 2048-byte limit (maxResultSize)' });
      expect(byJob.get('bigint')).toMatchObject({ result: null, resultNote: expect.stringMatching(/^result not stored: not JSON-serialisable \(.*BigInt.*\)$/) });
      expect(byJob.get('circular')).toMatchObject({ result: null, resultNote: expect.stringMatching(/^result not stored: not JSON-serialisable \(.*circular.*\)$/i) });
      const warnings = stderrLogs(r).filter((l) => l.level === 'warn' && l.resultNote);
      expect(warnings.map((l) => l.job).sort()).toEqual(['big', 'bigint', 'circular']);
      for (const w of warnings) expect(w.resultNote).toBe(byJob.get(String(w.job))!.resultNote);

      // The human history shows the note where an error would be.
      const text = await runCli(['history', 'big'], { cwd: ws.dir, env: envOf(ws) });
      expect(text.stdout).toContain('result not stored: its JSON is 3002 bytes');
    });

    it(`${isolation}: a thrown plain object, string, number or null is stored as its JSON with its type; an Error keeps message and stack`, async () => {
      const ws = workspace();
      const throws = {
        object: `throw { code: 'E_QUOTA', retryIn: 30 };`,
        string: `throw 'no more';`,
        number: `throw 42;`,
        nothing: `throw null;`,
        bigint: `throw 7n;`,
        error: `throw new TypeError('a real error');`,
      };
      for (const [name, body] of Object.entries(throws)) ws.writeJob(`${name}.mjs`, jobSource(`schedule: '0 0 1 1 *', isolation: '${isolation}',`, body));
      const r = await runOnce(ws, Object.keys(throws), { SCHEDULER_LOG_LEVEL: 'warn' });
      expect(r.code).toBe(1);
      const byJob = new Map((await history(ws)).map((x) => [x.job, x]));
      for (const job of Object.keys(throws)) expect(byJob.get(job)!.status, job).toBe('failed');
      expect(byJob.get('object')!.error).toBe('thrown object: {"code":"E_QUOTA","retryIn":30}');
      expect(byJob.get('string')!.error).toBe('thrown string: "no more"');
      expect(byJob.get('number')!.error).toBe('thrown number: 42');
      expect(byJob.get('nothing')!.error).toBe('thrown null: null');
      expect(byJob.get('bigint')!.error).toBe('thrown bigint: 7');
      expect(byJob.get('error')!.error).toBe('a real error');
      // The stack is stored for an Error (the error_stack column; history --json does not show it), none for the others.
      const db = new Sqlite(ws.path('scheduler.db'), { readonly: true });
      try {
        const stacks = new Map((db.prepare('SELECT job, error_stack FROM scheduler_runs').all() as Array<{ job: string; error_stack: string | null }>).map((x) => [x.job, x.error_stack]));
        expect(stacks.get('error')).toMatch(/^TypeError: a real error\n\s+at .*error\.mjs/);
        for (const job of ['object', 'string', 'number', 'nothing', 'bigint']) expect(stacks.get(job), job).toBeNull();
      } finally {
        db.close();
      }
    });
  }
});
