/**
 * The events seam on a real SQLite runtime (openRuntime, as the daemon builds it): what a recording
 * observer sees for a won and a lost claim, a retried failure, periods missed past catchUp, and the
 * takeover of a stale attempt, a lease lost while the body runs; then a real scheduler on MariaDB
 * (through a TCP proxy that can cut the store off) with three Redis masters of its own: the store going
 * down and back, the Redis quorum degraded, down and whole again, and the clock offset to the store.
 * Metrics, the status page, alerts and the terminal read these events.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { EventBus, RecordingObserver } from '../../src/events/events.js';
import { Scheduler } from '../../src/daemon/scheduler.js';
import { StoreClock } from '../../src/time/store-clock.js';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, type RedisServer } from '../helpers/redis.js';
import { StoreProxy } from '../fault/harness.js';
import type { Job } from '../../src/jobs/types.js';
import { openRuntime, type Runtime } from '../../src/runtime.js';
import { compileSchedule, latestPeriodAtOrBefore, periodKey } from '../../src/time/schedule.js';

const silent = pino({ level: 'silent' });
let dir: string;
const nodes: Array<{ rt: Runtime; seen: RecordingObserver }> = [];

async function node(nodeId: string): Promise<{ rt: Runtime; seen: RecordingObserver }> {
  const config = loadConfig({ env: {}, cwd: dir, flags: { store: `sqlite:${join(dir, 's.db')}`, jobsDir: dir, nodeId } });
  const events = new EventBus(silent);
  const seen = new RecordingObserver();
  events.add(seen);
  const n = { rt: await openRuntime(config, silent, events), seen };
  nodes.push(n);
  return n;
}

function job(name: string, over: Partial<Job> & { expression?: string } = {}): Job {
  const { expression = '* * * * * *', ...rest } = over;
  return {
    name, file: join(dir, `${name}.mjs`), schedule: compileSchedule(expression, 'UTC'), timezone: 'UTC', timeoutMs: null,
    lockTtlMs: 30_000, overlap: 'skip', catchUpMs: 60_000, coalesce: true, retries: 0, retryDelayMs: 30_000, enabled: true,
    run: () => 'done', ...rest,
  };
}

/** The latest whole second: a period of every-second jobs that is due now. */
const dueNow = () => new Date(Math.floor(Date.now() / 1000) * 1000);

let a: { rt: Runtime; seen: RecordingObserver };
let b: { rt: Runtime; seen: RecordingObserver };
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'events-seam-'));
  a = await node('node-a');
  b = await node('node-b');
});
afterAll(async () => {
  for (const n of nodes) await n.rt.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('events of a real runtime', () => {
  it('a scheduled period: claim won, run-started with its delay, run-finished succeeded, recorded and final; a second claimer loses the row', async () => {
    const j = job('events-ok');
    const period = dueNow();
    const key = periodKey(j.name, period);
    const first = await a.rt.runner.runPeriod(j, period, 'schedule');
    expect(first.attempts.map((x) => x.status)).toEqual(['succeeded']);
    const mine = a.seen.events.filter((e) => 'periodKey' in e && e.periodKey === key);
    expect(mine.map((e) => e.type)).toEqual(['claim', 'run-started', 'run-finished']);
    expect(a.seen.of('claim').find((e) => e.periodKey === key)).toMatchObject({ job: j.name, attempt: 1, trigger: 'schedule', outcome: 'won', scheduledAt: period });
    expect(a.seen.of('run-started').find((e) => e.periodKey === key)!.delayMs).toBeGreaterThanOrEqual(0);
    expect(a.seen.of('run-finished').find((e) => e.periodKey === key)).toMatchObject({
      status: 'succeeded', recorded: true, final: true, attempt: 1, error: null, nextAttempt: null,
    });

    // Another node claiming the same period finds the row: it loses, and runs nothing.
    const second = await b.rt.runner.runPeriod(j, period, 'schedule');
    expect(second.attempts).toEqual([]);
    const theirs = b.seen.events.filter((e) => 'periodKey' in e && e.periodKey === key);
    expect(theirs.map((e) => e.type)).toEqual(['claim']);
    expect(['lost_row', 'lost_lock']).toContain((theirs[0] as { outcome: string }).outcome);
  });

  it('a failing job with retries 1: a run-finished owing attempt 2, then the final one', async () => {
    const j = job('events-fails', { retries: 1, retryDelayMs: 50, run: () => { throw new Error('no luck'); } });
    const period = dueNow();
    const key = periodKey(j.name, period);
    await a.rt.runner.runPeriod(j, period, 'schedule', { followOwed: true });
    const finished = a.seen.of('run-finished').filter((e) => e.periodKey === key);
    expect(finished.map((e) => [e.attempt, e.status, e.recorded, e.final])).toEqual([[1, 'failed', true, false], [2, 'failed', true, true]]);
    expect(finished[0]!.nextAttempt).toMatchObject({ attempt: 2 });
    expect(finished[0]!.error).toContain('no luck');
    expect(finished[1]!.nextAttempt).toBeNull();
  });

  it('periods older than catchUp with no row: one skipped (missed) event, on one node only', async () => {
    const j = job('events-missed', { expression: '* * * * *', catchUpMs: 5 * 60_000 });
    const now = new Date();
    // Declared as of 20 minutes ago: the periods since then have no row; those past catchUp are missed.
    await a.rt.reconciler.declare([j], new Date(now.getTime() - 20 * 60_000), 'next');
    await b.rt.reconciler.declare([j], new Date(now.getTime() - 20 * 60_000), 'next');
    const swept = await a.rt.reconciler.reconcile([j], { upTo: now, now });
    await Promise.all(swept.ran);
    const missed = a.seen.of('skipped').filter((e) => e.job === j.name && e.reason === 'missed');
    expect(missed).toHaveLength(1);
    expect(missed[0]!.count).toBe(swept.missed);
    expect(missed[0]!.count).toBeGreaterThanOrEqual(14);
    // The newest missed period is older than catchUp; the latest period ran instead (coalescing the rest).
    expect(now.getTime() - missed[0]!.last.getTime()).toBeGreaterThan(j.catchUpMs);
    expect(a.seen.of('run-finished').filter((e) => e.job === j.name).map((e) => e.scheduledAt)).toEqual([latestPeriodAtOrBefore(j.schedule, now)]);

    // The other node's sweep finds the rows: no second missed event anywhere.
    await Promise.all((await b.rt.reconciler.reconcile([j], { upTo: now, now })).ran);
    await Promise.all((await a.rt.reconciler.reconcile([j], { upTo: new Date(), now: new Date() })).ran);
    expect(b.seen.of('skipped').filter((e) => e.job === j.name && e.reason === 'missed')).toEqual([]);
    expect(a.seen.of('skipped').filter((e) => e.job === j.name && e.reason === 'missed')).toHaveLength(1);
  });

  it('a running row whose lease ran out: a takeover naming the dead node, the next attempt owed', async () => {
    const j = job('events-stale');
    const period = new Date(dueNow().getTime() - 5000);
    const inserted = await a.rt.store.insertRun({ job: j.name, scheduledAt: period, periodKey: periodKey(j.name, period), attempt: 1, trigger: 'schedule', nodeId: 'dead-node', leaseMs: 1000 });
    expect(inserted.outcome).toBe('inserted');
    // Its node never heartbeats: once the lease has run out by the store's clock, a sweep takes it over.
    const deadline = Date.now() + 30_000;
    while (b.seen.of('takeover').length === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      await b.rt.takeover.takeOverStale(new Map([[j.name, j]]));
    }
    expect(b.seen.of('takeover')).toEqual([{
      type: 'takeover', job: j.name, periodKey: periodKey(j.name, period), scheduledAt: period, attempt: 1, deadNode: 'dead-node', result: 'owed',
    }]);
    expect(a.seen.of('takeover')).toEqual([]);
  });

  it('a row taken from under a running body: lease-lost with its cause, then run-finished abandoned and not recorded', async () => {
    const j = job('events-lease', {
      lockTtlMs: 1500, // a heartbeat every 500 ms
      run: async (ctx) => {
        // The row stops being this node's (as another node's takeover would end it).
        await a.rt.store.finishRun(ctx.runId, 'node-a', { status: 'abandoned', reason: 'taken over (test)' });
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
      },
    });
    const period = dueNow();
    const key = periodKey(j.name, period);
    const result = await a.rt.runner.runPeriod(j, period, 'schedule');
    expect(result.attempts.map((x) => [x.status, x.recorded])).toEqual([['abandoned', false]]);
    const lost = a.seen.of('lease-lost').filter((e) => e.periodKey === key);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ job: j.name, attempt: 1, scheduledAt: period, runId: result.attempts[0]!.runId });
    expect(lost[0]!.cause).toMatch(/lease/i);
    const types = a.seen.events.filter((e) => 'periodKey' in e && e.periodKey === key).map((e) => e.type);
    expect(types).toEqual(['claim', 'run-started', 'lease-lost', 'run-finished']);
    expect(a.seen.of('run-finished').find((e) => e.periodKey === key)).toMatchObject({ status: 'abandoned', reason: 'lease-lost', recorded: false, final: false });
  });
});

describe('events of a real scheduler: store, Redis quorum, clock', () => {
  const SKEW_MS = 2500;
  let maria: TestDatabase;
  let redis: RedisServer[] = [];
  let proxy: StoreProxy;
  let rt: Runtime | undefined;
  let clock: StoreClock | undefined;
  let scheduler: Scheduler | undefined;
  const seen = new RecordingObserver();

  beforeAll(async () => {
    maria = await createMariaDb('cron_events');
    redis = await startRedisServers(3);
    proxy = new StoreProxy(3306);
    await proxy.start();
    const url = new URL(maria.url);
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const config = loadConfig({ env: {}, cwd: dir, flags: {
      store: url.toString(), jobsDir: dir, nodeId: 'node-deps', redis: redis.map((r) => r.url).join(','), redisPrefix: `events-${process.pid}:`,
    } });
    const events = new EventBus(silent);
    events.add(seen);
    rt = await openRuntime(config, silent, events);
    // The store's real clock, read as if it ran SKEW_MS ahead of this machine's.
    clock = new StoreClock(async (timeoutMs) => {
      const s = await rt!.db.clockSample(timeoutMs);
      return { ...s, storeMs: s.storeMs + SKEW_MS };
    }, silent);
    await clock.start();
    scheduler = new Scheduler({
      jobs: [], store: rt.store, runner: rt.runner, executor: rt.executor, takeover: rt.takeover, reconciler: rt.reconciler, log: silent,
      events, lockState: () => rt!.lock.state(), clockReading: () => clock!.reading(),
    });
    await scheduler.start();
  }, 60_000);
  afterAll(async () => {
    await scheduler?.stop(0);
    clock?.stop();
    await rt?.close();
    await proxy?.close();
    for (const r of redis) await r.cleanup();
    await maria?.drop();
  });

  it('the clock offset to the store, as the first sweep reads it', async () => {
    const reading = await seen.waitFor('clock', () => true, 5000);
    expect(Math.abs(reading.offsetMs - SKEW_MS)).toBeLessThan(200);
    expect(reading.rttMs).toBeGreaterThanOrEqual(0);
  });

  it('the Redis quorum: degraded with one master down, down with two, ok when they are back', async () => {
    expect(rt!.lock.state()).toBe('ok');
    const states = () => seen.of('redis').map((e) => e.state);
    await redis[0]!.stop();
    await seen.waitFor('redis', (e) => e.state === 'degraded', 5000);
    await redis[1]!.stop();
    await seen.waitFor('redis', (e) => e.state === 'down', 5000);
    await Promise.all([redis[0]!.start(), redis[1]!.start()]);
    await seen.waitFor('redis', (e) => e.state === 'ok', 10_000);
    // One event per change, in order (a master may come back a sweep before the other).
    expect(states()[0]).toBe('degraded');
    expect(states().slice(0, 2)).toEqual(['degraded', 'down']);
    expect(states().at(-1)).toBe('ok');
    for (let i = 1; i < states().length; i++) expect(states()[i]).not.toBe(states()[i - 1]);
  }, 20_000);

  it('the store cut off: one store down event with the error, then one store ok when it answers again', async () => {
    expect(seen.of('store')).toEqual([]);
    await proxy.cut();
    const down = await seen.waitFor('store', (e) => e.state === 'down', 10_000);
    expect(down.error).toBeTruthy();
    expect(scheduler!.snapshot().store).toBe('down');
    // Still down a sweep later: no second event.
    await new Promise((r) => setTimeout(r, 1200));
    expect(seen.of('store').map((e) => e.state)).toEqual(['down']);
    await proxy.restore();
    await seen.waitFor('store', (e) => e.state === 'ok', 10_000);
    expect(seen.of('store').map((e) => e.state)).toEqual(['down', 'ok']);
    expect(scheduler!.snapshot().store).toBe('ok');
  }, 25_000);
});
