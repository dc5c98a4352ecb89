/**
 * The options of every pino logger, in a module of their own: the worker of an isolated job body
 * builds its ctx.log with them, and must not load pino-pretty (tens of milliseconds per worker).
 */
import pino from 'pino';

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
