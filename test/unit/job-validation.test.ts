/**
 * Job files: finding them, loading them (TypeScript without a build step, the package by name), and
 * validating every field, each problem on one line naming the file and the field. A broken file never
 * stops the others.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { defineJob } from '../../src/index.js';
import { listJobFiles, loadJobs, type LoadedJobs } from '../../src/jobs/load.js';
import type { JobContext } from '../../src/jobs/types.js';
import { JOB_DEFAULTS, validateJob } from '../../src/jobs/validate.js';
import {
  BROKEN_JOBS, GOOD_JOBS, MIXED_JOBS, ROOT, TS_SYNTAX_ERROR, brokenJobsWithTsSyntaxError, copyFixture, removeTempDirs, tempDir,
} from './_fixtures.js';

afterAll(removeTempDirs);

const noop = async () => {};
const FILE = 'jobs/example.ts';

function problemsOf(exported: unknown, file = FILE, zone = 'UTC'): string[] {
  const { job, problems } = validateJob(file, exported, zone);
  expect(job, `expected ${JSON.stringify(exported)} to be refused`).toBeUndefined();
  expect(problems.length).toBeGreaterThan(0);
  for (const p of problems) {
    expect(p.startsWith(`${file}: `), p).toBe(true);
    expect(p).not.toContain('\n');
  }
  return problems;
}

/** The one problem line about `field`. */
function problemAbout(problems: string[], field: string): string {
  const hits = problems.filter((p) => p.includes(`field '${field}'`));
  expect(hits, `no problem names field '${field}' in:\n${problems.join('\n')}`).toHaveLength(1);
  return hits[0]!;
}

describe('validateJob: a valid definition', () => {
  it('applies the documented defaults', () => {
    const { job, problems } = validateJob('jobs/nightly-report.ts', { schedule: '0 2 * * *', run: noop }, 'UTC');
    expect(problems).toEqual([]);
    expect(job).toMatchObject({
      name: 'nightly-report', // the file name without extension
      file: 'jobs/nightly-report.ts',
      timezone: 'UTC',
      timeoutMs: null,
      lockTtlMs: 30_000,
      overlap: 'skip',
      catchUpMs: 15 * 60_000,
      coalesce: true,
      retries: 0,
      retryDelayMs: 30_000,
      enabled: true,
    });
    expect(job!.schedule.expression).toBe('0 2 * * *');
    expect(JOB_DEFAULTS).toMatchObject({ lockTtl: '30s', overlap: 'skip', coalesce: true, retries: 0, enabled: true });
  });

  it("uses the config's time zone when the job names none, and the job's own when it does", () => {
    expect(validateJob(FILE, { schedule: '0 2 * * *', run: noop }, 'Europe/Berlin').job!.timezone).toBe('Europe/Berlin');
    const own = validateJob(FILE, { schedule: '0 2 * * *', timezone: 'Asia/Shanghai', run: noop }, 'Europe/Berlin').job!;
    expect(own.timezone).toBe('Asia/Shanghai');
    expect(own.schedule.timezone).toBe('Asia/Shanghai');
  });

  it('accepts the schedule nicknames, keeping the nickname as the expression', () => {
    for (const nickname of ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly', '@Daily']) {
      const { job, problems } = validateJob('jobs/nick.ts', { schedule: nickname, run: noop }, 'UTC');
      expect(problems, nickname).toEqual([]);
      expect(job!.schedule.expression).toBe(nickname);
    }
  });

  it('converts every duration, accepting numbers and strings', () => {
    const { job } = validateJob(FILE, {
      name: 'x.y_z-1', schedule: '*/10 * * * * *', timeout: '1h30m', lockTtl: 1000, catchUp: '1d', retryDelay: '500ms',
      overlap: 'allow', coalesce: false, retries: 100, enabled: false, description: 'text', run: noop,
    }, 'UTC');
    expect(job).toMatchObject({
      name: 'x.y_z-1', timeoutMs: 5_400_000, lockTtlMs: 1000, catchUpMs: 86_400_000, retryDelayMs: 500,
      overlap: 'allow', coalesce: false, retries: 100, enabled: false,
    });
  });

  it('keeps the run function as it is', async () => {
    const run = async (ctx: JobContext) => `ran ${ctx.job}`;
    const { job } = validateJob(FILE, { schedule: '* * * * *', run }, 'UTC');
    expect(job!.run).toBe(run);
  });

  it('defineJob() only returns its argument (a job file that imports nothing is just as valid)', () => {
    const def = { schedule: '* * * * *', run: noop };
    expect(defineJob(def)).toBe(def);
  });
});

describe('validateJob: every bad field gives one line naming the file, the field, the value and what was expected', () => {
  const cases: Array<{ what: string; def: Record<string, unknown>; field: string; says: RegExp }> = [
    { what: 'schedule not cron', def: { schedule: 'every day', run: noop }, field: 'schedule', says: /"every day".*expected .*5 fields/ },
    { what: 'schedule impossible', def: { schedule: '0 0 31 2 *', run: noop }, field: 'schedule', says: /"0 0 31 2 \*".*never matches/ },
    { what: 'schedule with 7 fields', def: { schedule: '0 0 0 * * * *', run: noop }, field: 'schedule', says: /got 7/ },
    { what: 'schedule out of range', def: { schedule: '0 24 * * *', run: noop }, field: 'schedule', says: /"0 24 \* \* \*".*hour/ },
    { what: 'schedule missing', def: { run: noop }, field: 'schedule', says: /undefined.*expected a cron expression/ },
    { what: 'schedule empty', def: { schedule: '  ', run: noop }, field: 'schedule', says: /expected a cron expression/ },
    { what: 'schedule not a string', def: { schedule: ['* * * * *'], run: noop }, field: 'schedule', says: /expected a cron expression/ },
    { what: 'unknown time zone', def: { schedule: '* * * * *', timezone: 'Mars/Olympus', run: noop }, field: 'timezone', says: /"Mars\/Olympus".*IANA/ },
    { what: 'time zone not a string', def: { schedule: '* * * * *', timezone: 8, run: noop }, field: 'timezone', says: /= 8: expected .*IANA/ },
    { what: 'timeout in words', def: { schedule: '* * * * *', timeout: 'ten minutes', run: noop }, field: 'timeout', says: /"ten minutes".*'30s'/ },
    { what: 'timeout zero', def: { schedule: '* * * * *', timeout: 0, run: noop }, field: 'timeout', says: /= 0: .*more than 0/ },
    { what: 'timeout negative', def: { schedule: '* * * * *', timeout: -1, run: noop }, field: 'timeout', says: /= -1/ },
    { what: 'lockTtl below 1s', def: { schedule: '* * * * *', lockTtl: '999ms', run: noop }, field: 'lockTtl', says: /"999ms".*at least 1000ms/ },
    { what: 'lockTtl zero', def: { schedule: '* * * * *', lockTtl: 0, run: noop }, field: 'lockTtl', says: /at least 1000ms/ },
    { what: 'overlap unknown', def: { schedule: '* * * * *', overlap: 'queue', run: noop }, field: 'overlap', says: /"queue".*'skip' or 'allow'/ },
    { what: 'coalesce a string', def: { schedule: '* * * * *', coalesce: 'true', run: noop }, field: 'coalesce', says: /"true".*true or false/ },
    { what: 'coalesce a number', def: { schedule: '* * * * *', coalesce: 1, run: noop }, field: 'coalesce', says: /true or false/ },
    { what: 'enabled a string', def: { schedule: '* * * * *', enabled: 'no', run: noop }, field: 'enabled', says: /"no".*true or false/ },
    { what: 'retries negative', def: { schedule: '* * * * *', retries: -1, run: noop }, field: 'retries', says: /= -1.*whole number/ },
    { what: 'retries a float', def: { schedule: '* * * * *', retries: 2.5, run: noop }, field: 'retries', says: /= 2\.5.*whole number/ },
    { what: 'retries a string', def: { schedule: '* * * * *', retries: '3', run: noop }, field: 'retries', says: /"3".*whole number/ },
    { what: 'retries NaN', def: { schedule: '* * * * *', retries: Number.NaN, run: noop }, field: 'retries', says: /whole number/ },
    { what: 'retries too many', def: { schedule: '* * * * *', retries: 1000, run: noop }, field: 'retries', says: /0 to 100/ },
    { what: 'retryDelay bad', def: { schedule: '* * * * *', retryDelay: '5 sec', run: noop }, field: 'retryDelay', says: /"5 sec"/ },
    { what: 'catchUp bad', def: { schedule: '* * * * *', catchUp: '-10m', run: noop }, field: 'catchUp', says: /"-10m"/ },
    { what: 'catchUp an object', def: { schedule: '* * * * *', catchUp: { minutes: 10 }, run: noop }, field: 'catchUp', says: /\{"minutes":10\}/ },
    { what: 'run missing', def: { schedule: '* * * * *' }, field: 'run', says: /undefined.*a function/ },
    { what: 'run a string', def: { schedule: '* * * * *', run: 'echo hi' }, field: 'run', says: /"echo hi".*a function/ },
    { what: 'name with spaces', def: { name: 'nightly report', schedule: '* * * * *', run: noop }, field: 'name', says: /"nightly report".*letters, digits/ },
    { what: 'name empty', def: { name: '', schedule: '* * * * *', run: noop }, field: 'name', says: /""/ },
    { what: 'name with @ (it would break the period key)', def: { name: 'a@b', schedule: '* * * * *', run: noop }, field: 'name', says: /"a@b"/ },
    { what: 'name too long', def: { name: 'n'.repeat(101), schedule: '* * * * *', run: noop }, field: 'name', says: /up to 100/ },
    { what: 'name a number', def: { name: 7, schedule: '* * * * *', run: noop }, field: 'name', says: /= 7/ },
    { what: 'schedule an unknown nickname', def: { schedule: '@sometimes', run: noop }, field: 'schedule', says: /"@sometimes".*unknown nickname '@sometimes'; the nicknames are @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly/ },
    { what: 'schedule @reboot', def: { schedule: '@reboot', run: noop }, field: 'schedule', says: /"@reboot".*not supported/ },
    { what: 'schedule a nickname with more after it', def: { schedule: '@daily 5', run: noop }, field: 'schedule', says: /"@daily 5".*unknown nickname/ },
    { what: 'description not a string', def: { schedule: '* * * * *', description: 5, run: noop }, field: 'description', says: /a string/ },
  ];
  for (const c of cases) {
    it(`${c.what}: names field '${c.field}'`, () => {
      const line = problemAbout(problemsOf(c.def), c.field);
      expect(line).toMatch(c.says);
      expect(line).toMatch(/expected/);
    });
  }

  it('an unknown field (a typo such as `schedul`) is named, with the known fields', () => {
    const problems = problemsOf({ schedul: '* * * * *', run: noop });
    const unknown = problems.find((p) => p.includes("unknown field 'schedul'"));
    expect(unknown).toBeDefined();
    expect(unknown).toContain('schedule');
    // ...and the schedule it was meant to be is missing.
    problemAbout(problems, 'schedule');
  });

  it('a name taken from a file name that is not a valid name says so', () => {
    const line = problemAbout(problemsOf({ schedule: '* * * * *', run: noop }, 'jobs/my job!.ts'), 'name (from the file name)');
    expect(line).toContain('"my job!"');
  });

  it('reports every problem of a definition at once, one line each', () => {
    const problems = problemsOf({ schedule: 'nope', timezone: 'Nowhere', overlap: 'x', retries: -2, run: 1, extra: true });
    expect(problems).toHaveLength(6);
    for (const f of ['schedule', 'timezone', 'overlap', 'retries', 'run']) problemAbout(problems, f);
    expect(problems.some((p) => p.includes("unknown field 'extra'"))).toBe(true);
  });

  const notObjects: Array<[string, unknown]> = [
    ['a string', 'every minute'], ['a number', 42], ['null', null], ['undefined', undefined], ['an array', [{ schedule: '* * * * *' }]], ['a function', noop],
  ];
  for (const [what, value] of notObjects) {
    it(`a default export that is ${what} is refused, naming the default export`, () => {
      const problems = problemsOf(value);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(/default export = .*: expected a plain object/);
    });
  }
});

// ---------------------------------------------------------------------------------------------

/** Every problem line of a loaded folder, by file base name. */
function byFile(loaded: LoadedJobs): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const f of loaded.invalid) {
    const base = f.file.replace(/^.*\//, '');
    expect(out.has(base), `${base} listed twice`).toBe(false);
    for (const p of f.problems) {
      expect(p.startsWith(`${f.file}: `), `problem line does not start with its file: ${p}`).toBe(true);
      expect(p).not.toContain('\n');
    }
    out.set(base, f.problems);
  }
  return out;
}

describe('loadJobs: the broken-jobs fixtures', () => {
  /** file -> what its problem line must contain: the field, and a distinctive part. */
  const EXPECTED: Record<string, RegExp[]> = {
    'bad-schedule.ts': [/field 'schedule'/, /every day at noon/],
    'impossible-schedule.mjs': [/field 'schedule'/, /never matches/],
    'seven-fields.js': [/field 'schedule'/, /got 7/],
    'schedule-number.mts': [/field 'schedule' = 5/],
    'unknown-timezone.ts': [/field 'timezone'/, /Mars\/Olympus/],
    'bad-timeout.mts': [/field 'timeout'/, /10 minutes/],
    'zero-timeout.js': [/field 'timeout' = 0/, /more than 0/],
    'short-lock-ttl.ts': [/field 'lockTtl'/, /500ms/, /at least 1000ms/],
    'bad-overlap.js': [/field 'overlap'/, /queue/],
    'coalesce-string.mjs': [/field 'coalesce'/, /"yes"/],
    'negative-retries.ts': [/field 'retries' = -1/],
    'float-retries.mts': [/field 'retries' = 1\.5/],
    'bad-retry-delay.js': [/field 'retryDelay'/, /soon/],
    'bad-catch-up.mjs': [/field 'catchUp' = -5000/],
    'enabled-string.ts': [/field 'enabled'/, /"false"/],
    'missing-run.ts': [/field 'run' = undefined/],
    'run-not-function.mjs': [/field 'run'/, /echo hello/],
    'typo-field.ts': [/unknown field 'schedul'/],
    'bad-name.mjs': [/field 'name'/, /nightly report!/],
    'export-string.js': [/default export = "every minute, please"/],
    'export-array.mjs': [/default export = \[/],
    'no-default-export.mts': [/default export = none/, /named exports: job/],
    'syntax-error.js': [/cannot be loaded/, /syntax-error\.js:7:\d+/],
    'syntax-error-ts.ts': [/cannot be loaded/, /syntax-error-ts\.ts:4:\d+/],
    'throws-at-import.mjs': [/cannot be loaded/, /boom at import: DATABASE_URL is not set/],
    'dup-second.ts': [/field 'name' = "dup-job"/, /unique/, /dup-first\.mjs/],
  };

  it('the folder holds at least 15 broken files of every extension', () => {
    const files = listJobFiles(BROKEN_JOBS).map((f) => f.replace(/^.*\//, ''));
    expect(files.length).toBeGreaterThanOrEqual(15);
    for (const ext of ['.ts', '.mts', '.js', '.mjs']) expect(files.some((f) => f.endsWith(ext)), ext).toBe(true);
    // Every stored fixture is covered below (the TypeScript syntax error is added at test time).
    expect(new Set([...files, 'syntax-error-ts.ts'])).toEqual(new Set([...Object.keys(EXPECTED), 'dup-first.mjs']));
  });

  it('every broken file is listed with problem lines naming the file and the field; the only valid job is the first of a duplicate pair', async () => {
    const dir = brokenJobsWithTsSyntaxError();
    const loaded = await loadJobs(dir, 'UTC', ROOT);
    expect(loaded.jobs.map((j) => j.name)).toEqual(['dup-job']);
    expect(loaded.jobs[0]!.file).toBe(join(dir, 'dup-first.mjs'));
    const problems = byFile(loaded);
    expect([...problems.keys()].sort()).toEqual(Object.keys(EXPECTED).sort());
    for (const [file, patterns] of Object.entries(EXPECTED)) {
      const text = problems.get(file)!.join('\n');
      for (const p of patterns) expect(text, file).toMatch(p);
    }
  });

  it('the files are shown relative to the working directory when inside it', async () => {
    const loaded = await loadJobs(BROKEN_JOBS, 'UTC', ROOT);
    expect(loaded.invalid.map((f) => f.file)).toContain('test/fixtures/broken-jobs/bad-overlap.js');
    expect(loaded.invalid.find((f) => f.file.endsWith('bad-overlap.js'))!.problems[0])
      .toMatch(/^test\/fixtures\/broken-jobs\/bad-overlap\.js: field 'overlap'/);
  });
});

describe('loadJobs: the good-jobs fixtures', () => {
  it('loads the TypeScript job that imports cluster-cron by name, the .mjs without imports and the .js, and nothing else', async () => {
    const loaded = await loadJobs(GOOD_JOBS, 'UTC', ROOT);
    expect(loaded.invalid).toEqual([]);
    expect(loaded.jobs.map((j) => j.name).sort()).toEqual(['plain-mjs', 'seconds', 'typed-report']);
    const typed = loaded.jobs.find((j) => j.name === 'typed-report')!;
    expect(typed).toMatchObject({
      file: 'test/fixtures/good-jobs/typed-report.ts', timezone: 'Europe/Berlin', timeoutMs: 600_000, lockTtlMs: 30_000,
      overlap: 'allow', catchUpMs: 3_600_000, coalesce: false, retries: 2, retryDelayMs: 90_000, enabled: true,
    });
    expect(loaded.jobs.find((j) => j.name === 'seconds')).toMatchObject({ enabled: false, timezone: 'UTC' });
  });

  it('the loaded TypeScript body runs, with its helper import from _helper.ts', async () => {
    const loaded = await loadJobs(GOOD_JOBS, 'UTC', ROOT);
    const typed = loaded.jobs.find((j) => j.name === 'typed-report')!;
    await expect(Promise.resolve(typed.run({ job: 'typed-report' } as JobContext))).resolves.toEqual({ job: 'typed-report', value: 42 });
  });

  it('jobs without a zone take the default zone given to loadJobs', async () => {
    const loaded = await loadJobs(GOOD_JOBS, 'Asia/Tokyo', ROOT);
    expect(loaded.jobs.find((j) => j.name === 'plain-mjs')!.timezone).toBe('Asia/Tokyo');
    expect(loaded.jobs.find((j) => j.name === 'typed-report')!.timezone).toBe('Europe/Berlin');
  });

  it('ignores _helper.ts, .hidden.ts, .d.ts files, other extensions and sub-folders', () => {
    expect(listJobFiles(GOOD_JOBS).map((f) => f.replace(/^.*\//, ''))).toEqual(['plain.mjs', 'seconds.js', 'typed-report.ts']);
  });

  it('loads from a copy outside the project (no package.json anywhere above it), showing absolute paths', async () => {
    const dir = copyFixture(GOOD_JOBS);
    const loaded = await loadJobs(dir, 'UTC', ROOT);
    expect(loaded.invalid).toEqual([]);
    expect(loaded.jobs.map((j) => j.file).sort()).toEqual([join(dir, 'plain.mjs'), join(dir, 'seconds.js'), join(dir, 'typed-report.ts')]);
  });

  // .mjs: Node caches native ES modules by URL (and jiti imports .mjs natively): a changed file is
  // imported under a URL of its content version.
  for (const ext of ['ts', 'mts', 'js', 'mjs']) {
    it(`loads a changed .${ext} file again on the next call (no module cache)`, async () => {
      const dir = tempDir();
      const file = join(dir, `changing.${ext}`);
      writeFileSync(file, "export default { schedule: '0 1 * * *', run() {} };\n");
      expect((await loadJobs(dir, 'UTC')).jobs[0]!.schedule.expression).toBe('0 1 * * *');
      writeFileSync(file, "export default { schedule: '0 2 * * *', run() {} };\n");
      expect((await loadJobs(dir, 'UTC')).jobs[0]!.schedule.expression).toBe('0 2 * * *');
    });
  }
});

describe('loadJobs: one broken file never stops the others', () => {
  it('a folder mixing good and broken files loads every good one and lists every broken one', async () => {
    const loaded = await loadJobs(MIXED_JOBS, 'UTC', ROOT);
    expect(loaded.jobs.map((j) => j.name)).toEqual(['a-good', 'c-good-named', 'z-good']);
    expect(loaded.jobs.map((j) => j.timezone)).toEqual(['UTC', 'America/New_York', 'Asia/Shanghai']);
    const problems = byFile(loaded);
    expect([...problems.keys()]).toEqual(['b-syntax.js', 'd-throws.mjs', 'e-bad-schedule.js']);
    expect(problems.get('b-syntax.js')!.join()).toMatch(/cannot be loaded/);
    expect(problems.get('d-throws.mjs')!.join()).toMatch(/d-throws failed on import/);
    expect(problems.get('e-bad-schedule.js')!.join()).toMatch(/field 'schedule' = "61 \* \* \* \*"/);
  });

  it('a TypeScript syntax error between two good TypeScript jobs stops neither', async () => {
    const dir = tempDir();
    const good = (name: string) => `import { defineJob } from 'cluster-cron';\nexport default defineJob({ name: '${name}', schedule: '* * * * *', run: async () => 1 });\n`;
    writeFileSync(join(dir, 'a.ts'), good('first'));
    writeFileSync(join(dir, 'b.ts'), TS_SYNTAX_ERROR);
    writeFileSync(join(dir, 'c.ts'), good('last'));
    const loaded = await loadJobs(dir, 'UTC');
    expect(loaded.jobs.map((j) => j.name)).toEqual(['first', 'last']);
    expect(loaded.invalid.map((f) => f.file)).toEqual([join(dir, 'b.ts')]);
  });

  it('an empty folder gives no jobs and no problems', async () => {
    expect(await loadJobs(tempDir(), 'UTC')).toEqual({ jobs: [], invalid: [] });
  });

  it('a missing jobs folder is a ConfigError naming it', async () => {
    const missing = join(tempDir(), 'no-such-folder');
    await expect(loadJobs(missing, 'UTC')).rejects.toThrow(ConfigError);
    await expect(loadJobs(missing, 'UTC')).rejects.toThrow(missing);
  });

  it('a jobs "folder" that is a file is a ConfigError', () => {
    const dir = tempDir();
    const file = join(dir, 'jobs');
    writeFileSync(file, '');
    expect(() => listJobFiles(file)).toThrow(/is not a folder/);
  });

  it('a sub-folder named like a job file is not loaded: it is one invalid file, the others load', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'folder.ts'));
    writeFileSync(join(dir, 'real.mjs'), "export default { schedule: '* * * * *', run() {} };\n");
    expect(listJobFiles(dir)).toEqual([join(dir, 'folder.ts'), join(dir, 'real.mjs')]);
    const loaded = await loadJobs(dir, 'UTC');
    expect(loaded.jobs.map((j) => j.name)).toEqual(['real']);
    expect(loaded.invalid).toEqual([{ file: join(dir, 'folder.ts'), problems: [`${join(dir, 'folder.ts')}: is a directory, not a job file`] }]);
  });
});
