/**
 * What the daemon prints for people: under a terminal (a pseudo-terminal from `script`) a start-up
 * summary and one line per run outcome, the period in the job's zone; in JSON, an uncaught error
 * thrown by a job body's stray callback names the job, and the daemon goes on.
 */
import { describe, expect, it } from 'vitest';
import { BIN, Daemon } from '../helpers/cli.js';
import { jobSource } from '../helpers/job-sources.js';
import { waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';
import { waitForLog } from './cluster-scenario.js';

const { workspace, envOf, start, cleanup } = singleNode('cron-output-', 'output-node');

// Wall-clock fields of an instant in a zone, as the run line prints them.
function shanghai(iso: string): string {
  const d = new Date(Date.parse(iso) + 8 * 3_600_000);
  return d.toISOString().slice(0, 19).replace('T', ' ');
}

describe.concurrent('daemon output', () => {
  it('under a terminal: a few summary lines, one line per run outcome in the job\'s zone, no per-run log lines', async () => {
    const ws = workspace();
    ws.writeJob('shanghai-tick.mjs', jobSource(`schedule: '*/2 * * * * *', timezone: 'Asia/Shanghai', catchUp: '1s',`, `return 1;`));
    ws.writeJob('always-fails.mjs', jobSource(`schedule: '*/2 * * * * *', catchUp: '1s',`, `throw new Error('no luck today');`));
    ws.writeJob('stray-throw.mjs', jobSource(`schedule: '*/2 * * * * *', catchUp: '1s',`, `setTimeout(() => { throw new TypeError('boom'); }, 10); return 'returned';`));
    // Port 0: the kernel picks a free port when the daemon binds (a port from freePort() may be taken
    // by another process of the machine before the daemon binds it); the summary shows the real one.
    // `script` gives the daemon a terminal for stdout; it ends the daemon when it is signalled.
    const shell = `exec script -qfec "${process.execPath} ${BIN} $*" /dev/null`;
    const d = new Daemon([], { cwd: ws.dir, env: envOf(ws, { SCHEDULER_HTTP: '127.0.0.1:0', NO_COLOR: '1' }), command: ['sh', '-c', shell, 'sh'] });
    cleanup(async () => {
      await d.stop('SIGTERM', 10_000);
    });
    const text = () => d.output.replace(/\r/g, '');
    // What the daemon printed, for a failure message: a timeout alone says nothing of why.
    const explain = () => `exit code ${String(d.proc.exitCode)}${d.proc.signalCode ? ` (signal ${d.proc.signalCode})` : ''}; stderr: ${d.errors.slice(-1500) || '(none)'}; output tail:\n${text().slice(-3000) || '(none)'}`;
    // A run line: time, mark, job, period, status, duration (`850ms`, or `1.2s` for a slow run), then
    // any notes (`(catch-up)`, `(attempt 2)`) and, for a failure, the error.
    const dur = String.raw`(?:\d+ms|\d+\.\ds)`;
    const okLine = new RegExp(String.raw`^\d\d:\d\d:\d\d ✓ shanghai-tick {2}(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) Asia\/Shanghai {2}succeeded {2}${dur}(?: {2}\([^)]*\))?$`, 'm');
    const failedLine = new RegExp(String.raw`^\d\d:\d\d:\d\d ✗ always-fails {2}\S+ \S+ UTC {2}failed {2}${dur}(?: {2}\([^)]*\))?: no luck today$`, 'm');
    // A stray callback's error: one line with its type and message (the stack is in JSON logs).
    const strayLine = /^\d\d:\d\d:\d\d ERROR: uncaught exception from the body of job stray-throw; the daemon keeps running \{.*"err":"TypeError: boom"\}$/m;
    let runLine: RegExpExecArray;
    try {
      runLine = await waitFor('a run line of each job', () => {
        if (d.proc.exitCode !== null || d.proc.signalCode !== null) return 'exited' as const;
        const ok = okLine.exec(text());
        return ok && failedLine.test(text()) && strayLine.test(text()) ? ok : false;
      }, 60_000).then((r) => {
        if (r === 'exited') throw new Error('the daemon (under script) exited before printing a run line of each job');
        return r;
      });
    } catch (err) {
      throw new Error(`${(err as Error).message}; ${explain()}`);
    }
    // The period is shown in Shanghai's wall-clock time: the body saw the same period in UTC.
    const periods = ws.records<{ job: string; scheduledAt: string }>('effects.jsonl').filter((e) => e.job === 'shanghai-tick').map((e) => shanghai(e.scheduledAt));
    expect(periods).toContain(runLine[1]);

    const lines = text().split('\n');
    const first = lines.findIndex((l) => l.includes('cluster-cron starting on node output-node'));
    expect(first, text()).toBeGreaterThanOrEqual(0);
    expect(lines.slice(first + 1, first + 5).map((l) => l.trim())).toEqual([
      `store:       SQLite ${ws.path('scheduler.db')}`,
      'redis:       none (claims rest on the run row)',
      `jobs:        3 jobs in ${ws.jobsDir}`,
      expect.stringMatching(/^status page: http:\/\/127\.0\.0\.1:[1-9]\d*\/$/),
    ]);
    // Neither the configuration dump nor the per-run info lines, and every line is one line (no stack).
    for (const gone of ['daemon starting', 'scheduler started', 'run started', 'run succeeded', 'run failed', '"gracePeriodMs"']) expect(text(), gone).not.toContain(gone);
    expect(lines.filter((l) => l.startsWith(' ') && !/^ {9}\w[\w ]*: /.test(l)), text()).toEqual([]);
  });

  it('an error thrown by a body\'s stray callback is one log line naming the job and period; the other jobs go on', async () => {
    const ws = workspace();
    ws.writeJob('stray-throw.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`, `setTimeout(() => { throw new TypeError('boom'); }, 10); return 'returned';`));
    ws.writeJob('steady.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`, `return 'ok';`));
    const d = start(ws);
    const uncaught = await waitForLog(d, 'the stray error to be logged', 'uncaught exception from the body of job stray-throw; the daemon keeps running');
    expect(uncaught).toMatchObject({ level: 'error', job: 'stray-throw', periodKey: expect.stringMatching(/^stray-throw@/), attempt: 1, err: { type: 'TypeError', message: 'boom', stack: expect.stringMatching(/^TypeError: boom\n\s+at /) } });
    // One line per throw: each period's callback throws once.
    const ofPeriod = d.logs().filter((l) => l.level === 'error' && l.periodKey === uncaught.periodKey);
    expect(ofPeriod).toHaveLength(1);
    expect(d.logs().filter((l) => String(l.msg).startsWith('uncaught exception (from a job body?)'))).toEqual([]);
    // The daemon goes on: the steady job runs a period later than the throw.
    const thrownAt = Date.parse(String(uncaught.time));
    await waitFor('a later steady run', () => d.logs().some((l) => l.msg === 'run succeeded' && l.job === 'steady' && Date.parse(String(l.scheduledAt ?? l.time)) > thrownAt), 30_000);
    expect(d.proc.exitCode).toBeNull();
  });
});
