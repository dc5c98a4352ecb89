/**
 * The Reloader on real config files and job folders (temporary), with the scheduler's side recorded:
 * SIGHUPs coalesced, none after the shutdown, a broken config file refused, what a changed job says.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config/config.js';
import { Reloader } from '../../src/daemon/reload.js';
import { loadJobs, type LoadedJobs } from '../../src/jobs/load.js';
import type { Job } from '../../src/jobs/types.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(files: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), 'cron-reload-unit-'));
  dirs.push(dir);
  const jobsDir = join(dir, 'jobs');
  writeFileSync(join(dir, 'scheduler.json'), JSON.stringify({ jobsDir, store: `sqlite:${join(dir, 'db')}` }));
  for (const [name, source] of Object.entries(files)) writeJob(dir, name, source);
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const log = pino({ level: 'info' }, stream);
  const config = (): Config => loadConfig({ flags: { config: join(dir, 'scheduler.json') }, env: {}, cwd: dir });
  return { dir, jobsDir, lines, log, config };
}

function writeJob(dir: string, name: string, source: string): void {
  mkdirSync(join(dir, 'jobs'), { recursive: true });
  writeFileSync(join(dir, 'jobs', name), source);
}

const job = (schedule: string) => `export default { schedule: '${schedule}', run() {} };\n`;

describe('a changed .mjs job file that imports cluster-cron (Node cannot resolve it: jiti transpiles it)', () => {
  it('loads its new version', async () => {
    const s = setup({});
    const source = (schedule: string) => `import { defineJob } from 'cluster-cron';\nexport default defineJob({ schedule: '${schedule}', run() {} });\n`;
    writeJob(s.dir, 'typed.mjs', source('0 1 * * *'));
    expect((await loadJobs(s.jobsDir, 'UTC', s.dir)).jobs.map((j) => j.schedule.expression)).toEqual(['0 1 * * *']);
    writeJob(s.dir, 'typed.mjs', source('0 2 * * *'));
    expect((await loadJobs(s.jobsDir, 'UTC', s.dir)).jobs.map((j) => j.schedule.expression)).toEqual(['0 2 * * *']);
  });
});

describe('Reloader', () => {
  it('SIGHUPs during a reload are coalesced into one more; none after stop()', async () => {
    const s = setup({ 'a.mjs': job('* * * * *') });
    const initial = await loadJobs(s.jobsDir, 'UTC', s.dir);
    let loads = 0;
    let release = () => {};
    const replaced: Job[][] = [];
    const reloader = new Reloader({
      config: s.config(), jobs: initial.jobs, log: s.log, loadConfig: s.config,
      loadJobs: async (c): Promise<LoadedJobs> => {
        loads++;
        if (loads === 1) await new Promise<void>((r) => (release = r));
        return loadJobs(c.jobsDir, c.timezone, s.dir);
      },
      replaceJobs: async (jobs) => {
        replaced.push(jobs);
      },
    });
    reloader.request();
    await new Promise((r) => setTimeout(r, 20));
    writeJob(s.dir, 'b.mjs', job('*/2 * * * *'));
    reloader.request();
    reloader.request();
    reloader.request();
    release();
    await reloader.idle();
    expect(loads).toBe(2);
    expect(s.lines.filter((l) => l.msg === 'SIGHUP during a reload: reloading once more after it')).toHaveLength(1);
    // The first reload already saw b.mjs (written before it listed the folder); the second found nothing new.
    expect(replaced.map((jobs) => jobs.map((j) => j.name))).toEqual([['a', 'b']]);
    expect(s.lines.filter((l) => String(l.msg).startsWith('reload done')).map((l) => l.added)).toEqual([1, 0]);

    reloader.stop();
    reloader.request();
    await reloader.idle();
    expect(loads).toBe(2);
  });

  it('a config file that is now invalid: one line, nothing changes', async () => {
    const s = setup({ 'a.mjs': job('* * * * *') });
    const initial = await loadJobs(s.jobsDir, 'UTC', s.dir);
    let replaced = 0;
    const config = s.config();
    const reloader = new Reloader({
      config, jobs: initial.jobs, log: s.log, loadConfig: s.config, loadJobs: (c) => loadJobs(c.jobsDir, c.timezone, s.dir),
      replaceJobs: async () => {
        replaced++;
      },
    });
    writeFileSync(join(s.dir, 'scheduler.json'), '{ "logLevel": "loud" }');
    writeJob(s.dir, 'b.mjs', job('* * * * *'));
    reloader.request();
    await reloader.idle();
    const refused = s.lines.filter((l) => String(l.msg).startsWith('reload refused'));
    expect(refused.map((l) => l.msg)).toEqual([expect.stringMatching(/^reload refused: invalid setting .*scheduler\.json: logLevel=loud: expected one of fatal, .*; nothing changed$/)]);
    expect(replaced).toBe(0);
    expect(reloader.config).toBe(config);
  });

  it('a changed schedule and timezone are named with their old and new values; the log level applies at once', async () => {
    const s = setup({ 'a.mjs': job('* * * * *') });
    const initial = await loadJobs(s.jobsDir, 'UTC', s.dir);
    const replaced: Job[][] = [];
    const reloader = new Reloader({
      config: s.config(), jobs: initial.jobs, log: s.log, loadConfig: s.config, loadJobs: (c) => loadJobs(c.jobsDir, c.timezone, s.dir),
      replaceJobs: async (jobs) => {
        replaced.push(jobs);
      },
    });
    writeJob(s.dir, 'a.mjs', `export default { schedule: '*/5 * * * *', timezone: 'Asia/Shanghai', run() {} };\n`);
    writeFileSync(join(s.dir, 'scheduler.json'), JSON.stringify({ jobsDir: s.jobsDir, store: `sqlite:${join(s.dir, 'db')}`, logLevel: 'warn' }));
    reloader.request();
    await reloader.idle();
    expect(s.lines.filter((l) => String(l.msg).startsWith('job changed')).map((l) => l.msg)).toEqual(['job changed: a: schedule * * * * * → */5 * * * *, timezone UTC → Asia/Shanghai, code']);
    expect(replaced.map((jobs) => jobs.map((j) => j.timezone))).toEqual([['Asia/Shanghai']]);
    expect(s.log.level).toBe('warn');
  });
});

describe('Reloader: secrets it started with', () => {
  it('a changed HTTP token, webhook, alert token or store password refuses the reload with one line, the secrets redacted', async () => {
    const s = setup({ 'a.mjs': job('* * * * *') });
    const base = { jobsDir: s.jobsDir, store: 'postgres://cron:old-pass-1@127.0.0.1:5432/db', httpToken: 'old-token-1', alertWebhook: 'https://hooks.example.com/old-path-1', alertToken: 'old-alert-1' };
    const write = (over: Record<string, string>) => writeFileSync(join(s.dir, 'scheduler.json'), JSON.stringify({ ...base, ...over }));
    write({});
    const initial = await loadJobs(s.jobsDir, 'UTC', s.dir);
    const replaced: Job[][] = [];
    const reloader = new Reloader({
      config: s.config(), jobs: initial.jobs, log: s.log, loadConfig: s.config,
      loadJobs: (c) => loadJobs(c.jobsDir, c.timezone, s.dir),
      replaceJobs: async (jobs) => { replaced.push(jobs); },
    });
    for (const [over, setting] of [[{ httpToken: 'new-token-2' }, 'httpToken'], [{ alertWebhook: 'https://hooks.example.com/new-path-2' }, 'alertWebhook'], [{ alertToken: 'new-alert-2' }, 'alertToken'], [{ store: 'postgres://cron:new-pass-2@127.0.0.1:5432/db' }, 'store']] as const) {
      write(over);
      s.lines.length = 0;
      reloader.request();
      await reloader.idle();
      const refused = s.lines.filter((l) => String(l.msg).startsWith('reload refused'));
      expect(refused, JSON.stringify(s.lines)).toHaveLength(1);
      expect(String(refused[0]!.msg)).toContain(`${setting} changed`);
      expect(JSON.stringify(s.lines)).not.toMatch(/old-token-1|new-token-2|old-path-1|new-path-2|old-alert-1|new-alert-2|old-pass-1|new-pass-2/);
      write({});
    }
    expect(replaced).toEqual([]);
  });
});
