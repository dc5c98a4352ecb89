/**
 * The messages between the scheduler and the worker that runs an `isolation: 'worker'` body. The
 * same entry serves a worker thread (workerData, parentPort) and a child process (IPC; measured by
 * bench/isolation.mjs, not offered as a setting).
 */
import type { AbortReason, Trigger } from '../../jobs/types.js';
import type { OnceErrorWire } from '../../once/errors.js';
import type { OnceAcquired, OnceRequest, OnceSettle } from '../../once/types.js';

/** What the worker needs to load the job file and build ctx. */
export interface WorkerStart {
  /** The job file to import (absolute). */
  file: string;
  job: string;
  /** Epoch ms of ctx.scheduledAt. */
  scheduledAt: number;
  periodKey: string;
  runId: string;
  attempt: number;
  trigger: Trigger;
  nodeId: string;
  dryRun: boolean;
  /** ctx.shard. Absent (a parent of an older version): { index: 0, count: 1 }. */
  shard?: { index: number; count: number };
  /** ctx.log: a pino logger at this level with these bindings (the parent's run logger's). */
  log: { level: string; bindings: Record<string, unknown> };
  maxResultBytes: number;
  /** The parent's self-fence deadline (monotonicMs, a SharedArrayBuffer the parent moves with each confirmed heartbeat). */
  leaseDeadline?: Float64Array;
}

export type ToWorker =
  | { type: 'start'; start: WorkerStart }
  | { type: 'abort'; reason: AbortReason }
  /** The answer to a ctx.once request (by its id): the acquire's or the settle's value, or the error it threw. */
  | { type: 'once-reply'; id: number; ok: true; value: OnceAcquired | null }
  | { type: 'once-reply'; id: number; ok: false; error: OnceErrorWire };

export type FromWorker =
  /** A log line, formatted by the worker's pino exactly as the parent's would be; the parent writes it to its own stream. */
  | { type: 'log'; line: string }
  /** The job module is loaded and run(ctx) is being called. */
  | { type: 'running' }
  /** The body called process.exit(code): the worker ends next. */
  | { type: 'exit-called'; code: number | string | null }
  /** ctx.once in the worker: the parent does the store's part (it holds the pool and the lease) and replies. */
  | { type: 'once'; id: number; op: 'acquire'; req: OnceRequest }
  | { type: 'once'; id: number; op: 'settle'; req: OnceSettle }
  | { type: 'done'; ok: true; json: string | null; note: string | null }
  | { type: 'done'; ok: false; error: string; errorStack: string | null };
