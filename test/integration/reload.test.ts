/**
 * Reload on SIGHUP as an operator does it (`systemctl reload`, `kill -HUP`): one daemon, its jobs
 * folder edited while a run is in flight, then a config file whose store changed.
 */
import { writeFileSync, rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { jobSource, type Effect } from '../helpers/job-sources.js';
import { waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';
import type { Workspace } from '../helpers/workspace.js';
import type { Daemon } from '../helpers/cli.js';
import { waitForLog } from './cluster-scenario.js';

const { workspace, start, history } = singleNode('cron-reload-', 'reload-node');

const effects = (ws: Workspace, job: string, event = 'start') => ws.records<Effect>('effects.jsonl').filter((e) => e.job === job && e.event === event);
/** A CommonJS job file (Node caches it by file name, whatever the URL it is imported under). */
const commonJsJob = (event: string) => `const { appendFileSync } = require('node:fs');
module.exports = { schedule: '* * * * * *', catchUp: '5s', run(ctx) {
  appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ event: '${event}', job: ctx.job, periodKey: ctx.periodKey, scheduledAt: ctx.scheduledAt.toISOString(), at: Date.now() }) + '\\n');
} };
`;
/** What the daemon's HTTP server shows of the jobs: /api/jobs' names and the jobs of /metrics' scheduler_runs_total. */
async function views(d: Daemon): Promise<{ api: string[]; metrics: string }> {
  const url = await waitFor('http server listening', () => d.logs().find((l) => l.msg === 'http server listening')?.url as string | undefined, 60_000);
  const api = (await (await fetch(`${url}/api/jobs`)).json()) as { jobs: Array<{ name: string }> };
  return { api: api.jobs.map((j) => j.name), metrics: await (await fetch(`${url}/metrics`)).text() };
}
const runsSeries = (metrics: string, job: string) => metrics.split('\n').filter((l) => l.startsWith(`scheduler_runs_total{job_name="${job}",`));
const logLines = (d: Daemon, pattern: RegExp) => d.logs().filter((l) => typeof l.msg === 'string' && pattern.test(l.msg));

/** Sends SIGHUP and waits for the reload's summary (the n-th 'reload done' line) or its refusal. */
async function reload(d: Daemon, until: RegExp, count: number): Promise<Record<string, unknown>> {
  d.proc.kill('SIGHUP');
  return waitFor(`reload ${count} to end`, () => logLines(d, until)[count - 1] ?? false, 60_000);
}

describe('reload on SIGHUP', () => {
  it('applies added, removed, changed and broken job files without dropping the run in flight; refuses a changed store', async () => {
    const ws = workspace();
    const release = ws.path('release');
    const configFile = ws.path('scheduler.json');
    writeFileSync(configFile, JSON.stringify({ store: ws.sqliteStore() }));
    // The run in flight at the SIGHUP waits for the test; its file is edited meanwhile.
    ws.writeJob('long.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`, `await waitForFile(ctx, ${JSON.stringify(release)}); record(ctx, 'finished'); return 'v1';`));
    ws.writeJob('steady.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    ws.writeJob('gone.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    ws.writeJob('in-worker.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s', isolation: 'worker',`, `record(ctx, 'v1');`));
    ws.writeJob('legacy.js', commonJsJob('v1'));
    ws.writeJob('rescheduled.mjs', jobSource(`schedule: '@yearly', catchUp: '5s',`));
    // SIGHUP alone reloads here (the watch would reload at each edit: test/integration/watch.test.ts).
    const d = start(ws, { SCHEDULER_STORE: '', SCHEDULER_CONFIG: configFile, SCHEDULER_HTTP: '127.0.0.1:0', SCHEDULER_WATCH: 'off' });
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    const [inFlight] = await waitFor('the long run to start', () => {
      const s = effects(ws, 'long');
      return s.length > 0 ? s : false;
    }, 30_000);
    await waitFor('the worker job to run', () => effects(ws, 'in-worker', 'v1').length > 0, 30_000);
    await waitFor('the CommonJS job to run', () => effects(ws, 'legacy', 'v1').length > 0, 30_000);
    const before = await views(d);
    expect(before.api).toContain('gone');
    expect(before.api).not.toContain('added');
    expect(runsSeries(before.metrics, 'gone')).not.toEqual([]);

    // The edits of one reload: a changed .mjs (code), a new file, a removed one, one broken on purpose,
    // a new invalid file, and the worker job's code.
    ws.writeJob('long.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`, `record(ctx, 'v2'); return 'v2';`));
    ws.writeJob('added.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    rmSync(ws.path('jobs', 'gone.mjs'));
    ws.writeJob('steady.mjs', `export default { schedule: '* * * * * *', run( {} };\n`);
    ws.writeJob('new-bad.mjs', `export default { schedule: '61 * * * *', run() {} };\n`);
    ws.writeJob('in-worker.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s', isolation: 'worker',`, `record(ctx, 'v2');`));
    ws.writeJob('legacy.js', commonJsJob('v2'));
    // A schedule changed: from the reload on, none of the new schedule's earlier periods is owed.
    ws.writeJob('rescheduled.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    // And settings: one that applies live, one that waits for the next restart.
    writeFileSync(configFile, JSON.stringify({ store: ws.sqliteStore(), gracePeriod: '5s', maxResultSize: '2MB' }));
    const hupAt = Date.now();
    const done = await reload(d, /^reload done/, 1);
    const doneAt = Date.parse(String(done.time));
    expect(done).toMatchObject({ added: 1, removed: 1, changed: 4, kept: 1, invalidFiles: 2 });
    // The views follow: the added job listed with its series (at 0 or more), the removed one gone from both.
    const after = await views(d);
    expect(after.api).toContain('added');
    expect(after.api).not.toContain('gone');
    expect(after.metrics).toMatch(/^scheduler_runs_total\{job_name="added",status="succeeded"\} \d+$/m);
    expect(runsSeries(after.metrics, 'gone')).toEqual([]);
    expect(after.metrics).not.toContain('job_name="gone"');

    // One line per added, removed and changed job, naming it.
    expect(logLines(d, /^job added: /).map((l) => l.job)).toEqual(['added']);
    expect(logLines(d, /^job removed: /).map((l) => l.job)).toEqual(['gone']);
    expect(logLines(d, /^job changed: /).map((l) => [l.job, l.msg])).toEqual([['in-worker', 'job changed: in-worker: code'], ['legacy', 'job changed: legacy: code'], ['long', 'job changed: long: code'], ['rescheduled', expect.stringMatching(/^job changed: rescheduled: schedule @yearly → \* \* \* \* \* \*/)]]);
    // The broken file: one error line naming it and its problem; its job keeps its previous definition.
    const errors = d.logs().filter((l) => l.level === 'error');
    const steadyLines = errors.filter((l) => String(l.msg).includes('steady.mjs'));
    expect(steadyLines).toHaveLength(1);
    expect(steadyLines[0]!.msg).toMatch(/cannot be loaded: .*previous definition of 'steady' stays scheduled/);
    expect(errors.filter((l) => String(l.msg).includes('new-bad.mjs')).map((l) => l.msg)).toEqual([expect.stringContaining("field 'schedule'")]);
    expect(logLines(d, /^settings /).map((l) => l.msg)).toEqual(['settings applied: gracePeriod (30s → 5s)', 'settings changed that apply at the next restart: maxResultSize (1MB → 2MB)']);

    // The run in flight goes on: released now, it ends succeeded with its old code, its side effect once.
    writeFileSync(release, '');
    await waitFor('the new code of long to run', () => effects(ws, 'long', 'v2').length > 0, 30_000);
    await waitFor('the added job to run twice', () => effects(ws, 'added').length >= 2, 30_000);
    await waitFor('steady to run after the reload', () => effects(ws, 'steady').some((e) => Date.parse(e.scheduledAt) > doneAt + 1000), 30_000);
    await waitFor('the worker job to run its new code', () => effects(ws, 'in-worker', 'v2').length > 0, 30_000);
    await waitFor('the CommonJS job to run its new code', () => effects(ws, 'legacy', 'v2').length > 0, 30_000);
    await waitFor('the rescheduled job to run twice', () => effects(ws, 'rescheduled').length >= 2, 30_000);
    expect(effects(ws, 'rescheduled').filter((e) => Date.parse(e.scheduledAt) <= hupAt)).toEqual([]);
    const finished = effects(ws, 'long', 'finished');
    expect(finished.map((e) => e.periodKey)).toEqual([inFlight!.periodKey]);
    expect(effects(ws, 'long').filter((e) => e.periodKey === inFlight!.periodKey)).toHaveLength(1);
    const runs = await history(ws);
    expect(runs.find((r) => r.periodKey === inFlight!.periodKey)).toMatchObject({ status: 'succeeded', result: 'v1' });
    // The new code writes the new side effect; the old code no longer runs.
    expect(effects(ws, 'long', 'v2').every((e) => Date.parse(e.scheduledAt) > Date.parse(inFlight!.scheduledAt))).toBe(true);
    expect(effects(ws, 'legacy', 'v1').filter((e) => Date.parse(e.scheduledAt) > doneAt + 1000)).toEqual([]);
    // The removed job: no period after the reload.
    expect(effects(ws, 'gone').filter((e) => Date.parse(e.scheduledAt) > doneAt + 1000)).toEqual([]);
    // Nor a series brought back by a late event of it.
    expect((await views(d)).metrics).not.toContain('job_name="gone"');

    // A changed store in the config file: refused with one line (password redacted), nothing reloaded.
    writeFileSync(configFile, JSON.stringify({ store: 'postgres://cron:s3cret-Pa55@127.0.0.1:5432/elsewhere' }));
    ws.writeJob('not-yet.mjs', jobSource(`schedule: '* * * * * *', catchUp: '5s',`));
    const refused = await reload(d, /^reload refused: /, 1);
    expect(refused.msg).toMatch(/^reload refused: store changed \(sqlite:.*scheduler\.db → postgres:\/\/cron:\*+@127\.0\.0\.1:5432\/elsewhere\); restart the daemon to apply it; nothing was reloaded, jobs included$/);
    expect(d.output).not.toContain('s3cret-Pa55');
    const refusedAt = Date.parse(String(refused.time));
    // Still running on the old store, with the old jobs.
    await waitFor('a run recorded in the old store after the refusal', async () => (await history(ws)).some((r) => r.job === 'added' && r.status === 'succeeded' && Date.parse(r.scheduledAt) > refusedAt + 1000), 30_000);
    expect(effects(ws, 'not-yet')).toEqual([]);
    expect(logLines(d, /^reload done/)).toHaveLength(1);

    expect(await d.stop('SIGTERM'), d.errors).toBe(0);
    // The grace period of the reload that was applied.
    expect(logLines(d, /^shutdown requested$/).map((l) => l.gracePeriod)).toEqual(['5s']);
  });
});
