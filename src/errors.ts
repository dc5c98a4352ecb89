/**
 * Errors with a stable `code`. The CLI maps codes to exit statuses in one place (src/cli/exit.ts).
 * A lost race is never an error: lock and store return values for that.
 */
export type ErrorCode =
  | 'E_CONFIG'        // a bad setting (exit 2)
  | 'E_JOB_INVALID'   // a job file that does not validate (exit 2)
  | 'E_USAGE'         // bad command-line usage (exit 2)
  | 'E_UNKNOWN_JOB'   // run-once names a job that does not exist (exit 2)
  | 'E_NOT_FOUND'     // a named thing (a backfill id) does not exist (exit 2)
  | 'E_NOT_A_PERIOD'  // --period is not an instant of that job's schedule (exit 2)
  | 'E_REFUSED'       // a manual run refused: in flight, or already succeeded (exit 3)
  | 'E_STORE_UNAVAILABLE' // the run store cannot be reached (exit 4)
  | 'E_LOCK_UNAVAILABLE' // the Redis quorum cannot be reached (exit 4)
  | 'E_ONCE_IN_PROGRESS' // ctx.once: another live attempt holds the key (src/once/errors.ts)
  | 'E_ONCE_FAILED'      // ctx.once: the key failed before and retryFailed is false
  | 'E_ONCE_FINGERPRINT' // ctx.once: the key was used with another fingerprint
  | 'E_ONCE_FENCED'      // ctx.once: the caller's attempt no longer owns its run: nothing written
  | 'E_ONCE_INPUT';      // ctx.once: a bad key, fn or option, or a result JSON cannot hold

export class SchedulerError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

export class ConfigError extends SchedulerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('E_CONFIG', message, options);
  }
}

export class UsageError extends SchedulerError {
  constructor(message: string) {
    super('E_USAGE', message);
  }
}

export class StoreUnavailableError extends SchedulerError {
  /** True for a failure that may pass when tried again at once (deadlock, lock wait, failover, busy). */
  readonly transient: boolean;
  /** True when the store answers but this process's pool had no free connection in time: load, not an outage. */
  readonly busy: boolean;
  constructor(message: string, options?: { cause?: unknown; transient?: boolean; busy?: boolean }) {
    super('E_STORE_UNAVAILABLE', message, options);
    this.busy = options?.busy ?? false;
    this.transient = (options?.transient ?? false) || this.busy;
  }
}

export class LockUnavailableError extends SchedulerError {
  /** True when the masters answered but repeated split votes left no majority: contention, not an outage. */
  readonly splitVote: boolean;
  /** True when masters did not answer (as opposed to refusing this node): claims can go on through the row. */
  readonly unreachable: boolean;
  constructor(message: string, options?: { cause?: unknown; splitVote?: boolean; unreachable?: boolean }) {
    super('E_LOCK_UNAVAILABLE', message, options);
    this.splitVote = options?.splitVote ?? false;
    this.unreachable = options?.unreachable ?? false;
  }
}

export class RefusedError extends SchedulerError {
  constructor(message: string) {
    super('E_REFUSED', message);
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
