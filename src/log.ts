/**
 * pino loggers: JSON lines, or readable lines when the destination is a terminal. The daemon logs to
 * stdout; every other command logs to stderr so that its stdout carries only what it prints.
 */
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** The options of every logger (the worker of an isolated job body builds its own with these too). */
export function loggerOptions(level: string, base: Record<string, unknown> = {}): pino.LoggerOptions {
  return {
    level,
    base,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    // Never print a password: connection strings are redacted where they are formatted, and these
    // paths catch anything that slips into a log object by name.
    redact: { paths: ['password', '*.password', 'url', '*.url'], censor: '***' },
  };
}

export function createLogger(level: string, destination: 'stdout' | 'stderr', base: Record<string, unknown> = {}): Logger {
  const fd = destination === 'stdout' ? 1 : 2;
  const stream = destination === 'stdout' ? process.stdout : process.stderr;
  const options = loggerOptions(level, base);
  if (stream.isTTY && process.env.SCHEDULER_LOG_FORMAT !== 'json') {
    return pino(options, pretty({ destination: fd, colorize: true, sync: true, ignore: 'pid,hostname' }));
  }
  return pino(options, pino.destination({ dest: fd, sync: true }));
}
