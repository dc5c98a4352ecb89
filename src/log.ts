/**
 * pino loggers: JSON lines, or readable lines when the destination is a terminal. The daemon logs to
 * stdout; every other command logs to stderr so that its stdout carries only what it prints.
 */
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';
import { loggerOptions } from './log-options.js';

export type { Logger };
export { loggerOptions };

export function createLogger(level: string, destination: 'stdout' | 'stderr', base: Record<string, unknown> = {}): Logger {
  const fd = destination === 'stdout' ? 1 : 2;
  const stream = destination === 'stdout' ? process.stdout : process.stderr;
  const options = loggerOptions(level, base);
  if (stream.isTTY && process.env.SCHEDULER_LOG_FORMAT !== 'json') {
    return pino(options, pretty({ destination: fd, colorize: true, sync: true, ignore: 'pid,hostname' }));
  }
  return pino(options, pino.destination({ dest: fd, sync: true }));
}
