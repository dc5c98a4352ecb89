/**
 * The example jobs in ./jobs, copied as a user would copy them: into a jobs folder outside the project
 * (a temporary folder with no package.json and no node_modules, which is also the working directory),
 * then `validate` and `run-once <job>` through the real bin/scheduler on a SQLite store there. They
 * may import only `node:` modules and `cluster-cron` (the scheduler resolves that one for them), and
 * their business effects must be what their comments promise: one settlement per business day, an
 * upsert per order id. Needs `npm run build` first (`npm test` does it through pretest).
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, runCli, type CliResult } from '../helpers/cli.js';
import type { HistoryRun } from '../helpers/workspace.js';

const EXAMPLES = join(ROOT, 'jobs');
const FILES = readdirSync(EXAMPLES).filter((f) => /\.(ts|mts|js|mjs)$/.test(f) && !/^[_.]/.test(f)).sort();

function show(r: CliResult): string {
  return `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
}

/** Every module specifier a file imports (static `import ... from`, side-effect `import '...'`, dynamic `import('...')`, `require('...')`). */
function specifiers(source: string): string[] {
  const found: string[] = [];
  for (const re of [/\bfrom\s*['"]([^'"]+)['"]/g, /\bimport\s*['"]([^'"]+)['"]/g, /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g, /\brequire\s*\(\s*['"]([^'"]+)['"]\s*\)/g]) {
    for (const m of source.matchAll(re)) found.push(m[1]!);
  }
  return found;
}

describe('the example jobs of ./jobs', () => {
  it('there are example jobs, and they import only node: modules and cluster-cron', () => {
    expect(FILES.length).toBeGreaterThanOrEqual(3);
    for (const f of FILES) {
      const bad = specifiers(readFileSync(join(EXAMPLES, f), 'utf8')).filter((s) => !s.startsWith('node:') && s !== 'cluster-cron');
      expect(bad, `${f} imports`).toEqual([]);
    }
  });

  describe('copied to a jobs folder outside the project', () => {
    let dir: string;
    let jobsDir: string;
    const settledDay = new Date(Date.now() - 86_400_000).toLocaleDateString('en-CA', { timeZone: 'Asia/Shanghai' });
    const env = (): Record<string, string> => ({ SCHEDULER_STORE: `sqlite:${join(dir, 'data', 'scheduler.db')}` });
    const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { cwd: dir, env: { ...env(), ...extra }, timeoutMs: 60_000 });
    const history = async (job: string): Promise<HistoryRun[]> => {
      const r = await cli(['history', job, '--json']);
      expect(r.code, show(r)).toBe(0);
      const parsed = JSON.parse(r.stdout) as HistoryRun[] | { runs: HistoryRun[] };
      return Array.isArray(parsed) ? parsed : parsed.runs;
    };

    beforeAll(() => {
      if (!existsSync(join(ROOT, 'dist', 'cli', 'entry.js'))) throw new Error('dist/ is missing: run `npm run build` (npm test does it) before these tests');
      dir = mkdtempSync(join(tmpdir(), 'cron-examples-'));
      jobsDir = join(dir, 'jobs');
      for (const f of FILES) cpSync(join(EXAMPLES, f), join(jobsDir, f));
      // Payments of the day a manual settlement run (now) settles, and of another day.
      mkdirSync(join(dir, 'data', 'examples'), { recursive: true });
      writeFileSync(join(dir, 'data', 'examples', 'payments.jsonl'), [
        { id: 'p1', day: settledDay, cents: 1250 }, { id: 'p2', day: settledDay, cents: 250 }, { id: 'p3', day: '2000-01-01', cents: 99 },
      ].map((p) => JSON.stringify(p)).join('\n') + '\n');
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('the folder is outside the project, with no package.json or node_modules on the way up', () => {
      expect(dir.startsWith(ROOT)).toBe(false);
      for (let d = dir; ; d = join(d, '..')) {
        expect(existsSync(join(d, 'node_modules')), `${d}/node_modules`).toBe(false);
        expect(existsSync(join(d, 'package.json')), `${d}/package.json`).toBe(false);
        if (join(d, '..') === d) break;
      }
    });

    it('validate: every file loads and is valid', async () => {
      const r = await cli(['validate', '--jobs', jobsDir, '--json']);
      expect(r.code, show(r)).toBe(0);
      const out = JSON.parse(r.stdout) as { valid: boolean; jobs: string[]; problems: unknown[] };
      expect(out.problems).toEqual([]);
      expect(out.jobs.sort()).toEqual(FILES.map((f) => f.replace(/\.[^.]+$/, '')).sort());
    });

    it.each(FILES.map((f) => f.replace(/\.[^.]+$/, '')))('run-once %s runs it (exit 0, recorded succeeded)', async (job) => {
      const r = await cli(['run-once', job, '--jobs', jobsDir]);
      expect(r.code, show(r)).toBe(0);
      const runs = await history(job);
      expect(runs.map((x) => x.status)).toEqual(['succeeded']);
    });

    it('daily-settlement: one settlement file per business day, a second run does not write the day again', async () => {
      const first = (await history('daily-settlement'))[0]!;
      const result = first.result as { day: string; written: boolean; total: number; count: number };
      expect(result.written).toBe(true);
      expect(result.day).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(result).toMatchObject({ day: settledDay, total: 1500, count: 2 });
      const file = join(dir, 'data', 'examples', 'settlements', `${result.day}.json`);
      const stored = JSON.parse(readFileSync(file, 'utf8')) as { day: string; periodKey: string };
      expect(stored.day).toBe(result.day);
      expect(stored.periodKey).toBe(first.periodKey);

      const again = await cli(['run-once', 'daily-settlement', '--jobs', jobsDir]);
      expect(again.code, show(again)).toBe(0);
      const second = (await history('daily-settlement'))[0]!;
      expect(second.id).not.toBe(first.id);
      expect(second.result).toMatchObject({ day: result.day, written: false });
      expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(stored);
      expect(readdirSync(join(dir, 'data', 'examples', 'settlements'))).toEqual([`${result.day}.json`]);
    });

    it('order-sync: orders are upserted by id (a forced re-run of the same period updates, never duplicates)', async () => {
      // The latest hh:05 UTC period not later than now: both runs below get the same window, so the same ids.
      const now = Date.now();
      let period = Math.floor(now / 3_600_000) * 3_600_000 + 5 * 60_000;
      if (period > now) period -= 3_600_000;
      const iso = new Date(period).toISOString();
      const ordersDir = join(dir, 'data', 'examples', 'orders');
      rmSync(ordersDir, { recursive: true, force: true });
      const first = await cli(['run-once', 'order-sync', '--period', iso, '--jobs', jobsDir]);
      expect(first.code, show(first)).toBe(0);
      const before = readdirSync(ordersDir).sort();
      expect(before).toHaveLength(3);
      const again = await cli(['run-once', 'order-sync', '--period', iso, '--force', '--jobs', jobsDir]);
      expect(again.code, show(again)).toBe(0);
      expect(readdirSync(ordersDir).sort()).toEqual(before);
      const runs = (await history('order-sync')).filter((x) => x.scheduledAt === iso);
      expect(runs.map((x) => x.status)).toEqual(['succeeded', 'succeeded']);
      expect(runs.map((x) => x.result)).toEqual([{ fetched: 3, upserted: 3 }, { fetched: 3, upserted: 3 }]);
      for (const f of before) expect(JSON.parse(readFileSync(join(ordersDir, f), 'utf8'))).toMatchObject({ status: 'paid', syncedBy: runs[0]!.periodKey });
    });

    it('heartbeat: its log line names the node and the period once each (the fields ctx.log binds)', async () => {
      const r = await cli(['run-once', 'heartbeat', '--jobs', jobsDir], { SCHEDULER_LOG_LEVEL: 'info' });
      expect(r.code, show(r)).toBe(0);
      const line = r.stderr.split('\n').find((l) => l.includes('"msg":"cluster heartbeat"'));
      expect(line, show(r)).toBeDefined();
      // JSON.parse keeps the last of two equal keys: count them in the text.
      for (const key of ['node', 'job', 'periodKey']) expect(line!.split(`"${key}":`).length - 1, `${key} in ${line}`).toBe(1);
      expect(JSON.parse(line!)).toMatchObject({ level: 'info', job: 'heartbeat', periodKey: expect.stringMatching(/^heartbeat@/) });
      expect(line).not.toContain('"period":');
    });

    it('EXAMPLES_DATA_DIR moves the files the examples write', async () => {
      const elsewhere = join(dir, 'elsewhere');
      const r = await cli(['run-once', 'order-sync', '--jobs', jobsDir], { EXAMPLES_DATA_DIR: elsewhere });
      expect(r.code, show(r)).toBe(0);
      expect(readdirSync(join(elsewhere, 'orders'))).toHaveLength(3);
    });
  });
});
