/**
 * Rendezvous ranking of periods over the live nodes: every node computes the same order, so each
 * period has exactly one first-ranked and one second-ranked node, and the shares are even.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { nodeSeed, rankOf, Racers } from '../../src/claim/racers.js';
import type { ListedNode } from '../../src/store/types.js';

const silent = pino({ level: 'silent' });
const keys = (n: number) => Array.from({ length: n }, (_, i) => `job-${i % 2000}@${new Date(Date.UTC(2026, 11, 1, 0, 0, Math.floor(i / 2000))).toISOString()}`);

function listed(id: string, state: ListedNode['state'] = 'running', alive = true): ListedNode {
  return { id, host: 'h', pid: 1, version: 'v', startedAt: 0, heartbeatAt: 0, inFlight: 0, clockOffsetMs: 0, state, procStart: null, storeHost: null, jobSet: null, heartbeatAgeMs: 0, alive };
}

describe('rendezvous ranking', () => {
  it('over 4 nodes, each period has exactly one node of each rank 0..3', () => {
    const ids = ['node-a', 'node-b', 'node-c', 'node-d'];
    const seeds = ids.map(nodeSeed);
    for (const key of keys(5000)) {
      const ranks = seeds.map((s) => rankOf(key, s, seeds)).sort();
      expect(ranks).toEqual([0, 1, 2, 3]);
    }
  });

  it('shares of first-ranked periods are within 5% of the mean, for 2,000 every-second jobs over 10 s', () => {
    for (const ids of [['n1', 'n2', 'n3', 'n4'], ['web-0', 'web-1', 'web-2'], ['a', 'b']]) {
      const seeds = ids.map(nodeSeed);
      const won = new Map<number, number>();
      const all = keys(20_000);
      for (const key of all) {
        const first = seeds.find((s) => rankOf(key, s, seeds) === 0)!;
        won.set(first, (won.get(first) ?? 0) + 1);
      }
      const mean = all.length / ids.length;
      for (const s of seeds) expect(Math.abs((won.get(s) ?? 0) - mean) / mean, `${ids.join(',')}`).toBeLessThan(0.05);
    }
  });

  it('removing a node moves only its periods: the others keep their first-ranked node', () => {
    const ids = ['n1', 'n2', 'n3', 'n4'];
    const seeds = ids.map(nodeSeed);
    const without = seeds.slice(0, 3);
    let moved = 0;
    for (const key of keys(4000)) {
      const before = seeds.find((s) => rankOf(key, s, seeds) === 0)!;
      const after = without.find((s) => rankOf(key, s, without) === 0)!;
      if (before !== seeds[3]) expect(after).toBe(before);
      else {
        moved += 1;
        // The period of the removed node goes to the node that ranked second for it, which steps in.
        expect(rankOf(key, after, seeds)).toBe(1);
      }
    }
    expect(moved).toBeGreaterThan(0);
  });
});

describe('Racers (the live nodes of the nodes table)', () => {
  it('ranks over the running, alive nodes and always itself; a lone node ranks 0 for everything', async () => {
    let rows: ListedNode[] = [];
    const racers = new Racers('n1', { list: async () => rows }, silent);
    expect(racers.size).toBe(1);
    expect(keys(100).every((k) => racers.rank(k) === 0)).toBe(true);
    rows = [listed('n2'), listed('n3', 'stopping'), listed('n4', 'running', false)];
    await racers.refresh();
    // Itself (not yet in the table) and n2; n3 is stopping, n4's heartbeat is stale.
    expect(racers.size).toBe(2);
    const seeds = ['n1', 'n2'].map(nodeSeed);
    for (const k of keys(200)) expect(racers.rank(k)).toBe(rankOf(k, nodeSeed('n1'), seeds));
  });

  it('a node is proven alive by a heartbeat after this node began; until then, a node ranked below it steps in (firstProven)', async () => {
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const age = new Map([['n2', 60_000], ['n3', 60_000]]);
    // Both started an hour before their last beat.
    const racers = new Racers('n1', { list: async () => ['n2', 'n3'].map((id) => ({ ...listed(id), startedAt: -3_600_000, heartbeatAgeMs: age.get(id)! })) }, silent, 0);
    await sleep(20);
    await racers.refresh();
    expect(racers.size).toBe(3);
    // Both beat before n1 began (a cluster killed, n1 the first back): unproven, so n1 is the first
    // node known alive for every period and steps in for all of them.
    expect(racers.unsure).toBe(true);
    expect(keys(300).every((k) => racers.firstProven(k))).toBe(true);
    // n2 beats: the periods n2 ranks ahead of n1 are n2's (or its second-ranked node's) again.
    age.set('n2', 0);
    await racers.refresh();
    expect(racers.unsure).toBe(true);
    const seeds = ['n1', 'n2'].map(nodeSeed);
    for (const k of keys(300)) expect(racers.firstProven(k)).toBe(rankOf(k, nodeSeed('n1'), seeds) === 0);
    age.set('n3', 0);
    await racers.refresh();
    expect(racers.unsure).toBe(false);
  });

  it('nodes started together count as alive: one that registered seconds before this node began is proven', async () => {
    // n2 registered 2 s before its read (n1 began just now) and has not beaten since; n3 registered
    // an hour ago and beat 2 s ago, before n1 began.
    const racers = new Racers('n1', { list: async () => [
      { ...listed('n2'), startedAt: 0, heartbeatAt: 0, heartbeatAgeMs: 2000 },
      { ...listed('n3'), startedAt: -3_600_000, heartbeatAt: 0, heartbeatAgeMs: 2000 },
    ] }, silent, 0);
    await racers.refresh();
    expect(racers.unsure).toBe(true);
    const seeds = ['n1', 'n2'].map(nodeSeed);
    for (const k of keys(300)) expect(racers.firstProven(k)).toBe(rankOf(k, nodeSeed('n1'), seeds) === 0);
  });

  it('a failed read keeps the last list and does not throw', async () => {
    let fail = false;
    const racers = new Racers('n1', { list: async () => { if (fail) throw new Error('store down'); return [listed('n1'), listed('n2'), listed('n3')]; } }, silent, 0);
    await racers.refresh();
    expect(racers.size).toBe(3);
    fail = true;
    await expect(racers.refresh()).resolves.toBeUndefined();
    expect(racers.size).toBe(3);
  });
});
