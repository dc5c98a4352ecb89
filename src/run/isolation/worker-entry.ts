/**
 * The entry of the worker that runs an `isolation: 'worker'` job body. It imports the job file itself
 * (the same importer as the daemon's loader: jiti, the `cluster-cron` alias), builds `ctx` (the same
 * fields; `ctx.signal` aborted when the parent relays an abort; `ctx.log` a pino logger with the
 * parent's options and bindings whose lines the parent writes to its own stream), runs `run(ctx)` and
 * sends back the outcome: the result as JSON (size limit and note decided here, so no value needs to
 * cross by structured clone), or the error's message and stack.
 *
 * Runs as a worker thread (workerData, parentPort) or, for bench/isolation.mjs, as a child process
 * (the start message over IPC).
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import pino from 'pino';
import { createJobImporter, defaultExportOf } from '../../jobs/importer.js';
import type { AbortReason, JobContext } from '../../jobs/types.js';
import { loggerOptions } from '../../log-options.js';
import { describeThrown, serialiseResult } from '../outcome.js';
import type { FromWorker, ToWorker, WorkerStart } from './protocol.js';
import { fromWire } from '../../once/errors.js';
import { makeOnce } from '../../once/once.js';
import type { OnceAcquired, OnceBackend } from '../../once/types.js';
import { checkAgainstDeadline } from '../lease-proof.js';

const inThread = !isMainThread && parentPort !== null;

function send(message: FromWorker): void {
  if (inThread) parentPort!.postMessage(message);
  else process.send?.(message);
}

const controller = new AbortController();
let started = false;

/** ctx.once requests sent to the parent, by id, waiting for its reply. */
const pendingOnce = new Map<number, { resolve(value: unknown): void; reject(err: Error): void }>();
let nextOnceId = 1;

function askParent(message: Omit<Extract<FromWorker, { type: 'once' }>, 'id'>): Promise<unknown> {
  const id = nextOnceId++;
  return new Promise((resolve, reject) => {
    pendingOnce.set(id, { resolve, reject });
    send({ ...message, id } as FromWorker);
  });
}

/** ctx.once's store part, done by the parent (it holds the pool, the lease and the fence). */
const parentOnce: OnceBackend = {
  acquire: (req) => askParent({ type: 'once', op: 'acquire', req }) as Promise<OnceAcquired>,
  settle: (req) => askParent({ type: 'once', op: 'settle', req }).then(() => undefined),
};

function onMessage(message: ToWorker): void {
  if (message.type === 'once-reply') {
    const waiting = pendingOnce.get(message.id);
    pendingOnce.delete(message.id);
    if (message.ok) waiting?.resolve(message.value);
    else waiting?.reject(fromWire(message.error));
  } else if (message.type === 'abort') {
    if (!controller.signal.aborted) controller.abort(message.reason satisfies AbortReason);
  } else if (message.type === 'start' && !started) {
    started = true;
    void run(message.start);
  }
}

if (inThread) {
  parentPort!.on('message', onMessage);
  // Worker threads get their start data up front; an abort sent meanwhile is queued on the port.
  started = true;
  void run(workerData as WorkerStart);
} else {
  process.on('message', (m) => onMessage(m as ToWorker));
}

async function run(start: WorkerStart): Promise<void> {
  // Reading ctx.signal checks the parent's self-fence deadline here too (after a pause, this thread's
  // timers may run before the parent's fence has told it).
  checkAgainstDeadline(controller, start.leaseDeadline);
  const log = pino(loggerOptions(start.log.level, start.log.bindings), {
    write(line: string) {
      send({ type: 'log', line });
    },
  });
  // As in the daemon: a stray callback of the body is logged, not fatal to the body.
  process.on('uncaughtException', (err) => log.error({ err: { message: describeThrown(err).error, stack: (err as Error)?.stack } }, 'uncaught exception in the worker of a job body; the body goes on'));
  process.on('unhandledRejection', (err) => log.error({ err: { message: describeThrown(err).error } }, 'unhandled rejection in the worker of a job body; the body goes on'));
  if (inThread) {
    // process.exit() in a worker thread ends the thread alone; tell the parent why it ended.
    const realExit = process.exit.bind(process);
    process.exit = ((code?: number | string | null) => {
      send({ type: 'exit-called', code: code ?? null });
      return realExit(code as number | undefined);
    }) as typeof process.exit;
  }

  let body: (ctx: JobContext) => unknown;
  try {
    const exported = defaultExportOf(await createJobImporter()(start.file));
    const fn = exported && typeof exported === 'object' ? (exported as { run?: unknown }).run : undefined;
    if (typeof fn !== 'function') throw new Error(`${start.file}: its default export has no run function any more (changed since the scheduler loaded it?)`);
    body = fn.bind(exported) as typeof body;
  } catch (err) {
    const d = describeThrown(err);
    send({ type: 'done', ok: false, error: `the worker could not load the job file: ${d.error}`, errorStack: d.errorStack });
    return;
  }

  const ctx: JobContext = {
    job: start.job,
    scheduledAt: new Date(start.scheduledAt),
    periodKey: start.periodKey,
    runId: start.runId,
    attempt: start.attempt,
    trigger: start.trigger,
    nodeId: start.nodeId,
    signal: controller.signal,
    log,
    dryRun: start.dryRun,
    once: makeOnce(start.job, parentOnce, controller.signal, start.maxResultBytes),
    shard: start.shard ?? { index: 0, count: 1 },
  };
  send({ type: 'running' });
  try {
    const value = await body(ctx);
    const { json, note } = serialiseResult(value, start.maxResultBytes);
    send({ type: 'done', ok: true, json, note });
  } catch (err) {
    const d = describeThrown(err);
    send({ type: 'done', ok: false, error: d.error, errorStack: d.errorStack });
  }
}
