/**
 * Command jobs through the real `bin/scheduler` on SQLite: one daemon runs every-second .yaml and
 * .json command jobs side by side: exit 0 / 3 / a signal recorded as such, the SCHEDULER_* variables
 * and the job's env in the process, the output tail stored (at most 64 KiB for a command that prints
 * more), a command that ignores SIGTERM killed after killAfter and recorded timed_out only once its
 * process group is gone, no process left in a recorded run's group (read from /proc by process
 * group), a command stopped by the daemon's shutdown; `run-once --dry-run`, `list` and `validate` on
 * command jobs; bad command job files refused one line each.
 */
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Sqlite from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { BIN, Daemon, ROOT, cleanEnv, runCli } from '../helpers/cli.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace, type HistoryRun } from '../helpers/workspace.js';

type Run = HistoryRun & { output: string | null };

const made: Array<{ ws: Workspace; daemon?: Daemon }> = [];
afterAll(async () => {
  for (const m of made) {
    await m.daemon?.stop('SIGKILL', 5000);
    m.ws.cleanup();
  }
});

function envOf(ws: Workspace, extra: Record<string, string> = {}): Record<string, string> {
  return {
    SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_NODE_ID: 'cmd-node', SCHEDULER_LOG_LEVEL: 'info',
    SCHEDULER_HTTP: 'off', SIDE_EFFECTS: ws.path('effects.jsonl'), ...extra,
  };
}

async function history(ws: Workspace, job: string): Promise<Run[]> {
  const r = await runCli(['history', job, '--json', '--limit', '1000'], { cwd: ws.dir, env: envOf(ws) });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Run[];
}

/** The runs of `job`, oldest first, read from the SQLite file (polling through the CLI would load the machine). */
function rows(ws: Workspace, job: string): Run[] {
  const db = new Sqlite(ws.path('scheduler.db'), { readonly: true, fileMustExist: true });
  try {
    const got = db.prepare('select * from scheduler_runs where job = ? order by scheduled_at, attempt').all(job) as Array<Record<string, unknown>>;
    return got.map((r) => ({
      id: String(r.id), job: String(r.job), scheduledAt: new Date(Number(r.scheduled_at)).toISOString(), periodKey: String(r.period_key), attempt: Number(r.attempt),
      trigger: String(r.trigger), status: String(r.status), reason: r.reason as string | null, nodeId: String(r.node_id), startedAt: null, runAt: null, finishedAt: null,
      durationMs: r.duration_ms === null ? null : Number(r.duration_ms), error: r.error as string | null, result: r.result === null ? null : JSON.parse(String(r.result)),
      output: r.output as string | null,
    }));
  } finally {
    db.close();
  }
}

/** The first run of `job` with a final status (other than skipped). */
function firstFinal(ws: Workspace, job: string): Promise<Run> {
  return waitFor(`a finished run of ${job}`, () => {
    try {
      return rows(ws, job).find((r) => !['running', 'pending', 'skipped'].includes(r.status));
    } catch {
      return undefined; // the file or the table is not there yet
    }
  }, 30_000, 50);
}

/** Processes (not zombies) whose process group is `pgid`, from /proc. */
function groupMembers(pgid: number): string[] {
  const out: string[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${e}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z') out.push(`${e} ${stat.slice(stat.indexOf('('), stat.lastIndexOf(')') + 1)}`);
  }
  return out;
}

const pgidOf = (run: Run): number => {
  const m = /pgid (\d+)/.exec(run.output ?? '');
  expect(m, `no pgid in the output of ${run.periodKey}: ${JSON.stringify(run.output)}`).not.toBeNull();
  return Number(m![1]);
};

const ENV_LINE = `printf '{"job":"%s","period":"%s","key":"%s","attempt":"%s","runId":"%s","dry":"%s","trigger":"%s","node":"%s","extra":"%s","store":"%s","cwd":"%s"}\\n' "$SCHEDULER_JOB" "$SCHEDULER_PERIOD" "$SCHEDULER_PERIOD_KEY" "$SCHEDULER_ATTEMPT" "$SCHEDULER_RUN_ID" "$SCHEDULER_DRY_RUN" "$SCHEDULER_TRIGGER" "$SCHEDULER_NODE_ID" "$EXTRA" "\${SCHEDULER_STORE-unset}" "$PWD" >> "$SIDE_EFFECTS"; echo env written`;

describe.concurrent('command jobs', () => {
  it('one daemon: exit 0 / 3 / signal, env, output tail (64 KiB at most), SIGTERM ignored then SIGKILL after killAfter, no process left in the group, shutdown', async () => {
    const ws = new Workspace('cron-cmd-');
    made.push({ ws });
    ws.writeJob('env-check.yaml', `schedule: '* * * * * *'\nenv:\n  EXTRA: from-the-job-file\ncommand: ${JSON.stringify(ENV_LINE)}\n`);
    ws.writeJob('exit3.json', JSON.stringify({ schedule: '* * * * * *', command: ['sh', '-c', "echo partial output; echo 'disk full' >&2; exit 3"] }));
    ws.writeJob('signal.yml', "schedule: '* * * * * *'\ncommand: 'echo going; kill -USR1 $$'\n");
    // Over 64 KiB in one line (the log gets it cut once), then a short one.
    ws.writeJob('big.yaml', "schedule: '* * * * * *'\ncommand: \"seq 1 40000 | tr '\\\\n' ' '; echo; echo end\"\n");
    // A script beside the job file, by a relative path: it leaves a child behind in its group.
    chmodSync(ws.writeJob('stray.sh', '#!/bin/sh\nsleep 300 &\necho "pgid $$"\nexit 0\n'), 0o755);
    ws.writeJob('stray.yaml', "schedule: '* * * * * *'\ncommand: [./stray.sh]\n");
    ws.writeJob('stubborn.yaml', `schedule: '* * * * * *'\ntimeout: 1s\nkillAfter: 1s\ncommand: "trap '' TERM; sleep 300 & echo \\"pgid $$\\"; sleep 60"\n`);
    ws.writeJob('long.yaml', "schedule: '* * * * * *'\nkillAfter: 5s\ncommand: 'echo \"pgid $$\"; sleep 30'\n");
    // Exits at once leaving a child that ignores SIGTERM: its timeout fires while the child is being
    // stopped (SIGKILL 3 s after the exit); the run is the leader's exit 0, once, not a timeout retried.
    // (The pause lets the child set its trap before the exit brings the SIGTERM.)
    ws.writeJob('lingering.yaml', `schedule: '* * * * * *'\ntimeout: 1s\nkillAfter: 3s\nretries: 2\ncommand: "(trap '' TERM; sleep 30) & sleep 0.3; echo done; exit 0"\n`);

    const valid = await runCli(['validate'], { cwd: ws.dir, env: envOf(ws) });
    expect(valid.stdout + valid.stderr).toContain('ok: 8 job(s) valid');
    expect(valid.code).toBe(0);

    const daemon = new Daemon([], { cwd: ws.dir, env: envOf(ws, { SCHEDULER_GRACE_PERIOD: '1s' }) });
    made.push({ ws, daemon });

    const [env, exit3, signal, big, stray, stubborn, lingering] = await Promise.all(['env-check', 'exit3', 'signal', 'big', 'stray', 'stubborn', 'lingering'].map((j) => firstFinal(ws, j)));
    // Recorded only once the group was gone: nothing of it is left when the row says it ended.
    const strayGroup = groupMembers(pgidOf(stray!));
    const stubbornGroup = groupMembers(pgidOf(stubborn!));
    expect(strayGroup, 'processes left in the stray job\'s group').toEqual([]);
    expect(stubbornGroup, 'processes left in the stubborn job\'s group').toEqual([]);

    expect(env).toMatchObject({ status: 'succeeded', result: { exitCode: 0 }, error: null, output: 'env written\n' });
    const effect = ws.records<Record<string, string>>('effects.jsonl').find((e) => e.runId === env!.id);
    // The first period may be the one whose instant fell while the daemon started: the start-up
    // catch-up runs it (trigger catch-up); any later one is the timer's. The body sees the row's trigger.
    expect(['schedule', 'catch-up']).toContain(env!.trigger);
    expect(effect).toEqual({
      job: 'env-check', period: env!.scheduledAt, key: env!.periodKey, attempt: '1', runId: env!.id, dry: '0', trigger: env!.trigger, node: 'cmd-node',
      extra: 'from-the-job-file', store: 'unset', cwd: ws.jobsDir,
    });

    expect(exit3).toMatchObject({ status: 'failed', error: 'exited with code 3: disk full', output: 'partial output\ndisk full\n' });
    expect(signal).toMatchObject({ status: 'failed', error: 'killed by SIGUSR1', output: 'going\n' });

    expect(big!.status).toBe('succeeded');
    expect(Buffer.byteLength(big!.output!)).toBeLessThanOrEqual(64 * 1024);
    expect(Buffer.byteLength(big!.output!)).toBeGreaterThan(60 * 1024);
    expect(big!.output).toMatch(/^\[… \d+ earlier bytes not kept\]\n/);
    expect(big!.output!.endsWith(' 39999 40000 \nend\n')).toBe(true);
    expect(daemon.logs().filter((l) => l.job === 'big' && l.stream === 'stdout' && l.runId === big!.id).map((l) => [String(l.msg).length, l.cut])).toEqual([[4096, true], [3, undefined]]);

    expect(stray).toMatchObject({ status: 'succeeded', result: { exitCode: 0 } });
    expect(lingering).toMatchObject({ status: 'succeeded', result: { exitCode: 0 }, error: null, output: 'done\n', attempt: 1 });
    expect(lingering!.durationMs).toBeGreaterThanOrEqual(3200);
    expect(rows(ws, 'lingering').filter((r) => r.periodKey === lingering!.periodKey).map((r) => [r.attempt, r.status])).toEqual([[1, 'succeeded']]);
    expect(stubborn).toMatchObject({ status: 'timed_out', error: 'timed out after 1000ms; SIGTERM not heeded: the process group was killed (SIGKILL) after 1s' });
    // timeout 1 s, then killAfter 1 s before SIGKILL: the outcome came after both.
    expect(stubborn!.durationMs).toBeGreaterThanOrEqual(1900);

    // The command's lines are in the daemon's log: stdout at info, stderr at warn.
    const lines = daemon.logs().filter((l) => l.job === 'exit3' && l.stream);
    expect(lines).toEqual(expect.arrayContaining([
      expect.objectContaining({ stream: 'stdout', level: 'info', msg: 'partial output' }),
      expect.objectContaining({ stream: 'stderr', level: 'warn', msg: 'disk full' }),
    ]));

    // --dry-run runs the command with SCHEDULER_DRY_RUN=1 and records nothing.
    const dry = await runCli(['run-once', 'env-check', '--dry-run'], { cwd: ws.dir, env: envOf(ws) });
    expect(dry.code, dry.stderr).toBe(0);
    const dryEffect = ws.records<Record<string, string>>('effects.jsonl').find((e) => e.runId.startsWith('dry-run-'));
    expect(dryEffect).toMatchObject({ job: 'env-check', dry: '1', trigger: 'manual' });
    expect(rows(ws, 'env-check').some((r) => r.id === dryEffect!.runId)).toBe(false);
    // history --json shows the tail as `output`.
    expect((await history(ws, 'exit3')).find((r) => r.id === exit3!.id)).toMatchObject({ output: 'partial output\ndisk full\n' });

    const list = await runCli(['list', '--json'], { cwd: ws.dir, env: envOf(ws) });
    expect(list.code, list.stderr).toBe(0);
    const listed = (JSON.parse(list.stdout) as { jobs: Array<Record<string, unknown>> }).jobs;
    expect(listed.find((j) => j.name === 'exit3')).toMatchObject({ isolation: 'process', command: ['sh', '-c', "echo partial output; echo 'disk full' >&2; exit 3"], killAfterMs: 10_000, cwd: ws.jobsDir });

    // Shutdown past the grace period: the running command gets SIGTERM and the run is recorded interrupted.
    const long = await waitFor('long running', () => rows(ws, 'long').find((r) => r.status === 'running'), 10_000, 50);
    const pgid = await waitFor('the long job\'s first line in the log', () => {
      const line = daemon.logs().find((l) => l.job === 'long' && l.stream === 'stdout' && l.runId === long.id);
      return line ? Number(/^pgid (\d+)$/.exec(String(line.msg))?.[1]) : undefined;
    }, 10_000, 100);
    expect(groupMembers(pgid).length, 'the long job\'s group while it runs').toBeGreaterThan(0);
    expect(await daemon.stop('SIGTERM', 20_000)).toBe(0);
    expect(groupMembers(pgid)).toEqual([]);
    const ended = (await history(ws, 'long')).find((r) => r.id === long.id)!;
    expect(ended).toMatchObject({ status: 'interrupted', error: 'interrupted by shutdown; the process group ended on SIGTERM', output: `pgid ${pgid}\n` });
  });

  it('bad command job files: one line each naming the file and field, exit 2; the valid one still loads', async () => {
    const ws = new Workspace('cron-cmd-bad-');
    made.push({ ws });
    ws.writeJob('ok.yaml', "schedule: '@daily'\ncommand: 'true'\n");
    ws.writeJob('both.yaml', "schedule: '@daily'\ncommand: 'true'\nrun: 'x'\n");
    ws.writeJob('empty.yaml', "schedule: '@daily'\ncommand: ''\n");
    ws.writeJob('empty-array.json', '{ "schedule": "@daily", "command": [] }');
    ws.writeJob('not-executable.txt', 'echo\n');
    ws.writeJob('not-executable.yaml', "schedule: '@daily'\ncommand: ['./not-executable.txt']\n");
    ws.writeJob('missing.json', '{ "schedule": "@daily", "command": ["/nowhere/backup.sh"] }');
    ws.writeJob('no-command.yml', "schedule: '@daily'\n");
    ws.writeJob('syntax.yaml', "schedule: '@daily'\ncommand: [a, b\n");
    ws.writeJob('syntax.json', '{ "schedule": "@daily",\n  "command": "true" "x" }');
    // A syntax error next to a token: the line says where, not what is there.
    ws.writeJob('secret.json', '{ "schedule": "@daily", "command": "true",\n  "env": { "TOKEN": hunter2sec } }');
    ws.writeJob('secret.yaml', "schedule: '@daily'\ncommand: 'true'\nenv:\n  PASSWORD: *Pa55word\n");
    const r = await runCli(['validate'], { cwd: ws.dir, env: envOf(ws) });
    expect(r.code).toBe(2);
    expect(r.stdout + r.stderr).not.toMatch(/hunter|Pa55/);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(10);
    const line = (file: string) => {
      const hits = lines.filter((l) => l.startsWith(`jobs/${file}: `));
      expect(hits, `${file} in\n${lines.join('\n')}`).toHaveLength(1);
      return hits[0]!;
    };
    expect(line('both.yaml')).toMatch(/field 'run' = "x": expected no field: a job has either 'run' or 'command', not both/);
    expect(line('empty.yaml')).toMatch(/field 'command' = "": expected a non-empty shell command/);
    expect(line('empty-array.json')).toMatch(/field 'command' = \[\]: expected a non-empty argv array/);
    expect(line('not-executable.yaml')).toMatch(/field 'command\[0\]' = "\.\/not-executable\.txt": expected an executable file \(.*not-executable\.txt is not executable/);
    expect(line('missing.json')).toMatch(/field 'command\[0\]' = "\/nowhere\/backup\.sh": expected an executable file \(\/nowhere\/backup\.sh does not exist\)/);
    expect(line('no-command.yml')).toMatch(/field 'command' = undefined: expected a shell command string or an argv array: a \.yml job file defines a command job/);
    expect(line('syntax.yaml')).toMatch(/cannot be loaded: invalid YAML at line \d+, column \d+: /);
    expect(line('syntax.json')).toMatch(/cannot be loaded: invalid JSON at line 2, column \d+: /);
    expect(line('secret.json')).toBe('jobs/secret.json: cannot be loaded: invalid JSON at line 2, column 21: Unexpected character');
    expect(line('secret.yaml')).toBe('jobs/secret.yaml: cannot be loaded: invalid YAML at line 4, column 13: an alias with no anchor: quote values starting with *');
    const list = await runCli(['list', '--json'], { cwd: ws.dir, env: envOf(ws) });
    expect(list.code).toBe(2);
    expect((JSON.parse(list.stdout) as { jobs: Array<{ name: string }> }).jobs.map((j) => j.name)).toEqual(['ok']);
  });

  it('the example examples/command-job (cleanup-tmp.yaml + .sh) copied into a jobs folder: validate, --dry-run deletes nothing, run-once deletes only the old files', async () => {
    const ws = new Workspace('cron-cmd-example-');
    made.push({ ws });
    const example = join(ROOT, 'examples', 'command-job');
    copyFileSync(join(example, 'cleanup-tmp.sh'), join(ws.jobsDir, 'cleanup-tmp.sh'));
    const target = ws.path('tmp');
    const yaml = readFileSync(join(example, 'cleanup-tmp.yaml'), 'utf8');
    expect(yaml).toContain('CLEANUP_DIR: /var/tmp/cluster-cron-example');
    writeFileSync(join(ws.jobsDir, 'cleanup-tmp.yaml'), yaml.replace('/var/tmp/cluster-cron-example', target));
    mkdirSync(join(target, 'sub'), { recursive: true });
    const old = Date.now() / 1000 - 10 * 86_400;
    for (const f of ['old-1.tmp', 'sub/old 2.tmp']) {
      writeFileSync(join(target, f), 'x');
      utimesSync(join(target, f), old, old);
    }
    writeFileSync(join(target, 'fresh.tmp'), 'x');

    const valid = await runCli(['validate'], { cwd: ws.dir, env: envOf(ws) });
    expect(valid.code, valid.stdout + valid.stderr).toBe(0);
    const dry = await runCli(['run-once', 'cleanup-tmp', '--dry-run'], { cwd: ws.dir, env: envOf(ws) });
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stderr).toContain('cleanup-tmp: dry run: 2 file(s) would be deleted');
    expect(existsSync(join(target, 'old-1.tmp'))).toBe(true);
    const real = await runCli(['run-once', 'cleanup-tmp'], { cwd: ws.dir, env: envOf(ws) });
    expect(real.code, real.stderr).toBe(0);
    expect(['old-1.tmp', 'sub/old 2.tmp', 'fresh.tmp'].map((f) => existsSync(join(target, f)))).toEqual([false, false, true]);
    const [run] = await history(ws, 'cleanup-tmp');
    expect(run).toMatchObject({ status: 'succeeded', trigger: 'manual', result: { exitCode: 0 } });
    expect(run!.output).toMatch(/cleanup-tmp: cleanup-tmp@\S+ \(attempt 1\): files older than 7 days in .*\ncleanup-tmp: deleted 2 file\(s\)\n$/);
  });

  it('run-once stopped by SIGTERM stops its commands\' groups first (SIGTERM, SIGKILL after each one\'s killAfter), writes no outcome, then ends by the signal', async () => {
    const ws = new Workspace('cron-cmd-signal-');
    made.push({ ws });
    ws.writeJob('stubborn.yaml', `schedule: '@daily'\nkillAfter: 1s\ncommand: "trap '' TERM; sleep 300 & echo \\"pgid $$\\"; sleep 60"\n`);
    // Ends on the SIGTERM at once: its death is the signal's doing, not a failure that owes a retry.
    ws.writeJob('plain.yaml', `schedule: '@daily'\nretries: 2\ncommand: 'echo "pgid $$"; sleep 60'\n`);
    // Ignores SIGTERM too, with a longer killAfter: its own, not stubborn's.
    ws.writeJob('patient.yaml', `schedule: '@daily'\nkillAfter: 3s\ncommand: "trap '' TERM; echo \\"pgid $$\\"; sleep 60"\n`);
    const proc = spawn(process.execPath, [BIN, 'run-once', 'stubborn', 'plain', 'patient'], { cwd: ws.dir, env: cleanEnv(envOf(ws)), stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    proc.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<NodeJS.Signals | null>((r) => proc.on('exit', (_code, sig) => r(sig)));
    const pgidOfJob = (job: string) => waitFor(`${job}'s first line`, () => {
      const line = stderr.split('\n').find((l) => l.includes(`"job":"${job}"`) && /"msg":"pgid \d+"/.test(l));
      return line ? Number(/"msg":"pgid (\d+)"/.exec(line)![1]) : undefined;
    }, 20_000, 50);
    const [pgid, plainPgid, patientPgid] = [await pgidOfJob('stubborn'), await pgidOfJob('plain'), await pgidOfJob('patient')];
    expect(groupMembers(pgid).length).toBeGreaterThanOrEqual(2);
    const killedAt = performance.now();
    proc.kill('SIGTERM');
    await waitFor('the stubborn group gone', () => groupMembers(pgid).length === 0 || undefined, 10_000, 50);
    const stubbornGone = performance.now() - killedAt;
    expect(stubbornGone).toBeGreaterThanOrEqual(950);
    expect(groupMembers(patientPgid).length, 'the patient group after stubborn\'s killAfter').toBeGreaterThan(0);
    expect(await exited).toBe('SIGTERM');
    expect(performance.now() - killedAt).toBeGreaterThanOrEqual(2950);
    expect(groupMembers(pgid)).toEqual([]);
    expect(groupMembers(plainPgid)).toEqual([]);
    expect(groupMembers(patientPgid)).toEqual([]);
    // No outcome is written, as for a run-once whose JavaScript body a signal ends: the rows stay
    // running and are taken over once their lease runs out.
    expect(rows(ws, 'stubborn').map((r) => [r.attempt, r.status, r.error])).toEqual([[1, 'running', null]]);
    expect(rows(ws, 'plain').map((r) => [r.attempt, r.status, r.error])).toEqual([[1, 'running', null]]);
    expect(rows(ws, 'patient').map((r) => [r.attempt, r.status, r.error])).toEqual([[1, 'running', null]]);
  });
});
