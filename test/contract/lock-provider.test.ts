/**
 * LockProvider conformance: one suite, run for Redlock over 3 and over 1 Redis master that this file
 * starts on free ports (never the shared 6379), and for the NoLockProvider where it applies. The lock
 * only saves work, but its answers must be right: a lost race is null, an unreachable quorum throws.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Lease, LockProvider } from '../../src/claim/lock.js';
import { NoLockProvider } from '../../src/claim/no-lock.js';
import { RedlockProvider } from '../../src/claim/redlock-provider.js';
import { LockUnavailableError } from '../../src/errors.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';

const silent = pino({ level: 'silent' });
const uid = (): string => randomBytes(4).toString('hex');
const periodKey = (job = `job-${uid()}`): string => `${job}@2026-11-30T18:00:00.000Z`;

/** Calls per command, summed over the masters (INFO commandstats; INFO itself left out; EVAL and EVALSHA as `script`: ioredis sends a script's first call on a connection as EVAL). */
async function commandCounts(clients: Redis[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const c of clients) {
    for (const m of (await c.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      if (m[1] === 'info') continue;
      const cmd = m[1] === 'eval' || m[1] === 'evalsha' ? 'script' : m[1]!;
      out.set(cmd, (out.get(cmd) ?? 0) + Number(m[2]));
    }
  }
  return out;
}

function diffCounts(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [cmd, n] of after) if (n - (before.get(cmd) ?? 0) > 0) out[cmd] = n - (before.get(cmd) ?? 0);
  return out;
}

interface Fixture {
  /** A new provider instance, as another node would have (connected). */
  make(): Promise<LockProvider>;
  /** Does a held lease keep others out? (false: no Redis, the row decides) */
  exclusive: boolean;
  /** The state() of a healthy provider. */
  healthy: ReturnType<LockProvider['state']>;
  kind: LockProvider['kind'];
}

/** What every provider must do. */
export function describeLockProvider(name: string, setup: () => Promise<Fixture>, teardown: () => Promise<void>): void {
  describe(`LockProvider contract: ${name}`, () => {
    let fx: Fixture;
    const opened: LockProvider[] = [];
    const make = async (): Promise<LockProvider> => {
      const p = await fx.make();
      opened.push(p);
      return p;
    };

    beforeAll(async () => {
      fx = await setup();
    });
    afterAll(async () => {
      await Promise.allSettled(opened.map((p) => p.close()));
      await teardown();
    });

    it('connect() resolves, kind and state() are as expected', async () => {
      const p = await make();
      expect(p.kind).toBe(fx.kind);
      expect(p.state()).toBe(fx.healthy);
    });

    it('tryAcquire returns a Lease whose release() and extend() answer without throwing', async () => {
      const p = await make();
      const lease = await p.tryAcquire(periodKey(), 2_000);
      expect(lease).not.toBeNull();
      expect(typeof lease!.key).toBe('string');
      expect(await lease!.extend(2_000)).toBe('ok');
      await expect(lease!.release()).resolves.toBeUndefined();
      // A second release of the same lease is harmless.
      await expect(lease!.release()).resolves.toBeUndefined();
    });

    it('a second tryAcquire of a held key is null while held (or a lease when nothing is exclusive)', async () => {
      const [a, b] = [await make(), await make()];
      const key = periodKey();
      const first = await a.tryAcquire(key, 5_000);
      expect(first).not.toBeNull();
      const second = await b.tryAcquire(key, 5_000);
      const again = await a.tryAcquire(key, 5_000);
      if (fx.exclusive) {
        expect(second).toBeNull();
        expect(again).toBeNull();
      } else {
        expect(second).not.toBeNull();
        expect(again).not.toBeNull();
      }
      // Other keys are independent.
      expect(await b.tryAcquire(periodKey(), 5_000)).not.toBeNull();
      await first!.release();
    });

    it('after release() another can acquire', async () => {
      const [a, b] = [await make(), await make()];
      const key = periodKey();
      const lease = await a.tryAcquire(key, 10_000);
      expect(lease).not.toBeNull();
      await lease!.release();
      const next = await b.tryAcquire(key, 10_000);
      expect(next).not.toBeNull();
      await next!.release();
    });

    it('after TTL expiry another can acquire', async () => {
      const [a, b] = [await make(), await make()];
      const key = periodKey();
      expect(await a.tryAcquire(key, 300)).not.toBeNull();
      const started = Date.now();
      const next = await waitFor('the lease to expire', () => b.tryAcquire(key, 5_000).then((l) => l ?? undefined), 5_000, 50);
      if (fx.exclusive) expect(Date.now() - started).toBeGreaterThanOrEqual(200);
      await next.release();
    });
  });
}

const CLUSTER_PREFIX = `cc-contract-${uid()}:`;

/** Redlock over n masters started here; the exclusive and fault parts of the contract. */
function describeRedlock(n: number): void {
  let servers: RedisServer[] = [];
  let inspectors: Redis[] = [];
  const prefix = `${CLUSTER_PREFIX}${n}:`;
  const all: RedlockProvider[] = [];
  const newProvider = (): RedlockProvider => {
    const p = new RedlockProvider({ urls: servers.map((s) => s.url), prefix, log: silent });
    all.push(p);
    return p;
  };
  const connected = async (): Promise<RedlockProvider> => {
    const p = newProvider();
    await p.connect();
    return p;
  };

  describe(`RedlockProvider over ${n} Redis master${n > 1 ? 's' : ''}`, () => {
    beforeAll(async () => {
      servers = await startRedisServers(n);
      inspectors = servers.map((s) => new Redis(s.port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 200 }));
    });
    afterAll(async () => {
      await Promise.allSettled(all.map((p) => p.close()));
      for (const c of inspectors) c.disconnect();
      await Promise.allSettled(servers.map((s) => s.cleanup()));
    });

    describeLockProvider(
      'shared suite',
      // The shared suite closes the providers it makes itself.
      async () => ({
        make: async () => {
          const p = new RedlockProvider({ urls: servers.map((s) => s.url), prefix, log: silent });
          await p.connect();
          return p;
        },
        exclusive: true, healthy: 'ok', kind: 'redlock',
      }),
      async () => {},
    );

    describe(`Redlock over ${n} master${n > 1 ? 's' : ''}: leases, keys and races`, () => {
      /** Every master answers again, and every provider made so far sees them. */
      async function healthy(): Promise<void> {
        for (const s of servers) {
          s.resume();
          if (!s.proc) await s.start();
        }
        await waitFor('every provider to see every master', () => all.every((p) => p.state() === 'ok'), 15_000);
      }

      it('extend() keeps the lease past its first TTL', async () => {
        const [a, b] = [await connected(), await connected()];
        const key = periodKey();
        const lease = (await a.tryAcquire(key, 400))!;
        expect(lease).not.toBeNull();
        for (let i = 0; i < 4; i++) {
          await new Promise((r) => setTimeout(r, 200));
          expect(await lease.extend(400)).toBe('ok');
        }
        // 800 ms after acquiring a 400 ms lease: still held.
        expect(await b.tryAcquire(key, 1_000)).toBeNull();
        await lease.release();
        // A lapsed key that nobody holds is taken again (the row heartbeat decides ownership)...
        expect(await lease.extend(1_000)).toBe('ok');
        // ...but once another holder has it, the lease is lost.
        await lease.release();
        const other = (await b.tryAcquire(key, 5_000))!;
        expect(other).not.toBeNull();
        expect(await lease.extend(1_000)).toBe('lost');
        await other.release();
      });

      it("extend() returns 'lost' once the lease expired and another took it", async () => {
        const [a, b] = [await connected(), await connected()];
        const key = periodKey();
        const lease = (await a.tryAcquire(key, 300))!;
        expect(lease).not.toBeNull();
        const other = await waitFor('another holder after expiry', () => b.tryAcquire(key, 10_000).then((l) => l ?? undefined), 5_000, 50);
        expect(await lease.extend(5_000)).toBe('lost');
        // The other holder keeps it: the failed extension did not disturb it.
        expect(await a.tryAcquire(key, 1_000)).toBeNull();
        expect(await other.extend(5_000)).toBe('ok');
        await other.release();
      });

      it("extend() returns 'lost' when the key was taken over before the lease's own expiry", async () => {
        const [a, b] = [await connected(), await connected()];
        const key = periodKey();
        const lease = (await a.tryAcquire(key, 20_000))!;
        // Simulate a master that lost the key (restart without persistence) everywhere at once.
        await Promise.all(inspectors.map((c) => c.del(lease.key)));
        const other = (await b.tryAcquire(key, 20_000))!;
        expect(other).not.toBeNull();
        expect(await lease.extend(20_000)).toBe('lost');
        // A release of the lost lease must not free the new holder's key.
        await lease.release();
        expect(await a.tryAcquire(key, 1_000)).toBeNull();
        await other.release();
      });

      it('keys carry the configured prefix, on every master, with the TTL asked for', async () => {
        const p = await connected();
        const key = periodKey();
        const lease = (await p.tryAcquire(key, 7_000))!;
        expect(lease.key).toBe(`${prefix}lock:${key}`);
        await waitFor('the key on every master', async () => {
          const values = await Promise.all(inspectors.map((c) => c.get(lease.key)));
          return values.every((v) => typeof v === 'string' && v.length > 0);
        }, 5_000, 20);
        for (const c of inspectors) {
          const ttl = await c.pttl(lease.key);
          expect(ttl).toBeGreaterThan(5_000);
          expect(ttl).toBeLessThanOrEqual(7_000);
          // Nothing written outside the prefix.
          expect(await c.exists(key, `lock:${key}`)).toBe(0);
          expect((await c.keys('*')).every((k) => k.startsWith(prefix))).toBe(true);
        }
        await lease.release();
        for (const c of inspectors) expect(await c.exists(lease.key)).toBe(0);
      });

      if (n >= 3) {
        it('a split vote (no holder on a majority) is not a lost race: it is left to the row at once (LockUnavailableError with splitVote), never null, and nothing is read back', async () => {
          const p = await connected();
          const key = periodKey();
          const resource = `${prefix}lock:${key}`;
          // Two other racers each hold one master (a minority), as in a three-way split.
          await inspectors[0]!.set(resource, 'racer-a', 'PX', 5_000);
          await inspectors[1]!.set(resource, 'racer-b', 'PX', 5_000);
          // The script is loaded on the masters (a first call is EVALSHA, NOSCRIPT, then EVAL).
          await (await p.tryAcquire(periodKey(), 1_000))?.release();
          const before = await commandCounts(inspectors);
          const err = await p.tryAcquire(key, 2_000).catch((e: unknown) => e);
          expect(err).toBeInstanceOf(LockUnavailableError);
          // Contention, not an outage: the claim does not report Redis as down.
          expect((err as LockUnavailableError).splitVote).toBe(true);
          // One script call per master, and inside it one SET per master plus one GET where it was refused.
          const spent = diffCounts(before, await commandCounts(inspectors));
          expect(spent).toEqual({ script: 3, set: 3, get: 2 });
          // The third master's key is this racer's own minority: left to expire, not released.
          expect(await inspectors[2]!.pttl(resource)).toBeGreaterThan(0);
          // Once the minority keys are gone, a new race wins.
          for (const c of inspectors) await c.del(resource);
          const lease = await p.tryAcquire(key, 2_000);
          expect(lease).not.toBeNull();
          await lease!.release();
        });

        it('a holder on a majority is a lost race (null), even with a stray minority key', async () => {
          const p = await connected();
          const key = periodKey();
          const resource = `${prefix}lock:${key}`;
          await inspectors[0]!.set(resource, 'winner', 'PX', 5_000);
          await inspectors[1]!.set(resource, 'winner', 'PX', 5_000);
          await inspectors[2]!.set(resource, 'stray', 'PX', 5_000);
          expect(await p.tryAcquire(key, 2_000)).toBeNull();
          for (const c of inspectors) await c.del(resource);
        });
      }

      it('the lock requests of one turn go to each master as one script call, and each key gets its own answer', async () => {
        const [a, b] = [await connected(), await connected()];
        const keys = Array.from({ length: 300 }, () => periodKey());
        await (await a.tryAcquire(periodKey(), 1_000))?.release();
        const before = await commandCounts(inspectors);
        // Made in one synchronous loop, as a tick makes them.
        const leases = await Promise.all(keys.map((k) => a.tryAcquire(k, 5_000)));
        expect(leases.every((l) => l !== null)).toBe(true);
        const afterWin = await commandCounts(inspectors);
        expect(diffCounts(before, afterWin)).toEqual({ script: n, set: n * keys.length });
        // Racing the same keys from another provider: every one lost (null), at one SET and one GET per
        // key and master inside the one call; nothing after (no release, no read-back).
        const lost = await Promise.all(keys.map((k) => b.tryAcquire(k, 5_000)));
        expect(lost.every((l) => l === null)).toBe(true);
        expect(diffCounts(afterWin, await commandCounts(inspectors))).toEqual({ script: n, set: n * keys.length, get: n * keys.length });
        // Each key is its own lease: releasing one frees that one only.
        await leases[0]!.release();
        const [freed, held] = await Promise.all([b.tryAcquire(keys[0]!, 5_000), b.tryAcquire(keys[1]!, 5_000)]);
        expect(freed).not.toBeNull();
        expect(held).toBeNull();
        expect(await leases[1]!.extend(5_000)).toBe('ok');
        await Promise.all([freed!.release(), ...leases.slice(1).map((l) => l!.release())]);
      });

      it('settle() leaves a decided key to expire, at no command; close() (a clean stop) releases the settled keys still live, and only its own', async () => {
        // Closed by the test itself (not among `all`, whose providers must stay connected).
        const p = new RedlockProvider({ urls: servers.map((s) => s.url), prefix, log: silent });
        await p.connect();
        const keys = [periodKey(), periodKey(), periodKey()];
        const leases = await Promise.all(keys.map((k) => p.tryAcquire(k, 10_000)));
        const before = await commandCounts(inspectors);
        for (const l of leases) l!.settle();
        expect(diffCounts(before, await commandCounts(inspectors))).toEqual({});
        for (const c of inspectors) expect(await c.exists(...keys.map((k) => `${prefix}lock:${k}`))).toBe(3);
        // One of them lapsed and was taken by another holder meanwhile: close() must not delete it.
        const taken = `${prefix}lock:${keys[2]}`;
        for (const c of inspectors) await c.set(taken, 'someone-else', 'PX', 10_000);
        await p.close();
        for (const c of inspectors) {
          expect(await c.exists(`${prefix}lock:${keys[0]}`, `${prefix}lock:${keys[1]}`)).toBe(0);
          expect(await c.get(taken)).toBe('someone-else');
          await c.del(taken);
        }
      });

      it('settle(keepUntil) keeps a decided attempt\'s key until then (one script call per master for the keys of a turn), whoever holds it; close() does not release kept keys', async () => {
        const p = new RedlockProvider({ urls: servers.map((s) => s.url), prefix, log: silent });
        await p.connect();
        const keys = [periodKey(), periodKey(), periodKey()];
        const res = (k: string) => `${prefix}lock:${k}`;
        const leases = await Promise.all(keys.map((k) => p.tryAcquire(k, 1_000)));
        // One of them was taken by another node after this lease lapsed (its INSERT then met the decided
        // row): kept too, since no body may start under a decided attempt's key.
        for (const c of inspectors) await c.set(res(keys[2]!), 'someone-else', 'PX', 1_000);
        const before = await commandCounts(inspectors);
        const until = Date.now() + 60_000;
        for (const l of leases) l!.settle(until);
        await waitFor('the keep script to run on every master', async () => (await commandCounts(inspectors)).get('script') === (before.get('script') ?? 0) + n, 5_000, 20);
        await p.close();
        await new Promise((r) => setTimeout(r, 1_200));
        for (const c of inspectors) {
          for (const k of keys) {
            const left = await c.pttl(res(k));
            expect(left, 'kept past its TTL and its provider\'s close').toBeGreaterThan(50_000);
            expect(left).toBeLessThanOrEqual(60_000);
          }
          expect(await c.get(res(keys[2]!)), 'the other holder\'s value left as it was').toBe('someone-else');
          await c.del(...keys.map(res));
        }
      });

      it('one batch with free, held and (over 3 masters) split keys answers each as it would alone', async () => {
        const p = await connected();
        const [free, held, split] = [periodKey(), periodKey(), periodKey()];
        const res = (k: string) => `${prefix}lock:${k}`;
        for (const c of inspectors.slice(0, Math.floor(n / 2) + 1)) await c.set(res(held), 'winner', 'PX', 5_000);
        if (n >= 3) {
          await inspectors[0]!.set(res(split), 'racer-a', 'PX', 5_000);
          await inspectors[1]!.set(res(split), 'racer-b', 'PX', 5_000);
        }
        const [f, h, s] = await Promise.all([free, held, split].map((k) => p.tryAcquire(k, 5_000).catch((e: unknown) => e)));
        expect(f).not.toBeNull();
        expect(f).not.toBeInstanceOf(Error);
        expect(h).toBeNull();
        if (n >= 3) expect((s as LockUnavailableError).splitVote).toBe(true);
        else expect(s).not.toBeInstanceOf(Error);
        for (const c of inspectors) await c.del(res(held), res(split));
        await (f as Lease).release();
        if (n < 3) await (s as Lease).release();
      });

      it('two prefixes do not see each other', async () => {
        const other = new RedlockProvider({ urls: servers.map((s) => s.url), prefix: `${prefix}other:`, log: silent });
        all.push(other);
        await other.connect();
        const p = await connected();
        const key = periodKey();
        const a = await p.tryAcquire(key, 5_000);
        const b = await other.tryAcquire(key, 5_000);
        expect(a).not.toBeNull();
        expect(b).not.toBeNull();
        expect(a!.key).not.toBe(b!.key);
        await a!.release();
        await b!.release();
      });

      it('10 provider instances race for one key: exactly one wins, the others get null, round after round', async () => {
        const racers = await Promise.all(Array.from({ length: 10 }, () => connected()));
        for (let round = 0; round < 12; round++) {
          const key = periodKey();
          const order = [...racers].sort(() => Math.random() - 0.5);
          const results = await Promise.allSettled(order.map((p) => p.tryAcquire(key, 10_000)));
          const errors = results.filter((r) => r.status === 'rejected');
          expect(errors.map((e) => String((e as PromiseRejectedResult).reason))).toEqual([]);
          const leases = results.flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []));
          expect(leases, `round ${round}`).toHaveLength(1);
          await leases[0]!.release();
        }
      });

      it('a second acquire from the same instance is null while held, and a lease after expiry', async () => {
        const p = await connected();
        const key = periodKey();
        expect(await p.tryAcquire(key, 300)).not.toBeNull();
        expect(await p.tryAcquire(key, 300)).toBeNull();
        const l = await waitFor('the key to expire', () => p.tryAcquire(key, 1_000).then((x) => x ?? undefined), 5_000, 50);
        await l.release();
      });

      const majority = Math.floor(n / 2) + 1;
      const minority = n - majority;

      it(`with ${majority} of ${n} masters stopped: tryAcquire and connect() throw LockUnavailableError, state 'down'`, async () => {
        const p = await connected();
        const key = periodKey();
        const held = (await p.tryAcquire(periodKey(), 10_000))!;
        expect(held).not.toBeNull();
        try {
          for (const s of servers.slice(0, majority)) await s.stop();
          await waitFor("state 'down'", () => p.state() === 'down', 10_000);
          // A lease held before cannot be confirmed: 'unavailable', neither 'ok' nor 'lost', and no throw.
          expect(await held.extend(10_000)).toBe('unavailable');
          await expect(held.release()).resolves.toBeUndefined();
          const started = Date.now();
          const err = await p.tryAcquire(key, 5_000).then((l) => l, (e: unknown) => e);
          expect(err).toBeInstanceOf(LockUnavailableError);
          expect((err as LockUnavailableError).code).toBe('E_LOCK_UNAVAILABLE');
          expect(Date.now() - started).toBeLessThan(3_000);
          // A second attempt too (no leftover state makes it look held).
          await expect(p.tryAcquire(key, 5_000)).rejects.toBeInstanceOf(LockUnavailableError);
          const fresh = newProvider();
          const err2 = await fresh.connect().then(() => null, (e: unknown) => e);
          expect(err2).toBeInstanceOf(LockUnavailableError);
          expect((err2 as Error).message).toContain(servers[0]!.url.replace('redis://', ''));
          expect(fresh.state()).toBe('down');
          // Closing while the masters are down does not hang.
          const closing = Date.now();
          await fresh.close();
          expect(Date.now() - closing).toBeLessThan(3_000);
          all.splice(all.indexOf(fresh), 1);
        } finally {
          await healthy();
        }
        // Restarted on the same ports: it works again, for old and new providers alike.
        const lease = await waitFor('a lease after the restart', () => p.tryAcquire(key, 5_000).then((l) => l ?? undefined), 15_000);
        expect(await (await connected()).tryAcquire(key, 5_000)).toBeNull();
        await lease.release();
      });

      if (minority > 0) {
        it(`with ${minority} of ${n} stopped: still works, state 'degraded'; back to 'ok' after the restart`, async () => {
          const [a, b] = [await connected(), await connected()];
          try {
            for (const s of servers.slice(n - minority)) await s.stop();
            await waitFor("state 'degraded'", () => a.state() === 'degraded' && b.state() === 'degraded', 10_000);
            const key = periodKey();
            const lease = await a.tryAcquire(key, 5_000);
            expect(lease).not.toBeNull();
            expect(await b.tryAcquire(key, 5_000)).toBeNull();
            expect(await lease!.extend(5_000)).toBe('ok');
            await lease!.release();
            const next = await b.tryAcquire(key, 5_000);
            expect(next).not.toBeNull();
            await next!.release();
            // A node that starts now connects, degraded.
            const late = newProvider();
            await expect(late.connect()).resolves.toBeUndefined();
            expect(late.state()).toBe('degraded');
          } finally {
            await healthy();
          }
          expect(a.state()).toBe('ok');
          const lease = await a.tryAcquire(periodKey(), 5_000);
          expect(lease).not.toBeNull();
          await lease!.release();
        });

        it('a lease held on a quorum survives the loss of a minority, and is not taken meanwhile', async () => {
          const [a, b] = [await connected(), await connected()];
          const key = periodKey();
          const lease = (await a.tryAcquire(key, 5_000))!;
          try {
            for (const s of servers.slice(n - minority)) await s.stop();
            await waitFor("state 'degraded'", () => a.state() === 'degraded', 10_000);
            expect(await b.tryAcquire(key, 5_000)).toBeNull();
            expect(await lease.extend(5_000)).toBe('ok');
          } finally {
            await healthy();
          }
          // The restarted master lost its copy; the quorum still holds the key.
          expect(await b.tryAcquire(key, 5_000)).toBeNull();
          await lease.release();
        });
      }

      it('a paused (SIGSTOPped) master does not hang tryAcquire beyond ~2 s, nor at all while a majority answers', async () => {
        const p = await connected();
        const paused = servers.slice(0, Math.max(1, minority));
        try {
          for (const s of paused) s.pause();
          const started = Date.now();
          const outcome = await p.tryAcquire(periodKey(), 5_000).then((l) => l, (e: unknown) => e);
          const elapsed = Date.now() - started;
          expect(elapsed).toBeLessThan(3_000);
          if (minority > 0) {
            // The quorum answered: a lease, decided without waiting for the paused master's command
            // timeout (1 s), so that one frozen master does not make every claim late.
            expect(elapsed).toBeLessThan(500);
            expect(outcome).not.toBeNull();
            expect(outcome).not.toBeInstanceOf(Error);
            await (outcome as Lease).release();
          } else {
            expect(outcome).toBeInstanceOf(LockUnavailableError);
          }
        } finally {
          for (const s of paused) s.resume();
        }
      });

      if (n > 1) {
        it(`with ${majority} of ${n} masters paused: LockUnavailableError within ~2 s, not a hang and not null`, async () => {
          const p = await connected();
          const paused = servers.slice(0, majority);
          try {
            const held = (await p.tryAcquire(periodKey(), 10_000))!;
            for (const s of paused) s.pause();
            const started = Date.now();
            const err = await p.tryAcquire(periodKey(), 5_000).then((l) => l, (e: unknown) => e);
            expect(Date.now() - started).toBeLessThan(3_000);
            expect(err).toBeInstanceOf(LockUnavailableError);
            const extending = Date.now();
            expect(await held.extend(10_000)).toBe('unavailable');
            expect(Date.now() - extending).toBeLessThan(3_000);
          } finally {
            for (const s of paused) s.resume();
          }
          // Resumed: works again (late replies to the timed-out commands do not confuse it).
          await healthy();
          const lease = await waitFor('a lease after resume', () => p.tryAcquire(periodKey(), 5_000).then((l) => l ?? undefined).catch(() => undefined), 10_000);
          await lease.release();
        });
      }

      if (n > 1) {
        it(`with ${majority} of ${n} masters paused: extend() answers within a quarter of its TTL, before and past the lease's local expiry, and takes the lease again after resume`, async () => {
          // The lease keeper waits for extend() beside the row heartbeat: an extend() that waited for
          // the paused masters' timeouts (several round trips once the lease lapsed locally) would hold
          // back the heartbeat's confirmation, and a run with a short lockTtl would self-fence.
          const p = await connected();
          const ttl = 2_000;
          const lease = (await p.tryAcquire(periodKey(), ttl))!;
          const paused = servers.slice(0, majority);
          const answers: Array<{ result: string; ms: number }> = [];
          try {
            for (const s of paused) s.pause();
            const until = Date.now() + 2 * ttl;
            while (Date.now() < until) {
              const t = Date.now();
              const result = await lease.extend(ttl);
              answers.push({ result, ms: Date.now() - t });
              await new Promise((r) => setTimeout(r, ttl / 3));
            }
          } finally {
            for (const s of paused) s.resume();
          }
          expect(answers.map((a) => a.result).every((r) => r === 'unavailable'), JSON.stringify(answers)).toBe(true);
          expect(Math.max(...answers.map((a) => a.ms)), JSON.stringify(answers)).toBeLessThanOrEqual(ttl / 4 + 150);
          await healthy();
          expect(await waitFor('the lease taken again', async () => ((await lease.extend(ttl)) === 'ok' ? true : undefined), 10_000)).toBe(true);
          await lease.release();
        });
      }
    });
  });
}

describeRedlock(3);
describeRedlock(1);

describeLockProvider(
  'NoLockProvider',
  async () => ({ make: async () => { const p = new NoLockProvider(); await p.connect(); return p; }, exclusive: false, healthy: 'none', kind: 'none' }),
  async () => {},
);

describe('NoLockProvider: no Redis, the row decides', () => {
  it("always returns a lease, for any key, any number of times; state 'none'", async () => {
    const [a, b]: LockProvider[] = [new NoLockProvider(), new NoLockProvider()];
    await a.connect();
    const key = periodKey();
    const leases = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).tryAcquire(key, 1)));
    expect(leases.every((l) => l !== null && l.key === key)).toBe(true);
    expect(await leases[0]!.extend(1)).toBe('ok');
    await leases[0]!.release();
    expect(await leases[0]!.extend(1)).toBe('ok');
    expect(a.state()).toBe('none');
    expect(a.kind).toBe('none');
    await a.close();
    await b.close();
  });
});
