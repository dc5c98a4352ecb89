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
import { Executor } from '../../src/run/execute.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { RunStore } from '../../src/store/types.js';

const LOCK_TTL_MS = 3000; // beats every 1000 ms
const STALL_MS = 1500; // the first beat's answer takes this long

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
    // Without the fix the second beat waits a full interval (1000 ms) after the late answer.
    expect(beats[1]! - answeredAt).toBeLessThan(300);
    expect(abortedAt! - answeredAt).toBeLessThan(300);
  });
});
