/**
 * The claim protocol (Claimer) over a real store (SQLite and MariaDB) and real Redlock (3 masters
 * started here): lock first, losers stop with no query to the store; then the row, which alone
 * decides. Store calls are counted through a Proxy around a real KnexRunStore (instrumentation: every
 * call still reaches the real store).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Claimer, type ClaimResult } from '../../src/claim/claim.js';
import type { LockProvider } from '../../src/claim/lock.js';
import { NoLockProvider } from '../../src/claim/no-lock.js';
import { RedlockProvider } from '../../src/claim/redlock-provider.js';
import type { StoreConfig } from '../../src/config/config.js';
import type { Job } from '../../src/jobs/types.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { RunStore } from '../../src/store/types.js';
import { compileSchedule, periodKey } from '../../src/time/schedule.js';
import { createMariaDb } from '../helpers/databases.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';

const silent = pino({ level: 'silent' });
const uid = (): string => randomBytes(4).toString('hex');
const MINUTE = 60_000;
const BASE = Date.UTC(2026, 10, 30, 18, 0, 0);
const PREFIX = `cc-claim-${uid()}:`;

function makeJob(name: string, lockTtlMs = 10_000): Job {
  return {
    name,
    file: `/jobs/${name}.ts`,
    schedule: compileSchedule('* * * * *', 'UTC'),
    timezone: 'UTC',
    timeoutMs: null,
    lockTtlMs,
    overlap: 'skip',
    catchUpMs: 10 * MINUTE,
    coalesce: true,
    retries: 0,
    retryDelayMs: 30_000,
    enabled: true,
    run: () => undefined,
  };
}

/** A real store whose method calls are recorded on the way through. */
function counted(store: RunStore): { store: RunStore; calls: string[] } {
  const calls: string[] = [];
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function' || prop === 'close') return value;
      return (...args: unknown[]) => {
        calls.push(String(prop));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

interface Backend {
  name: string;
  fresh(): Promise<{ config: StoreConfig; drop(): Promise<void> }>;
}

const sqlite: Backend = {
  name: 'SQLite',
  async fresh() {
    const dir = mkdtempSync(join(tmpdir(), 'cron-claim-'));
    const path = join(dir, 'runs.db');
    return { config: { kind: 'sqlite', path, url: `sqlite:${path}` }, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  },
};

const mariadb: Backend = {
  name: 'MariaDB',
  async fresh() {
    const db = await createMariaDb('cron_claim');
    return { config: { kind: 'mysql', url: db.url }, drop: () => db.drop() };
  },
};

let servers: RedisServer[] = [];

beforeAll(async () => {
  servers = await startRedisServers(3);
});

afterAll(async () => {
  await Promise.allSettled(servers.map((s) => s.cleanup()));
});

interface Node {
  id: string;
  claimer: Claimer;
  store: RunStore;
  calls: string[];
  lock: LockProvider;
}

function describeClaims(backend: Backend): void {
  describe(`claim protocol: ${backend.name} + Redlock over 3 masters`, () => {
    let db: { config: StoreConfig; drop(): Promise<void> };
    let reader: KnexRunStore;
    const stores: KnexRunStore[] = [];
    const locks: LockProvider[] = [];

    beforeAll(async () => {
      db = await backend.fresh();
      reader = await KnexRunStore.open(db.config);
      await reader.migrate();
    });

    afterAll(async () => {
      await Promise.allSettled(locks.map((l) => l.close()));
      await Promise.allSettled(stores.map((s) => s.close()));
      await reader?.close();
      await db?.drop();
    });

    /** A node as the daemon builds it: its own store connection, its own lock provider. */
    async function node(id: string, lock?: LockProvider): Promise<Node> {
      const real = await KnexRunStore.open(db.config);
      stores.push(real);
      const provider = lock ?? new RedlockProvider({ urls: servers.map((s) => s.url), prefix: PREFIX, log: silent });
      locks.push(provider);
      await provider.connect();
      const { store, calls } = counted(real);
      return { id, claimer: new Claimer(store, provider, id, silent), store, calls, lock: provider };
    }

    async function redlock(): Promise<RedlockProvider> {
      const p = new RedlockProvider({ urls: servers.map((s) => s.url), prefix: PREFIX, log: silent });
      locks.push(p);
      await p.connect();
      return p;
    }

    const claimOf = (job: Job, at: Date, attempt = 1, overlap = false) =>
      ({ job, scheduledAt: at, trigger: 'schedule' as const, attempt, checkOverlap: overlap ? 'tick' as const : 'none' as const });

    function won(r: ClaimResult): Extract<ClaimResult, { outcome: 'won' }> {
      if (r.outcome !== 'won') throw new Error(`expected 'won', got '${r.outcome}'`);
      return r;
    }

    it("the winner gets 'won' with its running row and a prefixed lease", async () => {
      const a = await node('node-a');
      const job = makeJob(`won-${uid()}`);
      const at = new Date(BASE);
      const res = won(await a.claimer.claim(claimOf(job, at)));
      expect(res.run).toMatchObject({ job: job.name, periodKey: periodKey(job.name, at), attempt: 1, status: 'running', nodeId: 'node-a', trigger: 'schedule', leaseMs: job.lockTtlMs });
      expect(res.lease).not.toBeNull();
      expect(res.lease!.key).toBe(`${PREFIX}lock:${periodKey(job.name, at)}`);
      expect(a.calls).toEqual(['insertRuns']);
      expect(await reader.periodRuns(job.name, at)).toEqual([res.run]);
      res.release();
      await res.lease!.release();
    });

    it('a node that loses at the lock makes no call to the store', async () => {
      const [a, b] = [await node('node-a'), await node('node-b')];
      const job = makeJob(`lostlock-${uid()}`);
      const at = new Date(BASE);
      const res = won(await a.claimer.claim(claimOf(job, at, 1, true)));
      for (const checkOverlap of [false, true]) {
        expect((await b.claimer.claim(claimOf(job, at, 1, checkOverlap))).outcome).toBe('lost-lock');
      }
      expect(b.calls).toEqual([]);
      // B released nothing of A's: the lease is still A's.
      expect(await res.lease!.extend(10_000)).toBe('ok');
      // And B is free to try the period again later (no stale in-hand entry).
      expect(b.claimer.isInHand(periodKey(job.name, at))).toBe(false);
      res.release();
      await res.lease!.release();
    });

    it('racing nodes: exactly one wins, the lock losers never touch the store, one row', async () => {
      const nodes = await Promise.all(Array.from({ length: 6 }, (_, i) => node(`racer-${i}`)));
      const job = makeJob(`race-${uid()}`);
      for (let p = 0; p < 4; p++) {
        const at = new Date(BASE + p * MINUTE);
        for (const n of nodes) n.calls.length = 0;
        const results = await Promise.all(nodes.map((n) => n.claimer.claim(claimOf(job, at, 1, true))));
        const winners = results.filter((r) => r.outcome === 'won');
        expect(winners, `period ${p}: ${results.map((r) => r.outcome).join(',')}`).toHaveLength(1);
        results.forEach((r, i) => {
          expect(['won', 'lost-lock', 'lost-row']).toContain(r.outcome);
          if (r.outcome === 'lost-lock') expect(nodes[i]!.calls).toEqual([]);
        });
        const rows = await reader.periodRuns(job.name, at);
        expect(rows).toHaveLength(1);
        const w = won(winners[0]!);
        expect(rows[0]!.id).toBe(w.run.id);
        expect(await reader.finishRun(w.run.id, w.run.nodeId, { status: 'succeeded' })).toBe(true);
        w.release();
        await w.lease?.release();
      }
    });

    it("a node that wins the lock but loses the row gets 'lost-row', and sends nothing more (its key is left to expire)", async () => {
      const [a, b] = [await node('node-a'), await node('node-b')];
      const job = makeJob(`lostrow-${uid()}`);
      const at = new Date(BASE);
      const first = won(await a.claimer.claim(claimOf(job, at)));
      // A's lease ends (released or expired) while its row stays: the row is the fence.
      await first.lease!.release();
      const res = await b.claimer.claim(claimOf(job, at));
      expect(res.outcome).toBe('lost-row');
      expect(b.calls).toEqual(['insertRuns']);
      expect(await reader.periodRuns(job.name, at)).toEqual([first.run]);
      // B's key guards nothing now (the row decides), so it is not released: a third node loses at the lock.
      const other = await redlock();
      expect(await other.tryAcquire(periodKey(job.name, at), 5_000)).toBeNull();
      expect(b.claimer.isInHand(periodKey(job.name, at))).toBe(false);
      // The next attempt of the period is another key of the row: B can win it.
      expect(await reader.finishRun(first.run.id, 'node-a', { status: 'failed', error: 'x' })).toBe(true);
      first.release();
      const second = won(await b.claimer.claim(claimOf(job, at, 2)));
      expect(second.run.attempt).toBe(2);
      second.release();
      await second.lease?.release();
    });

    it("the in-process guard: 'in-hand' for a period already being claimed or run in this process", async () => {
      const a = await node('node-a');
      const job = makeJob(`inhand-${uid()}`);
      const at = new Date(BASE);
      const key = periodKey(job.name, at);
      const pending = a.claimer.claim(claimOf(job, at));
      // The guard is taken before the first await: a concurrent claim sees it at once.
      expect(a.claimer.isInHand(key)).toBe(true);
      const concurrent = await Promise.all([a.claimer.claim(claimOf(job, at)), a.claimer.claim(claimOf(job, at, 2))]);
      expect(concurrent.map((r) => r.outcome)).toEqual(['in-hand', 'in-hand']);
      const res = won(await pending);
      expect(a.calls).toEqual(['insertRuns']);
      // Held while the run is in flight, whatever the lock says.
      await res.lease!.release();
      expect((await a.claimer.claim(claimOf(job, at, 2))).outcome).toBe('in-hand');
      expect(a.calls).toEqual(['insertRuns']);
      // Other periods are not in hand.
      const other = won(await a.claimer.claim(claimOf(job, new Date(BASE + MINUTE), 1, false)));
      other.release();
      await other.lease?.release();
      // Released by the run: the next attempt goes through.
      res.release();
      expect(a.claimer.isInHand(key)).toBe(false);
      await reader.finishRun(res.run.id, 'node-a', { status: 'failed' });
      const again = won(await a.claimer.claim(claimOf(job, at, 2)));
      again.release();
      await again.lease?.release();
    });

    it("overlap 'skip': the row winner records its period skipped while an earlier period's run is live", async () => {
      const [a, b] = [await node('node-a'), await node('node-b')];
      const job = makeJob(`overlap-${uid()}`);
      const first = won(await a.claimer.claim(claimOf(job, new Date(BASE), 1, true)));
      const next = new Date(BASE + MINUTE);
      const res = await b.claimer.claim(claimOf(job, next, 1, true));
      expect(res.outcome).toBe('skipped-overlap');
      if (res.outcome !== 'won') expect(res.running?.id).toBe(first.run.id);
      // The skip is recorded on the row B won (lock, row, then the check; coalesced with the node's other outcomes), never on another node's row.
      expect(b.calls).toEqual(['insertRuns', 'liveRunsOf', 'endAttempt']);
      const rows = await reader.periodRuns(job.name, next);
      expect(rows.map((r) => [r.attempt, r.status, r.reason, r.nodeId])).toEqual([[1, 'skipped', 'overlap', 'node-b']]);
      expect(rows[0]!.finishedAt).not.toBeNull();
      // The period is decided: nobody claims it again (B's lock key, left to expire, stops A first).
      expect((await a.claimer.claim(claimOf(job, next, 1, true))).outcome).toBe('lost-lock');
      // B holds nothing in hand; its key is left to expire (the row decides the period now).
      expect(b.claimer.isInHand(periodKey(job.name, next))).toBe(false);
      const other = await redlock();
      expect(await other.tryAcquire(periodKey(job.name, next), 5_000)).toBeNull();
      // Only an EARLIER period's live run blocks: an earlier period claimed now is not skipped.
      const earlier = won(await b.claimer.claim(claimOf(job, new Date(BASE - MINUTE), 1, true)));
      earlier.release();
      await earlier.lease?.release();
      // Without the check (overlap 'allow'), a later period is claimed beside the live one.
      const allowed = won(await b.claimer.claim(claimOf(job, new Date(BASE + 2 * MINUTE), 1, false)));
      allowed.release();
      await allowed.lease?.release();
      first.release();
      await first.lease?.release();
    });

    it("overlap 'skip', a catch-up meeting only an earlier row never beaten since its claim (maybe a claim in doubt elsewhere): its period is given back pending, not skipped; behind a beaten row it is skipped", async () => {
      const [a, b] = [await node('node-a'), await node('node-b')];
      const job = makeJob(`doubt-${uid()}`);
      const first = won(await a.claimer.claim(claimOf(job, new Date(BASE), 1, true)));
      const catchUp = (at: Date) => b.claimer.claim({ ...claimOf(job, at, 1, true), trigger: 'catch-up' as const });
      const next = new Date(BASE + MINUTE);
      const res = await catchUp(next);
      expect(res.outcome).toBe('blocked-overlap');
      const rows = await reader.periodRuns(job.name, next);
      expect(rows.map((r) => [r.attempt, r.status, r.reason])).toEqual([[1, 'pending', null]]);
      expect(b.claimer.isInHand(periodKey(job.name, next))).toBe(false);
      // Once its holder beats it (a body runs behind it), a later catch-up is skipped as before.
      await new Promise((r) => setTimeout(r, 150));
      expect(await reader.heartbeat(first.run.id, 'node-a')).toBe(true);
      const later = new Date(BASE + 2 * MINUTE);
      expect((await catchUp(later)).outcome).toBe('skipped-overlap');
      expect((await reader.periodRuns(job.name, later)).map((r) => [r.status, r.reason])).toEqual([['skipped', 'overlap']]);
      first.release();
      await first.lease?.release();
    });

    it("overlap 'skip': periods claimed at the same moment do not skip each other", async () => {
      const nodes = await Promise.all(Array.from({ length: 4 }, (_, i) => node(`ovl-${i}`)));
      const job = makeJob(`overlap2-${uid()}`);
      const periods = [0, 1, 2, 3].map((i) => new Date(BASE + i * MINUTE));
      // Each node claims every period, all at once.
      const results = await Promise.all(nodes.flatMap((n) => periods.map((p) => n.claimer.claim(claimOf(job, p, 1, true)).then((r) => ({ p, r })))));
      for (const p of periods) {
        const forP = results.filter((x) => x.p === p).map((x) => x.r);
        const decided = forP.filter((r) => r.outcome === 'won' || r.outcome === 'skipped-overlap');
        expect(decided, p.toISOString()).toHaveLength(1);
        expect(await reader.periodRuns(job.name, p)).toHaveLength(1);
      }
      // The earliest period can never be skipped: nothing earlier is live.
      expect(results.filter((x) => x.p === periods[0]).map((x) => x.r.outcome)).toContain('won');
      for (const { r } of results) {
        if (r.outcome === 'won') {
          r.release();
          await r.lease?.release();
        }
      }
    });

    it('a store that fails while claiming: the claim rejects, and the lock and the guard are let go', async () => {
      const real = await KnexRunStore.open(db.config);
      const provider = await redlock();
      const claimer = new Claimer(real, provider, 'node-broken', silent);
      await real.close();
      const job = makeJob(`broken-${uid()}`);
      const at = new Date(BASE);
      await expect(claimer.claim(claimOf(job, at))).rejects.toThrow();
      expect(claimer.isInHand(periodKey(job.name, at))).toBe(false);
      const other = await redlock();
      const lease = await other.tryAcquire(periodKey(job.name, at), 5_000);
      expect(lease).not.toBeNull();
      await lease!.release();
      expect(await reader.periodRuns(job.name, at)).toEqual([]);
    });

    it('with NoLockProvider (no Redis): racing claimers, exactly one won, the rest lost at the row', async () => {
      const nodes = await Promise.all(Array.from({ length: 6 }, (_, i) => node(`nolock-${i}`, new NoLockProvider())));
      const job = makeJob(`nolock-${uid()}`);
      const at = new Date(BASE);
      const results = await Promise.all(nodes.map((n) => n.claimer.claim(claimOf(job, at))));
      expect(results.filter((r) => r.outcome === 'won')).toHaveLength(1);
      expect(results.filter((r) => r.outcome === 'lost-row')).toHaveLength(5);
      expect(await reader.periodRuns(job.name, at)).toHaveLength(1);
      for (const r of results) if (r.outcome === 'won') r.release();
    });

    it('with every Redis master down, claims go on through the row alone: exactly one won', async () => {
      const nodes = await Promise.all(Array.from({ length: 6 }, (_, i) => node(`down-${i}`)));
      const job = makeJob(`down-${uid()}`);
      try {
        for (const s of servers) await s.stop();
        await waitFor("every node to see Redis 'down'", () => nodes.every((n) => n.lock.state() === 'down'), 10_000);
        for (let p = 0; p < 3; p++) {
          const at = new Date(BASE + p * MINUTE);
          for (const n of nodes) n.calls.length = 0;
          const started = Date.now();
          const results = await Promise.all(nodes.map((n) => n.claimer.claim(claimOf(job, at, 1, true))));
          expect(Date.now() - started).toBeLessThan(5_000);
          const outcomes = results.map((r) => r.outcome).sort();
          expect(outcomes).toEqual(['lost-row', 'lost-row', 'lost-row', 'lost-row', 'lost-row', 'won']);
          const w = won(results.find((r) => r.outcome === 'won')!);
          expect(w.lease).toBeNull();
          // Everyone went to the row.
          for (const n of nodes) expect(n.calls).toContain('insertRuns');
          expect(await reader.periodRuns(job.name, at)).toHaveLength(1);
          await reader.finishRun(w.run.id, w.run.nodeId, { status: 'succeeded' });
          w.release();
        }
      } finally {
        for (const s of servers) if (!s.proc) await s.start();
      }
      // Back: the lock decides again, and its losers stop before the store.
      await waitFor("every node to see Redis 'ok'", () => nodes.every((n) => n.lock.state() === 'ok'), 15_000);
      const at = new Date(BASE + 10 * MINUTE);
      const first = won(await nodes[0]!.claimer.claim(claimOf(job, at)));
      expect(first.lease).not.toBeNull();
      nodes[1]!.calls.length = 0;
      expect((await nodes[1]!.claimer.claim(claimOf(job, at))).outcome).toBe('lost-lock');
      expect(nodes[1]!.calls).toEqual([]);
      first.release();
      await first.lease!.release();
    });
  });
}

describeClaims(sqlite);
describeClaims(mariadb);
