/**
 * `scheduler cancel` through the real `bin/scheduler` (issue 22, item 3): two daemons on one MariaDB
 * database; a running attempt is stopped wherever it runs, from a third process, and recorded
 * `cancelled` once, with who asked and why, neither owed again nor retried. An inline body that
 * listens to its signal, a worker-isolated body that ignores it (terminated), a command that traps
 * SIGTERM (killed after killAfter), and both shards of a sharded job. Counted from the bodies' own
 * records; the audit trail has each cancel.
 */
import { userInfo, hostname } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { Daemon, runCli } from '../helpers/cli.js';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace, type HistoryRun } from '../helpers/workspace.js';

const dbs: TestDatabase[] = [];
const daemons: Daemon[] = [];
const workspaces: Workspace[] = [];

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop('SIGTERM')));
  for (const db of dbs) await db.drop();
  for (const w of workspaces) w.cleanup();
});

/** Every 5 s; records start, then runs until its signal aborts (or for 60 s), and records how it ended. */
const LISTENER = (fields: string) => `
import { appendFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
export default {
  schedule: '*/5 * * * * *', retries: 2, retryDelay: '1s', ${fields}
  async run(ctx) {
    rec({ ev: 'start', job: ctx.job, key: ctx.periodKey, shard: ctx.shard.index, attempt: ctx.attempt, node: ctx.nodeId });
    await new Promise((resolve) => { const t = setTimeout(resolve, 60_000); ctx.signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }); });
    rec({ ev: 'end', job: ctx.job, key: ctx.periodKey, shard: ctx.shard.index, reason: ctx.signal.aborted ? String(ctx.signal.reason) : null });
    if (ctx.signal.aborted) throw new Error('stopped');
  },
};
`;

/** A worker body that never looks at its signal. */
const DEAF = `
import { appendFileSync } from 'node:fs';
export default {
  schedule: '*/5 * * * * *', isolation: 'worker', retries: 2,
  async run(ctx) {
    appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ev: 'start', job: ctx.job, key: ctx.periodKey, shard: 0, attempt: ctx.attempt, node: ctx.nodeId }) + '\\n');
    await new Promise((r) => setTimeout(r, 60_000));
  },
};
`;

/** A command that ignores SIGTERM: killed after killAfter. */
const STUBBORN = JSON.stringify({
  schedule: '*/5 * * * * *', killAfter: '2s', retries: 2,
  command: `echo "{\\"ev\\":\\"start\\",\\"job\\":\\"stubborn\\",\\"key\\":\\"$SCHEDULER_PERIOD_KEY\\",\\"shard\\":0,\\"attempt\\":$SCHEDULER_ATTEMPT}" >> "$SIDE_EFFECTS"; trap 'echo got-term' TERM; while true; do sleep 0.2; done`,
});

interface Effect { ev: string; job: string; key: string; shard: number; attempt?: number; reason?: string | null }

describe('scheduler cancel', () => {
  it('stops a running attempt wherever it runs (inline, worker, command, every shard): recorded cancelled once with who and why, not owed, not retried', async () => {
    const db = await createMariaDb('cron_cancel');
    dbs.push(db);
    const ws = new Workspace('cron-cancel-');
    workspaces.push(ws);
    ws.writeJob('listener.mjs', LISTENER(''));
    ws.writeJob('sharded.mjs', LISTENER('shards: 2,'));
    ws.writeJob('deaf.mjs', DEAF);
    ws.writeJob('stubborn.json', STUBBORN);
    // A short grace period: the bodies still running at the end stop at once.
    const env = { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_GRACE_PERIOD: '1s', SIDE_EFFECTS: ws.path('effects.txt') };
    for (const node of ['node-a', 'node-b']) daemons.push(new Daemon([], { cwd: ws.dir, env: { ...env, SCHEDULER_NODE_ID: node, SCHEDULER_HTTP: 'off' } }));
    await Promise.all(daemons.map((d) => d.waitStarted()));
    const cli = (args: string[]) => runCli(args, { cwd: ws.dir, env: { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: ws.jobsDir } });
    const history = async (job: string): Promise<HistoryRun[]> => JSON.parse((await cli(['history', job, '--json', '--limit', '500'])).stdout) as HistoryRun[];
    const effects = () => ws.lines('effects.txt').map((l) => JSON.parse(l) as Effect);
    const actor = `${userInfo().username}@${hostname()}`;

    for (const [job, shards] of [['listener', 1], ['deaf', 1], ['stubborn', 1], ['sharded', 2]] as const) {
      // Running in the store and started in the body: a row is `running` from its claim on, but a
      // worker-isolated body starts only once its thread has loaded the job file, which takes a
      // while on a loaded machine. A cancel in between rightly stops an attempt whose body never began.
      await waitFor(`${job}: every shard of a period running, its bodies started`, async () => {
        const running = (await history(job)).filter((r) => r.status === 'running');
        const byPeriod = new Map<string, number>();
        for (const r of running) byPeriod.set(r.scheduledAt, (byPeriod.get(r.scheduledAt) ?? 0) + 1);
        const started = effects().filter((e) => e.ev === 'start');
        return [...byPeriod].some(([at, n]) => n === shards
          && started.filter((e) => e.key === `${job}@${new Date(at).toISOString()}`).length === shards);
      }, 60_000, 250);
      const asked = Date.now();
      const r = await cli(['cancel', job, '--reason', `stop ${job}`, '--json']);
      expect(r.code, `${job}: ${r.stderr}`).toBe(0);
      const report = JSON.parse(r.stdout) as { period: string; cancelled: Array<{ runId: string; shard: number; status: string | null; error: string | null }> };
      console.log(`[cancel] ${job}: ended ${Date.now() - asked} ms after the request`);
      expect(report.cancelled.map((c) => c.shard).sort()).toEqual(Array.from({ length: shards }, (_, i) => i));
      for (const c of report.cancelled) {
        expect(c.status, job).toBe('cancelled');
        expect(c.error, job).toContain(`cancelled by ${actor}: stop ${job}`);
      }
      // Once: the period has one row per shard, cancelled, and no attempt 2 owed (an owed attempt is
      // inserted with the outcome, in its transaction) or run (it would be due 1 s after: retryDelay).
      await new Promise((res) => setTimeout(res, 1500));
      const rows = (await history(job)).filter((x) => x.scheduledAt === report.period);
      expect(rows.map((x) => [x.shard, x.attempt, x.status]).sort(), job).toEqual(Array.from({ length: shards }, (_, i) => [i, 1, 'cancelled']));
      const key = `${job}@${report.period}`;
      const starts = effects().filter((e) => e.ev === 'start' && e.key === key);
      expect(starts.map((e) => [e.shard, e.attempt]).sort(), `${job}: bodies started for the cancelled period`).toEqual(Array.from({ length: shards }, (_, i) => [i, 1]));
      if (job === 'listener' || job === 'sharded') {
        expect(effects().filter((e) => e.ev === 'end' && e.key === key).map((e) => e.reason), job).toEqual(Array.from({ length: shards }, () => 'cancelled'));
      }
    }

    // Nothing running: exit 3, one line. (Pause first so that no period starts meanwhile.)
    expect((await cli(['pause', 'listener'])).code).toBe(0);
    await waitFor('no listener attempt running', async () => {
      if (!(await history('listener')).some((x) => x.status === 'running')) return true;
      await cli(['cancel', 'listener']);
      return false;
    }, 90_000, 500);
    const none = await cli(['cancel', 'listener', '--period', '2026-01-01T00:00:00Z']);
    expect(none.code).toBe(3);
    expect(none.stderr.trim()).toBe("scheduler: nothing to cancel: no attempt of 'listener' for the period 2026-01-01T00:00:00.000Z is running");

    // The audit trail has each cancel, done, and the refusal.
    const audit = JSON.parse((await cli(['audit', '--json', '--limit', '100'])).stdout) as { entries: Array<{ action: string; job: string; result: string; reason: string | null; actor: string }> };
    const cancels = audit.entries.filter((e) => e.action === 'cancel');
    for (const job of ['listener', 'deaf', 'stubborn', 'sharded']) {
      expect(cancels.some((e) => e.job === job && e.result === 'done' && e.reason === `stop ${job}` && e.actor === actor), job).toBe(true);
    }
    expect(cancels.some((e) => e.job === 'listener' && e.result === 'refused')).toBe(true);
  });
});
