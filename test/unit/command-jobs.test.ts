/**
 * Command jobs without a daemon: validation of `command`, `killAfter`, `cwd`, `env` (one line per
 * problem naming the file and field), `.json` / `.yaml` job files through the real loader (syntax
 * errors name the line), the outcome of an exit, and the output tail and line log.
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { defineJob } from '../../src/index.js';
import { loadJobs } from '../../src/jobs/load.js';
import { validateJob } from '../../src/jobs/validate.js';
import { commandOutcome, commandVars } from '../../src/run/command/index.js';
import { groupMembers, runCommand, type CommandEnded } from '../../src/run/command/process.js';
import { LineLog, MAX_LOG_LINE, OutputTail, TAIL_BYTES } from '../../src/run/command/output.js';
import { removeTempDirs, tempDir } from './_fixtures.js';

afterAll(removeTempDirs);

const dir = tempDir();
const FILE = join(dir, 'job.yaml');
writeFileSync(join(dir, 'script.sh'), '#!/bin/sh\necho hi\n');
chmodSync(join(dir, 'script.sh'), 0o755);
writeFileSync(join(dir, 'plain.txt'), 'not a program\n');
mkdirSync(join(dir, 'work'));

function problemsOf(def: Record<string, unknown>, file = FILE): string[] {
  const { job, problems } = validateJob(file, def, 'UTC');
  expect(job, `expected ${JSON.stringify(def)} to be refused`).toBeUndefined();
  for (const p of problems) {
    expect(p.startsWith(`${file}: `), p).toBe(true);
    expect(p).not.toContain('\n');
  }
  return problems;
}

const only = (problems: string[], field: string) => {
  const hits = problems.filter((p) => p.includes(`field '${field}'`));
  expect(hits, problems.join('\n')).toHaveLength(1);
  return hits[0]!;
};

describe('validation of a command job', () => {
  it('a shell string runs through /bin/sh -c; an argv array is spawned directly; defaults: killAfter 10s, cwd the job file folder, no env', () => {
    const shell = validateJob(FILE, { schedule: '* * * * *', command: 'echo $HOME' }, 'UTC').job!;
    expect(shell.command).toEqual({ source: 'echo $HOME', argv: ['/bin/sh', '-c', 'echo $HOME'], cwd: dir, env: {}, killAfterMs: 10_000 });
    expect(shell.isolation).toBeUndefined();
    const argv = validateJob(FILE, { schedule: '* * * * *', command: ['./script.sh', '--full'], killAfter: '2s', env: { A: 'x', N: 3, B: true } }, 'UTC').job!;
    expect(argv.command).toMatchObject({ argv: [join(dir, 'script.sh'), '--full'], killAfterMs: 2000, env: { A: 'x', N: '3', B: 'true' } });
    // A program on PATH is left to the spawn's own lookup.
    expect(validateJob(FILE, { schedule: '* * * * *', command: ['sh', '-c', 'true'] }, 'UTC').job!.command!.argv).toEqual(['sh', '-c', 'true']);
    // A relative cwd is taken from the job file's folder, and a relative program from cwd.
    writeFileSync(join(dir, 'work', 'inner.sh'), '#!/bin/sh\n');
    chmodSync(join(dir, 'work', 'inner.sh'), 0o755);
    expect(validateJob(FILE, { schedule: '* * * * *', command: ['./inner.sh'], cwd: 'work' }, 'UTC').job!.command).toMatchObject({ cwd: join(dir, 'work'), argv: [join(dir, 'work', 'inner.sh')] });
  });

  it('both run and command, or neither, is refused naming the field', () => {
    expect(only(problemsOf({ schedule: '* * * * *', command: 'true', run: async () => {} }, join(dir, 'both.ts')), 'run')).toMatch(/either 'run' or 'command', not both/);
    expect(only(problemsOf({ schedule: '* * * * *' }, join(dir, 'none.ts')), 'run')).toMatch(/or a 'command' instead/);
    expect(only(problemsOf({ schedule: '* * * * *' }), 'command')).toMatch(/a \.yaml job file defines a command job/);
    expect(only(problemsOf({ schedule: '* * * * *', run: 'echo' }, join(dir, 'x.json')), 'command')).toMatch(/\.json job file defines a command job \('run' needs a \.ts or \.js file\)/);
  });

  it('an empty command, an empty array, a non-string element, a missing or non-executable program, a bad cwd/env/killAfter: one line each', () => {
    expect(only(problemsOf({ schedule: '* * * * *', command: '  ' }), 'command')).toMatch(/non-empty shell command/);
    expect(only(problemsOf({ schedule: '* * * * *', command: [] }), 'command')).toMatch(/non-empty argv array/);
    expect(only(problemsOf({ schedule: '* * * * *', command: ['ls', 3] }), 'command')).toMatch(/an array of strings/);
    expect(only(problemsOf({ schedule: '* * * * *', command: 42 }), 'command')).toMatch(/a shell command string, or an argv array/);
    expect(only(problemsOf({ schedule: '* * * * *', command: ['./missing.sh'] }), 'command[0]')).toMatch(/missing\.sh does not exist/);
    expect(only(problemsOf({ schedule: '* * * * *', command: ['./plain.txt'] }), 'command[0]')).toMatch(/is not executable/);
    expect(only(problemsOf({ schedule: '* * * * *', command: ['./work'] }), 'command[0]')).toMatch(/is a directory/);
    expect(only(problemsOf({ schedule: '* * * * *', command: ['no-such-program-here'] }), 'command[0]')).toMatch(/a program found on PATH/);
    expect(only(problemsOf({ schedule: '* * * * *', command: 'true', cwd: 'nowhere' }), 'cwd')).toMatch(/an existing folder/);
    expect(only(problemsOf({ schedule: '* * * * *', command: 'true', killAfter: 'soon' }), 'killAfter')).toMatch(/more than 0/);
    expect(only(problemsOf({ schedule: '* * * * *', command: 'true', killAfter: 0 }), 'killAfter')).toMatch(/more than 0/);
    expect(only(problemsOf({ schedule: '* * * * *', command: 'true', env: ['A=1'] }), 'env')).toMatch(/an object/);
    expect(only(problemsOf({ schedule: '* * * * *', command: 'true', env: { SCHEDULER_JOB: 'x' } }), 'env.SCHEDULER_JOB')).toMatch(/not starting with SCHEDULER_/);
    expect(only(problemsOf({ schedule: '* * * * *', command: 'true', env: { '1A': 'x' } }), 'env.1A')).toMatch(/variable name/);
    expect(only(problemsOf({ schedule: '* * * * *', command: 'true', env: { A: { b: 1 } } }), 'env.A')).toMatch(/a string/);
    // env holds tokens: a problem line names the variable, never its value.
    const secret = 'mysql://app:s3cret@db:3306/app';
    const lines = problemsOf({ schedule: '* * * * *', command: 'true', env: { SCHEDULER_STORE: secret, 'BAD-NAME': secret, LIST: [secret], NUL: `${secret}\u0000` } });
    expect(lines).toHaveLength(4);
    for (const l of lines) expect(l).not.toContain('s3cret');
    expect(only(lines, 'env.SCHEDULER_STORE')).toMatch(/= \(value not shown\): expected a name not starting with SCHEDULER_/);
    for (const l of problemsOf({ schedule: '* * * * *', command: 'true', env: secret })) expect(l).not.toContain('s3cret');
    expect(only(problemsOf({ schedule: '* * * * *', command: 'true', isolation: 'worker' }), 'isolation')).toMatch(/process of its own/);
  });

  it('defineJob types a command job; run and command together do not type-check', () => {
    const job = defineJob({ schedule: '* * * * *', command: ['sh', '-c', 'true'], killAfter: '5s', env: { N: 1 } });
    expect(validateJob(join(dir, 'typed.ts'), job, 'UTC').job!.command!.killAfterMs).toBe(5000);
    // @ts-expect-error: a job has either run or command
    const both = defineJob({ schedule: '* * * * *', command: 'true', async run() {} });
    expect(validateJob(join(dir, 'both.ts'), both, 'UTC').job).toBeUndefined();
  });

  it('the command fields on a run job are refused', () => {
    const problems = problemsOf({ schedule: '* * * * *', run: async () => {}, killAfter: '1s', env: {} }, join(dir, 'r.ts'));
    expect(only(problems, 'killAfter')).toMatch(/unless the job has 'command'/);
    expect(only(problems, 'env')).toMatch(/unless the job has 'command'/);
  });
});

describe('.json and .yaml job files through the loader', () => {
  it('define command jobs; syntax errors name the file and line; a code-less file cannot define a run job', async () => {
    const jobs = tempDir();
    writeFileSync(join(jobs, 'a.yaml'), "schedule: '*/5 * * * *'\ncommand: echo a\nenv:\n  MODE: full\n");
    writeFileSync(join(jobs, 'b.json'), JSON.stringify({ name: 'bee', schedule: '@daily', command: ['sh', '-c', 'echo b'], timeout: '1m' }));
    writeFileSync(join(jobs, 'c.yml'), 'schedule: "* * * * *"\ncommand: [\n');
    writeFileSync(join(jobs, 'd.json'), '{\n  "schedule": "* * * * *",\n  "command": "true",\n}\n');
    writeFileSync(join(jobs, 'e.yaml'), 'a: 1\n---\nb: 2\n');
    writeFileSync(join(jobs, 'f.yaml'), '- 1\n- 2\n');
    writeFileSync(join(jobs, 'g.yaml'), "schedule: '* * * * *'\ncommand: 'true'\nschedule: '@daily'\n");
    // Tooling files of a jobs folder with dependencies of its own are not job files.
    for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'pnpm-lock.yaml']) writeFileSync(join(jobs, f), '{}');
    const loaded = await loadJobs(jobs, 'UTC', { cwd: jobs });
    expect(loaded.jobs.map((j) => [j.name, j.command?.source])).toEqual([['a', 'echo a'], ['bee', ['sh', '-c', 'echo b']]]);
    expect(loaded.jobs[0]!.command!.env).toEqual({ MODE: 'full' });
    expect(loaded.jobs[1]!.timeoutMs).toBe(60_000);
    const problems = Object.fromEntries(loaded.invalid.map((i) => [i.file, i.problems]));
    expect(Object.keys(problems).sort()).toEqual(['c.yml', 'd.json', 'e.yaml', 'f.yaml', 'g.yaml']);
    for (const lines of Object.values(problems)) expect(lines).toHaveLength(1);
    expect(problems['c.yml']![0]).toMatch(/^c\.yml: cannot be loaded: invalid YAML at line 3, column 1: /);
    expect(problems['d.json']![0]).toMatch(/^d\.json: cannot be loaded: invalid JSON at line 4, column 1: /);
    expect(problems['e.yaml']![0]).toMatch(/^e\.yaml: cannot be loaded: invalid YAML: 2 documents/);
    expect(problems['f.yaml']![0]).toMatch(/^f\.yaml: content = \[1,2\]: expected an object/);
    expect(problems['g.yaml']![0]).toMatch(/^g\.yaml: cannot be loaded: invalid YAML at line 3, column 1: Map keys must be unique/);
  });
});

describe('a job file with a secret in it that cannot be parsed', () => {
  it('the problem line names where, never a piece of the file (JSON excerpts, YAML alias names)', async () => {
    const jobs = tempDir();
    writeFileSync(join(jobs, 'unquoted.json'), '{\n  "schedule": "@daily",\n  "command": "true",\n  "env": {"TOKEN":hunter2sec}\n}\n');
    writeFileSync(join(jobs, 'excerpt.json'), '{"env": {"TOKEN": "hunter2sec"}} hunter2sec');
    writeFileSync(join(jobs, 'alias.yaml'), "schedule: '@daily'\ncommand: 'true'\nenv:\n  PASSWORD: *Pa55word\n");
    const loaded = await loadJobs(jobs, 'UTC', { cwd: jobs });
    const problems = Object.fromEntries(loaded.invalid.map((i) => [i.file, i.problems]));
    expect(problems).toEqual({
      'unquoted.json': ['unquoted.json: cannot be loaded: invalid JSON at line 4, column 19: Unexpected character'],
      'excerpt.json': ['excerpt.json: cannot be loaded: invalid JSON at line 1, column 34: Unexpected non-whitespace character after JSON'],
      'alias.yaml': ['alias.yaml: cannot be loaded: invalid YAML at line 4, column 13: an alias with no anchor: quote values starting with *'],
    });
    for (const lines of Object.values(problems)) for (const l of lines) expect(l).not.toMatch(/hunter|Pa55/);
  });
});

describe('the end of a command as recorded', () => {
  const end = (o: Partial<CommandEnded>): CommandEnded => ({ pid: 1, exitCode: null, exitSignal: null, startError: null, stopped: null, output: 'out', lastStderrLine: null, ...o });
  it('exit 0 succeeds with { exitCode: 0 }; another code or a signal fails, with the last stderr line', () => {
    expect(commandOutcome(end({ exitCode: 0 }))).toMatchObject({ kind: 'ok', json: '{"exitCode":0}', output: 'out' });
    expect(commandOutcome(end({ exitCode: 3, lastStderrLine: 'disk full' }))).toMatchObject({ kind: 'error', error: 'exited with code 3: disk full' });
    expect(commandOutcome(end({ exitCode: 1 }))).toMatchObject({ kind: 'error', error: 'exited with code 1' });
    expect(commandOutcome(end({ exitSignal: 'SIGSEGV' }))).toMatchObject({ kind: 'error', error: 'killed by SIGSEGV' });
    expect(commandOutcome(end({ startError: 'spawn /x ENOENT' }))).toMatchObject({ kind: 'error', error: 'could not start: spawn /x ENOENT' });
  });
  it('the environment names the run; SCHEDULER_DRY_RUN is 1 or 0', () => {
    const at = new Date(Date.UTC(2026, 11, 1, 2, 0));
    expect(commandVars({ job: 'j', scheduledAt: at, periodKey: `j@${at.toISOString()}`, attempt: 2, runId: '7', dryRun: true, trigger: 'catch-up', nodeId: 'n1', shard: { index: 2, count: 4 } })).toEqual({
      SCHEDULER_JOB: 'j', SCHEDULER_PERIOD: '2026-12-01T02:00:00.000Z', SCHEDULER_PERIOD_KEY: 'j@2026-12-01T02:00:00.000Z', SCHEDULER_ATTEMPT: '2',
      SCHEDULER_RUN_ID: '7', SCHEDULER_DRY_RUN: '1', SCHEDULER_TRIGGER: 'catch-up', SCHEDULER_NODE_ID: 'n1',
      SCHEDULER_SHARD_INDEX: '2', SCHEDULER_SHARD_COUNT: '4',
    });
  });
});

describe('output', () => {
  it('the tail keeps the last 64 KiB, cut on a character boundary, with a note of what came before', () => {
    const tail = new OutputTail();
    tail.add(Buffer.from('short\n'));
    expect(tail.text()).toBe('short\n');
    const big = new OutputTail();
    for (let i = 0; i < 5000; i++) big.add(Buffer.from(`line ${String(i).padStart(5, '0')} é€\n`));
    const text = big.text();
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(TAIL_BYTES);
    expect(Buffer.byteLength(text)).toBeGreaterThan(TAIL_BYTES - 200);
    expect(text).toMatch(/^\[… \d+ earlier bytes not kept\]\n/);
    expect(text.endsWith('line 04999 é€\n')).toBe(true);
    expect(text).not.toContain('\uFFFD');
    const nul = new OutputTail();
    nul.add(Buffer.from('a\u0000b'));
    expect(nul.text()).toBe('a\uFFFDb');
  });

  it('each stream is decoded on its own: a character cut across two stdout chunks stays whole when stderr wrote between them', () => {
    const tail = new OutputTail();
    const euro = Buffer.from('€');
    tail.add(Buffer.concat([Buffer.from('price: 5'), euro.subarray(0, 2)]), 'stdout');
    tail.add(Buffer.from('warning\n'), 'stderr');
    tail.add(Buffer.concat([euro.subarray(2), Buffer.from('\n')]), 'stdout');
    expect(tail.text()).toBe('price: 5warning\n€\n');
    // A stream that ends inside a character: the rest reads as U+FFFD, at its end.
    const cut = new OutputTail();
    cut.add(Buffer.concat([Buffer.from('a'), euro.subarray(0, 1)]), 'stdout');
    cut.add(Buffer.from('b'), 'stderr');
    expect(cut.text()).toBe('ab\uFFFD');
  });

  it('lines go to the log whole, across chunks and multi-byte characters; a long line is cut once', () => {
    const seen: Array<[string, boolean]> = [];
    const lines = new LineLog((line, cut) => seen.push([line, cut]));
    const euro = Buffer.from('€');
    lines.add(Buffer.concat([Buffer.from('one\r\ntw'), euro.subarray(0, 1)]));
    lines.add(Buffer.concat([euro.subarray(1), Buffer.from('o\n')]));
    lines.add(Buffer.from(`${'x'.repeat(MAX_LOG_LINE + 10)}`));
    lines.add(Buffer.from('yyy\nlast\r'));
    lines.end();
    // The last line has no newline: the \r of its CRLF goes all the same.
    expect(seen).toEqual([['one', false], ['tw€o', false], ['x'.repeat(MAX_LOG_LINE), true], ['last', false]]);
    expect(lines.last).toBe('last');
  });
});

describe('the process group of a command (real processes)', () => {
  function logger() {
    const lines: Array<Record<string, unknown>> = [];
    const stream = new Writable({ write(chunk, _enc, cb) { for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l)); cb(); } });
    return { log: pino({ level: 'info' }, stream), lines };
  }
  const spec = (command: string, killAfterMs: number) => validateJob(FILE, { schedule: '* * * * *', command, killAfter: killAfterMs }, 'UTC').job!.command!;

  it("after 'lease-lost' the group is killed within leaseLostGraceMs, not killAfter: SIGTERM ignored, SIGKILL after 200 ms", async () => {
    const { log, lines } = logger();
    const controller = new AbortController();
    const run = runCommand({ spec: spec("trap '' TERM; sleep 30 & echo \"pgid $$\"; sleep 30", 10_000), vars: {}, log, signal: controller.signal, leaseLostGraceMs: 200 });
    const pgid = await new Promise<number>((resolve) => {
      const t = setInterval(() => {
        const line = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('pgid '));
        if (line) {
          clearInterval(t);
          resolve(Number(String(line.msg).slice(5)));
        }
      }, 10);
    });
    const abortedAt = performance.now();
    controller.abort('lease-lost');
    const ended = await run;
    // killAfter is 10 s: the lease-lost bound (200 ms, plus the polling) decided.
    expect(performance.now() - abortedAt).toBeLessThan(3000);
    expect(ended.stopped).toEqual({ reason: 'lease-lost', text: 'SIGTERM not heeded: the process group was killed (SIGKILL) after 200ms' });
    expect(ended.output).toBe(`pgid ${pgid}\n`);
    expect(groupMembers(pgid)).toEqual([]);
  });

  it("the error names the SIGKILL's real delay: a lease lost late in a timeout's killAfter leaves it; one lost early brings it forward", async () => {
    const stopped = async (lostAfterMs: number) => {
      const { log } = logger();
      const controller = new AbortController();
      const leaseGone = new AbortController();
      const run = runCommand({ spec: spec("trap '' TERM; sleep 30", 1000), vars: {}, log, signal: controller.signal, leaseGone: leaseGone.signal, leaseLostGraceMs: 500 });
      await new Promise((r) => setTimeout(r, 200));
      controller.abort('timeout');
      await new Promise((r) => setTimeout(r, lostAfterMs));
      leaseGone.abort();
      return (await run).stopped;
    };
    // 700 ms after the SIGTERM, the lease's 500 ms would end after the timeout's 1 s: the 1 s holds.
    expect(await stopped(700)).toEqual({ reason: 'timeout', text: 'SIGTERM not heeded: the process group was killed (SIGKILL) after 1s' });
    // 100 ms after it: SIGKILL about 600 ms after the SIGTERM.
    expect((await stopped(100))!.text).toMatch(/^SIGTERM not heeded: the process group was killed \(SIGKILL\) after (5[5-9]\d|[6-8]\d\d)ms$/);
  });

  it('while a command runs nothing polls (no timer is armed, however long it runs); the run ends as soon as the leader exits', async () => {
    const realSetTimeout = globalThis.setTimeout;
    const realSleep = (ms: number) => new Promise((r) => realSetTimeout(r, ms));
    const { log } = logger();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    try {
      const started = performance.now();
      const run = runCommand({ spec: spec('sleep 0.5', 10_000), vars: {}, log, signal: new AbortController().signal });
      await realSleep(50);
      // An hour of the command's life on the fake clock: a wait that polled would have re-armed its timer.
      await vi.advanceTimersByTimeAsync(3_600_000);
      expect(vi.getTimerCount()).toBe(0);
      const ended = await run;
      expect(ended).toMatchObject({ exitCode: 0, stopped: null });
      expect(performance.now() - started).toBeLessThan(3000);
    } finally {
      vi.useRealTimers();
    }
  });

  it('an abort after the leader exited (while its leftovers are stopped) does not override the exit; a lost lease only hurries their SIGKILL', async () => {
    // The pause lets the child set its trap before the leader's exit brings the SIGTERM.
    const lingering = "(trap '' TERM; sleep 30) & sleep 0.3; echo done; exit 0";
    for (const reason of ['timeout', 'shutdown'] as const) {
      const { log } = logger();
      const controller = new AbortController();
      const exitedAt: number[] = [];
      const run = runCommand({ spec: spec(lingering, 1500), vars: {}, log, signal: controller.signal, onExit: () => exitedAt.push(performance.now()) });
      await new Promise((r) => setTimeout(r, 800));
      expect(exitedAt, 'the leader exited').toHaveLength(1);
      controller.abort(reason);
      const ended = await run;
      expect(ended, reason).toMatchObject({ exitCode: 0, exitSignal: null, stopped: null, output: 'done\n' });
      // The leftover ignored SIGTERM: SIGKILL came at the leader's exit + killAfter, not sooner.
      expect(performance.now() - exitedAt[0]!).toBeGreaterThanOrEqual(1450);
    }
    const { log } = logger();
    const controller = new AbortController();
    const leaseGone = new AbortController();
    const run = runCommand({ spec: spec(lingering, 10_000), vars: {}, log, signal: controller.signal, leaseGone: leaseGone.signal, leaseLostGraceMs: 200 });
    await new Promise((r) => setTimeout(r, 800));
    const lostAt = performance.now();
    leaseGone.abort();
    controller.abort('lease-lost');
    expect(await run).toMatchObject({ exitCode: 0, stopped: null });
    expect(performance.now() - lostAt).toBeLessThan(3000);
  });

  it('leftovers that ignore SIGTERM are looked at every 25 ms for a second, then every 250 ms; SIGKILL still comes at killAfter', async () => {
    const { log } = logger();
    const exitedAt: number[] = [];
    const timer = vi.spyOn(globalThis, 'setTimeout');
    try {
      const ended = await runCommand({ spec: spec("(trap '' TERM; sleep 30) & sleep 0.3; exit 0", 3000), vars: {}, log, signal: new AbortController().signal, onExit: () => exitedAt.push(performance.now()) });
      expect(ended).toMatchObject({ exitCode: 0, stopped: null });
      const took = performance.now() - exitedAt[0]!;
      expect(took).toBeGreaterThanOrEqual(2950);
      expect(took).toBeLessThan(3600);
      // Each look scans /proc: 25 ms polling over the 3 s would be 120 of them.
      const looks = timer.mock.calls.filter(([, ms]) => typeof ms === 'number' && ms > 0 && ms <= 250);
      expect(looks.length).toBeGreaterThan(8);
      expect(looks.length).toBeLessThan(60);
    } finally {
      timer.mockRestore();
    }
  });

  it('a command that exits leaving a child in its group: the child is stopped before the end is reported', async () => {
    const { log, lines } = logger();
    const ended = await runCommand({ spec: spec('sleep 30 & echo "pgid $$"; echo done >&2', 10_000), vars: { SCHEDULER_JOB: 'x' }, log, signal: new AbortController().signal });
    expect(ended).toMatchObject({ exitCode: 0, stopped: null, lastStderrLine: 'done' });
    expect(groupMembers(Number(/pgid (\d+)/.exec(ended.output)![1]))).toEqual([]);
    expect(lines.find((l) => l.msg === 'done')).toMatchObject({ stream: 'stderr', level: 40 });
    expect(lines.some((l) => String(l.msg).includes('left processes in its group'))).toBe(true);
  });
});

describe('a command job\'s output on the status page and /api', () => {
  it('a run view carries the last 2,000 characters of the output; the job page shows it escaped, in a closed <details>', async () => {
    const { runView, OUTPUT_IN_VIEW } = await import('../../src/status/reader.js');
    const { jobPageBody } = await import('../../src/http/page/render.js');
    const { FIXTURE_NOW, FixtureReader } = await import('../helpers/status-fixtures.js');
    const record = {
      id: '1', job: 'cmd', scheduledAt: FIXTURE_NOW, periodKey: `cmd@${FIXTURE_NOW.toISOString()}`, shard: 0, attempt: 1, trigger: 'schedule' as const,
      status: 'failed' as const, reason: null, nodeId: 'n', startedAt: FIXTURE_NOW, claimedAt: null, runAt: null, finishedAt: FIXTURE_NOW, durationMs: 5,
      heartbeatAt: null, leaseMs: 1000, result: null, resultNote: null, error: 'exited with code 3', errorStack: null,
      output: `${'x'.repeat(5000)}\n<script>window.__injected = true</script>\n`,
    };
    const view = runView(record);
    expect(view.output!.startsWith('…')).toBe(true);
    expect(view.output!.length).toBe(OUTPUT_IN_VIEW + 1);
    expect(runView({ ...record, output: null }).output).toBeUndefined();
    const detail = (await new FixtureReader().job('berlin-nightly'))!;
    const page = jobPageBody({ ...detail, runs: [view] }, FIXTURE_NOW).value;
    expect(page).toContain('<details class="output"><summary>output</summary><pre>');
    expect(page).toContain('&lt;script&gt;window.__injected = true&lt;/script&gt;');
    expect(page).not.toContain('<script>window');
  });
});
