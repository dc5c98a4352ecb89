/**
 * Alerts as an operator sees them: a real HTTP receiver (node:http, in the test) and real daemons on
 * one store. A failed period is POSTed once, after its last attempt, whichever node delivers it and
 * however often the receiver refused it; a missed period is POSTed; the job's onFailure is called
 * once; the webhook's secrets never reach the logs; a bad webhook URL stops the start (exit 2).
 * Side by side: a timed-out period, a period abandoned with no attempt left, the store cut off and
 * back, a webhook that does not answer (retried until a later try gets an answer), and a hanging
 * webhook that never delays a run.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { KnexRunStore } from '../../src/store/runs.js';
import { periodKey } from '../../src/time/schedule.js';
import { StoreProxy } from '../fault/harness.js';
import { runCli } from '../helpers/cli.js';
import { createMariaDb } from '../helpers/databases.js';
import type { Effect } from '../helpers/job-sources.js';
import { jobSource } from '../helpers/job-sources.js';
import { freePort, RedisServer, waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';
import { waitForLog } from './cluster-scenario.js';

const { workspace, start, history, cleanup } = singleNode('cron-alerts-', 'alerts-a');

interface Received {
  status: number;
  headers: IncomingHttpHeaders;
  body: { kind: string; job: string | null; period: string | null; periodKey: string | null; attempt: number | null; status: string | null; error: string | null; count: number; node: string; at: string; id: string };
}

/** A webhook receiver that answers 500 for `refuseMs` after the first request, then 200. */
async function receiver(refuseMs: number): Promise<{ url: string; received: Received[]; accept(): void }> {
  const received: Received[] = [];
  let refuseUntil: number | undefined;
  const server: Server = createServer((req, res) => {
    let text = '';
    req.on('data', (d) => (text += d));
    req.on('end', () => {
      refuseUntil ??= Date.now() + refuseMs;
      const status = Date.now() < refuseUntil ? 500 : 200;
      received.push({ status, headers: req.headers, body: JSON.parse(text) as Received['body'] });
      res.statusCode = status;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as { port: number };
  // The path and the query carry secrets, as Slack-style and ?token= webhooks do.
  return { url: `http://127.0.0.1:${port}/hooks/PATHSECRET42?key=QUERYSECRET42`, received, accept: () => (refuseUntil = 0) };
}

/**
 * A webhook receiver whose answer to the n-th request (from 0) is `answer(n)`: an HTTP status, or
 * 'hang' (the request is held open and never answered; closed at cleanup).
 */
async function scriptedReceiver(answer: (n: number) => number | 'hang'): Promise<{ url: string; received: Array<Received & { at: number; answer: number | 'hang' }> }> {
  const received: Array<Received & { at: number; answer: number | 'hang' }> = [];
  const held: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    let text = '';
    req.on('data', (d) => (text += d));
    req.on('end', () => {
      const a = answer(received.length);
      received.push({ status: a === 'hang' ? 0 : a, answer: a, at: Date.now(), headers: req.headers, body: JSON.parse(text) as Received['body'] });
      if (a === 'hang') held.push(res);
      else {
        res.statusCode = a;
        res.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  }));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/hook`, received };
}

const TOKEN = 'TOKENSECRET42';

describe('alerts', () => {
  it('two daemons on one store: each failed period POSTed once after its last attempt (through refusals, same id), onFailure once, a missed period POSTed, no secret in the logs', async () => {
    const ws = workspace();
    const hook = await receiver(2000);
    const failUntil = Date.now() + 7000;
    ws.writeJob('flaky.mjs', `import { appendFileSync } from 'node:fs';
export default {
  schedule: '*/3 * * * * *', retries: 1, retryDelay: '500ms', catchUp: '2s',
  async run() {
    if (Date.now() < ${failUntil}) throw new Error('boom: the first line\\nand a second line');
  },
  async onFailure(ctx, outcome) {
    appendFileSync(${JSON.stringify(ws.path('on-failure.jsonl'))}, JSON.stringify({ job: ctx.job, node: ctx.nodeId, ...outcome }) + '\\n');
  },
};
`);
    ws.writeJob('beat.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`));
    const env = { SCHEDULER_ALERT_WEBHOOK: hook.url, SCHEDULER_ALERT_TOKEN: TOKEN };
    const a = start(ws, env);
    const b = start(ws, { ...env, SCHEDULER_NODE_ID: 'alerts-b' });
    await Promise.all([waitForLog(a, 'node a to schedule', 'scheduler started'), waitForLog(b, 'node b to schedule', 'scheduler started')]);

    // Failures stop at failUntil; wait until one refused alert was accepted later.
    await waitFor('a refused alert to be delivered', () => {
      const refused = new Set(hook.received.filter((r) => r.status === 500).map((r) => r.body.id));
      return Date.now() > failUntil + 1500 && hook.received.some((r) => r.status === 200 && refused.has(r.body.id));
    }, 60_000, 200);
    const stoppedAt = Date.now();
    expect(await Promise.all([a.stop(), b.stop()])).toEqual([0, 0]);

    // Down for 4 s: beat's periods meanwhile are missed (catchUp 1s). Node a alone comes back, records
    // them missed, and delivers what the outbox still owes.
    await waitFor('the outage to last 4 s', () => Date.now() > stoppedAt + 4000, 10_000, 100);
    const a2 = start(ws, env);
    const finalFailures = async () => (await history(ws, 'flaky', '--status', 'failed')).filter((r) => r.attempt === 2);
    await waitFor('the missed periods and every failed period to be delivered', async () => {
      const failed = await finalFailures();
      const accepted = new Set(hook.received.filter((r) => r.status === 200).map((r) => r.body.periodKey));
      return hook.received.some((r) => r.status === 200 && r.body.kind === 'missed' && r.body.job === 'beat') && failed.every((f) => accepted.has(f.periodKey));
    }, 60_000, 250);
    expect(await a2.stop()).toBe(0);

    const failed = await finalFailures();
    expect(failed.length).toBeGreaterThan(0);
    const accepted = hook.received.filter((r) => r.status === 200);
    // Exactly one accepted delivery per event, whatever the number of nodes and refusals.
    const perId = new Map<string, number>();
    for (const r of accepted) perId.set(r.body.id, (perId.get(r.body.id) ?? 0) + 1);
    expect([...perId].filter(([, n]) => n !== 1)).toEqual([]);

    const failedAlerts = accepted.filter((r) => r.body.kind === 'failed');
    expect(failedAlerts.map((r) => r.body.periodKey).sort()).toEqual(failed.map((f) => f.periodKey).sort());
    for (const r of failedAlerts) {
      expect(r.body).toMatchObject({ job: 'flaky', attempt: 2, status: 'failed', error: 'boom: the first line', count: 1 });
      expect(['alerts-a', 'alerts-b']).toContain(r.body.node);
      expect(r.body.period).toBe(r.body.periodKey!.slice('flaky@'.length));
      expect(r.headers['idempotency-key']).toBe(r.body.id);
      expect(r.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(r.headers['content-type']).toBe('application/json');
    }
    // Never after a first attempt that a retry followed.
    expect(hook.received.filter((r) => r.body.kind === 'failed' && r.body.attempt !== 2)).toEqual([]);
    // A refused alert came again with the same id, and was accepted once.
    const refusedIds = new Set(hook.received.filter((r) => r.status === 500).map((r) => r.body.id));
    expect(refusedIds.size).toBeGreaterThan(0);
    for (const id of refusedIds) expect(perId.get(id), id).toBe(1);

    // Missed: one POST per event, counting every missed row of the job.
    const missedRows = (await history(ws, 'beat', '--status', 'skipped')).filter((r) => r.reason === 'missed');
    const missedAlerts = accepted.filter((r) => r.body.kind === 'missed' && r.body.job === 'beat');
    expect(missedRows.length).toBeGreaterThan(0);
    expect(missedAlerts.reduce((n, r) => n + r.body.count, 0)).toBe(missedRows.length);
    for (const r of missedAlerts) expect(r.body).toMatchObject({ status: 'skipped', attempt: null });
    expect(missedAlerts.map((r) => r.body.period).sort()[0]).toBe(missedRows.map((r) => r.scheduledAt).sort()[0]);

    // onFailure: once per failed period, with its outcome.
    const calls = ws.records<{ job: string; node: string; status: string; error: string; attempt: number; periodKey: string; period: string }>('on-failure.jsonl');
    expect(calls.map((c) => c.periodKey).sort()).toEqual(failed.map((f) => f.periodKey).sort());
    for (const c of calls) {
      expect(c).toMatchObject({ job: 'flaky', status: 'failed', attempt: 2, error: 'boom: the first line\nand a second line' });
      expect(c.period).toBe(c.periodKey.slice('flaky@'.length));
    }

    // The daemons logged the deliveries, and never a secret.
    expect(a.logs().some((l) => l.msg === 'alert not delivered; trying again later') || b.logs().some((l) => l.msg === 'alert not delivered; trying again later')).toBe(true);
    for (const d of [a, b, a2]) {
      const all = d.output + d.errors;
      for (const secret of ['PATHSECRET42', 'QUERYSECRET42', TOKEN]) expect(all.includes(secret), secret).toBe(false);
    }
    expect(a.logs().find((l) => l.msg === 'daemon starting')).toMatchObject({ config: { alertWebhook: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/\*\*\*$/), alertToken: '***' } });
  }, 180_000);

  // The cases below side by side (it.concurrent): each has its own workspace, receiver and (Redis)
  // server, and none judges time tightly. The two-daemon case above, whose failures must fall in its
  // first 7 s, runs alone.
  it.concurrent('an alert owed by a node killed before it could deliver is delivered by another node, with the same id', async () => {
    const ws = workspace();
    const hook = await receiver(600_000);
    // Only its first period fails: one alert.
    const marker = ws.path('failed-once');
    ws.writeJob('flaky.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`,
      `if (!existsSync(${JSON.stringify(marker)})) { (await import('node:fs')).writeFileSync(${JSON.stringify(marker)}, ''); throw new Error('down'); }`));
    const env = { SCHEDULER_ALERT_WEBHOOK: hook.url };
    const a = start(ws, env);
    // Refused, and due again in 5 s: node a dies meanwhile.
    await waitFor('a refused alert', () => a.logs().some((l) => l.msg === 'alert not delivered; trying again later'), 30_000, 50);
    a.proc.kill('SIGKILL');
    await a.exited;
    const owed = hook.received.filter((r) => r.status === 500).map((r) => r.body.id);
    hook.accept();
    const b = start(ws, { ...env, SCHEDULER_NODE_ID: 'alerts-b' });
    await waitFor('node b to deliver what node a owed', () => owed.every((id) => hook.received.some((r) => r.status === 200 && r.body.id === id)), 60_000, 100);
    expect(await b.stop()).toBe(0);
    expect(owed.length).toBe(1);
    for (const id of owed) {
      const accepted = hook.received.filter((r) => r.status === 200 && r.body.id === id);
      expect(accepted.length, id).toBe(1);
      // Recorded by node a, delivered by node b (its log says so).
      expect(accepted[0]!.body).toMatchObject({ kind: 'failed', node: 'alerts-a', job: 'flaky' });
      expect(b.logs().some((l) => l.msg === 'alert sent' && l.alert === id)).toBe(true);
    }
  }, 90_000);

  it.concurrent('node alerts: this node losing and regaining its Redis quorum is POSTed from memory (redis_lost, then redis_back)', async () => {
    const ws = workspace();
    const hook = await receiver(0);
    const redis = new RedisServer(await freePort());
    cleanup(() => redis.cleanup());
    await redis.start();
    ws.writeJob('beat.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`));
    const d = start(ws, { SCHEDULER_ALERT_WEBHOOK: hook.url, SCHEDULER_REDIS: redis.url, SCHEDULER_REDIS_PREFIX: `alerts-${process.pid}:` });
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    await redis.stop();
    await waitFor('redis_lost', () => hook.received.some((r) => r.body.kind === 'redis_lost'), 30_000, 100);
    await redis.start();
    await waitFor('redis_back', () => hook.received.some((r) => r.body.kind === 'redis_back'), 30_000, 100);
    expect(await d.stop()).toBe(0);
    const kinds = hook.received.map((r) => r.body.kind);
    expect(kinds).toEqual(['redis_lost', 'redis_back']);
    for (const r of hook.received) {
      expect(r.body).toMatchObject({ job: null, period: null, periodKey: null, attempt: null, status: null, count: 1, node: 'alerts-a' });
      expect(r.body.id).toBe(`alerts-a:${r.body.kind}:${r.body.at}`);
      expect(r.headers['idempotency-key']).toBe(r.body.id);
      expect(r.headers.authorization).toBeUndefined();
    }
    expect(hook.received[0]!.body.error).toMatch(/quorum is lost/);
  }, 90_000);

  it.concurrent('run-once: a period that fails there alerts too (delivered before the process exits) and calls onFailure', async () => {
    const ws = workspace();
    const hook = await receiver(0);
    ws.writeJob('broken.mjs', `import { appendFileSync } from 'node:fs';
export default {
  schedule: '0 0 1 1 *',
  async run() { throw new Error('no database'); },
  onFailure(ctx, outcome) { appendFileSync(${JSON.stringify(ws.path('on-failure.jsonl'))}, JSON.stringify(outcome) + '\\n'); },
};
`);
    const r = await runCli(['run-once', 'broken'], { cwd: ws.dir, env: { SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_NODE_ID: 'once-node', SCHEDULER_ALERT_WEBHOOK: hook.url } });
    expect(r.code, r.stderr).toBe(1);
    expect(hook.received.map((x) => [x.status, x.body.kind, x.body.job, x.body.attempt, x.body.error, x.body.node])).toEqual([[200, 'failed', 'broken', 1, 'no database', 'once-node']]);
    expect(ws.records('on-failure.jsonl')).toMatchObject([{ status: 'failed', error: 'no database', attempt: 1, trigger: 'manual', periodKey: hook.received[0]!.body.periodKey }]);
  }, 60_000);

  it.concurrent('onFailure as a named export beside export default: run-once calls it; a file with both a named one and a field is refused by validate with one line', async () => {
    const ws = workspace();
    ws.writeJob('named-hook.mjs', `import { appendFileSync } from 'node:fs';
export default { schedule: '0 0 1 1 *', async run() { throw new Error('named hook, please'); } };
export async function onFailure(ctx, outcome) { appendFileSync(${JSON.stringify(ws.path('on-failure.jsonl'))}, JSON.stringify({ job: ctx.job, ...outcome }) + '\\n'); }
`);
    const env = { SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_NODE_ID: 'once-node' };
    const ok = await runCli(['validate'], { cwd: ws.dir, env });
    expect(ok.code, ok.stderr).toBe(0);
    const r = await runCli(['run-once', 'named-hook'], { cwd: ws.dir, env });
    expect(r.code, r.stderr).toBe(1);
    expect(ws.records('on-failure.jsonl')).toMatchObject([{ job: 'named-hook', status: 'failed', error: 'named hook, please', attempt: 1, trigger: 'manual' }]);

    ws.writeJob('both.mjs', `export default { schedule: '0 0 1 1 *', run() {}, onFailure() {} };
export function onFailure() {}
`);
    const both = await runCli(['validate'], { cwd: ws.dir, env });
    expect(both.code).toBe(2);
    expect(both.stdout.trim().split('\n')).toEqual([expect.stringMatching(/both\.mjs: onFailure is both a named export and a field of the default export: expected one of them \(remove the other\)$/)]);
  }, 60_000);

  it.concurrent('a bad webhook URL or token is refused at start: exit 2, one line naming the setting, secrets redacted', async () => {
    const ws = workspace();
    ws.writeJob('beat.mjs', jobSource(`schedule: '* * * * * *',`));
    const env = { SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: ws.jobsDir };
    const badUrl = await runCli(['run'], { cwd: ws.dir, env: { ...env, SCHEDULER_ALERT_WEBHOOK: 'ftp://bot:PWSECRET@hooks.example.com/T0/SECRETPATH' } });
    expect(badUrl.code).toBe(2);
    expect(badUrl.stderr.trim().split('\n')).toEqual([
      "scheduler: invalid setting SCHEDULER_ALERT_WEBHOOK=ftp://bot:***@hooks.example.com/***: expected an http:// or https:// URL with a host (the alert webhook), or no value for no alerts",
    ]);
    const badFlag = await runCli(['run', '--alert-webhook', 'not a url'], { cwd: ws.dir, env });
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(/^scheduler: invalid setting --alert-webhook=\*\*\*: expected an http/);
    const badToken = await runCli(['run'], { cwd: ws.dir, env: { ...env, SCHEDULER_ALERT_WEBHOOK: 'https://hooks.example.com/x', SCHEDULER_ALERT_TOKEN: 'TOK\nSECRET' } });
    expect(badToken.code).toBe(2);
    expect(badToken.stderr.trim()).toBe('scheduler: invalid setting SCHEDULER_ALERT_TOKEN=***: expected a token of visible characters (sent as Authorization: Bearer <token>)');
    for (const r of [badUrl, badFlag, badToken]) expect(`${r.stdout}${r.stderr}`).not.toMatch(/PWSECRET|SECRETPATH|TOK\nSECRET/);
  }, 60_000);
});

describe.concurrent('alerts: more kinds, a slow webhook', () => {
  it('timed_out: a period past its timeout is POSTed as timed_out, with the recorded status', async () => {
    const ws = workspace();
    const hook = await scriptedReceiver(() => 200);
    ws.writeJob('slow.mjs', jobSource(`schedule: '*/2 * * * * *', timeout: '300ms', catchUp: '1s',`, `await sleep(ctx, 10_000);`));
    const d = start(ws, { SCHEDULER_ALERT_WEBHOOK: hook.url });
    const alert = await waitFor('a timed_out alert', () => hook.received.find((r) => r.body.kind === 'timed_out'), 30_000, 100);
    expect(await d.stop()).toBe(0);
    expect(alert.body).toMatchObject({ job: 'slow', attempt: 1, status: 'timed_out', count: 1, node: 'alerts-a' });
    expect(alert.body.error).toBe('timed out after 300ms');
    expect(alert.body.id).toBe(`timed_out:${alert.body.periodKey}:1`);
    const row = (await history(ws, 'slow')).find((r) => r.periodKey === alert.body.periodKey);
    expect(row).toMatchObject({ status: 'timed_out', attempt: 1 });
    expect(hook.received.filter((r) => r.body.kind === 'failed')).toEqual([]);
  }, 60_000);

  it('abandoned with no attempt left: the third attempt of a period whose nodes stopped heartbeating is taken over, the period failed, one abandoned alert', async () => {
    const ws = workspace();
    const hook = await scriptedReceiver(() => 200);
    ws.writeJob('crashy.mjs', jobSource(`schedule: '0 0 1 1 *', lockTtl: '1s',`));
    // The store as three crashed nodes leave it: attempts 1 and 2 abandoned (taken over), attempt 3
    // running on a node that stopped heartbeating.
    const period = new Date('2026-01-01T00:00:00.000Z');
    const key = periodKey('crashy', period);
    const seed = await KnexRunStore.open({ kind: 'sqlite', path: ws.path('scheduler.db'), url: ws.sqliteStore() });
    try {
      await seed.migrate();
      const first = await seed.insertRun({ job: 'crashy', scheduledAt: period, periodKey: key, attempt: 1, trigger: 'schedule', nodeId: 'crashed-1', leaseMs: 1 });
      if (first.outcome !== 'inserted') throw new Error('setup: attempt 1 not inserted');
      let run = first.run;
      for (const node of ['crashed-2', 'crashed-3']) {
        await new Promise((r) => setTimeout(r, 20));
        const ended = await seed.takeOver(run, 'seeder', 'lease expired (seeded)', true);
        if (!ended?.next) throw new Error(`setup: no attempt owed after ${run.attempt}`);
        const claimed = await seed.claimPending(ended.next.id, node, node === 'crashed-3' ? 1000 : 1);
        if (!claimed) throw new Error(`setup: attempt ${ended.next.attempt} not claimed`);
        run = claimed;
      }
      expect(run.attempt).toBe(3);
    } finally {
      await seed.close();
    }
    const d = start(ws, { SCHEDULER_ALERT_WEBHOOK: hook.url });
    const alert = await waitFor('an abandoned alert', () => hook.received.find((r) => r.body.kind === 'abandoned'), 30_000, 100);
    expect(await d.stop()).toBe(0);
    expect(alert.status).toBe(200);
    expect(alert.body).toMatchObject({
      kind: 'abandoned', job: 'crashy', period: period.toISOString(), periodKey: key, attempt: 3, status: 'failed', count: 1, node: 'alerts-a', id: `abandoned:${key}:3`,
    });
    expect(alert.body.error).toBe('attempt 3 abandoned (node crashed-3 stopped heartbeating) and no attempt is left');
    const rows = (await history(ws, 'crashy')).filter((r) => r.periodKey === key).sort((x, y) => x.attempt - y.attempt);
    expect(rows.map((r) => [r.attempt, r.status])).toEqual([[1, 'abandoned'], [2, 'abandoned'], [3, 'failed']]);
    // One alert for the period, and no body ran (no attempt was left to run).
    expect(hook.received.map((r) => r.body.kind)).toEqual(['abandoned']);
    expect(ws.lines('effects.jsonl')).toEqual([]);
  }, 60_000);

  it('the store cut off and back: store_lost with its cause, then store_back, POSTed from memory by the node', async () => {
    const maria = await createMariaDb('cron_alerts');
    cleanup(() => maria.drop());
    const proxy = new StoreProxy(3306);
    await proxy.start();
    cleanup(() => proxy.close());
    const url = new URL(maria.url);
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const ws = workspace();
    const hook = await scriptedReceiver(() => 200);
    ws.writeJob('yearly.mjs', jobSource(`schedule: '0 0 1 1 *',`));
    const d = start(ws, { SCHEDULER_ALERT_WEBHOOK: hook.url, SCHEDULER_STORE: url.toString() });
    await waitForLog(d, 'the daemon to schedule', 'scheduler started');
    await proxy.cut();
    const lost = await waitFor('store_lost', () => hook.received.find((r) => r.body.kind === 'store_lost'), 30_000, 100);
    await proxy.restore();
    const back = await waitFor('store_back', () => hook.received.find((r) => r.body.kind === 'store_back'), 30_000, 100);
    expect(await d.stop()).toBe(0);
    expect(hook.received.map((r) => r.body.kind)).toEqual(['store_lost', 'store_back']);
    for (const r of [lost, back]) {
      expect(r.body).toMatchObject({ job: null, period: null, periodKey: null, attempt: null, status: null, count: 1, node: 'alerts-a' });
      expect(r.body.id).toBe(`alerts-a:${r.body.kind}:${r.body.at}`);
    }
    expect(lost.body.error).toBeTruthy();
    expect(back.body.error).toBeNull();
    expect(Date.parse(back.body.at)).toBeGreaterThan(Date.parse(lost.body.at));
  }, 60_000);

  it('a webhook that does not answer: the POST times out, the alert is tried again and arrives once a later try gets an answer (same id, once)', async () => {
    const ws = workspace();
    // The first request is never answered; the next ones are.
    const hook = await scriptedReceiver((n) => (n === 0 ? 'hang' : 200));
    const marker = ws.path('failed-once');
    ws.writeJob('once-failing.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`,
      `if (!existsSync(${JSON.stringify(marker)})) { (await import('node:fs')).writeFileSync(${JSON.stringify(marker)}, ''); throw new Error('down once'); }`));
    const d = start(ws, { SCHEDULER_ALERT_WEBHOOK: hook.url });
    await waitFor('the alert to be accepted on a later try', () => hook.received.some((r) => r.answer === 200), 40_000, 100);
    expect(await d.stop()).toBe(0);
    expect(hook.received.map((r) => [r.answer, r.body.kind])).toEqual([['hang', 'failed'], [200, 'failed']]);
    expect(hook.received[1]!.body.id).toBe(hook.received[0]!.body.id);
    expect(hook.received[1]!.body).toMatchObject({ job: 'once-failing', error: 'down once', attempt: 1 });
    // Tried again after the timeout and the first backoff, not at once.
    expect(hook.received[1]!.at - hook.received[0]!.at).toBeGreaterThanOrEqual(5000);
    const notDelivered = d.logs().find((l) => l.msg === 'alert not delivered; trying again later');
    expect(notDelivered).toMatchObject({ attempts: 1, retryInMs: 5000 });
    expect((notDelivered!.err as { message: string }).message).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+\/\*\*\*: no answer within 5000 ms$/);
  }, 60_000);

  it('never delays a run: with a webhook that hangs on every POST and an every-second job failing, another every-second job still starts within 1 s of each instant', async () => {
    const ws = workspace();
    const hook = await scriptedReceiver(() => 'hang');
    ws.writeJob('failing.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`, `throw new Error('always');`));
    ws.writeJob('beat.mjs', jobSource(`schedule: '* * * * * *', catchUp: '1s',`));
    const d = start(ws, { SCHEDULER_ALERT_WEBHOOK: hook.url });
    // From the first hanging POST on, eight periods of beat.
    const firstPost = await waitFor('a first (hanging) POST', () => hook.received[0]?.at, 30_000, 50);
    const beats = () => ws.records<Effect>('effects.jsonl').filter((e) => e.job === 'beat' && e.event === 'start' && Date.parse(e.scheduledAt) > firstPost);
    await waitFor('eight beats after the first POST', () => beats().length >= 8, 30_000, 100);
    expect(await d.stop()).toBe(0);
    // The webhook held several POSTs meanwhile (none was answered).
    expect(hook.received.length).toBeGreaterThan(1);
    expect(hook.received.every((r) => r.answer === 'hang')).toBe(true);
    const late = beats().map((e) => ({ period: e.scheduledAt, delayMs: e.at - Date.parse(e.scheduledAt) })).filter((b) => b.delayMs > 1000 || b.delayMs < -50);
    expect(late).toEqual([]);
    // Every period of beat in that window has its body (none skipped or missed).
    const periods = beats().map((e) => Date.parse(e.scheduledAt)).sort((x, y) => x - y);
    expect(new Set(periods).size).toBe(periods.length);
    expect(periods.at(-1)! - periods[0]!).toBe((periods.length - 1) * 1000);
  }, 60_000);
});

