/**
 * A store outage longer than the lease (issue 20, item 1): three daemons on MariaDB through a proxy
 * that cuts the store for 60 s while bodies run. A body that finishes during the outage (before its
 * node self-fences, or ignoring its signal) must be recorded `succeeded` by its own node when the
 * store comes back, and never run again; a body that ended by its signal is `abandoned` with the next
 * attempt owed. Counted from the bodies' own records.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster, StoreProxy, attemptJob, duplicateStarts, soonSchedule, type Effect } from './harness.js';

const dbs: TestDatabase[] = [];
const workspaces: Workspace[] = [];
const clusters: Cluster[] = [];
const proxies: StoreProxy[] = [];

afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stopAll()));
  for (const p of proxies) await p.close();
  for (const db of dbs) await db.drop();
  for (const w of workspaces) w.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A body that does not listen to its signal: it records 'start', works `ms`, records 'end' (and whether its signal had aborted). */
function deafJob(fields: Record<string, unknown>, ms: number): string {
  return `import { appendFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
export default {
${Object.entries(fields).map(([k, v]) => `  ${k}: ${JSON.stringify(v)},`).join('\n')}
  async run(ctx) {
    const me = { key: ctx.periodKey, attempt: ctx.attempt, node: ctx.nodeId, pid: process.pid };
    rec({ ev: 'start', ...me, trigger: ctx.trigger, sched: ctx.scheduledAt.getTime() });
    await new Promise((r) => setTimeout(r, ${ms}));
    rec({ ev: 'end', ...me, reason: ctx.signal.aborted ? String(ctx.signal.reason) : undefined });
    return { ok: true };
  },
};
`;
}

const CUT_MS = Number(process.env.STORE_OUTAGE_MS ?? 60_000);

describe('fault: store outage longer than the lease', () => {
  it(`a ${CUT_MS / 1000} s cut while bodies run: every body that finished meanwhile is recorded succeeded by its own node and runs once`, async () => {
    const db = await createMariaDb('cron_outage');
    dbs.push(db);
    const proxy = new StoreProxy(Number(new URL(db.url).port || 3306));
    proxies.push(proxy);
    await proxy.start();
    const ws = new Workspace('cron-outage-');
    workspaces.push(ws);
    const cluster = new Cluster(ws, { SCHEDULER_STORE: proxy.urlFor(db.url) });
    clusters.push(cluster);
    // Every job fires once a minute at the same second, about 8 s after this line; the cut starts
    // 1 s after the bodies start. The next minute's period falls in the cut: it is caught up once.
    const { schedule, first } = soonSchedule(8000, 60);
    const common = { schedule, catchUp: '5m' };
    // Lease 2 s, the body ends 5 s into the cut, long after its node self-fenced (it ignores the signal).
    ws.writeJob('deaf-short.mjs', deafJob({ ...common, lockTtl: '2s' }, 6000));
    // The default lease (30 s), the body ends 5 s into the cut, within it.
    ws.writeJob('deaf-default.mjs', deafJob(common, 6000));
    // Lease 2 s, the body ends half a second into the cut, before its node self-fences.
    ws.writeJob('quick.mjs', deafJob({ ...common, lockTtl: '2s' }, 1500));
    // Lease 2 s, a body that stops when its signal aborts: abandoned, the next attempt owed and run.
    ws.writeJob('obedient.mjs', attemptJob({ schedule, durationsMs: [6000, 300], extra: { lockTtl: '2s', catchUp: '5m' } }));
    const names = ['deaf-short', 'deaf-default', 'quick', 'obedient'];
    for (const n of ['o1', 'o2', 'o3']) cluster.start(n);
    await Promise.all(['o1', 'o2', 'o3'].map((n) => cluster.started(n)));
    const key = (job: string) => `${job}@${new Date(first).toISOString()}`;
    await waitFor('every body to start', () => names.every((j) => cluster.effects().some((e) => e.ev === 'start' && e.key === key(j))), 30_000);
    const startedAt = Math.max(...cluster.effects().filter((e) => e.ev === 'start').map((e) => e.t));
    await sleep(Math.max(0, startedAt + 1000 - Date.now()));
    await proxy.cut();
    const cutAt = Date.now();
    await sleep(CUT_MS);
    await proxy.restore();
    const backAt = Date.now();
    // Everything of the first period settles: the finished bodies' outcomes, the obedient job's attempt 2.
    const settled = async () => {
      const runs = (await cluster.history()).filter((r) => names.some((j) => r.periodKey === key(j)));
      return runs.length >= names.length && runs.every((r) => r.status !== 'running' && r.status !== 'pending') ? runs : undefined;
    };
    const runs = await waitFor('the first period of every job to settle', settled, 60_000, 250);
    // The next minute's period (in the cut) is caught up once; wait for it too, then stop.
    const second = new Date(first + 60_000).toISOString();
    await waitFor('the period missed in the cut to be caught up', () => names.every((j) => cluster.effects().some((e) => e.ev === 'start' && e.key === `${j}@${second}`)), 60_000);
    await waitFor('the caught-up bodies to end', () => names.every((j) => cluster.effects().some((e) => e.ev === 'end' && e.key === `${j}@${second}`)), 60_000);
    await sleep(1000);
    const exits = await cluster.stopAll();
    const effects: Effect[] = cluster.effects();
    const history = await cluster.history();
    const shown = (j: string) => runs.filter((r) => r.periodKey === key(j)).sort((a, b) => a.attempt - b.attempt).map((r) => `${r.attempt} ${r.status} ${r.nodeId}`);
    const ends = (j: string) => effects.filter((e) => e.ev === 'end' && e.key === key(j));
    console.log(`store outage ${CUT_MS} ms (cut at +${cutAt - first} ms, back at +${backAt - first} ms):`,
      names.map((j) => `${j}: [${shown(j).join(', ')}]`).join('; '));

    expect(exits, 'no node exits').toEqual([0, 0, 0]);
    expect(duplicateStarts(effects), 'no attempt started twice').toEqual([]);
    // The bodies that finished during the cut: one start, one end, recorded succeeded by the node that ran them.
    for (const j of ['deaf-short', 'deaf-default', 'quick']) {
      const starts = effects.filter((e) => e.ev === 'start' && e.key === key(j));
      expect(starts.map((e) => e.attempt), `${j}: started once`).toEqual([1]);
      expect(ends(j).length, `${j}: finished once`).toBe(1);
      expect(ends(j)[0]!.t, `${j}: finished during the cut`).toBeGreaterThan(cutAt);
      expect(ends(j)[0]!.t).toBeLessThan(backAt);
      expect(shown(j), `${j}: recorded succeeded by its own node`).toEqual([`1 succeeded ${starts[0]!.node}`]);
    }
    // The body that ended by its signal: abandoned by its own node, then attempt 2 once.
    const obedient = runs.filter((r) => r.periodKey === key('obedient')).sort((a, b) => a.attempt - b.attempt);
    expect(obedient.map((r) => [r.attempt, r.status, r.reason])).toEqual([[1, 'abandoned', 'lease-lost'], [2, 'succeeded', null]]);
    expect(effects.filter((e) => e.key === key('obedient')).map((e) => `${e.ev} ${e.attempt}`)).toEqual(['start 1', 'abort 1', 'start 2', 'end 2']);
    // Nothing was left running, and the missed period ran once (the catch-up).
    expect(history.filter((r) => r.status === 'running' || r.status === 'pending')).toEqual([]);
    for (const j of names) expect(effects.filter((e) => e.ev === 'start' && e.key === `${j}@${second}`).length, `${j}@${second} once`).toBe(1);
  });
});
