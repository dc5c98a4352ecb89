/**
 * A node's timing as a user reads it from `history`: a run's duration is its body's own (the 100 ms
 * claim-ahead and any wait for the store are not in it, the claim instant is its own field), and a
 * period that the tick path finds later than its `catchUp` (the process was paused past it) is
 * recorded missed instead of being run late. Also: `run-once` with every Redis master down runs
 * through the row alone. Real `bin/scheduler` processes on SQLite.
 */
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { jobSource, type Effect } from '../helpers/job-sources.js';
import { freePorts, waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';
import type { Workspace } from '../helpers/workspace.js';
import { waitForLog } from './cluster-scenario.js';

const { workspace, envOf, start, history } = singleNode('cron-timing-', 'timing-node');

const starts = (ws: Workspace) => ws.records<Effect>('effects.jsonl').filter((e) => e.event === 'start');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('node timing', () => {
  it("history: durationMs is the body's own (300 ms body), claimedAt is the claim ahead of the instant, startedAt the body's start", async () => {
    const ws = workspace();
    ws.writeJob('timed.mjs', jobSource(`schedule: '* * * * * *',`, 'await sleep(ctx, 300);'));
    const d = start(ws);
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    await waitFor('three periods to run', () => starts(ws).length >= 3, 30_000);
    expect(await d.stop('SIGTERM')).toBe(0);
    const runs = (await history(ws)).filter((r) => r.status === 'succeeded' && r.trigger === 'schedule');
    expect(runs.length).toBeGreaterThanOrEqual(3);
    for (const r of runs) {
      const run = r;
      const instant = Date.parse(run.scheduledAt);
      const claimed = Date.parse(run.claimedAt!);
      const started = Date.parse(run.startedAt!);
      const finished = Date.parse(run.finishedAt!);
      expect(run.durationMs!, `duration of ${run.periodKey}`).toBeGreaterThanOrEqual(300);
      expect(run.durationMs!, `duration of ${run.periodKey}: the body's, not the claim's`).toBeLessThan(390);
      expect(claimed, 'claimed ahead of the instant').toBeLessThanOrEqual(instant);
      expect(started - instant, 'the body starts at the instant').toBeGreaterThanOrEqual(-5);
      expect(started - claimed, 'claim, then body').toBeGreaterThanOrEqual(0);
      expect(Math.abs(finished - started - run.durationMs!)).toBeLessThanOrEqual(2);
    }
  });

  it('a period found later than its catchUp on the tick path (the process paused past it) is recorded missed, not run late', async () => {
    const ws = workspace();
    ws.writeJob('fifth.mjs', jobSource(`schedule: '*/5 * * * * *', catchUp: '2s',`));
    const d = start(ws);
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    // The next period at least 2.5 s away; pause the node 1 s before it (after the claim timer is
    // armed) and wake it 4 s after it: its timer then fires 4 s late, past the 2 s catchUp (and 1 s
    // before the next period, which must run on time).
    let instant = Math.ceil(Date.now() / 5000) * 5000;
    if (instant - Date.now() < 2500) instant += 5000;
    await sleep(instant - 1000 - Date.now());
    d.proc.kill('SIGSTOP');
    await sleep(instant + 4000 - Date.now());
    d.proc.kill('SIGCONT');
    const key = `fifth@${new Date(instant).toISOString()}`;
    const row = await waitFor(`a row for ${key}`, async () => (await history(ws)).find((r) => r.periodKey === key), 20_000, 300);
    expect([row.status, row.reason]).toEqual(['skipped', 'missed']);
    expect(starts(ws).filter((e) => e.periodKey === key), 'the body did not run').toEqual([]);
    // The next period runs on time.
    await waitFor('the next period to run', () => starts(ws).some((e) => Date.parse(e.scheduledAt) === instant + 5000), 20_000);
    expect(await d.stop('SIGTERM')).toBe(0);
  });

  it('run-once with every Redis master down: runs through the run row alone, warns once, exit 0', async () => {
    const ws = workspace();
    ws.writeJob('hand.mjs', jobSource(`schedule: '0 0 1 1 *',`));
    const ports = await freePorts(3);
    const r = await runCli(['run-once', 'hand'], { cwd: ws.dir, env: envOf(ws, { SCHEDULER_REDIS: ports.map((p) => `redis://127.0.0.1:${p}`).join(',') }), timeoutMs: 30_000 });
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect((r.stdout + r.stderr).split('\n').filter((l) => l.includes('Redis quorum unreachable: claims go on through the run row alone'))).toHaveLength(1);
    expect(starts(ws).map((e) => e.job)).toEqual(['hand']);
    expect((await history(ws)).map((h) => [h.job, h.status, h.trigger])).toEqual([['hand', 'succeeded', 'manual']]);
  });
});
