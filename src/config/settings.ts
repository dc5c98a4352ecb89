/**
 * The settings, declared once: each one's config-file key, environment variable, flag, type, default
 * and meaning. config.ts merges and validates them; the flags' help (src/cli/common.ts) and
 * docs/reference/configuration.md (`npm run docs:reference`) are made from this table. Imports
 * nothing, so that `--help` stays light.
 */

/** The defaults, in one object (a setting that is absent here has none, or a computed one). */
export const DEFAULTS = {
  jobsDir: './jobs',
  store: 'sqlite:./data/scheduler.db',
  redis: '',
  redisPrefix: 'scheduler:',
  timezone: 'UTC',
  // Loopback only; the port is Prometheus's range of exporter ports (a busy default only warns).
  http: '127.0.0.1:9464',
  httpToken: '',
  logLevel: 'info',
  gracePeriod: '30s',
  retention: '30d',
  auditRetention: '90d',
  loadTimeout: '10s',
  isolation: 'inline',
  maxResultSize: '1MB',
  runLogMaxSize: '1MB',
  watch: 'on',
} as const;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export interface SettingSpec {
  /** The environment variable. */
  env: string;
  /** The flag; also the name a bad value is reported under when it came from the command line. */
  flag: string;
  /** What the value is, in a few words. */
  type: string;
  /** The default when DEFAULTS has none (computed, or none at all). */
  defaultText?: string;
  /** One line of meaning: shown in the flag's --help and in the reference. */
  description: string;
}

/** Setting name (the config file's key) -> its declaration. */
export const SETTINGS = {
  jobsDir: { env: 'SCHEDULER_JOBS_DIR', flag: '--jobs', type: 'path', description: 'the jobs folder' },
  store: {
    env: 'SCHEDULER_STORE', flag: '--store', type: 'URL',
    description: 'the run store: sqlite:<path>, mysql://user:pass@host:port/db (MySQL 8, MariaDB 10.6+) or postgres://user:pass@host:port/db (several hosts: h1:p1,h2:p2)',
  },
  redis: {
    env: 'SCHEDULER_REDIS', flag: '--redis', type: 'URLs', defaultText: 'none',
    description: 'comma-separated redis:// or rediss:// URLs (an array in the config file), each an independent Redlock master: 1, 3 or 5; none: claims rest on the run row alone',
  },
  redisPrefix: { env: 'SCHEDULER_REDIS_PREFIX', flag: '--redis-prefix', type: 'string', description: 'prefix of every Redis key (lock keys are <prefix>lock:<job>@<ISO>)' },
  nodeId: {
    env: 'SCHEDULER_NODE_ID', flag: '--node-id', type: 'string', defaultText: '<hostname>-<pid>',
    description: "this node's name in logs and rows, 1 to 100 characters; run is refused while another live process holds it",
  },
  timezone: { env: 'SCHEDULER_TIMEZONE', flag: '--timezone', type: 'IANA zone', description: 'the time zone of jobs that set none' },
  http: {
    env: 'SCHEDULER_HTTP', flag: '--http', type: 'host:port or off',
    description: "the HTTP server's address (probes /healthz /readyz, /metrics, /api, status page): host:port, host:0 for any free port, or off",
  },
  httpToken: {
    env: 'SCHEDULER_HTTP_TOKEN', flag: '--http-token', type: 'string (secret)', defaultText: 'none',
    description: "a bearer token that / and /api/... require (Authorization: Bearer <token>), an operator named 'default' beside httpTokens; the probes and /metrics never do; never shown",
  },
  // No flag on any command (a list of tokens belongs in a file); the name is only for messages.
  httpTokens: {
    env: 'SCHEDULER_HTTP_TOKENS', flag: '--http-tokens', type: 'list (JSON)', defaultText: 'none',
    description: 'named bearer tokens with a role, viewer (reads) or operator (reads and actions: run, re-run, pause, resume, cancel): [{ "name": "ops", "role": "operator", "env": "OPS_TOKEN" }, { "name": "dash", "role": "viewer", "sha256": "<hex>" }]; each named by an environment variable or given as its SHA-256, never in clear; with any token, a request without one is 401',
  },
  logLevel: { env: 'SCHEDULER_LOG_LEVEL', flag: '--log-level', type: 'pino level', description: `pino level: ${LOG_LEVELS.join(', ')}` },
  gracePeriod: {
    env: 'SCHEDULER_GRACE_PERIOD', flag: '--grace-period', type: 'duration',
    description: "after SIGTERM, how long in-flight runs may finish before ctx.signal aborts with 'shutdown'",
  },
  retention: {
    env: 'SCHEDULER_RETENTION', flag: '--retention', type: 'duration or off',
    description: 'how long finished runs are kept (more than 0), or off (kept for ever); the daemon prunes older ones in the background, hourly, and prune uses it as its default',
  },
  auditRetention: {
    env: 'SCHEDULER_AUDIT_RETENTION', flag: '--audit-retention', type: 'duration or off',
    description: "how long the audit trail's rows (operator actions: pause, resume, run-once by hand, prune) are kept (more than 0), or off (kept for ever); prune and the daemon's hourly pruning delete older ones",
  },
  loadTimeout: {
    env: 'SCHEDULER_LOAD_TIMEOUT', flag: '--load-timeout', type: 'duration',
    description: "deadline of each job file's load (its top level, imports included): a file that does not settle in time is invalid and the others go on; more than 0, at most 1d",
  },
  isolation: {
    env: 'SCHEDULER_ISOLATION', flag: '--isolation', type: 'inline or worker',
    description: "the isolation of jobs that set none: inline (the scheduler's thread) or worker (a worker thread of its own, terminated when the body ignores its signal)",
  },
  maxResultSize: {
    env: 'SCHEDULER_MAX_RESULT_SIZE', flag: '--max-result-size', type: 'size',
    description: 'the largest result stored with a run, as JSON in UTF-8 bytes: a number of bytes or <n>B, <n>KB, <n>MB (KB = 1024 bytes), at most 16777215; a larger result is stored null with a resultNote',
  },
  runLogMaxSize: {
    env: 'SCHEDULER_RUN_LOG_MAX_SIZE', flag: '--run-log-max-size', type: 'size or 0',
    description: "each attempt's stored log (its ctx.log lines and a command's output, read by scheduler logs) at most, for jobs that set no logMaxSize: its first and last halves are kept, with a note of what was cut; 0 stores none",
  },
  watch: {
    env: 'SCHEDULER_WATCH', flag: '--watch', type: 'on or off',
    description: 'on: run reloads by itself (as on SIGHUP) half a second after the jobs folder or the config file changed, a Kubernetes ConfigMap update included; off: only SIGHUP reloads',
  },
  alertWebhook: {
    env: 'SCHEDULER_ALERT_WEBHOOK', flag: '--alert-webhook', type: 'URL (secret)', defaultText: 'none',
    description: 'an http(s) URL that gets a JSON POST for each failed, timed-out, missed or abandoned period, and when a node loses or regains the store or the Redis quorum; shown redacted (prefer the variable: ps shows flags)',
  },
  // No flag on any command (a flag shows in `ps`); the name is only for messages.
  alertToken: {
    env: 'SCHEDULER_ALERT_TOKEN', flag: '--alert-token', type: 'string (secret)', defaultText: 'none',
    description: 'sent as Authorization: Bearer <token> with each alert; never shown',
  },
} as const satisfies Record<string, SettingSpec>;

export type SettingName = keyof typeof SETTINGS;

/** The config file: not a setting of its own, named by a flag or a variable. */
export const CONFIG_FILE = {
  env: 'SCHEDULER_CONFIG',
  flag: '--config',
  default: 'config/scheduler.json',
  description: 'the configuration file: a JSON object of settings',
} as const;

/** A setting's default as shown: the value in DEFAULTS, else its defaultText, else none. */
export function defaultOf(name: string, spec: SettingSpec = SETTINGS[name as SettingName]): string {
  const value = (DEFAULTS as Record<string, string>)[name];
  if (value !== undefined && value !== '') return value;
  return spec.defaultText ?? 'none';
}

/** A setting's flag help: its meaning, then where else it is set and its default. */
export function settingHelp(name: SettingName): string {
  return `${SETTINGS[name].description} (${SETTINGS[name].env}, default ${defaultOf(name)})`;
}
