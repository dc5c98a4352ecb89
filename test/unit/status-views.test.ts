/**
 * What the views keep between reads: /metrics' per-job series after a reload, and the status reader's
 * next periods (kept per job until the first of them passes).
 */
import { describe, expect, it } from 'vitest';
import { SchedulerMetrics } from '../../src/http/metrics.js';
import type { SummaryCache } from '../../src/http/summaries.js';
import { createStatusReader } from '../../src/status/reader.js';
import { compileSchedule } from '../../src/time/schedule.js';
import type { Job } from '../../src/jobs/types.js';
import type { SchedulerSnapshot } from '../../src/daemon/scheduler.js';
import type { SchedulerEvent } from '../../src/events/events.js';
import type { ListedNode } from '../../src/store/types.js';
import { createPageHandler } from '../../src/http/page/index.js';

/** The summary cache's data before any read (the views only read its maps). */
const emptyCache = () => ({ summaries: new Map(), paused: new Map(), onceRetried: 0, readAt: null }) as unknown as SummaryCache;

const finished = (job: string): SchedulerEvent => {
  const scheduledAt = new Date(Date.UTC(2026, 11, 1, 12));
  return {
    type: 'run-finished', job, periodKey: `${job}@${scheduledAt.toISOString()}`, scheduledAt, attempt: 1, trigger: 'schedule', runId: '1', status: 'succeeded',
    reason: null, durationMs: 20, error: null, recorded: true, final: true, nextAttempt: null,
  };
};

const job = (name: string, expression: string): Job => ({
  name, file: `${name}.mjs`, schedule: compileSchedule(expression, 'Europe/Berlin'), timezone: 'Europe/Berlin', timeoutMs: null, lockTtlMs: 30_000, overlap: 'skip',
  catchUpMs: 600_000, coalesce: true, retries: 0, retryDelayMs: 30_000, enabled: true, run: () => 1,
});

describe('status views', () => {
  it('a job removed by a reload keeps out of /metrics when its run in flight ends afterwards; added back, its series return', async () => {
    const state = { jobs: ['kept', 'gone'], next: () => new Map(), redis: () => 'none' as const, storeUp: () => true, clockOffsetMs: () => 0 };
    const metrics = new SchedulerMetrics(state, emptyCache(), '0.1.0');
    const series = async (name: string) => (await metrics.scrape()).body.split('\n').filter((l) => l.includes(`job_name="${name}"`) && !l.startsWith('#'));
    expect(await series('gone')).not.toEqual([]);

    metrics.setJobs(['kept']);
    metrics.emit(finished('gone'));
    metrics.emit({ type: 'skipped', job: 'gone', reason: 'missed', count: 2, first: new Date(), last: new Date() });
    metrics.emit(finished('kept'));
    expect(await series('gone')).toEqual([]);
    expect((await metrics.scrape()).body).toContain('scheduler_runs_total{job_name="kept",status="succeeded"} 1');

    metrics.setJobs(['kept', 'gone']);
    expect((await metrics.scrape()).body).toContain('scheduler_runs_total{job_name="gone",status="succeeded"} 0');
    metrics.emit(finished('gone'));
    expect((await metrics.scrape()).body).toContain('scheduler_runs_total{job_name="gone",status="succeeded"} 1');
  });

  it("a job's next periods move on once the first of them has passed", async () => {
    const jobs = [job('quarterly', '*/15 * * * *'), job('daily', '30 2 * * *')];
    let now = Date.UTC(2026, 11, 1, 12, 7);
    const snapshot: SchedulerSnapshot = { startedAt: now, stopping: false, store: 'ok', storeError: null, redis: 'none', clockOffsetMs: 0, sinceLastPulseMs: 0, jobs: [], inFlight: [] };
    const reader = createStatusReader({ nodeId: 'n', version: '0.1.0', storeKind: 'sqlite', snapshot: () => snapshot, jobs, invalid: [], cache: emptyCache(),
      store: { history: async () => [], storeHost: () => null, runById: async () => null }, storeUp: () => true, now: () => now });
    const next = async () => Object.fromEntries((await reader.jobs()).map((j) => [j.name, j.next]));
    expect(await next()).toEqual({
      quarterly: ['2026-12-01T12:15:00.000Z', '2026-12-01T12:30:00.000Z', '2026-12-01T12:45:00.000Z'],
      daily: ['2026-12-02T01:30:00.000Z', '2026-12-03T01:30:00.000Z', '2026-12-04T01:30:00.000Z'],
    });
    now = Date.UTC(2026, 11, 1, 12, 14, 59, 999);
    expect((await next()).quarterly![0]).toBe('2026-12-01T12:15:00.000Z');
    now = Date.UTC(2026, 11, 1, 12, 15);
    expect((await next()).quarterly).toEqual(['2026-12-01T12:30:00.000Z', '2026-12-01T12:45:00.000Z', '2026-12-01T13:00:00.000Z']);
    now = Date.UTC(2026, 11, 2, 1, 31);
    expect(await next()).toEqual({
      quarterly: ['2026-12-02T01:45:00.000Z', '2026-12-02T02:00:00.000Z', '2026-12-02T02:15:00.000Z'],
      daily: ['2026-12-03T01:30:00.000Z', '2026-12-04T01:30:00.000Z', '2026-12-05T01:30:00.000Z'],
    });
  });

  it('a view of / reads the nodes table once, and its summary counts the live nodes of that read', async () => {
    const at = Date.UTC(2026, 11, 1, 12);
    const node = (id: string, alive: boolean): ListedNode => ({ id, host: `host-${id}`, pid: 10, version: '0.1.0', procStart: null, startedAt: at - 60_000, heartbeatAt: at - (alive ? 1000 : 90_000),
      inFlight: 0, clockOffsetMs: 0, state: 'running', storeHost: null, jobSet: null, alive, heartbeatAgeMs: alive ? 1000 : 90_000 });
    let reads = 0;
    const snapshot: SchedulerSnapshot = { startedAt: at, stopping: false, store: 'ok', storeError: null, redis: 'none', clockOffsetMs: 0, sinceLastPulseMs: 0, jobs: [], inFlight: [] };
    const reader = createStatusReader({ nodeId: 'a', version: '0.1.0', storeKind: 'sqlite', snapshot: () => snapshot, jobs: [job('daily', '30 2 * * *')], invalid: [], cache: emptyCache(),
      store: { history: async () => [], storeHost: () => null, runById: async () => null }, storeUp: () => true, now: () => at,
      listNodes: async () => { reads += 1; return [node('a', true), node('b', true), node('c', false)]; } });
    const page = await createPageHandler(reader, { now: () => new Date(at) })(new URL('http://127.0.0.1/'));
    expect(page?.status).toBe(200);
    expect(reads).toBe(1);
    expect(page?.html).toContain('host-c');
    expect(page?.html).toContain('data-summary="nodes"><div class="label">nodes alive</div><div class="value">2</div>');
    // Given the nodes read for the same view, the summary reads none; alone (/api/summary), it reads them.
    const views = await reader.nodes();
    expect((await reader.summary(views)).nodesAlive).toBe(2);
    expect(reads).toBe(2);
    expect((await reader.summary()).nodesAlive).toBe(2);
    expect(reads).toBe(3);
  });
});
