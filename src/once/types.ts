/**
 * The types of `ctx.once` and of its backend, at the bottom of the house: job definitions
 * (src/jobs/types.ts), the worker protocol and once.ts itself use them, and this module imports nothing.
 */
export interface OnceOptions {
  /** How long to wait for another live attempt that holds the key (duration; default 5s). Then OnceInProgressError. */
  wait?: number | string;
  /** How long the key is kept after it was taken (duration; default 30d; storing the result does not extend it). */
  ttl?: number | string;
  /** E.g. a hash of the payload: the same key with another fingerprint is refused (OnceFingerprintMismatchError). */
  fingerprint?: string;
  /** After a failed fn, does the next caller run it again? Default true; false: OnceFailedError with the stored error. */
  retryFailed?: boolean;
}

/** What fn gets. */
export interface OnceScope {
  key: string;
  /** The body's ctx.signal: check it right before an irreversible write. */
  signal: AbortSignal;
  /** 1 the first time fn runs for this key, then 2, 3, ... (after a failure or a holder that died). */
  attempt: number;
}

export interface OnceOutcome<T> {
  /** fn's result through JSON: the same value for the caller that ran fn and for every replay. */
  value: T;
  /** True when the stored result was returned without running fn. */
  replayed: boolean;
  /** How many times fn was started for this key. */
  attempts: number;
}

export interface OnceFunction {
  <T>(key: string, fn: (scope: OnceScope) => T | Promise<T>, options?: OnceOptions): Promise<T>;
  /** The same call, resolving to `{ value, replayed, attempts }`. */
  detailed<T>(key: string, fn: (scope: OnceScope) => T | Promise<T>, options?: OnceOptions): Promise<OnceOutcome<T>>;
}

export interface OnceRequest {
  key: string;
  fingerprint: string | null;
  ttlMs: number;
  waitMs: number;
  retryFailed: boolean;
}

/** token null: a dry run, nothing taken (fn runs, nothing is stored). */
export type OnceAcquired = { kind: 'run'; token: number | null; attempts: number } | { kind: 'replay'; json: string | null; attempts: number };

export type OnceSettle = { key: string; token: number; ok: true; json: string | null } | { key: string; token: number; ok: false; error: string; result?: 'failed' };

export interface OnceBackend {
  acquire(req: OnceRequest): Promise<OnceAcquired>;
  /** Stores the result (or the failure); throws OnceFencedError when it could not be stored as the caller's. */
  settle(req: OnceSettle): Promise<void>;
}
