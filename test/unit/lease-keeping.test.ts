/**
 * Lease keeping: a heartbeat whose answer comes back later than the beat interval (the node was
 * paused, or its event loop blocked, while the beat was in flight) proves only that the lease was
 * held before the stall. The next beat must go at once, not a whole interval later, so that a lease
 * lost meanwhile aborts ctx.signal promptly.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Job } from '../../src/jobs/types.js';
import { validateJob } from '../../src/jobs/validate.js';
import { Executor } from '../../src/run/execute.js';
import { fenceMargin } from '../../src/run/lease-keeper.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { RunRecord, RunStore } from '../../src/store/types.js';

const LOCK_TTL_MS = 6000; // beats every 2000 ms; self-fences 4500 ms after the last confirmed beat
// The first beat's answer takes this long: longer than the interval, so the next beat is due before
// it comes, and short enough that it comes before the self-fence (4500 ms after the claim). 2100, not
// 2500: the answer then came right at the fence (2000 + 2500), and a timer late by a few ms on a
// loaded machine let the fence abort first (one beat seen, not two). Late timers only move it later.
const STALL_MS = 2100;

let dir: string;
let real: KnexRunStore;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lease-keeping-'));
  real = await KnexRunStore.open({ kind: 'sqlite', path: join(dir, 's.db'), url: `sqlite:${join(dir, 's.db')}` });
  await real.migrate();
});
afterAll(async () => {
  await real.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('lease keeping after a stalled heartbeat', () => {
  it('beats again at once when the answer came later than the interval, and aborts with lease-lost', async () => {
    const inserted = await real.insertRun({
      job: 'stall', scheduledAt: new Date(0), periodKey: 'stall@1970-01-01T00:00:00.000Z', attempt: 1,
      trigger: 'schedule', nodeId: 'n1', leaseMs: LOCK_TTL_MS,
    });
    if (inserted.outcome !== 'inserted') throw new Error('setup: the row was not inserted');
    const beats: number[] = [];
    const t0 = performance.now();
    // The real SQLite store, with the first heartbeat's answer held back (the node stalled while it
    // was in flight); during the stall the attempt stops being this node's.
    const store = new Proxy(real, {
      get(target, prop, receiver) {
        if (prop !== 'heartbeat') return Reflect.get(target, prop, receiver);
        return async (runId: string, nodeId: string) => {
          beats.push(performance.now() - t0);
          const answer = await target.heartbeat(runId, nodeId);
          if (beats.length === 1) {
            await target.finishRun(runId, nodeId, { status: 'abandoned', reason: 'taken over while stalled (test)' });
            await new Promise((r) => setTimeout(r, STALL_MS));
          }
          return answer;
        };
      },
    }) as RunStore;
    let abortedAt: number | undefined;
    let reason: unknown;
    const job = {
      name: 'stall', timeoutMs: null, lockTtlMs: LOCK_TTL_MS,
      run: (ctx: { signal: AbortSignal }) => new Promise<void>((resolve) => {
        ctx.signal.addEventListener('abort', () => {
          abortedAt = performance.now() - t0;
          reason = ctx.signal.reason;
          resolve();
        }, { once: true });
      }),
    } as unknown as Job;
    const executor = new Executor(store, 'n1', pino({ level: 'silent' }));
    const result = await executor.execute(job, inserted.run, null);

    expect(reason).toBe('lease-lost');
    expect(result.status).toBe('abandoned');
    // The final write was refused: the attempt had stopped being this node's.
    expect(result.recorded).toBe(false);
    expect(beats).toHaveLength(2);
    const answeredAt = beats[0]! + STALL_MS;
    // Without the fix the second beat waits a full interval (2000 ms) after the late answer.
    expect(beats[1]! - answeredAt).toBeLessThan(300);
    expect(abortedAt! - answeredAt).toBeLessThan(300);
  });

  it('self-fences: with no confirmed heartbeat for lockTtl - margin (the store does not answer), ctx.signal aborts with lease-lost before the lease could lapse', async () => {
    const ttl = 2000; // margin 500 ms: aborts about 1500 ms after the claim
    const inserted = await real.insertRun({
      job: 'fence', scheduledAt: new Date(0), periodKey: 'fence@1970-01-01T00:00:00.000Z', attempt: 1,
      trigger: 'schedule', nodeId: 'n1', leaseMs: ttl,
    });
    if (inserted.outcome !== 'inserted') throw new Error('setup: the row was not inserted');
    // The real store, except that heartbeats never come back (a black-holed connection).
    const store = new Proxy(real, {
      get(target, prop, receiver) {
        if (prop !== 'heartbeat') return Reflect.get(target, prop, receiver);
        return () => new Promise<boolean>(() => {});
      },
    }) as RunStore;
    const t0 = performance.now();
    let abortedAt: number | undefined;
    const job = {
      name: 'fence', timeoutMs: null, lockTtlMs: ttl, retries: 0, retryDelayMs: 1000,
      run: (ctx: { signal: AbortSignal }) => new Promise<void>((resolve) => {
        ctx.signal.addEventListener('abort', () => {
          abortedAt = performance.now() - t0;
          resolve();
        }, { once: true });
      }),
    } as unknown as Job;
    const result = await new Executor(store, 'n1', pino({ level: 'silent' })).execute(job, inserted.run, null);
    expect(result.status).toBe('abandoned');
    expect(abortedAt!).toBeGreaterThanOrEqual(ttl - fenceMargin(ttl) - 50);
    expect(abortedAt!).toBeLessThan(ttl);
    // A node that could not prove its lease still writes what its body ended with, conditionally on
    // the row being its attempt's and running (it is: nobody took it over): attempt 1 abandoned by
    // its own node, attempt 2 owed at once, without waiting for the lease to run out.
    expect(result.recorded).toBe(true);
    expect(result.next?.attempt).toBe(2);
    const rows = await real.periodRuns('fence', new Date(0));
    expect(rows.map((r) => [r.attempt, r.status, r.reason])).toEqual([[1, 'abandoned', 'lease-lost'], [2, 'pending', null]]);
    // Nothing is left for a takeover to judge.
    expect((await real.staleRuns()).filter((r) => r.job === 'fence')).toEqual([]);
  });

  it('after a pause past the lease, a body timer that runs before the fence\'s next check finds ctx.signal aborted when it reads it', async () => {
    const ttl = 2000; // self-fences 1500 ms after the last confirmed beat
    const inserted = await real.insertRun({
      job: 'paused', scheduledAt: new Date(0), periodKey: 'paused@1970-01-01T00:00:00.000Z', attempt: 1,
      trigger: 'schedule', nodeId: 'n1', leaseMs: ttl,
    });
    if (inserted.outcome !== 'inserted') throw new Error('setup: the row was not inserted');
    const seen: Array<{ aborted: boolean; reason: unknown; threw: boolean }> = [];
    const job = {
      name: 'paused', timeoutMs: null, lockTtlMs: ttl, retries: 0, retryDelayMs: 1000,
      async run(ctx: { signal: AbortSignal }) {
        // The pause: the event loop is held for 2.5 s (as SIGSTOP holds it) while this body's 250 ms
        // timer is pending, so that the timer is due before the fence's next 100 ms check.
        setTimeout(() => {
          const until = performance.now() + 2500;
          while (performance.now() < until) { /* paused */ }
        }, 240);
        await new Promise((r) => setTimeout(r, 250));
        // The body's own check, right before its irreversible write.
        const aborted = ctx.signal.aborted;
        let threw = false;
        try {
          ctx.signal.throwIfAborted();
        } catch {
          threw = true;
        }
        seen.push({ aborted, reason: ctx.signal.reason, threw });
        if (!threw) return 'wrote after the pause';
        throw new Error('fenced');
      },
    } as unknown as Job;
    const result = await new Executor(real, 'n1', pino({ level: 'silent' })).execute(job, inserted.run, null);
    expect(seen).toEqual([{ aborted: true, reason: 'lease-lost', threw: true }]);
    expect(result.status).toBe('abandoned');
    // The row was still this attempt's: its own outcome (abandoned, the next attempt owed) is written.
    expect(result.recorded).toBe(true);
    expect((await real.periodRuns('paused', new Date(0))).map((r) => [r.attempt, r.status])).toEqual([[1, 'abandoned'], [2, 'pending']]);
  });
});

/**
 * A command job is recorded only once its process group is gone, which after a timeout may take its
 * `killAfter`: the lease must be kept meanwhile (or another node takes the row over and starts the
 * next attempt beside the still running process), and a lease lost meanwhile kills the group at once.
 */
describe('lease keeping while a timed-out command is being stopped', () => {
  const commandJob = (name: string, killAfter: string) => {
    const { job, problems } = validateJob(join(dir, `${name}.yaml`), {
      schedule: '* * * * *', lockTtl: '1s', timeout: '300ms', killAfter, retries: 0,
      // Ignores SIGTERM (the ignore is inherited by its sleeps): only SIGKILL ends it.
      command: "trap '' TERM; while :; do sleep 0.05; done",
    }, 'UTC');
    if (!job) throw new Error(problems.join('\n'));
    return job;
  };
  const claim = async (name: string) => {
    const inserted = await real.insertRun({ job: name, scheduledAt: new Date(0), periodKey: `${name}@1970-01-01T00:00:00.000Z`, attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: 1000 });
    if (inserted.outcome !== 'inserted') throw new Error('setup: the row was not inserted');
    return inserted.run;
  };

  it('keeps the lease through killAfter (longer than lockTtl) and records timed_out once the group is gone', async () => {
    const job = commandJob('slowstop', '2500ms');
    const run = await claim('slowstop');
    let stale = false;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        if ((await real.staleRuns()).some((r) => r.id === run.id)) stale = true;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const t0 = performance.now();
    const result = await new Executor(real, 'n1', pino({ level: 'silent' })).execute(job, run, null);
    watching = false;
    await watch;
    expect(performance.now() - t0).toBeGreaterThan(2500);
    // Without the lease kept, the row's 1 s lease ran out about 0.7 s after the timeout.
    expect(stale).toBe(false);
    expect(result.status).toBe('timed_out');
    expect(result.recorded).toBe(true);
    expect(result.error).toContain('SIGKILL');
  });

  it('a lease lost while the group is being stopped: SIGKILL within the lease-lost grace, not killAfter, and nothing written', async () => {
    const job = commandJob('loststop', '10s');
    const run = await claim('loststop');
    const t0 = performance.now();
    // The real store; once the body has timed out, the row is taken over (as by another node).
    const store = new Proxy(real, {
      get(target, prop, receiver) {
        if (prop !== 'heartbeat') return Reflect.get(target, prop, receiver);
        return async (runId: string, nodeId: string, leaseMs?: number) => {
          if (performance.now() - t0 > 400) await target.finishRun(runId, nodeId, { status: 'abandoned', reason: 'taken over (test)' });
          return target.heartbeat(runId, nodeId, leaseMs);
        };
      },
    }) as RunStore;
    const result = await new Executor(store, 'n1', pino({ level: 'silent' })).execute(job, run, null);
    expect(performance.now() - t0).toBeLessThan(4000);
    expect(result.recorded).toBe(false);
    expect(result.error).toContain('SIGKILL');
    expect((await real.periodRuns('loststop', new Date(0))).map((r) => r.status)).toEqual(['abandoned']);
  });
});
