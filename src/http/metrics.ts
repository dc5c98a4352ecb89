/**
 * /metrics: prom-client on a Registry of its own (never the global one, which a job body could fill)
 * for the node-wide metrics, and the per-job families rendered by job-series.ts (prom-client's
 * rendering of 21 series per job was the scrape's whole cost). Counters and histograms come from this
 * node's events; the cluster-wide gauges (last success, paused) from the summary cache; the node's
 * state from the scheduler's snapshot. A scrape reads memory only: no store statement.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ONCE_RESULTS, type ClaimOutcome, type SchedulerEvent, type SchedulerObserver } from '../events/events.js';
import type { QuorumState } from '../claim/lock.js';
import type { SummaryCache } from './summaries.js';
import { DURATION, gaugeText, JOB_LABEL, JobSeries, MISSED, RUNS, type Family } from './job-series.js';

const LAST_SUCCESS: Family = { name: 'scheduler_job_last_success_timestamp_seconds', help: "Finish of the job's newest succeeded attempt, cluster-wide (0: none)", type: 'gauge', labelNames: [JOB_LABEL] };
const NEXT_RUN: Family = { name: 'scheduler_job_next_run_timestamp_seconds', help: "The job's next period on this node's schedule (0: none)", type: 'gauge', labelNames: [JOB_LABEL] };
const PAUSED: Family = { name: 'scheduler_job_paused', help: '1 when the job is paused cluster-wide', type: 'gauge', labelNames: [JOB_LABEL] };

const CLAIM_OUTCOMES: readonly ClaimOutcome[] = ['won', 'lost_lock', 'lost_row', 'skipped', 'blocked', 'error'];

/** 1 all masters answer, 0.5 a quorum with some down, 0 no quorum; 'none' (no Redis configured: claims rest on the row alone) is 1, as nothing is missing. */
export const QUORUM_VALUE: Record<QuorumState, number> = { ok: 1, degraded: 0.5, down: 0, none: 1 };

/** The per-job families, in the scrape's order (after the registry's). */
const PER_JOB: readonly Family[] = [RUNS, DURATION, MISSED, LAST_SUCCESS, NEXT_RUN, PAUSED];

/** A family of the scrape as the reference page lists it. */
export interface FamilyInfo {
  name: string;
  help: string;
  type: string;
  labelNames: readonly string[];
}

export interface MetricsState {
  jobs: string[];
  next(): Map<string, Date | null>;
  redis(): QuorumState;
  storeUp(): boolean;
  clockOffsetMs(): number;
  /** The version of the job set this node runs; none: the family is not shown. */
  jobSet?(): string | null;
}

export class SchedulerMetrics implements SchedulerObserver {
  /** prom-client's registry for the node-wide metrics; the per-job families are `perJob` (job-series.ts). */
  readonly registry = new Registry();
  private readonly perJob = new JobSeries();
  private readonly fireDelay: Histogram;
  private readonly claims: Counter<'outcome'>;
  private readonly takeovers: Counter;
  private readonly deferred: Counter;
  private readonly leaseLost: Counter;
  private readonly rowsLost: Counter;
  private readonly once: Counter<'result'>;
  private readonly runLogDropped: Counter;

  constructor(private readonly state: MetricsState, private readonly cache: SummaryCache, version: string, options: { onRunEnded?: () => void } = {}) {
    const registers = [this.registry];
    // The event loop's delay sampled every 100 ms, not prom-client's 10 ms: a timer firing 100 times
    // a second cost an idle node about 0.5% of a core on its own (nodejs_eventloop_lag_* still see
    // every stall longer than 100 ms, a shorter one with a chance of its length in 100 ms).
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
    this.fireDelay = new Histogram({ name: 'scheduler_fire_delay_seconds', help: "From a scheduled period's instant (store clock) to its body's start on this node", registers,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] });
    this.claims = new Counter({ name: 'scheduler_claims_total', help: `This node's claims of periods and owed attempts, by outcome: ${CLAIM_OUTCOMES.join(', ')}`, labelNames: ['outcome'], registers });
    this.deferred = new Counter({ name: 'scheduler_periods_deferred_total', help: "Periods this node's ticks left to the other nodes and the catch-up sweep because its own claims were behind (overload)", registers });
    this.takeovers = new Counter({ name: 'scheduler_takeovers_total', help: 'Attempts of dead nodes (lease expired) this node ended', registers });
    this.leaseLost = new Counter({ name: 'scheduler_lease_lost_total', help: "This node's attempts that lost their lease", registers });
    this.rowsLost = new Counter({ name: 'scheduler_store_rows_lost_total', help: "This node's attempt rows the store no longer had (a failover to a replica that lacked them: asynchronous replication)", registers });
    this.once = new Counter({ name: 'scheduler_once_total', help: "ctx.once calls of bodies on this node: executed (fn ran, result stored), replayed (stored result returned), in_progress (gave up waiting for a live holder), failed (fn threw, key left failed)", labelNames: ['result'], registers });
    this.runLogDropped = new Counter({ name: 'scheduler_run_log_dropped_total', help: "Lines of this node's attempts' logs that could not be stored (the store away too long, or the node's buffer full); each log says how many it lost", registers });
    new Gauge({ name: 'scheduler_once_keys_retried', help: 'ctx.once keys (not expired), cluster-wide, whose fn was started more than once', registers,
      collect() { this.set(cache.onceRetried); } });
    new Gauge({ name: 'scheduler_redis_quorum', help: 'Redlock quorum: 1 ok (or no Redis configured), 0.5 degraded, 0 down', registers,
      collect() { this.set(QUORUM_VALUE[state.redis()]); } });
    new Gauge({ name: 'scheduler_store_up', help: '1 when the store answers this node', registers, collect() { this.set(state.storeUp() ? 1 : 0); } });
    new Gauge({ name: 'scheduler_clock_offset_seconds', help: "Store clock minus this node's clock", registers, collect() { this.set(state.clockOffsetMs() / 1000); } });
    new Gauge({ name: 'scheduler_build_info', help: 'The scheduler version this node runs', labelNames: ['version'], registers }).set({ version }, 1);
    const jobSet = state.jobSet?.bind(state);
    if (jobSet) {
      new Gauge({ name: 'scheduler_job_set_info', help: 'The version (a hash of the job files) of the job set this node runs: one series, value 1', labelNames: ['job_set'], registers,
        collect() {
          this.reset();
          this.set({ job_set: jobSet() ?? 'unknown' }, 1);
        } });
    }
    // Every series a user would graph exists at 0 from the start (rate() needs a first sample).
    for (const job of state.jobs) this.perJob.add(job);
    for (const outcome of CLAIM_OUTCOMES) this.claims.inc({ outcome }, 0);
    for (const result of ONCE_RESULTS) this.once.inc({ result }, 0);
    this.onRunEnded = options.onRunEnded ?? (() => {});
  }

  private readonly onRunEnded: () => void;

  /** Jobs a reload removed: a late event of theirs (a run in flight at the reload) must not bring their series back. */
  private readonly removed = new Set<string>();

  /** After a reload: series at 0 for the added jobs; the removed jobs' series go. */
  setJobs(names: string[]): void {
    const after = new Set(names);
    for (const job of names) this.removed.delete(job);
    for (const job of this.state.jobs) {
      if (after.has(job)) continue;
      this.removed.add(job);
      this.perJob.remove(job);
    }
    for (const job of names) this.perJob.add(job);
    this.state.jobs = [...names];
  }

  emit(event: SchedulerEvent): void {
    switch (event.type) {
      case 'claim':
        this.claims.inc({ outcome: event.outcome });
        break;
      case 'run-started':
        if (event.trigger === 'schedule') this.fireDelay.observe(Math.max(0, event.delayMs) / 1000);
        break;
      case 'run-finished':
        if (!this.removed.has(event.job)) {
          // Counted only when this node's write of the outcome landed: an attempt whose lease was
          // lost (or whose outcome missed the shutdown deadline) keeps its row running, and the node
          // that takes it over counts it (below), so each attempt is counted once across the cluster.
          // Its body did run here: its duration is observed all the same.
          if (event.recorded) this.perJob.countRun(event.job, event.status);
          this.perJob.observeDuration(event.job, Math.max(0, event.durationMs) / 1000);
        }
        this.onRunEnded();
        break;
      case 'skipped':
        if (this.removed.has(event.job)) break;
        this.perJob.countRun(event.job, 'skipped', event.count);
        if (event.reason === 'missed') this.perJob.countMissed(event.job, event.count);
        break;
      case 'takeover':
        this.takeovers.inc();
        // The attempt this node ended: `abandoned` (the next one owed, or none when no live node
        // defines the job), `failed` when it was the last attempt the job had, or `cancelled` when
        // an operator had asked to cancel it. Counted even for a
        // job this node does not define (another node's, or one a reload removed here, whose series
        // then come back): no other node counts that attempt.
        this.perJob.countRun(event.job, event.result === 'failed' ? 'failed' : event.result === 'cancelled' ? 'cancelled' : 'abandoned');
        break;
      case 'deferred':
        this.deferred.inc(event.count);
        break;
      case 'lease-lost':
        this.leaseLost.inc();
        break;
      case 'row-lost':
        this.rowsLost.inc();
        break;
      case 'once':
        this.once.inc({ result: event.result });
        break;
      case 'run-log-dropped':
        this.runLogDropped.inc(event.count);
        break;
      default:
        break;
    }
  }

  /** Every family of the scrape, in its order: docs/reference/metrics.md is generated from this. */
  families(): FamilyInfo[] {
    const own = this.registry.getMetricsAsArray().map((m) => {
      // prom-client's typings give `type` as a numeric enum; its objects hold the text format's word.
      const { name, help, type, labelNames } = m as unknown as { name: string; help: string; type: string; labelNames?: readonly string[] };
      return { name, help, type, labelNames: labelNames ?? [] };
    });
    return [...own, ...PER_JOB.map(({ name, help, type, labelNames }) => ({ name, help, type, labelNames }))];
  }

  /** The Prometheus text: memory only. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    const { jobs } = this.state;
    const next = this.state.next();
    const { summaries, paused } = this.cache;
    const body = [
      await this.registry.metrics(), '\n',
      this.perJob.text(),
      gaugeText(LAST_SUCCESS, jobs, (job) => (summaries.get(job)?.lastSuccessAt ?? 0) / 1000),
      gaugeText(NEXT_RUN, jobs, (job) => (next.get(job)?.getTime() ?? 0) / 1000),
      gaugeText(PAUSED, jobs, (job) => (paused.has(job) ? 1 : 0)),
    ].join('');
    return { contentType: this.registry.contentType, body };
  }
}
