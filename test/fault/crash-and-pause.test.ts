/**
 * Faults of a node: kill -9 in the middle of a run (takeover), SIGSTOP past the lease then SIGCONT
 * (the paused attempt must see its signal aborted and record nothing as succeeded), SIGTERM during a
 * run. Real daemons, MariaDB, three Redis masters started here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster, attemptJob, duplicateStarts, faultJob, overlappingAttempts, type Effect } from './harness.js';

let redis: RedisServer[];
const dbs: TestDatabase[] = [];
const workspaces: Workspace[] = [];
const clusters: Cluster[] = [];

beforeAll(async () => {
  redis = await startRedisServers(3);
});

afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stopAll()));
  await Promise.all(redis.map((r) => r.cleanup()));
  for (const db of dbs) await db.drop();
  for (const w of workspaces) w.cleanup();
});

/** A database of the case's own (the cases run side by side and judge every row of the store), a workspace, a cluster. */
async function setup(prefix: string, job: string, source: string): Promise<{ ws: Workspace; cluster: Cluster }> {
  const db = await createMariaDb('cron_fault');
  dbs.push(db);
  const ws = new Workspace(`cron-fault-${prefix}-`);
  workspaces.push(ws);
  ws.writeJob(job, source);
  const cluster = new Cluster(ws, {
    SCHEDULER_STORE: db.url,
    SCHEDULER_REDIS: redis.map((r) => r.url).join(','),
    SCHEDULER_REDIS_PREFIX: `fault-${prefix}-${Date.now()}:`,
  });
  clusters.push(cluster);
  return { ws, cluster };
}

const startOf = (effects: Effect[], pred: (e: Effect) => boolean) => effects.find((e) => e.ev === 'start' && pred(e));

// Two cases at a time (it.concurrent): each has its own database, workspace and Redis key prefix
// (the masters are shared and never faulted here), and its nodes are idle but for leases and one
// body. The two cluster cases first, then the two single-node ones: seven daemons starting at once
// took longer to come up than the pairs take in all.
describe('fault: a node dies or stalls mid-run', () => {
  describe('a node of a cluster killed or paused', () => {
    it.concurrent('kill -9 of the node running a period: another node declares the attempt abandoned and runs attempt 2; nothing ran twice', async () => {
      // Attempt 1 (killed at its start) would run 4 s; attempt 2, the takeover, 1 s.
      const { cluster } = await setup('kill', 'crashy.mjs', attemptJob({ schedule: '*/10 * * * * *', durationsMs: [4000, 1000], extra: { lockTtl: '2s', catchUp: '1m' } }));
      for (const n of ['k1', 'k2', 'k3']) cluster.start(n);
      await Promise.all(['k1', 'k2', 'k3'].map((n) => cluster.started(n)));

      const first = await waitFor('a run to start', () => startOf(cluster.effects(), (e) => e.attempt === 1), 30_000);
      const victim = cluster.nodes.get(first.node)!;
      victim.proc.kill('SIGKILL');
      await victim.exited;
      const killedAt = Date.now();

      const takeover = await waitFor('attempt 2 of the same period', () => startOf(cluster.effects(), (e) => e.key === first.key && e.attempt === 2), 20_000);
      console.log(`takeover after kill -9: ${takeover.t - killedAt} ms (lockTtl 2000 ms)`);
      expect(takeover.node).not.toBe(first.node);
      await waitFor('attempt 2 to end', () => cluster.effects().some((e) => e.key === first.key && e.attempt === 2 && e.ev === 'end'), 20_000);

      const codes = await Promise.all([...cluster.nodes].filter(([id]) => id !== first.node).map(([, d]) => d.stop()));
      expect(codes).toEqual([0, 0]);
      const effects = cluster.effects();
      expect(duplicateStarts(effects)).toEqual([]);
      expect(overlappingAttempts(effects, new Map([[first.node, killedAt]]))).toEqual([]);

      const runs = (await cluster.history()).filter((r) => r.periodKey === first.key);
      expect(runs.map((r) => [r.attempt, r.status, r.nodeId]).sort()).toEqual([
        [1, 'abandoned', first.node],
        [2, 'succeeded', takeover.node],
      ]);
      expect((await cluster.history()).filter((r) => r.status === 'running')).toEqual([]);
    });

    it.concurrent('SIGSTOP past the lease, then SIGCONT: the paused attempt sees ctx.signal abort (lease-lost) within 1 s of waking and is not recorded succeeded', async () => {
      // Attempt 1 runs 12 s (it is paused, then wakes past its lease); attempt 2, the takeover, 3 s: still
      // running when attempt 1 wakes (within 1 s of attempt 2's start), and not 12 s to wait for.
      const { cluster } = await setup('pause', 'stalls.mjs', attemptJob({ schedule: '*/10 * * * * *', durationsMs: [12_000, 3000], extra: { lockTtl: '2s', catchUp: '1m' } }));
      for (const n of ['p1', 'p2']) cluster.start(n);
      await Promise.all(['p1', 'p2'].map((n) => cluster.started(n)));

      const first = await waitFor('a run to start', () => startOf(cluster.effects(), (e) => e.attempt === 1), 30_000);
      const paused = cluster.nodes.get(first.node)!;
      paused.proc.kill('SIGSTOP');
      const takeover = await waitFor('attempt 2 while the node is paused', () => startOf(cluster.effects(), (e) => e.key === first.key && e.attempt === 2), 20_000);
      expect(takeover.node).not.toBe(first.node);
      paused.proc.kill('SIGCONT');
      const resumedAt = Date.now();

      const abort = await waitFor('the paused attempt to abort', () => cluster.effects().find((e) => e.key === first.key && e.attempt === 1 && e.ev === 'abort'), 10_000);
      console.log(`paused attempt aborted ${abort.t - resumedAt} ms after SIGCONT`);
      expect(abort.reason).toBe('lease-lost');
      expect(abort.t - resumedAt).toBeLessThanOrEqual(1000);
      await waitFor('attempt 2 to end', () => cluster.effects().some((e) => e.key === first.key && e.attempt === 2 && e.ev === 'end'), 30_000);

      expect(await cluster.stopAll()).toEqual([0, 0]);
      const effects = cluster.effects();
      expect(duplicateStarts(effects)).toEqual([]);
      expect(overlappingAttempts(effects, new Map(), new Set([`${first.key}#1`]))).toEqual([]);
      const runs = await cluster.history();
      const attempts = runs.filter((r) => r.periodKey === first.key).map((r) => [r.attempt, r.status]).sort();
      expect(attempts).toEqual([[1, 'abandoned'], [2, 'succeeded']]);
      expect(runs.filter((r) => r.status === 'running')).toEqual([]);
    });
  });

  describe('a single node stopped with SIGTERM', () => {
    it.concurrent('SIGTERM during a run: the run finishes within the grace period, is recorded succeeded, exit 0', async () => {
      const { cluster } = await setup('term', 'graceful.mjs', faultJob({ schedule: '*/5 * * * * *', durationMs: 2500, extra: { lockTtl: '3s' } }));
      cluster.start('t1', { SCHEDULER_GRACE_PERIOD: '20s' });
      await cluster.started('t1');
      const first = await waitFor('a run to start', () => startOf(cluster.effects(), () => true), 30_000);
      expect(await cluster.nodes.get('t1')!.stop('SIGTERM')).toBe(0);
      const effects = cluster.effects().filter((e) => e.key === first.key);
      expect(effects.map((e) => e.ev)).toEqual(['start', 'end']);
      const runs = (await cluster.history()).filter((r) => r.periodKey === first.key);
      expect(runs.map((r) => r.status)).toEqual(['succeeded']);
    });

    it.concurrent('SIGTERM with a short grace period: ctx.signal aborts with reason shutdown, the run is recorded interrupted, exit 0', async () => {
      const { cluster } = await setup('grace', 'longjob.mjs', faultJob({ schedule: '*/5 * * * * *', durationMs: 30_000, extra: { lockTtl: '3s' } }));
      cluster.start('g1', { SCHEDULER_GRACE_PERIOD: '1s' });
      await cluster.started('g1');
      const first = await waitFor('a run to start', () => startOf(cluster.effects(), () => true), 30_000);
      const t0 = Date.now();
      expect(await cluster.nodes.get('g1')!.stop('SIGTERM')).toBe(0);
      expect(Date.now() - t0).toBeLessThan(15_000);
      const abort = cluster.effects().find((e) => e.key === first.key && e.ev === 'abort');
      expect(abort?.reason).toBe('shutdown');
      const runs = (await cluster.history()).filter((r) => r.periodKey === first.key);
      // Interrupted, and owed again at once (attempt 2 pending) for any node to resume: none is left here.
      expect(runs.map((r) => [r.attempt, r.status]).sort()).toEqual([[1, 'interrupted'], [2, 'pending']]);
    });
  });
});
