/**
 * Reload on SIGHUP: the configuration (defaults < config file < environment < flags; only the file
 * can have changed) and the jobs folder, loaded again and applied without dropping in-flight runs.
 *
 * - A setting that a running process cannot change (store, redis, redisPrefix, nodeId, http, and the
 *   tokens and webhook it started with: httpToken, alertWebhook, alertToken) refuses
 *   the whole reload with one line, jobs included: the daemon stays exactly as it was, rather than in
 *   a state that no version of the file describes. A config file that is now invalid, or a jobs
 *   folder that cannot be read, likewise.
 * - Settings that apply live: logLevel, gracePeriod, retention, auditRetention, loadTimeout, and (through the jobs
 *   they are defaults of) timezone, isolation and jobsDir. maxResultSize applies at the next restart.
 * - Jobs are compared by name: added, removed, changed (a definition field, or the file's content).
 *   A file that cannot be loaded now keeps the previous definitions of the jobs it held.
 *
 * SIGHUPs during a reload are coalesced into one more reload after it.
 */
import { readFileSync } from 'node:fs';
import type { Config } from '../config/config.js';
import { describeConfig } from '../config/config.js';
import { redactUrl } from '../config/redact.js';
import { errorMessage } from '../errors.js';
import { contentHash, createJobImporter, importedVersion, type JobImporter } from '../jobs/importer.js';
import { loadJobs, type LoadedJobs } from '../jobs/load.js';
import type { InvalidJobFile, Job } from '../jobs/types.js';
import { redactWebhookUrl } from '../alerts/webhook.js';
import type { Logger } from '../log.js';
import { formatDuration } from '../time/duration.js';

export interface ReloaderOptions {
  /** The configuration the daemon runs with now. */
  config: Config;
  /** The jobs it schedules now (the valid ones of the folder). */
  jobs: Job[];
  /** Loads the configuration again (throws a ConfigError when it is invalid). */
  loadConfig: () => Config;
  /** Loads the jobs folder as the start did (throws when the folder cannot be read). */
  loadJobs: (config: Config) => Promise<LoadedJobs>;
  /** Schedules the new set of jobs. */
  replaceJobs: (jobs: Job[]) => Promise<void>;
  log: Logger;
  /** Called after a reload was applied (the daemon restarts what depends on the config or the jobs). */
  applied?: (change: { config: Config; previous: Config; jobs: Job[]; invalid: InvalidJobFile[]; jobsChanged: boolean }) => Promise<void> | void;
}

/**
 * Settings a running process cannot take up: they name what it is connected to or listens on, or
 * the secrets it was started with. Compared raw (a changed password is a change), shown redacted.
 */
const FIXED: Array<{ name: string; value: (c: Config) => unknown; shown: (c: Config) => string }> = [
  { name: 'store', value: (c) => c.store.url, shown: (c) => redactUrl(c.store.url) },
  { name: 'redis', value: (c) => c.redis.join(','), shown: (c) => (c.redis.length === 0 ? '(none)' : c.redis.map(redactUrl).join(',')) },
  { name: 'redisPrefix', value: (c) => c.redisPrefix, shown: (c) => JSON.stringify(c.redisPrefix) },
  { name: 'nodeId', value: (c) => c.nodeId, shown: (c) => c.nodeId },
  { name: 'http', value: (c) => (c.http === 'off' ? 'off' : `${c.http.host}:${c.http.port}`), shown: (c) => (c.http === 'off' ? 'off' : `${c.http.host}:${c.http.port}`) },
  { name: 'httpToken', value: (c) => c.httpToken, shown: (c) => (c.httpToken ? '***' : '(none)') },
  { name: 'httpTokens', value: (c) => c.httpTokens.map((t) => `${t.name}:${t.role}:${t.sha256.toString('hex')}`).join(','), shown: (c) => (c.httpTokens.length === 0 ? '(none)' : c.httpTokens.map((t) => `${t.name} (${t.role})`).join(', ')) },
  { name: 'alertWebhook', value: (c) => c.alertWebhook, shown: (c) => (c.alertWebhook ? redactWebhookUrl(c.alertWebhook) : '(none)') },
  { name: 'alertToken', value: (c) => c.alertToken, shown: (c) => (c.alertToken ? '***' : '(none)') },
];

/** Settings applied by the reload itself (directly, or through the jobs loaded with them). */
const LIVE = ['jobsDir', 'timezone', 'isolation', 'logLevel', 'gracePeriod', 'retention', 'auditRetention', 'loadTimeout', 'watch'] as const;
/** Settings a running daemon keeps until its next restart. */
const AT_RESTART = ['maxResultSize'] as const;

/** What tells two definitions of a job apart, as short values ('code' is the file's content hash). */
export function jobFingerprint(job: Job, code: string | null): Record<string, string> {
  return {
    file: job.file,
    schedule: job.schedule.expression,
    timezone: job.timezone,
    timeout: job.timeoutMs === null ? 'none' : formatDuration(job.timeoutMs),
    lockTtl: formatDuration(job.lockTtlMs),
    overlap: job.overlap,
    catchUp: formatDuration(job.catchUpMs),
    coalesce: String(job.coalesce),
    retries: String(job.retries),
    retryDelay: formatDuration(job.retryDelayMs),
    enabled: String(job.enabled),
    isolation: job.isolation ?? 'inline',
    // The entries and the content of the named calendars they read: a calendar file edited changes the job.
    exclude: job.exclude ? `${job.exclude.entries.join(',')} (${job.exclude.fingerprint})` : 'none',
    code: code ?? '?',
  };
}

export interface JobDiff {
  added: Job[];
  removed: Job[];
  changed: Array<{ job: Job; what: string[] }>;
  /** The jobs to schedule: unchanged ones keep their previous object. */
  next: Job[];
  /** Jobs kept with their previous definition because their file cannot be loaded now. */
  kept: Array<{ job: Job; file: string }>;
}

/**
 * Compares the jobs scheduled now with those just loaded. A job whose file is among `invalidFiles`
 * (and that no valid file defines now) keeps its previous definition.
 */
export function diffJobs(before: Array<{ job: Job; fp: Record<string, string> }>, after: Array<{ job: Job; fp: Record<string, string> }>, invalidFiles: Set<string>): JobDiff {
  const old = new Map(before.map((b) => [b.job.name, b]));
  const fresh = new Map(after.map((a) => [a.job.name, a]));
  const out: JobDiff = { added: [], removed: [], changed: [], next: [], kept: [] };
  for (const a of after) {
    const b = old.get(a.job.name);
    if (!b) {
      out.added.push(a.job);
      out.next.push(a.job);
      continue;
    }
    const what = Object.keys(a.fp).filter((k) => a.fp[k] !== b.fp[k]);
    if (what.length === 0) {
      out.next.push(b.job);
      continue;
    }
    out.changed.push({
      job: a.job,
      what: what.map((k) => (k === 'code' ? 'code' : `${k} ${b.fp[k]} → ${a.fp[k]}`)),
    });
    out.next.push(a.job);
  }
  for (const b of before) {
    if (fresh.has(b.job.name)) continue;
    if (invalidFiles.has(b.job.file)) {
      out.kept.push({ job: b.job, file: b.job.file });
      out.next.push(b.job);
    } else out.removed.push(b.job);
  }
  return out;
}

/**
 * The jobs folder loaded as at start, but one file's import started per turn of the event loop: the
 * daemon is scheduling meanwhile, and a `.ts` file's transpile (or an `.mjs` file's synchronous top
 * level) blocks the thread, so files started back to back would hold the tick's timer for all of them.
 */
export function loadJobsForReload(config: Config): Promise<LoadedJobs> {
  return loadJobs(config.jobsDir, config.timezone, { timeoutMs: config.loadTimeoutMs, defaults: { isolation: config.isolation }, importer: oneFilePerTurn(createJobImporter()), ...(config.calendarsDir ? { calendarsDir: config.calendarsDir } : {}) });
}

function oneFilePerTurn(importer: JobImporter): JobImporter {
  let turn: Promise<void> = Promise.resolve();
  return (file) => {
    // An immediate queued from inside another immediate runs at the next turn, after the timers.
    const mine = turn.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
    turn = mine;
    return mine.then(() => importer(file));
  };
}

export class Reloader {
  private current: Config;
  /** The jobs scheduled now, each with the content hash of its file as imported (the fingerprint is made when a reload compares). */
  private jobs: Array<{ job: Job; code: string | null }>;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(private readonly options: ReloaderOptions) {
    this.current = options.config;
    this.jobs = options.jobs.map((job) => ({ job, code: codeOf(job) }));
  }

  /** The configuration in force (the gracePeriod of a shutdown is read from here). */
  get config(): Config {
    return this.current;
  }

  /** A SIGHUP (or a changed file: `cause`): reload now, or once more after the reload in progress. */
  request(cause = 'SIGHUP'): void {
    if (this.stopped) return;
    if (this.running) {
      if (!this.again) this.options.log.info(`${cause} during a reload: reloading once more after it`);
      this.again = true;
      this.cause = cause;
      return;
    }
    this.cause = cause;
    this.running = this.loop().finally(() => (this.running = undefined));
  }

  private cause = 'SIGHUP';

  /** The shutdown: no reload starts from now on, and one in progress applies nothing more. */
  stop(): void {
    this.stopped = true;
  }

  /** Settles when no reload is in progress (for tests and the shutdown). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.reloadOnce();
      } catch (err) {
        // During the shutdown the store closes under a reload: not worth a line.
        if (!this.stopped) this.options.log.error({ err: { message: errorMessage(err) } }, `reload failed: ${errorMessage(err)}`);
      }
    } while (this.again && !this.stopped);
  }

  private async reloadOnce(): Promise<void> {
    const { log } = this.options;
    log.info({ cause: this.cause }, `reload requested (${this.cause}): loading the configuration and the jobs folder again`);
    let config: Config;
    try {
      config = this.options.loadConfig();
    } catch (err) {
      log.error(`reload refused: ${errorMessage(err)}; nothing changed`);
      return;
    }
    const previous = this.current;
    const fixed = FIXED.filter((s) => s.value(previous) !== s.value(config));
    if (fixed.length > 0) {
      const what = fixed.map((s) => `${s.name} changed (${s.shown(previous)} → ${s.shown(config)})`).join(', ');
      log.error({ settings: fixed.map((s) => s.name) }, `reload refused: ${what}; restart the daemon to apply it; nothing was reloaded, jobs included`);
      return;
    }
    let loaded: LoadedJobs;
    try {
      loaded = await this.options.loadJobs(config);
    } catch (err) {
      log.error(`reload refused: ${errorMessage(err)}; nothing changed`);
      return;
    }
    if (this.stopped) return;

    const after = loaded.jobs.map((job) => ({ job, code: codeOf(job) }));
    const invalidFiles = new Set(loaded.invalid.map((f) => f.file));
    const fingerprinted = (jobs: Array<{ job: Job; code: string | null }>) => jobs.map(({ job, code }) => ({ job, fp: jobFingerprint(job, code) }));
    const diff = diffJobs(fingerprinted(this.jobs), fingerprinted(after), invalidFiles);
    const jobsChanged = diff.added.length + diff.removed.length + diff.changed.length > 0;
    if (jobsChanged) await this.options.replaceJobs(diff.next);
    if (this.stopped) return;

    // The settings: applied from here on (the daemon reads gracePeriod and retention from `config`).
    const before = described(previous);
    const now = described(config);
    const changed = (names: readonly string[]) => names.filter((k) => JSON.stringify(before[k]) !== JSON.stringify(now[k])).map((k) => `${k} (${show(before[k])} → ${show(now[k])})`);
    const live = changed(LIVE);
    const atRestart = changed(AT_RESTART);
    this.current = { ...config, maxResultBytes: previous.maxResultBytes };
    const entries = new Map([...this.jobs, ...after].map((e) => [e.job, e]));
    this.jobs = diff.next.map((job) => entries.get(job)!);

    for (const job of diff.added) log.info({ job: job.name, file: job.file, schedule: job.schedule.expression, timezone: job.timezone }, `job added: ${job.name} (${job.file}, '${job.schedule.expression}' ${job.timezone})`);
    for (const job of diff.removed) log.info({ job: job.name, file: job.file }, `job removed: ${job.name} (${job.file}); its runs in flight go on to their end`);
    for (const { job, what } of diff.changed) log.info({ job: job.name, file: job.file, changed: what }, `job changed: ${job.name}: ${what.join(', ')}`);
    const keptBy = new Map<string, string[]>();
    for (const k of diff.kept) keptBy.set(k.file, [...(keptBy.get(k.file) ?? []), k.job.name]);
    for (const f of loaded.invalid) {
      const kept = keptBy.get(f.file);
      const tail = kept ? `; the previous definition of ${kept.map((n) => `'${n}'`).join(', ')} stays scheduled` : '';
      log.error({ file: f.file }, `${f.problems.join('; ')}${tail}`);
    }
    if (live.length > 0) log.info(`settings applied: ${live.join(', ')}`);
    if (atRestart.length > 0) log.warn(`settings changed that apply at the next restart: ${atRestart.join(', ')}`);
    log.info({ added: diff.added.length, removed: diff.removed.length, changed: diff.changed.length, kept: diff.kept.length, invalidFiles: loaded.invalid.length, jobs: diff.next.map((j) => j.name) },
      `reload done: ${diff.added.length} added, ${diff.removed.length} removed, ${diff.changed.length} changed, ${diff.next.length - diff.added.length - diff.changed.length - diff.kept.length} unchanged${diff.kept.length > 0 ? `, ${diff.kept.length} kept as they were (their file is invalid)` : ''}; ${loaded.invalid.length} invalid file(s)`);
    // After the reload's own lines, so that raising the level to 'warn' still shows what it did.
    if (config.logLevel !== previous.logLevel) log.level = config.logLevel;
    await this.options.applied?.({ config: this.current, previous, jobs: diff.next, invalid: loaded.invalid, jobsChanged });
  }
}

/** The settings as the config file names them, secrets redacted. */
function described(config: Config): Record<string, unknown> {
  const { gracePeriodMs: _ms, ...rest } = describeConfig(config);
  return { ...rest, gracePeriod: formatDuration(config.gracePeriodMs) };
}

function show(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The hash of the job file's content as imported (else as it is now); null when it cannot be read (then the job counts as changed once it can). */
function codeOf(job: Job): string | null {
  if (!job.path) return null;
  const imported = importedVersion(job.path);
  if (imported !== undefined) return imported;
  try {
    return contentHash(readFileSync(job.path));
  } catch {
    return null;
  }
}
