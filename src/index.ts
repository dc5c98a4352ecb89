/** Public API for job files and embedders. */
import type { CommandJobDefinition, JobDefinition } from './jobs/types.js';

export type { JobContext, JobDefinition, CommandJobDefinition, Trigger, AbortReason, Duration, FailureContext, FailureOutcome } from './jobs/types.js';
export type { AlertBody, AlertKind } from './alerts/body.js';
export type { RunRecord, RunStatus, RunStore } from './store/types.js';
export type { LockProvider, Lease } from './claim/lock.js';
export { SchedulerError, ConfigError } from './errors.js';
export { parseDuration } from './time/duration.js';
export type { OnceFunction, OnceOptions, OnceOutcome, OnceScope } from './once/types.js';
export type { OnceHolder } from './once/errors.js';
export { OnceInProgressError, OnceFailedError, OnceFingerprintMismatchError, OnceFencedError, OnceInputError } from './once/errors.js';

/** Adds types to a job definition (a `run` job or a `command` job) and returns it unchanged. */
export function defineJob<R = unknown>(job: JobDefinition<R>): JobDefinition<R>;
export function defineJob(job: CommandJobDefinition): CommandJobDefinition;
export function defineJob(job: JobDefinition | CommandJobDefinition): JobDefinition | CommandJobDefinition {
  return job;
}
