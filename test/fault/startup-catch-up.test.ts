/**
 * The start-up catch-up after a full-cluster outage: three nodes, every one of them down for 7 s
 * (kill -9, or a clean SIGTERM stop), then one node back. Every-2-s jobs: `catchUp: 1m` with
 * `coalesce: false` and `true`, and one whose `catchUp` (3 s) is shorter than the outage.
 *
 * Judged per outage from the bodies' own records and from `history --json`: the periods nobody
 * claimed (no row when the last node went down, up to the first period the restarted node's tick ran)
 * each have a row; without coalesce each ran once, as catch-up, in order; with coalesce exactly one
 * ran, the latest, and the others are recorded skipped (coalesced); with the short catchUp those
 * older than 3 s at the restart are recorded skipped (missed) and the others ran. Over the whole
 * test: no period without a row, no attempt started twice, no finished body run again.
 *
 * Real daemons, a MariaDB database of its own, three Redis masters started here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import type { HistoryRun } from '../helpers/workspace.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster, attemptJob, duplicateStarts, type Effect } from './harness.js';

let redis: RedisServer[] = [];
let db: TestDatabase | undefined;
let ws: Workspace | undefined;
let cluster: Cluster | undefined;

beforeAll(async () => {
  redis = await startRedisServers(3);
  db = await createMariaDb('cron_startup');
});

afterAll(async () => {
  await cluster?.killAll();
  await Promise.all(redis.map((r) => r.cleanup()));
  await db?.drop();
  ws?.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const EVERY_MS = 2000;
const OUTAGE_MS = 7000;
const SLOTS = ['s1', 's2', 's3'];
/** Job name -> catchUp (ms) and coalesce. */
const JOBS = { plain: { catchUpMs: 60_000, coalesce: false }, coal: { catchUpMs: 60_000, coalesce: true }, short: { catchUpMs: 3000, coalesce: false } } as const;
type JobName = keyof typeof JOBS;

const instant = (r: HistoryRun) => new Date(r.scheduledAt).getTime();

/** The instants of `job`'s periods (every 2 s) in [from, to]. */
function periods(from: number, to: number): number[] {
  const out: number[] = [];
  for (let t = Math.ceil(from / EVERY_MS) * EVERY_MS; t <= to; t += EVERY_MS) out.push(t);
  return out;
}

/** Per job: period instant -> its rows. */
function rowsByPeriod(history: HistoryRun[]): Map<string, Map<number, HistoryRun[]>> {
  const out = new Map<string, Map<number, HistoryRun[]>>();
  for (const r of history) {
    const m = out.get(r.job) ?? new Map<number, HistoryRun[]>();
    out.set(r.job, m);
    m.set(instant(r), [...(m.get(instant(r)) ?? []), r]);
  }
  return out;
}

interface Outage {
  how: 'kill -9' | 'SIGTERM';
  /** Per job: the latest period with a row while every node was down. */
  lastRow: Map<string, number>;
  /** When the restarted node logged 'scheduler started' (its tick starts about then). */
  startedAt: number;
}

describe('fault: the start-up catch-up after a full-cluster outage', () => {
  it('4 outages of 7 s (kill -9 and SIGTERM), one node back each time: every missed period has its row; without coalesce each runs once in order, with coalesce exactly the latest once', async () => {
    ws = new Workspace('cron-fault-startup-');
    for (const [name, { catchUpMs, coalesce }] of Object.entries(JOBS)) {
      ws.writeJob(`${name}.mjs`, attemptJob({ schedule: '*/2 * * * * *', durationsMs: [200], extra: { catchUp: `${catchUpMs / 1000}s`, coalesce, lockTtl: '2s' } }));
    }
    // Fresh ids: the dead nodes stay listed alive for up to 15 s, so the restarted node ranks below them.
    cluster = new Cluster(ws, { SCHEDULER_STORE: db!.url, SCHEDULER_REDIS: redis.map((r) => r.url).join(','), SCHEDULER_REDIS_PREFIX: `startup-${Date.now()}:` }, { freshIds: true });
    const c = cluster;
    await c.startAll(SLOTS);
    const firstStart = Date.now();
    const outages: Outage[] = [];
    for (const [round, how] of (['kill -9', 'SIGTERM', 'kill -9', 'SIGTERM'] as const).entries()) {
      // Each job has run on schedule for a few periods on the full cluster.
      await sleep(4000);
      if (how === 'kill -9') await Promise.all(SLOTS.map((s) => c.kill(s)));
      else expect(await c.stopAll()).toEqual([0, 0, 0]);
      const down = Date.now();
      const during = rowsByPeriod(await c.history());
      const lastRow = new Map(Object.keys(JOBS).map((job) => [job, Math.max(...(during.get(job)?.keys() ?? [0]))]));
      await sleep(Math.max(0, OUTAGE_MS - (Date.now() - down)));
      const slot = SLOTS[round % SLOTS.length]!;
      const node = c.start(slot);
      await c.started(slot);
      const startedAt = Number(new Date(String(node.logs().find((l) => l.msg === 'scheduler started')?.time)).getTime());
      outages.push({ how, lastRow, startedAt });
      // Every period up to the start has its row, then the other nodes come back.
      await waitFor(`the periods up to the restart (${how}) to have rows`, async () => {
        const rows = rowsByPeriod(await c.history());
        return Object.keys(JOBS).every((job) => periods(lastRow.get(job)!, startedAt).every((p) => rows.get(job)?.has(p)));
      }, 20_000, 500);
      await Promise.all(SLOTS.filter((s) => s !== slot).map((s) => c.start(s).waitStarted()));
    }
    await sleep(4000);
    const end = Date.now();
    expect(await c.stopAll()).toEqual([0, 0, 0]);

    const history = await c.history();
    const rows = rowsByPeriod(history);
    const effects: Effect[] = c.effects();
    const starts = (job: string, p: number) => effects.filter((e) => e.ev === 'start' && e.key === `${job}@${new Date(p).toISOString()}`);
    const report: string[] = [];

    // No period of the whole test without a row (the last 3 s before the stop may be unclaimed).
    const withoutRow = Object.keys(JOBS).flatMap((job) => periods(firstStart + EVERY_MS, end - 3000).filter((p) => !rows.get(job)?.has(p)).map((p) => `${job}@${new Date(p).toISOString()}`));
    expect(withoutRow).toEqual([]);
    expect(duplicateStarts(effects)).toEqual([]);
    // A body that finished never runs again (a killed one may: attempt 2).
    const ends = new Map<string, number>();
    for (const e of effects) if (e.ev === 'end') ends.set(e.key, (ends.get(e.key) ?? 0) + 1);
    expect([...ends].filter(([, n]) => n > 1)).toEqual([]);

    for (const o of outages) {
      for (const job of Object.keys(JOBS) as JobName[]) {
        const byP = rows.get(job)!;
        // The periods nobody claimed: after the last row of the outage, before the first period the
        // restarted node's tick ran (trigger schedule).
        const firstScheduled = Math.min(...[...byP].filter(([p, rs]) => p > o.lastRow.get(job)! && rs.some((r) => r.trigger === 'schedule')).map(([p]) => p));
        expect(Number.isFinite(firstScheduled), `${o.how} ${job}: a scheduled period after the start`).toBe(true);
        const missed = periods(o.lastRow.get(job)! + 1, firstScheduled - 1);
        const describe = missed.map((p) => `${new Date(p).toISOString().slice(11, 19)} ${byP.get(p)!.map((r) => `${r.status}${r.reason ? `(${r.reason})` : ''}/${r.trigger}`).join(',')} bodies ${starts(job, p).length}`);
        report.push(`${o.how} ${job}: ${describe.join(' | ')}`);
        // A 7 s outage leaves three or four periods to catch up; the tick takes over at the start.
        expect(missed.length, `${o.how} ${job}`).toBeGreaterThanOrEqual(3);
        // The tick takes over within a period or two of the start: a start-up on a loaded machine (CI,
        // once: 3.9 s) may leave its first due period to the catch-up, which the checks below judge
        // like the others (a row, trigger catch-up, run once).
        expect(firstScheduled - o.startedAt, `${o.how} ${job}: first scheduled period after the start`).toBeLessThanOrEqual(2 * EVERY_MS + 1000);
        for (const p of missed) expect(byP.get(p)!.every((r) => r.trigger === 'catch-up'), `${o.how} ${job}@${p}`).toBe(true);
        const ran = missed.filter((p) => starts(job, p).length > 0);
        if (job === 'plain') {
          expect(ran, `${o.how} ${job}: every missed period ran`).toEqual(missed);
          for (const p of missed) expect(byP.get(p)!.map((r) => r.status), `${o.how} ${job}@${p}`).toEqual(['succeeded']);
          // In order: each caught-up body started after the one before it.
          const at = missed.map((p) => starts(job, p)[0]!.t);
          expect(at, `${o.how} ${job}: in order`).toEqual([...at].sort((a, b) => a - b));
        } else if (job === 'coal') {
          // The latest missed period ran, once. Each other one is recorded skipped (coalesced) behind a
          // later one that ran, unless it was itself the latest when a catch-up pass ran it: a start-up
          // on a loaded machine that leaves its first due period to a second pass (see above) runs
          // the latest of each pass (once seen in CI: 04 by the start-up pass, then 06 by the next).
          expect(ran.at(-1), `${o.how} ${job}: the latest missed period ran`).toBe(missed.at(-1));
          expect(ran.length, `${o.how} ${job}: the latest of each catch-up pass ran, no more`).toBeLessThanOrEqual(2);
          for (const p of ran) expect(starts(job, p).length, `${o.how} ${job}@${p} once`).toBe(1);
          for (const p of missed.filter((m) => !ran.includes(m))) {
            expect(byP.get(p)!.map((r) => `${r.status}/${r.reason}`), `${o.how} ${job}@${p}`).toEqual(['skipped/coalesced']);
            expect(ran.some((r) => r > p), `${o.how} ${job}@${p}: coalesced behind a later period that ran`).toBe(true);
          }
        } else {
          // catchUp 3 s: older than that at the restart, missed; the others ran.
          for (const p of missed) {
            const expected = p < o.startedAt - JOBS.short.catchUpMs - 1000 ? ['skipped/missed'] : p > o.startedAt - JOBS.short.catchUpMs + 1000 ? ['succeeded/null'] : undefined;
            if (expected) expect(byP.get(p)!.map((r) => `${r.status}/${r.reason}`), `${o.how} ${job}@${p}`).toEqual(expected);
          }
        }
      }
    }
    console.log(report.join('\n'));
    // After each restart, the periods ranked to the dead nodes (still listed alive) ran on schedule,
    // stepped in for, not left to the sweep's catch-up. A node joining the live cluster may catch up
    // a period of the second before its own start that the others had not claimed yet (once).
    const startOf = new Map(c.all.map((d) => [d.nodeId, new Date(String(d.logs().find((l) => l.msg === 'scheduler started')?.time)).getTime()]));
    const lateCatchUps = history.filter((r) => r.trigger === 'catch-up'
      && !outages.some((o) => instant(r) > o.lastRow.get(r.job)! && instant(r) <= o.startedAt + 500)
      && !(instant(r) <= startOf.get(r.nodeId)! && instant(r) >= startOf.get(r.nodeId)! - EVERY_MS));
    expect(lateCatchUps.map((r) => `${r.periodKey} ${r.status} ${r.nodeId}`)).toEqual([]);
  }, 170_000);
});
