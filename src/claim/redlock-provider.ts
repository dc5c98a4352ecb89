/**
 * Redlock over independent Redis masters (quorum = majority). One attempt per call: a tick is a race
 * and its losers stop at once, except after a split vote (no racer reached a majority), which is
 * tried again after a short random pause so that a period is never left to nobody. Explicit acquire/extend/release, no `using()` (see the
 * engineering notes for its auto-extension traps).
 */
import { Redis } from 'ioredis';
import Redlock, { ExecutionError, ResourceLockedError, type Lock } from 'redlock';
import { redactUrl } from '../config/redact.js';
import { errorMessage, LockUnavailableError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Lease, LockProvider, QuorumState } from './lock.js';

export interface RedlockOptions {
  urls: string[];
  prefix: string;
  log: Logger;
  /** Per-command deadline, so that a hung master cannot stall a tick. */
  commandTimeoutMs?: number;
}

/** A master's answer that means "wrong credentials", not "not there". */
const REFUSED_CREDENTIALS = /WRONGPASS|NOAUTH|invalid password|invalid username|ERR AUTH|NOPERM/i;

/** How many split votes in a row before the claim falls back to the row alone. */
const SPLIT_VOTE_ROUNDS = 3;

type Votes = { locked: number; failed: number; quorum: number };

async function countVotes(err: ExecutionError): Promise<Votes> {
  const stats = await Promise.all(err.attempts);
  const last = stats[stats.length - 1];
  let locked = 0;
  let failed = 0;
  for (const e of last?.votesAgainst.values() ?? []) {
    if (e instanceof ResourceLockedError) locked += 1;
    else failed += 1;
  }
  return { locked, failed, quorum: last?.quorumSize ?? 1 };
}

export class RedlockProvider implements LockProvider {
  readonly kind = 'redlock' as const;
  private readonly clients: Redis[];
  private readonly redlock: Redlock;
  private readonly prefix: string;
  private readonly log: Logger;
  private readonly urls: string[];
  /** The latest error of each master's connection: what a failed connect() really met. */
  private readonly lastErrors: Array<Error | undefined> = [];

  constructor(options: RedlockOptions) {
    this.urls = options.urls;
    this.prefix = options.prefix;
    this.log = options.log;
    this.clients = options.urls.map((url, i) => {
      const client = new Redis(url, {
        lazyConnect: true,
        // Fail fast while a master is down instead of queueing commands: the row takes over.
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        connectTimeout: 2000,
        commandTimeout: options.commandTimeoutMs ?? 1000,
        retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 5), 2000),
      });
      let lastLogged = 0;
      client.on('error', (err) => {
        this.lastErrors[i] = err;
        // ioredis repeats the same error on every reconnect attempt; keep the log readable.
        if (Date.now() - lastLogged > 30_000) {
          lastLogged = Date.now();
          this.log.warn({ redis: redactUrl(url), err: { message: errorMessage(err) } }, 'redis master unreachable');
        }
      });
      return client;
    });
    this.redlock = new Redlock(this.clients, { retryCount: 0, driftFactor: 0.01 });
    // Redlock re-emits client errors during operations; they are counted as votes already.
    this.redlock.on('error', () => {});
  }

  /**
   * Connects to every master. Credentials a master refuses are a configuration error (thrown, naming
   * the cause); masters that do not answer are not: the clients keep reconnecting in the background,
   * and claims go through the run row alone meanwhile (LockUnavailableError with `unreachable`).
   */
  async connect(): Promise<void> {
    const results = await Promise.allSettled(this.clients.map((c) => c.connect()));
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [{ url: redactUrl(this.urls[i]!), cause: errorMessage(this.lastErrors[i] ?? r.reason) }] : []));
    const refused = failed.filter((f) => REFUSED_CREDENTIALS.test(f.cause));
    if (refused.length > 0) {
      throw new LockUnavailableError(`Redis refuses this node's credentials: ${refused.map((f) => `${f.url} (${f.cause})`).join(', ')}`);
    }
    const quorum = Math.floor(this.clients.length / 2) + 1;
    const up = this.clients.length - failed.length;
    if (up < quorum) {
      throw new LockUnavailableError(`Redis quorum unreachable: ${up} of ${this.clients.length} masters answer, ${quorum} needed; down: ${failed.map((f) => `${f.url} (${f.cause})`).join(', ')}`, { unreachable: true });
    }
  }

  state(): QuorumState {
    const up = this.clients.filter((c) => c.status === 'ready').length;
    const quorum = Math.floor(this.clients.length / 2) + 1;
    if (up === this.clients.length) return 'ok';
    return up >= quorum ? 'degraded' : 'down';
  }

  async tryAcquire(key: string, ttlMs: number): Promise<Lease | null> {
    const resource = `${this.prefix}lock:${key}`;
    for (let round = 1; ; round++) {
      let lock: Lock;
      try {
        lock = await this.redlock.acquire([resource], ttlMs);
        return this.lease(resource, lock);
      } catch (err) {
        if (!(err instanceof ExecutionError)) throw new LockUnavailableError(`redlock: ${errorMessage(err)}`, { cause: err });
        const votes = await countVotes(err);
        if (votes.locked === 0) {
          throw new LockUnavailableError(`Redis quorum unreachable for ${resource}: ${votes.failed} masters failed, ${votes.quorum} needed`, { cause: err });
        }
        // "Held" on some masters: lost to a real winner only if one holder has a majority. Otherwise
        // it was a split vote (each racer got a minority and released it), and a split must not leave
        // the period to nobody: try again after a short random pause.
        if (await this.heldByMajority(resource, votes.quorum)) return null;
        if (round >= SPLIT_VOTE_ROUNDS) {
          throw new LockUnavailableError(`no Redlock majority for ${resource} after ${round} split votes`, { cause: err, splitVote: true });
        }
        await new Promise((r) => setTimeout(r, 5 + Math.floor(Math.random() * 25)));
      }
    }
  }

  /** True when one lock value is set on at least `quorum` masters. */
  private async heldByMajority(resource: string, quorum: number): Promise<boolean> {
    return (await this.majorityValue(resource, quorum)) !== null;
  }

  /** The lock value set on at least `quorum` masters, or null. */
  private async majorityValue(resource: string, quorum: number): Promise<string | null> {
    const values = await Promise.all(this.clients.map((c) => c.get(resource).catch(() => null)));
    const counts = new Map<string, number>();
    for (const v of values) if (v !== null) counts.set(v, (counts.get(v) ?? 0) + 1);
    for (const [v, n] of counts) if (n >= quorum) return v;
    return null;
  }

  private lease(resource: string, initial: Lock): Lease {
    let lock = initial;
    let released = false;
    // One renewal at a time. A caller waits for it at most a quarter of the TTL: masters that hang
    // (frozen, not down) make every command wait for its timeout, and a renewal that meets its own old
    // key can take several round trips of that; the caller (the lease keeper) must not hold the row
    // heartbeat's confirmation for that long, or the run self-fences while the row is still its own.
    let renewing: Promise<'ok' | 'lost' | 'unavailable'> | null = null;
    // A renewal that ended after every caller stopped waiting: its 'lost' is reported to the next caller.
    let lateLost = false;
    let waiting = 0;
    const renew = async (ttlMs: number): Promise<'ok' | 'lost' | 'unavailable'> => {
      try {
        lock = await lock.extend(ttlMs);
        return 'ok';
      } catch (err) {
        // An ExecutionError with no attempts: redlock refused because the lock expired locally.
        const expiredLocally = !(err instanceof ExecutionError) || err.attempts.length === 0;
        // No master said "not yours": the masters could not answer, which is not a loss by itself.
        if (!expiredLocally && (await countVotes(err as ExecutionError)).locked === 0) return 'unavailable';
      }
      // The key lapsed (a pause past its TTL, masters restarted empty) or another holder has it.
      // If nobody has it, take it again: the row heartbeat, not this key, says whether the attempt
      // is still ours. Lost only when ANOTHER holder's value is on a majority: this node's own value
      // left on a surviving master, an absent key or an unreachable quorum is not a loss.
      try {
        const again = await this.redlock.acquire([resource], ttlMs);
        lock = again;
        // Released meanwhile (the attempt ended while this renewal waited on the masters).
        if (released) await again.release().catch(() => {});
        return 'ok';
      } catch (again) {
        if (again instanceof ExecutionError && (await countVotes(again)).locked === 0) return 'unavailable';
        const holder = await this.majorityValue(resource, Math.floor(this.clients.length / 2) + 1);
        return holder !== null && holder !== lock.value ? 'lost' : 'unavailable';
      }
    };
    return {
      key: resource,
      extend: async (ttlMs) => {
        if (lateLost) {
          lateLost = false;
          return 'lost';
        }
        waiting += 1;
        const current = (renewing ??= renew(ttlMs)
          .catch(() => 'unavailable' as const)
          .then((result) => {
            renewing = null;
            if (waiting === 0 && result === 'lost') lateLost = true;
            return result;
          }));
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<'unavailable'>((resolve) => {
          timer = setTimeout(() => resolve('unavailable'), Math.max(50, Math.floor(ttlMs / 4)));
        });
        try {
          return await Promise.race([current, deadline]);
        } finally {
          waiting -= 1;
          clearTimeout(timer);
        }
      },
      release: async () => {
        released = true;
        try {
          await lock.release();
        } catch {
          // Unreleased keys expire by themselves.
        }
      },
    };
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.quit().catch(() => c.disconnect())));
  }
}
