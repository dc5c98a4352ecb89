/**
 * `pause` / `resume` with two real daemons on one PostgreSQL database (no Redis: the row decides):
 * an every-second job whose body appends one line per run, counted against the moment `pause`
 * returned; a job whose first attempt fails once, so that a retry is owed (pending) at pause time.
 * Then one daemon on SQLite with a jittered job: a pause that lands while a claimed period waits for
 * its jittered start stops its body too.
 * Then, on SQLite with no daemon: `pause` of a job no live node declares says so in a note.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { Daemon, runCli, type CliResult } from '../helpers/cli.js';
import { createPostgresDb, type TestDatabase } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace, type HistoryRun } from '../helpers/workspace.js';
import { instantOf, waitForLog } from './cluster-scenario.js';
import { jitterDelayMs } from '../../src/time/jitter.js';
import { compileSchedule, nextPeriodAfter, periodKey } from '../../src/time/schedule.js';
import { Database } from '../../src/store/database.js';
import { JOBS_TABLE } from '../../src/store/migrations.js';
import { KnexJobStore } from '../../src/store/jobs.js';

const TICK_JOB = `
import { appendFileSync } from 'node:fs';
export default {
  schedule: '* * * * * *',
  catchUp: '30s',
  run(ctx) {
    appendFileSync(process.env.SIDE_EFFECTS, \`\${ctx.periodKey} \${ctx.nodeId} \${ctx.attempt} \${ctx.trigger}\\n\`);
  },
};
`;

/** Attempt 1 fails once the test has created the ARMED file (the body that renames it away is the one that fails). */
const FLAKY_JOB = `
import { appendFileSync, renameSync } from 'node:fs';
export default {
  schedule: '*/2 * * * * *',
  catchUp: '30s',
  retries: 1,
  retryDelay: '6s',
  run(ctx) {
    appendFileSync(process.env.FLAKY_EFFECTS, \`\${ctx.periodKey} \${ctx.nodeId} \${ctx.attempt} \${ctx.trigger}\\n\`);
    if (ctx.attempt > 1) return 'retried';
    try {
      renameSync(process.env.ARMED, process.env.ARMED + '.used');
    } catch {
      return 'not armed';
    }
    throw new Error('armed: failing once');
  },
};
`;

interface Effect {
  periodKey: string;
  nodeId: string;
  attempt: number;
  trigger: string;
  instant: number;
}

describe('pause and resume: 2 daemons on PostgreSQL', () => {
  let db: TestDatabase | undefined;
  let ws: Workspace;
  let env: Record<string, string>;
  const daemons: Daemon[] = [];

  const cli = (...args: string[]): Promise<CliResult> => runCli(args, { cwd: ws.dir, env });
  const history = async (job: string, ...extra: string[]): Promise<HistoryRun[]> => {
    const r = await cli('history', job, '--json', '--limit', '1000', ...extra);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as HistoryRun[];
  };
  const effects = (file: string): Effect[] => ws.lines(file).map((line) => {
    const [periodKey, nodeId, attempt, trigger] = line.split(' ');
    return { periodKey: periodKey!, nodeId: nodeId!, attempt: Number(attempt), trigger: trigger!, instant: instantOf(periodKey!) };
  });

  beforeAll(async () => {
    db = await createPostgresDb('cron_it_pause');
    ws = new Workspace('cron-pause-');
    ws.writeJob('tick.mjs', TICK_JOB);
    ws.writeJob('flaky.mjs', FLAKY_JOB);
    env = {
      SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_LOG_FORMAT: 'json',
      SIDE_EFFECTS: ws.path('tick.txt'), FLAKY_EFFECTS: ws.path('flaky.txt'), ARMED: ws.path('armed'),
    };
    for (const id of ['node-a', 'node-b']) daemons.push(new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: id } }));
    await Promise.all(daemons.map((d, i) => waitForLog(d, `daemon ${i} started`, 'scheduler started')));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop('SIGTERM', 20_000)));
    await db?.drop();
    ws?.cleanup();
  }, 60_000);

  it('pause of an unknown job: exit 2, one line naming it, the closest name and the known jobs', async () => {
    const r = await cli('pause', 'tik', '--reason', 'typo');
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual(["scheduler: unknown job 'tik' (did you mean 'tick'?); known jobs: flaky, tick"]);
    expect((await cli('list', '--json')).stdout).not.toContain('typo');
  });

  it('no body starts for a period after pause-return + 1 s, on either node; the periods are recorded skipped (paused); a retry owed meanwhile stays pending; resume runs both again', async () => {
    // Both nodes run the job before the pause.
    await waitFor('bodies on both nodes', () => new Set(effects('tick.txt').map((e) => e.nodeId)).size === 2, 60_000);

    // A retry owed at pause time: flaky's next period fails its attempt 1 (attempt 2 pending, 6 s later).
    writeFileSync(env.ARMED!, '');
    const owed = await waitFor('flaky attempt 2 pending', async () => (await history('flaky', '--status', 'pending'))[0], 60_000, 200);
    const paused = await cli('pause', 'flaky');
    expect(paused.code, paused.stderr).toBe(0);

    const pause = await cli('pause', 'tick', '--reason', 'ledger maintenance');
    const returnedAt = Date.now();
    expect(pause.code, pause.stderr).toBe(0);
    expect(pause.stdout.trim().split('\n')).toHaveLength(1);
    expect(pause.stdout).toContain("paused job 'tick' (reason: ledger maintenance)");
    expect(pause.stdout).toContain('every node honours it within one tick');
    const again = await cli('pause', 'tick', '--reason', 'ledger maintenance, part 2', '--json');
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ job: 'tick', action: 'pause', changed: false, paused: true, reason: 'ledger maintenance, part 2', declaredRecently: true });

    // Watch until several periods past the bound have rows and the owed retry is well past due.
    const bound = returnedAt + 1000;
    const runAt = new Date(owed.runAt!).getTime();
    // Only periods whose instant was 2 s past when history was read: a period claimed ahead of
    // its instant is inserted running and recorded skipped (paused) by the next statement, so the
    // newest row may be read between the two.
    const rows = await waitFor('tick periods recorded after the bound, flaky retry past due', async () => {
      const readAt = Date.now();
      const runs = (await history('tick')).filter((r) => new Date(r.scheduledAt).getTime() < readAt - 2000);
      const after = runs.filter((r) => new Date(r.scheduledAt).getTime() > bound + 3000);
      return after.length >= 2 && Date.now() > runAt + 3000 ? runs : false;
    }, 60_000, 250);

    // The bodies' own records: nothing scheduled past the bound started, on either node.
    const late = effects('tick.txt').filter((e) => e.instant > bound);
    expect(late, JSON.stringify(late)).toEqual([]);
    const past = rows.filter((r) => new Date(r.scheduledAt).getTime() > bound);
    expect(past.length).toBeGreaterThanOrEqual(3);
    for (const r of past) expect([r.periodKey, r.status, r.reason, r.attempt]).toEqual([r.periodKey, 'skipped', 'paused', 1]);
    // One row per period, every period of the paused time accounted for.
    const instants = [...new Set(past.map((r) => new Date(r.scheduledAt).getTime()))].sort((a, b) => a - b);
    expect(instants).toHaveLength(past.length);
    expect(instants.at(-1)! - instants[0]!).toBe((instants.length - 1) * 1000);

    // The claim winners said why, at info.
    expect(daemons.some((d) => d.logs().some((l) => l.msg === 'period skipped: the job is paused' && l.job === 'tick' && String(l.reason).startsWith('ledger maintenance')))).toBe(true);

    // The owed retry was not claimed while paused.
    const flaky = await history('flaky');
    expect(flaky.find((r) => r.id === owed.id)).toMatchObject({ status: 'pending', attempt: 2 });
    expect(effects('flaky.txt').filter((e) => e.attempt === 2)).toEqual([]);

    // list shows the pause (text and JSON).
    const listed = await cli('list', '--json');
    expect(listed.code, listed.stderr).toBe(0);
    const jobs = (JSON.parse(listed.stdout) as { jobs: Array<{ name: string; paused: { reason: string | null; since: string } | null }> }).jobs;
    expect(jobs.find((j) => j.name === 'tick')!.paused).toMatchObject({ reason: 'ledger maintenance, part 2' });
    expect(new Date(jobs.find((j) => j.name === 'tick')!.paused!.since).getTime()).toBeLessThanOrEqual(returnedAt);
    expect(jobs.find((j) => j.name === 'flaky')!.paused).toEqual({ reason: null, since: expect.any(String) });
    const text = await cli('list');
    expect(text.stdout).toMatch(/^tick .*paused \(ledger maintenance, part 2\)/m);

    // run-once of a paused job: refused (exit 3, one line), unless --force (a manual run, recorded).
    const refused = await cli('run-once', 'tick');
    expect(refused.code, refused.stderr).toBe(3);
    expect(refused.stdout.trim().split('\n')).toEqual([expect.stringContaining("job 'tick' is paused (ledger maintenance, part 2)")]);
    const forced = await cli('run-once', 'tick', '--force', '--json');
    expect(forced.code, forced.stderr).toBe(0);
    const manual = (JSON.parse(forced.stdout) as { runs: Array<{ runId: string; trigger: string; status: string }> }).runs;
    expect(manual).toMatchObject([{ trigger: 'manual', status: 'succeeded' }]);
    expect((await history('tick')).find((r) => r.id === manual[0]!.runId)).toMatchObject({ trigger: 'manual', status: 'succeeded' });
    expect(effects('tick.txt').filter((e) => e.trigger === 'manual')).toHaveLength(1);

    // Resume: bodies run again, and the owed retry runs.
    const resumedAt = Date.now();
    for (const job of ['tick', 'flaky']) {
      const r = await cli('resume', job);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`resumed job '${job}'`);
    }
    await waitFor('tick bodies after resume', () => effects('tick.txt').some((e) => e.trigger !== 'manual' && e.instant > resumedAt + 1000), 60_000);
    const retried = await waitFor('the owed retry run', async () => {
      const r = (await history('flaky')).find((x) => x.id === owed.id);
      return r && r.status !== 'pending' && r.status !== 'running' ? r : false;
    }, 60_000, 250);
    expect(retried).toMatchObject({ status: 'succeeded', attempt: 2 });
    expect(new Date(retried.startedAt!).getTime()).toBeGreaterThan(resumedAt - 50);
    expect(effects('flaky.txt').filter((e) => e.periodKey === owed.periodKey && e.attempt === 2)).toHaveLength(1);
    expect((JSON.parse((await cli('list', '--json')).stdout) as { jobs: Array<{ paused: unknown }> }).jobs.map((j) => j.paused)).toEqual([null, null]);
  }, 180_000);
});

describe('pause during a jittered wait: 1 daemon on SQLite', () => {
  const JITTER_MS = 9000;
  /** The body of the period waits this long after its instant: time to pause during the wait, past the bound. */
  const MIN_DELAY_MS = 4000;
  const MAX_DELAY_MS = 5000;
  let ws: Workspace;
  let daemon: Daemon | undefined;
  afterAll(async () => {
    await daemon?.stop('SIGTERM', 20_000);
    ws?.cleanup();
  }, 30_000);

  it('the period was claimed at its instant, the pause returned more than 1 s before its jittered start: no body, the row is skipped (paused)', async () => {
    ws = new Workspace('cron-pause-jitter-');
    // Once a minute, at a second 4 s from now (the daemon starts meanwhile); the delay is derived
    // from the period key, so a job name is chosen that gives that period a delay of 4-5 s.
    const first = new Date(Math.ceil((Date.now() + 4000) / 1000) * 1000);
    const expression = `${first.getUTCSeconds()} * * * * *`;
    const schedule = compileSchedule(expression, 'UTC');
    const delayOf = (name: string, at: Date) => jitterDelayMs(periodKey(name, at), JITTER_MS);
    const fits = (name: string, at: Date) => delayOf(name, at) >= MIN_DELAY_MS && delayOf(name, at) <= MAX_DELAY_MS;
    const name = Array.from({ length: 500 }, (_, i) => `jittered-${i}`).find((n) => fits(n, first))!;
    ws.writeJob(`${name}.mjs`, `import { appendFileSync } from 'node:fs';
export default {
  schedule: '${expression}', jitter: '${JITTER_MS}ms',
  run(ctx) { appendFileSync(process.env.SIDE_EFFECTS, ctx.periodKey + '\\n'); },
};
`);
    const env = {
      SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_NODE_ID: 'jitter-node', SCHEDULER_LOG_LEVEL: 'debug',
      SCHEDULER_LOG_FORMAT: 'json', SIDE_EFFECTS: ws.path('bodies.txt'),
    };
    daemon = new Daemon([], { cwd: ws.dir, env });
    await waitForLog(daemon, 'the daemon to schedule', 'scheduler started');
    // That period, or (a daemon slow to start) the next one that fits, a minute or more later.
    let period = first;
    while (period.getTime() < Date.now() + 300 || !fits(name, period)) period = nextPeriodAfter(schedule, period)!;
    const key = periodKey(name, period);
    const delayMs = delayOf(name, period);
    // Claimed (the row won) at its instant, before the pause.
    const won = (l: Record<string, unknown>) => l.msg === 'event claim' && (l.event as { periodKey: string }).periodKey === key && (l.event as { outcome: string }).outcome === 'won';
    await waitFor('the claim of the period', () => daemon!.logs().some(won), 150_000, 25);
    const pause = await runCli(['pause', name, '--reason', 'during the jitter'], { cwd: ws.dir, env });
    const returnedAt = Date.now();
    expect(pause.code, pause.stderr).toBe(0);
    // The body's start is past the bound (pause returned + 1 s): it must not start.
    expect(returnedAt + 1000, `pause returned too late to test (the body starts ${delayMs} ms after the instant)`).toBeLessThan(period.getTime() + delayMs);

    const row = await waitFor('the period recorded', async () => {
      const r = await runCli(['history', name, '--json', '--limit', '100'], { cwd: ws.dir, env });
      const found = (JSON.parse(r.stdout) as HistoryRun[]).find((x) => x.periodKey === key);
      return found && found.status !== 'running' ? found : false;
    }, 30_000, 250);
    expect([row.status, row.reason, row.attempt, row.trigger]).toEqual(['skipped', 'paused', 1, 'schedule']);
    // Past the jittered start, no body of that period ran.
    await waitFor('the jittered start to pass', () => Date.now() > period.getTime() + delayMs + 500, 15_000, 50);
    expect(ws.lines('bodies.txt')).not.toContain(key);
    expect(daemon.logs().find((l) => l.msg === 'period skipped: the job was paused while it waited for its jittered start')).toMatchObject({ job: name, periodKey: key, reason: 'during the jitter' });
    expect(daemon.logs().some((l) => l.msg === 'event run-started' && (l.event as { periodKey: string }).periodKey === key)).toBe(false);
  }, 240_000);
});

describe('pause of a job no live node declares', () => {
  let ws: Workspace;
  afterAll(() => ws?.cleanup());

  it('is accepted, with a note: never declared (not deployed yet), or not since a date long ago', async () => {
    ws = new Workspace('cron-pause-note-');
    ws.writeJob('fresh.mjs', `export default { schedule: '0 * * * *', run() {} };`);
    const env = { SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: ws.jobsDir };
    const cli = (...args: string[]) => runCli(args, { cwd: ws.dir, env });

    // In this node's folder, never run anywhere: a pause before the deploy.
    const fresh = await cli('pause', 'fresh');
    expect(fresh.code, fresh.stderr).toBe(0);
    expect(fresh.stdout.trim().split('\n')).toEqual([
      "paused job 'fresh': every node honours it within one tick (1 s); its periods are recorded skipped (paused) until 'resume fresh'",
      "note: no node has declared 'fresh' yet; the pause is kept and applies to the nodes that define it when they run",
    ]);

    // A name left in the jobs table by a node that last declared it 120 days ago.
    const db = await Database.open({ kind: 'sqlite', path: ws.path('scheduler.db'), url: ws.sqliteStore() });
    let lastSeen: number;
    try {
      await new KnexJobStore(db).declare([{ name: 'old-report', reconciledThrough: null }]);
      lastSeen = (await db.now()) - 120 * 86_400_000;
      await db.knex(JOBS_TABLE).where({ name: 'old-report' }).update({ seen_at: lastSeen });
    } finally {
      await db.close();
    }
    const day = new Date(lastSeen).toISOString().slice(0, 10);
    const old = await cli('pause', 'old-report', '--reason', 'incident 42');
    expect(old.code, old.stderr).toBe(0);
    const lines = old.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe("paused job 'old-report' (reason: incident 42): every node honours it within one tick (1 s); its periods are recorded skipped (paused) until 'resume old-report'");
    expect(lines[1]).toMatch(new RegExp(`^note: no live node has declared 'old-report' since ${day} \\d\\d:\\d\\d UTC \\(120d ago\\); the pause is kept and applies to the nodes that define it when they run$`));

    const json = await cli('pause', 'old-report', '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({ job: 'old-report', changed: false, paused: true, declaredAt: new Date(lastSeen).toISOString(), declaredRecently: false });
    const resumed = await cli('resume', 'old-report');
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout.trim().split('\n')[1]).toMatch(/^note: no live node has declared 'old-report' since .* \(120d ago\); nothing runs it until a node that defines it runs$/);
  }, 60_000);
});
