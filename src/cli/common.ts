/**
 * What every command shares: the common flags, configuration, logger, loading jobs, printing.
 * Only commander is loaded with it: the configuration (zod), the logger (pino) and the job loader
 * (jiti) are imported when a command's action first needs them, so that `--help` loads none of them.
 */
import { Command, Option } from 'commander';
import type { Config, ConfigFlags } from '../config/config.js';
import { CONFIG_FILE, settingHelp, type SettingName } from '../config/settings.js';
import { SchedulerError, UsageError } from '../errors.js';
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
  /** Only `prune` has the flag. */
  auditRetention?: string;
  loadTimeout?: string;
  isolation?: string;
  maxResultSize?: string;
  runLogMaxSize?: string;
  /** Only `run` has the flag. */
  http?: string;
  /** Only `run` has the flag. */
  alertWebhook?: string;
  json?: boolean;
}

/** The flag of a setting, its help made from the setting's declaration (src/config/settings.ts). */
export function settingOption(flags: string, name: SettingName): Option {
  return new Option(flags, settingHelp(name));
}

export const JSON_HELP = 'print one JSON document on stdout (logs go to stderr)';

/**
 * The common flags every command takes after its name. The GLOBAL ones are also taken before it
 * (`scheduler --store <url> list`, git's and kubectl's order; see withGlobalOptions).
 */
export function commonOptions(): Option[] {
  return [
    new Option('--config <file>', `${CONFIG_FILE.description} (${CONFIG_FILE.env}, default ${CONFIG_FILE.default} when present)`),
    settingOption('--jobs <dir>', 'jobsDir'),
    settingOption('--store <url>', 'store'),
    settingOption('--redis <urls>', 'redis'),
    settingOption('--node-id <name>', 'nodeId'),
    settingOption('--log-level <level>', 'logLevel'),
    settingOption('--load-timeout <duration>', 'loadTimeout'),
    settingOption('--isolation <mode>', 'isolation'),
    settingOption('--max-result-size <size>', 'maxResultSize'),
    settingOption('--run-log-max-size <size>', 'runLogMaxSize'),
    settingOption('--redis-prefix <prefix>', 'redisPrefix').hideHelp(),
    settingOption('--timezone <zone>', 'timezone').hideHelp(),
  ];
}

/** The common flags also accepted before the command (attribute names, as in CommonOptions). */
export const GLOBAL_OPTIONS = ['config', 'jobs', 'store', 'redis', 'nodeId', 'logLevel', 'json'] as const;

export function withCommonOptions(cmd: Command, opts: { json?: boolean } = { json: true }): Command {
  for (const option of commonOptions()) cmd.addOption(option);
  if (opts.json) cmd.option('--json', JSON_HELP);
  return cmd;
}

/**
 * The GLOBAL_OPTIONS on the program, before the command. Given both before and after the command,
 * the one after wins (it is the more specific). A flag the command does not take (`--json` before
 * `run`) is refused as it is after the command.
 */
export function withGlobalOptions(program: Command): Command {
  const heading = 'Common options (before or after the command; given in both places, the one after the command wins):';
  const common = [...commonOptions(), new Option('--json', JSON_HELP)];
  for (const name of GLOBAL_OPTIONS) program.addOption(common.find((o) => o.attributeName() === name)!.helpGroup(heading));
  program.hook('preAction', (root, command) => {
    for (const name of GLOBAL_OPTIONS) {
      if (root.getOptionValueSource(name) !== 'cli') continue;
      const option = command.options.find((o) => o.attributeName() === name);
      if (!option) command.error(`error: unknown option '${root.options.find((o) => o.attributeName() === name)!.long}' for '${command.name()}'`, { code: 'commander.unknownOption' });
      else if (command.getOptionValueSource(name) !== 'cli') command.setOptionValueWithSource(name, root.getOptionValue(name), 'cli');
    }
  });
  return program;
}

/**
 * The command's name in argv (`node bin/scheduler [global flags] <command> ...`), global flags and
 * their values skipped; undefined when there is none.
 */
export function commandName(program: Command, argv: string[]): string | undefined {
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-')) return arg;
    const option = program.options.find((o) => o.long === arg || o.short === arg);
    if (option?.required) i++;
  }
  return undefined;
}

/** The flags of the configuration, from the command's options (see loadConfig). */
export function configFlags(options: CommonOptions, extra: ConfigFlags = {}): ConfigFlags {
  return {
    config: options.config, jobsDir: options.jobs, store: options.store, redis: options.redis,
    redisPrefix: options.redisPrefix, nodeId: options.nodeId, timezone: options.timezone,
    logLevel: options.logLevel, gracePeriod: options.gracePeriod, retention: options.retention, auditRetention: options.auditRetention,
    loadTimeout: options.loadTimeout, isolation: options.isolation, maxResultSize: options.maxResultSize,
    runLogMaxSize: options.runLogMaxSize,
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
  return loadJobs(config.jobsDir, config.timezone, { timeoutMs: config.loadTimeoutMs, defaults: { isolation: config.isolation }, ...(config.calendarsDir ? { calendarsDir: config.calendarsDir } : {}) });
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

export { parseInstantFlag } from '../time/instant.js';


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
