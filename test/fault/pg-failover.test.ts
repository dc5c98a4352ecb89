/**
 * PostgreSQL failover (issue 20): a primary and a synchronous standby started here, three daemons on
 * libpq's multi-host URL (`target_session_attrs=read-write`), no Redis. The primary is crashed
 * (immediate stop) while a long body runs and every-second jobs fire, the standby promoted 2 s later;
 * then the old primary comes back as a standby, and a controlled switchover (a clean stop, the
 * standby promoted at once) goes the other way. Counted
 * from the bodies' own records: no duplicate start, no period without a row, the long body once and
 * recorded succeeded, the first run recorded on the new primary soon after the promotion, no exit.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startPgReplicas, type PgReplicas } from '../harness/pg-replicas.mjs';
import { waitFor } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster, attemptJob, duplicateStarts, faultJob, secondsBetween, type Effect } from './harness.js';

let pair: PgReplicas | undefined;
const workspaces: Workspace[] = [];
const clusters: Cluster[] = [];

afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stopAll()));
  await pair?.stop();
  for (const w of workspaces) w.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('fault: PostgreSQL failover to a synchronous standby', () => {
  it('primary crashed mid-run and the standby promoted, then a controlled switchover back (the old primary a standby between): every period once, nothing lost, no exit', async () => {
    pair = await startPgReplicas({ sync: true });
    const db = pair.createDatabase(`cron_pgfo_${Date.now().toString(36)}`);
    const ws = new Workspace('cron-pg-failover-');
    workspaces.push(ws);
    const cluster = new Cluster(ws, { SCHEDULER_STORE: pair.url(db) });
    clusters.push(cluster);
    ws.writeJob('tick.mjs', faultJob({ schedule: '* * * * * *', durationMs: 50, extra: { catchUp: '1m', coalesce: false, overlap: 'allow' } }));
    // A body of 8 s every 20 s: one of them spans each crash.
    ws.writeJob('long.mjs', attemptJob({ schedule: '*/20 * * * * *', durationsMs: [8000], extra: { catchUp: '1m' } }));
    for (const n of ['p1', 'p2', 'p3']) cluster.start(n);
    await Promise.all(['p1', 'p2', 'p3'].map((n) => cluster.started(n)));
    const t0 = Date.now();
    const figures: string[] = [];
    for (let round = 0; round < 2; round++) {
      const since = Date.now();
      const long = await waitFor('a long body to start', () => cluster.effects().find((e) => e.ev === 'start' && e.key.startsWith('long@') && e.t > since), 40_000);
      await sleep(Math.max(0, long.t + 2000 - Date.now()));
      const old = pair.primaryIndex;
      // Round 1 a crash and a promotion 2 s later; round 2 a controlled switchover (a clean stop of
      // the primary, the standby promoted at once).
      const crashedAt = Date.now();
      if (round === 0) {
        pair.crash();
        await sleep(2000);
        await pair.promote();
      } else {
        await pair.switchover();
      }
      const promotedAt = Date.now();
      // The first run recorded on the new primary after the promotion (the store's clock is this machine's).
      const first = await waitFor('a run recorded on the new primary', () => {
        const rows = pair!.rows<{ started_at: string }>(`select started_at from scheduler_runs where started_at > ${promotedAt} order by started_at limit 1`, db);
        return rows[0] ? Number(rows[0].started_at) : undefined;
      }, 30_000, 100);
      await waitFor('the long body to end', () => cluster.effects().some((e) => e.key === long.key && e.ev === 'end'), 30_000);
      figures.push(`round ${round + 1} (${round === 0 ? 'crash' : 'switchover'}): stop -> promoted ${promotedAt - crashedAt} ms, promoted -> first run recorded ${first - promotedAt} ms`);
      // The old primary back as a standby of the new one, synchronous again, for the next round.
      await pair.rejoin(old);
    }
    const t1 = Date.now() - 3000;
    await waitFor('every second of the window to have started', () => {
      const started = new Set(cluster.effects().filter((e) => e.ev === 'start').map((e) => e.key));
      return secondsBetween(t0, t1).every((iso) => started.has(`tick@${iso}`));
    }, 60_000, 250);
    const exits = await cluster.stopAll();
    const effects: Effect[] = cluster.effects();
    console.log(`pg failover: ${figures.join('; ')}`);

    expect(exits, 'no daemon exits').toEqual([0, 0, 0]);
    expect(duplicateStarts(effects), 'no attempt started twice').toEqual([]);
    const ticks = effects.filter((e) => e.ev === 'start' && e.key.startsWith('tick@'));
    expect(new Set(ticks.map((e) => e.key)).size, 'no tick period ran twice').toBe(ticks.length);
    const runs = await cluster.history();
    const rowKeys = new Set(runs.map((r) => `${r.periodKey}#${r.attempt}`));
    expect(effects.filter((e) => e.ev === 'start' && !rowKeys.has(`${e.key}#${e.attempt}`)), 'every start has its row on the new primary').toEqual([]);
    expect(runs.filter((r) => r.status === 'running' || r.status === 'pending')).toEqual([]);
    // Each long body that started ran once and is recorded succeeded (a failover of 2 s is within its 30 s lease).
    const longKeys = [...new Set(effects.filter((e) => e.key.startsWith('long@')).map((e) => e.key))];
    for (const k of longKeys) {
      expect(effects.filter((e) => e.key === k && e.ev === 'start').length, `${k} once`).toBe(1);
      expect(runs.filter((r) => r.periodKey === k).map((r) => `${r.attempt} ${r.status}`), k).toEqual(['1 succeeded']);
    }
  });
});
