/**
 * `bin/scheduler run-once` as a user drives it (systemd timer, Kubernetes CronJob, by hand): the pass
 * form, manual runs, `--period`, `--dry-run`, `--json`, broken job files, timeouts and bodies that
 * misbehave. Each case counts the job bodies' own side effects, not only the rows.
 */
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BIN, Daemon, cleanEnv, runCli, type CliResult } from '../helpers/cli.js';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { jobSource, type Effect } from '../helpers/job-sources.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import { Workspace, type HistoryRun } from '../helpers/workspace.js';
import { waitForLog } from './cluster-scenario.js';

/** A project folder: jobs, side-effect file, store (SQLite in the folder unless given). */
class Project {
  readonly ws = new Workspace('cron-run-once-');
  readonly env: Record<string, string>;

  constructor(options: { store?: string; redis?: string[]; env?: Record<string, string> } = {}) {
    this.env = {
      SCHEDULER_STORE: options.store ?? this.ws.sqliteStore(),
      SCHEDULER_REDIS: (options.redis ?? []).join(','),
      SCHEDULER_JOBS_DIR: this.ws.jobsDir,
      SIDE_EFFECTS: this.ws.path('effects.jsonl'),
      ...options.env,
    };
  }

  job(file: string, fields: string, body = ''): void {
    this.ws.writeJob(file, jobSource(fields, body));
  }

  cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
    return runCli(args, { cwd: this.ws.dir, env: { ...this.env, ...env } });
  }

  effects(event = 'start'): Effect[] {
    return this.ws.records<Effect>('effects.jsonl').filter((e) => e.event === event);
  }

  async history(...args: string[]): Promise<HistoryRun[]> {
    const r = await this.cli(['history', '--json', '--limit', '1000', ...args]);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as HistoryRun[];
  }

  /** A daemon (`bin/scheduler run`) on this project, logging at info to its stdout; killed after the case. */
  daemon(nodeId: string): Daemon {
    const d = new Daemon([], { cwd: this.ws.dir, env: { ...this.env, SCHEDULER_HTTP: 'off', SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_NODE_ID: nodeId } });
    this.kills.push(() => d.stop('SIGKILL', 5000));
    return d;
  }

  /** A CLI command left running (to be killed by the case); its exit is awaited after the case. */
  spawnCli(args: string[]): { kill: () => Promise<void> } {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: this.ws.dir, env: cleanEnv(this.env), stdio: 'ignore' });
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    const kill = async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    };
    this.kills.push(kill);
    return { kill };
  }

  readonly kills: Array<() => Promise<unknown>> = [];
}

const projects: Project[] = [];
function project(options?: ConstructorParameters<typeof Project>[0]): Project {
  const p = new Project(options);
  projects.push(p);
  return p;
}
// A few cases run side by side (it.concurrent below) and share this list: clean up once none runs.
let running = 0;
beforeEach(() => {
  running++;
});
afterEach(async () => {
  if (--running > 0) return;
  for (const p of projects.splice(0)) {
    for (const kill of p.kills.splice(0)) await kill();
    p.ws.cleanup();
  }
});

/** A 6-field expression (UTC) whose only period this year is `at`, a whole second. */
function onceAt(at: Date): string {
  return `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} ${at.getUTCDate()} ${at.getUTCMonth() + 1} *`;
}

/** The next whole second at least `leadMs` from now. */
function secondsAhead(leadMs: number): Date {
  return new Date(Math.ceil((Date.now() + leadMs) / 1000) * 1000);
}

/** A daemon whose job has one period, `at`; resolves once it scheduled it (well before `at`). */
async function daemonFor(p: Project, nodeId: string, job: string, at: Date): Promise<Daemon> {
  const d = p.daemon(nodeId);
  const started = await waitForLog(d, 'the daemon to start', 'scheduler started', 30_000);
  expect((started.jobs as Array<{ job: string; next: string }>).find((j) => j.job === job)?.next).toBe(at.toISOString());
  expect(Date.now(), 'the daemon started before the period').toBeLessThan(at.getTime() - 200);
  return d;
}

/** Pino JSON lines on a command's stderr. */
function logLines(stderr: string): Array<Record<string, unknown>> {
  return stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

const sleepMs = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Leaves attempt 2 of `flaky@period` owed (pending, due in a minute): a manual run of the period whose
 * attempt 1 fails is killed (SIGKILL) while it waits for the retry.
 */
async function plantPending(p: Project, period: string): Promise<HistoryRun> {
  p.job('flaky.mjs', `schedule: '0 0 * * *', retries: 1, retryDelay: '1m',`, `if (ctx.attempt === 1) throw new Error('attempt 1 fails');`);
  const manual = p.spawnCli(['run-once', 'flaky', '--period', period, '--node-id', 'killed']);
  const pending = await waitFor('attempt 2 to be owed', async () => (await p.history('--status', 'pending'))[0], 30_000, 200);
  await manual.kill();
  expect(p.effects().map((e) => [e.periodKey, e.attempt])).toEqual([[`flaky@${period}`, 1]]);
  return pending;
}

function expectCode(r: CliResult, code: number): void {
  expect(r.code, `exit code\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(code);
}

function lastMidnightUtc(): Date {
  const d = new Date();
  d.setUTCHours(0, 0, 0, 0);
  return d;
}

function duplicates(keys: string[]): string[] {
  const seen = new Set<string>();
  return keys.filter((k) => (seen.has(k) ? true : (seen.add(k), false)));
}

/**
 * Two passes started at the same moment over jobs with several due periods each (coalesce false, so
 * both race for every period): each period's body runs exactly once, and the rows agree.
 */
async function concurrentPasses(p: Project): Promise<void> {
  p.job('every-minute.mjs', `schedule: '* * * * *', catchUp: '5m', coalesce: false, overlap: 'allow',`, 'await sleep(ctx, 100);');
  p.job('half-minute.ts', `schedule: '*/30 * * * * *', catchUp: '3m', coalesce: false, overlap: 'allow',`, 'await sleep(ctx, 50);');
  // Tables first, so that both passes race for periods rather than for the migration.
  expectCode(await p.cli(['migrate']), 0);
  const before = Date.now();
  const [a, b] = await Promise.all([p.cli(['run-once', '--node-id', 'pass-a']), p.cli(['run-once', '--node-id', 'pass-b'])]);
  const after = Date.now();
  expectCode(a, 0);
  expectCode(b, 0);

  const effects = p.effects();
  expect(duplicates(effects.map((e) => e.periodKey)), 'periods whose body ran twice').toEqual([]);
  // Every period that was due for both passes, whenever each started, ran (once).
  const expected: string[] = [];
  for (const [job, stepMs, catchUpMs] of [['every-minute', 60_000, 300_000], ['half-minute', 30_000, 180_000]] as const) {
    for (let t = Math.floor(before / stepMs) * stepMs; t > after - catchUpMs; t -= stepMs) expected.push(`${job}@${new Date(t).toISOString()}`);
  }
  expect(expected.length).toBeGreaterThanOrEqual(8);
  const ran = new Set(effects.map((e) => e.periodKey));
  expect(expected.filter((k) => !ran.has(k)), 'due periods that did not run').toEqual([]);
  for (const e of effects) {
    expect(e.attempt).toBe(1);
    expect(['pass-a', 'pass-b']).toContain(e.nodeId);
  }

  const runs = await p.history();
  expect(runs.filter((r) => r.status !== 'succeeded')).toEqual([]);
  const line = (x: { periodKey: string; nodeId: string; attempt: number }) => `${x.periodKey} ${x.nodeId} ${x.attempt}`;
  expect(runs.map(line).sort(), 'rows vs. side effects').toEqual(effects.map(line).sort());
}

describe('run-once on SQLite', () => {
  // The cases are CLI commands on a project (and SQLite file) of their own each, CPU-bound and judging
  // no lease or tight timing: they run side by side (it.concurrent, vitest's 5 at a time), which uses
  // both cores. The waiting cases (daemons, leases) keep their own group, and the timeout case, which
  // judges a body's cut to within 2 s, runs alone.
  it.concurrent('a pass runs the due periods that have no row; a second pass finds nothing due', async () => {
    const p = project();
    p.job('daily.mjs', `schedule: '0 0 * * *', catchUp: '2d',`);
    p.job('daily-ts.ts', `schedule: '0 0 * * *', catchUp: '2d', coalesce: false,`);
    p.job('yearly.mjs', `schedule: '0 0 1 1 *', catchUp: '1m',`); // its last period is older than catchUp
    p.job('disabled.mjs', `schedule: '0 0 * * *', catchUp: '2d', enabled: false,`);
    const midnight = lastMidnightUtc();
    const yesterday = new Date(midnight.getTime() - 86_400_000);

    const first = await p.cli(['run-once']);
    expectCode(first, 0);
    const effects = p.effects();
    expect(effects.map((e) => `${e.periodKey} ${e.trigger} ${e.attempt}`).sort()).toEqual([
      `daily-ts@${yesterday.toISOString()} catch-up 1`,
      `daily-ts@${midnight.toISOString()} catch-up 1`,
      `daily@${midnight.toISOString()} catch-up 1`,
    ].sort());
    expect(effects.every((e) => e.dryRun === false)).toBe(true);

    const second = await p.cli(['run-once']);
    expectCode(second, 0);
    expect(second.stdout).toContain('nothing was due');
    expect(p.effects()).toHaveLength(3);

    const runs = await p.history();
    const daily = runs.filter((r) => r.job === 'daily');
    expect(daily.find((r) => r.status === 'succeeded')?.periodKey).toBe(`daily@${midnight.toISOString()}`);
    // The older period in the window was coalesced into the latest: recorded, never silently dropped.
    expect(daily.filter((r) => r.status === 'skipped').map((r) => [r.periodKey, r.reason])).toEqual([[`daily@${yesterday.toISOString()}`, 'coalesced']]);
    expect(runs.filter((r) => r.job === 'yearly' || r.job === 'disabled')).toEqual([]);
    expect(runs.filter((r) => r.job === 'daily-ts').map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });

  it.concurrent('a pass with a failing job exits 1; the other jobs still run', async () => {
    const p = project();
    p.job('good.mjs', `schedule: '0 0 * * *', catchUp: '2d',`);
    p.job('bad.mjs', `schedule: '0 0 * * *', catchUp: '2d',`, `throw new Error('disk full at ' + ctx.periodKey);`);
    const r = await p.cli(['run-once']);
    expectCode(r, 1);
    expect(p.effects().map((e) => e.job).sort()).toEqual(['bad', 'good']);
    const runs = await p.history();
    const bad = runs.find((x) => x.job === 'bad' && x.status !== 'skipped')!;
    expect(bad.status).toBe('failed');
    expect(bad.error).toBe(`disk full at ${bad.periodKey}`);
    expect(runs.find((x) => x.job === 'good' && x.status !== 'skipped')!.status).toBe('succeeded');
    expect(r.stdout).toMatch(/bad\s.*failed/);
  });

  it.concurrent('two passes started at the same moment: each period runs exactly once', async () => {
    await concurrentPasses(project());
  });

  it.concurrent('run-once <job> --period <a future period> exits 2 naming the next due instant; nothing runs, no row', async () => {
    const p = project();
    p.job('daily.mjs', `schedule: '0 0 * * *',`);
    const next = new Date(lastMidnightUtc().getTime() + 86_400_000);
    const later = new Date(next.getTime() + 86_400_000);
    for (const period of [next, later]) {
      const r = await p.cli(['run-once', 'daily', '--period', period.toISOString()]);
      expectCode(r, 2);
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toContain(`next period is due at ${next.toISOString()}`);
    }
    expect(p.effects()).toEqual([]);
    expect(await p.history()).toEqual([]);
  });

  it.concurrent('a pass waits for the retry its failed run made owed and runs it: exit 0, the period judged by its last attempt', async () => {
    const p = project();
    p.job('flaky.mjs', `schedule: '0 0 * * *', catchUp: '2d', retries: 1, retryDelay: '1s',`, `if (ctx.attempt === 1) throw new Error('attempt 1 fails'); return 'attempt ' + ctx.attempt;`);
    const period = `flaky@${lastMidnightUtc().toISOString()}`;
    const r = await p.cli(['run-once', '--json', '--node-id', 'pass']);
    // Attempt 1's failure is in the report and the history; the pass exits on its final attempt (succeeded).
    expectCode(r, 0);
    const doc = JSON.parse(r.stdout) as { runs: Array<{ periodKey: string; attempt: number; status: string }> };
    expect(doc.runs.map((x) => [x.periodKey, x.attempt, x.status])).toEqual([[period, 1, 'failed'], [period, 2, 'succeeded']]);
    const effects = p.effects();
    expect(effects.map((e) => [e.periodKey, e.attempt, e.nodeId])).toEqual([[period, 1, 'pass'], [period, 2, 'pass']]);
    expect(effects[1]!.at - effects[0]!.at, 'attempt 2 waited for its retryDelay').toBeGreaterThanOrEqual(950);
    const runs = (await p.history('flaky')).filter((x) => x.status !== 'skipped');
    expect(runs.map((x) => [x.periodKey, x.attempt, x.status, x.error])).toEqual([[period, 2, 'succeeded', null], [period, 1, 'failed', 'attempt 1 fails']]);
  });

  // Three cases that mostly wait (for a retry's delay, a lease, missed periods) side by side: each
  // has its own project; the daemons' periods 5 s ahead leave room for a start beside the others.
  describe('waiting cases', () => {
    it.concurrent('a pass runs a retry left owed by a daemon that was killed after the failure, once', async () => {
      const p = project();
      const at = secondsAhead(5000);
      p.job('retry-me.mjs', `schedule: '${onceAt(at)}', retries: 1, retryDelay: '3s',`, `if (ctx.attempt === 1) throw new Error('attempt 1 fails');`);
      const d = await daemonFor(p, 'daemon', 'retry-me', at);
      await waitForLog(d, 'attempt 1 to fail and owe attempt 2', 'next attempt owed (pending)', 15_000);
      await d.stop('SIGKILL');
      const key = `retry-me@${at.toISOString()}`;
      const before = await p.history('retry-me');
      expect(before.map((x) => [x.periodKey, x.attempt, x.status, x.nodeId])).toEqual([[key, 2, 'pending', 'daemon'], [key, 1, 'failed', 'daemon']]);

      // Owed is not due yet: wait for its runAt, then one pass.
      await sleepMs(new Date(before[0]!.runAt!).getTime() - Date.now() + 100);
      const r = await p.cli(['run-once', '--node-id', 'pass']);
      expectCode(r, 0);
      expect(p.effects().map((e) => [e.periodKey, e.attempt, e.nodeId])).toEqual([[key, 1, 'daemon'], [key, 2, 'pass']]);
      const after = await p.history('retry-me');
      expect(after.map((x) => [x.attempt, x.status, x.nodeId])).toEqual([[2, 'succeeded', 'pass'], [1, 'failed', 'daemon']]);
      expectCode(await p.cli(['run-once', '--node-id', 'again']), 0);
      expect(p.effects()).toHaveLength(2);
    });

    it.concurrent('a pass takes over the running attempt of a daemon killed mid-run once its lease expired, and runs attempt 2', async () => {
      const p = project();
      const at = secondsAhead(5000);
      p.job('hang.mjs', `schedule: '${onceAt(at)}', lockTtl: '2s',`, `if (ctx.attempt === 1) await sleep(ctx, 60000); return 'attempt ' + ctx.attempt;`);
      const d = await daemonFor(p, 'daemon', 'hang', at);
      await waitFor('attempt 1 to start', () => p.effects().length > 0, 15_000);
      await d.stop('SIGKILL');
      const key = `hang@${at.toISOString()}`;
      expect((await p.history('hang')).map((x) => [x.periodKey, x.attempt, x.status])).toEqual([[key, 1, 'running']]);

      await sleepMs(2500); // past lockTtl since the last heartbeat
      const r = await p.cli(['run-once', '--node-id', 'pass']);
      expectCode(r, 0);
      expect(p.effects().map((e) => [e.periodKey, e.attempt, e.nodeId])).toEqual([[key, 1, 'daemon'], [key, 2, 'pass']]);
      const runs = await p.history('hang');
      expect(runs.map((x) => [x.attempt, x.status, x.nodeId, x.result])).toEqual([[2, 'succeeded', 'pass', 'attempt 2'], [1, 'abandoned', 'daemon', null]]);
      expect(runs[1]!.error ?? runs[1]!.reason ?? '').toMatch(/lease expired/);
    });

    it.concurrent("missed periods: older than catchUp recorded skipped ('missed') and counted once by two passes at the same moment; the recent ones coalesced", async () => {
      const p = project();
      p.job('tick.mjs', `schedule: '* * * * * *', catchUp: '3s',`);
      expectCode(await p.cli(['run-once', '--node-id', 'anchor']), 0);
      const anchored = p.effects();
      expect(anchored).toHaveLength(1);
      const anchorRows = await p.history();
      const anchorEnd = Math.max(...anchorRows.map((x) => new Date(x.scheduledAt).getTime()));

      await sleepMs(8000);
      const start = Date.now();
      const [a, b] = await Promise.all([p.cli(['run-once', '--node-id', 'pass-a']), p.cli(['run-once', '--node-id', 'pass-b'])]);
      const end = Date.now();
      expectCode(a, 0);
      expectCode(b, 0);

      const runs = await p.history();
      expect(duplicates(runs.map((x) => x.periodKey)), 'periods with two rows').toEqual([]);
      expect(duplicates(p.effects().map((e) => e.periodKey)), 'periods whose body ran twice').toEqual([]);
      const later = runs.filter((x) => new Date(x.scheduledAt).getTime() > anchorEnd).sort((x, y) => x.scheduledAt.localeCompare(y.scheduledAt));
      // No gap: every period after the anchor up to the passes' start has a row.
      for (let t = anchorEnd + 1000; t < start - 1000; t += 1000) {
        expect(later.map((x) => x.scheduledAt), 'a period without a row').toContain(new Date(t).toISOString());
      }
      const missed = later.filter((x) => x.status === 'skipped' && x.reason === 'missed');
      const recent = later.filter((x) => !(x.status === 'skipped' && x.reason === 'missed'));
      expect(missed.length).toBeGreaterThanOrEqual(3);
      expect(missed.every((x) => new Date(x.scheduledAt).getTime() < end - 3000)).toBe(true);
      expect(recent.every((x) => new Date(x.scheduledAt).getTime() >= start - 4000)).toBe(true);
      expect(later.slice(0, missed.length), 'the missed periods are the oldest').toEqual(missed);
      // Counted once: the passes' warnings add up to the rows.
      const counted = [...logLines(a.stderr), ...logLines(b.stderr)].filter((l) => String(l.msg).includes('recorded skipped (missed)')).reduce((n, l) => n + Number(l.missed), 0);
      expect(counted).toBe(missed.length);
      // coalesce (the default): of the recent periods only the latest each pass saw ran, the others were coalesced.
      expect(recent.every((x) => x.status === 'succeeded' || (x.status === 'skipped' && x.reason === 'coalesced')), JSON.stringify(recent)).toBe(true);
      const ran = recent.filter((x) => x.status === 'succeeded');
      expect(ran.length).toBeGreaterThanOrEqual(1);
      expect(ran.length).toBeLessThanOrEqual(2);
      expect(recent[recent.length - 1]!.status).toBe('succeeded');
      expect(p.effects().slice(1).map((e) => e.periodKey).sort()).toEqual(ran.map((x) => x.periodKey).sort());
    });
  });

  it.concurrent('a manual run of a new job before its first pass does not hide its due period: the pass still runs it', async () => {
    const p = project();
    p.job('daily.mjs', `schedule: '0 0 * * *', catchUp: '2d',`);
    expectCode(await p.cli(['run-once', 'daily']), 0);
    const r = await p.cli(['run-once', '--json']);
    expectCode(r, 0);
    const midnight = lastMidnightUtc().toISOString();
    const ran = p.effects().map((e) => [e.trigger, e.scheduledAt === midnight]);
    expect(ran).toEqual([['manual', false], ['catch-up', true]]);
  });

  it.concurrent('--dry-run selects exactly the periods the real pass then runs, and writes no row', async () => {
    const p = project();
    p.job('hourly.mjs', `schedule: '0 * * * *', catchUp: '3h', coalesce: false,`);
    p.job('daily.mjs', `schedule: '0 0 * * *', catchUp: '2d',`);
    p.job('yearly.mjs', `schedule: '0 0 1 1 *', catchUp: '1m',`);
    // Not across an hour boundary between the two commands (which, beside the other cases, may take 10 s).
    const toHour = 3_600_000 - (Date.now() % 3_600_000);
    if (toHour < 30_000) await sleepMs(toHour + 500);

    const dry = await p.cli(['run-once', '--dry-run', '--json']);
    expectCode(dry, 0);
    expect(await p.history()).toEqual([]);
    const real = await p.cli(['run-once', '--json']);
    expectCode(real, 0);
    const keys = (r: CliResult) => (JSON.parse(r.stdout) as { runs: Array<{ periodKey: string }> }).runs.map((x) => x.periodKey).sort();
    expect(keys(dry).length).toBeGreaterThanOrEqual(4); // 3 or 4 hourly periods, the daily's latest
    expect(keys(dry)).toEqual(keys(real));
    expect(p.effects().filter((e) => e.dryRun).map((e) => e.periodKey).sort()).toEqual(keys(dry));
    expect(p.effects().filter((e) => !e.dryRun).map((e) => e.periodKey).sort()).toEqual(keys(real));
    expect((await p.history()).filter((x) => x.status === 'succeeded').map((x) => x.periodKey).sort()).toEqual(keys(real));
  });

  it.concurrent('run-once <job> --period on a period whose last attempt is pending is refused (exit 3) naming the owed attempt', async () => {
    const p = project();
    const period = '2024-03-01T00:00:00.000Z';
    const pending = await plantPending(p, period);
    for (const extra of [[], ['--force']]) {
      const r = await p.cli(['run-once', 'flaky', '--period', period, ...extra]);
      expectCode(r, 3);
      expect(r.stdout + r.stderr).toContain(`period flaky@${period} has attempt 2 owed (pending, due ${pending.runAt})`);
    }
    expect(p.effects()).toHaveLength(1);
    expect((await p.history()).map((x) => [x.attempt, x.status])).toEqual([[2, 'pending'], [1, 'failed']]);
  });

  it.concurrent("history shows a pending attempt with its runAt and startedAt null; --status pending filters it", async () => {
    const p = project();
    const period = '2024-03-01T00:00:00.000Z';
    await plantPending(p, period);
    const runs = await p.history();
    expect(runs.map((x) => [x.periodKey, x.attempt, x.status])).toEqual([[`flaky@${period}`, 2, 'pending'], [`flaky@${period}`, 1, 'failed']]);
    const [owed, failed] = runs as [HistoryRun, HistoryRun];
    expect(owed).toMatchObject({ startedAt: null, finishedAt: null, durationMs: null, scheduledAt: period });
    // Due a retryDelay (1 minute) after attempt 1 ended.
    const dueIn = new Date(owed.runAt!).getTime() - new Date(failed.finishedAt!).getTime();
    expect(dueIn).toBeGreaterThanOrEqual(59_000);
    expect(dueIn).toBeLessThanOrEqual(61_000);
    expect(failed.startedAt).not.toBeNull();

    expect(await p.history('--status', 'pending')).toEqual([owed]);
    expect(await p.history('flaky', '--status', 'pending')).toEqual([owed]);
    expect(await p.history('--status', 'failed')).toEqual([failed]);
    const text = await p.cli(['history', '--status', 'pending', '--utc']);
    expectCode(text, 0);
    expect(text.stdout).toMatch(/ pending\n/);
    expect(text.stdout).toContain(`due ${owed.runAt!.slice(5, 19).replace('T', ' ')} (`);
    expect(text.stdout).not.toContain('attempt 1 fails');
  });

  it.concurrent("run-once <job> runs it now as a 'manual' run", async () => {
    const p = project();
    p.job('hello.mjs', `schedule: '0 0 1 1 *',`, 'return { greeted: ctx.nodeId };');
    const r = await p.cli(['run-once', 'hello', '--node-id', 'by-hand']);
    expectCode(r, 0);
    const [effect, ...more] = p.effects();
    expect(more).toEqual([]);
    expect(effect).toMatchObject({ job: 'hello', trigger: 'manual', attempt: 1, nodeId: 'by-hand', dryRun: false });
    const runs = await p.history('hello');
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ job: 'hello', trigger: 'manual', status: 'succeeded', attempt: 1, nodeId: 'by-hand', periodKey: effect!.periodKey, result: { greeted: 'by-hand' } });
    // A manual run's period is the moment it was requested.
    expect(Math.abs(new Date(runs[0]!.scheduledAt).getTime() - Date.now())).toBeLessThan(30_000);
  });

  it.concurrent("a manual run is refused (exit 3) while a run of that job is in flight and overlap is 'skip'", async () => {
    const release = 'release';
    const p = project();
    p.job('slow.mjs', `schedule: '0 0 1 1 *', overlap: 'skip',`, `await waitForFile(ctx, process.env.RELEASE); return 'released';`);
    p.env.RELEASE = p.ws.path(release);
    const background = p.cli(['run-once', 'slow', '--node-id', 'first']);
    try {
      await waitFor('the first manual run to start', () => p.effects().length > 0, 30_000);
      const refused = await p.cli(['run-once', 'slow', '--node-id', 'second']);
      expectCode(refused, 3);
      expect(refused.stdout + refused.stderr).toMatch(/slow.*in flight/);
      expect(p.effects()).toHaveLength(1);
    } finally {
      writeFileSync(p.ws.path(release), '');
    }
    expectCode(await background, 0);
    // Once the first run finished, the same command is accepted again.
    expectCode(await p.cli(['run-once', 'slow', '--node-id', 'third']), 0);
    expect(p.effects().map((e) => e.nodeId)).toEqual(['first', 'third']);
    const runs = await p.history('slow');
    expect(runs.map((r) => [r.nodeId, r.trigger, r.status])).toEqual([['third', 'manual', 'succeeded'], ['first', 'manual', 'succeeded']]);
  });

  it.concurrent("run-once <job> --period is refused while that period is in flight: always, even with --force and overlap 'allow'", async () => {
    const p = project();
    p.job('slow.mjs', `schedule: '0 0 * * *', overlap: 'allow',`, `await waitForFile(ctx, process.env.RELEASE);`);
    p.env.RELEASE = p.ws.path('release');
    const period = '2024-03-01T00:00:00.000Z';
    const background = p.cli(['run-once', 'slow', '--period', period]);
    try {
      await waitFor('the period to start', () => p.effects().length > 0, 30_000);
      const forced = await p.cli(['run-once', 'slow', '--period', period, '--force']);
      expectCode(forced, 3);
      expect(forced.stdout + forced.stderr).toMatch(/in flight/);
    } finally {
      writeFileSync(p.ws.path('release'), '');
    }
    expectCode(await background, 0);
    expect(p.effects()).toHaveLength(1);
    expect((await p.history('slow')).map((r) => [r.periodKey, r.attempt, r.status])).toEqual([[`slow@${period}`, 1, 'succeeded']]);
  });

  it.concurrent('run-once <job> --period: a past period without a row runs; again is refused; --force runs attempt 2', async () => {
    const p = project();
    p.job('daily.mjs', `schedule: '0 0 * * *',`);
    const period = '2024-03-01T00:00:00.000Z';

    expectCode(await p.cli(['run-once', 'daily', '--period', period]), 0);
    expect(p.effects().map((e) => [e.periodKey, e.scheduledAt, e.attempt, e.trigger])).toEqual([[`daily@${period}`, period, 1, 'manual']]);

    const again = await p.cli(['run-once', 'daily', '--period', period]);
    expectCode(again, 3);
    expect(again.stdout + again.stderr).toMatch(/already succeeded/);
    // The same instant written with an offset is the same period.
    expectCode(await p.cli(['run-once', 'daily', '--period', '2024-03-01T01:00:00+01:00']), 3);
    expect(p.effects()).toHaveLength(1);

    expectCode(await p.cli(['run-once', 'daily', '--period', period, '--force']), 0);
    expect(p.effects().map((e) => e.attempt)).toEqual([1, 2]);
    const runs = await p.history('daily');
    expect(runs.map((r) => [r.periodKey, r.attempt, r.trigger, r.status])).toEqual([
      [`daily@${period}`, 2, 'manual', 'succeeded'],
      [`daily@${period}`, 1, 'manual', 'succeeded'],
    ]);
  });

  it.concurrent('run-once <job> --period: a failed period may run again; an instant off the schedule exits 2 naming the nearest periods', async () => {
    const p = project();
    p.job('flaky.mjs', `schedule: '0 0 * * *',`, `if (existsSync(process.env.FAIL_FLAG)) throw new Error('flaky failure');`);
    p.env.FAIL_FLAG = p.ws.path('fail');
    const period = '2024-03-01T00:00:00.000Z';
    writeFileSync(p.ws.path('fail'), '');
    expectCode(await p.cli(['run-once', 'flaky', '--period', period]), 1);
    rmSync(p.ws.path('fail'));
    expectCode(await p.cli(['run-once', 'flaky', '--period', period]), 0);
    expectCode(await p.cli(['run-once', 'flaky', '--period', period]), 3);
    expect(p.effects().map((e) => e.attempt)).toEqual([1, 2]);
    expect((await p.history('flaky')).map((r) => [r.attempt, r.status, r.error])).toEqual([[2, 'succeeded', null], [1, 'failed', 'flaky failure']]);

    const off = await p.cli(['run-once', 'flaky', '--period', '2024-03-01T00:00:30.000Z']);
    expectCode(off, 2);
    expect(off.stderr).toContain('2024-03-01T00:00:00.000Z');
    expect(off.stderr).toContain('2024-03-02T00:00:00.000Z');
    expect(off.stderr.trim().split('\n')).toHaveLength(1);

    const garbage = await p.cli(['run-once', 'flaky', '--period', 'yesterday']);
    expectCode(garbage, 2);
    expect(garbage.stderr).toContain('yesterday');
    expect(p.effects()).toHaveLength(2);
  });

  it.concurrent('--dry-run: ctx.dryRun is true in the body and no row is written', async () => {
    const p = project();
    p.job('hello.mjs', `schedule: '0 0 * * *', catchUp: '2d',`);
    expectCode(await p.cli(['run-once', 'hello', '--dry-run']), 0);
    expectCode(await p.cli(['run-once', '--dry-run']), 0);
    expect(p.effects().map((e) => [e.trigger, e.dryRun])).toEqual([['manual', true], ['catch-up', true]]);
    expect(await p.history()).toEqual([]);
    // Nothing was recorded, so a real pass still finds the period due.
    expectCode(await p.cli(['run-once']), 0);
    expect(p.effects().map((e) => e.dryRun)).toEqual([true, true, false]);
    expect((await p.history()).filter((r) => r.status === 'succeeded')).toHaveLength(1);
  });

  it.concurrent('--json prints one parseable JSON document on stdout, logs go to stderr', async () => {
    const p = project({ env: { SCHEDULER_LOG_LEVEL: 'info' } });
    p.job('hello.mjs', `schedule: '0 0 1 1 *',`, `return { answer: 42 };`);
    p.job('oops.mjs', `schedule: '0 0 1 1 *',`, `throw new Error('oops');`);

    const ok = await p.cli(['run-once', 'hello', '--json']);
    expectCode(ok, 0);
    const doc = JSON.parse(ok.stdout) as { runs: Array<Record<string, unknown>>; notRun: unknown[] };
    expect(doc.runs).toHaveLength(1);
    expect(doc.runs[0]).toMatchObject({ job: 'hello', status: 'succeeded', trigger: 'manual', attempt: 1, result: { answer: 42 } });
    expect(doc.notRun).toEqual([]);
    expect(ok.stderr).toContain('run succeeded');

    const failed = await p.cli(['run-once', 'oops', '--json']);
    expectCode(failed, 1);
    expect((JSON.parse(failed.stdout) as typeof doc).runs[0]).toMatchObject({ job: 'oops', status: 'failed', error: 'oops' });

    const refused = await p.cli(['run-once', 'hello', '--period', '2025-01-01T00:00:00.000Z', '--json']);
    expectCode(refused, 0);
    const again = await p.cli(['run-once', 'hello', '--period', '2025-01-01T00:00:00.000Z', '--json']);
    expectCode(again, 3);
    expect((JSON.parse(again.stdout) as typeof doc).notRun).toEqual([expect.objectContaining({ job: 'hello', outcome: 'refused' })]);

    const history = await p.cli(['history', '--json']);
    expect((JSON.parse(history.stdout) as unknown[]).length).toBe(3);
  });

  it.concurrent('broken job files beside good ones: the good ones run, each broken one is one line naming file and field; validate exits 2', async () => {
    const p = project();
    p.job('good.mjs', `schedule: '0 0 * * *', catchUp: '2d',`);
    p.job('also-good.ts', `schedule: '0 0 * * *', catchUp: '2d',`);
    p.ws.writeJob('bad-schedule.mjs', `export default { schedule: 'every day at noon', run() {} };\n`);
    p.ws.writeJob('bad-timeout.ts', `export default { schedule: '0 0 * * *', timeout: 'soon', run(): void {} };\n`);
    p.ws.writeJob('no-run.mjs', `export default { schedule: '0 0 * * *' };\n`);
    p.ws.writeJob('bad-overlap.mjs', `export default { schedule: '0 0 * * *', overlap: 'sometimes', run() {} };\n`);
    p.ws.writeJob('syntax.mjs', `export default { schedule: '0 0 * * *', run() { return ; } ;\n`);
    p.ws.writeJob('_helper.mjs', `throw new Error('helpers are not job files');\n`);
    const broken: Array<[string, string | null]> = [
      ['bad-schedule.mjs', 'schedule'], ['bad-timeout.ts', 'timeout'], ['no-run.mjs', 'run'], ['bad-overlap.mjs', 'overlap'], ['syntax.mjs', null],
    ];

    const r = await p.cli(['run-once']);
    // Bad job definitions exit 2, but only after the good jobs ran.
    expectCode(r, 2);
    expect(p.effects().map((e) => e.job).sort()).toEqual(['also-good', 'good']);
    const stderrLines = r.stderr.split('\n').filter((l) => l.trim() !== '');
    for (const [file, field] of broken) {
      const lines = stderrLines.filter((l) => l.includes(file));
      expect(lines, `stderr lines about ${file}:\n${r.stderr}`).toHaveLength(1);
      if (field) expect(lines[0]).toContain(`'${field}'`);
    }
    expect(r.stderr).not.toContain('_helper');

    const v = await p.cli(['validate']);
    expectCode(v, 2);
    const out = v.stdout.split('\n').filter((l) => l.trim() !== '');
    expect(out).toHaveLength(broken.length);
    for (const [file, field] of broken) {
      const lines = out.filter((l) => l.includes(file));
      expect(lines, `validate lines about ${file}`).toHaveLength(1);
      if (field) expect(lines[0]).toContain(`'${field}'`);
    }
    const vj = await p.cli(['validate', '--json']);
    expectCode(vj, 2);
    expect(JSON.parse(vj.stdout)).toMatchObject({ valid: false, jobs: ['also-good', 'good'] });
  });

  it.concurrent('an unknown job name exits 2 naming it; nothing runs', async () => {
    const p = project();
    p.job('hello.mjs', `schedule: '0 0 1 1 *',`);
    const r = await p.cli(['run-once', 'hello', 'no-such-job']);
    expectCode(r, 2);
    expect(r.stderr).toContain("'no-such-job'");
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(p.effects()).toEqual([]);
    expectCode(await p.cli(['run-once', 'no-such-job', '--period', '2024-03-01T00:00:00.000Z']), 2);
  });

  it("timeout: ctx.signal aborts with reason 'timeout' and the run is recorded timed_out", async () => {
    const p = project();
    p.job('slowpoke.mjs', `schedule: '0 0 1 1 *', timeout: '1s',`, 'await sleep(ctx, 5000); record(ctx, "finished");');
    const r = await p.cli(['run-once', 'slowpoke']);
    expectCode(r, 1);
    expect(p.effects('aborted').map((e) => e.reason)).toEqual(['timeout']);
    // Measured inside the body, so that a slow process start on a busy machine does not count.
    const cutAfter = p.effects('aborted')[0]!.at - p.effects()[0]!.at;
    expect(cutAfter, 'the 5 s body was cut at its 1 s timeout').toBeGreaterThanOrEqual(950);
    expect(cutAfter).toBeLessThan(3000);
    expect(p.effects('finished')).toEqual([]);
    const [run] = await p.history('slowpoke');
    expect(run).toMatchObject({ status: 'timed_out', trigger: 'manual' });
    expect(run!.error).toMatch(/timed out/);
    expect(run!.durationMs).toBeGreaterThanOrEqual(900);
    expect(run!.durationMs).toBeLessThan(4000);
  });

  it.concurrent('a body that calls process.exit(3) is recorded failed; the command still reports and exits normally', async () => {
    const p = project();
    p.job('quitter.mjs', `schedule: '0 0 1 1 *',`, 'process.exit(3);');
    p.job('hello.mjs', `schedule: '0 0 1 1 *',`);
    const r = await p.cli(['run-once', 'quitter', 'hello', '--json']);
    expectCode(r, 1);
    const doc = JSON.parse(r.stdout) as { runs: Array<{ job: string; status: string; error: string | null }> };
    expect(doc.runs.map((x) => [x.job, x.status]).sort()).toEqual([['hello', 'succeeded'], ['quitter', 'failed']]);
    expect(doc.runs.find((x) => x.job === 'quitter')!.error).toMatch(/process\.exit\(3\)/);
    expect(p.effects().map((e) => e.job).sort()).toEqual(['hello', 'quitter']);
    const runs = await p.history();
    expect(runs.map((x) => [x.job, x.status]).sort()).toEqual([['hello', 'succeeded'], ['quitter', 'failed']]);
    expect(runs.find((x) => x.job === 'quitter')!.error).toMatch(/process\.exit\(3\)/);
  });
});

describe('run-once on MariaDB with a Redis master', () => {
  let db: TestDatabase | undefined;
  let redis: RedisServer[] = [];

  beforeAll(async () => {
    db = await createMariaDb('cron_it_run_once');
    redis = await startRedisServers(1);
  });

  afterAll(async () => {
    await Promise.all(redis.map((r) => r.cleanup()));
    await db?.drop();
  });

  it('two passes started at the same moment: each period runs exactly once', async () => {
    await concurrentPasses(project({ store: db!.url, redis: redis.map((r) => r.url) }));
  });
});
