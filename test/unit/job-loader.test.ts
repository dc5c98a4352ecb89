/**
 * A loader that cannot be stalled: every job file loads within its deadline, and a file that does
 * not settle, a dangling symlink, a directory or FIFO named like a job file, or a file removed while
 * loading is one invalid file with its reason, while the others load. Also the `loadTimeout` setting.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { describeConfig, loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';
import { listJobFiles, loadJobFiles, loadJobs, withDeadline, type LoadedJobs } from '../../src/jobs/load.js';
import { removeTempDirs, tempDir } from './_fixtures.js';

afterAll(removeTempDirs);

const GOOD = "export default { schedule: '* * * * *', run() { return 1; } };\n";
const NEVER_SETTLES = 'await new Promise(() => {});\nexport default {};\n';

/** file name -> its one problem line. */
function problems(loaded: LoadedJobs): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of loaded.invalid) {
    expect(f.problems, f.file).toHaveLength(1);
    expect(f.problems[0]!.startsWith(`${f.file}: `), f.problems[0]).toBe(true);
    expect(f.problems[0]).not.toContain('\n');
    out[f.file.replace(/^.*\//, '')] = f.problems[0]!;
  }
  return out;
}

describe('loadJobs: entries named like job files that are not files', () => {
  it('a dangling symlink, a symlink loop, a directory and a FIFO are one invalid file each; the good files load', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a-good.mjs'), GOOD);
    symlinkSync(join(dir, 'nowhere.mjs'), join(dir, 'gone.mjs'));
    symlinkSync(join(dir, 'loop-b.mjs'), join(dir, 'loop-a.mjs'));
    symlinkSync(join(dir, 'loop-a.mjs'), join(dir, 'loop-b.mjs'));
    mkdirSync(join(dir, 'x.ts'));
    symlinkSync(join(dir, 'x.ts'), join(dir, 'linked-dir.js'));
    execFileSync('mkfifo', [join(dir, 'pipe.mjs')]);
    writeFileSync(join(dir, 'real-target.txt'), GOOD);
    symlinkSync(join(dir, 'real-target.txt'), join(dir, 'z-linked.mjs'));

    const loaded = await loadJobs(dir, 'UTC', { timeoutMs: 5000 });
    expect(loaded.jobs.map((j) => j.name)).toEqual(['a-good', 'z-linked']);
    const p = problems(loaded);
    expect(Object.keys(p).sort()).toEqual(['gone.mjs', 'linked-dir.js', 'loop-a.mjs', 'loop-b.mjs', 'pipe.mjs', 'x.ts']);
    expect(p['gone.mjs']).toBe(`${join(dir, 'gone.mjs')}: cannot be loaded: dangling symlink to ${join(dir, 'nowhere.mjs')}`);
    expect(p['loop-a.mjs']).toMatch(/: cannot be loaded: symlink loop \(to .*loop-b\.mjs\)$/);
    expect(p['x.ts']).toBe(`${join(dir, 'x.ts')}: is a directory, not a job file`);
    expect(p['linked-dir.js']).toBe(`${join(dir, 'linked-dir.js')}: is a directory (through a symlink), not a job file`);
    // A FIFO is never opened (a read of it would block the thread until a writer came).
    expect(p['pipe.mjs']).toBe(`${join(dir, 'pipe.mjs')}: is a FIFO, not a job file`);
  });
});

describe('loadJobs: a file removed while loading', () => {
  it('listed, then removed before its import: the file was removed while loading; the others load', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a-good.mjs'), GOOD);
    writeFileSync(join(dir, 'removed.mjs'), GOOD);
    writeFileSync(join(dir, 'z-good.ts'), GOOD);
    const files = listJobFiles(dir);
    expect(files.map((f) => f.replace(/^.*\//, ''))).toEqual(['a-good.mjs', 'removed.mjs', 'z-good.ts']);
    rmSync(join(dir, 'removed.mjs'));
    const loaded = await loadJobFiles(files, 'UTC', { timeoutMs: 5000 });
    expect(loaded.jobs.map((j) => j.name)).toEqual(['a-good', 'z-good']);
    expect(problems(loaded)).toEqual({ 'removed.mjs': `${join(dir, 'removed.mjs')}: cannot be loaded: the file was removed while loading` });
  });

  it('removed while its import is under way (the import then fails): the file was removed while loading, not "Cannot find module"', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a-good.mjs'), GOOD);
    writeFileSync(join(dir, 'removed.mjs'), GOOD);
    const imported: string[] = [];
    const importer = async (file: string) => {
      imported.push(file);
      if (file.endsWith('removed.mjs')) rmSync(file);
      return import(pathToFileURL(file).href);
    };
    const loaded = await loadJobs(dir, 'UTC', { timeoutMs: 5000, importer });
    expect(imported).toHaveLength(2);
    expect(loaded.jobs.map((j) => j.name)).toEqual(['a-good']);
    expect(problems(loaded)).toEqual({ 'removed.mjs': `${join(dir, 'removed.mjs')}: cannot be loaded: the file was removed while loading` });
  });

  it('a file whose own import is missing is still reported by what is missing', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'needs.mjs'), "import x from './no-such-helper.mjs';\nexport default x;\n");
    const p = problems(await loadJobs(dir, 'UTC', { timeoutMs: 5000 }));
    expect(p['needs.mjs']).toMatch(/cannot be loaded: .*no-such-helper\.mjs/);
    expect(p['needs.mjs']).not.toMatch(/removed while loading/);
  });
});

describe('loadJobs: the deadline', () => {
  for (const ext of ['mjs', 'ts']) {
    it(`a .${ext} top-level await that never settles is one invalid file after the deadline; the good files load`, async () => {
      const dir = tempDir();
      writeFileSync(join(dir, 'a-good.mjs'), GOOD);
      writeFileSync(join(dir, `stuck.${ext}`), NEVER_SETTLES);
      writeFileSync(join(dir, 'z-good.ts'), GOOD);
      const started = Date.now();
      const loaded = await loadJobs(dir, 'UTC', { timeoutMs: 400 });
      const elapsed = Date.now() - started;
      expect(loaded.jobs.map((j) => j.name)).toEqual(['a-good', 'z-good']);
      expect(problems(loaded)).toEqual({
        [`stuck.${ext}`]: `${join(dir, `stuck.${ext}`)}: cannot be loaded: did not settle within 400ms (a top-level await that never resolves?)`,
      });
      expect(elapsed).toBeGreaterThanOrEqual(390);
      expect(elapsed).toBeLessThan(10_000);
    });
  }

  it('a file that rejects at top level is one invalid file with its message', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'rejects.mjs'), "await Promise.reject(new Error('no DATABASE_URL at load time'));\nexport default {};\n");
    writeFileSync(join(dir, 'z-good.mjs'), GOOD);
    const loaded = await loadJobs(dir, 'UTC', { timeoutMs: 5000 });
    expect(loaded.jobs.map((j) => j.name)).toEqual(['z-good']);
    expect(problems(loaded)['rejects.mjs']).toBe(`${join(dir, 'rejects.mjs')}: cannot be loaded: no DATABASE_URL at load time`);
  });

  it('a load that settles late has no effect: the result was returned without it, and a late rejection is not unhandled', async () => {
    const late: Array<{ resolve: (v: unknown) => void; reject: (e: unknown) => void }> = [];
    const importer = (file: string) => (file.endsWith('good.mjs')
      ? Promise.resolve({ default: { schedule: '* * * * *', run() {} } })
      : new Promise((resolve, reject) => late.push({ resolve, reject })));
    const dir = tempDir();
    for (const f of ['late-ok.mjs', 'late-bad.mjs', 'good.mjs']) writeFileSync(join(dir, f), GOOD);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const loaded = await loadJobs(dir, 'UTC', { timeoutMs: 200, importer });
      const snapshot = JSON.stringify(loaded);
      expect(loaded.jobs.map((j) => j.name)).toEqual(['good']);
      expect(Object.keys(problems(loaded)).sort()).toEqual(['late-bad.mjs', 'late-ok.mjs']);
      expect(late).toHaveLength(2);
      // late-bad.mjs sorts first, so it was imported first.
      late[0]!.reject(new Error('late failure'));
      late[1]!.resolve({ default: { schedule: '* * * * *', run() {} } });
      await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setImmediate(r));
      expect(JSON.stringify(loaded)).toBe(snapshot);
      expect(loaded.jobs.map((j) => j.name)).toEqual(['good']);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('files load concurrently: ten that never settle cost about one deadline, not ten', async () => {
    const dir = tempDir();
    for (let i = 0; i < 10; i++) writeFileSync(join(dir, `stuck-${i}.mjs`), NEVER_SETTLES);
    writeFileSync(join(dir, 'z-good.mjs'), GOOD);
    const started = Date.now();
    const loaded = await loadJobs(dir, 'UTC', { timeoutMs: 500 });
    const elapsed = Date.now() - started;
    expect(loaded.jobs.map((j) => j.name)).toEqual(['z-good']);
    expect(loaded.invalid).toHaveLength(10);
    // One after another: 10 x 500 ms. At most 16 at once: one deadline, plus the loading itself.
    expect(elapsed).toBeLessThan(2500);
  });

  it('concurrency does not change the outcome: of two files with the same name, the first listed wins even when it settles last', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a-slow.mjs'), "await new Promise((r) => setTimeout(r, 300));\nexport default { name: 'same', schedule: '1 * * * *', run() {} };\n");
    writeFileSync(join(dir, 'b-fast.mjs'), "export default { name: 'same', schedule: '2 * * * *', run() {} };\n");
    const loaded = await loadJobs(dir, 'UTC', { timeoutMs: 5000 });
    expect(loaded.jobs.map((j) => [j.name, j.schedule.expression])).toEqual([['same', '1 * * * *']]);
    expect(problems(loaded)['b-fast.mjs']).toMatch(/field 'name' = "same": expected a unique name; .*a-slow\.mjs already defines it/);
  });

  it("a file that blocks the thread for longer than the deadline does not make a file loading beside it miss its deadline", async () => {
    const dir = tempDir();
    // Blocks for 1.5 s at its top level (synchronous work is not bounded; it loads, late).
    writeFileSync(join(dir, 'a-blocks.mjs'), "const end = Date.now() + 1500;\nwhile (Date.now() < end) {}\nexport default { schedule: '1 * * * *', run() {} };\n");
    // Needs a timer and a turn of the event loop after it: 200 ms of free loop time.
    writeFileSync(join(dir, 'b-waits.mjs'), "await new Promise((r) => setTimeout(r, 200));\nawait new Promise((r) => setImmediate(r));\nexport default { schedule: '2 * * * *', run() {} };\n");
    const loaded = await loadJobs(dir, 'UTC', { timeoutMs: 1000 });
    expect(loaded.invalid).toEqual([]);
    expect(loaded.jobs.map((j) => j.name)).toEqual(['a-blocks', 'b-waits']);
  });
});

describe('withDeadline', () => {
  it('gives the value, the error, or timeout; a start() that throws is a failure', async () => {
    expect(await withDeadline(async () => 7, 1000)).toEqual({ kind: 'ok', value: 7 });
    const err = new Error('x');
    expect(await withDeadline(() => Promise.reject(err), 1000)).toEqual({ kind: 'failed', error: err });
    expect(await withDeadline(() => { throw err; }, 1000)).toEqual({ kind: 'failed', error: err });
    const started = Date.now();
    expect(await withDeadline(() => new Promise(() => {}), 250)).toEqual({ kind: 'timeout' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(240);
  });
});

describe('the loadTimeout setting', () => {
  const cwd = tempDir();
  it('defaults to 10s; the config file, SCHEDULER_LOAD_TIMEOUT and --load-timeout set it, in that precedence', () => {
    expect(loadConfig({ cwd, env: {} }).loadTimeoutMs).toBe(10_000);
    expect(describeConfig(loadConfig({ cwd, env: {} })).loadTimeout).toBe('10s');
    const withFile = tempDir();
    mkdirSync(join(withFile, 'config'));
    writeFileSync(join(withFile, 'config', 'scheduler.json'), JSON.stringify({ loadTimeout: '20s' }));
    expect(loadConfig({ cwd: withFile, env: {} }).loadTimeoutMs).toBe(20_000);
    expect(loadConfig({ cwd: withFile, env: { SCHEDULER_LOAD_TIMEOUT: '1m' } }).loadTimeoutMs).toBe(60_000);
    expect(loadConfig({ cwd: withFile, env: { SCHEDULER_LOAD_TIMEOUT: '1m' }, flags: { loadTimeout: '500ms' } }).loadTimeoutMs).toBe(500);
    expect(loadConfig({ cwd, env: { SCHEDULER_LOAD_TIMEOUT: '2500' } }).loadTimeoutMs).toBe(2500);
  });

  for (const [where, value, origin] of [
    ['env', '0', 'SCHEDULER_LOAD_TIMEOUT'], ['env', 'soon', 'SCHEDULER_LOAD_TIMEOUT'], ['flag', '-1s', '--load-timeout'], ['flag', '2d', '--load-timeout'],
  ] as const) {
    it(`refuses ${origin}=${value} with one line naming the setting, the value and what was expected`, () => {
      const options = where === 'env' ? { cwd, env: { SCHEDULER_LOAD_TIMEOUT: value } } : { cwd, env: {}, flags: { loadTimeout: value } };
      expect(() => loadConfig(options)).toThrow(ConfigError);
      expect(() => loadConfig(options)).toThrow(`invalid setting ${origin}=${value}: expected a duration such as '10s' or '2m', more than 0 and at most 1d`);
    });
  }
});

describe('loadJobs: onFailure as a named export', () => {
  it('a named `export async function onFailure` beside `export default` is the job\'s hook (.mjs and .ts); both at once refuse the file with one line; a named one that is not a function too', async () => {
    const dir = tempDir();
    const named = `export default { schedule: '* * * * *', run() { return 1; } };
export async function onFailure(ctx, outcome) { return 'named:' + ctx.job + ':' + outcome.status; }
`;
    writeFileSync(join(dir, 'named.mjs'), named);
    writeFileSync(join(dir, 'named-ts.ts'), named.replace('(ctx, outcome)', '(ctx: { job: string }, outcome: { status: string })'));
    writeFileSync(join(dir, 'field.mjs'), "export default { schedule: '* * * * *', run() {}, onFailure(ctx) { return 'field:' + ctx.job; } };\n");
    writeFileSync(join(dir, 'both.mjs'), `export default { schedule: '* * * * *', run() {}, onFailure() {} };
export function onFailure() {}
`);
    writeFileSync(join(dir, 'not-a-function.mjs'), `export default { schedule: '* * * * *', run() {} };
export const onFailure = 'page me';
`);
    const loaded = await loadJobs(dir, 'UTC', { timeoutMs: 5000 });
    expect(loaded.jobs.map((j) => j.name).sort()).toEqual(['field', 'named', 'named-ts']);
    const hook = (name: string) => loaded.jobs.find((j) => j.name === name)!.onFailure!;
    const ctx = (job: string) => ({ job }) as never;
    expect(await hook('named')(ctx('named'), { status: 'failed' } as never)).toBe('named:named:failed');
    expect(await hook('named-ts')(ctx('named-ts'), { status: 'timed_out' } as never)).toBe('named:named-ts:timed_out');
    expect(await hook('field')(ctx('field'), {} as never)).toBe('field:field');
    const p = problems(loaded);
    expect(p).toEqual({
      'both.mjs': `${join(dir, 'both.mjs')}: onFailure is both a named export and a field of the default export: expected one of them (remove the other)`,
      'not-a-function.mjs': `${join(dir, 'not-a-function.mjs')}: named export 'onFailure' = "page me": expected a function (export async function onFailure(ctx, outcome) { ... })`,
    });
  });
});
