/**
 * Finding and loading job files: `.ts`, `.mts`, `.js`, `.mjs` directly in the jobs folder, not
 * starting with `_` or `.`. TypeScript loads through jiti with no build step and no caches on disk
 * (a read-only root filesystem must work). A broken file never stops the valid ones.
 */
import { readdirSync, statSync } from 'node:fs';
import { extname, join, relative } from 'node:path';
import { ConfigError, errorMessage } from '../errors.js';
import { createJobImporter, defaultExportOf } from './importer.js';
import type { InvalidJobFile, Job } from './types.js';
import { validateJob, type JobFieldDefaults } from './validate.js';

const EXTENSIONS = new Set(['.ts', '.mts', '.js', '.mjs']);

export interface LoadedJobs {
  jobs: Job[];
  invalid: InvalidJobFile[];
}

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
    .filter((f) => !f.startsWith('_') && !f.startsWith('.') && EXTENSIONS.has(extname(f)) && !f.endsWith('.d.ts'))
    .sort()
    .map((f) => join(jobsDir, f))
    .filter((f) => statSync(f).isFile());
}

/** @param defaults job fields whose default comes from the configuration (`isolation`). */
export async function loadJobs(jobsDir: string, defaultTimezone: string, cwd = process.cwd(), defaults: JobFieldDefaults = {}): Promise<LoadedJobs> {
  const files = listJobFiles(jobsDir);
  const importJob = createJobImporter();
  const jobs: Job[] = [];
  const invalid: InvalidJobFile[] = [];
  const byName = new Map<string, string>();
  for (const file of files) {
    const shown = relative(cwd, file).startsWith('..') ? file : relative(cwd, file);
    let exported: unknown;
    try {
      const mod = await importJob(file);
      if (mod && typeof mod === 'object' && !('default' in mod) && mod.__esModule) {
        // An ES module without `export default` (only named exports, or none): say so, rather than
        // reporting its named exports as unknown fields of a job.
        const names = Object.keys(mod).filter((k) => k !== '__esModule');
        invalid.push({ file: shown, problems: [`${shown}: default export = none${names.length ? ` (named exports: ${names.join(', ')})` : ''}: expected \`export default { schedule, run, ... }\` (see defineJob)`] });
        continue;
      }
      exported = defaultExportOf(mod);
    } catch (err) {
      invalid.push({ file: shown, problems: [`${shown}: cannot be loaded: ${oneLine(errorMessage(err))}`] });
      continue;
    }
    const { job, problems } = validateJob(shown, exported, defaultTimezone, defaults);
    if (!job) {
      invalid.push({ file: shown, problems });
      continue;
    }
    const other = byName.get(job.name);
    if (other) {
      invalid.push({ file: shown, problems: [`${shown}: field 'name' = "${job.name}": expected a unique name; ${other} already defines it`] });
      continue;
    }
    byName.set(job.name, shown);
    job.path = file;
    jobs.push(job);
  }
  return { jobs, invalid };
}

function oneLine(text: string): string {
  return text.split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 3).join(' | ');
}
