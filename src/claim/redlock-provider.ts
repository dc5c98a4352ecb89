/**
 * Redlock over independent Redis masters (quorum = majority). One attempt per key: a tick is a race
 * and its losers stop at once. The lock requests of one turn of the event loop (every period of a
 * tick) go to each master as one script call, and each key is decided from those replies alone: won,
 * lost to a holder on a majority, unreachable, or a split vote (no racer reached a majority), which
 * is left to the run row at once, so that a period is never left to nobody and nobody reads keys
 * back. Extensions and re-acquisitions go through redlock. Explicit acquire/extend/release, no
 * `using()` (see the engineering notes for its auto-extension traps).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import Redlock, { ExecutionError, Lock, ResourceLockedError } from 'redlock';
import { redactUrl } from '../config/redact.js';
import { errorMessage, LockUnavailableError } from '../errors.js';
import type { Logger } from '../log.js';
import { batched } from '../batch/coalescer.js';
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

/** Redlock's allowance for clock drift between masters, as a fraction of the TTL. */
const DRIFT_FACTOR = 0.01;

/**
 * Sets each key (KEYS) to the batch's value (ARGV[1]) with its own TTL (ARGV[1 + i]) unless it is
 * set: 1 for a key set, the holder's value for a key held. One SET per free key, one SET and one GET
 * per held one; atomic per master, so the GET sees the value that refused the SET.
 */
const CLAIM_SCRIPT = `
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[i + 1]) then
    out[i] = 1
  else
    out[i] = redis.call('GET', key) or 0
  end
end
return out`;

/** Lock requests sent to each master in one script call, at most. */
const CLAIMS_PER_CALL = 500;

/** Deletes each key (KEYS) whose value is still ARGV[i] (this node's): a clean stop's release of the keys it left to expire. */
const RELEASE_SCRIPT = `
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i] then
    redis.call('DEL', key)
    n = n + 1
  end
end
return n`;

/**
 * Sets the expiry of each key (KEYS) to the instant ARGV[i] (epoch ms): a decided attempt's key kept
 * until its period is older than its catchUp (see Lease.settle). Whoever holds it: once the attempt's
 * row has decided it, no body may start under that key, so a key another node took after this
 * node's lease lapsed (its INSERT met the decided row) is kept as well. One command a key: at 2,000
 * every-second jobs a value check and a TTL read beside it tripled the keep's commands (12 a period
 * in all, over three masters, against 6).
 */
const KEEP_SCRIPT = `
local kept = 0
for i, key in ipairs(KEYS) do
  kept = kept + redis.call('PEXPIREAT', key, ARGV[i])
end
return kept`;

type KeepCommand = { keepKeys(numKeys: number, ...args: string[]): Promise<number> };

type ReleaseCommand = { releaseKeys(numKeys: number, ...args: string[]): Promise<number> };

type ClaimCommand = { claimKeys(numKeys: number, ...args: string[]): Promise<Array<number | string>> };

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
  private readonly acquire: (item: { resource: string; ttlMs: number }) => Promise<Lease | null | LockUnavailableError>;

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
    for (const c of this.clients) {
      c.defineCommand('claimKeys', { lua: CLAIM_SCRIPT });
      c.defineCommand('releaseKeys', { lua: RELEASE_SCRIPT });
      c.defineCommand('keepKeys', { lua: KEEP_SCRIPT });
    }
    this.redlock = new Redlock(this.clients, { retryCount: 0, driftFactor: DRIFT_FACTOR });
    this.acquire = batched(CLAIMS_PER_CALL, (items) => this.acquireBatch(items));
    this.keep = batched(CLAIMS_PER_CALL, (items) => this.keepBatch(items), 2);
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

  /**
   * The lease on `key`, or null when another holder has it on a majority. Requests made in one turn
   * of the event loop (a tick's claims) go to each master as one script call (see CLAIM_SCRIPT).
   */
  async tryAcquire(key: string, ttlMs: number): Promise<Lease | null> {
    const got = await this.acquire({ resource: `${this.prefix}lock:${key}`, ttlMs });
    if (got instanceof Error) throw got;
    return got;
  }

  /**
   * One script call per master for a batch of keys. Each key is decided from the replies alone: set
   * by this batch on a majority (won, a Lease), held by one other value on a majority (lost: null,
   * and nothing more is sent for it), no answer from enough masters (LockUnavailableError), or a
   * split vote (no value on a majority: LockUnavailableError with splitVote, and the run row decides
   * at once). Nothing is released after a lost or split race: a minority key guards nothing and
   * expires by itself, so a loser sends no further command for the period.
   */
  private async acquireBatch(items: Array<{ resource: string; ttlMs: number }>): Promise<Array<Lease | null | LockUnavailableError>> {
    const value = randomBytes(16).toString('hex');
    const start = Date.now();
    const keys = items.map((i) => i.resource);
    const ttls = items.map((i) => String(i.ttlMs));
    const quorum = Math.floor(this.clients.length / 2) + 1;
    const replies = await majorityThenGrace(this.clients.map((c) => (c as unknown as ClaimCommand).claimKeys(keys.length, ...keys, value, ...ttls)), quorum);
    const now = Date.now();
    return items.map(({ resource, ttlMs }, i) => {
      let ours = 0;
      let failed = 0;
      const others = new Map<string, number>();
      for (const reply of replies) {
        if (reply instanceof Error) {
          failed += 1;
          continue;
        }
        const vote = reply[i];
        if (vote === 1) ours += 1;
        else if (typeof vote === 'string') others.set(vote, (others.get(vote) ?? 0) + 1);
      }
      // As redlock: the lease is valid for its TTL from the request, less the clock drift allowed.
      const expiration = start + ttlMs - (Math.round(DRIFT_FACTOR * ttlMs) + 2);
      if (ours >= quorum && expiration > now) return this.lease(resource, new Lock(this.redlock, [resource], value, [], expiration));
      for (const n of others.values()) if (n >= quorum) return null;
      if (others.size === 0) {
        const why = failed > 0 ? (replies.find((r) => r instanceof Error) as Error).message : 'the lease expired while it was being acquired';
        return new LockUnavailableError(`Redis quorum unreachable for ${resource}: ${failed} masters failed, ${quorum} needed (${why})`);
      }
      return new LockUnavailableError(`no Redlock majority for ${resource} (split vote)`, { splitVote: true });
    });
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
      settle: (keepUntilMs?: number) => {
        if (released) return;
        released = true;
        if (keepUntilMs !== undefined && keepUntilMs > lock.expiration) {
          // Best effort: a master that does not answer keeps the key for its TTL only.
          void this.keep({ key: resource, untilMs: Math.round(keepUntilMs) }).catch(() => {});
          return;
        }
        this.settled.set(resource, { value: lock.value, expiresAt: lock.expiration });
        // Oldest first: drop the ones that have expired (every TTL is at least a second).
        const now = Date.now();
        for (const [key, held] of this.settled) {
          if (held.expiresAt > now) break;
          this.settled.delete(key);
        }
      },
    };
  }

  private readonly keep: (item: { key: string; untilMs: number }) => Promise<void>;

  /** One KEEP_SCRIPT call per master for the keys settled in one turn of the event loop. */
  private async keepBatch(items: Array<{ key: string; untilMs: number }>): Promise<void[]> {
    const args = [...items.map((k) => k.key), ...items.map((k) => String(k.untilMs))];
    await Promise.all(this.clients.map((c) => (c as unknown as KeepCommand).keepKeys(items.length, ...args).catch(() => 0)));
    return items.map(() => undefined);
  }

  /** Keys of decided attempts, left to expire (see Lease.settle): released at close if still live. */
  private readonly settled = new Map<string, { value: string; expiresAt: number }>();

  /** A clean stop releases the keys it left to expire: one script call per master, bounded like any command. */
  private async releaseSettled(): Promise<void> {
    const now = Date.now();
    const live = [...this.settled].filter(([, held]) => held.expiresAt > now);
    this.settled.clear();
    for (let i = 0; i < live.length; i += CLAIMS_PER_CALL) {
      const chunk = live.slice(i, i + CLAIMS_PER_CALL);
      await Promise.all(this.clients.map((c) => (c as unknown as ReleaseCommand).releaseKeys(chunk.length, ...chunk.map(([k]) => k), ...chunk.map(([, h]) => h.value)).catch(() => 0)));
    }
  }

  async close(): Promise<void> {
    await this.releaseSettled().catch(() => {});
    await Promise.all(this.clients.map((c) => c.quit().catch(() => c.disconnect())));
  }
}

/**
 * Once a majority of the masters has answered, the others get LATE_MASTER_GRACE_MS more: a master
 * that hangs (frozen, not down) would otherwise hold every claim for the whole command timeout (1 s),
 * which makes a node look behind (see the scheduler) for a fault the quorum survives. A master that
 * answers later is counted as not answering; a key it then sets for us guards nothing more than a
 * minority key does. With fewer than a majority answering, it waits for every answer or error.
 */
const LATE_MASTER_GRACE_MS = 50;

function majorityThenGrace<T>(calls: Array<Promise<T>>, quorum: number): Promise<Array<T | Error>> {
  return new Promise((resolve) => {
    const out: Array<T | Error | undefined> = new Array(calls.length).fill(undefined);
    let answered = 0;
    let ok = 0;
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      resolve(out.map((r) => (r === undefined ? new Error(`no answer within ${LATE_MASTER_GRACE_MS} ms of the majority`) : r)));
    };
    calls.forEach((call, i) => {
      call.then((r) => r, (err: unknown) => (err instanceof Error ? err : new Error(String(err)))).then((r) => {
        if (done) return;
        out[i] = r;
        answered += 1;
        if (!(r instanceof Error)) ok += 1;
        if (answered === calls.length) finish();
        else if (ok >= quorum) timer ??= setTimeout(finish, LATE_MASTER_GRACE_MS);
      });
    });
  });
}
