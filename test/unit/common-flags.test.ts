/**
 * The common flags before the command (`scheduler --store <url> list`, git's and kubectl's order) do
 * what they do after it, through the real bin/scheduler: the same output and exit status, the same one
 * line for a bad value; given in both places, the one after the command wins. Needs `npm run build`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN, Daemon, runCli, type CliResult } from '../helpers/cli.js';
import { GOOD_JOBS, removeTempDirs, tempDir } from './_fixtures.js';

afterAll(removeTempDirs);

/** The CLI in a fresh temporary working directory (no config file, no ./data of the project). */
function cli(args: string[], cwd = tempDir('cron-unit-flags-')): Promise<CliResult> {
  return runCli(args, { cwd, timeoutMs: 30_000 });
}

function show(r: CliResult): string {
  return `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
}

const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');

/** A jobs folder with one yearly job: its next periods do not move while the test runs. */
function yearlyJobs(): string {
  const dir = join(tempDir('cron-unit-flags-jobs-'), 'jobs');
  mkdirSync(dir);
  writeFileSync(join(dir, 'yearly.mjs'), "export default { schedule: '0 0 1 1 *', run: () => 'ran' };\n");
  return dir;
}

const sqliteStore = () => `sqlite:${join(tempDir('cron-unit-flags-store-'), 's.db')}`;

describe.concurrent('common flags before the command', () => {
  it('validate, list --json and next --json: the same output and exit status as with the flags after the command', async ({ expect }) => {
    const jobs = yearlyJobs();
    const store = sqliteStore();
    const pairs: Array<[string[], string[]]> = [
      [['--jobs', jobs, 'validate'], ['validate', '--jobs', jobs]],
      [['--store', store, '--jobs', jobs, '--json', 'list'], ['list', '--store', store, '--jobs', jobs, '--json']],
      [[`--jobs=${jobs}`, '--json', 'next', 'yearly', '-n', '3', '--from', '2026-06-01T00:00:00Z'], ['next', 'yearly', '-n', '3', '--from', '2026-06-01T00:00:00Z', `--jobs=${jobs}`, '--json']],
      [['--log-level', 'silent', '--jobs', GOOD_JOBS, 'validate', '--json'], ['validate', '--json', '--log-level', 'silent', '--jobs', GOOD_JOBS]],
    ];
    for (const [before, after] of pairs) {
      const [b, a] = await Promise.all([cli(before), cli(after)]);
      expect(b.code, show(b)).toBe(0);
      expect(b.code).toBe(a.code);
      expect(b.stdout, before.join(' ')).toBe(a.stdout);
    }
    const listed = JSON.parse((await cli(['--store', store, '--jobs', jobs, '--json', 'list'])).stdout) as { jobs: Array<{ name: string }> };
    expect(listed.jobs.map((j) => j.name)).toEqual(['yearly']);
  });

  it('--store, --jobs and --node-id before run-once are the ones used: history finds the run in that store, by that node', async ({ expect }) => {
    const jobs = yearlyJobs();
    const store = sqliteStore();
    const ran = await cli(['--store', store, '--jobs', jobs, '--node-id', 'before-node', '--json', 'run-once', 'yearly']);
    expect(ran.code, show(ran)).toBe(0);
    const history = await cli(['history', '--store', store, '--jobs', jobs, '--json']);
    expect(history.code, show(history)).toBe(0);
    const runs = JSON.parse(history.stdout) as Array<{ job: string; status: string; trigger: string; nodeId: string }>;
    expect(runs).toEqual([expect.objectContaining({ job: 'yearly', status: 'succeeded', trigger: 'manual', nodeId: 'before-node' })]);
  });

  it('--config before the command is read', async ({ expect }) => {
    const dir = tempDir('cron-unit-flags-config-');
    writeFileSync(join(dir, 'mine.json'), JSON.stringify({ jobsDir: yearlyJobs() }));
    const r = await cli(['--config', 'mine.json', '--json', 'validate'], dir);
    expect(r.code, show(r)).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ valid: true, jobs: ['yearly'] });
  });

  it('given before and after the command, the one after wins', async ({ expect }) => {
    const missing = join(tempDir('cron-unit-flags-'), 'no-such-folder');
    const good = await cli(['--jobs', missing, 'validate', '--jobs', GOOD_JOBS]);
    expect(good.code, show(good)).toBe(0);
    expect(good.stdout).toContain('3 job(s) valid');
    const bad = await cli(['--jobs', GOOD_JOBS, 'validate', '--jobs', missing]);
    expect(bad.code, show(bad)).toBe(2);
    expect(bad.stderr).toContain(missing);
  });

  const badValues: Array<{ what: string; flag: string[]; command: string[]; code: number; says: RegExp }> = [
    { what: 'a bad --store', flag: ['--store', 'bogus'], command: ['list'], code: 2, says: /^scheduler: invalid setting --store=bogus: expected / },
    { what: 'a bad --log-level', flag: ['--log-level', 'loud'], command: ['validate'], code: 2, says: /^scheduler: invalid setting --log-level=loud: expected one of fatal, / },
    { what: 'a bad --redis', flag: ['--redis', 'http://x'], command: ['next', 'plain-mjs'], code: 2, says: /^scheduler: invalid setting --redis=http:\/\/x: expected / },
    { what: 'a missing --config file', flag: ['--config', 'nope.json'], command: ['validate'], code: 2, says: /^scheduler: invalid setting --config=nope\.json: expected an existing JSON config file/ },
    { what: 'an unreachable store (password redacted)', flag: ['--store', 'mysql://root:secretpw@127.0.0.1:1/x'], command: ['list'], code: 4, says: /^scheduler: store mysql:\/\/root:\*\*\*@127\.0\.0\.1:1\/x cannot be reached/ },
  ];
  for (const c of badValues) {
    it(`${c.what} before the command: the same one line and exit status ${c.code} as after it`, async ({ expect }) => {
      const cwd = tempDir('cron-unit-flags-');
      const [b, a] = await Promise.all([cli([...c.flag, '--jobs', GOOD_JOBS, ...c.command], cwd), cli([...c.command, '--jobs', GOOD_JOBS, ...c.flag], cwd)]);
      expect(b.code, show(b)).toBe(c.code);
      expect(a.code, show(a)).toBe(c.code);
      expect(lines(b.stderr), show(b)).toHaveLength(1);
      expect(b.stderr).toMatch(c.says);
      expect(b.stderr).toBe(a.stderr);
      expect(b.stdout).toBe('');
      expect(b.stderr).not.toContain('secretpw');
    });
  }

  it('a flag the command does not take (--json before run) is refused, exit 2, as after it', async ({ expect }) => {
    const [b, a] = await Promise.all([cli(['--json', 'run']), cli(['run', '--json'])]);
    expect(b.code, show(b)).toBe(2);
    expect(a.code, show(a)).toBe(2);
    expect(lines(b.stderr)[0]).toBe("error: unknown option '--json' for 'run'");
    expect(b.stdout).toBe('');
  });

  it('--help says the common flags may come before the command and which wins; each command still lists its flags', async ({ expect }) => {
    const [root, list] = await Promise.all([cli(['--help']), cli(['list', '--help'])]);
    expect(root.code, show(root)).toBe(0);
    expect(root.stdout).toContain('Common options (before or after the command; given in both places, the one after the command wins):');
    for (const flag of ['--config <file>', '--jobs <dir>', '--store <url>', '--redis <urls>', '--node-id <name>', '--log-level <level>', '--json']) expect(root.stdout).toContain(flag);
    expect(list.code, show(list)).toBe(0);
    for (const flag of ['--store <url>', '--jobs <dir>', '--load-timeout <duration>', '-n, --count <n>', '--utc', '--json']) expect(list.stdout).toContain(flag);
    expect(list.stdout).toContain('Exit: 0 ok, 2 ');
  });
});

describe('the daemon with the common flags before run', () => {
  it('uses them (store, node id), and stops cleanly on SIGTERM', async () => {
    const store = sqliteStore();
    const daemon = new Daemon(['--http', 'off'], { cwd: tempDir('cron-unit-flags-'), env: { SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_LOG_FORMAT: 'json' }, command: [process.execPath, BIN, '--store', store, '--jobs', yearlyJobs(), '--node-id', 'before-daemon'] });
    try {
      await daemon.waitStarted();
      const starting = daemon.logs().find((l) => l.msg === 'daemon starting') as { node: string; config: { store: string; nodeId: string }; jobs: string[] } | undefined;
      expect(starting, daemon.output).toMatchObject({ node: 'before-daemon', jobs: ['yearly'], config: { nodeId: 'before-daemon', store } });
      expect(await daemon.stop('SIGTERM')).toBe(0);
    } finally {
      if (daemon.alive) await daemon.terminate();
    }
  });
});
