/**
 * One run of a job body, inline or in a worker, to its outcome: builds `ctx`, arms `timeout`, and
 * races the body against `ctx.signal`. A body that ignores its signal is not waited for: the outcome
 * is recorded when the signal fires (an inline body is left to finish in the background; a worker
 * body is terminated after a short grace). What the body returned is stored as JSON up to
 * `maxResultBytes` (otherwise a `resultNote` says why not, and a warning is logged); what it threw is
 * stored with its message and stack, or, for a non-Error, as its JSON and type. A command job's
 * process (run/command/) is the exception to "not waited for": its outcome is recorded only after its
 * process group is gone, with its output tail.
 */
import { resolve } from 'node:path';
import type { AbortReason, Job, JobContext } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { RunOutcome, RunRecord } from '../store/types.js';
import { describeThrown, serialiseResult } from './outcome.js';
import { DEFAULT_WORKER_GRACE_MS, runInWorker } from './isolation/worker-body.js';
import type { LoopWatchdog } from './isolation/watchdog.js';
import { inBodyScope } from './body-scope.js';
import { makeOnce, noOnceBackend, StoreOnceBackend } from '../once/once.js';
import type { OnceBackend } from '../once/types.js';
import type { OnceStore } from '../store/types.js';
import type { SchedulerObserver } from '../events/events.js';
import { commandOutcome, commandVars, runCommand } from './command/index.js';

export const STATUS_ON_ABORT: Record<AbortReason, RunOutcome['status']> = {
  timeout: 'timed_out',
  shutdown: 'interrupted',
  'lease-lost': 'abandoned',
  // `cancel`: an operator stopped it; not owed, not retried.
  cancelled: 'cancelled',
};

export interface BodyRun {
  job: Job;
  run: RunRecord;
  nodeId: string;
  controller: AbortController;
  dryRun: boolean;
  /** The run's logger (bound to job, period, run id, attempt); ctx.log. */
  log: Logger;
  /** The scheduler's own lines about the run ('run started', a result note): not the body's, so not in its stored log. Default: log. */
  nodeLog?: Logger;
  maxResultBytes: number;
  /** Names the inline bodies that block the event loop. */
  watchdog?: LoopWatchdog;
  /** Worker bodies: how long after the abort a body that has not settled is terminated. */
  workerGraceMs?: number;
  /** The same after a 'lease-lost' abort (shorter: the worker must be gone before the lease runs out in the store). */
  leaseLostGraceMs?: number;
  /** Where ctx.once keeps its keys (none: ctx.once refuses). */
  onceStore?: OnceStore;
  /** Where ctx.once's calls are counted. */
  events?: SchedulerObserver;
  /** The self-fence's deadline (monotonicMs), shared with a worker body so that reading its signal checks it. */
  leaseDeadline?: Float64Array;
  /** Aborted when the lease is lost, also after ctx.signal aborted for another reason (a command's group is then killed at once). */
  leaseGone?: AbortSignal;
}

/** The store's part of ctx.once for this attempt (a worker body reaches it through messages). */
function onceBackend(b: BodyRun): OnceBackend {
  if (!b.onceStore) return noOnceBackend(b.job.name);
  return new StoreOnceBackend({
    store: b.onceStore, caller: { job: b.job.name, runId: b.run.id, attempt: b.run.attempt, nodeId: b.nodeId },
    signal: b.controller.signal, dryRun: b.dryRun, log: b.log, events: b.events,
  });
}

type Settled =
  | { kind: 'ok'; json: string | null; note: string | null; value: () => unknown; output?: string }
  | { kind: 'error'; error: string; errorStack: string | null; output?: string }
  /** A command stopped by the scheduler (after an abort): how its group ended. */
  | { kind: 'stopped'; text: string; output: string };

/**
 * What a body ended with. `late`, for an inline body aborted by the loss of its lease: what the body
 * itself settles with afterwards (it may ignore its signal and finish its work). The outcome cannot be
 * written while the lease is unproven (the store away), so the executor writes the body's own
 * outcome instead when it has settled by the time the store answers: a finished body is recorded
 * succeeded rather than run again.
 */
export type BodyOutcome = RunOutcome & { late?: Promise<RunOutcome> };

export async function runBody(b: BodyRun): Promise<BodyOutcome> {
  const { job, run, controller } = b;
  const log = b.nodeLog ?? b.log;
  const isolation = job.isolation ?? 'inline';
  const timer = job.timeoutMs ? setTimeout(() => controller.abort('timeout'), job.timeoutMs) : undefined;
  timer?.unref();
  const aborted = new Promise<{ kind: 'aborted'; reason: AbortReason }>((resolve) => {
    const onAbort = () => resolve({ kind: 'aborted', reason: controller.signal.reason as AbortReason });
    if (controller.signal.aborted) onAbort();
    else controller.signal.addEventListener('abort', onAbort, { once: true });
  });
  // A command's timeout ends with its leader's exit: what it left behind is stopped on its own killAfter.
  const settled = job.command ? inCommand(b, () => clearTimeout(timer)) : isolation === 'worker' ? inWorker(b) : inline(b);
  // At debug: a run's line at info is its outcome's (`run succeeded`, with its duration), one line
  // per run as graphile-worker and Quartz log them (a second line per run was a fifth of what a node
  // of 500 runs a second allocated); in-flight runs are on the status page and /api. Written once the
  // bodies released at this instant have all been called (a microtask queued now runs after them:
  // see Executor.waitUntil). A command's text is not logged at each run (it may carry a token).
  if (log.isLevelEnabled('debug')) queueMicrotask(() => log.debug({ trigger: run.trigger, scheduledAt: run.scheduledAt.toISOString(), ...(job.command ? { isolation: 'process' } : isolation === 'worker' ? { isolation } : {}) }, 'run started'));
  // A body that ignores its signal is not waited for: the outcome is recorded when the signal fires.
  let first: Settled | { kind: 'aborted'; reason: AbortReason } = await Promise.race([settled, aborted]);
  // A body that failed because it found its lease lost (a worker body's own read of its signal, before
  // this thread's fence has run) ends as the abort ends it. A command that failed is 'stopped' when an
  // abort stopped it: its own failure stays its outcome unless the lease is gone.
  if (first.kind === 'error' && controller.signal.aborted && (!job.command || controller.signal.reason === 'lease-lost')) {
    first = { kind: 'aborted', reason: controller.signal.reason as AbortReason };
  }
  if (timer) clearTimeout(timer);
  let late: Settled | undefined;
  if (first.kind === 'aborted' && job.command) {
    // Recorded only once the process group is gone: SIGTERM, SIGKILL after killAfter (run/command/
    // bounds the wait, the lease-lost grace included); the lease is kept meanwhile.
    late = await settled;
    // An abort that came after the leader had exited (while its leftovers were stopped or its pipes
    // drained) did not stop it: its exit is the outcome, unless the lease is gone.
    if (late.kind !== 'stopped' && first.reason !== 'lease-lost') first = late;
  }
  if (first.kind === 'aborted') {
    if (!job.command && isolation === 'worker') {
      // The worker is gone before the outcome is written: the outcome owes the next attempt (at once
      // after a shutdown), which another node may start. Bounded by the worker's grace; the timer is
      // ref'd so that a one-shot command does not end while it waits.
      let bound: NodeJS.Timeout | undefined;
      await Promise.race([settled, new Promise((r) => (bound = setTimeout(r, (b.workerGraceMs ?? DEFAULT_WORKER_GRACE_MS) + 1000)))]);
      clearTimeout(bound);
    }
    const reason = first.reason;
    const what = reason === 'timeout' ? `timed out after ${job.timeoutMs}ms` : reason === 'shutdown' ? 'interrupted by shutdown' : reason === 'cancelled' ? 'cancelled' : 'lease lost';
    const how = late?.kind === 'stopped' && late.text ? `; ${late.text}` : '';
    const ended: BodyOutcome = { status: STATUS_ON_ABORT[reason] ?? 'failed', error: what + how, reason, ...(late?.output !== undefined ? { output: late.output } : {}) };
    if (reason === 'lease-lost' && !job.command && isolation === 'inline') ended.late = settled.then((s) => settledOutcome(s, log), () => ended);
    return ended;
  }
  return settledOutcome(first, log);
}

/** The outcome of a body that settled by itself. */
function settledOutcome(first: Settled, log: BodyRun['log']): RunOutcome {
  const output = first.output !== undefined ? { output: first.output } : {};
  if (first.kind === 'stopped') return { status: 'failed', error: first.text, ...output };
  if (first.kind === 'error') return { status: 'failed', error: first.error, errorStack: first.errorStack, ...output };
  if (first.note) log.warn({ resultNote: first.note }, first.note);
  return { status: 'succeeded', result: first.json === null ? null : first.value(), resultJson: first.json, resultNote: first.note, ...output };
}

async function inCommand(b: BodyRun, onExit: () => void): Promise<Settled> {
  const { job, run } = b;
  const ended = await runCommand({
    spec: job.command!,
    vars: commandVars({ job: job.name, scheduledAt: run.scheduledAt, periodKey: run.periodKey, attempt: run.attempt, runId: run.id, dryRun: b.dryRun, trigger: run.trigger, nodeId: b.nodeId, shard: { index: run.shard, count: job.shards ?? 1 } }),
    log: b.log,
    signal: b.controller.signal,
    leaseGone: b.leaseGone,
    leaseLostGraceMs: b.leaseLostGraceMs,
    onExit,
  });
  if (ended.stopped) return { kind: 'stopped', text: ended.stopped.text, output: ended.output };
  return commandOutcome(ended);
}

function inline(b: BodyRun): Promise<Settled> {
  const { job, run } = b;
  const ctx: JobContext = {
    job: job.name,
    scheduledAt: new Date(run.scheduledAt.getTime()),
    periodKey: run.periodKey,
    runId: run.id,
    attempt: run.attempt,
    trigger: run.trigger,
    nodeId: b.nodeId,
    signal: b.controller.signal,
    log: b.log,
    dryRun: b.dryRun,
    once: makeOnce(job.name, onceBackend(b), b.controller.signal, b.maxResultBytes),
    shard: { index: run.shard, count: job.shards ?? 1 },
  };
  // Called now, not on a later turn: the bodies released at one instant start one after another,
  // each without waiting for the others' set-up (see Executor.waitUntil).
  const called = (() => {
    const watched = b.watchdog?.enter({ job: job.name, periodKey: run.periodKey, runId: run.id });
    let result: unknown;
    try {
      // The body's callbacks carry its name, for the daemon's handler of what they throw.
      result = inBodyScope({ job: job.name, periodKey: run.periodKey, attempt: run.attempt }, () => job.run(ctx));
    } catch (err) {
      watched?.returned();
      watched?.ended();
      return Promise.reject(err);
    }
    watched?.returned();
    return Promise.resolve(result).finally(() => watched?.ended());
  })();
  return called
    .then(
      (value): Settled => {
        const { json, note } = serialiseResult(value, b.maxResultBytes);
        return { kind: 'ok', json, note, value: () => value };
      },
      (error: unknown): Settled => ({ kind: 'error', ...describeThrown(error) }),
    );
}

async function inWorker(b: BodyRun): Promise<Settled> {
  const { job, run } = b;
  const settled = await runInWorker({
    start: {
      file: resolve(job.path ?? job.file),
      job: job.name,
      scheduledAt: run.scheduledAt.getTime(),
      periodKey: run.periodKey,
      runId: run.id,
      attempt: run.attempt,
      trigger: run.trigger,
      nodeId: b.nodeId,
      dryRun: b.dryRun,
      shard: { index: run.shard, count: job.shards ?? 1 },
      log: { level: b.log.level, bindings: b.log.bindings() },
      maxResultBytes: b.maxResultBytes,
      ...(b.leaseDeadline ? { leaseDeadline: b.leaseDeadline } : {}),
    },
    log: b.log,
    signal: b.controller.signal,
    graceMs: b.workerGraceMs,
    leaseLostGraceMs: b.leaseLostGraceMs,
    once: onceBackend(b),
  });
  if (settled.kind === 'error') return settled;
  const json = settled.json;
  return { kind: 'ok', json, note: settled.note, value: () => (json === null ? null : JSON.parse(json)) };
}
