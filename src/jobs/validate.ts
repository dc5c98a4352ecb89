/**
 * Validation of a job file's default export. Every problem becomes one line naming the file, the
 * field, the value and what was expected.
 */
import { basename, extname, resolve as resolvePath } from 'node:path';
import { compileSchedule, isValidTimezone, type Schedule } from '../time/schedule.js';
import { parseDuration, DURATION_EXPECTED, formatDuration } from '../time/duration.js';
import { shortestGapMs } from '../time/jitter.js';
import { COMMAND_FIELDS, NOT_SHOWN, validateCommand } from './command.js';
import { DATA_EXTENSIONS } from './data-file.js';
import { RUN_LOG_LEVELS, type CommandSpec, type Isolation, type Job, type RunLogLevel } from './types.js';
import { parseSize } from '../config/size.js';
import { MAX_RUN_LOG_BYTES, RUN_LOG_SIZE_EXPECTED } from '../config/size.js';
import { JOB_DEFAULTS, JOB_FIELDS, MAX_RETRIES, MAX_SHARDS } from './fields.js';
import { CalendarSource } from '../calendars/calendar.js';
import { resolveExclude, type Exclusion } from '../calendars/exclude.js';

export { JOB_DEFAULTS, MAX_SHARDS };

/** Job fields whose default comes from the configuration. */
export interface JobFieldDefaults {
  /** The `isolation` setting (default 'inline'). */
  isolation?: Isolation;
}

export const ISOLATIONS: readonly Isolation[] = ['inline', 'worker'];

const FIELDS: string[] = Object.keys(JOB_FIELDS);
export const JOB_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const MIN_LOCK_TTL_MS = 1000;

function show(value: unknown): string {
  if (value === NOT_SHOWN) return '(value not shown)';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'string') return JSON.stringify(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * Compiled schedules by zone and expression, shared by the jobs of one load: a schedule is an
 * immutable value, and many jobs have the same (compiling one is most of a job's validation).
 */
export type ScheduleCache = Map<string, Schedule>;

/**
 * `path`: the file as loaded, when `file` (as shown) is relative to another folder than the working
 * directory. `schedules`: compiled schedules to reuse and add to (see ScheduleCache). `calendars`: where
 * `exclude`'s named calendars are read (default: ./config/calendars), shared by the jobs of one load.
 */
export function validateJob(file: string, exported: unknown, defaultTimezone: string, defaults: JobFieldDefaults = {}, path: string = file, schedules?: ScheduleCache, calendars?: CalendarSource): { job?: Job; problems: string[] } {
  const where = file;
  const data = DATA_EXTENSIONS.has(extname(file).toLowerCase());
  const problems: string[] = [];
  const bad = (field: string, value: unknown, expected: string) =>
    problems.push(`${where}: field '${field}' = ${show(value)}: expected ${expected}`);

  if (exported === null || typeof exported !== 'object' || Array.isArray(exported)) {
    problems.push(data
      ? `${where}: content = ${show(exported)}: expected an object (a mapping) with at least 'schedule' and 'command'`
      : `${where}: default export = ${show(exported)}: expected a plain object with at least 'schedule' and 'run' (see defineJob)`);
    return { problems };
  }
  const def = exported as Record<string, unknown>;

  for (const key of Object.keys(def)) {
    if (!FIELDS.includes(key)) problems.push(`${where}: unknown field '${key}': expected one of ${FIELDS.join(', ')}`);
  }

  const fileName = basename(file, extname(file));
  const name = def.name === undefined ? fileName : def.name;
  if (typeof name !== 'string' || !JOB_NAME.test(name)) {
    bad(def.name === undefined ? 'name (from the file name)' : 'name', name, 'letters, digits, . _ - (up to 100, starting with a letter or digit)');
  }

  let timezone = defaultTimezone;
  if (def.timezone !== undefined) {
    if (typeof def.timezone !== 'string' || !isValidTimezone(def.timezone)) {
      bad('timezone', def.timezone, "an IANA time zone such as 'UTC' or 'America/New_York'");
    } else timezone = def.timezone;
  }

  let schedule: Schedule | undefined;
  if (typeof def.schedule !== 'string' || def.schedule.trim() === '') {
    bad('schedule', def.schedule, "a cron expression of 5 fields (minute hour day month weekday) or 6 (seconds first), such as '0 2 * * *', or a nickname such as '@daily'");
  } else if (isValidTimezone(timezone)) {
    try {
      const key = `${timezone} ${def.schedule}`;
      schedule = schedules?.get(key);
      if (!schedule) {
        schedule = compileSchedule(def.schedule, timezone);
        schedules?.set(key, schedule);
      }
    } catch (err) {
      bad('schedule', def.schedule, `a valid cron expression (${(err as Error).message})`);
    }
  }

  const duration = (field: string, fallback: string | null, min = 0): number | null => {
    const value = def[field];
    if (value === undefined) return fallback === null ? null : parseDuration(fallback)!;
    const ms = parseDuration(value);
    if (ms === undefined || ms < min || (min === 0 && ms === 0 && field === 'timeout')) {
      bad(field, value, min > 0 ? `${DURATION_EXPECTED}, at least ${min}ms` : field === 'timeout' ? `${DURATION_EXPECTED}, more than 0` : DURATION_EXPECTED);
      return null;
    }
    return ms;
  };
  const timeoutMs = duration('timeout', null);
  const lockTtlMs = duration('lockTtl', JOB_DEFAULTS.lockTtl, MIN_LOCK_TTL_MS);
  const catchUpMs = duration('catchUp', JOB_DEFAULTS.catchUp);
  const retryDelayMs = duration('retryDelay', JOB_DEFAULTS.retryDelay);

  const overlap = def.overlap ?? JOB_DEFAULTS.overlap;
  if (overlap !== 'skip' && overlap !== 'allow') bad('overlap', def.overlap, "'skip' or 'allow'");

  const coalesce = def.coalesce ?? JOB_DEFAULTS.coalesce;
  if (typeof coalesce !== 'boolean') bad('coalesce', def.coalesce, 'true or false');

  const enabled = def.enabled ?? JOB_DEFAULTS.enabled;
  if (typeof enabled !== 'boolean') bad('enabled', def.enabled, 'true or false');

  const retries = def.retries ?? JOB_DEFAULTS.retries;
  if (typeof retries !== 'number' || !Number.isInteger(retries) || retries < 0 || retries > MAX_RETRIES) {
    bad('retries', def.retries, `a whole number from 0 to ${MAX_RETRIES}`);
  }

  // jitter: shorter than the schedule's shortest gap, or a period's start would pass the next instant.
  let jitterMs = 0;
  if (def.jitter !== undefined) {
    const ms = parseDuration(def.jitter);
    if (ms === undefined) bad('jitter', def.jitter, DURATION_EXPECTED);
    else if (schedule && ms > 0) {
      const gap = shortestGapMs(schedule);
      if (ms >= gap) bad('jitter', def.jitter, `a duration shorter than the schedule's shortest gap between periods (${formatDuration(gap)})`);
      else jitterMs = ms;
    }
  }

  const logLevel = def.logLevel;
  if (logLevel !== undefined && !RUN_LOG_LEVELS.includes(logLevel as RunLogLevel)) bad('logLevel', logLevel, `one of ${RUN_LOG_LEVELS.join(', ')}`);
  const logMaxBytes = def.logMaxSize === undefined ? undefined : parseSize(def.logMaxSize);
  if (def.logMaxSize !== undefined && (logMaxBytes === undefined || logMaxBytes > MAX_RUN_LOG_BYTES)) bad('logMaxSize', def.logMaxSize, RUN_LOG_SIZE_EXPECTED);

  // exclude: resolved now (its calendars read), so that a period's check costs no I/O.
  let exclusion: Exclusion | undefined;
  if (def.exclude !== undefined) {
    const resolved = resolveExclude(def.exclude, calendars ?? new CalendarSource(resolvePath('config', 'calendars')));
    for (const p of resolved.problems) problems.push(`${where}: field 'exclude' ${p.startsWith('entry ') ? p : `= ${p}`}`);
    exclusion = resolved.exclusion;
  }

  const shards = def.shards ?? 1;
  if (typeof shards !== 'number' || !Number.isInteger(shards) || shards < 1 || shards > MAX_SHARDS) {
    bad('shards', def.shards, `a whole number from 1 to ${MAX_SHARDS}`);
  }

  // A command job runs in a process of its own: exactly one of `run` and `command`.
  let command: CommandSpec | undefined;
  const isCommand = def.command !== undefined;
  if (isCommand) {
    if (def.run !== undefined) bad('run', def.run, "no field: a job has either 'run' or 'command', not both");
    if (def.isolation !== undefined) bad('isolation', def.isolation, 'no field: a command job runs in a process of its own');
    command = validateCommand(def, path, bad);
  } else {
    for (const field of COMMAND_FIELDS) if (def[field] !== undefined) bad(field, def[field], "no field, unless the job has 'command' (this one has 'run')");
  }
  const isolation = isCommand ? undefined : def.isolation ?? defaults.isolation ?? JOB_DEFAULTS.isolation;
  if (!isCommand && !ISOLATIONS.includes(isolation as Isolation)) bad('isolation', def.isolation, "'inline' or 'worker'");

  if (data && !isCommand) bad('command', def.command, `a shell command string or an argv array: a ${extname(file)} job file defines a command job${def.run !== undefined ? " ('run' needs a .ts or .js file)" : ''}`);
  else if (!isCommand && typeof def.run !== 'function') bad('run', def.run, "a function (async run(ctx) { ... }), or a 'command' instead");
  if (def.onFailure !== undefined && typeof def.onFailure !== 'function') bad('onFailure', def.onFailure, 'a function (async onFailure(ctx, outcome) { ... }), or no field');
  if (def.description !== undefined && typeof def.description !== 'string') bad('description', def.description, 'a string');

  if (problems.length > 0 || !schedule || (isCommand && !command)) return { problems };
  return {
    problems,
    job: {
      name: name as string,
      file,
      schedule,
      timezone,
      timeoutMs,
      lockTtlMs: lockTtlMs!,
      overlap: overlap as Job['overlap'],
      catchUpMs: catchUpMs!,
      coalesce: coalesce as boolean,
      retries: retries as number,
      retryDelayMs: retryDelayMs!,
      enabled: enabled as boolean,
      ...(exclusion ? { exclude: exclusion } : {}),
      ...(jitterMs > 0 ? { jitterMs } : {}),
      ...(shards !== 1 ? { shards: shards as number } : {}),
      ...(logLevel !== undefined && logLevel !== 'info' ? { logLevel: logLevel as RunLogLevel } : {}),
      ...(logMaxBytes !== undefined ? { logMaxBytes } : {}),
      ...(command ? { command, run: commandHasNoRun } : { isolation: isolation as Isolation, run: def.run as Job['run'] }),
      ...(typeof def.onFailure === 'function' ? { onFailure: def.onFailure as Job['onFailure'] } : {}),
    },
  };
}

/** The `run` of a command job: never called (run/body.ts spawns the command instead). */
function commandHasNoRun(): never {
  throw new Error('a command job has no run(): its command is spawned instead');
}
