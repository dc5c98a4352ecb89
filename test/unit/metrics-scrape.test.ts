/**
 * A scrape of /metrics and a read of /api/jobs send no store statement: the cluster-wide figures
 * come from the summary cache, refreshed in the background (two statements per refresh, whatever
 * the number of jobs; three with the ctx.once keys). Counted with knex's `query` event on a real SQLite store.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/store/database.js';
import { KnexJobStore } from '../../src/store/jobs.js';
import { KnexRunStore } from '../../src/store/runs.js';
import { KnexOnceStore } from '../../src/store/once.js';
import { SchedulerMetrics } from '../../src/http/metrics.js';
import { SummaryCache } from '../../src/http/summaries.js';
import { createStatusReader } from '../../src/status/reader.js';
import { compileSchedule } from '../../src/time/schedule.js';
import { createLogger } from '../../src/log.js';
import type { Job } from '../../src/jobs/types.js';
import type { SchedulerSnapshot } from '../../src/daemon/scheduler.js';
import { removeTempDirs, tempDir } from './_fixtures.js';

afterAll(removeTempDirs);

const names = Array.from({ length: 50 }, (_, i) => `job-${i}`);
const jobs: Job[] = names.map((name) => ({
  name, file: `${name}.mjs`, schedule: compileSchedule('0 * * * *', 'UTC'), timezone: 'UTC', timeoutMs: null, lockTtlMs: 30_000, overlap: 'skip',
  catchUpMs: 600_000, coalesce: true, retries: 0, retryDelayMs: 30_000, enabled: true, run: () => 1,
}));

describe('scrapes read memory only', () => {
  it('50 jobs: a refresh is 2 statements; 20 scrapes and 20 reads of the jobs send none, and show what the refresh read', async () => {
    const path = join(tempDir('cron-unit-scrape-'), 's.db');
    const db = await Database.open({ kind: 'sqlite', path, url: `sqlite:${path}` });
    try {
      await db.migrate();
      const store = new KnexRunStore(db);
      const jobStore = new KnexJobStore(db);
      await jobStore.declare(names.map((name) => ({ name, reconciledThrough: null })));
      const at = new Date(Date.UTC(2026, 10, 30, 18));
      const claimed = await store.insertRun({ job: 'job-7', scheduledAt: at, periodKey: `job-7@${at.toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'n', leaseMs: 30_000 });
      if (claimed.outcome !== 'inserted') throw new Error('no insert');
      await store.finishRun(claimed.run.id, 'n', { status: 'succeeded' });
      await jobStore.setPaused('job-3', true, 'maintenance');

      const statements: string[] = [];
      db.knex.on('query', (q: { sql: string }) => statements.push(q.sql));
      const cache = new SummaryCache({ store, jobStore, log: createLogger('silent', 'stderr'), now: () => Date.now() });
      await cache.refresh();
      expect(statements).toHaveLength(2);

      const snapshot: SchedulerSnapshot = { startedAt: Date.now(), stopping: false, store: 'ok', storeError: null, redis: 'none', clockOffsetMs: 0, sinceLastPulseMs: 0,
        jobs: jobs.map((job) => ({ job, next: new Date(Date.UTC(2030, 0, 1)) })), inFlight: [] };
      const metrics = new SchedulerMetrics({ jobs: names, next: () => new Map(snapshot.jobs.map((s) => [s.job.name, s.next])), redis: () => 'none', storeUp: () => true, clockOffsetMs: () => 0 }, cache, '0.1.0');
      const reader = createStatusReader({ nodeId: 'n', version: '0.1.0', storeKind: 'sqlite', snapshot: () => snapshot, jobs, invalid: [], cache, store, storeUp: () => true, now: () => Date.now() });
      statements.length = 0;
      let text = '';
      for (let i = 0; i < 20; i++) {
        text = (await metrics.scrape()).body;
        await reader.jobs();
        await reader.summary();
      }
      expect(statements).toEqual([]);
      const success = Number(/^scheduler_job_last_success_timestamp_seconds\{job_name="job-7"\} (\S+)$/m.exec(text)?.[1]);
      expect(success).toBeGreaterThan(Date.now() / 1000 - 60);
      expect(text).toMatch(/^scheduler_job_paused\{job_name="job-3"\} 1$/m);
      expect(text).toMatch(/^scheduler_job_paused\{job_name="job-4"\} 0$/m);
      const views = await reader.jobs();
      expect(views.find((j) => j.name === 'job-3')!.paused).toMatchObject({ reason: 'maintenance' });
      expect(views.find((j) => j.name === 'job-7')!.last).toMatchObject({ status: 'succeeded', scheduledAt: at.toISOString() });
      expect((await reader.summary()).paused).toBe(1);
    } finally {
      await db.close();
    }
  });

  it('ctx.once: scheduler_once_total counts this node\'s calls by result; scheduler_once_keys_retried comes from the refresh (one more statement)', async () => {
    const path = join(tempDir('cron-unit-scrape-once-'), 's.db');
    const db = await Database.open({ kind: 'sqlite', path, url: `sqlite:${path}` });
    try {
      await db.migrate();
      const store = new KnexRunStore(db);
      const once = new KnexOnceStore(db);
      const claimed = await store.insertRun({ job: 'job-1', scheduledAt: new Date(0), periodKey: 'job-1@1970-01-01T00:00:00.000Z', attempt: 1, trigger: 'manual', nodeId: 'n', leaseMs: 30_000 });
      if (claimed.outcome !== 'inserted') throw new Error('no insert');
      const caller = { job: 'job-1', runId: claimed.run.id, attempt: 1, nodeId: 'n' };
      const ttl = { fingerprint: null, ttlMs: 60_000 };
      // One key tried twice (its first fn failed), one tried once.
      await once.take('k:retried', caller, ttl, null);
      await once.settle('k:retried', caller, 1, { status: 'failed', error: 'boom' });
      await once.take('k:retried', caller, ttl, await once.read('k:retried'));
      await once.take('k:once', caller, ttl, null);

      const statements: string[] = [];
      db.knex.on('query', (q: { sql: string }) => statements.push(q.sql));
      const cache = new SummaryCache({ store, jobStore: new KnexJobStore(db), onceStore: once, log: createLogger('silent', 'stderr'), now: () => Date.now() });
      await cache.refresh();
      expect(statements).toHaveLength(3);
      const metrics = new SchedulerMetrics({ jobs: ['job-1'], next: () => new Map(), redis: () => 'none', storeUp: () => true, clockOffsetMs: () => 0 }, cache, '0.1.0');
      for (const result of ['executed', 'replayed', 'replayed', 'failed'] as const) metrics.emit({ type: 'once', job: 'job-1', key: 'k', runId: claimed.run.id, result });
      const text = (await metrics.scrape()).body;
      expect(text).toMatch(/^scheduler_once_total\{result="executed"\} 1$/m);
      expect(text).toMatch(/^scheduler_once_total\{result="replayed"\} 2$/m);
      expect(text).toMatch(/^scheduler_once_total\{result="in_progress"\} 0$/m);
      expect(text).toMatch(/^scheduler_once_total\{result="failed"\} 1$/m);
      expect(text).toMatch(/^scheduler_once_keys_retried 1$/m);
    } finally {
      await db.close();
    }
  });
});
