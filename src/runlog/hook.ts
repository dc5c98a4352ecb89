/**
 * The pino hook that hands an attempt's ctx.log lines to its log (see capture.ts). It is in every
 * logger's options (log-options.ts), and costs a property lookup on loggers that are not a body's.
 * A body's logger carries a sink: a line at or above the job's `logLevel` is stored; it is printed
 * only at or above the node's own level, as before. Imports nothing, for the worker's sake.
 */

/** On a body's logger (and, through the prototype chain, on its children): where its lines go. */
export const RUN_LOG_SINK = Symbol.for('cluster-cron.run-log-sink');
/** On a command's stdout and stderr loggers: the stream their lines are stored under. */
export const RUN_LOG_STREAM = Symbol.for('cluster-cron.run-log-stream');

export interface RunLogSink {
  /** Lines at or above this pino level value are printed (the node's level). */
  readonly printFrom: number;
  /** Lines at or above this one are stored (the job's logLevel). */
  readonly storeFrom: number;
  add(level: number, stream: 'log' | 'stdout' | 'stderr', args: unknown[], logger: object): void;
}

type Tagged = Record<symbol, unknown>;

export function runLogHook(this: object, args: unknown[], method: (...a: unknown[]) => void, level: number): void {
  const sink = (this as Tagged)[RUN_LOG_SINK] as RunLogSink | undefined;
  if (sink === undefined) {
    method.apply(this, args);
    return;
  }
  if (level >= sink.storeFrom) {
    try {
      sink.add(level, ((this as Tagged)[RUN_LOG_STREAM] as 'stdout' | 'stderr' | undefined) ?? 'log', args, this);
    } catch {
      // Storing a line never costs the body anything, an exception least of all.
    }
  }
  if (level >= sink.printFrom) method.apply(this, args);
}
