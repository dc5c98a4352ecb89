/**
 * The errors ctx.once throws, each with a stable `code`. They cross from the scheduler to a worker
 * body as plain values (toWire / fromWire), so that `instanceof` and the fields hold in both.
 */
import { SchedulerError, type ErrorCode } from '../errors.js';

/** The attempt that holds (or held) a key. */
export interface OnceHolder {
  job: string;
  runId: string;
  attempt: number;
  nodeId: string;
}

/** Another live attempt holds the key and did not finish within `options.wait`. */
export class OnceInProgressError extends SchedulerError {
  constructor(readonly key: string, readonly holder: OnceHolder, waitedMs: number, job: string) {
    super('E_ONCE_IN_PROGRESS', `ctx.once('${key}') in job '${job}': in progress in run ${holder.runId} (job '${holder.job}', attempt ${holder.attempt}, node ${holder.nodeId}); waited ${waitedMs} ms`);
  }
}

/** The key's fn failed before and `retryFailed` is false: the stored error is `storedError`. */
export class OnceFailedError extends SchedulerError {
  constructor(readonly key: string, readonly storedError: string | null, readonly holder: OnceHolder, job: string) {
    super('E_ONCE_FAILED', `ctx.once('${key}') in job '${job}': failed before in run ${holder.runId} (job '${holder.job}') and retryFailed is false: ${storedError ?? 'no error stored'}`);
  }
}

/** The key was stored with another fingerprint: a reused key for a different action. The key is untouched. */
export class OnceFingerprintMismatchError extends SchedulerError {
  constructor(readonly key: string, readonly storedFingerprint: string, readonly fingerprint: string, job: string) {
    super('E_ONCE_FINGERPRINT', `ctx.once('${key}') in job '${job}': the key is stored with fingerprint '${storedFingerprint}', not '${fingerprint}'; a key must name one action`);
  }
}

/** The caller's attempt no longer owns its run row (lease lost, taken over, finished): nothing was written. */
export class OnceFencedError extends SchedulerError {
  constructor(readonly key: string, message: string) {
    super('E_ONCE_FENCED', message);
  }
}

/** Bad input: a key that is empty or too long, an fn that is not a function, a bad option, a result JSON cannot hold. */
export class OnceInputError extends SchedulerError {
  constructor(readonly key: string | null, message: string) {
    super('E_ONCE_INPUT', message);
  }
}

export type OnceError = OnceInProgressError | OnceFailedError | OnceFingerprintMismatchError | OnceFencedError | OnceInputError;

/** A ctx.once error as a structured-clone value (worker messages). */
export interface OnceErrorWire {
  code: ErrorCode | string;
  message: string;
  fields: Record<string, unknown>;
}

export function toWire(err: unknown): OnceErrorWire {
  const e = err as { code?: string; message?: string } & Record<string, unknown>;
  const fields: Record<string, unknown> = {};
  for (const name of ['key', 'holder', 'storedError', 'storedFingerprint', 'fingerprint']) if (name in (e ?? {})) fields[name] = e[name];
  return { code: String(e?.code ?? ''), message: String(e?.message ?? err), fields };
}

/** Rebuilds the error (same class, message and fields); an error of another kind as a plain Error with its code. */
export function fromWire(w: OnceErrorWire): Error {
  const proto = {
    E_ONCE_IN_PROGRESS: OnceInProgressError.prototype,
    E_ONCE_FAILED: OnceFailedError.prototype,
    E_ONCE_FINGERPRINT: OnceFingerprintMismatchError.prototype,
    E_ONCE_FENCED: OnceFencedError.prototype,
    E_ONCE_INPUT: OnceInputError.prototype,
  }[w.code] as object | undefined;
  const err = new Error(w.message) as Error & Record<string, unknown>;
  if (proto) {
    Object.setPrototypeOf(err, proto);
    err.name = (proto as { constructor: { name: string } }).constructor.name;
  }
  Object.defineProperty(err, 'code', { value: w.code, enumerable: true });
  Object.assign(err, w.fields);
  return err;
}
