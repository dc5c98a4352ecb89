/**
 * ctx.once's result write while the store does not answer, after the body's signal aborted for a
 * timeout (fn finished late): the write is tried again at its pace, not in a tight loop (the signal,
 * aborted already, must not cut the pause between tries). The real SQLite store, with its first
 * settles refused as an unreachable store would refuse them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import { StoreOnceBackend } from '../../src/once/once.js';
import { Database } from '../../src/store/database.js';
import { KnexOnceStore } from '../../src/store/once.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { OnceStore } from '../../src/store/types.js';

let dir: string;
let db: Database;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'once-settle-'));
  db = await Database.open({ kind: 'sqlite', path: join(dir, 's.db'), url: `sqlite:${join(dir, 's.db')}` });
  await db.migrate();
});
afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('ctx.once result write against an unreachable store', () => {
  it('after a timeout abort, the tries are paced (200 ms apart), and the result lands once the store answers', async () => {
    const runs = new KnexRunStore(db);
    const inserted = await runs.insertRun({ job: 'late', scheduledAt: new Date(0), periodKey: 'late@1970-01-01T00:00:00.000Z', attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: 30_000 });
    if (inserted.outcome !== 'inserted') throw new Error('setup: the row was not inserted');
    const caller = { job: 'late', runId: inserted.run.id, attempt: 1, nodeId: 'n1' };
    const real = new KnexOnceStore(db);
    const tries: number[] = [];
    const store = new Proxy(real, {
      get(target, prop, receiver) {
        if (prop !== 'settle') return Reflect.get(target, prop, receiver);
        return (...args: Parameters<OnceStore['settle']>) => {
          tries.push(performance.now());
          if (tries.length <= 3) return Promise.reject(new StoreUnavailableError('store unreachable (test)'));
          return target.settle(...args);
        };
      },
    }) as OnceStore;
    const controller = new AbortController();
    const backend = new StoreOnceBackend({ store, caller, signal: controller.signal, dryRun: false, log: pino({ level: 'silent' }) });
    const got = await backend.acquire({ key: 'late:1', fingerprint: null, ttlMs: 60_000, waitMs: 0, retryFailed: true });
    if (got.kind !== 'run' || got.token === null) throw new Error('setup: the key was not taken');
    // fn ends after the body's timeout: its signal is aborted, its run row not yet written.
    controller.abort('timeout');
    await backend.settle({ key: 'late:1', token: got.token, ok: true, json: '{"done":true}' });
    expect(tries).toHaveLength(4);
    for (let i = 1; i < tries.length; i++) expect(tries[i]! - tries[i - 1]!).toBeGreaterThanOrEqual(150);
    expect((await real.read('late:1'))?.status).toBe('succeeded');
  });
});
