/**
 * pino loggers: JSON lines, or readable lines when the destination is a terminal. The daemon logs to
 * stdout; every other command logs to stderr so that its stdout carries only what it prints.
 */
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import { loggerOptions } from './log-options.js';
import { TerminalOutput } from './output/terminal.js';

export type { Logger };
export { loggerOptions };

const terminals = new WeakMap<Logger, TerminalOutput>();

/**
 * `daemon`: under a terminal, the per-run lines go to debug (the run line replaces them; see
 * output/terminal.ts). JSON logs are the same either way.
 */
export function createLogger(level: string, destination: 'stdout' | 'stderr', base: Record<string, unknown> = {}, opts: { daemon?: boolean } = {}): Logger {
  const fd = destination === 'stdout' ? 1 : 2;
  const stream = destination === 'stdout' ? process.stdout : process.stderr;
  const options = loggerOptions(level, base);
  if (stream.isTTY && process.env.SCHEDULER_LOG_FORMAT !== 'json') {
    if (!opts.daemon) return pino(options, pretty({ destination: fd, colorize: true, sync: true, ignore: 'pid,hostname' }));
    let logger: Logger | undefined;
    const terminal = new TerminalOutput({ fd, colorize: pretty.isColorSupported, levelValue: () => logger?.levelVal ?? 30, demoteRunLines: true });
    logger = pino(options, terminal);
    terminals.set(logger, terminal);
    return logger;
  }
  // The daemon's JSON lines are written asynchronously (lines logged while a write is in flight go out
  // together in the next one): two lines per run were a blocking write each, the largest single CPU
  // cost of a node with hundreds of runs a second. pino flushes what is left when the process exits.
  // Other commands write synchronously: their few lines must precede what they print.
  return pino(options, pino.destination({ dest: fd, sync: !opts.daemon }));
}

/** The terminal a daemon's logger prints to, or undefined for JSON logs. */
export function terminalOf(log: Logger): TerminalOutput | undefined {
  return terminals.get(log);
}
