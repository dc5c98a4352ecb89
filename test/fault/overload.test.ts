/**
 * Overload: a node whose store answers late (every reply 1.8 s late, through a proxy; the other
 * node's store is direct). Its claims then wait past a second: it must say it is behind, leave its
 * ticks to the other node and the sweep (every period still runs once), never report its pool
 * waits as an unreachable store, and race its periods on time again once the store is quick.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster, StoreProxy, duplicateStarts, secondsBetween } from './harness.js';
import { trivialJobSource } from '../harness/job-sources.mjs';

let redis: RedisServer[];
let db: TestDatabase;
let proxy: StoreProxy;
let ws: Workspace;
let cluster: Cluster;

const JOBS = ['o-1', 'o-2', 'o-3', 'o-4', 'o-5', 'o-6'];
const REPLY_DELAY_MS = 1800;

beforeAll(async () => {
  [redis, db] = await Promise.all([startRedisServers(3), createMariaDb('cron_overload')]);
  proxy = new StoreProxy(Number(new URL(db.url).port || 3306));
  await proxy.start();
});

afterAll(async () => {
  await cluster?.stopAll();
  await proxy?.close();
  await Promise.all((redis ?? []).map((r) => r.cleanup()));
  await db?.drop();
  ws?.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('fault: overload', () => {
  it('a node whose store answers 1.8 s late defers its ticks (the other node steps in), says so, never reports the store unreachable, and catches up', async () => {
    ws = new Workspace('cron-fault-overload-');
    cluster = new Cluster(ws, {
      SCHEDULER_STORE: db.url,
      SCHEDULER_REDIS: redis.map((r) => r.url).join(','),
      SCHEDULER_REDIS_PREFIX: `fault-overload-${Date.now()}:`,
    });
    // overlap 'allow' and no coalescing: every second of every job must run, however late.
    for (const name of JOBS) ws.writeJob(`${name}.mjs`, trivialJobSource({ schedule: '* * * * * *', extra: { name, overlap: 'allow', coalesce: false, catchUp: '1m' } }));
    cluster.start('slow', { SCHEDULER_STORE: proxy.urlFor(db.url) });
    cluster.start('quick');
    await Promise.all(['slow', 'quick'].map((n) => cluster.started(n)));
    const logsOf = (node: string) => cluster.logs().filter((l) => l._node === node);
    // Both nodes race their share first.
    await waitFor('both nodes to run periods', () => new Set(cluster.effects().filter((e) => e.ev === 'start').map((e) => e.node)).size === 2, 20_000);
    const t0 = Date.now() + 1000;

    proxy.slow(REPLY_DELAY_MS);
    const slowAt = Date.now();
    await waitFor('the slow node to say it is behind', () => logsOf('slow').some((l) => String(l.msg).startsWith('node behind')), 20_000);
    await sleep(Math.max(0, slowAt + 8000 - Date.now()));
    proxy.slow(0);
    const quickAt = Date.now();
    await waitFor('the slow node to catch up', () => logsOf('slow').some((l) => String(l.msg).startsWith('node caught up')), 30_000);
    // On time again: bodies it starts at their instant, by the tick, as before.
    await waitFor('the slow node to start a period on time again', () => cluster.effects().some((e) => e.ev === 'start' && e.node === 'slow'
      && e.trigger === 'schedule' && e.sched! > quickAt + 2000 && e.t - e.sched! < 500), 30_000);
    const t1 = Date.now() - 4000;
    await sleep(1000);
    expect(await cluster.stopAll()).toEqual([0, 0]);

    // Every second of every job ran once, from the bodies' own records.
    const effects = cluster.effects();
    expect(duplicateStarts(effects)).toEqual([]);
    const started = new Set(effects.filter((e) => e.ev === 'start').map((e) => e.key));
    const seconds = secondsBetween(t0, t1);
    expect(JOBS.flatMap((job) => seconds.map((iso) => `${job}@${iso}`)).filter((k) => !started.has(k))).toEqual([]);
    // The quick node claimed what the slow one left (its step-in), and nobody called a late store unreachable.
    expect(logsOf('quick').some((l) => String(l.msg).startsWith('periods with no row after their instant'))).toBe(true);
    const unreachable = cluster.logs().filter((l) => /cannot be reached/.test(JSON.stringify(l)));
    expect(unreachable.map((l) => `${l._node}: ${String(l.msg)} ${JSON.stringify(l.err ?? '')}`.slice(0, 300))).toEqual([]);
    // Nothing left running, nothing failed.
    const runs = await cluster.history();
    expect(runs.filter((r) => r.status !== 'succeeded').map((r) => `${r.periodKey} ${r.status} ${r.reason ?? ''}`)).toEqual([]);
  });
});
