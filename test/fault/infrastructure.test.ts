/**
 * Faults of the infrastructure: Redis masters lost (two of three, then all) and back; the store cut
 * off and back; node clocks skewed by +-1.5 s (libfaketime). Every-second jobs on three real daemons;
 * the assertions come from the bodies' own side effects.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster, StoreProxy, duplicateStarts, faultJob, overlappingAttempts, secondsBetween, type Effect } from './harness.js';

let redis: RedisServer[];
const dbs: TestDatabase[] = [];
const ownMasters: RedisServer[] = [];
const workspaces: Workspace[] = [];
const clusters: Cluster[] = [];
const proxies: StoreProxy[] = [];

beforeAll(async () => {
  redis = await startRedisServers(3);
});

afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stopAll()));
  for (const p of proxies) await p.close();
  await Promise.all([...redis, ...ownMasters].map((r) => r.cleanup()));
  for (const db of dbs) await db.drop();
  for (const w of workspaces) w.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A database of the case's own (two cases run side by side, and each judges every row of its store). */
async function database(): Promise<TestDatabase> {
  const db = await createMariaDb('cron_fault');
  dbs.push(db);
  return db;
}

function setup(prefix: string, store: string, masters = redis): { ws: Workspace; cluster: Cluster } {
  const ws = new Workspace(`cron-fault-${prefix}-`);
  workspaces.push(ws);
  const cluster = new Cluster(ws, {
    SCHEDULER_STORE: store,
    SCHEDULER_REDIS: masters.map((r) => r.url).join(','),
    SCHEDULER_REDIS_PREFIX: `fault-${prefix}-${Date.now()}:`,
  });
  clusters.push(cluster);
  return { ws, cluster };
}

/** Period keys of job `name` that must each have exactly one attempt-1 start, between two instants. */
function expectEverySecondOnce(cluster: Cluster, job: string, fromMs: number, toMs: number): void {
  const effects = cluster.effects().filter((e) => e.key.startsWith(`${job}@`));
  expect(duplicateStarts(effects)).toEqual([]);
  const started = new Set(effects.filter((e) => e.ev === 'start').map((e) => e.key));
  const missing = secondsBetween(fromMs, toMs).map((iso) => `${job}@${iso}`).filter((k) => !started.has(k));
  expect(missing).toEqual([]);
}

describe('fault: infrastructure', () => {
  // The Redis case and the skew case side by side (it.concurrent): each has its own database, and
  // the skew case its own masters; their nodes run short every-second bodies. The store case, which
  // judges self-fencing to half a second, runs alone after them.
  it.concurrent('Redis: two of three masters stopped, then all three, then restarted: no crash, no duplicate, no gap', async () => {
    const { ws, cluster } = setup('redis', (await database()).url);
    ws.writeJob('tick.mjs', faultJob({ schedule: '* * * * * *', durationMs: 50, extra: { lockTtl: '2s', catchUp: '1m', coalesce: false } }));
    for (const n of ['r1', 'r2', 'r3']) cluster.start(n);
    await Promise.all(['r1', 'r2', 'r3'].map((n) => cluster.started(n)));
    // Each phase holds 2-3 judged every-second periods: before, two masters down, all down, back.
    const t0 = Date.now();
    await sleep(2000);
    await Promise.all([redis[0]!.stop(), redis[1]!.stop()]);
    await sleep(3000);
    await redis[2]!.stop();
    await sleep(3000);
    await Promise.all(redis.map((r) => r.start()));
    const quorumBack = () => [...cluster.nodes.values()].some((d) => d.logs().some((l) => l.msg === 'Redis quorum is back: claims use Redlock again'));
    await waitFor('a node to use Redlock again', quorumBack, 20_000);
    await sleep(2000);
    const t1 = Date.now();
    await sleep(1500);
    expect(await cluster.stopAll()).toEqual([0, 0, 0]);

    expectEverySecondOnce(cluster, 'tick', t0, t1);
    expect(overlappingAttempts(cluster.effects(), new Map())).toEqual([]);
    const logs = [...cluster.nodes.values()].flatMap((d) => d.logs());
    expect(logs.some((l) => l.msg === 'Redis quorum unreachable: claims go on through the run row alone')).toBe(true);
    expect(logs.some((l) => l.msg === 'Redis quorum is back: claims use Redlock again')).toBe(true);
    const runs = await cluster.history();
    expect(runs.filter((r) => r.status === 'running')).toEqual([]);
    // History agrees with the side effects: one succeeded row per started period.
    const succeeded = new Set(runs.filter((r) => r.job === 'tick' && r.status === 'succeeded').map((r) => r.periodKey));
    const started = new Set(cluster.effects().filter((e) => e.ev === 'start').map((e) => e.key));
    expect([...started].filter((k) => !succeeded.has(k))).toEqual([]);
  });

  it.concurrent('clocks skewed by +1.5 s and -1.5 s (libfaketime), overlap skip: every second once, no skip, no takeover; each node measures its offset', async () => {
    // libfaketime preloaded straight into node (the `faketime` wrapper would not pass SIGTERM on).
    const lib = execFileSync('sh', ['-c', 'dpkg -L libfaketime | grep "/libfaketime.so.1$"'], { encoding: 'utf8' }).trim();
    expect(existsSync(lib)).toBe(true);
    // Its own masters: the Redis case beside it stops the file's.
    const masters = await startRedisServers(3);
    ownMasters.push(...masters);
    const { ws, cluster } = setup('skew', (await database()).url, masters);
    // overlap 'skip' with a body of 300 ms: a node firing 1.5 s early would meet the previous
    // period's live run and record its period skipped; firing by the store's clock, none does.
    ws.writeJob('skewed.mjs', faultJob({ schedule: '* * * * * *', durationMs: 300, extra: { lockTtl: '2s', catchUp: '1m', coalesce: false, overlap: 'skip' } }));
    const faked = (offset: string) => ({ LD_PRELOAD: lib, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1', FAKETIME_NO_CACHE: '1' });
    cluster.start('ahead', faked('+1.5s'));
    cluster.start('behind', faked('-1.5s'));
    cluster.start('exact');
    await Promise.all(['ahead', 'behind', 'exact'].map((n) => cluster.started(n)));
    // 10 judged seconds: each of them must run once, whichever node wins it.
    const t0 = Date.now() + 2000;
    await sleep(14_000);
    const t1 = Date.now() - 2000;
    expect(await cluster.stopAll()).toEqual([0, 0, 0]);

    // Each node measured its clock against the store's (store minus node: the node ahead is negative).
    const offsetOf = (node: string) => cluster.nodes.get(node)!.logs().find((l) => typeof l.clockOffsetMs === 'number')?.clockOffsetMs as number | undefined;
    expect(Math.abs(offsetOf('ahead')! + 1500), `offset of the node 1.5 s ahead: ${offsetOf('ahead')}`).toBeLessThanOrEqual(100);
    expect(Math.abs(offsetOf('behind')! - 1500), `offset of the node 1.5 s behind: ${offsetOf('behind')}`).toBeLessThanOrEqual(100);
    expect(Math.abs(offsetOf('exact')!)).toBeLessThanOrEqual(100);
    // An offset over 1 s is said, once per node at start.
    for (const node of ['ahead', 'behind']) expect(cluster.nodes.get(node)!.logs().filter((l) => /clock is .* the store's/.test(String(l.msg)))).toHaveLength(1);

    // This job's rows, judged between t0 and t1.
    const runs = (await cluster.history()).filter((r) => r.job === 'skewed' && Date.parse(r.periodKey.slice('skewed@'.length)) >= t0 && Date.parse(r.periodKey.slice('skewed@'.length)) <= t1);
    if (process.env.FAULT_DEBUG) console.log(runs.filter((r) => r.status !== 'succeeded').map((r) => JSON.stringify(r)).join('\n'));
    expectEverySecondOnce(cluster, 'skewed', t0, t1);
    expect(runs.filter((r) => r.status !== 'succeeded').map((r) => `${r.periodKey} ${r.status} ${r.reason ?? ''}`)).toEqual([]);
    // Bodies start at their instant by the store's clock (this machine's real one), whichever node won.
    const starts = cluster.effects().filter((e) => e.ev === 'start' && e.key.startsWith('skewed@'));
    // (A body's own Date.now() is faked too: its record is put back on the real clock.)
    const skewOf: Record<string, number> = { ahead: 1500, behind: -1500, exact: 0 };
    const lateness = starts.map((e) => e.t - skewOf[e.node]! - Date.parse(e.key.slice('skewed@'.length)));
    expect(Math.min(...lateness), 'no body started more than 100 ms before its instant').toBeGreaterThan(-100);
    const winners = new Set(starts.map((e) => e.node));
    // No node has an edge from its clock: more than one wins periods.
    expect(winners.size).toBeGreaterThan(1);
  });

  it('store cut off and back: no run starts without its row, a run that cannot prove its lease self-fences and is resumed after the store returns, missed periods are caught up', async () => {
    const db = await database();
    const proxy = new StoreProxy(Number(new URL(db.url).port || 3306));
    proxies.push(proxy);
    await proxy.start();
    const viaProxy = new URL(db.url);
    viaProxy.port = String(proxy.port);
    const { ws, cluster } = setup('store', viaProxy.toString());
    // overlap 'allow': every missed second must run (with 'skip', a catch-up period that meets a live
    // run is recorded skipped instead, which the contract also allows).
    ws.writeJob('steady.mjs', faultJob({ schedule: '* * * * * *', durationMs: 50, extra: { lockTtl: '3s', catchUp: '1m', coalesce: false, overlap: 'allow' } }));
    ws.writeJob('inflight.mjs', faultJob({ schedule: '*/10 * * * * *', durationMs: 5000, extra: { lockTtl: '3s', catchUp: '1m' } }));
    for (const n of ['s1', 's2']) cluster.start(n);
    await Promise.all(['s1', 's2'].map((n) => cluster.started(n)));
    const t0 = Date.now();
    const long = await waitFor('the long job to start', () => cluster.effects().find((e) => e.ev === 'start' && e.key.startsWith('inflight@')), 30_000);
    await sleep(500);
    await proxy.cut();
    const cutAt = Date.now();
    // The long run cannot confirm its lease (3 s) through the cut: it aborts before the store could
    // give it away (self-fencing on its own monotonic clock), well before the store returns.
    const fenced = await waitFor('the long run to self-fence', () => cluster.effects().find((e) => e.key === long.key && e.ev === 'abort'), 10_000);
    expect(fenced.reason).toBe('lease-lost');
    expect(fenced.t - long.t, 'aborted within its lease of its last confirmed heartbeat').toBeLessThanOrEqual(3000 + 500);
    expect(fenced.t, 'aborted during the cut').toBeLessThan(cutAt + 5000);
    await sleep(Math.max(0, cutAt + 5000 - Date.now()));
    await proxy.restore();
    // Its attempt ended without an outcome of its own: attempt 2 is owed, and runs once the store is back.
    await waitFor('the long period to end (attempt 2)', () => cluster.effects().some((e) => e.key === long.key && e.ev === 'end' && e.attempt === 2), 30_000);
    // Missed seconds are caught up: wait until every second up to now has started (judged once below).
    const t1 = Date.now();
    await waitFor('every second of the cut to be caught up', () => {
      const started = new Set(cluster.effects().filter((e) => e.ev === 'start').map((e) => e.key));
      return secondsBetween(t0, t1).every((iso) => started.has(`steady@${iso}`));
    }, 30_000, 200);
    expect(await cluster.stopAll()).toEqual([0, 0]);
    // Nothing left running or ended without an outcome by the stop itself.
    expect((await cluster.history()).filter((r) => r.periodKey !== long.key && r.status !== 'succeeded' && r.status !== 'skipped').map((r) => `${r.periodKey}#${r.attempt} ${r.status} ${r.reason ?? ''}`)).toEqual([]);

    if (process.env.FAULT_DEBUG) for (const [id, d] of cluster.nodes) console.log(id, d.logs().filter((l) => l.level !== 'info' || /store|catch|coalesc/.test(String(l.msg))).map((l) => JSON.stringify(l).slice(0, 400)).join('\n'));
    expectEverySecondOnce(cluster, 'steady', t0, t1);
    const runs = await cluster.history();
    const rowKeys = new Set(runs.map((r) => `${r.periodKey}#${r.attempt}`));
    // No run started without its row.
    expect(cluster.effects().filter((e) => e.ev === 'start' && !rowKeys.has(`${e.key}#${e.attempt}`))).toEqual([]);
    expect(runs.filter((r) => r.status === 'running')).toEqual([]);
    const longRuns = runs.filter((r) => r.periodKey === long.key);
    expect(longRuns.map((r) => [r.attempt, r.status]).sort()).toEqual([[1, 'abandoned'], [2, 'succeeded']]);
    expect(overlappingAttempts(cluster.effects().filter((e) => e.key === long.key), new Map())).toEqual([]);
    // Some seconds during the cut ran late, as catch-up.
    const late = cluster.effects().filter((e) => e.ev === 'start' && e.key.startsWith('steady@') && e.trigger === 'catch-up');
    const instant = (e: Effect) => Date.parse(e.key.slice('steady@'.length));
    // (Which trigger ran a second before the cut is not judged: a timer that wakes more than a
    // second late on a loaded machine runs the second it slept past as catch-up (catchUpLate), still
    // once; CI saw it once, with two fault files side by side.)
    expect(late.filter((e) => instant(e) >= cutAt - 1000).length, 'seconds of the cut caught up').toBeGreaterThan(0);
  });
});
