/**
 * The retention rule (largest catchUp + margin) and the daemon's background pruner, over a fake store:
 * when it prunes, what it logs, that retention off or an unsafe retention prunes nothing, and that
 * stop() aborts a prune in progress; the audit trail's rows pruned by their own retention.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Job } from '../../src/jobs/types.js';
import { PRUNE_MARGIN_MS, RetentionPruner, checkRetention, retentionRefusal } from '../../src/run/retention.js';
import type { AuditStore, PruneOptions, PruneResult, RunStore } from '../../src/store/types.js';

const H = 3_600_000;
const DAY = 24 * H;

function jobs(...catchUps: Array<[string, number]>): Job[] {
  return catchUps.map(([name, catchUpMs]) => ({ name, catchUpMs }) as Job);
}

/** A logger that keeps its lines. */
function memoryLog() {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  return { log, lines };
}

function fakeStore(onPrune: (o: PruneOptions) => Promise<PruneResult> | PruneResult): { store: RunStore; calls: PruneOptions[] } {
  const calls: PruneOptions[] = [];
  const store = { prune: async (o: PruneOptions) => { calls.push(o); return onPrune(o); } } as unknown as RunStore;
  return { store, calls };
}

const result = (over: Partial<PruneResult> = {}): PruneResult => ({ outcome: 'pruned', deleted: 0, cutoff: new Date(0), dryRun: false, batches: 0, ...over });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('checkRetention', () => {
  it('the minimum is the largest catchUp (of any job, enabled or not) plus a margin of 1h', () => {
    expect(PRUNE_MARGIN_MS).toBe(H);
    const c = checkRetention(7 * H, jobs(['a', 15 * 60_000], ['settle', 6 * H], ['b', H]));
    expect(c).toEqual({ ok: true, minimumMs: 7 * H, job: { name: 'settle', catchUpMs: 6 * H } });
    expect(checkRetention(7 * H - 1, jobs(['settle', 6 * H])).ok).toBe(false);
    expect(checkRetention(H, [])).toEqual({ ok: true, minimumMs: H, job: null });
    expect(checkRetention(H - 1, []).ok).toBe(false);
  });

  it('the refusal is one line naming the setting, the value, the job and its catchUp, and the minimum', () => {
    const line = retentionRefusal('--older-than', 2 * H, checkRetention(2 * H, jobs(['settle', 6 * H])));
    expect(line).not.toContain('\n');
    for (const part of ['--older-than 2h', "job 'settle' has catchUp 6h", 'margin of 1h', 'at least 7h']) expect(line).toContain(part);
    expect(retentionRefusal('retention', 10 * 60_000, checkRetention(10 * 60_000, []))).toContain('shorter than the margin of 1h');
  });
});

describe('RetentionPruner (the daemon)', () => {
  it('prunes after the first delay, then every interval, with the retention; logs what it deleted', async () => {
    const { log, lines } = memoryLog();
    const { store, calls } = fakeStore(() => result({ deleted: 12, batches: 1, cutoff: new Date(Date.UTC(2026, 0, 1)) }));
    const p = new RetentionPruner({ store, retentionMs: 30 * DAY, jobs: jobs(['a', H]), log, firstAfterMs: 20, everyMs: 30 });
    expect(p.start()).toBe(true);
    expect(calls).toHaveLength(0);
    await sleep(120);
    await p.stop();
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(calls.every((c) => c.olderThanMs === 30 * DAY && c.dryRun !== true)).toBe(true);
    const done = lines.find((l) => String(l.msg).startsWith('prune: deleted 12'));
    expect(done).toMatchObject({ deleted: 12, retention: '30d', cutoff: '2026-01-01T00:00:00.000Z' });
    const n = calls.length;
    await sleep(80);
    expect(calls).toHaveLength(n);
  });

  it('retention off: never prunes', async () => {
    const { log, lines } = memoryLog();
    const { store, calls } = fakeStore(() => result());
    const p = new RetentionPruner({ store, retentionMs: null, jobs: [], log, firstAfterMs: 1, everyMs: 1 });
    expect(p.start()).toBe(false);
    await sleep(30);
    await p.stop();
    expect(calls).toHaveLength(0);
    expect(lines.some((l) => String(l.msg).includes('retention is off'))).toBe(true);
  });

  it('a retention inside the largest catchUp plus the margin: one warning naming the job, no prune', async () => {
    const { log, lines } = memoryLog();
    const { store, calls } = fakeStore(() => result());
    const p = new RetentionPruner({ store, retentionMs: 2 * H, jobs: jobs(['settle', 6 * H]), log, firstAfterMs: 1, everyMs: 1 });
    expect(p.start()).toBe(false);
    await sleep(30);
    await p.stop();
    expect(calls).toHaveLength(0);
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toContain("job 'settle' has catchUp 6h");
    expect(warnings[0]!.msg).toContain('does not prune');
  });

  it('another node pruning, or a failing store: logged, and the next interval tries again', async () => {
    const { log, lines } = memoryLog();
    let n = 0;
    const { store, calls } = fakeStore(() => {
      n += 1;
      if (n === 1) return result({ outcome: 'locked' });
      throw new Error('store down');
    });
    const p = new RetentionPruner({ store, retentionMs: DAY, jobs: [], log, firstAfterMs: 5, everyMs: 20 });
    p.start();
    await sleep(80);
    await p.stop();
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(lines.some((l) => String(l.msg).includes('another node is pruning'))).toBe(true);
    expect(lines.some((l) => String(l.msg).includes('prune failed') && l.level === 40)).toBe(true);
  });

  it('stop() aborts a prune in progress and waits for it', async () => {
    const { log } = memoryLog();
    let seen: AbortSignal | undefined;
    const { store } = fakeStore(async (o) => {
      seen = o.signal;
      while (!o.signal?.aborted) await sleep(5);
      return result({ outcome: 'aborted' });
    });
    const p = new RetentionPruner({ store, retentionMs: DAY, jobs: [], log, firstAfterMs: 1, everyMs: 1000 });
    p.start();
    await sleep(20);
    expect(seen?.aborted).toBe(false);
    await p.stop();
    expect(seen?.aborted).toBe(true);
    expect(p.last?.outcome).toBe('aborted');
  });

  it('audit rows go by their own retention, counted back from the store clock, even with the runs\' retention off or unsafe', async () => {
    const NOW = Date.UTC(2026, 5, 1);
    for (const [retentionMs, catchUp] of [[null, H], [2 * H, 6 * H], [30 * DAY, H]] as const) {
      const { log, lines } = memoryLog();
      const { store, calls } = fakeStore(() => result());
      (store as unknown as { now: () => Promise<number> }).now = async () => NOW;
      const cutoffs: Date[] = [];
      const auditStore = { prune: async (olderThan: Date) => { cutoffs.push(olderThan); return 3; } } as unknown as AuditStore;
      const p = new RetentionPruner({ store, retentionMs, auditStore, auditRetentionMs: 90 * DAY, jobs: jobs(['a', catchUp]), log, firstAfterMs: 1, everyMs: 1000 });
      expect(p.start()).toBe(true);
      await sleep(40);
      await p.stop();
      expect(cutoffs).toEqual([new Date(NOW - 90 * DAY)]);
      expect(calls, String(retentionMs)).toHaveLength(retentionMs === 30 * DAY ? 1 : 0);
      expect(lines.find((l) => String(l.msg) === 'prune: deleted 3 audit row(s) older than 90d')).toMatchObject({ deleted: 3, auditRetention: '90d' });
    }
    // Both off: nothing to do, nothing armed.
    const { log } = memoryLog();
    expect(new RetentionPruner({ store: fakeStore(() => result()).store, retentionMs: null, auditRetentionMs: null, jobs: [], log }).start()).toBe(false);
  });
});
