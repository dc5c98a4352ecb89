/**
 * `npm start` (scripts/start.mjs), the quick start, in this checkout (installed and built: it must not
 * install or build here, CLUSTER_CRON_START_NO_PREPARE=1 makes it refuse instead): the summary it
 * prints is what the daemon uses (the status page's URL included), and a Ctrl-C that reaches it twice at
 * once (from the terminal and from npm) is one SIGINT for the daemon, a clean stop. Needs `npm run build`.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, cleanEnv } from '../helpers/cli.js';
import { removeTempDirs, tempDir } from './_fixtures.js';

afterAll(removeTempDirs);

describe('scripts/start.mjs (npm start)', () => {
  it('prints the store, the jobs folder with its job count and the status page URL, starts the daemon, and stops it cleanly on a doubled SIGINT', async () => {
    const dir = tempDir('cron-unit-start-');
    const jobsDir = join(dir, 'jobs');
    mkdirSync(jobsDir);
    cpSync(join(ROOT, 'jobs', 'heartbeat.ts'), join(jobsDir, 'heartbeat.ts'));
    cpSync(join(ROOT, 'jobs', 'order-sync.ts'), join(jobsDir, 'order-sync.ts'));
    // A body in flight when Ctrl-C comes, so that a second SIGINT would be seen ("interrupting in-flight runs now").
    writeFileSync(join(jobsDir, 'slow.mjs'), "export default { schedule: '* * * * * *', async run(ctx) { ctx.log.info('slow body began'); await new Promise((r) => setTimeout(r, 1500)); return 'done'; } };\n");
    const store = join(dir, 'data', 'scheduler.db');
    const child = spawn(process.execPath, [join(ROOT, 'scripts', 'start.mjs')], {
      cwd: dir,
      env: cleanEnv({ SCHEDULER_STORE: `sqlite:${store}`, SCHEDULER_JOBS_DIR: jobsDir, SCHEDULER_LOG_LEVEL: 'info', CLUSTER_CRON_START_NO_PREPARE: '1' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const killer = setTimeout(() => child.kill('SIGKILL'), 40_000);
    const deadline = Date.now() + 30_000;
    while (!/"job":"slow"[^\n]*"slow body began"/.test(out) && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(out, out).toMatch(/"job":"slow"[^\n]*"slow body began"/);

    const summary = out.split('\n').filter((l) => l.startsWith('quick start: '));
    expect(summary.join('\n')).not.toMatch(/npm ci|npm run build/);
    expect(summary).toContain(`quick start: store: SQLite, ./data/scheduler.db`);
    expect(summary).toContain('quick start: jobs folder: ./jobs: 3 jobs (heartbeat, order-sync, slow)');
    // The built-in default address (a daemon of another test may hold it: the daemon then warns and runs on).
    expect(summary.find((l) => l.startsWith('quick start: status page: '))).toMatch(/^quick start: status page: http:\/\/127\.0\.0\.1:9464\/ /);

    // Ctrl-C: the terminal's SIGINT and npm's forwarded one, a few ms apart.
    child.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 30));
    child.kill('SIGINT');
    const code = await exited;
    clearTimeout(killer);
    expect(code, out).toBe(0);
    expect(out.match(/"shutdown requested"/g), out).toHaveLength(1);
    expect(out).not.toContain('second signal');
    expect(out).toContain('"msg":"stopped"');
    expect(out, 'the body in flight finished within the grace period').toMatch(/"job":"slow"[^\n]*"status":"succeeded"/);
  }, 60_000);

  it('refuses to start on a bad setting with the one line naming it', async () => {
    const child = spawn(process.execPath, [join(ROOT, 'scripts', 'start.mjs')], {
      cwd: tempDir('cron-unit-start-'),
      env: cleanEnv({ SCHEDULER_STORE: 'ftp://nowhere', CLUSTER_CRON_START_NO_PREPARE: '1' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(code).not.toBe(0);
    expect(err).toContain('SCHEDULER_STORE');
  }, 30_000);
});
