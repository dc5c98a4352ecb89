/**
 * A loader that cannot be stalled, through the real bin/scheduler: beside a good every-second job,
 * a dangling symlink, a directory named x.ts, a top-level await that never settles and a top-level
 * rejection are one invalid file each, with its reason; `list` and `validate` say so and exit 2,
 * `run-once` runs the good job, and `run` schedules it, logs one error line per broken file and
 * stops on SIGTERM with exit 0 while the stuck import is still pending.
 */
import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Daemon, runCli } from '../helpers/cli.js';
import { jobSource, type Effect } from '../helpers/job-sources.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace, type HistoryRun } from '../helpers/workspace.js';
import { waitForLog } from './cluster-scenario.js';

// The cases run side by side (describe.concurrent) and share this list: clean up once none runs.
const cleanups: Array<() => Promise<void> | void> = [];
let running = 0;
beforeEach(() => {
  running++;
});
afterEach(async () => {
  if (--running > 0) return;
  for (const c of cleanups.splice(0).reverse()) await c();
});

function envOf(ws: Workspace, extra: Record<string, string> = {}): Record<string, string> {
  return {
    SCHEDULER_STORE: ws.sqliteStore(),
    SCHEDULER_JOBS_DIR: ws.jobsDir,
    SCHEDULER_NODE_ID: 'loader-node',
    SCHEDULER_LOG_LEVEL: 'info',
    SIDE_EFFECTS: ws.path('effects.jsonl'),
    ...extra,
  };
}

/** A top-level await that never settles; it marks the moment its top level ran in `loading-<name>`. */
const stuckSource = (name: string) =>
  `import { writeFileSync } from 'node:fs';\nimport { join, dirname } from 'node:path';\n` +
  `writeFileSync(join(dirname(process.env.SIDE_EFFECTS), 'loading-${name}'), '');\n` +
  `await new Promise(() => {});\nexport default { schedule: '* * * * * *', run() {} };\n`;

/** The four broken entries the issue names, beside a good every-second job. */
function brokenWorkspace(): Workspace {
  const ws = new Workspace('cron-loader-');
  cleanups.push(() => ws.cleanup());
  ws.writeJob('good.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
  symlinkSync(ws.path('nowhere.mjs'), `${ws.jobsDir}/gone.mjs`);
  mkdirSync(`${ws.jobsDir}/x.ts`);
  ws.writeJob('stuck.mjs', stuckSource('stuck'));
  ws.writeJob('rejects.ts', `await Promise.reject(new Error('settings service refused at load time'));\nexport default {};\n`);
  return ws;
}

/** file -> what its one line must say. */
function expectedLines(ws: Workspace, timeout: string): Record<string, string> {
  return {
    'jobs/gone.mjs': `jobs/gone.mjs: cannot be loaded: dangling symlink to ${ws.path('nowhere.mjs')}`,
    'jobs/rejects.ts': 'jobs/rejects.ts: cannot be loaded: settings service refused at load time',
    'jobs/stuck.mjs': `jobs/stuck.mjs: cannot be loaded: did not settle within ${timeout} (a top-level await that never resolves?)`,
    'jobs/x.ts': 'jobs/x.ts: is a directory, not a job file',
  };
}

const effects = (ws: Workspace) => ws.records<Effect>('effects.jsonl').filter((e) => e.event === 'start');

/** Lines of `text` that name `file` (as `jobs/<name>` followed by a colon). */
const linesNaming = (text: string, file: string) => text.split('\n').filter((l) => l.includes(`${file}:`));

// Side by side: each case has a workspace (and SQLite file) of its own, and its time bounds are loose
// (a stuck file costs its 1-10 s deadline, a stop takes < 15 s); the 10 s default deadline no longer
// holds up the others.
describe.concurrent('job files that cannot be loaded, through bin/scheduler', () => {
  it('validate: one line per broken file naming it and the reason, exit 2; --json lists the same', async () => {
    const ws = brokenWorkspace();
    const started = Date.now();
    const r = await runCli(['validate', '--load-timeout', '1s'], { cwd: ws.dir, env: envOf(ws), timeoutMs: 60_000 });
    expect(r.code, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(2);
    expect(Date.now() - started, 'the stuck file costs its deadline, not more').toBeLessThan(20_000);
    const expected = expectedLines(ws, '1s');
    expect(r.stdout.trim().split('\n').sort()).toEqual(Object.values(expected).sort());

    const json = await runCli(['validate', '--json', '--load-timeout', '1s'], { cwd: ws.dir, env: envOf(ws), timeoutMs: 60_000 });
    expect(json.code, json.stderr).toBe(2);
    const doc = JSON.parse(json.stdout) as { valid: boolean; jobs: string[]; problems: Array<{ file: string; problems: string[] }> };
    expect(doc.valid).toBe(false);
    expect(doc.jobs).toEqual(['good']);
    expect(Object.fromEntries(doc.problems.map((p) => [p.file, p.problems]))).toEqual(
      Object.fromEntries(Object.entries(expected).map(([f, l]) => [f, [l]])));
  });

  it('list: the good job, then INVALID with one line per broken file, exit 2; --json has the job and the four invalid files', async () => {
    const ws = brokenWorkspace();
    const r = await runCli(['list', '--load-timeout', '1s'], { cwd: ws.dir, env: envOf(ws), timeoutMs: 60_000 });
    expect(r.code, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(2);
    expect(r.stdout).toMatch(/^good\s+\* \* \* \* \* \*\s+UTC/m);
    for (const [file, line] of Object.entries(expectedLines(ws, '1s'))) {
      expect(r.stdout, file).toContain(`INVALID ${file}:`);
      // Under its INVALID header, the problem without the file's path again, wrapped to 100 columns.
      const all = r.stdout.split('\n');
      const from = all.indexOf(`INVALID ${file}:`) + 1;
      const block: string[] = [];
      for (let i = from; i < all.length && all[i]!.startsWith('  '); i++) block.push(all[i]!);
      expect(block.map((l) => l.trim()).join(' '), file).toBe(line.slice(`${file}: `.length));
      expect(block.filter((l) => l.length > 100), file).toEqual([]);
    }

    const json = await runCli(['list', '--json', '--load-timeout', '1s'], { cwd: ws.dir, env: envOf(ws), timeoutMs: 60_000 });
    expect(json.code, json.stderr).toBe(2);
    const doc = JSON.parse(json.stdout) as { jobs: Array<{ name: string; next: string[] }>; invalid: Array<{ file: string }> };
    expect(doc.jobs.map((j) => j.name)).toEqual(['good']);
    expect(doc.jobs[0]!.next.length).toBeGreaterThan(0);
    expect(doc.invalid.map((f) => f.file).sort()).toEqual(Object.keys(expectedLines(ws, '1s')).sort());
  });

  it('run-once (deadline from SCHEDULER_LOAD_TIMEOUT): the good job runs, one error line per broken file, exit 2', async () => {
    const ws = brokenWorkspace();
    const r = await runCli(['run-once'], { cwd: ws.dir, env: envOf(ws, { SCHEDULER_LOAD_TIMEOUT: '1500ms' }), timeoutMs: 60_000 });
    expect(r.code, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(2);
    expect(effects(ws).map((e) => e.job)).toEqual(['good']);
    for (const [file, line] of Object.entries(expectedLines(ws, '1s500ms'))) {
      const lines = linesNaming(r.stderr, file);
      expect(lines, `${file} in:\n${r.stderr}`).toHaveLength(1);
      expect(lines[0]).toContain(line);
    }
    const history = await runCli(['history', '--json'], { cwd: ws.dir, env: envOf(ws, { SCHEDULER_LOAD_TIMEOUT: '1500ms' }) });
    const runs = JSON.parse(history.stdout) as HistoryRun[];
    expect(runs.filter((x) => x.status !== 'skipped').map((x) => [x.job, x.status])).toEqual([['good', 'succeeded']]);
  });

  it('run: schedules the good job, logs one error line per broken file, and stops on SIGTERM with exit 0 while the stuck import is pending', async () => {
    const ws = brokenWorkspace();
    const d = new Daemon(['--load-timeout', '1s'], { cwd: ws.dir, env: envOf(ws) });
    cleanups.push(async () => {
      await d.stop('SIGKILL', 5000);
    });
    const starting = await waitForLog(d, 'the daemon to start', 'daemon starting');
    expect(starting.jobs).toEqual(['good']);
    expect(starting.invalidFiles).toBe(4);
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    await waitFor('the good job to run 3 periods', () => new Set(effects(ws).map((e) => e.periodKey)).size >= 3, 30_000);
    expect(existsSync(ws.path('loading-stuck')), "the stuck file's top level ran").toBe(true);

    const errors = d.logs().filter((l) => l.level === 50 || l.level === 'error');
    for (const [file, line] of Object.entries(expectedLines(ws, '1s'))) {
      const naming = errors.filter((l) => String(l.msg).startsWith(`${file}:`));
      expect(naming.map((l) => l.msg), `error lines naming ${file}`).toEqual([line]);
    }

    const signalledAt = Date.now();
    const code = await d.stop('SIGTERM');
    expect(code, d.errors).toBe(0);
    expect(Date.now() - signalledAt, 'the pending import does not hold the process').toBeLessThan(15_000);
    expect(d.logs().some((l) => l.msg === 'stopped')).toBe(true);
  });

  it('SIGTERM while a file is still within its deadline stops the daemon at once, exit 0', async () => {
    const ws = new Workspace('cron-loader-');
    cleanups.push(() => ws.cleanup());
    ws.writeJob('good.mjs', jobSource(`schedule: '* * * * * *',`));
    ws.writeJob('stuck.mjs', stuckSource('stuck'));
    const d = new Daemon(['--load-timeout', '60s'], { cwd: ws.dir, env: envOf(ws) });
    cleanups.push(async () => {
      await d.stop('SIGKILL', 5000);
    });
    await waitFor('the stuck file to be loading', () => existsSync(ws.path('loading-stuck')), 30_000, 50);
    const signalledAt = Date.now();
    const code = await d.stop('SIGTERM');
    expect(code, `${d.output}\n${d.errors}`).toBe(0);
    expect(Date.now() - signalledAt, 'not after the 60 s deadline').toBeLessThan(15_000);
    expect(d.logs().some((l) => l.msg === 'shutdown requested while loading job files; stopped')).toBe(true);
    expect(effects(ws)).toEqual([]);
  });

  it('with the default deadline, a never-settling top-level await is reported after 10 s (before: exit 0 and no output)', async () => {
    const ws = new Workspace('cron-loader-');
    cleanups.push(() => ws.cleanup());
    ws.writeJob('good.mjs', jobSource(`schedule: '* * * * * *',`));
    ws.writeJob('stuck.mjs', stuckSource('stuck'));
    const started = Date.now();
    const r = await runCli(['validate'], { cwd: ws.dir, env: envOf(ws), timeoutMs: 60_000 });
    const elapsed = Date.now() - started;
    expect(r.code, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(2);
    expect(r.stdout.trim()).toBe('jobs/stuck.mjs: cannot be loaded: did not settle within 10s (a top-level await that never resolves?)');
    expect(elapsed).toBeGreaterThanOrEqual(9_500);
    expect(elapsed).toBeLessThan(40_000);
  });
});
