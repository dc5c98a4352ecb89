/**
 * A temporary folder laid out as a user would: a jobs folder outside the project (no package.json),
 * files the job bodies append their side effects to, and a place for an SQLite store. Removed by
 * cleanup().
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export class Workspace {
  readonly dir: string;
  readonly jobsDir: string;

  constructor(prefix = 'cron-it-') {
    this.dir = mkdtempSync(join(tmpdir(), prefix));
    this.jobsDir = join(this.dir, 'jobs');
    mkdirSync(this.jobsDir);
  }

  /** Writes a job file into the jobs folder (or another folder under the workspace). */
  writeJob(file: string, source: string, folder = this.jobsDir): string {
    mkdirSync(folder, { recursive: true });
    const path = join(folder, file);
    writeFileSync(path, source);
    return path;
  }

  path(...parts: string[]): string {
    return join(this.dir, ...parts);
  }

  /** `sqlite:<absolute path>` in the workspace. */
  sqliteStore(name = 'scheduler.db'): string {
    return `sqlite:${this.path(name)}`;
  }

  /** Non-empty lines of a file in the workspace (none when it does not exist yet). */
  lines(name: string): string[] {
    const file = this.path(name);
    if (!existsSync(file)) return [];
    return readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
  }

  /** JSON lines of a file in the workspace. */
  records<T = Record<string, unknown>>(name: string): T[] {
    return this.lines(name).map((l) => JSON.parse(l) as T);
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A run as printed by `history --json`. */
export interface HistoryRun {
  id: string;
  job: string;
  scheduledAt: string;
  periodKey: string;
  /** The shard of the period (0 for an unsharded job). */
  shard?: number;
  attempt: number;
  trigger: string;
  status: string;
  reason: string | null;
  nodeId: string;
  /** Null for a pending attempt (not started). */
  claimedAt?: string | null;
  startedAt: string | null;
  /** A pending attempt is due at this instant. */
  runAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  error: string | null;
  result: unknown;
}
