/**
 * Alerts as an operator sees them: a real HTTP receiver (node:http, in the test) and real daemons on
 * one store. A failed period is POSTed once, after its last attempt, whichever node delivers it and
 * however often the receiver refused it; a missed period is POSTed; the job's onFailure is called
 * once; the webhook's secrets never reach the logs; a bad webhook URL stops the start (exit 2).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
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

  it('an alert owed by a node killed before it could deliver is delivered by another node, with the same id', async () => {
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

  it('node alerts: this node losing and regaining its Redis quorum is POSTed from memory (redis_lost, then redis_back)', async () => {
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

  it('run-once: a period that fails there alerts too (delivered before the process exits) and calls onFailure', async () => {
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

  it('a bad webhook URL or token is refused at start: exit 2, one line naming the setting, secrets redacted', async () => {
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
