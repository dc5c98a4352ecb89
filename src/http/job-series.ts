/**
 * The per-job families of /metrics (about 21 series per job: 1,000 jobs are 21,000 series and 1.3 MB
 * of text), rendered here rather than by prom-client: its generic path (label objects hashed, merged
 * and escaped for every sample, on every scrape) took 30-80 ms for 1,000 jobs, past the 50 ms goal in
 * the tail. Here each job's text of the event-driven families (runs, duration, missed) is kept and
 * made again only when an event of that job changed it (a dirty flag, so idle costs nothing: no
 * timer, no background rendering); the three gauges are plain lines per job, rendered per scrape
 * from the summary cache and the schedule. Same text format 0.0.4 as prom-client's, values included
 * (the unit test compares both on the same events).
 */
import { FINAL_STATUSES, type FinalStatus } from '../store/types.js';

/**
 * scheduler_run_duration_seconds' buckets: cron bodies run from well under a second (a ping, a
 * query) to an hour (a backup, a report); each bucket is a series per job, so eight, roughly
 * one per factor of 5.
 */
export const DURATION_BUCKETS: readonly number[] = [0.05, 0.25, 1, 5, 30, 120, 600, 3600];

/**
 * The per-job label. Not `job`: Prometheus sets `job` (the scrape job) on every series it scrapes and
 * files a target's own `job` under `exported_job`, so `{job="nightly"}` would match nothing.
 */
export const JOB_LABEL = 'job_name';

export interface Family {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  /** As prom-client's labelNames (a histogram's `le` not included): what the reference page lists. */
  labelNames: readonly string[];
}

export const RUNS: Family = { name: 'scheduler_runs_total', help: `Attempts whose outcome this node recorded (its own, and those of dead nodes it ended), and periods it recorded skipped, by final status: ${FINAL_STATUSES.join(', ')}`, type: 'counter', labelNames: [JOB_LABEL, 'status'] };
export const DURATION: Family = { name: 'scheduler_run_duration_seconds', help: "Job bodies' run time on this node", type: 'histogram', labelNames: [JOB_LABEL] };
export const MISSED: Family = { name: 'scheduler_missed_periods_total', help: 'Periods this node recorded skipped as missed (older than catchUp with no run)', type: 'counter', labelNames: [JOB_LABEL] };

/** A sample's value as the text format writes it (prom-client's spelling). */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
  return `${v}`;
}

/** A label value escaped as the text format requires (backslash, double quote, line feed). */
export function escapeLabel(value: string): string {
  if (!/[\\\n"]/.test(value)) return value;
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

export function header(f: Family): string {
  return `# HELP ${f.name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n# TYPE ${f.name} ${f.type}\n`;
}

const LE = [...DURATION_BUCKETS.map((b) => formatValue(b)), '+Inf'];

class JobCounts {
  readonly runs = new Map<FinalStatus, number>(FINAL_STATUSES.map((s) => [s, 0]));
  /** Cumulative: buckets[i] counts the observations <= DURATION_BUCKETS[i]; the last one is +Inf. */
  readonly buckets = new Array<number>(DURATION_BUCKETS.length + 1).fill(0);
  sum = 0;
  missed = 0;
  /** The job's lines of each family, or null once an event changed them (made again at the next scrape). */
  text: { runs: string; duration: string; missed: string } | null = null;

  constructor(readonly label: string) {}

  render(): { runs: string; duration: string; missed: string } {
    if (this.text) return this.text;
    const job = `${JOB_LABEL}="${this.label}"`;
    let runs = '';
    for (const [status, n] of this.runs) runs += `${RUNS.name}{${job},status="${status}"} ${formatValue(n)}\n`;
    let duration = '';
    for (let i = 0; i < LE.length; i++) duration += `${DURATION.name}_bucket{le="${LE[i]}",${job}} ${formatValue(this.buckets[i]!)}\n`;
    duration += `${DURATION.name}_sum{${job}} ${formatValue(this.sum)}\n${DURATION.name}_count{${job}} ${formatValue(this.buckets[LE.length - 1]!)}\n`;
    this.text = { runs, duration, missed: `${MISSED.name}{${job}} ${formatValue(this.missed)}\n` };
    return this.text;
  }
}

/** The per-job counters and histogram of this node, each job's series present at 0 from its add(). */
export class JobSeries {
  private readonly jobs = new Map<string, JobCounts>();
  /** The whole text of the last scrape, while no event changed it (a quiet cluster's scrapes join nothing). */
  private last: string | null = null;

  /** Series at 0 for a job (kept when it already has some). */
  add(job: string): void {
    if (this.jobs.has(job)) return;
    this.jobs.set(job, new JobCounts(escapeLabel(job)));
    this.last = null;
  }

  remove(job: string): void {
    if (this.jobs.delete(job)) this.last = null;
  }

  private of(job: string): JobCounts {
    this.add(job);
    this.last = null;
    return this.jobs.get(job)!;
  }

  countRun(job: string, status: FinalStatus, n = 1): void {
    const c = this.of(job);
    c.runs.set(status, (c.runs.get(status) ?? 0) + n);
    c.text = null;
  }

  observeDuration(job: string, seconds: number): void {
    const c = this.of(job);
    for (let i = 0; i < DURATION_BUCKETS.length; i++) if (seconds <= DURATION_BUCKETS[i]!) c.buckets[i]! += 1;
    c.buckets[DURATION_BUCKETS.length]! += 1;
    c.sum += seconds;
    c.text = null;
  }

  countMissed(job: string, n: number): void {
    const c = this.of(job);
    c.missed += n;
    c.text = null;
  }

  /** The three families' text, each a header and its samples (jobs in the order they were added). */
  text(): string {
    if (this.last !== null) return this.last;
    const runs: string[] = [header(RUNS)];
    const duration: string[] = [header(DURATION)];
    const missed: string[] = [header(MISSED)];
    for (const c of this.jobs.values()) {
      const t = c.render();
      runs.push(t.runs);
      duration.push(t.duration);
      missed.push(t.missed);
    }
    this.last = `${runs.join('')}\n${duration.join('')}\n${missed.join('')}\n`;
    return this.last;
  }
}

/** A per-job gauge family: one line per job, `value(job)` read at each scrape. */
export function gaugeText(f: Family, jobs: readonly string[], value: (job: string) => number): string {
  const parts: string[] = [header(f)];
  for (const job of jobs) parts.push(`${f.name}{${JOB_LABEL}="${escapeLabel(job)}"} ${formatValue(value(job))}\n`);
  return `${parts.join('')}\n`;
}
