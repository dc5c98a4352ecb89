/**
 * `bin/scheduler` as users run it: argument handling, exit codes and output shapes that need no server
 * (SQLite in a temporary folder at most), plus refusal with exit 4 when the store or Redis cannot be
 * reached at start. Needs `npm run build` first (`npm test` does it through pretest).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, Daemon, cleanEnv, runCli, type CliResult } from '../helpers/cli.js';
import { RedisServer, freePort } from '../helpers/redis.js';
import {
  BROKEN_JOBS, GOOD_JOBS, MIXED_JOBS, ROOT, brokenJobsWithTsSyntaxError, copyFixture, removeTempDirs, tempDir,
} from './_fixtures.js';

beforeAll(() => {
  if (!existsSync(join(ROOT, 'dist', 'cli', 'entry.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does it) before these tests');
});
afterAll(removeTempDirs);

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const LOCAL = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$/;

/** Runs the CLI in a fresh temporary working directory (no config/scheduler.json, no ./data of the project). */
function cli(args: string[], env: Record<string, string | undefined> = {}, cwd = tempDir('cron-unit-cli-')): Promise<CliResult> {
  return runCli(args, { cwd, env, timeoutMs: 30_000 });
}

/** A SQLite store in its own temporary folder. */
function sqliteStore(): string {
  return `sqlite:${join(tempDir('cron-unit-store-'), 's.db')}`;
}

/** A jobs folder in a temporary folder holding these files (name -> source). */
function jobsFolder(files: Record<string, string>): string {
  const dir = join(tempDir('cron-unit-jobs-'), 'jobs');
  mkdirSync(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

const job = (schedule: string, extra = ''): string => `export default { schedule: ${JSON.stringify(schedule)}, ${extra} run: () => 'ok' };\n`;

/** The exit status and the one `scheduler: ...` line of a refusal, with nothing on stdout. */
function refusal(r: CliResult): string {
  expect(r.code, show(r)).toBe(2);
  expect(r.stdout, show(r)).toBe('');
  const all = lines(r.stderr);
  expect(all, show(r)).toHaveLength(1);
  expect(all[0]).toMatch(/^scheduler: /);
  return all[0]!;
}

function lines(text: string): string[] {
  return text.split('\n').filter((l) => l.trim() !== '');
}

/** The error lines the CLI itself prints (`scheduler: ...`), as opposed to log lines. */
function errorLines(stderr: string): string[] {
  return lines(stderr).filter((l) => l.startsWith('scheduler: '));
}

function show(r: CliResult): string {
  return `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
}

describe.concurrent('usage', () => {
  it('--help exits 0 and shows the commands, examples and exit statuses', async ({ expect }) => {
    const r = await cli(['--help']);
    expect(r.code, show(r)).toBe(0);
    for (const word of ['run', 'run-once', 'list', 'next', 'validate', 'history', 'migrate', 'Examples:', 'scheduler run-once', 'Exit statuses']) {
      expect(r.stdout).toContain(word);
    }
  });

  it('--version and -V print the package version, before a command or after one', async ({ expect }) => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const args of [['--version'], ['-V'], ['run', '--version'], ['validate', '-V'], ['run-once', 'some-job', '--version']]) {
      const r = await cli(args);
      expect({ args, code: r.code, stdout: r.stdout }, show(r)).toEqual({ args, code: 0, stdout: `${version}\n` });
    }
  });

  it('an unknown command exits 2 naming it', async ({ expect }) => {
    const r = await cli(['frobnicate']);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr).toContain('frobnicate');
    expect(r.stdout).toBe('');
  });

  it('an unknown option exits 2 naming it', async ({ expect }) => {
    const r = await cli(['validate', '--frobnicate', '--jobs', GOOD_JOBS]);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr).toContain('--frobnicate');
  });
});

describe.concurrent('validate', () => {
  it('a good folder exits 0 and says how many jobs are valid', async ({ expect }) => {
    const r = await cli(['validate', '--jobs', GOOD_JOBS]);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout).toContain('3 job(s) valid');
  });

  it('a broken folder exits 2 with one line per problem, each naming the file and the field', async ({ expect }) => {
    const dir = brokenJobsWithTsSyntaxError();
    const r = await cli(['validate', '--jobs', dir]);
    expect(r.code, show(r)).toBe(2);
    const out = lines(r.stdout);
    const files = new Set<string>();
    for (const line of out) {
      const match = /^(\/\S+?\.(?:ts|mts|js|mjs)): (.*)$/.exec(line);
      expect(match, `not "<file>: <problem>": ${line}`).not.toBeNull();
      expect(match![1]!.startsWith(`${dir}/`), line).toBe(true);
      expect(match![2], line).toMatch(/^(field '[A-Za-z ()]+' = |unknown field '|default export = |cannot be loaded: )/);
      files.add(match![1]!.slice(dir.length + 1));
    }
    // Every broken file is there (dup-first.mjs is the valid half of the duplicate pair).
    expect(files.size).toBeGreaterThanOrEqual(25);
    for (const f of ['bad-schedule.ts', 'syntax-error-ts.ts', 'syntax-error.js', 'throws-at-import.mjs', 'typo-field.ts', 'dup-second.ts', 'short-lock-ttl.ts']) {
      expect(files.has(f), f).toBe(true);
    }
    expect(files.has('dup-first.mjs')).toBe(false);
    expect(out.some((l) => l.includes("short-lock-ttl.ts: field 'lockTtl'"))).toBe(true);
    expect(out.some((l) => /syntax-error-ts\.ts: cannot be loaded: .*syntax-error-ts\.ts:4:\d+/.test(l))).toBe(true);
  });

  it('nicknames are valid schedules; an unknown one is one line naming the file and the field', async ({ expect }) => {
    const nicknames = ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'];
    const good = jobsFolder(Object.fromEntries(nicknames.map((n) => [`${n.slice(1)}.mjs`, job(n)])));
    const ok = await cli(['validate', '--jobs', good]);
    expect(ok.code, show(ok)).toBe(0);
    expect(ok.stdout).toContain('7 job(s) valid');

    const bad = jobsFolder({ 'daily.mjs': job('@daily'), 'sometimes.mjs': job('@sometimes') });
    const r = await cli(['validate', '--jobs', bad]);
    expect(r.code, show(r)).toBe(2);
    expect(lines(r.stdout)).toEqual([
      `${bad}/sometimes.mjs: field 'schedule' = "@sometimes": expected a valid cron expression (unknown nickname '@sometimes'; the nicknames are @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)`,
    ]);
  });

  it('a broken folder with --json exits 2 with every problem, parseable', async ({ expect }) => {
    const r = await cli(['validate', '--json', '--jobs', BROKEN_JOBS]);
    expect(r.code, show(r)).toBe(2);
    const doc = JSON.parse(r.stdout) as { valid: boolean; jobs: string[]; problems: Array<{ file: string; problems: string[] }> };
    expect(doc.valid).toBe(false);
    expect(doc.jobs).toEqual(['dup-job']);
    expect(doc.problems.length).toBeGreaterThanOrEqual(15);
    const overlap = doc.problems.find((p) => p.file.endsWith('bad-overlap.js'))!;
    expect(overlap.problems).toEqual([expect.stringMatching(/bad-overlap\.js: field 'overlap' = "queue": expected 'skip' or 'allow'/)]);
  });
});

describe.concurrent('next', () => {
  it('next <job> -n 5 --json: { job, timezone, periods: [{ utc, local }] }, local being the same instant in the job zone', async ({ expect }) => {
    const r = await cli(['next', 'typed-report', '-n', '5', '--json', '--jobs', GOOD_JOBS]);
    expect(r.code, show(r)).toBe(0);
    const doc = JSON.parse(r.stdout) as { job: string; timezone: string; periods: Array<{ utc: string; local: string }> };
    expect(doc.job).toBe('typed-report');
    expect(doc.timezone).toBe('Europe/Berlin');
    expect(doc.periods).toHaveLength(5);
    let previous = Date.now() - 1000;
    for (const p of doc.periods) {
      expect(p.utc).toMatch(ISO);
      expect(p.local).toMatch(LOCAL);
      expect(Date.parse(p.local)).toBe(Date.parse(p.utc));
      expect(p.local.slice(11, 19)).toBe('02:00:00'); // schedule '0 2 * * *' in Berlin
      expect(Date.parse(p.utc)).toBeGreaterThan(previous);
      previous = Date.parse(p.utc);
    }
  });

  it('next --from <ISO>: the periods strictly after that instant, DST flagged (Berlin 2 a.m. job across the spring-forward)', async ({ expect }) => {
    // 2026-03-28T01:00Z is 02:00 CET, a period itself: not included. 29 March has no 02:00: 03:00 CEST.
    const r = await cli(['next', 'typed-report', '-n', '3', '--from', '2026-03-28T02:00:00+01:00', '--json', '--jobs', GOOD_JOBS]);
    expect(r.code, show(r)).toBe(0);
    const doc = JSON.parse(r.stdout) as { job: string; from: string; periods: Array<{ utc: string; local: string; dst?: string }> };
    expect(doc.from).toBe('2026-03-28T01:00:00.000Z');
    expect(doc.periods).toEqual([
      { utc: '2026-03-29T01:00:00.000Z', local: '2026-03-29T03:00:00+02:00', dst: 'UTC offset +01:00 -> +02:00' },
      { utc: '2026-03-30T00:00:00.000Z', local: '2026-03-30T02:00:00+02:00' },
      { utc: '2026-03-31T00:00:00.000Z', local: '2026-03-31T02:00:00+02:00' },
    ]);
    const text = await cli(['next', 'typed-report', '-n', '2', '--from', '2026-03-28T01:00:00Z', '--jobs', GOOD_JOBS]);
    expect(text.code, show(text)).toBe(0);
    expect(lines(text.stdout)).toEqual([
      'typed-report  0 2 * * *  (Europe/Berlin)  after 2026-03-28T01:00:00.000Z',
      expect.stringMatching(/^LOCAL +UTC +DST$/),
      expect.stringMatching(/^2026-03-29T03:00:00\+02:00 +2026-03-29T01:00:00\.000Z +UTC offset \+01:00 -> \+02:00$/),
      expect.stringMatching(/^2026-03-30T02:00:00\+02:00 +2026-03-30T00:00:00\.000Z *$/),
    ]);
  });

  const badFrom = ['yesterday', '2026-03-28', '2026-03-28T01:00:00', '2026-02-30T00:00:00Z', '2026-03-28T25:00:00Z', '1774659600000', ''];
  for (const value of badFrom) {
    it(`next --from ${JSON.stringify(value)} exits 2 with one line naming --from, the value and what is expected`, async ({ expect }) => {
      const line = refusal(await cli(['next', 'typed-report', '--from', value, '--jobs', GOOD_JOBS]));
      expect(line).toBe(`scheduler: invalid --from ${value}: expected an ISO-8601 instant: a date and time with Z or an offset, such as 2026-11-30T18:00:00.000Z or 2026-11-30T19:00+01:00`);
    });
  }

  const badCounts = ['0', '100001', '-1', '1.5', '1e3', 'abc', '0x10', ''];
  for (const value of badCounts) {
    for (const command of ['next', 'list'] as const) {
      it(`${command} -n ${JSON.stringify(value)} exits 2 with one line: invalid -n, a whole number from 1 to 100000`, async ({ expect }) => {
        const args = command === 'next' ? ['next', 'typed-report', '-n', value] : ['list', '-n', value];
        const line = refusal(await cli([...args, '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() }));
        expect(line).toBe(`scheduler: invalid -n ${value}: expected a whole number from 1 to 100000`);
      });
    }
  }

  it('next -n 100000 --json of an every-second job: valid JSON, 100000 periods one second apart, from the next second on', async ({ expect }) => {
    const jobs = jobsFolder({ 'every-second.mjs': job('* * * * * *') });
    const started = Date.now();
    const r = await runCli(['next', 'every-second', '-n', '100000', '--json', '--jobs', jobs], { cwd: tempDir(), timeoutMs: 120_000 });
    const elapsed = Date.now() - started;
    expect(r.code, show({ ...r, stdout: r.stdout.slice(0, 500) })).toBe(0);
    const doc = JSON.parse(r.stdout) as { job: string; timezone: string; periods: Array<{ utc: string; local: string }> };
    expect(doc.periods).toHaveLength(100_000);
    const first = Date.parse(doc.periods[0]!.utc);
    // The first period is the next second after the command's own "now", which lies within the run.
    expect(first).toBeGreaterThan(started - 1000);
    expect(first).toBeLessThanOrEqual(started + elapsed + 1000);
    doc.periods.forEach((p, i) => {
      if (Date.parse(p.utc) !== first + i * 1000 || Date.parse(p.local) !== first + i * 1000) throw new Error(`period ${i}: ${JSON.stringify(p)}`);
    });
  }, 120_000);

  it('next -n 100000 as text: a header, the column titles and 100000 rows', async ({ expect }) => {
    const jobs = jobsFolder({ 'every-second.mjs': job('* * * * * *') });
    const r = await runCli(['next', 'every-second', '-n', '100000', '--jobs', jobs], { cwd: tempDir(), timeoutMs: 120_000 });
    expect(r.code, show({ ...r, stdout: r.stdout.slice(0, 500) })).toBe(0);
    const out = lines(r.stdout);
    expect(out).toHaveLength(100_002);
    expect(out[1]).toMatch(/^LOCAL +UTC +DST$/);
    expect(out.at(-1)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00 +\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.000Z *$/);
  }, 120_000);

  it('next of a nickname job: @weekly is Sunday midnight in the job zone; the header says what the nickname means', async ({ expect }) => {
    const jobs = jobsFolder({ 'weekly.mjs': job('@weekly', "timezone: 'America/New_York',") });
    const r = await cli(['next', 'weekly', '-n', '3', '--from', '2026-12-01T00:00:00Z', '--json', '--jobs', jobs]);
    expect(r.code, show(r)).toBe(0);
    const doc = JSON.parse(r.stdout) as { schedule: string; periods: Array<{ utc: string; local: string }> };
    expect(doc.schedule).toBe('@weekly');
    expect(doc.periods.map((p) => p.local)).toEqual(['2026-12-06T00:00:00-05:00', '2026-12-13T00:00:00-05:00', '2026-12-20T00:00:00-05:00']);
    const text = await cli(['next', 'weekly', '-n', '1', '--from', '2026-12-01T00:00:00Z', '--jobs', jobs]);
    expect(lines(text.stdout)[0]).toBe('weekly  @weekly (0 0 * * 0)  (America/New_York)  after 2026-12-01T00:00:00.000Z');
  });

  it('next -n past the last period croner computes (year 3000): the periods there are, one stderr line saying so, exhausted in --json, exit 0', async ({ expect }) => {
    const jobs = jobsFolder({ 'yearly.mjs': job('@yearly') });
    const r = await cli(['next', 'yearly', '-n', '100000', '--from', '2990-06-01T00:00:00Z', '--jobs', jobs]);
    expect(r.code, show(r)).toBe(0);
    const out = lines(r.stdout);
    expect(out).toHaveLength(2 + 9);
    expect(out.at(-1)).toMatch(/^2999-01-01T00:00:00\+00:00 +2999-01-01T00:00:00\.000Z *$/);
    expect(lines(r.stderr)).toEqual(['scheduler: the schedule has no more periods after 2999-01-01T00:00:00.000Z (9 of 100000 shown; no period is computed from the year 3000 on)']);
    const json = await cli(['next', 'yearly', '-n', '10', '--from', '2990-06-01T00:00:00Z', '--json', '--jobs', jobs]);
    expect(json.code, show(json)).toBe(0);
    const doc = JSON.parse(json.stdout) as { exhausted: boolean; periods: unknown[] };
    expect(doc.exhausted).toBe(true);
    expect(doc.periods).toHaveLength(9);
    const enough = await cli(['next', 'yearly', '-n', '9', '--from', '2990-06-01T00:00:00Z', '--json', '--jobs', jobs]);
    expect(JSON.parse(enough.stdout).exhausted).toBe(false);
    expect(lines(enough.stderr)).toEqual([]);
  });

  it('next of a misspelt job suggests the closest name', async ({ expect }) => {
    const line = refusal(await cli(['next', 'typed-reprot', '--jobs', GOOD_JOBS]));
    expect(line).toBe("scheduler: unknown job 'typed-reprot' (did you mean 'typed-report'?); known jobs: plain-mjs, seconds, typed-report");
  });

  it('next of an unknown job exits 2 naming it and the known jobs', async ({ expect }) => {
    const r = await cli(['next', 'unknown-job', '--jobs', GOOD_JOBS]);
    expect(r.code, show(r)).toBe(2);
    const errors = errorLines(r.stderr);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain("'unknown-job'");
    expect(errors[0]).toContain('typed-report');
  });
});

describe.concurrent('bad settings exit 2 with one line naming the setting', () => {
  const cases: Array<{ what: string; args: string[]; env: Record<string, string>; names: string[] }> = [
    { what: 'SCHEDULER_TIMEZONE=Mars/Olympus', args: ['validate', '--jobs', GOOD_JOBS], env: { SCHEDULER_TIMEZONE: 'Mars/Olympus' }, names: ['SCHEDULER_TIMEZONE', 'Mars/Olympus'] },
    { what: 'SCHEDULER_STORE=ftp://x', args: ['list', '--jobs', GOOD_JOBS], env: { SCHEDULER_STORE: 'ftp://x' }, names: ['SCHEDULER_STORE', 'ftp://x'] },
    { what: '--store with a password', args: ['list', '--store', 'mongodb://u:secretpw@h/d', '--jobs', GOOD_JOBS], env: {}, names: ['--store', 'mongodb://u:***@h/d'] },
  ];
  for (const c of cases) {
    it(c.what, async ({ expect }) => {
      const r = await cli(c.args, c.env);
      expect(r.code, show(r)).toBe(2);
      const all = lines(r.stderr);
      expect(all, show(r)).toHaveLength(1);
      expect(all[0]).toMatch(/^scheduler: /);
      for (const n of c.names) expect(all[0]).toContain(n);
      expect(all[0]).toContain('expected');
      expect(r.stderr).not.toContain('secretpw');
      expect(r.stdout).toBe('');
    });
  }
});

describe.concurrent('run-once argument checks (SQLite store in a temporary folder)', () => {
  it('run-once unknown-job exits 2 naming it', async ({ expect }) => {
    const r = await cli(['run-once', 'unknown-job', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() });
    expect(r.code, show(r)).toBe(2);
    const errors = errorLines(r.stderr);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain("'unknown-job'");
  });

  it('run-once <job> --period <not a period> exits 2 naming the nearest periods before and after', async ({ expect }) => {
    const r = await cli(['run-once', 'plain-mjs', '--period', '2026-03-01T10:07:00Z', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() });
    expect(r.code, show(r)).toBe(2);
    const errors = errorLines(r.stderr);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain('2026-03-01T10:07:00.000Z');
    expect(errors[0]).toMatch(/before 2026-03-01T10:00:00\.000Z/);
    expect(errors[0]).toMatch(/after 2026-03-01T10:15:00\.000Z/);
  });

  it('--json output is one JSON document on stdout, with the logs on stderr', async ({ expect }) => {
    const store = sqliteStore();
    const r = await cli(['run-once', 'plain-mjs', '--json', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: store, SCHEDULER_LOG_LEVEL: 'debug', SCHEDULER_LOG_FORMAT: 'json' });
    expect(r.code, show(r)).toBe(0);
    const doc = JSON.parse(r.stdout) as { runs: Array<{ job: string; status: string; trigger: string; attempt: number; result: unknown }> };
    expect(doc.runs).toHaveLength(1);
    expect(doc.runs[0]).toMatchObject({ job: 'plain-mjs', status: 'succeeded', trigger: 'manual', attempt: 1, result: { job: 'plain-mjs', trigger: 'manual' } });
    // The logs went to stderr, as JSON lines.
    const logs = lines(r.stderr);
    expect(logs.length).toBeGreaterThan(0);
    for (const l of logs) expect(() => JSON.parse(l), l).not.toThrow();

    // history --json of the same store sees the run.
    const h = await cli(['history', '--json', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: store });
    expect(h.code, show(h)).toBe(0);
    const runs = JSON.parse(h.stdout) as Array<Record<string, unknown>>;
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ job: 'plain-mjs', trigger: 'manual', status: 'succeeded', attempt: 1 });
    for (const key of ['scheduledAt', 'periodKey', 'nodeId', 'startedAt', 'finishedAt', 'error']) expect(runs[0]).toHaveProperty(key);
    expect(String(runs[0]!.periodKey)).toBe(`plain-mjs@${String(runs[0]!.scheduledAt)}`);
  });
});

describe.concurrent('pause and resume with no daemon (SQLite store in a temporary folder)', () => {
  it('a job known only from the jobs table (defined on other nodes) can be paused and resumed; other names exit 2 listing the known ones', async ({ expect }) => {
    const store = sqliteStore();
    const here = await cli(['pause', 'plain-mjs', '--reason', 'disk full', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: store });
    expect(here.code, show(here)).toBe(0);
    expect(lines(here.stdout)).toEqual(["paused job 'plain-mjs' (reason: disk full): every node honours it within one tick (1 s); its periods are recorded skipped (paused) until 'resume plain-mjs'",
      "note: no node has declared 'plain-mjs' yet; the pause is kept and applies to the nodes that define it when they run"]);
    // This node's folder has no job at all: the table still knows plain-mjs.
    const empty = jobsFolder({});
    const unknown = await cli(['pause', 'plain-mj', '--jobs', empty], { SCHEDULER_STORE: store });
    expect(unknown.code, show(unknown)).toBe(2);
    expect(errorLines(unknown.stderr)).toEqual(["scheduler: unknown job 'plain-mj' (did you mean 'plain-mjs'?); known jobs: plain-mjs"]);
    const resumed = await cli(['resume', 'plain-mjs', '--json', '--jobs', empty], { SCHEDULER_STORE: store });
    expect(resumed.code, show(resumed)).toBe(0);
    expect(JSON.parse(resumed.stdout)).toEqual({ job: 'plain-mjs', action: 'resume', changed: true, paused: false, reason: null, since: null, declaredAt: null, declaredRecently: false, at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    const again = await cli(['resume', 'plain-mjs', '--jobs', empty], { SCHEDULER_STORE: store });
    expect(lines(again.stdout)).toEqual(["job 'plain-mjs' was not paused: nothing changed",
      "note: no node has declared 'plain-mjs' yet; nothing runs it until a node that defines it runs"]);
  });

  it('a --reason of several lines or over 500 characters, and --force on a pass, exit 2 with one line', async ({ expect }) => {
    for (const reason of ['two\nlines', 'x'.repeat(501)]) {
      const r = await cli(['pause', 'plain-mjs', '--reason', reason, '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() });
      expect(r.code, show(r)).toBe(2);
      expect(errorLines(r.stderr)).toEqual([expect.stringMatching(/^scheduler: invalid --reason \(\d+ characters.*\): expected one line of at most 500 characters/)]);
    }
    const pass = await cli(['run-once', '--force', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() });
    expect(pass.code, show(pass)).toBe(2);
    expect(errorLines(pass.stderr)).toEqual([expect.stringContaining('--force only applies to named jobs')]);
  });
});

describe.concurrent('list', () => {
  it('list --json with a temporary SQLite store: one object per valid job with name, schedule, timezone and next ISO instants', async ({ expect }) => {
    const r = await cli(['list', '--json', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() });
    expect(r.code, show(r)).toBe(0);
    const doc = JSON.parse(r.stdout) as { jobs: Array<{ name: string; schedule: string; timezone: string; next: string[]; enabled: boolean }> } | Array<unknown>;
    const jobs = (Array.isArray(doc) ? doc : doc.jobs) as Array<{ name: string; schedule: string; timezone: string; next: string[]; enabled: boolean }>;
    expect(jobs.map((j) => j.name).sort()).toEqual(['plain-mjs', 'seconds', 'typed-report']);
    const typed = jobs.find((j) => j.name === 'typed-report')!;
    expect(typed).toMatchObject({ schedule: '0 2 * * *', timezone: 'Europe/Berlin' });
    expect(typed.next.length).toBeGreaterThan(0);
    for (const n of typed.next) expect(n).toMatch(ISO);
    const plain = jobs.find((j) => j.name === 'plain-mjs')!;
    expect(plain.timezone).toBe('UTC');
    expect(Date.parse(plain.next[0]!) - Date.now()).toBeLessThanOrEqual(15 * 60_000);
  });

  it('list -n N: N next periods per job in --json; the table shows all N when -n is given, else the first', async ({ expect }) => {
    const jobs = jobsFolder({ 'daily.mjs': job('@daily', "timezone: 'Asia/Tokyo',"), 'minutely.mjs': job('* * * * *') });
    const r = await cli(['list', '-n', '4', '--json', '--jobs', jobs], { SCHEDULER_STORE: sqliteStore() });
    expect(r.code, show(r)).toBe(0);
    const doc = JSON.parse(r.stdout) as { jobs: Array<{ name: string; schedule: string; next: string[] }> };
    const daily = doc.jobs.find((j) => j.name === 'daily')!;
    expect(daily.schedule).toBe('@daily');
    expect(daily.next).toHaveLength(4);
    for (const n of daily.next) expect(n).toMatch(/T15:00:00\.000Z$/); // midnight in Tokyo
    expect(doc.jobs.find((j) => j.name === 'minutely')!.next).toHaveLength(4);

    const defaults = await cli(['list', '--json', '--jobs', jobs], { SCHEDULER_STORE: sqliteStore() });
    expect((JSON.parse(defaults.stdout) as { jobs: Array<{ next: string[] }> }).jobs.map((j) => j.next.length)).toEqual([3, 3]);

    const text = await cli(['list', '-n', '2', '--jobs', jobs], { SCHEDULER_STORE: sqliteStore() });
    expect(text.code, show(text)).toBe(0);
    // The row shows the first in Tokyo's wall-clock time; with -n all N follow on a line of their own.
    const out = lines(text.stdout);
    const at = out.findIndex((l) => l.startsWith('daily '));
    expect(out[at]).toMatch(/ @daily +Asia\/Tokyo +\d\d-\d\d 00:00:00 \(in \d+[smh]\)$/);
    expect(out.slice(at + 1).find((l) => l.startsWith('  next '))).toMatch(/^ {2}next \d\d-\d\d 00:00:00, \d\d-\d\d 00:00:00$/);
    const plain = await cli(['list', '--jobs', jobs], { SCHEDULER_STORE: sqliteStore() });
    expect(lines(plain.stdout).filter((l) => l.startsWith('  next '))).toEqual([]);
  });

  it('list on a folder with broken files exits 2, still listing the valid jobs and naming the invalid files', async ({ expect }) => {
    const r = await cli(['list', '--json', '--jobs', MIXED_JOBS], { SCHEDULER_STORE: sqliteStore() });
    expect(r.code, show(r)).toBe(2);
    const doc = JSON.parse(r.stdout) as { jobs: Array<{ name: string }>; invalid: Array<{ file: string; problems: string[] }> };
    expect(doc.jobs.map((j) => j.name)).toEqual(['a-good', 'c-good-named', 'z-good']);
    expect(doc.invalid.map((f) => f.file.replace(/^.*\//, ''))).toEqual(['b-syntax.js', 'd-throws.mjs', 'e-bad-schedule.js']);
  });
});

describe.concurrent('history of one job', () => {
  it('an unknown job with no rows exits 2, naming it and the known jobs, instead of an empty table', async ({ expect }) => {
    const line = refusal(await cli(['history', 'no-such-job', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() }));
    expect(line).toBe("scheduler: unknown job 'no-such-job'; known jobs: plain-mjs, seconds, typed-report");
  });

  it('a misspelt job whose file is gone, known from its rows, is suggested and listed; a long list is cut to ten names', async ({ expect }) => {
    const store = sqliteStore();
    const here = jobsFolder({ 'nightly-settlement.mjs': job('0 2 * * *') });
    const ran = await cli(['run-once', 'nightly-settlement', '--jobs', here], { SCHEDULER_STORE: store });
    expect(ran.code, show(ran)).toBe(0);
    // The file removed: only the row knows the name (a manual run-once declares no job in the jobs table).
    const empty = jobsFolder({});
    const line = refusal(await cli(['history', 'nightly-setlement', '--jobs', empty], { SCHEDULER_STORE: store }));
    expect(line).toBe("scheduler: unknown job 'nightly-setlement' (did you mean 'nightly-settlement'?); known jobs: nightly-settlement");
    const many = jobsFolder(Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`job-${String(i + 1).padStart(2, '0')}.mjs`, job('0 2 * * *')])));
    const long = refusal(await cli(['history', 'no-such-job', '--jobs', many], { SCHEDULER_STORE: store }));
    expect(long).toBe("scheduler: unknown job 'no-such-job'; known jobs: job-01, job-02, job-03, job-04, job-05, job-06, job-07, job-08, job-09, job-10 and 3 more");
  });

  it('a misspelt job suggests the closest name (with --status too)', async ({ expect }) => {
    const line = refusal(await cli(['history', 'plain-mj', '--status', 'failed', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() }));
    expect(line).toContain("unknown job 'plain-mj' (did you mean 'plain-mjs'?)");
  });

  it('a known job without runs, and the whole history of an empty store, say so and exit 0', async ({ expect }) => {
    const store = sqliteStore();
    const r = await cli(['history', 'typed-report', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: store });
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout.trim()).toBe('no runs recorded');
    const json = await cli(['history', 'seconds', '--json', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: store }); // disabled, still known
    expect(json.code, show(json)).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([]);
    const all = await cli(['history', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: store });
    expect(all.code, show(all)).toBe(0);
    expect(all.stdout.trim()).toBe('no runs recorded');
  });

  it('a job removed from the jobs folder still shows its recorded runs (also filtered by a status it has no run of)', async ({ expect }) => {
    const store = sqliteStore();
    const jobs = copyFixture(GOOD_JOBS);
    const ran = await cli(['run-once', 'plain-mjs', '--jobs', jobs], { SCHEDULER_STORE: store });
    expect(ran.code, show(ran)).toBe(0);
    rmSync(join(jobs, 'plain.mjs'));
    const r = await cli(['history', 'plain-mjs', '--json', '--jobs', jobs], { SCHEDULER_STORE: store });
    expect(r.code, show(r)).toBe(0);
    expect((JSON.parse(r.stdout) as Array<{ job: string; status: string }>).map((x) => [x.job, x.status])).toEqual([['plain-mjs', 'succeeded']]);
    const text = await cli(['history', 'plain-mjs', '--jobs', jobs], { SCHEDULER_STORE: store });
    expect(text.code, show(text)).toBe(0);
    // Its file is gone, so its zone is unknown: the period is shown in UTC.
    expect(lines(text.stdout)[1]).toMatch(/^plain-mjs +\d\d-\d\d \d\d:\d\d:\d\dZ +1 +manual +succeeded /);
    const failed = await cli(['history', 'plain-mjs', '--status', 'failed', '--jobs', jobs], { SCHEDULER_STORE: store });
    expect(failed.code, show(failed)).toBe(0);
    expect(failed.stdout.trim()).toBe('no runs recorded');
    // Even a jobs folder that is gone does not hide the history.
    const gone = await cli(['history', 'plain-mjs', '--json', '--jobs', join(jobs, 'missing')], { SCHEDULER_STORE: store });
    expect(gone.code, show(gone)).toBe(0);
    expect(JSON.parse(gone.stdout)).toHaveLength(1);
  });

  it('an unknown job when the jobs folder cannot be read: exit 2, one line saying both', async ({ expect }) => {
    const line = refusal(await cli(['history', 'no-such-job', '--jobs', join(tempDir(), 'missing')], { SCHEDULER_STORE: sqliteStore() }));
    expect(line).toMatch(/^scheduler: unknown job 'no-such-job': no run recorded under that name, and the jobs folder .*missing cannot be read/);
  });

  it('history --limit is validated like -n', async ({ expect }) => {
    const line = refusal(await cli(['history', '--limit', '1e3', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() }));
    expect(line).toBe('scheduler: invalid --limit 1e3: expected a whole number from 1 to 100000');
  });
});

describe.concurrent('run --http', () => {
  it('run --help shows --http and what it is for', async ({ expect }) => {
    const r = await cli(['run', '--help']);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout.replace(/\s+/g, ' ')).toContain("--http <addr> the HTTP server's address (probes /healthz /readyz, /metrics, /api, status page): host:port, host:0 for any free port, or off (SCHEDULER_HTTP, default 127.0.0.1:9464)");
  });

  it('a bad --http exits 2 with one line naming the flag and the value', async ({ expect }) => {
    const line = refusal(await cli(['run', '--http', 'localhost', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore() }));
    expect(line).toBe("scheduler: invalid setting --http=localhost: expected 'host:port' (for example 127.0.0.1:9464) or 'off'");
  });

  it('--http overrides SCHEDULER_HTTP: the daemon starts with the flag\'s address (logged) and stops cleanly', async ({ expect }) => {
    const d = new Daemon(['--http', '127.0.0.1:19464', '--jobs', GOOD_JOBS], {
      cwd: tempDir(), env: { SCHEDULER_STORE: sqliteStore(), SCHEDULER_HTTP: 'off', SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_LOG_FORMAT: 'json' },
    });
    try {
      const deadline = Date.now() + 20_000;
      while (!d.logs().some((l) => l.msg === 'daemon starting') && Date.now() < deadline && d.proc.exitCode === null) await new Promise((r) => setTimeout(r, 100));
      const start = d.logs().find((l) => l.msg === 'daemon starting');
      expect(start, `${d.output}\n${d.errors}`).toBeDefined();
      expect((start!.config as { http: string }).http).toBe('127.0.0.1:19464');
    } finally {
      expect(await d.stop()).toBe(0);
    }
  });
});

describe.concurrent('installed use: a symlink, another working directory, a jobs folder outside the project', () => {
  /** Spawns the symlink itself (its #! line), as an npm bin on PATH would be run. */
  function runLink(link: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<CliResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(link, args, { cwd, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      child.on('error', reject);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });
  }

  function install(): { link: string; work: string } {
    const base = tempDir('cron-unit-install-');
    mkdirSync(join(base, 'node_modules', '.bin'), { recursive: true });
    const link = join(base, 'node_modules', '.bin', 'scheduler');
    symlinkSync(BIN, link);
    const work = join(base, 'somewhere', 'else');
    mkdirSync(work, { recursive: true });
    return { link, work };
  }

  it('validate through a symlink from another directory, --jobs relative to that directory', async ({ expect }) => {
    const { link, work } = install();
    const r = await runLink(link, ['validate', '--jobs', relative(work, GOOD_JOBS)], work);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout).toContain(`3 job(s) valid in ${GOOD_JOBS}`);
  });

  it('run-once through a symlink: SCHEDULER_JOBS_DIR relative to the working directory, a TypeScript job importing cluster-cron from a folder outside the project, the default SQLite store under ./data', async ({ expect }) => {
    const { link, work } = install();
    const jobs = copyFixture(GOOD_JOBS); // no package.json anywhere around it
    const r = await runLink(link, ['run-once', 'typed-report', '--json'], work, { SCHEDULER_JOBS_DIR: relative(work, jobs) });
    expect(r.code, show(r)).toBe(0);
    const doc = JSON.parse(r.stdout) as { runs: Array<{ job: string; status: string; result: unknown }> };
    expect(doc.runs).toEqual([expect.objectContaining({ job: 'typed-report', status: 'succeeded', result: { job: 'typed-report', value: 42 } })]);
    expect(existsSync(join(work, 'data', 'scheduler.db'))).toBe(true);
  });
});

describe.concurrent('the store or Redis unreachable at start: exit 4, one clear line, no password', () => {
  const cases: Array<{ what: string; args: string[]; env: () => Record<string, string>; says: RegExp }> = [
    { what: 'MySQL refusing connections (run-once)', args: ['run-once', '--json'], env: () => ({ SCHEDULER_STORE: 'mysql://root:secretpw@127.0.0.1:1/x' }), says: /store mysql:\/\/root:\*\*\*@127\.0\.0\.1:1\/x cannot be reached/ },
    { what: 'Redis refusing the credentials: WRONGPASS (run-once <job>)', args: ['run-once', 'plain-mjs'], env: () => ({ SCHEDULER_STORE: sqliteStore(), SCHEDULER_REDIS: `redis://:secretpw@127.0.0.1:${guarded!.port}` }), says: /Redis refuses this node's credentials: redis:\/\/:\*\*\*@127\.0\.0\.1:\d+ \(WRONGPASS/ },
  ];
  // A master that wants another password: a configuration error, not an outage.
  let guarded: RedisServer | undefined;
  beforeAll(async () => {
    guarded = new RedisServer(await freePort(), ['--requirepass', 'the-right-one']);
    await guarded.start();
  });
  afterAll(async () => {
    await guarded?.cleanup();
  });
  for (const c of cases) {
    it(c.what, async ({ expect }) => {
      const r = await cli([...c.args, '--jobs', GOOD_JOBS], c.env());
      expect(r.code, show(r)).toBe(4);
      const errors = errorLines(r.stderr);
      expect(errors, show(r)).toHaveLength(1);
      expect(errors[0]).toMatch(c.says);
      expect(r.stderr, 'no stack trace').not.toMatch(/^\s+at /m);
      expect(r.stdout + r.stderr).not.toContain('secretpw');
      expect(r.stdout, 'nothing but the document on stdout').toBe('');
    });
  }
});

describe('Redis unreachable at start (nothing listening): the command runs, through the run row alone', () => {
  it('run-once <job> exits 0, ran the job, and says once that the quorum is unreachable', async () => {
    const r = await cli(['run-once', 'plain-mjs', '--json', '--jobs', GOOD_JOBS], { SCHEDULER_STORE: sqliteStore(), SCHEDULER_REDIS: 'redis://:secretpw@127.0.0.1:1', SCHEDULER_LOG_LEVEL: 'warn' });
    expect(r.code, show(r)).toBe(0);
    const doc = JSON.parse(r.stdout) as { runs: Array<{ job: string; status: string }> };
    expect(doc.runs.map((x) => [x.job, x.status])).toEqual([['plain-mjs', 'succeeded']]);
    const warnings = lines(r.stderr).filter((l) => l.includes('Redis quorum unreachable'));
    expect(warnings, r.stderr).toHaveLength(1);
    expect(warnings[0]).toContain('redis://:***@127.0.0.1:1');
    expect(r.stdout + r.stderr).not.toContain('secretpw');
  });
});
