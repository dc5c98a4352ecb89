/**
 * Issue 7's lease discipline, end to end through real `bin/scheduler run` daemons (MariaDB, Redis
 * masters this file starts on free ports):
 *
 * 1. The Redis majority lost while a run is in flight, past the lock's local expiry (a: two masters
 *    stopped; b: one restarted empty, then another stopped, so that only this node's own old value is
 *    left on the survivor; c: two masters frozen, so that every command to them waits for its
 *    timeout). The run must not be aborted: the row, not the key, says whose attempt it is.
 *    (The old bug: the provider re-acquired, met its own old key, called the lease lost, and the run
 *    was aborted and recorded abandoned. With frozen masters, the extension waited for their timeouts
 *    and held back the row heartbeat's confirmation until the run self-fenced.)
 * 2. One node's store partitioned (its own proxy cut) past the lease while its body runs: it
 *    self-fences before the store can give the lease away, the other node takes over after the lease
 *    and runs attempt 2, the attempts never overlap, and the partitioned node records nothing for its
 *    lapsed attempt once the store is back, and keeps running.
 * 3. A daemon started with every Redis master down: periods through the row alone, one warning, then
 *    Redlock again once the masters come back (lock keys on the masters), no period twice or missing.
 *
 * Assertions come from the bodies' own side effects, `history --json`, the rows themselves (the last
 * heartbeat, store clock; everything runs on this machine, so the clocks agree) and the masters' keys.
 */
import knexFactory from 'knex';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { freePorts, RedisServer, startRedisServers, waitFor } from '../helpers/redis.js';
import type { HistoryRun } from '../helpers/workspace.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster, StoreProxy, attemptJob, duplicateStarts, faultJob, overlappingAttempts, secondsBetween, soonSchedule, type Effect } from './harness.js';

const dbs: TestDatabase[] = [];
const workspaces: Workspace[] = [];
const clusters: Cluster[] = [];
const proxies: StoreProxy[] = [];
const servers: RedisServer[] = [];
const probes: Redis[] = [];

/** Time for two daemons to start on this (shared, 2-core) machine before the first period. */
const LEAD_MS = 7000;

// Tests of a concurrent group share these lists: clean up once none of them runs any more.
let running = 0;
beforeEach(() => {
  running++;
});

afterEach(async () => {
  if (--running > 0) return;
  // A failed test leaves its daemons (and long bodies) behind: kill them, so the next test has the CPU.
  await Promise.all(clusters.map((c) => c.killAll()));
  for (const p of proxies.splice(0)) await p.close();
  for (const c of probes.splice(0)) c.disconnect();
  await Promise.all(servers.splice(0).map((s) => s.cleanup()));
});

afterAll(async () => {
  await Promise.all(clusters.map((c) => c.killAll()));
  for (const db of dbs) await db.drop();
  for (const w of workspaces) w.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const sleepUntil = (t: number) => sleep(t - Date.now());

interface Setup {
  db: TestDatabase;
  ws: Workspace;
  cluster: Cluster;
  redisPrefix: string;
}

async function setup(prefix: string, redisUrls: string[]): Promise<Setup> {
  const db = await createMariaDb('cron_lease');
  dbs.push(db);
  const ws = new Workspace(`cron-lease-${prefix}-`);
  workspaces.push(ws);
  const redisPrefix = `lease-${prefix}-${Date.now()}:`;
  const cluster = new Cluster(ws, {
    SCHEDULER_STORE: db.url,
    SCHEDULER_REDIS: redisUrls.join(','),
    SCHEDULER_REDIS_PREFIX: redisPrefix,
  });
  clusters.push(cluster);
  return { db, ws, cluster, redisPrefix };
}

async function masters(n: number): Promise<RedisServer[]> {
  const started = await startRedisServers(n);
  servers.push(...started);
  return started;
}

/** A client of one master for the test's own reads (keys, values); errors while it is down are ignored. */
async function probe(server: RedisServer): Promise<Redis> {
  const c = new Redis(server.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 100 });
  c.on('error', () => {});
  probes.push(c);
  await c.connect();
  return c;
}

/** One short-lived connection: the master's answer, or null when it does not answer. */
async function ask<T>(server: RedisServer, fn: (c: Redis) => Promise<T>): Promise<T | null> {
  const c = new Redis(server.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => {});
  try {
    await c.connect();
    return await fn(c);
  } catch {
    return null;
  } finally {
    c.disconnect();
  }
}

const effect = (cluster: Cluster, pred: (e: Effect) => boolean): Effect | undefined => cluster.effects().find(pred);
const ev = (name: Effect['ev'], key: string, attempt: number) => (e: Effect) => e.ev === name && e.key === key && e.attempt === attempt;

function historyUntil(cluster: Cluster, what: string, pred: (runs: HistoryRun[]) => boolean, timeoutMs: number): Promise<HistoryRun[]> {
  return waitFor(what, async () => {
    const runs = await cluster.history();
    return pred(runs) ? runs : undefined;
  }, timeoutMs, 300);
}

const attemptsOf = (runs: HistoryRun[], key: string) => runs.filter((r) => r.periodKey === key).map((r) => [r.attempt, r.status]).sort((a, b) => Number(a[0]) - Number(b[0]));
const logsOf = (cluster: Cluster, node: string) => cluster.nodes.get(node)!.logs();

/** The stored row of an attempt (heartbeat_at and the others as the store wrote them). */
async function rowOf(db: TestDatabase, key: string, attempt: number): Promise<Record<string, unknown> | undefined> {
  const knex = knexFactory({ client: 'mysql2', connection: db.url, pool: { min: 0, max: 1 } });
  try {
    return await knex('scheduler_runs').where({ period_key: key, attempt }).first();
  } finally {
    await knex.destroy();
  }
}

/**
 * Case 1: the run keeps its row through the loss of the Redis majority (variant a: two masters
 * stopped; b: one restarted empty, then another stopped), past the lock's local expiry, so it must go
 * on to its end, and nobody else may start the period.
 */
async function redisMajorityLost(variant: 'a' | 'b' | 'c'): Promise<void> {
  const BODY_MS = 15_000;
  const TTL_MS = 2000;
  const redis = await masters(3);
  const { ws, cluster, redisPrefix } = await setup(`quorum-${variant}`, redis.map((r) => r.url));
  // The three variants run side by side (their own masters, database and workspace; the nodes are
  // idle but for the leases): their periods 2 s apart, so that their nodes do not start at one instant.
  const stagger = { a: 0, b: 2000, c: 4000 }[variant];
  ws.writeJob('long.mjs', attemptJob({ schedule: soonSchedule(LEAD_MS + stagger, 30).schedule, durationsMs: [BODY_MS], extra: { lockTtl: '2s', catchUp: '1m' } }));
  // q1 claims the period alone, so that its key is on all three masters (with two racers, the loser's
  // SET NX can take one master first and leave the winner's value on two only); q2 is up before the
  // faults, ready to take the period over should q1's attempt be (wrongly) given up.
  cluster.start('q1');
  await cluster.started('q1');
  const first = await waitFor('attempt 1 to start', () => effect(cluster, (e) => e.ev === 'start' && e.attempt === 1), 45_000);
  cluster.start('q2');
  await cluster.started('q2');
  const bodyEndsAt = first.t + BODY_MS;
  const faultAt = Math.max(Date.now(), first.t + 1000);
  const resource = `${redisPrefix}lock:${first.key}`;
  const clients = await Promise.all(redis.map(probe));
  const initial = await Promise.all(clients.map((c) => c.get(resource)));
  expect(initial[0], `harness: the attempt's lock key on every master (${JSON.stringify(initial)})`).not.toBeNull();
  expect(new Set(initial).size, `harness: one lock value on every master (${JSON.stringify(initial)})`).toBe(1);
  const own = initial[0]!;

  let survivor: Redis;
  let downAt: number;
  if (variant === 'a') {
    // Two of three masters stopped: no quorum. They stay down well past the lock's local expiry
    // (at most lockTtl after the last extension, which came before the stop).
    await sleepUntil(faultAt);
    await Promise.all([redis[0]!.stop(), redis[1]!.stop()]);
    downAt = Date.now();
    survivor = clients[2]!;
  } else if (variant === 'c') {
    // Two of three masters frozen (SIGSTOP): they accept connections but answer nothing, so every
    // command to them waits for its timeout. No quorum, past the local expiry, as in (a).
    await sleepUntil(faultAt);
    redis[0]!.pause();
    redis[1]!.pause();
    downAt = Date.now();
    survivor = clients[2]!;
  } else {
    // Master 0 restarted empty (it loses the key); the nodes reconnect to it, and an extension meets
    // the absent key there (its extend script answers 0). Then master 1 is stopped: of the three,
    // only master 2 holds a value, this node's own old one.
    await sleepUntil(faultAt);
    await redis[0]!.stop();
    await redis[0]!.start();
    await waitFor('both nodes to reconnect to the restarted master', async () => {
      const info = await ask(redis[0]!, (c) => c.info('clients'));
      const n = Number(/connected_clients:(\d+)/.exec(info ?? '')?.[1] ?? 0);
      return n >= 2 + 1 + 1; // two daemons, the probe, this connection
    }, 10_000, 100);
    await sleep(TTL_MS / 3 + 200); // at least one extension against the empty master
    expect(await ask(redis[0]!, (c) => c.get(resource)), 'harness: the restarted master lost the key').toBeNull();
    await redis[1]!.stop();
    downAt = Date.now();
    survivor = clients[2]!;
  }
  expect(downAt + TTL_MS, 'harness: the lock expires locally while the body still runs').toBeLessThan(bodyEndsAt - 1000);
  // Past the local expiry (at most lockTtl after the last extension, which came before downAt), the
  // surviving master still holds this node's own value: the failed extensions kept renewing it there.
  await sleepUntil(downAt + TTL_MS + 300);
  const held = await survivor.get(resource);
  const leaseLost = () => [...cluster.nodes.keys()].flatMap((id) => logsOf(cluster, id).filter((l) => String(l.msg).startsWith('lease lost')).map((l) => `${id}: ${String(l.msg)} ${JSON.stringify({ unconfirmedMs: l.unconfirmedMs, lock: l.lock, rowOwned: l.rowOwned })}`));
  expect(effect(cluster, (e) => e.key === first.key && e.ev !== 'start'), `the run goes on past the local expiry of its lock (${leaseLost().join('; ')})`).toBeUndefined();
  // (With frozen masters each renewal waits for their timeouts, so the survivor's copy may lapse first.)
  if (variant !== 'c') expect(held, 'harness: only the node\'s own old value is left on the surviving master past the local expiry').toBe(own);

  // The majority stays lost for several leases more, then the stopped masters come back empty, while
  // the body still runs: the lease is taken again on them.
  await sleepUntil(downAt + TTL_MS + 1000);
  if (variant === 'a') await Promise.all([redis[0]!.start(), redis[1]!.start()]);
  else if (variant === 'c') for (const r of [redis[0]!, redis[1]!]) r.resume();
  else await redis[1]!.start();
  const backAt = Date.now();
  expect(backAt, 'harness: the masters came back while the body runs').toBeLessThan(bodyEndsAt - 2500);
  const retaken = await waitFor('the lease to be taken again on a majority (before the body ends)', async () => {
    if (Date.now() > bodyEndsAt) return 'body ended';
    const values = await Promise.all(redis.map((r) => ask(r, (c) => c.get(resource))));
    const counts = new Map<string, number>();
    for (const v of values) if (v !== null) counts.set(v, (counts.get(v) ?? 0) + 1);
    return [...counts].find(([v, n]) => n >= 2 && v !== own)?.[0];
  }, BODY_MS, 100);
  expect(retaken, 'the lease was taken again once a majority answered').not.toBe('body ended');

  await waitFor('the body to end', () => effect(cluster, (e) => e.key === first.key && e.ev !== 'start'), BODY_MS + 10_000);
  const runs = await historyUntil(cluster, 'the run to be recorded', (rs) => rs.some((r) => r.periodKey === first.key && r.status !== 'running'), 15_000);
  expect(await cluster.stopAll(), 'exit codes').toEqual([0, 0]);

  const mine = cluster.effects().filter((e) => e.key === first.key).map((e) => `${e.ev} #${e.attempt} ${e.node}${e.reason ? ` ${e.reason}` : ''}`);
  expect(mine, 'the body: one start and one end, on one node, attempt 1, no abort').toEqual([`start #1 ${first.node}`, `end #1 ${first.node}`]);
  expect(attemptsOf(runs, first.key), 'one row, attempt 1, succeeded').toEqual([[1, 'succeeded']]);
  expect(runs.filter((r) => r.status === 'abandoned').map((r) => `${r.periodKey}#${r.attempt}`), 'no abandoned row').toEqual([]);
  expect(runs.find((r) => r.periodKey === first.key)?.nodeId).toBe(first.node);
  expect(duplicateStarts(cluster.effects())).toEqual([]);
  const lost = [...cluster.nodes.keys()].flatMap((id) => logsOf(cluster, id).filter((l) => String(l.msg).startsWith('lease lost')));
  expect(lost.map((l) => JSON.stringify(l).slice(0, 300)), 'no node logged a lost lease').toEqual([]);
}

describe('lease discipline (issue 7)', () => {
  // Side by side: each case has its own masters, database, workspace and key prefix.
  describe.concurrent('1 and 3. Redis masters lost mid-run, or down at start', () => {
    it('1a. two of three Redis masters stopped mid-run, down past the lock\'s expiry: the run is not aborted and ends succeeded, once', async () => {
      await redisMajorityLost('a');
    });

    it('1b. one master restarted empty, then another stopped (only the node\'s own old value left on the survivor at the local expiry): the run is not aborted and ends succeeded, once', async () => {
      await redisMajorityLost('b');
    });

    it('1c. two of three Redis masters frozen (SIGSTOP) mid-run past the lock\'s expiry, then resumed: the run is not aborted and ends succeeded, once', async () => {
      await redisMajorityLost('c');
    });

    it('3. a daemon started with every Redis master down runs its periods through the row, warns once, and uses Redlock again when the masters come back; no period twice, none missing', async () => {
      const ports = await freePorts(3);
      const { ws, cluster, redisPrefix } = await setup('nomaster', ports.map((p) => `redis://127.0.0.1:${p}`));
      ws.writeJob('tick.mjs', faultJob({ schedule: '* * * * * *', durationMs: 600, extra: { lockTtl: '2s', catchUp: '1m', coalesce: false, overlap: 'allow' } }));
      for (const id of ['d1', 'd2']) cluster.start(id);
      await Promise.all(['d1', 'd2'].map((id) => cluster.started(id)));
      const t0 = Date.now();
      await waitFor('four periods to run with no master', () => cluster.effects().filter((e) => e.ev === 'start' && e.t > t0).length >= 4, 30_000);

      // The masters come up on the ports the daemons were given (empty, as after an outage).
      const redis = ports.map((p) => new RedisServer(p));
      servers.push(...redis);
      await Promise.all(redis.map((r) => r.start()));
      const upAt = Date.now();
      const clients = await Promise.all(redis.map(probe));
      // Lock keys of the periods claimed from now on, as the masters hold them (period key -> masters seen on).
      const seen = new Map<string, Set<number>>();
      let polling = true;
      const poller = (async () => {
        while (polling) {
          await Promise.all(clients.map(async (c, i) => {
            for (const k of await c.keys(`${redisPrefix}lock:*`).catch(() => [] as string[])) {
              const set = seen.get(k) ?? new Set<number>();
              set.add(i);
              seen.set(k, set);
            }
          }));
          await sleep(50);
        }
      })();
      const back = 'Redis quorum is back: claims use Redlock again';
      await waitFor('both nodes to log that Redlock is used again', () => ['d1', 'd2'].every((id) => logsOf(cluster, id).some((l) => l.msg === back)), 20_000);
      const onMajority = () => [...seen].filter(([, on]) => on.size >= 2).map(([k]) => k);
      await waitFor('lock keys of three periods on a majority of the masters', () => onMajority().length >= 3, 20_000);
      // Periods well after the masters came back (the judged ones below): wait for three of them
      // rather than a fixed 3 s after the waits above, which left only two when those ended quickly.
      const isLater = (key: string) => Date.parse(key.slice('tick@'.length)) > upAt + 3000;
      await waitFor('three periods to start more than 3 s after the masters came back', () => cluster.effects().filter((e) => e.ev === 'start' && e.key.startsWith('tick@') && isLater(e.key)).length >= 3, 20_000);
      const t1 = Date.now();
      await sleep(1500);
      polling = false;
      await poller;
      expect(await cluster.stopAll(), 'exit codes').toEqual([0, 0]);

      const effects = cluster.effects().filter((e) => e.key.startsWith('tick@'));
      expect(duplicateStarts(effects), 'a period started twice').toEqual([]);
      expect(effects.filter((e) => e.ev === 'start' && e.attempt !== 1), 'attempts beyond the first').toEqual([]);
      const started = new Set(effects.filter((e) => e.ev === 'start').map((e) => e.key));
      const expected = secondsBetween(t0, t1).map((iso) => `tick@${iso}`);
      expect(expected.filter((k) => !started.has(k)), 'periods missing across the switch').toEqual([]);
      for (const id of ['d1', 'd2']) {
        const logs = logsOf(cluster, id);
        expect(logs.filter((l) => l.msg === 'Redis quorum unreachable: claims go on through the run row alone').length, `${id}: warnings`).toBe(1);
        expect(logs.filter((l) => l.msg === back).length, `${id}: 'back' lines`).toBe(1);
      }
      // Later periods hold a key on the masters: Redlock decides them again.
      const keyed = onMajority().map((k) => k.slice(`${redisPrefix}lock:`.length));
      const later = expected.filter(isLater);
      const laterKeyed = later.filter((k) => keyed.includes(k));
      console.log(`masters back ${upAt - t0} ms after the first period; periods after that with their lock key seen on a majority: ${laterKeyed.length} of ${later.length}`);
      expect(keyed.every((k) => Date.parse(k.slice('tick@'.length)) > upAt - 1000), 'no key of a period claimed while every master was down').toBe(true);
      expect(laterKeyed.length, 'later periods with their lock key on a majority').toBeGreaterThanOrEqual(3);
      const runs = (await cluster.history()).filter((r) => r.job === 'tick');
      expect(runs.filter((r) => r.status !== 'succeeded').map((r) => `${r.periodKey}#${r.attempt} ${r.status}`)).toEqual([]);
    });
  });

  it('2. one node\'s store partitioned past the lease mid-run: it self-fences within the lease, the other node takes over after the lease, no overlap, and the partitioned node\'s outcome write for its lapsed attempt is refused, and it keeps running', async () => {
    const TTL_MS = 3000;
    const redis = await masters(3);
    const { db, ws, cluster } = await setup('partition', redis.map((r) => r.url));
    const port = Number(new URL(db.url).port || 3306);
    const storeVia = new Map<string, StoreProxy>();
    for (const id of ['pa', 'pb']) {
      const proxy = new StoreProxy(port);
      proxies.push(proxy);
      await proxy.start();
      storeVia.set(id, proxy);
    }
    const through = (proxy: StoreProxy) => {
      const u = new URL(db.url);
      u.port = String(proxy.port);
      return u.toString();
    };
    ws.writeJob('long.mjs', attemptJob({ schedule: soonSchedule(LEAD_MS, 30).schedule, durationsMs: [30_000, 2000], extra: { lockTtl: '3s', catchUp: '1m' } }));
    // Other periods, so that the partitioned node can show it keeps running.
    ws.writeJob('steady.mjs', faultJob({ schedule: '* * * * * *', durationMs: 50, extra: { lockTtl: '2s', catchUp: '1m', overlap: 'allow' } }));
    for (const [id, proxy] of storeVia) cluster.start(id, { SCHEDULER_STORE: through(proxy) });
    await Promise.all(['pa', 'pb'].map((id) => cluster.started(id)));

    const first = await waitFor('attempt 1 of the long job to start', () => effect(cluster, (e) => e.ev === 'start' && e.attempt === 1 && e.key.startsWith('long@')), 45_000);
    const a = first.node;
    const b = a === 'pa' ? 'pb' : 'pa';
    // Cut at a random phase of the heartbeat (every lockTtl / 3), after a few beats.
    await sleepUntil(first.t + 1200 + Math.floor(Math.random() * (TTL_MS / 3)));
    await storeVia.get(a)!.cut();
    const cutAt = Date.now();

    const abort = await waitFor('the partitioned node to abort its body', () => effect(cluster, (e) => e.key === first.key && e.attempt === 1 && e.ev !== 'start'), 15_000);
    expect(abort.ev).toBe('abort');
    expect(abort.reason).toBe('lease-lost');
    expect(abort.node).toBe(a);
    const second = await waitFor('the other node to start attempt 2', () => effect(cluster, ev('start', first.key, 2)), 30_000);
    expect(second.node, 'attempt 2 on the node whose store answers').toBe(b);
    await storeVia.get(a)!.restore();
    const restoredAt = Date.now();

    // A node that lost its lease keeps what its body ended with and writes it once the store is back,
    // conditionally on the row still being its attempt's: the takeover (by the other node) ended it,
    // so the write is refused, and nothing of the other node's attempts is touched.
    await waitFor('the partitioned node\'s outcome write to be refused', () => logsOf(cluster, a).some((l) => /^outcome not recorded: the attempt is no longer this node's/.test(String(l.msg)) && l.periodKey === first.key), 20_000);
    expect(logsOf(cluster, a).filter((l) => /lost this attempt's row/.test(String(l.msg))), 'a row taken over is not a row lost').toEqual([]);
    await waitFor('attempt 2 to end', () => effect(cluster, ev('end', first.key, 2)), 20_000);
    // The partitioned node did not crash: it runs other periods again.
    await waitFor('the partitioned node to run a period again', () => effect(cluster, (e) => e.ev === 'start' && e.node === a && e.key.startsWith('steady@') && e.t > restoredAt), 30_000);
    expect(cluster.nodes.get(a)!.proc.exitCode, 'the partitioned node is still running').toBeNull();
    expect(await cluster.stopAll(), 'exit codes on SIGTERM').toEqual([0, 0]);

    const row1 = await rowOf(db, first.key, 1);
    const lastBeat = Number(row1?.heartbeat_at);
    expect(Number.isFinite(lastBeat), 'attempt 1 has a heartbeat').toBe(true);
    const abortAfterBeat = abort.t - lastBeat;
    const takeoverAfterBeat = second.t - lastBeat;
    console.log(`store partition, lockTtl ${TTL_MS} ms: cut ${cutAt - first.t} ms into the body; last confirmed heartbeat -> abort ${abortAfterBeat} ms, -> attempt 2 on the other node ${takeoverAfterBeat} ms`);
    expect(lastBeat, 'harness: the last heartbeat came before the cut').toBeLessThanOrEqual(cutAt + 50);
    expect(abortAfterBeat, 'aborted within lockTtl (+ a little slack) of its last confirmed heartbeat').toBeLessThanOrEqual(TTL_MS + 250);
    expect(abortAfterBeat, 'never ran its body beyond the lease + 1 s from its last confirmed heartbeat').toBeLessThanOrEqual(TTL_MS + 1000);
    expect(takeoverAfterBeat, 'the other node took over only after the lease').toBeGreaterThanOrEqual(TTL_MS - 20);
    expect(second.t, 'attempt 2 started after attempt 1 aborted').toBeGreaterThanOrEqual(abort.t);

    const effects = cluster.effects();
    expect(duplicateStarts(effects)).toEqual([]);
    expect(overlappingAttempts(effects, new Map())).toEqual([]);
    const runs = await cluster.history();
    expect(attemptsOf(runs, first.key), 'attempt 1 abandoned (by the takeover), attempt 2 succeeded, nothing more').toEqual([[1, 'abandoned'], [2, 'succeeded']]);
    // The abandoned row is the takeover's (its reason), not an outcome the partitioned node wrote.
    expect(String(row1?.reason), 'attempt 1 was ended by the other node\'s takeover').toMatch(new RegExp(`^lease expired: node ${a} stopped heartbeating`));
    expect(row1?.error ?? null, 'no error written by the partitioned node').toBeNull();
    expect(runs.find((r) => r.periodKey === first.key && r.attempt === 2)?.nodeId).toBe(b);
    expect(effects.filter((e) => e.key === first.key).map((e) => `${e.ev} #${e.attempt} ${e.node}`)).toEqual([
      `start #1 ${a}`, `abort #1 ${a}`, `start #2 ${b}`, `end #2 ${b}`,
    ]);
    expect(runs.filter((r) => r.status === 'running' || r.status === 'pending').map((r) => `${r.periodKey}#${r.attempt} ${r.status}`), 'rows left running or pending').toEqual([]);
  });
});
