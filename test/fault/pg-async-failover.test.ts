/**
 * PostgreSQL failover to an asynchronous standby that lost its tail (issue 20): a primary and an
 * asynchronous standby started here, three daemons on libpq's multi-host URL, three Redis masters.
 * Replication is cut for 4 s while every-second jobs run (and a long body spans the fault), then the
 * primary is crashed and the standby promoted: the rows the old primary committed meanwhile are gone.
 * Counted from the bodies' own records: each period whose row was lost is said by the node that ran
 * it (row-lost) and written back with its outcome, no period runs a second time (its lock key is kept
 * past its catchUp, and the write-back comes before the catch-up), every start has its row on the new
 * primary, and no daemon exits.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startPgReplicas, type PgReplicas } from '../harness/pg-replicas.mjs';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster, attemptJob, duplicateStarts, faultJob, secondsBetween, type Effect } from './harness.js';

let pair: PgReplicas | undefined;
let redis: RedisServer[] = [];
const workspaces: Workspace[] = [];
const clusters: Cluster[] = [];

afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stopAll()));
  await pair?.stop();
  await Promise.all(redis.map((r) => r.cleanup()));
  for (const w of workspaces) w.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('fault: PostgreSQL failover to an asynchronous standby that lost 4 s of its tail', () => {
  it('every lost row is said and written back by its node, no period runs twice, every start has its row', async () => {
    [pair, redis] = await Promise.all([startPgReplicas({ sync: false }), startRedisServers(3)]);
    const db = pair.createDatabase(`cron_pgasync_${Date.now().toString(36)}`);
    await pair.replicating();
    const ws = new Workspace('cron-pg-async-');
    workspaces.push(ws);
    const cluster = new Cluster(ws, {
      SCHEDULER_STORE: pair.url(db),
      SCHEDULER_REDIS: redis.map((r) => r.url).join(','),
      SCHEDULER_REDIS_PREFIX: `pgasync-${Date.now()}:`,
    });
    clusters.push(cluster);
    ws.writeJob('tick.mjs', faultJob({ schedule: '* * * * * *', durationMs: 50, extra: { catchUp: '1m', coalesce: false, overlap: 'allow' } }));
    ws.writeJob('five.mjs', faultJob({ schedule: '*/5 * * * * *', durationMs: 1500, extra: { catchUp: '1m' } }));
    // A body of 12 s every 30 s: one spans the cut and the crash (its heartbeat finds its row gone).
    ws.writeJob('long.mjs', attemptJob({ schedule: '*/30 * * * * *', durationsMs: [12_000], extra: { catchUp: '2m' } }));
    for (const n of ['a1', 'a2', 'a3']) cluster.start(n);
    await Promise.all(['a1', 'a2', 'a3'].map((n) => cluster.started(n)));
    const t0 = Date.now();
    const long = await waitFor('a long body to start', () => cluster.effects().find((e) => e.ev === 'start' && e.key.startsWith('long@') && e.t > t0), 45_000);
    await sleep(Math.max(0, long.t + 1000 - Date.now()));
    await pair.cutReplication();
    const cutAt = Date.now();
    await sleep(4000);
    pair.crash();
    const crashedAt = Date.now();
    await sleep(2000);
    await pair.promote();
    const promotedAt = Date.now();
    await waitFor('the long body to end', () => cluster.effects().some((e) => e.key === long.key && e.ev === 'end'), 60_000);
    const t1 = Date.now() - 3000;
    await waitFor('every second of the window to have started', () => {
      const started = new Set(cluster.effects().filter((e) => e.ev === 'start').map((e) => e.key));
      return secondsBetween(t0, t1).every((iso) => started.has(`tick@${iso}`));
    }, 60_000, 250);
    // Every start of the run has its row on the new primary (the write-backs are done).
    const rowsFor = async () => {
      const runs = await cluster.history();
      return { runs, keys: new Set(runs.map((r) => `${r.periodKey}#${r.attempt}`)) };
    };
    await waitFor('every start to have its row', async () => {
      const { keys } = await rowsFor();
      return cluster.effects().filter((e) => e.ev === 'start').every((e) => keys.has(`${e.key}#${e.attempt}`));
    }, 60_000, 500);
    const exits = await cluster.stopAll();
    const effects: Effect[] = cluster.effects();
    const { runs, keys } = await rowsFor();
    const lostLines = cluster.logs().filter((l) => typeof l.msg === 'string' && l.msg.startsWith("the store lost this"));
    const lost = new Set(lostLines.map((l) => `${l.periodKey as string}#${l.attempt as number}`));
    // The periods that started and ended inside the cut (with a margin for the last replicated
    // WAL and the clock): their rows were committed on the old primary alone.
    const inCut = [...new Set(effects.filter((e) => e.ev === 'end' && e.t > cutAt + 500 && e.t < crashedAt - 500).map((e) => `${e.key}#${e.attempt}`))];
    console.log(`pg async failover: cut ${crashedAt - cutAt} ms, crash -> promoted ${promotedAt - crashedAt} ms; ${lost.size} rows said lost (${lostLines.filter((l) => String(l.msg).includes('written back')).length} written back), ${inCut.length} periods ended inside the cut`);

    const stuck = runs.filter((r) => r.status === 'running' || r.status === 'pending').map((r) => r.periodKey);
    if (process.env.DEBUG_FAULT) console.log(JSON.stringify({ cutAt, crashedAt, promotedAt, stuck, logs: cluster.logs().filter((l) => stuck.includes(l.periodKey as string)), effects: effects.filter((e) => stuck.includes(e.key)) }, null, 1));
    expect(exits, 'no daemon exits').toEqual([0, 0, 0]);
    expect(duplicateStarts(effects), 'no attempt started twice').toEqual([]);
    for (const job of ['tick', 'five']) {
      const starts = effects.filter((e) => e.ev === 'start' && e.key.startsWith(`${job}@`));
      expect(new Set(starts.map((e) => e.key)).size, `no ${job} period ran twice`).toBe(starts.length);
    }
    expect(effects.filter((e) => e.ev === 'start' && !keys.has(`${e.key}#${e.attempt}`)), 'every start has its row on the new primary').toEqual([]);
    expect(inCut.length, 'periods ran inside the cut').toBeGreaterThanOrEqual(3);
    expect(inCut.filter((k) => !lost.has(k)), 'each period that ended inside the cut was said lost by its node').toEqual([]);
    expect(lostLines.filter((l) => !String(l.msg).includes('written back')), 'every lost row written back').toEqual([]);
    // Written back with the outcome its body had: the long body once, succeeded.
    expect(runs.filter((r) => r.periodKey === long.key).map((r) => `${r.attempt} ${r.status}`)).toEqual(['1 succeeded']);
    expect(runs.filter((r) => r.status === 'running' || r.status === 'pending')).toEqual([]);
    for (const k of inCut) {
      const [key] = k.split('#');
      expect(runs.filter((r) => r.periodKey === key).map((r) => r.status), k).toEqual(['succeeded']);
    }
  });
});
