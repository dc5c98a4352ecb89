/**
 * The chaos soak's judge (test/harness/chaos.mjs `analyse`) on a hand-made history: a body's end record
 * whose row ended abandoned is a violation, unless its node logged that it gave that outcome up at
 * the shutdown's deadline (stopped while the store was away: the README's known limit).
 */
import { describe, expect, it } from 'vitest';
import { analyse, CHAOS_JOBS, outcomesGivenUp, planFaults } from '../harness/chaos.mjs';

const t = Date.parse('2026-12-01T16:11:55.000Z');
const key = 'slow@2026-12-01T16:11:55.000Z';
const history = {
  effects: [
    { key, attempt: 1, ev: 'start', t, pid: 7, node: 'c3' },
    { key, attempt: 1, ev: 'end', t: t + 2500, pid: 7, node: 'c3' },
    { key, attempt: 2, ev: 'start', t: t + 9000, pid: 8, node: 'c1' },
    { key, attempt: 2, ev: 'end', t: t + 11_000, pid: 8, node: 'c1' },
  ],
  runs: [
    { periodKey: key, job: 'slow', attempt: 1, status: 'abandoned', nodeId: 'c3', scheduledAt: new Date(t).toISOString() },
    { periodKey: key, job: 'slow', attempt: 2, status: 'succeeded', nodeId: 'c1', scheduledAt: new Date(t).toISOString() },
  ],
  jobs: CHAOS_JOBS, windowFrom: t + 1e9, windowTo: t + 1e9, judgedTo: t + 1e9,
  // Stopped by SIGTERM (not killed) a second after the body ended.
  deaths: new Map([[7, t + 3500]]), kills: new Map(), pauses: [], settledAt: t + 20_000,
};

describe('chaos analysis: an end record whose row was abandoned', () => {
  it('is a history mismatch when nothing explains it', () => {
    expect(analyse(history).violations['history-mismatch']).toEqual([`${key}#1: end record (c3), row abandoned`]);
  });

  it('is excused when its node logged that it gave the outcome up at the shutdown deadline', () => {
    const gaveUp = outcomesGivenUp([
      { msg: 'shutdown: the outcome could not be written before the deadline; the row stays running and is taken over once its lease runs out', periodKey: key, attempt: 1 },
      { msg: 'run succeeded', periodKey: key, attempt: 2 },
    ]);
    expect([...gaveUp]).toEqual([`${key}#1`]);
    expect(analyse({ ...history, gaveUp }).violations['history-mismatch']).toBeUndefined();
  });
});

describe('chaos plan: everyKind (the test soak\'s 45 s)', () => {
  it('plans every fault kind within 45 s, whatever the seed', () => {
    const kinds = ['kill9', 'pause', 'term', 'redis', 'store'];
    for (let seed = 0; seed < 2000; seed++) {
      const plan = planFaults(seed, 45_000, { everyKind: true });
      expect(kinds.filter((k) => !plan.some((f) => f.kind === k)), `seed ${seed}`).toEqual([]);
      expect(plan.every((f) => f.at < 43_000), `seed ${seed}: a fault too late in the phase`).toBe(true);
    }
  });

  it('on a replicated store the store\'s fault is a failover; pg-async keeps node deaths and empty Redis majorities away from it', () => {
    for (const engine of ['pg-sync', 'pg-async', 'galera'] as const) {
      for (let seed = 0; seed < 300; seed++) {
        const plan = planFaults(seed, 120_000, { everyKind: true, engine });
        expect(plan.some((f) => f.kind === 'store'), `${engine} seed ${seed}: no proxy cut`).toBe(false);
        if (seed < 100) expect(plan.some((f) => f.kind === 'failover'), `${engine} seed ${seed}: a failover`).toBe(true);
        for (const f of plan.filter((g) => g.kind === 'failover')) {
          expect(f.mode, `${engine} seed ${seed}`).toEqual(engine === 'galera' ? expect.stringMatching(/^(kill|partition)$/) : 'crash');
          if (engine !== 'pg-async') continue;
          expect(f.cutMs).toBeGreaterThanOrEqual(2000);
          const from = f.at - 10_000;
          const to = f.at + f.cutMs! + f.downMs! + 10_000;
          const deaths = plan.filter((g) => (g.kind === 'kill9' || g.kind === 'term') && g.at < to && g.at + g.downMs! + 4000 > from);
          expect(deaths, `pg-async seed ${seed}: a node death near the failover at ${f.at}`).toEqual([]);
        }
        if (engine === 'pg-async') expect(plan.filter((g) => g.kind === 'redis' && g.mode === 'kill' && g.masters!.length >= 2), `pg-async seed ${seed}`).toEqual([]);
      }
    }
    // MariaDB's plans are drawn as before the engines existed (seeds replay).
    expect(planFaults(101, 120_000, { engine: 'mariadb' })).toEqual(planFaults(101, 120_000));
  });

  it('leaves the plan of a seed without everyKind as it was (replays of older seeds)', () => {
    expect(planFaults(7, 60_000).map((f) => f.kind)).toEqual(planFaults(7, 60_000, { everyKind: false }).map((f) => f.kind));
  });
});
