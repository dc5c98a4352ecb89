/**
 * `shards: N` and `jitter` on a real cluster: three `bin/scheduler run` nodes on one MariaDB database
 * and a Redis master, counted from the bodies' own side effects (lines they append), never from the
 * scheduler's rows alone. One cluster serves three jobs, to keep the wall time small:
 *
 * - `sharded`: every second, 4 shards. Each (period, shard) runs once, none is missing, and the
 *   shards are spread: at least 2 nodes win shards (reported per period too).
 * - `jittered`: every 2 seconds, jitter 1500ms. Each period once, its body started at the instant +
 *   the delay derived from its key (history's startedAt - scheduledAt, and the body's own clock).
 * - `held`: every 4 seconds, 3 shards of 2.5 s each in worker threads (ctx.shard crosses into the
 *   worker), lockTtl 2s. A node running one of its shards is
 *   killed (-9): that shard alone is taken over (attempt 2 on another node, run to its end), the
 *   period's other shards are not run again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jitterDelayMs } from '../../src/time/jitter.js';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { runCli } from '../helpers/cli.js';
import { Cluster } from '../fault/harness.js';
import { instantOf } from './cluster-scenario.js';

const SHARDED = `
import { appendFileSync } from 'node:fs';
export default {
  schedule: '* * * * * *',
  shards: 4,
  catchUp: '30s',
  // Overlap 'skip' (the default) is judged by the store: on a loaded machine the previous period's
  // outcome can land after this period's claim, and the shard is then rightly skipped. This test is
  // about spreading and once-per-shard; per-shard overlap is tested in test/contract/shard-runs.test.ts.
  overlap: 'allow',
  async run(ctx) {
    appendFileSync(process.env.SHARD_EFFECTS, [ctx.periodKey, ctx.shard.index, ctx.shard.count, ctx.nodeId, ctx.attempt].join(' ') + '\\n');
    await new Promise((r) => setTimeout(r, 50));
    return { shard: ctx.shard.index };
  },
};
`;

const JITTERED = `
import { appendFileSync } from 'node:fs';
export default {
  schedule: '*/2 * * * * *',
  jitter: '1500ms',
  catchUp: '30s',
  run(ctx) {
    appendFileSync(process.env.JITTER_EFFECTS, [ctx.periodKey, ctx.nodeId, ctx.attempt, Date.now()].join(' ') + '\\n');
  },
};
`;

const HELD = `
import { appendFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.HELD_EFFECTS, JSON.stringify(o) + '\\n');
export default {
  schedule: '*/4 * * * * *',
  shards: 3,
  lockTtl: '2s',
  isolation: 'worker',
  catchUp: '30s',
  async run(ctx) {
    const me = { key: ctx.periodKey, shard: ctx.shard.index, attempt: ctx.attempt, node: ctx.nodeId };
    rec({ ev: 'start', ...me });
    await new Promise((r) => setTimeout(r, 2500));
    rec({ ev: 'end', ...me });
  },
};
`;

interface HeldEffect { ev: 'start' | 'end'; key: string; shard: number; attempt: number; node: string }

const NODES = ['node-1', 'node-2', 'node-3'];
// 12 every-second periods (48 (period, shard) pairs, 6 jittered periods) show once-only, no gap and the
// spread as well as 20 did, 8 s sooner.
const PERIODS = 12;

describe('shards and jitter on 3 nodes (MariaDB, Redis)', () => {
  let db: TestDatabase | undefined;
  let redis: RedisServer[] = [];
  const ws = new Workspace('cron-shards-');
  let cluster: Cluster | undefined;

  beforeAll(async () => {
    [db, redis] = await Promise.all([createMariaDb('cron_it_shards'), startRedisServers(1)]);
  });

  afterAll(async () => {
    await cluster?.killAll();
    await Promise.all(redis.map((r) => r.cleanup()));
    await db?.drop();
    ws.cleanup();
  });

  it(`4 shards over ${PERIODS} periods: each (period, shard) once, none missing, at least 2 nodes win shards; jittered starts; a killed node's shard alone taken over`, async () => {
    ws.writeJob('sharded.mjs', SHARDED);
    ws.writeJob('jittered.mjs', JITTERED);
    ws.writeJob('held.mjs', HELD);
    const env = {
      SCHEDULER_STORE: db!.url,
      SCHEDULER_REDIS: redis.map((r) => r.url).join(','),
      SHARD_EFFECTS: ws.path('shards.txt'),
      JITTER_EFFECTS: ws.path('jitter.txt'),
      HELD_EFFECTS: ws.path('held.jsonl'),
    };
    cluster = new Cluster(ws, env);
    for (const id of NODES) cluster.start(id);
    try {
      await Promise.all(NODES.map((id) => cluster!.started(id)));
      const allUpAt = Date.now();
      const shardLines = () => ws.lines('shards.txt').map((l) => {
        const [key, index, count, node, attempt] = l.split(' ');
        return { key: key!, index: Number(index), count: Number(count), node: node!, attempt: Number(attempt) };
      });
      // Phase 1: PERIODS whole periods of the sharded job, every node up.
      await waitFor(`${PERIODS} periods of the sharded job`, () => {
        const keys = new Set(shardLines().filter((s) => instantOf(s.key) >= allUpAt + 1000).map((s) => s.key));
        return keys.size >= PERIODS;
      }, PERIODS * 1000 + 30_000, 250);
      const phase1End = Date.now();

      // Phase 2: kill -9 a node while it runs a shard of `held` (a period's shard started, not ended).
      const held = () => ws.records<HeldEffect>('held.jsonl');
      const victim = await waitFor('a node running a shard of held', () => {
        const all = held();
        const open = all.filter((e) => e.ev === 'start' && e.attempt === 1
          && !all.some((x) => x.ev === 'end' && x.key === e.key && x.shard === e.shard && x.attempt === e.attempt));
        return open[0];
      }, 30_000, 50);
      const killedAt = await cluster.kill(victim.node);
      // Its shard is taken over: attempt 2 on another node runs to its end.
      await waitFor(`attempt 2 of ${victim.key} shard ${victim.shard} to end`, () =>
        held().find((e) => e.ev === 'end' && e.key === victim.key && e.shard === victim.shard && e.attempt === 2), 30_000, 100);
      const codes = await cluster.stopOthers([victim.node]);
      expect(codes).toEqual([0, 0]);
      const runs = await cluster.history();

      // --- sharded ---
      const lines = shardLines();
      const byShard = new Map<string, typeof lines>();
      for (const l of lines) {
        expect(l.count).toBe(4);
        expect(NODES).toContain(l.node);
        const k = `${l.key}#${l.index}#${l.attempt}`;
        byShard.set(k, [...(byShard.get(k) ?? []), l]);
      }
      // At most once per attempt, cluster-wide, over the whole run (the kill included).
      expect([...byShard].filter(([, v]) => v.length > 1).map(([k]) => k), '(period, shard, attempt) run twice').toEqual([]);
      // Phase 1 (no fault): every (period, shard) of every second once, attempt 1, none missing.
      const phase1 = lines.filter((l) => instantOf(l.key) >= allUpAt + 1000 && instantOf(l.key) <= phase1End - 1000);
      const instants = [...new Set(phase1.map((l) => instantOf(l.key)))].sort((a, b) => a - b);
      expect(instants.length).toBeGreaterThanOrEqual(PERIODS - 2);
      const missing: string[] = [];
      const winnersPerPeriod: number[] = [];
      for (let t = instants[0]!; t <= instants[instants.length - 1]!; t += 1000) {
        const of = phase1.filter((l) => instantOf(l.key) === t);
        for (let shard = 0; shard < 4; shard++) {
          const ran = of.filter((l) => l.index === shard);
          if (ran.length !== 1 || ran[0]!.attempt !== 1) {
            // What the store says of it, so that a failure tells skipped from never claimed.
            const rows = runs.filter((r) => r.job === 'sharded' && Date.parse(r.scheduledAt) === t && r.shard === shard)
              .map((r) => `#${r.attempt} ${r.status}${r.reason ? ` (${r.reason})` : ''} ${r.trigger} on ${r.nodeId}`);
            missing.push(`${new Date(t).toISOString()} shard ${shard}: ${ran.length} runs; rows: ${rows.join(', ') || 'none'}`);
          }
        }
        winnersPerPeriod.push(new Set(of.map((l) => l.node)).size);
      }
      expect(missing, '(period, shard) pairs of phase 1 not run exactly once').toEqual([]);
      // The store agrees: one succeeded row per (period, shard) of phase 1, its node the body's.
      const shardRows = runs.filter((r) => r.job === 'sharded' && r.status === 'succeeded');
      for (const l of phase1) {
        const row = shardRows.filter((r) => r.periodKey === l.key && r.shard === l.index);
        expect(row.map((r) => r.nodeId), `${l.key} shard ${l.index}`).toEqual([l.node]);
      }
      // Spread: at least 2 nodes won shards; and in most periods, at least 2 nodes shared the period.
      const winners = new Set(phase1.map((l) => l.node));
      const shared = winnersPerPeriod.filter((n) => n >= 2).length;
      process.stdout.write(`shards: winners ${[...winners].join(', ')}; periods shared by >= 2 nodes: ${shared}/${winnersPerPeriod.length}; nodes per period ${winnersPerPeriod.join(',')}\n`);
      expect(winners.size, `winners: ${[...winners].join(', ')}`).toBeGreaterThanOrEqual(2);
      expect(shared, `periods won by 2 nodes or more: ${winnersPerPeriod.join(',')}`).toBeGreaterThanOrEqual(Math.ceil(winnersPerPeriod.length / 2));

      // --- jittered ---
      const jittered = ws.lines('jitter.txt').map((l) => {
        const [key, node, attempt, at] = l.split(' ');
        return { key: key!, node: node!, attempt: Number(attempt), at: Number(at) };
      }).filter((j) => instantOf(j.key) >= allUpAt + 1000 && instantOf(j.key) <= phase1End - 2000);
      expect(jittered.length).toBeGreaterThanOrEqual(PERIODS / 2 - 2);
      const jKeys = jittered.map((j) => j.key);
      expect(jKeys.length, 'each jittered period once').toBe(new Set(jKeys).size);
      const jInstants = [...new Set(jKeys.map(instantOf))].sort((a, b) => a - b);
      for (let t = jInstants[0]!; t <= jInstants[jInstants.length - 1]!; t += 2000) expect(jInstants, `jittered period ${new Date(t).toISOString()}`).toContain(t);
      const delays = new Set<number>();
      for (const j of jittered) {
        expect(j.attempt).toBe(1);
        const derived = jitterDelayMs(j.key, 1500);
        delays.add(derived);
        const row = runs.find((r) => r.job === 'jittered' && r.periodKey === j.key)!;
        expect(row, j.key).toBeDefined();
        expect(row.status).toBe('succeeded');
        // The body's start as the store recorded it, and as the body saw it, is the instant + the derived delay.
        const late = Date.parse(row.startedAt!) - instantOf(j.key) - derived;
        expect(late, `${j.key}: startedAt - scheduledAt - derived ${derived}`).toBeGreaterThanOrEqual(-50);
        expect(late, `${j.key}: startedAt - scheduledAt - derived ${derived}`).toBeLessThanOrEqual(400);
        const bodyLate = j.at - instantOf(j.key) - derived;
        expect(bodyLate).toBeGreaterThanOrEqual(-50);
        expect(bodyLate).toBeLessThanOrEqual(400);
        // The claim stays at the instant (ahead of it): the row existed before the start.
        expect(Date.parse(row.claimedAt!)).toBeLessThanOrEqual(instantOf(j.key) + 300);
      }
      expect(delays.size, 'the delays differ across periods').toBeGreaterThan(1);
      expect(runs.filter((r) => r.job === 'jittered' && r.reason === 'missed')).toEqual([]);

      // --- the command line on a sharded period (the cluster stopped) ---
      const cli = (args: string[]) => runCli(args, { cwd: ws.dir, env: { ...env, SCHEDULER_JOBS_DIR: ws.jobsDir } });
      // history shows a period's shards together: each period one block of rows, a complete one 0/4..3/4.
      const text = await cli(['history', 'sharded', '--limit', '60', '--utc']);
      expect(text.code, text.stderr).toBe(0);
      const table = text.stdout.split('\n').filter((l) => /^(JOB|sharded) /.test(l));
      expect(table[0]).toMatch(/^JOB +PERIOD +SHARD +ATTEMPT/);
      const cellsOf = table.slice(1).map((l) => l.split(/ {2,}/)).map((c) => ({ period: c[1]!, shard: c[2]! }));
      const blocks: Array<{ period: string; shards: string[] }> = [];
      for (const c of cellsOf) {
        if (blocks[blocks.length - 1]?.period === c.period) blocks[blocks.length - 1]!.shards.push(c.shard);
        else blocks.push({ period: c.period, shards: [c.shard] });
      }
      expect(new Set(blocks.map((b) => b.period)).size, 'each period in one block of adjacent rows').toBe(blocks.length);
      expect(blocks.slice(0, -1).filter((b) => b.shards.join() === '0/4,1/4,2/4,3/4').length).toBeGreaterThanOrEqual(blocks.length - 4);
      // next shows a jittered job's starts: the instant + the derived delay.
      const next = await cli(['next', 'jittered', '-n', '3', '--json']);
      expect(next.code, next.stderr).toBe(0);
      const shown = JSON.parse(next.stdout) as { jitterMs: number; periods: Array<{ utc: string; start: string }> };
      expect(shown.jitterMs).toBe(1500);
      for (const p of shown.periods) expect(Date.parse(p.start) - Date.parse(p.utc)).toBe(jitterDelayMs(`jittered@${p.utc}`, 1500));
      // run-once on a sharded period: refused when every shard succeeded; --shard 1 --force runs that shard alone.
      const done = new Date(instantOf(phase1[0]!.key)).toISOString();
      const refused = await cli(['run-once', 'sharded', '--period', done]);
      expect(refused.code, refused.stderr + refused.stdout).toBe(3);
      expect(refused.stdout).toContain('already succeeded on every shard (4)');
      const one = await cli(['run-once', 'sharded', '--period', done, '--shard', '1', '--force', '--json']);
      expect(one.code, one.stderr).toBe(0);
      expect((JSON.parse(one.stdout) as { runs: Array<{ shard: number; attempt: number; status: string }> }).runs.map((r) => [r.shard, r.attempt, r.status])).toEqual([[1, 2, 'succeeded']]);
      const bad = await cli(['run-once', 'sharded', '--shard', '4']);
      expect(bad.code).toBe(2);
      expect(bad.stderr.trim().split('\n')).toEqual(["scheduler: invalid --shard 4: job 'sharded' has 4 shards (0 to 3)"]);

      // --- held: the killed node's shard alone was taken over ---
      const effects = held();
      const ofVictim = effects.filter((e) => e.key === victim.key);
      const period = runs.filter((r) => r.job === 'held' && r.periodKey === victim.key);
      const rowsOf = (shard: number) => period.filter((r) => r.shard === shard).sort((a, b) => a.attempt - b.attempt).map((r) => [r.attempt, r.status]);
      expect(rowsOf(victim.shard)).toEqual([[1, 'abandoned'], [2, 'succeeded']]);
      const taker = ofVictim.find((e) => e.ev === 'start' && e.shard === victim.shard && e.attempt === 2)!;
      expect(taker.node).not.toBe(victim.node);
      for (const shard of [0, 1, 2].filter((s) => s !== victim.shard)) {
        // Another shard of the period: one attempt; if the victim ran it too, it was taken over the same way.
        const starts = ofVictim.filter((e) => e.ev === 'start' && e.shard === shard);
        if (starts.some((e) => e.node === victim.node)) expect(rowsOf(shard)).toEqual([[1, 'abandoned'], [2, 'succeeded']]);
        else expect(rowsOf(shard), `shard ${shard} of ${victim.key}`).toEqual([[1, 'succeeded']]);
      }
      // ctx.shard reached the worker: the periods before the kill ran shards 0, 1 and 2.
      const early = effects.filter((e) => e.ev === 'end' && instantOf(e.key) < killedAt - 4000);
      for (const key of new Set(early.map((e) => e.key))) expect(early.filter((e) => e.key === key).map((e) => e.shard).sort(), key).toEqual([0, 1, 2]);
      // Every held (period, shard) that started before the kill ended, in one attempt or its takeover.
      const started = effects.filter((e) => e.ev === 'start' && e.attempt === 1 && instantOf(e.key) < killedAt - 4000);
      for (const s of started) expect(effects.some((e) => e.ev === 'end' && e.key === s.key && e.shard === s.shard), `${s.key} shard ${s.shard} ended`).toBe(true);
    } catch (err) {
      for (const [id, d] of cluster.nodes) process.stderr.write(`--- ${id} stdout (tail) ---\n${d.output.slice(-3000)}\n--- stderr ---\n${d.errors.slice(-1500)}\n`);
      throw err;
    }
  }, 180_000);
});
