/**
 * A StatusReader over fixed data, for the status page's tests before (and besides) a real daemon:
 * six jobs covering each filter, one in Europe/Berlin whose next periods cross the spring DST
 * change of 2026-03-29, user text with markup in it, four nodes (one stopped, one silent). The periods come from the real
 * period math (src/time/schedule.ts), so the DST mark is the one a daemon would compute.
 */
import type { InvalidJobView, JobDetailView, JobView, NodeView, RunLogView, RunView, RunsQuery, StatusReader, SummaryView } from '../../src/status/model.js';
import type { RunLogLineView } from '../../src/runlog/view.js';
import { compileSchedule, describePeriods, nextPeriods, periodKey } from '../../src/time/schedule.js';

/** A Wednesday: Berlin's next periods at 03:30 are 26, 27, 28 March (CET) then 29 March (CEST). */
export const FIXTURE_NOW = new Date('2026-03-25T10:00:00.000Z');

export const HOSTILE_ERROR = '<script>window.__injected = true</script><img src=x onerror="window.__injected=true">boom\n    at stack (line 2)';

const iso = (ms: number) => new Date(ms).toISOString();
const ago = (minutes: number) => iso(FIXTURE_NOW.getTime() - minutes * 60_000);

export interface FixtureJob {
  name: string;
  schedule: string;
  timezone: string;
  runs: RunView[];
  paused?: JobView['paused'];
  running?: number;
  failures24h?: number;
  missed24h?: number;
  shards?: number;
}

/** Run ids of the fixtures' attempts, in the order they are made. */
let fixtureRunId = 0;

function run(job: string, scheduledAt: string, status: RunView['status'], extra: Partial<RunView> = {}): RunView {
  const started = extra.startedAt !== undefined ? extra.startedAt : iso(Date.parse(scheduledAt) + 40);
  const durationMs = extra.durationMs !== undefined ? extra.durationMs : status === 'running' || status === 'pending' ? null : 1234;
  fixtureRunId += 1;
  return {
    runId: String(fixtureRunId), job, scheduledAt, periodKey: periodKey(job, new Date(scheduledAt)), shard: 0, attempt: 1, trigger: 'schedule', status, reason: null,
    nodeId: 'node-a', startedAt: started, finishedAt: started && durationMs !== null ? iso(Date.parse(started) + durationMs) : null,
    durationMs, error: null, ...extra,
  };
}

function berlinRuns(): RunView[] {
  // Daily at 03:30 Berlin (02:30 UTC in winter): the 30 days up to this morning, newest first.
  const out: RunView[] = [];
  for (let day = 0; day < 30; day++) {
    const at = Date.parse('2026-03-25T02:30:00.000Z') - day * 86_400_000;
    out.push(run('berlin-nightly', iso(at), day === 3 ? 'failed' : 'succeeded', day === 3 ? { error: 'upstream refused\nmore', nodeId: 'node-b' } : {}));
  }
  return out;
}

export function fixtureJobs(): FixtureJob[] {
  return [
    { name: 'berlin-nightly', schedule: '0 30 3 * * *', timezone: 'Europe/Berlin', runs: berlinRuns(), failures24h: 0 },
    {
      name: 'order-sync', schedule: '5 * * * *', timezone: 'UTC', failures24h: 2, missed24h: 1,
      runs: [
        run('order-sync', '2026-03-25T09:05:00.000Z', 'failed', { error: HOSTILE_ERROR }),
        run('order-sync', '2026-03-25T08:05:00.000Z', 'skipped', { reason: 'missed', startedAt: null, durationMs: null }),
        run('order-sync', '2026-03-25T07:05:00.000Z', 'failed', { error: 'timeout talking to <db>' }),
      ],
    },
    { name: 'fresh-job', schedule: '0 2 * * *', timezone: 'Asia/Shanghai', runs: [] },
    {
      name: 'paused-report', schedule: '0 6 * * 1', timezone: 'America/New_York',
      paused: { reason: 'migration <b>week</b>', since: ago(90) },
      runs: [run('paused-report', '2026-03-23T10:00:00.000Z', 'succeeded')],
    },
    {
      name: 'long-export', schedule: '*/30 * * * *', timezone: 'UTC', running: 1,
      runs: [run('long-export', '2026-03-25T09:30:00.000Z', 'running', { nodeId: 'node-b' }), run('long-export', '2026-03-25T09:00:00.000Z', 'succeeded')],
    },
    {
      name: 'retrying', schedule: '*/15 * * * *', timezone: 'UTC', failures24h: 1,
      runs: [
        run('retrying', '2026-03-25T09:45:00.000Z', 'pending', { attempt: 2, trigger: 'retry', startedAt: null }),
        run('retrying', '2026-03-25T09:45:00.000Z', 'timed_out', { error: 'timeout after 10s' }),
      ],
    },
  ];
}

export const FIXTURE_NODES: NodeView[] = [
  { id: 'node-a', host: 'host-a', pid: 101, version: '0.1.0', startedAt: ago(600), heartbeatAt: ago(0.1), inFlight: 0, clockOffsetMs: 3, state: 'running', alive: true, storeHost: 'db-1:3306', jobSet: 'a1b2c3d4e5f6' },
  { id: 'node-b', host: 'host-b', pid: 202, version: '0.1.0', startedAt: ago(300), heartbeatAt: ago(0.2), inFlight: 1, clockOffsetMs: -12, state: 'running', alive: true, storeHost: 'db-1:3306', jobSet: 'a1b2c3d4e5f6' },
  { id: 'node-c', host: 'host-c', pid: 303, version: '0.0.9', startedAt: ago(5000), heartbeatAt: ago(2000), inFlight: 0, clockOffsetMs: 0, state: 'stopped', alive: false, storeHost: 'db-2:3306', jobSet: 'a1b2c3d4e5f6' },
  { id: 'node-d', host: 'host-d', pid: 404, version: '0.1.0', startedAt: ago(100), heartbeatAt: ago(1), inFlight: 1, clockOffsetMs: 0, state: 'running', alive: false, storeHost: null, jobSet: 'a1b2c3d4e5f6' },
];

export const FIXTURE_INVALID: InvalidJobView[] = [{ file: 'broken.ts', problems: ['schedule: \'<img src=x onerror="window.__injected=true">\' is not a cron expression'] }];

/**
 * Long content for the overflow checks (a page at a laptop's and a phone's width): long names with
 * and without break points, long expressions and zones, every run status with long errors and
 * reasons, paused jobs with long reasons, several attempts.
 */
export function longContentJobs(): FixtureJob[] {
  const at = '2026-03-25T09:00:00.000Z';
  const statuses: RunView['status'][] = ['succeeded', 'failed', 'timed_out', 'abandoned', 'interrupted', 'skipped', 'pending', 'running'];
  const long = statuses.map((status, i): FixtureJob => {
    const name = i % 2 === 0 ? `nightly-warehouse-export-of-every-customer-order-${status}` : `aVeryLongJobNameWithoutAnyBreakPointWhatsoever${status}`;
    const ended = run(name, at, status === 'running' ? 'failed' : status, {
      attempt: status === 'pending' ? 7 : 1, shard: i === 1 ? 13 : 0, nodeId: LONG_NODES[4]!.id,
      reason: status === 'skipped' ? 'overlap with the attempt still running on another node' : status === 'abandoned' ? 'lease lost: node stopped heartbeating' : null,
      error: status === 'succeeded' || status === 'skipped' ? null : `Error: connect ECONNREFUSED 10.20.30.40:5432 while writing batch 17 of 230 to warehouse.orders_2026_03_partitioned_by_customer_region_and_day (${status}) ${'x'.repeat(80)}`,
      output: status === 'failed' ? `${'a very long line of output without a newline '.repeat(12)}\n${'y'.repeat(300)}` : null,
    });
    return {
      name, shards: i === 1 ? 16 : 1,
      schedule: i % 2 === 0 ? '0 0,15,30,45 1-5,13-17 1-7,15-21 JAN-MAR,JUL-SEP MON-FRI' : '*/7 * * * * *',
      timezone: i % 2 === 0 ? 'America/Argentina/ComodRivadavia' : 'Europe/Berlin',
      failures24h: i * 1111, missed24h: i * 222, running: status === 'running' ? 12 : 0,
      ...(i % 3 === 0 ? { paused: { reason: `paused for the data-centre migration of the orders database to the new cluster, ask #ops-oncall before resuming (${status})`, since: ago(4000) } } : {}),
      runs: status === 'running' ? [run(name, at, 'running', { nodeId: LONG_NODES[4]!.id }), ended] : [ended],
    };
  });
  return [...fixtureJobs(), ...long];
}

/** Nodes with long ids and hosts, in every state. */
export const LONG_NODES: NodeView[] = [
  ...FIXTURE_NODES,
  { id: 'cron-worker-eu-west-1a-7f9c2d1e-4b3a-4c2e-9f1d-0123456789ab', host: 'ip-10-20-30-40.eu-west-1.compute.internal', pid: 4194304, version: '0.1.0-rc.12+build.20260325', startedAt: ago(60000), heartbeatAt: ago(0.1), inFlight: 128, clockOffsetMs: -123456, state: 'stopping', alive: true, storeHost: 'orders-primary.cluster-abcdefghijkl.eu-west-1.rds.amazonaws.com:5432', jobSet: 'a1b2c3d4e5f6' },
  { id: 'NodeIdWithoutAnyBreakPointAtAllForTheWidthCheck0123456789', host: 'a-rather-long-hostname-without-dots-for-the-width-check', pid: 5, version: '0.1.0', startedAt: ago(10), heartbeatAt: ago(100), inFlight: 0, clockOffsetMs: 0, state: 'running', alive: false, storeHost: null, jobSet: 'a1b2c3d4e5f6' },
];

export const LONG_INVALID: InvalidJobView[] = [
  ...FIXTURE_INVALID,
  { file: '/etc/cluster-cron/jobs/teams/warehouse/exports/nightly-warehouse-export-of-every-customer-order.ts', problems: ['timezone: \'America/Argentina/ComodRivadavia_Nowhere_At_All\' is not an IANA zone', `name: ${'x'.repeat(120)} is longer than 100 characters`] },
];

export interface FixtureOptions {
  redis?: SummaryView['redis'];
  nodes?: NodeView[];
  invalid?: InvalidJobView[];
}

function jobView(job: FixtureJob, now: Date): JobView {
  const schedule = compileSchedule(job.schedule, job.timezone);
  const newest = job.runs[0];
  const success = job.runs.find((r) => r.status === 'succeeded');
  return {
    name: job.name, schedule: job.schedule, timezone: job.timezone,
    next: nextPeriods(schedule, now, 3).map((d) => d.toISOString()),
    last: newest ? { scheduledAt: newest.scheduledAt, status: newest.status, finishedAt: newest.finishedAt, attempt: newest.attempt, error: newest.error } : null,
    lastEnded: ((e) => (e ? { scheduledAt: e.scheduledAt, status: e.status, finishedAt: e.finishedAt, attempt: e.attempt, error: e.error } : null))(job.runs.find((r) => r.status !== 'running' && r.status !== 'pending')),
    lastSuccessAt: success?.finishedAt ?? null,
    paused: job.paused ?? null, running: job.running ?? 0, failures24h: job.failures24h ?? 0, missed24h: job.missed24h ?? 0,
    overlap: 'skip', timeout: 600_000, retries: 2, shards: job.shards ?? 1, file: `/etc/cluster-cron/jobs/${job.name}.ts`,
  };
}

/** The reader; `jobs` may be replaced (the bench and the tests make their own lists). */
export class FixtureReader implements StatusReader {
  constructor(private readonly list: FixtureJob[] = fixtureJobs(), private readonly now: () => Date = () => FIXTURE_NOW, private readonly options: FixtureOptions = {}) {}

  async summary(): Promise<SummaryView> {
    const jobs = this.list.map((j) => jobView(j, this.now()));
    return {
      nodeId: 'node-a', version: '0.1.0', nodesAlive: this.nodeList().filter((n) => n.alive).length,
      store: { kind: 'postgres', state: 'ok' }, redis: this.options.redis ?? 'degraded', jobs: jobs.length, invalidJobs: this.invalid().length,
      paused: jobs.filter((j) => j.paused).length, running: jobs.reduce((n, j) => n + j.running, 0),
      failures24h: jobs.reduce((n, j) => n + j.failures24h, 0), missed24h: jobs.reduce((n, j) => n + j.missed24h, 0),
      clockOffsetMs: 3, readAt: iso(this.now().getTime() - 2000),
    };
  }

  async jobs(): Promise<JobView[]> {
    return this.list.map((j) => jobView(j, this.now()));
  }

  async job(name: string): Promise<JobDetailView | null> {
    const job = this.list.find((j) => j.name === name);
    if (!job) return null;
    const periods = describePeriods(compileSchedule(job.schedule, job.timezone), this.now(), 10).map((p) => ({ utc: p.utc, local: p.local, dst: p.dst ?? null }));
    return { job: jobView(job, this.now()), runs: job.runs.slice(0, 100), periods };
  }

  async runs(query: RunsQuery): Promise<RunView[]> {
    const all = this.list.flatMap((j) => j.runs).filter((r) => (!query.job || r.job === query.job) && (!query.status || r.status === query.status));
    return all.slice(0, query.limit ?? 100);
  }

  /** Every fixture attempt has the same log: long lines, every stream, a note of what was cut. */
  async runLog(runId: string, options: { afterSeq?: number } = {}): Promise<RunLogView | null> {
    const run = this.list.flatMap((j) => j.runs).find((r) => r.runId === runId);
    if (!run) return null;
    const at = (ms: number) => new Date(Date.parse(run.startedAt ?? run.scheduledAt) + ms).toISOString();
    const all: RunLogLineView[] = [
      { seq: 1, at: at(1), level: 'info', stream: 'log', line: 'starting the export of <b>orders</b>', fields: { batch: 1, password: '***' } },
      { seq: 2, at: at(5), level: 'info', stream: 'stdout', line: `a line with no space to break at: ${'x'.repeat(600)}`, fields: null },
      { seq: 3, at: at(9), level: 'warn', stream: 'stderr', line: 'retrying the upstream call (502)', fields: null },
      { seq: 4, at: at(12), level: 'warn', stream: 'note', line: '1200 line(s) (98765 bytes) cut here: the log keeps its first and last 524288 bytes (logMaxSize 1048576)', fields: null },
      { seq: 1205, at: at(900), level: 'error', stream: 'log', line: 'upstream refused', fields: { err: { type: 'Error', message: 'upstream refused', stack: `Error: upstream refused\n    at run (file:///srv/jobs/${'deep/'.repeat(40)}export.mjs:12:9)` } } },
    ];
    const lines = all.filter((l) => l.seq > (options.afterSeq ?? 0));
    const done = run.status !== 'running' && run.status !== 'pending';
    return { runId, run, lines, next: lines.length > 0 ? lines[lines.length - 1]!.seq : options.afterSeq ?? 0, done };
  }

  async nodes(): Promise<NodeView[]> {
    return this.nodeList();
  }

  private nodeList(): NodeView[] {
    return this.options.nodes ?? FIXTURE_NODES;
  }

  invalid(): InvalidJobView[] {
    return this.options.invalid ?? FIXTURE_INVALID;
  }
}
