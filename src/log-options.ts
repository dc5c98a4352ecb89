/**
 * The options of every pino logger, in a module of their own: the worker of an isolated job body
 * builds its ctx.log with them, and must not load pino-pretty (tens of milliseconds per worker).
 */
import pino from 'pino';
import { redactUrl } from './config/redact.js';
import { runLogHook } from './runlog/hook.js';

/** The options of every logger (the worker of an isolated job body builds its own with these too). */
export function loggerOptions(level: string, base: Record<string, unknown> = {}): pino.LoggerOptions {
  return {
    level,
    base,
    timestamp: pino.stdTimeFunctions.isoTime,
    // A body's lines are also stored with its attempt (src/runlog/); other loggers are unaffected.
    hooks: { logMethod: runLogHook },
    formatters: { level: (label) => ({ level: label }) },
    // Never print a password: connection strings are redacted where they are formatted, and these
    // paths catch anything that slips into a log object by name.
    // A `url` keeps what is not a secret (the HTTP server's address): only its credentials go.
    redact: {
      paths: ['password', '*.password', 'url', '*.url'],
      censor: (value: unknown, path: string[]) => (path[path.length - 1] === 'url' && typeof value === 'string' ? redactUrl(value) : '***'),
    },
  };
}
