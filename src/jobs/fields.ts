/**
 * The fields of a job definition, declared once: type, default and meaning. validate.ts refuses a
 * field that is not here and applies these defaults; docs/reference/job-file.md is made from this
 * table (`npm run docs:reference`). The TypeScript shapes a job file is typed with are in types.ts.
 */

export const JOB_DEFAULTS = {
  lockTtl: '30s',
  overlap: 'skip',
  catchUp: '15m',
  coalesce: true,
  retries: 0,
  retryDelay: '30s',
  enabled: true,
  isolation: 'inline',
} as const;

export const DEFAULT_KILL_AFTER = '10s';
export const MAX_SHARDS = 1000;
export const MAX_RETRIES = 100;

export interface FieldSpec {
  type: string;
  /** The default as a value (shown as code), when there is one. */
  default?: string | number | boolean;
  /** The default in words: required, computed, or none. */
  defaultText?: string;
  /** One line of meaning. */
  description: string;
  /** Only a command job (`command` instead of `run`) may have it. */
  commandJob?: true;
}

/** Field name -> its declaration, in the order problems name them. */
export const JOB_FIELDS = {
  name: { type: 'string', defaultText: 'the file name without extension', description: 'letters, digits, . _ - (up to 100, starting with a letter or digit); unique in the jobs folder' },
  schedule: {
    type: 'string', defaultText: 'required',
    description: 'croner syntax: 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first; L, W and # work; day-of-month and day-of-week are OR-ed (Vixie cron); or a nickname: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly',
  },
  timezone: { type: 'IANA zone', defaultText: 'the timezone setting (UTC)', description: 'the zone the schedule is read in' },
  timeout: { type: 'duration', defaultText: 'none', description: "on expiry ctx.signal aborts (reason 'timeout') and the run is recorded timed_out" },
  lockTtl: { type: 'duration', default: JOB_DEFAULTS.lockTtl, description: 'the lease (Redlock and the run row), at least 1s; renewed every third of it while the run is in flight' },
  overlap: {
    type: "'skip' or 'allow'", default: JOB_DEFAULTS.overlap,
    description: 'skip: a period whose job still has a body of an earlier period running anywhere in the cluster at its start (another node\'s run not yet beaten since its claim is waited for up to 1 s, since an outcome is written a moment after its body ends) is recorded skipped (reason overlap); allow: it starts anyway',
  },
  catchUp: { type: 'duration', default: JOB_DEFAULTS.catchUp, description: 'how late a period may still start (after downtime, a late timer, or in a run-once pass); older ones are recorded skipped (reason missed)' },
  coalesce: { type: 'boolean', default: JOB_DEFAULTS.coalesce, description: 'after downtime run only the latest missed period (the others are recorded skipped, reason coalesced), or all of them in order' },
  retries: { type: `integer 0-${MAX_RETRIES}`, default: JOB_DEFAULTS.retries, description: 'further attempts of the same period after it failed or timed out' },
  retryDelay: { type: 'duration', default: JOB_DEFAULTS.retryDelay, description: 'delay before attempt 2, doubled for each further attempt (at most 1h)' },
  enabled: { type: 'boolean', default: JOB_DEFAULTS.enabled, description: 'a disabled job is listed but not scheduled' },
  exclude: {
    type: 'string[]', defaultText: 'none',
    description: "dates on which the job does not run: 'YYYY-MM-DD', inclusive ranges 'YYYY-MM-DD/YYYY-MM-DD' (up to 10 years), and named calendars 'calendar:<name>' (config/calendars/<name>.json or .ics); a period whose instant falls on one of them in the job's zone is recorded skipped (reason calendar), never run unless forced by hand",
  },
  isolation: {
    type: "'inline' or 'worker'", defaultText: 'the isolation setting (inline)',
    description: "where the body runs: inline in the scheduler's own thread; worker in a worker thread of its own, terminated when the body has not ended soon after its signal aborted",
  },
  jitter: {
    type: 'duration', defaultText: 'none',
    description: "each period's body starts up to this long after its instant, by a delay derived from the period key (the same on every node); shorter than the schedule's shortest gap",
  },
  logLevel: {
    type: 'pino level', default: 'info',
    description: "the lowest level of the body's ctx.log lines (and a command's output, stdout at info, stderr at warn) stored with each attempt (scheduler logs); silent stores none. The node prints at its own logLevel setting",
  },
  logMaxSize: {
    type: 'size or 0', defaultText: 'the runLogMaxSize setting (1MB)',
    description: "each attempt's stored log at most: its first and last halves are kept, with a note of what was cut between them; 0 stores none",
  },
  shards: { type: `integer 1-${MAX_SHARDS}`, default: 1, description: 'each period is claimed, run and recorded as this many shards (ctx.shard), spread across the nodes' },
  run: { type: 'function', defaultText: 'required, unless command', description: 'the body: async run(ctx); what it returns (JSON) is stored with the run, what it throws fails it' },
  onFailure: {
    type: 'function', defaultText: 'none',
    description: 'async onFailure(ctx, outcome): called once per failed period, after its last attempt, by the node that recorded it; a field or a named export, not both',
  },
  description: { type: 'string', defaultText: 'none', description: 'free text; shown nowhere yet' },
  command: {
    type: 'string or string[]', defaultText: 'none', commandJob: true,
    description: 'instead of run: a shell command (/bin/sh -c) or an argv array spawned with no shell, in a process group of its own; the only kind a .json or .yaml job file defines',
  },
  killAfter: { type: 'duration', default: DEFAULT_KILL_AFTER, commandJob: true, description: 'between SIGTERM and SIGKILL to the process group on timeout, lease loss or shutdown' },
  cwd: { type: 'path', defaultText: "the job file's folder", commandJob: true, description: "the command's working directory (relative: to the job file's folder)" },
  env: {
    type: 'object', defaultText: 'none', commandJob: true,
    description: "variables added to the command's environment (string, number or boolean values; names starting with SCHEDULER_ are refused)",
  },
} as const satisfies Record<string, FieldSpec>;

export type JobField = keyof typeof JOB_FIELDS;
