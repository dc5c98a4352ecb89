/**
 * Edge cases found by review, each once shown failing on the real parts:
 * 1. A request whose target is not a URL gets no answer (and, during the daemon's start, kills it).
 * 2. A job removed by a reload while a sweep reconciles it is declared seen again, forever.
 * 3. A claim whose pause read fails after its INSERT won leaves a `running` row no process executes.
 */
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { HttpServer, json } from '../../src/http/server.js';
import { Reconciler } from '../../src/run/reconcile.js';
import { compileSchedule } from '../../src/time/schedule.js';
import type { Job } from '../../src/jobs/types.js';
import type { PeriodRunner } from '../../src/run/period.js';
import { removeTempDirs, sqliteStores } from './_fixtures.js';
import { Claimer } from '../../src/claim/claim.js';
import { NoLockProvider } from '../../src/claim/no-lock.js';
import { StoreUnavailableError } from '../../src/errors.js';

const log = pino({ level: 'silent' });
afterAll(() => removeTempDirs());

describe('HTTP request target that is not a URL', () => {
  it('is answered 400, with no unhandled rejection', async () => {
    const rejections: unknown[] = [];
    const onRejection = (e: unknown) => rejections.push(e);
    process.on('unhandledRejection', onRejection);
    const server = new HttpServer({ host: '127.0.0.1', port: 0, origin: 'test', tokens: [], nodeId: 'test-node', log, open: { '/healthz': () => json(200, { ok: true }) }, guarded: [] });
    const url = await server.start();
    try {
      const answer = await new Promise<string>((resolve) => {
        let got = '';
        const s = net.connect(Number(new URL(url!).port), '127.0.0.1', () => s.write('GET //[ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
        s.on('data', (d) => (got += String(d)));
        s.on('close', () => resolve(got));
        setTimeout(() => { s.destroy(); }, 3000);
      });
      expect(rejections).toEqual([]);
      expect(answer).toMatch(/^HTTP\/1\.1 400/);
    } finally {
      process.off('unhandledRejection', onRejection);
      await server.close();
    }
  });
});

describe('a job removed by a reload during a sweep', () => {
  it('is no longer declared seen by this node', async () => {
    const stores = await sqliteStores();
    try {
      let release = () => {};
      const gate = new Promise<void>((r) => (release = r));
      // The real runs table, with its read held until the reload has removed the job.
      const runs = Object.create(stores.store) as typeof stores.store;
      runs.rowsInRanges = async (ranges) => { await gate; return stores.store.rowsInRanges(ranges); };
      const seen: string[][] = [];
      const jobStore = Object.create(stores.jobStore) as typeof stores.jobStore;
      jobStore.advance = async (through, names) => { seen.push([...(names ?? through.keys())]); return stores.jobStore.advance(through, names); };
      const runner = { runPeriod: async () => ({ claim: 'lost-row', attempts: [] }) } as unknown as PeriodRunner;
      const reconciler = new Reconciler(runs, jobStore, runner, 'n1', log);
      const job = { name: 'gone', schedule: compileSchedule('* * * * * *', 'UTC'), timezone: 'UTC', catchUpMs: 60_000, coalesce: true, enabled: true, lockTtlMs: 30_000, overlap: 'allow', retries: 0 } as unknown as Job;
      const now = new Date();
      await reconciler.declare([job], new Date(now.getTime() - 10_000), 'next');
      const sweep = reconciler.reconcile([job], { upTo: new Date(now.getTime() - 3000), now });
      reconciler.forget(['gone']); // the reload (Scheduler.replaceJobs) while the sweep waits for the store
      release();
      await sweep;
      await reconciler.flush(true);
      expect(seen.at(-1)).toEqual([]);
    } finally {
      await stores.close();
    }
  });
});

describe('a claim whose pause read fails', () => {
  it('leaves no running row behind (the row it inserted is run, or given back)', async () => {
    const stores = await sqliteStores();
    try {
      // The jobs table's read fails (a reset connection, a statement timeout) while the INSERT lands.
      const pauses = { get: () => Promise.reject(new StoreUnavailableError('store sqlite:… failed transiently (read jobs)')) };
      const claimer = new Claimer(stores.store, new NoLockProvider(), 'n1', log, pauses);
      const job = { name: 'manual-job', lockTtlMs: 30_000, overlap: 'allow' } as unknown as Job;
      const scheduledAt = new Date(Math.floor(Date.now() / 1000) * 1000);
      const result = await claimer.claim({ job, scheduledAt, trigger: 'manual', attempt: 1, checkOverlap: 'none' }).catch((err: Error) => ({ outcome: `threw: ${err.message}` }));
      const rows = await stores.store.history({ job: 'manual-job' });
      // Either the claim won (and the caller runs the body) or no row is left running for a takeover to re-run later.
      expect({ outcome: result.outcome, running: rows.filter((r) => r.status === 'running').length }).toMatchObject(result.outcome === 'won' ? { outcome: 'won' } : { running: 0 });
    } finally {
      await stores.close();
    }
  });
});
