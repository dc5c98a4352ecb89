/**
 * A temporary folder laid out as a user would: a jobs folder outside the project (no package.json),
 * the file the job bodies append their side effects to (effects.jsonl), a logs folder for daemons
 * that log to files, and a place for an SQLite store. Removed by cleanup().
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readJsonLines } from './process.mjs';

export class Workspace {
  constructor(prefix = 'cron-it-') {
    this.dir = mkdtempSync(join(tmpdir(), prefix));
    this.jobsDir = join(this.dir, 'jobs');
    mkdirSync(this.jobsDir);
  }

  /** The side-effect file of the bodies (SIDE_EFFECTS). */
  get effectsFile() {
    return this.path('effects.jsonl');
  }

  /** logs/ in the workspace, made on first use. */
  get logsDir() {
    const dir = this.path('logs');
    mkdirSync(dir, { recursive: true });
    return dir;
  }

  /** Writes a job file into the jobs folder (or another folder under the workspace). */
  writeJob(file, source, folder = this.jobsDir) {
    mkdirSync(folder, { recursive: true });
    const path = join(folder, file);
    writeFileSync(path, source);
    return path;
  }

  path(...parts) {
    return join(this.dir, ...parts);
  }

  /** `sqlite:<absolute path>` in the workspace. */
  sqliteStore(name = 'scheduler.db') {
    return `sqlite:${this.path(name)}`;
  }

  /** Non-empty lines of a file in the workspace (none when it does not exist yet). */
  lines(name) {
    const file = this.path(name);
    if (!existsSync(file)) return [];
    return readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
  }

  /** JSON lines of a file in the workspace (a line that is not JSON throws). */
  records(name) {
    return this.lines(name).map((l) => JSON.parse(l));
  }

  /** The bodies' side effects so far (a line still being written is skipped). */
  effects() {
    return readJsonLines(this.effectsFile);
  }

  cleanup() {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
