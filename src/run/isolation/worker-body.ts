/**
 * The parent side of an `isolation: 'worker'` job body: a worker thread per run that imports the job
 * file and runs `run(ctx)` (see worker-entry.ts). Aborts of the run's signal (timeout, lease-lost,
 * shutdown) are relayed to the worker's `ctx.signal`; a body that has not settled `graceMs` later is
 * terminated (V8 stops even a `for (;;) {}`); after 'lease-lost', `leaseLostGraceMs` later (the
 * executor gives half its self-fencing margin, so that a fenced attempt's worker is gone before the
 * store's lease runs out and another node may start the next attempt). A body that settles is terminated at once, with
 * whatever it left behind (timers, sockets). A body that calls `process.exit()` ends its worker only.
 *
 * The outcome is decided by the caller at the abort, as for an inline body; the termination runs in
 * the background and does not hold the process open.
 *
 * `mode: 'process'` runs the same entry in a child process (fork, SIGKILL after the grace): it is
 * what bench/isolation.mjs measures against the thread; jobs cannot choose it.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import pino from 'pino';
import type { AbortReason } from '../../jobs/types.js';
import type { Logger } from '../../log.js';
import type { FromWorker, ToWorker, WorkerStart } from './protocol.js';
import type { OnceBackend } from '../../once/types.js';
import { toWire } from '../../once/errors.js';
import { attemptLogOf } from '../../runlog/writer.js';

export const WORKER_ENTRY = fileURLToPath(new URL('./worker-entry.js', import.meta.url));

/** How long a worker body may take to settle after its signal aborted before it is terminated. */
export const DEFAULT_WORKER_GRACE_MS = 1000;
/** The same after its timeout. */
export const TIMEOUT_GRACE_MS = 500;

export type IsolationMode = 'thread' | 'process';

export interface WorkerBodySpec {
  start: WorkerStart;
  /** The run's logger: the worker's log lines are written to its stream. */
  log: Logger;
  signal: AbortSignal;
  graceMs?: number;
  /**
   * The grace after a 'lease-lost' abort: shorter, so that the worker is gone before the store can
   * give the attempt to another node (default: graceMs).
   */
  leaseLostGraceMs?: number;
  mode?: IsolationMode;
  /** Where the body's ctx.once requests go (the parent does the store's part). */
  once?: OnceBackend;
}

export type WorkerSettled =
  | { kind: 'ok'; json: string | null; note: string | null }
  | { kind: 'error'; error: string; errorStack: string | null };

interface Handle {
  post(message: ToWorker): void;
  kill(): Promise<void>;
  /** The worker no longer keeps the process alive. */
  unref(): void;
}

/** Runs the body in a worker; resolves with its outcome (never rejects). */
export function runInWorker(spec: WorkerBodySpec): Promise<WorkerSettled> {
  const { log, signal } = spec;
  const defaultGraceMs = spec.graceMs ?? DEFAULT_WORKER_GRACE_MS;
  const stream = (log as unknown as Record<symbol, { write(line: string): void } | undefined>)[pino.symbols.streamSym];
  const attemptLog = attemptLogOf(log);
  return new Promise<WorkerSettled>((resolve) => {
    let settled = false;
    let exitCalled: { code: number | string | null } | undefined;
    let killing = false;
    let graceTimer: NodeJS.Timeout | undefined;
    const settle = (outcome: WorkerSettled) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (graceTimer) clearTimeout(graceTimer);
      resolve(outcome);
      // Whatever the body left running ends with its worker.
      void handle.kill();
    };
    const onMessage = (m: FromWorker) => {
      if (m.type === 'log') {
        // Stored with the attempt at or above the job's logLevel; printed at or above the node's.
        if (attemptLog && !attemptLog.workerLine(m.line)) return;
        if (stream) stream.write(m.line);
        else log.info({ line: m.line }, 'worker log line');
      } else if (m.type === 'once') {
        const backend = spec.once;
        const answer: Promise<unknown> = !backend ? Promise.reject(new Error('ctx.once is not available here'))
          : m.op === 'acquire' ? backend.acquire(m.req) : backend.settle(m.req).then(() => null);
        answer.then(
          (value) => { if (!settled) handle.post({ type: 'once-reply', id: m.id, ok: true, value: value as never }); },
          (err: unknown) => { if (!settled) handle.post({ type: 'once-reply', id: m.id, ok: false, error: toWire(err) }); },
        );
      } else if (m.type === 'exit-called') {
        exitCalled = { code: m.code };
      } else if (m.type === 'done') {
        settle(m.ok ? { kind: 'ok', json: m.json, note: m.note } : { kind: 'error', error: m.error, errorStack: m.errorStack });
      }
    };
    const onExit = (code: number | null, signalName?: string | null) => {
      if (settled) return;
      const how = signalName ? `signal ${signalName}` : `exit code ${code}`;
      const error = exitCalled
        ? `process.exit(${exitCalled.code ?? ''}) was called by the job body: it ended the body's worker (${how}), not the node`
        : killing
          ? `the body's worker was terminated (${how})`
          : `the body's worker ended without an outcome (${how})`;
      settle({ kind: 'error', error, errorStack: null });
    };
    const onError = (err: Error) => settle({ kind: 'error', error: `the body's worker failed: ${err.message}`, errorStack: err.stack ?? null });

    let handle: Handle;
    try {
      handle = spec.mode === 'process' ? forkChild(spec.start, onMessage, onExit, onError) : startThread(spec.start, onMessage, onExit, onError);
    } catch (err) {
      resolve({ kind: 'error', error: `the body's worker could not start: ${(err as Error).message}`, errorStack: (err as Error).stack ?? null });
      return;
    }
    const kill = handle.kill;
    handle.kill = () => {
      killing = true;
      return kill();
    };

    function onAbort() {
      const reason = signal.reason as AbortReason;
      // After a timeout, half a second: the outcome waits for the worker to be gone, and a timeout is
      // a deadline the body has already had.
      const graceMs = reason === 'lease-lost' ? Math.min(defaultGraceMs, spec.leaseLostGraceMs ?? defaultGraceMs)
        : reason === 'timeout' ? Math.min(defaultGraceMs, TIMEOUT_GRACE_MS) : defaultGraceMs;
      handle.post({ type: 'abort', reason });
      // From here on the outcome is recorded by the caller; the worker must not keep the node alive.
      handle.unref();
      graceTimer = setTimeout(() => {
        if (settled) return;
        log.warn({ reason, graceMs }, `the body did not end within ${graceMs} ms of its signal (${reason}): terminating its worker`);
        void handle.kill();
      }, graceMs);
      graceTimer.unref();
    }
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

function startThread(start: WorkerStart, onMessage: (m: FromWorker) => void, onExit: (code: number) => void, onError: (err: Error) => void): Handle {
  const worker = new Worker(WORKER_ENTRY, { workerData: start, stdout: false, stderr: false });
  worker.on('message', onMessage);
  worker.on('error', onError);
  worker.on('exit', onExit);
  let killed: Promise<void> | undefined;
  return {
    post: (message) => worker.postMessage(message),
    kill: () => (killed ??= worker.terminate().then(() => undefined, () => undefined)),
    unref: () => worker.unref(),
  };
}

function forkChild(start: WorkerStart, onMessage: (m: FromWorker) => void, onExit: (code: number | null, signal: string | null) => void, onError: (err: Error) => void): Handle {
  const child: ChildProcess = fork(WORKER_ENTRY, [], { serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  child.on('message', (m) => onMessage(m as FromWorker));
  child.on('error', onError);
  child.on('exit', onExit);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.send({ type: 'start', start } satisfies ToWorker);
  return {
    post: (message) => {
      if (child.connected) child.send(message);
    },
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      return exited;
    },
    unref: () => {
      child.unref();
      (child.channel as { unref?: () => void } | undefined)?.unref?.();
    },
  };
}
