/**
 * /metrics' text: the per-job families are rendered by job-series.ts (each job's text kept until an
 * event of that job changes it), not by prom-client. The answer must parse as a scraper reads it,
 * and say what prom-client would have said for the same events, scrape after scrape. And the
 * attempts are counted as the store records them: an attempt whose lease was lost is counted by the
 * node that takes it over (abandoned, or failed when it was the last), not by the one that lost it.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SchedulerMetrics } from '../../src/http/metrics.js';
import { DURATION_BUCKETS } from '../../src/http/job-series.js';
import type { SummaryCache } from '../../src/http/summaries.js';
import type { SchedulerEvent } from '../../src/events/events.js';
import { FINAL_STATUSES, type FinalStatus } from '../../src/store/types.js';
import { parsePrometheusText } from '../helpers/prometheus-text.js';

const scheduledAt = new Date(Date.UTC(2026, 11, 1, 12));
const ref = (job: string) => ({ job, periodKey: `${job}@${scheduledAt.toISOString()}`, scheduledAt });

const finished = (job: string, status: FinalStatus, durationMs: number, recorded = true): SchedulerEvent => ({
  type: 'run-finished', ...ref(job), attempt: 1, trigger: 'schedule', runId: '1', status, reason: recorded ? null : 'lease-lost',
  durationMs, error: null, recorded, final: recorded, nextAttempt: null,
});
const takeover = (job: string, result: 'owed' | 'failed' | 'dropped' | 'cancelled'): SchedulerEvent => ({ type: 'takeover', ...ref(job), attempt: 1, deadNode: 'dead', result });

function cacheOf(lastSuccess: Record<string, number>, paused: string[]): SummaryCache {
  return {
    summaries: new Map(Object.entries(lastSuccess).map(([job, at]) => [job, { lastSuccessAt: at }])),
    paused: new Map(paused.map((job) => [job, { reason: null, pausedAt: 0 }])), onceRetried: 0, readAt: 0,
  } as unknown as SummaryCache;
}

/** The per-job families as prom-client rendered them before (same names, buckets and zeroing). */
class Reference {
  readonly registry = new Registry();
  private readonly runs = new Counter({ name: 'scheduler_runs_total', help: 'h', labelNames: ['job_name', 'status'], registers: [this.registry] });
  private readonly duration = new Histogram({ name: 'scheduler_run_duration_seconds', help: 'h', labelNames: ['job_name'], buckets: [...DURATION_BUCKETS], registers: [this.registry] });
  private readonly missed = new Counter({ name: 'scheduler_missed_periods_total', help: 'h', labelNames: ['job_name'], registers: [this.registry] });
  readonly lastSuccess = new Gauge({ name: 'scheduler_job_last_success_timestamp_seconds', help: 'h', labelNames: ['job_name'], registers: [this.registry] });
  readonly next = new Gauge({ name: 'scheduler_job_next_run_timestamp_seconds', help: 'h', labelNames: ['job_name'], registers: [this.registry] });
  readonly paused = new Gauge({ name: 'scheduler_job_paused', help: 'h', labelNames: ['job_name'], registers: [this.registry] });

  constructor(jobs: string[]) {
    for (const job of jobs) {
      for (const status of FINAL_STATUSES) this.runs.inc({ job_name: job, status }, 0);
      this.duration.zero({ job_name: job });
      this.missed.inc({ job_name: job }, 0);
    }
  }

  run(job: string, status: FinalStatus, seconds: number): void {
    this.runs.inc({ job_name: job, status });
    this.duration.observe({ job_name: job }, seconds);
  }

  skipped(job: string, count: number, missed: boolean): void {
    this.runs.inc({ job_name: job, status: 'skipped' }, count);
    if (missed) this.missed.inc({ job_name: job }, count);
  }
}

const PER_JOB = /^scheduler_(runs_total|run_duration_seconds|missed_periods_total|job_last_success_timestamp_seconds|job_next_run_timestamp_seconds|job_paused)/;
const perJob = (series: Map<string, number>) => new Map([...series].filter(([k]) => PER_JOB.test(k)));

describe('/metrics text', () => {
  it('parses strictly, and its per-job series are what prom-client says for the same events, scrape after scrape', async () => {
    const jobs = ['backup', 'report.daily', 'ping-1'];
    const next = new Map([['backup', new Date(Date.UTC(2026, 11, 2, 3))], ['report.daily', null]]);
    const cache = cacheOf({ backup: Date.UTC(2026, 11, 1, 3, 0, 12, 345) }, ['ping-1']);
    const metrics = new SchedulerMetrics({ jobs, next: () => next, redis: () => 'degraded', storeUp: () => true, clockOffsetMs: () => -12 }, cache, '0.1.0');
    const reference = new Reference(jobs);
    const compare = async () => {
      const { body, contentType } = await metrics.scrape();
      expect(contentType).toBe(reference.registry.contentType);
      const ours = parsePrometheusText(body);
      reference.lastSuccess.set({ job_name: 'backup' }, Date.UTC(2026, 11, 1, 3, 0, 12, 345) / 1000);
      for (const job of jobs) {
        if (job !== 'backup') reference.lastSuccess.set({ job_name: job }, 0);
        reference.next.set({ job_name: job }, (next.get(job)?.getTime() ?? 0) / 1000);
        reference.paused.set({ job_name: job }, job === 'ping-1' ? 1 : 0);
      }
      const theirs = parsePrometheusText(await reference.registry.metrics());
      expect(perJob(ours.series)).toEqual(theirs.series);
      for (const [name, type] of theirs.types) expect(ours.types.get(name), name).toBe(type);
      return ours;
    };
    // prom-client counts the CPU used since its collector began, and the kernel accounts it by the
    // clock tick (4-10 ms): a scrape at once may read 0. Work for longer than a tick first.
    for (const until = performance.now() + 50; performance.now() < until;) Math.sqrt(Math.random());
    const first = await compare();
    // 22 series per job: 7 statuses, 8 buckets + +Inf + _sum + _count, missed, three gauges.
    expect(perJob(first.series).size).toBe(22 * jobs.length);
    expect(first.series.get('scheduler_redis_quorum')).toBe(0.5);
    expect(first.series.get('scheduler_clock_offset_seconds')).toBe(-0.012);
    expect(first.series.get('process_cpu_user_seconds_total')).toBeGreaterThan(0);

    // Durations on bucket bounds (le is inclusive), between them, and past the last.
    const runs: Array<[string, FinalStatus, number]> = [['backup', 'succeeded', 1000], ['backup', 'failed', 50], ['report.daily', 'timed_out', 3_600_001], ['backup', 'succeeded', 2_500.5]];
    for (const [job, status, ms] of runs) {
      metrics.emit(finished(job, status, ms));
      reference.run(job, status, ms / 1000);
      await compare();
    }
    metrics.emit({ type: 'skipped', job: 'ping-1', reason: 'missed', count: 3, first: scheduledAt, last: scheduledAt });
    metrics.emit({ type: 'skipped', job: 'ping-1', reason: 'overlap', count: 1, first: scheduledAt, last: scheduledAt });
    reference.skipped('ping-1', 3, true);
    reference.skipped('ping-1', 1, false);
    const last = await compare();
    expect(last.series.get('scheduler_runs_total{job_name="backup",status="succeeded"}')).toBe(2);
    expect(last.series.get('scheduler_run_duration_seconds_bucket{job_name="backup",le="1"}')).toBe(2);
    expect(last.series.get('scheduler_run_duration_seconds_sum{job_name="backup"}')).toBeCloseTo(3.5505, 9);
    expect(last.series.get('scheduler_missed_periods_total{job_name="ping-1"}')).toBe(3);
    expect(last.series.get('scheduler_job_next_run_timestamp_seconds{job_name="backup"}')).toBe(Date.UTC(2026, 11, 2, 3) / 1000);

    // A scrape with no event in between answers the same text; a reload's added job is there at 0.
    expect((await metrics.scrape()).body.split('\n').filter((l) => PER_JOB.test(l))).toEqual((await metrics.scrape()).body.split('\n').filter((l) => PER_JOB.test(l)));
    metrics.setJobs([...jobs, 'added']);
    const added = parsePrometheusText((await metrics.scrape()).body);
    expect(added.series.get('scheduler_runs_total{job_name="added",status="failed"}')).toBe(0);
    expect(added.series.get('scheduler_run_duration_seconds_count{job_name="added"}')).toBe(0);
    expect(added.series.get('scheduler_runs_total{job_name="backup",status="succeeded"}')).toBe(2);
  });

  it('a lost lease: the losing node counts no status; the taker counts abandoned (owed or dropped) or failed (no attempt left), each attempt once', async () => {
    const jobs = ['sync'];
    const loser = new SchedulerMetrics({ jobs, next: () => new Map(), redis: () => 'none', storeUp: () => true, clockOffsetMs: () => 0 }, cacheOf({}, []), '0.1.0');
    const taker = new SchedulerMetrics({ jobs, next: () => new Map(), redis: () => 'none', storeUp: () => true, clockOffsetMs: () => 0 }, cacheOf({}, []), '0.1.0');
    const runs = async (m: SchedulerMetrics) => {
      const { series } = parsePrometheusText((await m.scrape()).body);
      return { ...Object.fromEntries(FINAL_STATUSES.map((s) => [s, series.get(`scheduler_runs_total{job_name="sync",status="${s}"}`)])), duration: series.get('scheduler_run_duration_seconds_count{job_name="sync"}'),
        takeovers: series.get('scheduler_takeovers_total'), leaseLost: series.get('scheduler_lease_lost_total') };
    };
    const zero = Object.fromEntries(FINAL_STATUSES.map((s) => [s, 0]));

    // Attempt 1 (the body succeeded, but the lease was gone): the row stays running on the loser.
    loser.emit({ type: 'lease-lost', ...ref('sync'), attempt: 1, runId: '1', cause: 'lease lost' });
    loser.emit(finished('sync', 'succeeded', 1200, false));
    expect(await runs(loser)).toEqual({ ...zero, duration: 1, takeovers: 0, leaseLost: 1 });

    taker.emit(takeover('sync', 'owed'));
    expect(await runs(taker)).toEqual({ ...zero, abandoned: 1, duration: 0, takeovers: 1, leaseLost: 0 });
    taker.emit(takeover('sync', 'dropped'));
    taker.emit(takeover('sync', 'failed'));
    expect(await runs(taker)).toEqual({ ...zero, abandoned: 2, failed: 1, duration: 0, takeovers: 3, leaseLost: 0 });
    // An attempt whose cancel was asked before its node died: taken over as cancelled, counted so.
    taker.emit(takeover('sync', 'cancelled'));
    expect(await runs(taker)).toEqual({ ...zero, abandoned: 2, failed: 1, cancelled: 1, duration: 0, takeovers: 4, leaseLost: 0 });

    // A takeover of a job this node does not define (another node's) is counted all the same.
    taker.emit(takeover('elsewhere', 'owed'));
    expect((await taker.scrape()).body).toMatch(/^scheduler_runs_total\{job_name="elsewhere",status="abandoned"\} 1$/m);
  });

  it('the strict reader refuses what a scraper would', () => {
    expect(() => parsePrometheusText('# TYPE a counter\na 1\n')).not.toThrow();
    expect(() => parsePrometheusText('a 1\n')).toThrow(/before its TYPE/);
    expect(() => parsePrometheusText('# TYPE a counter\n# TYPE b counter\na 1\nb 1\na{x="1"} 1\n')).toThrow(/split/);
    expect(() => parsePrometheusText('# TYPE a counter\na 1\na 2\n')).toThrow(/twice/);
    expect(() => parsePrometheusText('# TYPE a counter\na{x="1} 1\n')).toThrow();
    expect(() => parsePrometheusText('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n')).toThrow(/below/);
    expect(() => parsePrometheusText('# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 2\n')).toThrow(/_count/);
  });
});
