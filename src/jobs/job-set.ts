/**
 * The version of a node's job set: a short hash of its jobs folder's job files (their names and
 * contents), so that nodes that run the same files show the same version, whatever their paths.
 * The calendars folder's `.json` and `.ics` files count too (all of them, named by a job or not).
 * Written with the node's heartbeat; `nodes`, the page and /metrics show it, and a node warns when
 * live nodes' versions differ for longer than JOB_SET_SKEW_MS (src/nodes/job-sets.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { contentHash } from './importer.js';
import { listJobFiles } from './load.js';
import { createHash } from 'node:crypto';

/** Hex digits of the version shown. */
const JOB_SET_CHARS = 12;

export function jobSetVersion(jobsDir: string, calendarsDir?: string): string {
  const h = createHash('sha256');
  let files: string[];
  try {
    files = listJobFiles(jobsDir);
  } catch {
    // A folder that cannot be read: no file, as the loader then has.
    files = [];
  }
  for (const file of files) {
    let content: string;
    try {
      content = contentHash(readFileSync(file));
    } catch {
      content = 'unreadable';
    }
    h.update(`${basename(file)}\0${content}\n`);
  }
  // The named calendars (`exclude: ['calendar:<name>']`): nodes with different holidays run different job sets.
  for (const file of calendarFiles(calendarsDir)) {
    let content: string;
    try {
      content = contentHash(readFileSync(join(calendarsDir!, file)));
    } catch {
      content = 'unreadable';
    }
    h.update(`calendars/${file}\0${content}\n`);
  }
  return h.digest('hex').slice(0, JOB_SET_CHARS);
}

/** The calendar files of the folder (none when it does not exist or cannot be read), sorted. */
function calendarFiles(dir: string | undefined): string[] {
  if (!dir) return [];
  try {
    return readdirSync(dir).filter((f) => !f.startsWith('.') && (f.endsWith('.json') || f.endsWith('.ics'))).sort();
  } catch {
    return [];
  }
}
