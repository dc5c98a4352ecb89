/** The jobs folder's watch (src/daemon/watch.ts) on real folders: what counts as a change, and that a burst is one reload. */
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FolderWatch } from '../../src/daemon/watch.js';
import { removeTempDirs, tempDir } from './_fixtures.js';

const log = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const watches: FolderWatch[] = [];
afterEach(() => {
  for (const w of watches.splice(0)) w.close();
});
afterAll(() => removeTempDirs());

function watching(jobsDir: string, configFile: string | null = null): string[] {
  const calls: string[] = [];
  const w = new FolderWatch((what) => calls.push(what), log, 100);
  w.watch({ jobsDir, configFile });
  watches.push(w);
  return calls;
}

describe('the jobs folder watch', () => {
  it('a burst of writes is one change, named by its first file; an editor\'s dot file is none', async () => {
    const dir = tempDir('watch-');
    const calls = watching(dir);
    writeFileSync(join(dir, '.report.mjs.swp'), 'x');
    await sleep(300);
    expect(calls).toEqual([]);
    for (let i = 0; i < 5; i++) {
      writeFileSync(join(dir, `job-${i}.mjs`), `export default {}; // ${i}`);
      await sleep(20);
    }
    await sleep(400);
    expect(calls).toEqual([join(dir, 'job-0.mjs')]);
  });

  it("a ConfigMap volume's ..data swap is a change; in the config file's folder, only that file and ..data are", async () => {
    const root = tempDir('watch-cm-');
    const jobs = join(root, 'jobs');
    mkdirSync(join(jobs, '..2026_1'), { recursive: true });
    symlinkSync('..2026_1', join(jobs, '..data'));
    const config = join(root, 'config');
    mkdirSync(config);
    writeFileSync(join(config, 'scheduler.json'), '{}');
    const calls = watching(jobs, join(config, 'scheduler.json'));
    writeFileSync(join(config, 'notes.txt'), 'not the config');
    await sleep(300);
    expect(calls).toEqual([]);
    mkdirSync(join(jobs, '..2026_2'));
    symlinkSync('..2026_2', join(jobs, '..data_tmp'));
    renameSync(join(jobs, '..data_tmp'), join(jobs, '..data'));
    await sleep(400);
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatch(/\.\.(data|2026_2)/);
    writeFileSync(join(config, 'scheduler.json'), '{ "logLevel": "debug" }');
    await sleep(400);
    expect(calls).toEqual([calls[0], join(config, 'scheduler.json')]);
  });
});
