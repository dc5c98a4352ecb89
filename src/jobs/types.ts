import type { Logger } from 'pino';
import type { Schedule } from '../time/schedule.js';
import type { OnceFunction } from '../once/types.js';
import type { Exclusion } from '../calendars/exclude.js';

export type Trigger = 'schedule' | 'catch-up' | 'manual' | 'backfill';
export type AbortReason = 'timeout' | 'lease-lost' | 'shutdown' | 'cancelled';

/** The single argument of a job body. */
/** The levels of `logLevel` (pino's). */
export type RunLogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
export const RUN_LOG_LEVELS: readonly RunLogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export interface JobContext {
  /** The job's name. */
  job: string;
  /** The period instant (for a manual run, the moment it was requested). */
  scheduledAt: Date;
  /** `<job>@<ISO-8601 UTC instant>`. */
  periodKey: string;
  /** The run row's id. */
  runId: string;
  /** 1 for the first attempt of a period, then 2, 3, ... */
  attempt: number;
  trigger: Trigger;
  /** The node that runs it. */
  nodeId: string;
  /** Aborted on timeout, loss of the lease, and shutdown past the grace period; `signal.reason` says which. */
  signal: AbortSignal;
  /** A pino child logger bound to job, period, run id and attempt. */
  log: Logger;
  /** True when started with --dry-run: do every read, no write. */
  dryRun: boolean;
  /**
   * Business idempotency: `await ctx.once(key, fn, options?)` runs fn once per key across runs,
   * attempts and nodes and resolves to its stored result (see the README, `ctx.once`);
   * `ctx.once.detailed(...)` resolves to `{ value, replayed, attempts }`.
   */
  once: OnceFunction;
  /** Which shard of the period this run is (`shards: N`): index 0..count-1; { index: 0, count: 1 } for an unsharded job. */
  shard: { index: number; count: number };
}

export type Duration = number | string;

/** The first argument of a job's `onFailure`: which period failed, and where the hook runs. */
export interface FailureContext {
  job: string;
  /** The period instant. */
  scheduledAt: Date;
  periodKey: string;
  /** The attempt that ended the period. */
  attempt: number;
  /** The node that recorded the failure (and calls the hook). */
  nodeId: string;
  /** Aborted with reason 'timeout' when the hook's time is up (the job's timeout, else 30 s). */
  signal: AbortSignal;
  log: Logger;
}

/** The second argument of `onFailure`: how the period ended. */
export interface FailureOutcome {
  /** 'failed' (also: the last attempt was abandoned) or 'timed_out'. */
  status: 'failed' | 'timed_out';
  /** The error's message, as recorded. */
  error: string | null;
  attempt: number;
  /** The period instant. */
  period: Date;
  periodKey: string;
  /** Null when the period ended by a takeover (its node stopped heartbeating). */
  trigger: Trigger | null;
  /** A sharded job: the shard that failed (the hook is called once per failed shard); 0 otherwise. */
  shard: number;
}

/** Where a job body runs: in the scheduler's own thread, or in a worker thread that can be terminated. */
export type Isolation = 'inline' | 'worker';

/** What a job file's default export looks like. */
export interface JobDefinition<R = unknown> {
  /** Default: the file name without extension. */
  name?: string;
  /** croner syntax: 5 fields, or 6 with seconds first. */
  schedule: string;
  /** IANA zone; default: the config's timezone, else UTC. */
  timezone?: string;
  /** ctx.signal aborts on expiry and the run is recorded `timed_out`. Default: none. */
  timeout?: Duration;
  /** Redlock lease, extended while the run is in flight. Default 30s. */
  lockTtl?: Duration;
  /** May a period start while an earlier one runs? Default 'skip'. */
  overlap?: 'skip' | 'allow';
  /** How late a period may still start. Default 15m. */
  catchUp?: Duration;
  /** After downtime run only the latest missed period (true, default) or all, in order. */
  coalesce?: boolean;
  /** Further attempts of the same period after a failure. Default 0. */
  retries?: number;
  /** Delay before a retry (doubled at each further attempt). Default 30s. */
  retryDelay?: Duration;
  /** Default true. */
  enabled?: boolean;
  /**
   * Dates on which the job does not run, in its zone: '2026-12-25', ranges '2026-12-24/2026-12-26'
   * (inclusive), named calendars 'calendar:<name>' (config/calendars/<name>.json or .ics). Such
   * periods are recorded skipped (reason 'calendar').
   */
  exclude?: string[];
  /**
   * 'inline' runs the body in the scheduler's thread; 'worker' in a worker thread of its own, which
   * is terminated when the body ignores its signal (timeout, lease loss, shutdown). Default: the
   * `isolation` setting, else 'inline'.
   */
  isolation?: Isolation;
  /** Each period's body starts this long (at most) after its instant, derived from the period key (the same on every node). Default 0. */
  jitter?: Duration;
  /** Each period is claimed, run and recorded as this many shards (ctx.shard), 1 to 1000. Default 1. */
  shards?: number;
  /** The lowest level of ctx.log lines stored with each attempt (`scheduler logs`). Default 'info'. */
  logLevel?: RunLogLevel;
  /** Each attempt's stored log at most (head and tail kept): bytes, or '1MB', '256KB'; 0 stores none. Default: the runLogMaxSize setting. */
  logMaxSize?: number | string;
  run(ctx: JobContext): R | Promise<R>;
  /** A job has either `run` or `command` (see CommandJobDefinition). */
  command?: never;
  /**
   * Called once per failed period (after its last attempt failed or timed out, or was abandoned with
   * no attempt left), by the node that recorded it, after the outcome is written; bounded by the job's
   * timeout (else 30 s). Its errors are logged. Runs in the daemon's thread, whatever `isolation` says.
   */
  onFailure?(ctx: FailureContext, outcome: FailureOutcome): unknown;
}

/**
 * A command job: `command` instead of `run`, spawned in a process group of its own (see
 * src/run/command/). The only kind a `.json` or `.yaml` job file can define.
 */
export interface CommandJobDefinition extends Omit<JobDefinition, 'run' | 'command' | 'isolation' | 'onFailure'> {
  /** A string run by `/bin/sh -c`, or an argv array spawned directly (no shell). */
  command: string | string[];
  /** Between SIGTERM and SIGKILL to the process group on timeout, lease loss or shutdown. Default 10s. */
  killAfter?: Duration;
  /** The working directory; relative to the job file's folder. Default: that folder. */
  cwd?: string;
  /** Variables added to the command's environment. */
  env?: Record<string, string | number | boolean>;
  run?: never;
  onFailure?(ctx: FailureContext, outcome: FailureOutcome): unknown;
}

/** A command job as validated: what to spawn, where, and how to stop it. */
export interface CommandSpec {
  /** What the file said: the shell string, or the argv. */
  source: string | string[];
  /** What is spawned: `['/bin/sh', '-c', source]`, or the argv with a relative program path made absolute. */
  argv: string[];
  /** Absolute. */
  cwd: string;
  env: Record<string, string>;
  killAfterMs: number;
}

/** A validated job, ready to schedule. */
export interface Job {
  name: string;
  file: string;
  schedule: Schedule;
  timezone: string;
  timeoutMs: number | null;
  lockTtlMs: number;
  overlap: 'skip' | 'allow';
  catchUpMs: number;
  coalesce: boolean;
  retries: number;
  retryDelayMs: number;
  enabled: boolean;
  /** Undefined: no date is excluded. The `exclude` field resolved (its named calendars read). */
  exclude?: Exclusion;
  /** Undefined: 'inline'. */
  isolation?: Isolation;
  /** Undefined: 0 (no jitter). A period's body starts at its instant + jitterDelayMs(periodKey, jitterMs). */
  jitterMs?: number;
  /** Undefined: 1. Shards of a period: rows (job, period, shard 0..shards-1). */
  shards?: number;
  /** Undefined: 'info'. The lowest level of the lines stored with each attempt. */
  logLevel?: RunLogLevel;
  /** Undefined: the runLogMaxSize setting. Each attempt's stored log at most, in bytes; 0: none. */
  logMaxBytes?: number;
  /** The job file's path as loaded (absolute when the jobs folder is); a worker imports it from there. */
  path?: string;
  /** Set for a command job (then `run` is never called). */
  command?: CommandSpec;
  run(ctx: JobContext): unknown;
  onFailure?(ctx: FailureContext, outcome: FailureOutcome): unknown;
}

export interface InvalidJobFile {
  file: string;
  /** One line per problem, each naming the file and field. */
  problems: string[];
}
