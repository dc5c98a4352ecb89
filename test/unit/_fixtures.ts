/**
 * Fixture folders of the unit tests, and temporary copies of them. A TypeScript file with a syntax
 * error cannot be stored under test/ (`tsc -p tsconfig.test.json` type-checks every .ts file there),
 * so it is written into a temporary copy of the folder at test time.
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const FIXTURES = join(ROOT, 'test', 'fixtures');
export const GOOD_JOBS = join(FIXTURES, 'good-jobs');
export const BROKEN_JOBS = join(FIXTURES, 'broken-jobs');
export const MIXED_JOBS = join(FIXTURES, 'unit-mixed-jobs');

/** A .ts job file that does not parse: line 4, column 14 is the missing expression. */
export const TS_SYNTAX_ERROR = [
  '// Broken: TypeScript that does not parse.',
  'export default {',
  "  schedule: '* * * * *',",
  '  async run(ctx: { job: string }) { const x = ; return x; },',
  '};',
  '',
].join('\n');

const made: string[] = [];

export function tempDir(prefix = 'cron-unit-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** A copy of a fixture folder in a fresh temporary folder (outside the project), plus extra files. */
export function copyFixture(source: string, extra: Record<string, string> = {}): string {
  const dir = join(tempDir(), 'jobs');
  cpSync(source, dir, { recursive: true });
  for (const [name, text] of Object.entries(extra)) writeFileSync(join(dir, name), text);
  return dir;
}

/** The broken-jobs folder, copied, with a TypeScript syntax error added as syntax-error-ts.ts. */
export function brokenJobsWithTsSyntaxError(): string {
  return copyFixture(BROKEN_JOBS, { 'syntax-error-ts.ts': TS_SYNTAX_ERROR });
}

export function removeTempDirs(): void {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
}

/**
 * The stores of a SQLite file in a temporary folder of its own (also the jobs folder). The runtime is
 * imported on the first call: most files that use these fixtures never open a store.
 */
export async function sqliteStores(): Promise<Awaited<ReturnType<typeof import('../../src/runtime.js').openStores>>> {
  const [{ openStores }, { loadConfig }] = await Promise.all([import('../../src/runtime.js'), import('../../src/config/config.js')]);
  const dir = tempDir();
  return openStores(loadConfig({ env: { SCHEDULER_STORE: `sqlite:${join(dir, 'db.sqlite')}`, SCHEDULER_JOBS_DIR: dir }, cwd: dir }));
}
