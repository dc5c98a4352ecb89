/**
 * Configuration: built-in defaults < config file < SCHEDULER_* environment < command-line flags,
 * merged in one place and validated once. A bad value is refused with one line naming the setting
 * (as the user wrote it: file key, variable or flag), the value (secrets redacted) and what was expected.
 */
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { formatDuration, parseDuration, DURATION_EXPECTED } from '../time/duration.js';
import { isValidTimezone } from '../time/schedule.js';
import type { Isolation } from '../jobs/types.js';
import { DEFAULT_MAX_RESULT_BYTES, formatSize } from '../run/outcome.js';
import { redactUrl } from './redact.js';
import { MAX_RUN_LOG_BYTES, parseSize, RUN_LOG_SIZE_EXPECTED } from './size.js';

export { parseSize };
import { parseStoreHosts, StoreUrlError, type StoreHost, type TargetSessionAttrs } from '../store/hosts.js';
import { redactWebhookUrl } from '../alerts/webhook.js';
import { parseHttpTokens, type HttpTokenConfig } from './http-tokens.js';
import { CONFIG_FILE, DEFAULTS, LOG_LEVELS, SETTINGS, type SettingName } from './settings.js';

/**
 * `url` is the URL as given (shown with its password redacted). `hosts`: the hosts it lists, in
 * order (one for a plain URL; absent where a store is made by hand, as in tests: the URL's host).
 */
export type StoreConfig =
  | { kind: 'sqlite'; path: string; url: string }
  | { kind: 'mysql'; url: string; hosts?: StoreHost[] }
  | { kind: 'postgres'; url: string; hosts?: StoreHost[]; targetSessionAttrs?: TargetSessionAttrs };

export interface Config {
  jobsDir: string;
  store: StoreConfig;
  redis: string[];
  redisPrefix: string;
  nodeId: string;
  timezone: string;
  http: { host: string; port: number } | 'off';
  /** Where `http` came from (e.g. `SCHEDULER_HTTP`, `--http`, `<file>: http`); null for the built-in default. */
  httpOrigin: string | null;
  /** Bearer token for `/` and `/api/...` of the HTTP server; null: none. A secret: never shown. */
  httpToken: string | null;
  /** The HTTP server's tokens (httpTokens, and httpToken as the operator `default`): hashes only. */
  httpTokens: HttpTokenConfig[];
  logLevel: string;
  /** How long in-flight runs may go on after SIGTERM before ctx.signal aborts with 'shutdown'. */
  gracePeriodMs: number;
  /** How long finished run rows are kept (`prune` and the daemon's background pruning); null: 'off', kept for ever. */
  retentionMs: number | null;
  /** How long audit rows are kept (`prune` and the daemon's pruning); null: 'off', kept for ever. */
  auditRetentionMs: number | null;
  /** Deadline of each job file's load (a top-level await that never settles becomes an invalid file). */
  loadTimeoutMs: number;
  /** The default `isolation` of jobs that do not set their own. */
  isolation: Isolation;
  /** A body's result whose JSON is larger than this is not stored (the run gets a resultNote). */
  maxResultBytes: number;
  /** Each attempt's stored log at most (bytes), for jobs that set no logMaxSize; 0: none stored. */
  runLogMaxBytes: number;
  /** `run` reloads by itself when the jobs folder or the config file changes (src/daemon/watch.ts). */
  watch: boolean;
  /** Where alerts are POSTed (SCHEDULER_ALERT_WEBHOOK, an http(s) URL); null: no alerts. A secret: shown redacted. */
  alertWebhook: string | null;
  /** Sent as `Authorization: Bearer <token>` with each alert (SCHEDULER_ALERT_TOKEN); never shown. */
  alertToken: string | null;
  /** Where the config file came from, if any (for messages). */
  configFile?: string;
  /**
   * Where the named calendars of jobs' `exclude` are: `calendars/` beside the config file, or
   * `./config/calendars` with no config file. Undefined (a Config made by hand): the latter.
   */
  calendarsDir?: string;
}

export { DEFAULTS, type SettingName };
export type ConfigFlags = Partial<Record<SettingName | 'config', string>>;

export interface LoadOptions {
  flags?: ConfigFlags;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

interface Raw { value: unknown; origin: string }

export function loadConfig(options: LoadOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const flags = options.flags ?? {};

  const fileName = flags.config ?? env[CONFIG_FILE.env];
  const configPath = resolve(cwd, fileName || CONFIG_FILE.default);
  let fileValues: Record<string, unknown> = {};
  let configFile: string | undefined;
  if (fileName && !existsSync(configPath)) {
    const origin = flags.config !== undefined ? CONFIG_FILE.flag : CONFIG_FILE.env;
    throw new ConfigError(`invalid setting ${origin}=${fileName}: expected an existing JSON config file (${configPath} does not exist)`);
  }
  if (existsSync(configPath)) {
    configFile = configPath;
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(configPath, 'utf8'));
    } catch (err) {
      throw new ConfigError(`config file ${configPath} is not valid JSON: ${(err as Error).message}`);
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new ConfigError(`config file ${configPath}: expected a JSON object of settings`);
    }
    fileValues = parsed as Record<string, unknown>;
    const known = new Set<string>([...Object.keys(SETTINGS), '$schema', 'comment']);
    for (const key of Object.keys(fileValues)) {
      if (!known.has(key)) {
        throw new ConfigError(`config file ${configPath}: unknown setting '${key}'; expected one of ${Object.keys(SETTINGS).join(', ')}`);
      }
    }
  }

  const pick = (name: SettingName): Raw | undefined => {
    const spec = SETTINGS[name];
    if (flags[name] !== undefined) return { value: flags[name], origin: spec.flag };
    if (env[spec.env] !== undefined && env[spec.env] !== '') return { value: env[spec.env], origin: spec.env };
    if (fileValues[name] !== undefined) return { value: fileValues[name], origin: `${configPath}: ${name}` };
    return undefined;
  };
  const raw = (name: SettingName, fallback: unknown): Raw =>
    pick(name) ?? { value: fallback, origin: `default ${name}` };

  const fail = (r: Raw, expected: string, secret = false): never => {
    // A list from the config file (redis: [...]) is shown as JSON, and its URLs are redacted too.
    const shown = typeof r.value === 'string' ? (secret ? redactUrl(r.value) : r.value) : redactUrl(JSON.stringify(r.value) ?? String(r.value));
    throw new ConfigError(`invalid setting ${r.origin}=${shown === '' ? "''" : shown}: expected ${expected}`);
  };
  const str = (r: Raw, expected: string): string => {
    if (typeof r.value !== 'string' || r.value.trim() === '') fail(r, expected);
    return (r.value as string).trim();
  };

  const jobsRaw = raw('jobsDir', DEFAULTS.jobsDir);
  const jobsDir = resolve(cwd, str(jobsRaw, 'a folder path'));

  const storeRaw = raw('store', DEFAULTS.store);
  const store = parseStore(storeRaw, cwd, fail);

  const redisRaw = raw('redis', DEFAULTS.redis);
  const redis = parseRedis(redisRaw, fail);

  const prefixRaw = raw('redisPrefix', DEFAULTS.redisPrefix);
  if (typeof prefixRaw.value !== 'string') fail(prefixRaw, 'a string');
  const redisPrefix = prefixRaw.value as string;

  const nodeRaw = raw('nodeId', `${hostname()}-${process.pid}`);
  const nodeId = str(nodeRaw, 'a node name of 1 to 100 characters');
  if (nodeId.length > 100) fail(nodeRaw, 'a node name of 1 to 100 characters');

  const tzRaw = raw('timezone', DEFAULTS.timezone);
  const timezone = str(tzRaw, "an IANA time zone such as 'UTC' or 'Europe/Berlin'");
  if (!isValidTimezone(timezone)) fail(tzRaw, "an IANA time zone such as 'UTC' or 'Europe/Berlin'");

  const httpRaw = raw('http', DEFAULTS.http);
  const http = parseHttp(httpRaw, fail);
  const httpOrigin = httpRaw.origin.startsWith('default ') ? null : httpRaw.origin;
  const tokenRaw = raw('httpToken', DEFAULTS.httpToken);
  if (typeof tokenRaw.value !== 'string' || /\s/.test(tokenRaw.value.trim())) fail({ ...tokenRaw, value: '***' }, 'a token without spaces, or empty for none');
  const httpToken = (tokenRaw.value as string).trim() === '' ? null : (tokenRaw.value as string).trim();
  const tokensRaw = pick('httpTokens');
  let httpTokens: HttpTokenConfig[];
  try {
    httpTokens = parseHttpTokens(tokensRaw?.value, env, httpToken);
  } catch (err) {
    // The list holds no secret (names of variables, hashes): named as written.
    throw new ConfigError(`invalid setting ${tokensRaw?.origin ?? 'httpTokens'}: ${(err as Error).message}`);
  }

  const levelRaw = raw('logLevel', DEFAULTS.logLevel);
  const logLevel = z.enum(LOG_LEVELS).safeParse(levelRaw.value);
  if (!logLevel.success) fail(levelRaw, `one of ${LOG_LEVELS.join(', ')}`);

  const graceRaw = raw('gracePeriod', DEFAULTS.gracePeriod);
  const gracePeriodMs = parseDuration(graceRaw.value);
  if (gracePeriodMs === undefined) fail(graceRaw, DURATION_EXPECTED);

  const retentionRaw = raw('retention', DEFAULTS.retention);
  const retentionMs = parseRetention(retentionRaw, fail);
  const auditRetentionMs = parseRetention(raw('auditRetention', DEFAULTS.auditRetention), fail);

  const loadTimeoutRaw = raw('loadTimeout', DEFAULTS.loadTimeout);
  const loadTimeoutMs = parseDuration(loadTimeoutRaw.value);
  if (loadTimeoutMs === undefined || loadTimeoutMs <= 0 || loadTimeoutMs > MAX_LOAD_TIMEOUT_MS) fail(loadTimeoutRaw, LOAD_TIMEOUT_EXPECTED);
  const isolationRaw = raw('isolation', DEFAULTS.isolation);
  if (isolationRaw.value !== 'inline' && isolationRaw.value !== 'worker') fail(isolationRaw, "'inline' or 'worker'");
  const isolation = isolationRaw.value as Isolation;

  const resultRaw = raw('maxResultSize', DEFAULTS.maxResultSize);
  const maxResultBytes = parseSize(resultRaw.value);
  if (maxResultBytes === undefined || maxResultBytes > MAX_RESULT_SIZE_LIMIT) fail(resultRaw, SIZE_EXPECTED);

  const runLogRaw = raw('runLogMaxSize', DEFAULTS.runLogMaxSize);
  const runLogMaxBytes = parseSize(runLogRaw.value);
  if (runLogMaxBytes === undefined || runLogMaxBytes > MAX_RUN_LOG_BYTES) fail(runLogRaw, RUN_LOG_SIZE_EXPECTED);

  const watchRaw = raw('watch', DEFAULTS.watch);
  if (watchRaw.value !== 'on' && watchRaw.value !== 'off' && typeof watchRaw.value !== 'boolean') fail(watchRaw, "'on' or 'off'");
  const watch = watchRaw.value === 'on' || watchRaw.value === true;

  const alertWebhook = parseAlertWebhook(pick('alertWebhook'), fail);
  const alertToken = parseAlertToken(pick('alertToken'), fail);

  return {
    jobsDir, store, redis, redisPrefix, nodeId, timezone, http, httpOrigin, httpToken, httpTokens, alertWebhook, alertToken,
    logLevel: logLevel.data as string,
    gracePeriodMs: gracePeriodMs as number,
    retentionMs,
    auditRetentionMs,
    loadTimeoutMs: loadTimeoutMs as number,
    isolation,
    maxResultBytes: maxResultBytes as number,
    runLogMaxBytes: runLogMaxBytes as number,
    watch,
    configFile,
    calendarsDir: configFile ? join(dirname(configFile), 'calendars') : resolve(cwd, 'config', 'calendars'),
  };
}

type Fail = (r: Raw, expected: string, secret?: boolean) => never;

const STORE_EXPECTED = "'sqlite:<path>', 'mysql://user:pass@host:port/db' or 'postgres://user:pass@host:port/db'";

function parseStore(r: Raw, cwd: string, fail: Fail): StoreConfig {
  if (typeof r.value !== 'string' || r.value.trim() === '') return fail(r, STORE_EXPECTED, true);
  const value = r.value.trim();
  if (value.startsWith('sqlite:')) {
    const path = value.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (path === '') return fail(r, STORE_EXPECTED);
    const abs = path === ':memory:' ? path : resolve(cwd, path);
    return { kind: 'sqlite', path: abs, url: `sqlite:${abs}` };
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(value)?.[1]?.toLowerCase();
  const kind = scheme === 'mysql' || scheme === 'mariadb' ? 'mysql' : scheme === 'postgres' || scheme === 'postgresql' ? 'postgres' : null;
  if (!kind) return fail(r, STORE_EXPECTED, true);
  let parsed;
  try {
    parsed = parseStoreHosts(value, kind);
  } catch (err) {
    // One line naming the part (never the password: the value is shown redacted by fail()).
    if (err instanceof StoreUrlError) return fail(r, `${STORE_EXPECTED}, or several hosts as h1:p1,h2:p2 (${err.message})`, true);
    throw err;
  }
  if (kind === 'mysql') return { kind, url: value.replace(/^mariadb:/i, 'mysql:'), hosts: parsed.hosts };
  return { kind, url: value, hosts: parsed.hosts, targetSessionAttrs: parsed.targetSessionAttrs };
}

function parseRedis(r: Raw, fail: Fail): string[] {
  const expected = "comma-separated redis:// or rediss:// URLs, each an independent master (1, 3 or 5 of them), or empty for none";
  let items: string[];
  if (Array.isArray(r.value)) items = r.value.map(String);
  else if (typeof r.value === 'string') items = r.value.split(',');
  else return fail(r, expected);
  items = items.map((s) => s.trim()).filter((s) => s !== '');
  for (const item of items) {
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      return fail({ ...r, value: item }, expected, true);
    }
    if ((url.protocol !== 'redis:' && url.protocol !== 'rediss:') || !url.hostname) {
      return fail({ ...r, value: item }, expected, true);
    }
  }
  if (new Set(items).size !== items.length) return fail(r, `${expected}; the same server is listed twice`, true);
  // An even count buys nothing: 2 masters need both for a quorum, 4 need 3.
  if (items.length > 0 && items.length % 2 === 0) return fail(r, `${expected}; ${items.length} masters given, use an odd number`, true);
  return items;
}

function parseHttp(r: Raw, fail: Fail): Config['http'] {
  const expected = "'host:port' (for example 127.0.0.1:9464) or 'off'";
  if (typeof r.value !== 'string') return fail(r, expected);
  const value = r.value.trim();
  if (value === 'off') return 'off';
  const match = /^(.*):(\d{1,5})$/.exec(value);
  const port = match ? Number(match[2]) : NaN;
  if (!match || !match[1] || port < 0 || port > 65535) return fail(r, expected);
  return { host: match[1].replace(/^\[|\]$/g, ''), port };
}

const WEBHOOK_EXPECTED = 'an http:// or https:// URL with a host (the alert webhook), or no value for no alerts';

function parseAlertWebhook(r: Raw | undefined, fail: Fail): string | null {
  if (r === undefined) return null;
  // The URL may carry a token (path, query, password): shown redacted whatever is wrong with it.
  const shown = typeof r.value === 'string' ? { ...r, value: redactWebhookUrl(r.value.trim()) } : { ...r, value: '***' };
  if (typeof r.value !== 'string') return fail(shown, WEBHOOK_EXPECTED);
  const value = r.value.trim();
  if (value === '') return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return fail(shown, WEBHOOK_EXPECTED);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !url.hostname) return fail(shown, WEBHOOK_EXPECTED);
  return value;
}

function parseAlertToken(r: Raw | undefined, fail: Fail): string | null {
  if (r === undefined) return null;
  // A header value: no control characters (a newline would split the request), no spaces at the ends.
  if (typeof r.value !== 'string' || r.value.trim() === '' || /[\u0000-\u001f\u007f]/.test(r.value)) {
    return fail({ ...r, value: '***' }, 'a token of visible characters (sent as Authorization: Bearer <token>)');
  }
  return r.value.trim();
}

export const RETENTION_EXPECTED = "a duration such as '30d', '12h' or '1d12h' (more than 0), or 'off'";

/** How long finished rows are kept: a positive duration, or 'off' (null: never pruned). */
function parseRetention(r: Raw, fail: Fail): number | null {
  if (typeof r.value === 'string' && r.value.trim().toLowerCase() === 'off') return null;
  const ms = parseDuration(r.value);
  if (ms === undefined || ms <= 0) return fail(r, RETENTION_EXPECTED);
  return ms;
}

const MAX_LOAD_TIMEOUT_MS = 86_400_000;
export const LOAD_TIMEOUT_EXPECTED = "a duration such as '10s' or '2m', more than 0 and at most 1d";
/**
 * The largest `maxResultSize`: MySQL's MEDIUMTEXT (the result column) holds 16,777,215 bytes. Near
 * it, MySQL's `max_allowed_packet` must also hold the whole UPDATE (16 MB by default on MariaDB, 64 MB on MySQL 8).
 */
export const MAX_RESULT_SIZE_LIMIT = 16 * 1024 * 1024 - 1;
export const SIZE_EXPECTED = "a size such as '1MB', '512KB' or a number of bytes (KB = 1024 bytes, MB = 1024 KB), from 0 to 16777215 bytes";

/** The configuration as it may be shown: secrets redacted. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    jobsDir: config.jobsDir,
    store: redactUrl(config.store.url),
    redis: config.redis.map(redactUrl),
    redisPrefix: config.redisPrefix,
    nodeId: config.nodeId,
    timezone: config.timezone,
    http: config.http === 'off' ? 'off' : `${config.http.host}:${config.http.port}`,
    httpToken: config.httpToken === null ? 'none' : '***',
    httpTokens: config.httpTokens.map((t) => ({ name: t.name, role: t.role, from: t.from })),
    logLevel: config.logLevel,
    gracePeriodMs: config.gracePeriodMs,
    retention: config.retentionMs === null ? 'off' : formatDuration(config.retentionMs),
    auditRetention: config.auditRetentionMs === null ? 'off' : formatDuration(config.auditRetentionMs),
    loadTimeout: formatDuration(config.loadTimeoutMs),
    isolation: config.isolation,
    maxResultSize: formatSize(config.maxResultBytes),
    runLogMaxSize: formatSize(config.runLogMaxBytes),
    watch: config.watch ? 'on' : 'off',
    alertWebhook: config.alertWebhook === null ? null : redactWebhookUrl(config.alertWebhook),
    alertToken: config.alertToken === null ? null : '***',
    configFile: config.configFile ?? null,
    calendarsDir: config.calendarsDir ?? null,
  };
}
