/**
 * One racer per period (rendezvous ranking over the live nodes), against real daemons: three nodes
 * on MariaDB and three Redis masters of the test's own, six every-second jobs. While all are up,
 * every period runs once and every node runs its share. Once a node is killed (kill -9, still
 * "alive" in the nodes table for the liveness window), its periods are claimed by their second-ranked
 * node shortly after their instant, as scheduled periods (trigger 'schedule', not the sweep's
 * catch-up): none is missed and none runs twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { trivialJobSource } from '../harness/job-sources.mjs';
import { Cluster, duplicateStarts, type Effect } from './harness.js';

const NODES = ['r1', 'r2', 'r3'];
const JOBS = ['j1', 'j2', 'j3', 'j4', 'j5', 'j6'];
/** Each judged phase: 5 s of six every-second jobs, 30 periods (after the kill, about 10 of them r2's to step in for). */
const PHASE_MS = 5000;

let redis: RedisServer[];
let db: TestDatabase;
const ws = new Workspace('cron-racers-');
let cluster: Cluster;

beforeAll(async () => {
  [redis, db] = await Promise.all([startRedisServers(3), createMariaDb('cron_racers')]);
});

afterAll(async () => {
  await cluster?.killAll();
  await Promise.all(redis.map((r) => r.cleanup()));
  await db?.drop();
  ws.cleanup();
});

/** The starts of the periods in [fromMs, toMs), by period key. */
function startsIn(effects: Effect[], fromMs: number, toMs: number): Map<string, Effect[]> {
  const out = new Map<string, Effect[]>();
  for (const e of effects) {
    if (e.ev !== 'start' || e.sched === undefined || e.sched < fromMs || e.sched >= toMs) continue;
    out.set(e.key, [...(out.get(e.key) ?? []), e]);
  }
  return out;
}

/** Every (job, second) of [fromMs, toMs) that did not start exactly once. */
function notOnce(starts: Map<string, Effect[]>, fromMs: number, toMs: number): string[] {
  const bad: string[] = [];
  for (let t = Math.ceil(fromMs / 1000) * 1000; t < toMs; t += 1000) {
    for (const job of JOBS) {
      const key = `${job}@${new Date(t).toISOString()}`;
      const n = starts.get(key)?.length ?? 0;
      if (n !== 1) bad.push(`${key}: ${n}`);
    }
  }
  return bad;
}

describe('one racer per period', () => {
  it('three nodes share every-second periods once each; a killed node\'s periods are claimed by their second-ranked node as scheduled periods, none missed, none twice', async () => {
    for (const job of JOBS) ws.writeJob(`${job}.mjs`, trivialJobSource({ schedule: '* * * * * *', extra: { catchUp: '1m' } }));
    cluster = new Cluster(ws, {
      SCHEDULER_STORE: db.url,
      SCHEDULER_REDIS: redis.map((r) => r.url).join(','),
      SCHEDULER_REDIS_PREFIX: `racers-${Date.now()}:`,
    });
    for (const n of NODES) cluster.start(n);
    await Promise.all(NODES.map((n) => cluster.started(n)));
    // Every node has read the others (membership is read every 5 s): from then on each period has one racer.
    const settled = Date.now() + 6000;
    await waitFor('a phase of periods with all three nodes', () => cluster.effects().some((e) => e.ev === 'start' && (e.sched ?? 0) >= settled + PHASE_MS), 60_000, 200);

    const phase1 = startsIn(cluster.effects(), settled, settled + PHASE_MS);
    expect(notOnce(phase1, settled, settled + PHASE_MS), 'periods of phase 1 not started exactly once').toEqual([]);
    const share = new Map<string, number>();
    for (const [, [e]] of phase1) share.set(e!.node, (share.get(e!.node) ?? 0) + 1);
    expect([...share.keys()].sort(), `shares ${JSON.stringify(Object.fromEntries(share))}`).toEqual(NODES);

    // kill -9 of r2: the others still count it alive for up to 15 s (its heartbeat is fresh).
    const killedAt = await cluster.kill('r2');
    const from = Math.ceil((killedAt + 1000) / 1000) * 1000;
    await waitFor('a phase of periods after the kill', () => cluster.effects().some((e) => e.ev === 'start' && (e.sched ?? 0) >= from + PHASE_MS + 1000), 60_000, 200);
    const phase2 = startsIn(cluster.effects(), from, from + PHASE_MS);
    expect(notOnce(phase2, from, from + PHASE_MS), 'periods after the kill not started exactly once').toEqual([]);
    const starts = [...phase2.values()].flat();
    expect(starts.every((e) => e.node !== 'r2')).toBe(true);
    // Claimed at the step-in as scheduled periods, not left to the reconciling sweep (which runs them as catch-up).
    expect(starts.filter((e) => e.trigger !== 'schedule').map((e) => `${e.key} ${e.trigger} on ${e.node}`)).toEqual([]);
    // The survivors' logs say they stepped in.
    expect(cluster.logs().some((l) => String(l.msg).startsWith('periods with no row after their instant'))).toBe(true);
    expect(duplicateStarts(cluster.effects())).toEqual([]);
    expect(await cluster.stopOthers(['r2'])).toEqual([0, 0]);
  });
});
