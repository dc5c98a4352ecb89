/**
 * Finding and loading job files: `.ts`, `.mts`, `.js`, `.mjs` directly in the jobs folder, and
 * `.json`, `.yaml`, `.yml` (command jobs only, see data-file.ts), not starting with `_` or `.`.
 * TypeScript loads through jiti with no build step and no caches on disk (a read-only root
 * filesystem must work). A broken file never stops the valid ones, and no file can
 * stall the others: each load has a deadline (the `loadTimeout` setting), a dangling symlink, a
 * directory or anything else that is not a regular file named like a job file, and a file removed
 * while loading are each one invalid file with its reason.
 */
import { lstatSync, readdirSync, readlinkSync, statSync, type Stats } from 'node:fs';
import { extname, join, relative, resolve } from 'node:path';
import { CalendarSource } from '../calendars/calendar.js';
import { ConfigError, errorMessage } from '../errors.js';
import { formatDuration } from '../time/duration.js';
import { createJobImporter, defaultExportOf } from './importer.js';
import type { InvalidJobFile, Job } from './types.js';
import { validateJob, type JobFieldDefaults, type ScheduleCache } from './validate.js';

/** The extensions of job files (the others in the jobs folder are ignored). */
export const EXTENSIONS = new Set(['.ts', '.mts', '.js', '.mjs', '.json', '.yaml', '.yml']);
/** Tooling files a jobs folder with dependencies of its own may hold: not job files, whatever their extension. */
const TOOLING_FILE = /^(package\.json|package-lock\.json|npm-shrinkwrap\.json|tsconfig(\..+)?\.json|jsconfig\.json|pnpm-lock\.yaml|pnpm-workspace\.yaml|renovate\.json)$/;

/** The default of the `loadTimeout` setting. */
export const DEFAULT_LOAD_TIMEOUT_MS = 10_000;
/**
 * How many files load at once. Each load that never settles holds a slot for one loadTimeout, so
 * with files loaded one after another ten such files would cost ten deadlines at every start.
 */
export const LOAD_CONCURRENCY = 16;

export interface LoadedJobs {
  jobs: Job[];
  invalid: InvalidJobFile[];
}

export interface LoadJobsOptions {
  /** Files inside it are shown relative to it (default: the working directory). */
  cwd?: string;
  /** Deadline of each file's load, in ms of time the event loop was free (default 10 s). */
  timeoutMs?: number;
  /** How many files load at once (default LOAD_CONCURRENCY). */
  concurrency?: number;
  /** Imports one file (default: jiti). A seam for tests. */
  importer?: (file: string) => Promise<unknown>;
  /** Job fields whose default comes from the configuration (`isolation`). */
  defaults?: JobFieldDefaults;
  /** Where `exclude`'s named calendars are (default: ./config/calendars). */
  calendarsDir?: string;
}

/**
 * The candidate job files: every entry of the folder named like a job file, sorted. Whether it is
 * a loadable file (not a directory, not a dangling symlink, still there) is judged by loadJobs,
 * which reports the ones that are not.
 */
export function listJobFiles(jobsDir: string): string[] {
  let entries: string[];
  try {
    if (!statSync(jobsDir).isDirectory()) throw new ConfigError(`jobs folder ${jobsDir} is not a folder`);
    entries = readdirSync(jobsDir);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`jobs folder ${jobsDir} cannot be read: ${errorMessage(err)}`);
  }
  return entries
    .filter((f) => !f.startsWith('_') && !f.startsWith('.') && EXTENSIONS.has(extname(f)) && !f.endsWith('.d.ts') && !TOOLING_FILE.test(f))
    .sort()
    .map((f) => join(jobsDir, f));
}

export async function loadJobs(jobsDir: string, defaultTimezone: string, cwdOrOptions: string | LoadJobsOptions = {}): Promise<LoadedJobs> {
  return loadJobFiles(listJobFiles(jobsDir), defaultTimezone, cwdOrOptions);
}

/** What loading one file gave: its module, or the one line saying why it cannot be loaded. */
type Loaded = { mod: unknown } | { problem: string };

/**
 * Loads the given files (as listed by listJobFiles), at most `concurrency` at once, each within its
 * deadline, and validates them in the listed order (so the first of two files defining the same
 * name wins, whatever order they finished loading in).
 */
export async function loadJobFiles(files: string[], defaultTimezone: string, cwdOrOptions: string | LoadJobsOptions = {}): Promise<LoadedJobs> {
  const options = typeof cwdOrOptions === 'string' ? { cwd: cwdOrOptions } : cwdOrOptions;
  const cwd = options.cwd ?? process.cwd();
  const timeoutMs = options.timeoutMs ?? DEFAULT_LOAD_TIMEOUT_MS;
  const concurrency = Math.max(1, options.concurrency ?? LOAD_CONCURRENCY);
  const importer = options.importer ?? createJobImporter();
  const shown = (file: string) => (relative(cwd, file).startsWith('..') ? file : relative(cwd, file));

  const results: Loaded[] = new Array(files.length);
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const i = next++;
      results[i] = await loadOne(files[i]!, shown(files[i]!), importer!, timeoutMs);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, files.length) }, worker));

  const jobs: Job[] = [];
  const invalid: InvalidJobFile[] = [];
  const byName = new Map<string, string>();
  const schedules: ScheduleCache = new Map();
  // Each named calendar read once per load, however many jobs name it.
  const calendars = new CalendarSource(options.calendarsDir ?? resolve(cwd, 'config', 'calendars'), cwd);
  files.forEach((file, i) => {
    const where = shown(file);
    const result = results[i]!;
    if ('problem' in result) {
      invalid.push({ file: where, problems: [result.problem] });
      return;
    }
    const mod = result.mod as Record<string, unknown> | undefined;
    if (mod && typeof mod === 'object' && !('default' in mod) && mod.__esModule) {
      // An ES module without `export default` (only named exports, or none): say so, rather than
      // reporting its named exports as unknown fields of a job.
      const names = Object.keys(mod).filter((k) => k !== '__esModule');
      invalid.push({ file: where, problems: [`${where}: default export = none${names.length ? ` (named exports: ${names.join(', ')})` : ''}: expected \`export default { schedule, run, ... }\` (see defineJob)`] });
      return;
    }
    const withHook = withNamedOnFailure(where, mod, defaultExportOf(mod));
    if ('problem' in withHook) {
      invalid.push({ file: where, problems: [withHook.problem] });
      return;
    }
    const { job, problems } = validateJob(where, withHook.exported, defaultTimezone, options.defaults, file, schedules, calendars);
    if (!job) {
      invalid.push({ file: where, problems });
      return;
    }
    const other = byName.get(job.name);
    if (other) {
      invalid.push({ file: where, problems: [`${where}: field 'name' = "${job.name}": expected a unique name; ${other} already defines it`] });
      return;
    }
    byName.set(job.name, where);
    job.path = file;
    jobs.push(job);
  });
  return { jobs, invalid };
}

/**
 * `export async function onFailure(ctx, outcome)` beside `export default { ... }` is the job's hook,
 * as a field of the default export is: written either way, it is called. Both at once would leave
 * one of them silently unused, so the file is refused.
 */
function withNamedOnFailure(where: string, mod: Record<string, unknown> | undefined, exported: unknown): { exported: unknown } | { problem: string } {
  // Own keys only: jiti's interop also shows the default export's fields on the module (as bound copies).
  if (!mod || typeof mod !== 'object' || mod === exported || !Object.keys(mod).includes('onFailure') || mod.onFailure === undefined) return { exported };
  if (exported === null || typeof exported !== 'object' || Array.isArray(exported)) return { exported };
  const def = exported as Record<string, unknown>;
  if (def.onFailure !== undefined) {
    return { problem: `${where}: onFailure is both a named export and a field of the default export: expected one of them (remove the other)` };
  }
  if (typeof mod.onFailure !== 'function') {
    return { problem: `${where}: named export 'onFailure' = ${typeof mod.onFailure === 'string' ? JSON.stringify(mod.onFailure) : typeof mod.onFailure}: expected a function (export async function onFailure(ctx, outcome) { ... })` };
  }
  return { exported: { ...def, onFailure: mod.onFailure } };
}

/** Checks what the entry is, then imports it within its deadline. Never throws. */
async function loadOne(file: string, where: string, importer: (file: string) => Promise<unknown>, timeoutMs: number): Promise<Loaded> {
  const notLoadable = whyNotLoadable(file, where);
  if (notLoadable) return { problem: notLoadable };
  const outcome = await withDeadline(() => importer(file), timeoutMs);
  if (outcome.kind === 'ok') return { mod: outcome.value };
  if (outcome.kind === 'timeout') {
    return { problem: `${where}: cannot be loaded: did not settle within ${formatDuration(timeoutMs)} (a top-level await that never resolves?)` };
  }
  // Removed (or its symlink's target removed) between the listing and the end of the import: say
  // that, rather than "Cannot find module", which reads like a missing import of the file.
  const gone = whyNotLoadable(file, where);
  if (gone) return { problem: gone };
  return { problem: `${where}: cannot be loaded: ${oneLine(errorMessage(outcome.error))}` };
}

/** Why the listed entry cannot be loaded as a job file (undefined: it is a regular file, or a symlink to one). */
function whyNotLoadable(file: string, where: string): string | undefined {
  let link: Stats;
  try {
    link = lstatSync(file);
  } catch (err) {
    if (codeOf(err) === 'ENOENT') return `${where}: cannot be loaded: the file was removed while loading`;
    return `${where}: cannot be loaded: ${oneLine(errorMessage(err))}`;
  }
  let target = link;
  if (link.isSymbolicLink()) {
    try {
      target = statSync(file);
    } catch (err) {
      let to = '?';
      try {
        to = readlinkSync(file);
      } catch {
        return `${where}: cannot be loaded: the file was removed while loading`;
      }
      if (codeOf(err) === 'ENOENT') return `${where}: cannot be loaded: dangling symlink to ${to}`;
      if (codeOf(err) === 'ELOOP') return `${where}: cannot be loaded: symlink loop (to ${to})`;
      return `${where}: cannot be loaded: symlink to ${to}: ${oneLine(errorMessage(err))}`;
    }
  }
  if (target.isFile()) return undefined;
  const via = link.isSymbolicLink() ? ' (through a symlink)' : '';
  // A FIFO would block the (synchronous) read of the file for ever: never open anything but a file.
  const kind = target.isDirectory() ? 'a directory' : target.isFIFO() ? 'a FIFO' : target.isSocket() ? 'a socket'
    : target.isCharacterDevice() || target.isBlockDevice() ? 'a device' : 'not a regular file';
  return `${where}: is ${kind}${via}, not a job file`;
}

function codeOf(err: unknown): string | undefined {
  return err && typeof err === 'object' && 'code' in err ? String((err as { code: unknown }).code) : undefined;
}

type Outcome<T> = { kind: 'ok'; value: T } | { kind: 'failed'; error: unknown } | { kind: 'timeout' };

/** A slice of the deadline; a slice that fires late counts for at most SLICE_MS + SLICE_SLACK_MS. */
const SLICE_MS = 100;
const SLICE_SLACK_MS = 50;

/**
 * Runs `start` and waits for its promise at most `timeoutMs` of time in which the event loop was
 * free. The deadline is kept in slices of 100 ms on a ref'd timer, which also keeps the process
 * alive while the load is pending (an import whose top-level await never settles holds nothing in
 * the event loop: without a timer Node would simply exit). Time during which the thread was blocked
 * (another file's synchronous top-level, loading beside this one) shows as a late slice and is not
 * counted, so a slow file cannot make the files loading beside it miss their deadline.
 *
 * A promise that misses the deadline is left pending (an ES module import cannot be cancelled); what
 * it settles with later is ignored (its rejection is handled here, not reported as unhandled).
 */
export function withDeadline<T>(start: () => Promise<T>, timeoutMs: number): Promise<Outcome<T>> {
  return new Promise((resolve) => {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const settle = (o: Outcome<T>) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      resolve(o);
    };
    let counted = 0;
    const arm = () => {
      const slice = Math.min(SLICE_MS, timeoutMs - counted);
      const armedAt = performance.now();
      timer = setTimeout(() => {
        counted += Math.min(performance.now() - armedAt, slice + SLICE_SLACK_MS);
        if (counted >= timeoutMs) settle({ kind: 'timeout' });
        else arm();
      }, slice);
    };
    arm();
    let promise: Promise<T>;
    try {
      promise = Promise.resolve(start());
    } catch (error) {
      settle({ kind: 'failed', error });
      return;
    }
    promise.then((value) => settle({ kind: 'ok', value }), (error) => settle({ kind: 'failed', error }));
  });
}

function oneLine(text: string): string {
  return text.split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 3).join(' | ');
}
