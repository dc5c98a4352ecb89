/**
 * `bin/scheduler` as users run it: argument handling, exit codes and output shapes that need no server
 * (SQLite in a temporary folder at most), plus refusal with exit 4 when the store or Redis cannot be
 * reached at start. Needs `npm run build` first (`npm test` does it through pretest).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cleanEnv, runCli, type CliResult } from '../helpers/cli.js';
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

  it('list on a folder with broken files exits 2, still listing the valid jobs and naming the invalid files', async ({ expect }) => {
    const r = await cli(['list', '--json', '--jobs', MIXED_JOBS], { SCHEDULER_STORE: sqliteStore() });
    expect(r.code, show(r)).toBe(2);
    const doc = JSON.parse(r.stdout) as { jobs: Array<{ name: string }>; invalid: Array<{ file: string; problems: string[] }> };
    expect(doc.jobs.map((j) => j.name)).toEqual(['a-good', 'c-good-named', 'z-good']);
    expect(doc.invalid.map((f) => f.file.replace(/^.*\//, ''))).toEqual(['b-syntax.js', 'd-throws.mjs', 'e-bad-schedule.js']);
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
