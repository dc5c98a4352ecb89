/**
 * The daemon's terminal lines, as pure functions: the run line of a run-finished event, the start-up
 * summary (never a password), and which log lines a terminal shows at info.
 */
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loggerOptions } from '../../src/log-options.js';
import { loadConfig } from '../../src/config/config.js';
import { RunLineObserver, TerminalOutput, runLine, shortDuration, skipLine } from '../../src/output/terminal.js';
import { startupSummary, storeWhere } from '../../src/output/summary.js';

const now = new Date('2026-12-01T06:00:02Z');
const finished = {
  type: 'run-finished' as const, job: 'nightly-report', periodKey: 'nightly-report@2026-12-01T06:00:00.000Z', scheduledAt: new Date('2026-12-01T06:00:00Z'),
  attempt: 1, trigger: 'schedule' as const, runId: '7', status: 'succeeded' as const, reason: null, durationMs: 1234, error: null,
  recorded: true, final: true, nextAttempt: null,
};

describe('run line', () => {
  it('names the job, the period in its zone, the status and the duration', () => {
    expect(runLine(finished, 'Asia/Shanghai', now)).toBe('✓ nightly-report  2026-12-01 14:00 Asia/Shanghai  succeeded  1.2s');
    // A period with seconds shows them.
    expect(runLine({ ...finished, scheduledAt: new Date('2026-12-01T06:00:10Z') }, 'UTC', now)).toBe('✓ nightly-report  2026-12-01 06:00:10 UTC  succeeded  1.2s');
  });

  it('a failure owing a retry says when, with the first line of its error; a manual, later, unrecorded attempt says so', () => {
    const failed = { ...finished, status: 'failed' as const, durationMs: 310, error: 'Error: upstream refused\n    at x', final: false, nextAttempt: { attempt: 2, runAt: new Date('2026-12-01T06:00:32Z') } };
    expect(runLine(failed, 'UTC', now)).toBe('✗ nightly-report  2026-12-01 06:00 UTC  failed  310ms  (attempt 2 due in 30s): Error: upstream refused');
    const other = { ...finished, trigger: 'manual' as const, attempt: 3, status: 'abandoned' as const, recorded: false, error: 'lease lost' };
    expect(runLine(other, 'UTC', now)).toBe('✗ nightly-report  2026-12-01 06:00 UTC  abandoned  1.2s  (manual, attempt 3, not recorded): lease lost');
  });

  it('a paused or overlapping skip is a run line too; several periods at once say how many', () => {
    const skipped = { type: 'skipped' as const, job: 'nightly-report', reason: 'paused' as const, count: 1, first: new Date('2026-12-01T06:00:00Z'), last: new Date('2026-12-01T06:00:00Z') };
    expect(skipLine(skipped, 'Asia/Shanghai')).toBe('- nightly-report  2026-12-01 14:00 Asia/Shanghai  skipped  (paused)');
    expect(skipLine({ ...skipped, reason: 'overlap', first: new Date('2026-12-01T06:00:05Z'), last: new Date('2026-12-01T06:00:05Z') }, 'UTC')).toBe('- nightly-report  2026-12-01 06:00:05 UTC  skipped  (overlap: a run is in flight)');
    expect(skipLine({ ...skipped, reason: 'calendar' }, 'Asia/Shanghai')).toBe('- nightly-report  2026-12-01 14:00 Asia/Shanghai  skipped  (calendar: an excluded date)');
    expect(skipLine({ ...skipped, count: 3, last: new Date('2026-12-01T06:02:00Z') }, 'UTC')).toBe('- nightly-report  3 periods 2026-12-01 06:00 to 2026-12-01 06:02 UTC  skipped  (paused)');
  });

  it('durations read short', () => {
    expect([850, 1234, 59_949, 125_000, 7_380_000].map(shortDuration)).toEqual(['850ms', '1.2s', '59.9s', '2m05s', '2h03m']);
  });
});

describe('start-up summary', () => {
  const config = (flags: Record<string, string>) => loadConfig({ env: {}, cwd: tmpdir(), flags: { nodeId: 'web-1', jobsDir: '/srv/jobs', ...flags } });

  it('says where the data is without the password, the Redis masters, the jobs and the status page', () => {
    const c = config({ store: 'mysql://cron:s3cret@db.internal:3306/scheduler', redis: 'redis://:pw@r1:6379,redis://r2:6379,redis://r3:6379', http: '0.0.0.0:8080' });
    const lines = startupSummary(c, { jobs: 3, invalidFiles: 1 });
    expect(lines).toEqual([
      'cluster-cron starting on node web-1',
      'store:       MySQL/MariaDB db.internal:3306/scheduler',
      'redis:       3 masters',
      'jobs:        3 jobs in /srv/jobs, 1 invalid file (above)',
      'status page: http://0.0.0.0:8080/',
    ]);
    expect(lines.join('\n')).not.toMatch(/s3cret|pw|cron:/);
    expect(storeWhere(config({ store: 'postgres://postgres@127.0.0.1:5432/cron' }).store)).toBe('PostgreSQL 127.0.0.1:5432/cron');
    expect(startupSummary(config({ store: 'sqlite:/var/lib/cron/s.db' }), { jobs: 1, invalidFiles: 0 }).slice(1)).toEqual([
      'store:       SQLite /var/lib/cron/s.db', 'redis:       none (claims rest on the run row)', 'jobs:        1 job in /srv/jobs', 'status page: http://127.0.0.1:9464/',
    ]);
    expect(startupSummary(config({ http: 'off' }), { jobs: 1, invalidFiles: 0 }).at(-1)).toBe('status page: off');
    // The token is never shown; that one is needed is (the `http server listening` line is at debug here).
    expect(startupSummary(config({ httpToken: 's3cret-token' }), { jobs: 1, invalidFiles: 0, listening: 'http://127.0.0.1:40123' }).at(-1)).toBe('status page: http://127.0.0.1:40123/ (bearer token on / and /api)');
    expect(startupSummary(config({}), { jobs: 1, invalidFiles: 0, listening: 'http://127.0.0.1:40123' }).at(-1)).toBe('status page: http://127.0.0.1:40123/');
    expect(startupSummary(config({}), { jobs: 1, invalidFiles: 0, listening: null }).at(-1)).toBe('status page: off (its address is in use: see the warning above)');
  });
});

describe('terminal destination', () => {
  it('shows the per-run lines only at debug, every other line as one line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'terminal-'));
    try {
      const file = join(dir, 'out');
      const fd = openSync(file, 'w');
      let level = 30;
      const out = new TerminalOutput({ fd, colorize: false, levelValue: () => level, demoteRunLines: true });
      const line = (msg: string, extra: Record<string, unknown> = {}) => `${JSON.stringify({ level: 'info', time: '2026-12-01T06:00:00.000Z', node: 'web-1', msg, ...extra })}\n`;
      out.write(line('run started', { job: 'a' }));
      out.write(line('run failed', { job: 'a', level: 'warn' }));
      out.write(line('cluster heartbeat', { job: 'a', attempt: 1 }));
      // Said by a run line (a skip) or by the start-up summary (the address).
      out.write(line('period skipped: the job is paused', { job: 'a', reason: 'maintenance' }));
      out.write(line('http server listening', { url: 'http://127.0.0.1:9464', auth: 'none' }));
      // The run line of a skip, through the observer the daemon adds.
      const period = new Date('2026-12-01T06:00:00Z');
      new RunLineObserver(out, () => 'UTC').emit({ type: 'skipped', job: 'a', reason: 'paused', count: 1, first: period, last: period });
      level = 20;
      out.write(line('run succeeded', { job: 'a' }));
      closeSync(fd);
      const text = readFileSync(file, 'utf8');
      const lines = text.trimEnd().split('\n');
      expect(lines, text).toHaveLength(3);
      expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d INFO: cluster heartbeat \{"job":"a","attempt":1\}$/);
      expect(lines[1]).toMatch(/^\d\d:\d\d:\d\d - a {2}2026-12-01 06:00 UTC {2}skipped {2}\(paused\)$/);
      expect(lines[2]).toMatch(/^\d\d:\d\d:\d\d DEBUG: run succeeded \{"job":"a"\}$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('shows an error as its first line inline, with its type; its stack only at debug', () => {
    const dir = mkdtempSync(join(tmpdir(), 'terminal-'));
    try {
      const file = join(dir, 'out');
      const fd = openSync(file, 'w');
      let level = 30;
      const log = pino(loggerOptions('debug'), new TerminalOutput({ fd, colorize: false, levelValue: () => level, demoteRunLines: true }));
      const err = new TypeError('boom\nsecond line of the message');
      log.error({ job: 'stray-throw', err }, 'uncaught exception from the body of job stray-throw; the daemon keeps running');
      log.error({ err: new Error('Error: already named') }, 'plain');
      level = 20;
      log.error({ job: 'stray-throw', err }, 'at debug');
      closeSync(fd);
      const text = readFileSync(file, 'utf8');
      const lines = text.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d ERROR: uncaught exception from the body of job stray-throw; the daemon keeps running \{"job":"stray-throw","err":"TypeError: boom"\}$/);
      expect(lines[1]).toMatch(/ ERROR: plain \{"err":"Error: already named"\}$/);
      // At debug the stack is there to read, on the lines under it.
      expect(lines[2]).toMatch(/ ERROR: at debug/);
      expect(lines.slice(3).join('\n')).toMatch(/TypeError: boom[\s\S]*\n\s+at /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
