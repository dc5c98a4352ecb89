/**
 * Job files picked up by themselves: `run` watches the jobs folder and the config file's folder
 * (fs.watch: inotify on Linux, no polling) and asks for a reload, as SIGHUP does, WATCH_DEBOUNCE_MS
 * after the last change, so that an editor's save, a deploy copying many files, or Kubernetes
 * swapping a ConfigMap's `..data` symlink is one reload. The reload is SIGHUP's (reload.ts): a broken
 * file is refused with its error while the previous definition runs on, no in-flight run is dropped,
 * and a reload that finds nothing changed changes nothing. Off with `watch: off`; SIGHUP stays.
 */
import { existsSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';

export const WATCH_DEBOUNCE_MS = 500;

/** Kubernetes' ConfigMap volume: the files are symlinks through `..data`, swapped atomically on an update. */
const CONFIGMAP_ENTRIES = /^\.\.(data|\d{4}_)/;

export interface WatchedPaths {
  jobsDir: string;
  /** The config file in use, if any (its folder is watched, for this file's name and `..data`). */
  configFile: string | null;
  /** The calendars folder (jobs' `exclude: ['calendar:<name>']`), watched when it exists. */
  calendarsDir?: string | null;
}

export class FolderWatch {
  private watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private first: string | null = null;
  private armed = '';

  constructor(
    /** Called once the changes have settled, naming the first changed path. */
    private readonly onChange: (what: string) => void,
    private readonly log: Logger,
    private readonly debounceMs = WATCH_DEBOUNCE_MS,
  ) {}

  /** Watches these paths (again, when they changed on a reload); a folder that cannot be watched is one warning. */
  watch(paths: WatchedPaths): void {
    const calendars = paths.calendarsDir && existsSync(paths.calendarsDir) ? paths.calendarsDir : null;
    const key = `${paths.jobsDir}\n${paths.configFile ?? ''}\n${calendars ?? ''}`;
    if (key === this.armed) return;
    this.unwatch();
    this.armed = key;
    this.add(paths.jobsDir, (name) => name === null || !name.startsWith('.') || CONFIGMAP_ENTRIES.test(name), paths.jobsDir);
    if (paths.configFile) {
      const file = basename(paths.configFile);
      const dir = dirname(paths.configFile);
      // The jobs folder inside the config folder is watched already: every name of the config folder would repeat it.
      this.add(dir, (name) => name === null || name === file || CONFIGMAP_ENTRIES.test(name), paths.configFile);
    }
    // A calendar edited changes the jobs that name it (their `exclude`): a reload reads it again.
    if (calendars) this.add(calendars, (name) => name === null || !name.startsWith('.') || CONFIGMAP_ENTRIES.test(name), calendars);
    this.log.info({ jobsDir: paths.jobsDir, configFile: paths.configFile, calendarsDir: calendars }, 'watching the jobs folder and the config file: a change reloads them (as SIGHUP)');
  }

  private add(dir: string, relevant: (name: string | null) => boolean, shown: string): void {
    let w: FSWatcher;
    try {
      w = watch(dir, { persistent: false }, (_event, name) => {
        const n = name === null ? null : String(name);
        if (relevant(n)) this.changed(n === null ? shown : `${dir}/${n}`);
      });
    } catch (err) {
      this.log.warn({ path: dir, err: { message: errorMessage(err) } }, `${shown} cannot be watched (${errorMessage(err)}): changes need a SIGHUP`);
      return;
    }
    w.on('error', (err) => this.log.warn({ path: dir, err: { message: errorMessage(err) } }, `watching ${shown} stopped (${errorMessage(err)}): changes need a SIGHUP`));
    this.watchers.push(w);
  }

  private changed(what: string): void {
    this.first ??= what;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      const first = this.first!;
      this.first = null;
      this.timer = undefined;
      this.onChange(first);
    }, this.debounceMs);
    this.timer.unref();
  }

  private unwatch(): void {
    for (const w of this.watchers) w.close();
    this.watchers = [];
  }

  close(): void {
    this.unwatch();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.armed = '';
  }
}
