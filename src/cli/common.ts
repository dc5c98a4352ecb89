/**
 * What every command shares: the common flags, configuration, logger, loading jobs, printing.
 * Only commander is loaded with it: the configuration (zod), the logger (pino) and the job loader
 * (jiti) are imported when a command's action first needs them, so that `--help` loads none of them.
 */
import { Command, Option } from 'commander';
import type { Config, ConfigFlags } from '../config/config.js';
import { SchedulerError } from '../errors.js';
import type { LoadedJobs } from '../jobs/load.js';
import type { Logger } from '../log.js';

export interface CommonOptions {
  config?: string;
  jobs?: string;
  store?: string;
  redis?: string;
  redisPrefix?: string;
  nodeId?: string;
  timezone?: string;
  logLevel?: string;
  gracePeriod?: string;
  retention?: string;
  loadTimeout?: string;
  isolation?: string;
  maxResultSize?: string;
  /** Only `run` has the flag. */
  http?: string;
  /** Only `run` has the flag. */
  alertWebhook?: string;
  json?: boolean;
}

export function withCommonOptions(cmd: Command, opts: { json?: boolean } = { json: true }): Command {
  cmd
    .option('--config <file>', 'configuration file (default: config/scheduler.json when present)')
    .option('--jobs <dir>', 'jobs folder (SCHEDULER_JOBS_DIR, default ./jobs)')
    .option('--store <url>', 'run store: sqlite:<path>, mysql://..., postgres://... (SCHEDULER_STORE)')
    .option('--redis <urls>', 'comma-separated Redis masters for Redlock (SCHEDULER_REDIS)')
    .option('--node-id <name>', "this node's name (SCHEDULER_NODE_ID, default <hostname>-<pid>)")
    .option('--log-level <level>', 'pino level (SCHEDULER_LOG_LEVEL, default info)')
    .option('--load-timeout <duration>', 'deadline of each job file\'s load (SCHEDULER_LOAD_TIMEOUT, default 10s)')
    .option('--isolation <mode>', "default isolation of job bodies: inline or worker (SCHEDULER_ISOLATION, default inline)")
    .option('--max-result-size <size>', 'largest result stored with a run, e.g. 1MB (SCHEDULER_MAX_RESULT_SIZE, default 1MB)')
    .addOption(new Option('--redis-prefix <prefix>', 'prefix of Redis keys (SCHEDULER_REDIS_PREFIX, default scheduler:)').hideHelp())
    .addOption(new Option('--timezone <zone>', 'default time zone of jobs (SCHEDULER_TIMEZONE)').hideHelp());
  if (opts.json) cmd.option('--json', 'print one JSON document on stdout (logs go to stderr)');
  return cmd;
}

/** The flags of the configuration, from the command's options (see loadConfig). */
export function configFlags(options: CommonOptions, extra: ConfigFlags = {}): ConfigFlags {
  return {
    config: options.config, jobsDir: options.jobs, store: options.store, redis: options.redis,
    redisPrefix: options.redisPrefix, nodeId: options.nodeId, timezone: options.timezone,
    logLevel: options.logLevel, gracePeriod: options.gracePeriod, retention: options.retention,
    loadTimeout: options.loadTimeout, isolation: options.isolation, maxResultSize: options.maxResultSize,
    http: options.http, alertWebhook: options.alertWebhook, ...extra,
  };
}

export interface Setup {
  config: Config;
  log: Logger;
}

export async function setup(options: CommonOptions, destination: 'stdout' | 'stderr' = 'stderr', opts: { daemon?: boolean } = {}): Promise<Setup> {
  const [{ loadConfig }, { createLogger }] = await Promise.all([import('../config/config.js'), import('../log.js')]);
  const config = loadConfig({ flags: configFlags(options) });
  const log = createLogger(config.logLevel, destination, { node: config.nodeId }, opts);
  return { config, log };
}

export async function jobsOf(config: Config): Promise<LoadedJobs> {
  const { loadJobs } = await import('../jobs/load.js');
  return loadJobs(config.jobsDir, config.timezone, { timeoutMs: config.loadTimeoutMs, defaults: { isolation: config.isolation } });
}

/** Prints a document: JSON when asked, text otherwise. */
export function print(json: boolean | undefined, doc: unknown, text: () => string): void {
  if (json) process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
  else {
    const out = text();
    if (out !== '') process.stdout.write(out.endsWith('\n') ? out : `${out}\n`);
  }
}


/** The most `-n` (next, list) may ask for. */
export const MAX_COUNT = 100_000;

/**
 * A count flag (`-n`, `--limit`): a whole number from 1 to `max`, else bad usage (exit 2) in one line.
 */
export function parseCount(flag: string, value: string, max = MAX_COUNT): number {
  const text = String(value).trim();
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > max) {
    throw new SchedulerError('E_USAGE', `invalid ${flag} ${value}: expected a whole number from 1 to ${max}`);
  }
  return n;
}

/** Pads columns for text tables. */
export function table(rows: string[][]): string {
  if (rows.length === 0) return '';
  // A loop, not Math.max(...column): `next -n 100000` makes tables too tall for spread arguments.
  const widths = rows[0]!.map((_, i) => rows.reduce((w, r) => Math.max(w, (r[i] ?? '').length), 0));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}
