/**
 * `jitter` and `shards` as job fields: the jitter's derivation (the same on every call and node,
 * spread over [0, jitter)), the validation of both fields (one line naming file and field), and how
 * history and the status page show a period's shards together; the pause read again after a wait
 * for a jittered start longer than a tick (an executor on a real SQLite store).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Executor } from '../../src/run/execute.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { JobRecord } from '../../src/store/types.js';
import type { Job } from '../../src/jobs/types.js';
import { validateJob } from '../../src/jobs/validate.js';
import { compileSchedule, periodKey } from '../../src/time/schedule.js';
import { jitterDelayMs, shortestGapMs } from '../../src/time/jitter.js';
import { historyText } from '../../src/cli/history.js';
import { jobPageBody } from '../../src/http/page/render.js';
import { adjacentPeriods, shardText } from '../../src/output/periods.js';
import { runView } from '../../src/status/reader.js';
import type { RunRecord } from '../../src/store/types.js';

const noop = async () => {};
const FILE = 'jobs/spread.ts';

function problemOf(def: Record<string, unknown>, field: string): string {
  const { job, problems } = validateJob(FILE, { schedule: '*/10 * * * * *', run: noop, ...def }, 'UTC');
  expect(job).toBeUndefined();
  expect(problems).toHaveLength(1);
  expect(problems[0]!.startsWith(`${FILE}: field '${field}' = `), problems[0]).toBe(true);
  expect(problems[0]).not.toContain('\n');
  return problems[0]!;
}

describe('jitterDelayMs', () => {
  it('is a function of the period key: the same on every call, different across periods', () => {
    const key = periodKey('report', new Date('2026-12-01T02:00:00.000Z'));
    const first = jitterDelayMs(key, 60_000);
    for (let i = 0; i < 100; i++) expect(jitterDelayMs(key, 60_000)).toBe(first);
    // Another job's same instant, and the next period, get their own delays.
    expect(new Set([first, jitterDelayMs(periodKey('other', new Date('2026-12-01T02:00:00.000Z')), 60_000),
      jitterDelayMs(periodKey('report', new Date('2026-12-01T03:00:00.000Z')), 60_000)]).size).toBeGreaterThan(1);
  });

  it('spreads the periods over [0, jitter): every tenth of the range is used, none out of it', () => {
    const jitter = 10_000;
    const buckets = new Array<number>(10).fill(0);
    const start = Date.parse('2026-12-01T00:00:00.000Z');
    for (let i = 0; i < 5000; i++) {
      const d = jitterDelayMs(periodKey('spread', new Date(start + i * 1000)), jitter);
      expect(Number.isInteger(d)).toBe(true);
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThan(jitter);
      buckets[Math.floor(d / 1000)]! += 1;
    }
    // 500 expected per bucket; a uniform hash stays well within 350..650.
    for (const b of buckets) expect(b).toBeGreaterThan(350);
    for (const b of buckets) expect(b).toBeLessThan(650);
  });

  it('is 0 without a jitter', () => {
    expect(jitterDelayMs('x@2026-12-01T00:00:00.000Z', 0)).toBe(0);
  });

  it('the shortest gap of a schedule is taken over its next periods', () => {
    expect(shortestGapMs(compileSchedule('*/10 * * * * *', 'UTC'))).toBe(10_000);
    // 00, 05 and 30 past: the shortest gap is 5 minutes.
    expect(shortestGapMs(compileSchedule('0,5,30 * * * *', 'UTC'))).toBe(5 * 60_000);
  });
});

describe('validateJob: jitter', () => {
  it('is accepted below the shortest gap and stored in ms; absent, there is none', () => {
    expect(validateJob(FILE, { schedule: '*/10 * * * * *', run: noop, jitter: '9s' }, 'UTC').job?.jitterMs).toBe(9000);
    expect(validateJob(FILE, { schedule: '*/10 * * * * *', run: noop, jitter: 2500 }, 'UTC').job?.jitterMs).toBe(2500);
    expect(validateJob(FILE, { schedule: '*/10 * * * * *', run: noop }, 'UTC').job?.jitterMs ?? 0).toBe(0);
  });

  it('refuses a non-duration, a negative one, and one not shorter than the shortest gap', () => {
    expect(problemOf({ jitter: 'soon' }, 'jitter')).toContain('expected milliseconds');
    expect(problemOf({ jitter: -5 }, 'jitter')).toContain('expected milliseconds');
    expect(problemOf({ jitter: '10s' }, 'jitter')).toContain("shorter than the schedule's shortest gap between periods (10s)");
    // The gap is the shortest one, not the average: 5 minutes between :00 and :05.
    const { problems } = validateJob(FILE, { schedule: '0,5,30 * * * *', run: noop, jitter: '6m' }, 'UTC');
    expect(problems).toEqual([`${FILE}: field 'jitter' = "6m": expected a duration shorter than the schedule's shortest gap between periods (5m)`]);
  });
});

describe('validateJob: shards', () => {
  it('accepts 1..1000; absent, one shard', () => {
    expect(validateJob(FILE, { schedule: '* * * * *', run: noop, shards: 4 }, 'UTC').job?.shards).toBe(4);
    expect(validateJob(FILE, { schedule: '* * * * *', run: noop, shards: 1000 }, 'UTC').job?.shards).toBe(1000);
    expect(validateJob(FILE, { schedule: '* * * * *', run: noop }, 'UTC').job?.shards ?? 1).toBe(1);
  });

  it('refuses 0, 1001, a fraction and a string, in one line naming the field', () => {
    for (const shards of [0, 1001, 2.5, '4', -1]) {
      expect(problemOf({ shards }, 'shards')).toContain('expected a whole number from 1 to 1000');
    }
  });
});

describe('a period\'s shards shown together', () => {
  const at = (iso: string) => new Date(iso);
  function row(job: string, scheduledAt: string, shard: number, attempt = 1, over: Partial<RunRecord> = {}): RunRecord {
    return {
      id: `${job}-${scheduledAt}-${shard}-${attempt}`, job, scheduledAt: at(scheduledAt), periodKey: `${job}@${at(scheduledAt).toISOString()}`, shard, attempt,
      trigger: 'schedule', status: 'succeeded', reason: null, nodeId: `node-${shard % 3}`, startedAt: at(scheduledAt), claimedAt: at(scheduledAt), runAt: null,
      finishedAt: at(scheduledAt), durationMs: 12, heartbeatAt: null, leaseMs: 30_000, result: null, resultNote: null, error: null, errorStack: null, ...over,
    };
  }
  // Newest first by start, as the store returns them: the shards of two periods interleaved with another job.
  const runs = [
    row('split', '2026-12-01T10:00:01Z', 2), row('other', '2026-12-01T10:00:01Z', 0), row('split', '2026-12-01T10:00:01Z', 0),
    row('split', '2026-12-01T10:00:00Z', 3), row('split', '2026-12-01T10:00:01Z', 1, 2), row('split', '2026-12-01T10:00:01Z', 1, 1, { status: 'failed' }),
    row('split', '2026-12-01T10:00:00Z', 1),
  ];

  it('adjacentPeriods: the rows of one period together, where its newest row is, by shard (attempts newest first)', () => {
    expect(adjacentPeriods(runs).map((r) => `${r.job} ${r.scheduledAt.toISOString().slice(17, 19)} ${r.shard}#${r.attempt}`)).toEqual([
      'split 01 0#1', 'split 01 1#2', 'split 01 1#1', 'split 01 2#1', 'other 01 0#1', 'split 00 1#1', 'split 00 3#1',
    ]);
  });

  it('history text: a SHARD column i/N when a sharded job is among the rows; none otherwise', () => {
    const view = { now: at('2026-12-01T10:01:00Z'), zoneOf: () => 'UTC' };
    const text = historyText(adjacentPeriods(runs), view, (job) => (job === 'split' ? 4 : 1));
    const lines = text.split('\n');
    expect(lines[0]).toMatch(/^JOB +PERIOD +SHARD +ATTEMPT +TRIGGER +STATUS +DURATION$/);
    const cells = lines.filter((l) => /^(split|other) /.test(l)).map((l) => l.split(/ {2,}/).slice(0, 4).join(' | '));
    expect(cells).toEqual([
      'split | 12-01 10:00:01Z | 0/4 | 1', 'split | 12-01 10:00:01Z | 1/4 | 2', 'split | 12-01 10:00:01Z | 1/4 | 1', 'split | 12-01 10:00:01Z | 2/4 | 1',
      'other | 12-01 10:00:01Z | - | 1', 'split | 12-01 10:00:00Z | 1/4 | 1', 'split | 12-01 10:00:00Z | 3/4 | 1',
    ]);
    expect(historyText([row('other', '2026-12-01T10:00:01Z', 0)], view).split('\n')[0]).not.toContain('SHARD');
    expect(shardText(0, 1)).toBe('');
    expect(shardText(3, 4)).toBe('3/4');
  });

  it('status page: a sharded job\'s page has a shard column, its rows marked by shard', () => {
    const base = { name: 'split', schedule: '* * * * * *', timezone: 'UTC', next: [], last: null, lastEnded: null, lastSuccessAt: null, paused: null, running: 0, failures24h: 0, missed24h: 0, overlap: 'skip' as const, timeout: null, retries: 0, file: 'jobs/split.mjs' };
    const detail = { job: { ...base, shards: 4 }, runs: adjacentPeriods(runs).filter((r) => r.job === 'split').map(runView), periods: [] };
    const html = String(jobPageBody(detail, at('2026-12-01T10:01:00Z')));
    expect(html).toContain('<th>shard</th>');
    expect([...html.matchAll(/data-shard="(\d)"/g)].map((m) => m[1])).toEqual(['0', '1', '1', '2', '1', '3']);
    expect(html).toContain('<td class="num">2/4</td>');
    const plain = String(jobPageBody({ ...detail, job: { ...base, shards: 1 } }, at('2026-12-01T10:01:00Z')));
    expect(plain).not.toContain('<th>shard</th>');
  });
});

describe('a wait before the body longer than a tick reads the pause again', () => {
  let dir: string;
  let store: KnexRunStore;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'jitter-pause-'));
    store = await KnexRunStore.open({ kind: 'sqlite', path: join(dir, 's.db'), url: `sqlite:${join(dir, 's.db')}` });
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The jobs table as the executor reads it: paused or not, each read timed. */
  function pauses(paused: () => boolean) {
    const reads: number[] = [];
    return {
      reads,
      get: async (names: string[]) => {
        reads.push(Date.now());
        return new Map(names.map((name) => [name, { name, paused: paused(), pausedReason: paused() ? 'incident' : null } as JobRecord]));
      },
    };
  }

  async function attempt(name: string, waitMs: number, source: ReturnType<typeof pauses>, ignorePause = false) {
    let ran = 0;
    const job = { name, timeoutMs: null, lockTtlMs: 30_000, retries: 0, retryDelayMs: 1000, run: () => { ran++; } } as unknown as Job;
    const at = new Date(Math.floor(Date.now() / 1000) * 1000);
    const inserted = await store.insertRun({ job: name, scheduledAt: at, periodKey: periodKey(name, at), attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: 30_000 });
    if (inserted.outcome !== 'inserted') throw new Error('setup: the row was not inserted');
    const executor = new Executor(store, 'n1', pino({ level: 'silent' }), { pauses: source });
    const startAt = Date.now() + waitMs;
    const result = await executor.execute(job, inserted.run, null, undefined, new Date(startAt), undefined, { ignorePause });
    const [row] = await store.periodRuns(name, at);
    return { result, row: row!, ran, startAt };
  }

  it('a wait of 1.5 s: the pause that landed meanwhile is read ~100 ms before the start; no body, the row skipped (paused)', async () => {
    let paused = false;
    const source = pauses(() => paused);
    setTimeout(() => (paused = true), 300);
    const { result, row, ran, startAt } = await attempt('jitter-paused', 1500, source);
    expect(ran).toBe(0);
    expect(source.reads).toHaveLength(1);
    expect(startAt - source.reads[0]!).toBeGreaterThanOrEqual(50);
    expect(startAt - source.reads[0]!).toBeLessThan(400);
    expect(result).toMatchObject({ status: 'skipped', recorded: true, next: null });
    expect([row.status, row.reason]).toEqual(['skipped', 'paused']);
  });

  it('a wait of 1.5 s with no pause: one read, the body runs at its start', async () => {
    const source = pauses(() => false);
    const { result, ran } = await attempt('jitter-free', 1500, source);
    expect(source.reads).toHaveLength(1);
    expect([ran, result.status]).toEqual([1, 'succeeded']);
  });

  it('a wait of a tick or less (a period claimed ahead, a small jitter), or a forced run: no read (the claim read it); the body runs', async () => {
    const short = pauses(() => true);
    const a = await attempt('jitter-short', 600, short);
    expect(short.reads).toEqual([]);
    expect([a.ran, a.result.status]).toEqual([1, 'succeeded']);
    const forced = pauses(() => true);
    const b = await attempt('jitter-forced', 1500, forced, true);
    expect(forced.reads).toEqual([]);
    expect([b.ran, b.result.status]).toEqual([1, 'succeeded']);
  });
});

