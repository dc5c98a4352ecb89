/**
 * `ctx.once(key, fn, options?)`: business idempotency across runs, attempts and nodes, over the
 * once keys of the store (src/store/once.ts).
 *
 * Two halves, so that a worker body can call it: `makeOnce` (in the body's thread) checks the input,
 * runs fn and turns its result into JSON; a `OnceBackend` does the store's part. In the scheduler's
 * thread that is `StoreOnceBackend`; a worker body reaches the same backend in its parent through
 * messages (see isolation/). The backend decides from one read of the key: replay a stored result,
 * wait for a live holder, refuse (fingerprint, retryFailed: false), or take the key, fenced by the
 * caller's run row in the store and by its signal here.
 */
import { errorMessage, StoreUnavailableError } from '../errors.js';
import type { OnceResult, SchedulerObserver } from '../events/events.js';
import type { Logger } from 'pino';
import { ONCE_FINGERPRINT_MAX, ONCE_KEY_MAX } from '../store/migrations.js';
import type { OnceCaller, OnceRecord, OnceStore } from '../store/types.js';
import { DURATION_EXPECTED, parseDuration } from '../time/duration.js';
import { describeThrown, serialiseResult } from '../run/outcome.js';
import { OnceFailedError, OnceFencedError, OnceFingerprintMismatchError, OnceInProgressError, OnceInputError } from './errors.js';
import type { OnceAcquired, OnceBackend, OnceFunction, OnceOptions, OnceOutcome, OnceRequest, OnceScope, OnceSettle } from './types.js';

/** How long a caller waits for a live holder of the key by default. */
export const DEFAULT_ONCE_WAIT_MS = 5000;
/** How long a key is kept by default (from when it was last taken; storing the result does not extend it); then it counts as absent and is pruned. */
export const DEFAULT_ONCE_TTL_MS = 30 * 86_400_000;
/** How long a result write is tried again while the store does not answer (the lease is kept meanwhile). */
const SETTLE_RETRY_MS = 30_000;
/** The pause between those tries. */
const SETTLE_RETRY_EVERY_MS = 200;

/** Builds ctx.once for a body of `job`. */
export function makeOnce(job: string, backend: OnceBackend, signal: AbortSignal, maxResultBytes: number): OnceFunction {
  const detailed = async <T>(key: string, fn: (scope: OnceScope) => T | Promise<T>, options?: OnceOptions): Promise<OnceOutcome<T>> => {
    const req = checkInput(job, key, fn, options);
    const got = await backend.acquire(req);
    if (got.kind === 'replay') return { value: parse(got.json) as T, replayed: true, attempts: got.attempts };
    let value: unknown;
    try {
      value = await fn({ key, signal, attempt: got.attempts });
    } catch (err) {
      if (got.token !== null) await backend.settle({ key, token: got.token, ok: false, error: describeThrown(err).error }).catch(() => {});
      throw err;
    }
    const stored = serialiseResult(value, maxResultBytes);
    if (stored.note) {
      const bad = new OnceInputError(key, `ctx.once('${key}') in job '${job}': fn's ${stored.note.replace(/^result not stored: /, 'result cannot be stored: ')}; the key is left failed`);
      if (got.token !== null) await backend.settle({ key, token: got.token, ok: false, error: bad.message }).catch(() => {});
      throw bad;
    }
    if (got.token !== null) await backend.settle({ key, token: got.token, ok: true, json: stored.json });
    return { value: parse(stored.json) as T, replayed: false, attempts: got.attempts };
  };
  const once = (<T>(key: string, fn: (scope: OnceScope) => T | Promise<T>, options?: OnceOptions) => detailed(key, fn, options).then((o) => o.value)) as OnceFunction;
  once.detailed = detailed;
  return once;
}

const parse = (json: string | null): unknown => (json === null ? undefined : JSON.parse(json));

/** Half of a surrogate pair without its other half: not encodable as UTF-8. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The call's input, checked before anything is read or written: one line naming the job and the key. */
function checkInput(job: string, key: unknown, fn: unknown, options: OnceOptions | undefined): OnceRequest {
  const where = typeof key === 'string' && key !== '' ? `ctx.once('${key.length > 60 ? `${key.slice(0, 60)}…` : key}') in job '${job}'` : `ctx.once in job '${job}'`;
  const keyName = typeof key === 'string' ? key : null;
  if (typeof key !== 'string' || key === '') throw new OnceInputError(keyName, `${where}: the key must be a non-empty string, got ${typeof key === 'string' ? 'an empty string' : typeof key}`);
  const length = [...key].length;
  if (length > ONCE_KEY_MAX) throw new OnceInputError(key, `${where}: the key is ${length} characters long, over the ${ONCE_KEY_MAX} the store keeps; hash the variable part`);
  if (key.includes('\u0000')) throw new OnceInputError(key, `${where}: the key contains a NUL character`);
  // The drivers send a lone surrogate as U+FFFD: two such keys would be one key in the store.
  if (LONE_SURROGATE.test(key)) throw new OnceInputError(key, `${where}: the key contains a lone UTF-16 surrogate (half of a character, e.g. from slicing a string): the store would keep U+FFFD instead`);
  if (typeof fn !== 'function') throw new OnceInputError(key, `${where}: fn must be a function, got ${fn === null ? 'null' : typeof fn}`);
  if (options !== undefined && (options === null || typeof options !== 'object')) throw new OnceInputError(key, `${where}: options must be an object`);
  const o = options ?? {};
  const duration = (name: 'wait' | 'ttl', fallback: number, min: number): number => {
    if (o[name] === undefined) return fallback;
    const ms = parseDuration(o[name]);
    if (ms === undefined || ms < min) throw new OnceInputError(key, `${where}: options.${name} ${JSON.stringify(o[name])} is invalid: expected ${DURATION_EXPECTED}${min > 0 ? `, at least ${min} ms` : ''}`);
    return ms;
  };
  const waitMs = duration('wait', DEFAULT_ONCE_WAIT_MS, 0);
  const ttlMs = duration('ttl', DEFAULT_ONCE_TTL_MS, 1000);
  let fingerprint: string | null = null;
  if (o.fingerprint !== undefined) {
    if (typeof o.fingerprint !== 'string' || o.fingerprint === '' || [...o.fingerprint].length > ONCE_FINGERPRINT_MAX || o.fingerprint.includes('\u0000') || LONE_SURROGATE.test(o.fingerprint)) {
      throw new OnceInputError(key, `${where}: options.fingerprint must be a non-empty string of at most ${ONCE_FINGERPRINT_MAX} characters (no NUL, no lone surrogate)`);
    }
    fingerprint = o.fingerprint;
  }
  if (o.retryFailed !== undefined && typeof o.retryFailed !== 'boolean') throw new OnceInputError(key, `${where}: options.retryFailed must be true or false`);
  return { key, fingerprint, ttlMs, waitMs, retryFailed: o.retryFailed ?? true };
}

export interface StoreOnceBackendOptions {
  store: OnceStore;
  caller: OnceCaller;
  signal: AbortSignal;
  dryRun: boolean;
  log: Logger;
  events?: SchedulerObserver;
}

/** The store's part of ctx.once, in the scheduler's thread, for one attempt. */
export class StoreOnceBackend implements OnceBackend {
  constructor(private readonly o: StoreOnceBackendOptions) {}

  private emit(key: string, result: OnceResult): void {
    this.o.events?.emit({ type: 'once', job: this.o.caller.job, key, runId: this.o.caller.runId, result });
  }

  private where(key: string): string {
    return `ctx.once('${key}') in job '${this.o.caller.job}'`;
  }

  /** The process-local fence: an attempt whose signal fired takes no key (after 'lease-lost', it also stores nothing). */
  private refuseIfAborted(key: string, what: string): void {
    const { signal } = this.o;
    if (signal.aborted) throw new OnceFencedError(key, `${this.where(key)}: ${what}: the run's signal was aborted (${String(signal.reason)}); nothing written`);
  }

  async acquire(req: OnceRequest): Promise<OnceAcquired> {
    const { store, caller, dryRun } = this.o;
    const started = performance.now();
    let delay = 25;
    let races = 0;
    for (;;) {
      if (races > 50) throw new Error(`${this.where(req.key)}: the key kept changing under this caller (${races} tries)`);
      this.refuseIfAborted(req.key, 'the key cannot be taken');
      const rec = await transientRetry(() => store.read(req.key));
      const current = rec && !rec.expired ? rec : null;
      if (current) {
        if (req.fingerprint !== null && current.fingerprint !== null && current.fingerprint !== req.fingerprint) {
          throw new OnceFingerprintMismatchError(req.key, current.fingerprint, req.fingerprint, caller.job);
        }
        if (current.status === 'succeeded') {
          this.emit(req.key, 'replayed');
          return { kind: 'replay', json: current.resultJson, attempts: current.attempts };
        }
        if (current.status === 'failed' && !req.retryFailed) throw new OnceFailedError(req.key, current.error, holderOf(current), caller.job);
        if (current.status === 'processing' && current.holderLive && !dryRun) {
          const waited = Math.round(performance.now() - started);
          if (waited >= req.waitMs) {
            this.emit(req.key, 'in_progress');
            throw new OnceInProgressError(req.key, holderOf(current), waited, caller.job);
          }
          await sleep(Math.min(delay, req.waitMs - waited), this.o.signal);
          delay = Math.min(delay * 2, 500);
          continue;
        }
      }
      // A dry run writes no key: fn runs (it must itself write nothing), and nothing is stored.
      if (dryRun) return { kind: 'run', token: null, attempts: (current?.attempts ?? 0) + 1 };
      const taken = await transientRetry(() => store.take(req.key, caller, { fingerprint: req.fingerprint, ttlMs: req.ttlMs }, rec));
      if (taken.outcome === 'taken') return { kind: 'run', token: taken.version, attempts: taken.attempts };
      if (taken.outcome === 'fenced') {
        throw new OnceFencedError(req.key, `${this.where(req.key)}: the key cannot be taken: run ${caller.runId} (attempt ${caller.attempt}) is no longer this node's running attempt (lease lost or taken over); nothing written`);
      }
      // 'changed': another caller wrote the key between the read and the write; decide again.
      races++;
    }
  }

  async settle(req: OnceSettle): Promise<void> {
    const { store, caller, signal, log } = this.o;
    const key = req.key;
    if (signal.aborted && signal.reason === 'lease-lost') {
      log.warn({ onceKey: key }, `ctx.once: the lease was lost while fn ran: its ${req.ok ? 'result' : 'failure'} is not stored (the key is taken over by the next caller)`);
      throw new OnceFencedError(key, `${this.where(key)}: the lease was lost while fn ran: its ${req.ok ? 'result' : 'failure'} is not stored`);
    }
    const outcome = req.ok ? { status: 'succeeded' as const, resultJson: req.json } : { status: 'failed' as const, error: req.error };
    const until = performance.now() + SETTLE_RETRY_MS;
    let tried = false;
    for (;;) {
      let stored: boolean;
      try {
        stored = await store.settle(key, caller, req.token, outcome);
        // A try whose answer was lost may have committed: the key then shows this caller's write.
        if (!stored && tried) stored = isOwnSettle(await store.read(key), caller, req.token, outcome.status);
      } catch (err) {
        tried = true;
        // fn has done its work: losing its result would run it again. Tried again while the lease holds.
        if (err instanceof StoreUnavailableError && performance.now() < until && !(signal.aborted && signal.reason === 'lease-lost')) {
          log.warn({ onceKey: key, err: { message: errorMessage(err) } }, 'ctx.once: the store did not take the result; trying again');
          // Not cut short by the signal: after a timeout or a shutdown it is aborted already, and the
          // tries would follow each other with no pause (a lease-lost abort is seen at the next turn).
          await new Promise((r) => setTimeout(r, SETTLE_RETRY_EVERY_MS));
          continue;
        }
        throw err;
      }
      if (!stored) {
        log.warn({ onceKey: key }, 'ctx.once: the result was not stored: the attempt no longer owns its run (lease lost or taken over)');
        throw new OnceFencedError(key, `${this.where(key)}: fn's ${req.ok ? 'result' : 'failure'} was not stored: run ${caller.runId} is no longer this node's running attempt`);
      }
      this.emit(key, req.ok ? 'executed' : 'failed');
      return;
    }
  }
}

/** ctx.once without a store to keep keys (an executor built without one). */
export const noOnceBackend = (job: string): OnceBackend => ({
  acquire: (req) => Promise.reject(new OnceInputError(req.key, `ctx.once('${req.key}') in job '${job}': this scheduler has no key store (an executor built without one)`)),
  settle: () => Promise.resolve(),
});

/** The key as this caller's settle (token + 1, its status, held by it) would have left it. */
function isOwnSettle(r: OnceRecord | null, caller: OnceCaller, token: number, status: 'succeeded' | 'failed'): boolean {
  return r !== null && r.version === token + 1 && r.status === status && r.holder.runId === caller.runId && r.holder.attempt === caller.attempt && r.holder.nodeId === caller.nodeId;
}

/** A deadlock, lock wait or busy store is tried again twice (every statement here is one autocommit write or read). */
async function transientRetry<T>(fn: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof StoreUnavailableError && err.transient) || i >= 2) throw err;
      await new Promise((r) => setTimeout(r, 20 * (i + 1)));
    }
  }
}

function holderOf(r: OnceRecord) {
  return { job: r.job, runId: r.holder.runId, attempt: r.holder.attempt, nodeId: r.holder.nodeId };
}

/** Waits `ms`, or until the signal aborts (the caller's loop then refuses). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
