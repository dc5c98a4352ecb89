/**
 * A daemon's share of the backfills: it claims periods of each running backfill (the store keeps
 * the claims at most the backfill's concurrency, cluster-wide), runs each as trigger 'backfill', and
 * records its outcome on the period.
 *
 * Once, whatever dies: the runs table, not the claim, says what ran. When a node first takes a
 * period it records the period's last attempt (its base); the backfill's attempts are the later
 * ones. A node that takes a period over (its holder died, or paused past the claim's lease) reads
 * the period's rows: an attempt after the base that ended is the period's outcome (nothing runs
 * again); one still running or owed is waited for (the owed-work sweep resumes it if its node died,
 * as for any run); none yet, and attempt base + 1 is claimed under the unique key (of two nodes,
 * one wins). Without `force`, a period whose last attempt before the base succeeded is skipped.
 */
import { errorMessage } from '../errors.js';
import type { Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { PeriodRunner } from '../run/period.js';
import type { BackfillPeriod, BackfillPeriodState, BackfillRecord, BackfillStore, JobStore, RunRecord, RunStore } from '../store/types.js';

/** A claim's lease: renewed every third of it while the period is held. */
export const BACKFILL_LEASE_MS = 15_000;
/** How often a node looks for work while a backfill runs (it looks again at once after a period ends). */
const POLL_MS = 500;
/** How often it looks when none runs: one cheap read, the idle node's cost; a new backfill starts within it. */
const IDLE_POLL_MS = 2000;
/** Periods claimed in one transaction: a few, so that the nodes share a backfill. */
const CLAIM_AT_ONCE = 4;
/** How long a period whose attempt runs elsewhere is waited for between reads. */
const WAIT_MS = 1000;

type Running = Pick<BackfillRecord, 'id' | 'job' | 'concurrency' | 'force'>;

export interface BackfillRunnerOptions {
  backfills: BackfillStore;
  runs: RunStore;
  jobStore: Pick<JobStore, 'get'>;
  runner: PeriodRunner;
  nodeId: string;
  log: Logger;
  /** The jobs this node runs now (they change with a reload). */
  jobs: () => ReadonlyMap<string, Job>;
  leaseMs?: number;
}

/** The state of a period whose attempt ended with this status. */
export function stateOfStatus(status: string): Exclude<BackfillPeriodState, 'pending' | 'claimed'> {
  if (status === 'succeeded') return 'succeeded';
  if (status === 'skipped') return 'skipped';
  if (status === 'cancelled') return 'cancelled';
  return 'failed';
}

const periodId = (p: { backfillId: string; idx: number }) => `${p.backfillId}#${p.idx}`;

export class BackfillRunner {
  private readonly held = new Map<string, BackfillPeriod>();
  private readonly tasks = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private renewer: NodeJS.Timeout | undefined;
  private stopping = false;
  private looping = false;
  private again = false;
  private warnedAt = -Infinity;
  private readonly unknownSaid = new Set<string>();
  private readonly leaseMs: number;

  constructor(private readonly o: BackfillRunnerOptions) {
    this.leaseMs = o.leaseMs ?? BACKFILL_LEASE_MS;
  }

  start(): void {
    this.schedule(0);
    this.renewer = setInterval(() => void this.renew(), Math.floor(this.leaseMs / 3));
    this.renewer.unref();
  }

  /** Periods this node holds now. */
  get size(): number {
    return this.held.size;
  }

  /** Takes no new period; the runs in flight end as the scheduler's do (its stop waits for them). */
  stop(): void {
    this.stopping = true;
    if (this.timer) clearTimeout(this.timer);
  }

  /** After stop(): waits for the periods in hand, and gives back those not run. */
  async stopped(): Promise<void> {
    this.stop();
    while (this.tasks.size > 0) await Promise.allSettled([...this.tasks]);
    if (this.renewer) clearInterval(this.renewer);
    const left = [...this.held.values()];
    this.held.clear();
    if (left.length > 0) await this.o.backfills.release(this.o.nodeId, left, 0).catch(() => {});
  }

  private schedule(ms: number): void {
    if (this.stopping) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.loop(), ms);
    this.timer.unref?.();
  }

  private warn(err: unknown, what: string): void {
    // Once every 30 s at most: while the store is away, every read meets it.
    const now = performance.now();
    const level = now - this.warnedAt >= 30_000 ? 'warn' : 'debug';
    if (level === 'warn') this.warnedAt = now;
    this.o.log[level]({ err: { message: errorMessage(err) } }, `backfill: ${what}`);
  }

  private async loop(): Promise<void> {
    if (this.looping) {
      this.again = true;
      return;
    }
    this.looping = true;
    let took = 0;
    let any = false;
    try {
      const running = await this.o.backfills.running();
      any = running.length > 0;
      if (any) took = await this.take(running);
    } catch (err) {
      this.warn(err, 'periods not claimed (they are claimed again shortly)');
    } finally {
      this.looping = false;
    }
    if (this.again || took > 0) {
      this.again = false;
      this.schedule(0);
    } else {
      this.schedule(any ? POLL_MS : IDLE_POLL_MS);
    }
  }

  private async take(running: Running[]): Promise<number> {
    const jobs = this.o.jobs();
    const names = [...new Set(running.map((b) => b.job))];
    const rows = await this.o.jobStore.get(names);
    let took = 0;
    for (const b of running) {
      if (this.stopping) break;
      const job = jobs.get(b.job);
      if (!job) {
        // Another node may have the job: this one leaves the backfill to it.
        if (!this.unknownSaid.has(b.id)) this.o.log.warn({ backfill: b.id, job: b.job }, `backfill ${b.id}: job '${b.job}' is not in this node's job set; its periods are left to the nodes that have it`);
        this.unknownSaid.add(b.id);
        continue;
      }
      // A paused job's periods wait for `resume`, as its owed attempts do.
      if (rows.get(b.job)?.paused) continue;
      const mine = [...this.held.values()].filter((p) => p.backfillId === b.id).length;
      const want = Math.min(CLAIM_AT_ONCE, b.concurrency - mine);
      if (want <= 0) continue;
      const claimed = await this.o.backfills.claim(b.id, this.o.nodeId, this.leaseMs, want);
      took += claimed.length;
      for (const p of claimed) this.begin(b, job, p);
      // Nothing held here and nothing left to claim: the backfill may be over (the store decides).
      if (mine === 0 && claimed.length === 0 && (await this.o.backfills.completeIfDone(b.id))) this.o.log.info({ backfill: b.id, job: b.job }, `backfill ${b.id} of ${b.job} done`);
    }
    return took;
  }

  private begin(b: Running, job: Job, p: BackfillPeriod): void {
    const id = periodId(p);
    this.held.set(id, p);
    const task = this.process(b, job, p).catch((err: unknown) => {
      this.warn(err, `period ${p.scheduledAt.toISOString()} of ${b.id} given back`);
      return this.o.backfills.release(this.o.nodeId, [p], 2000).catch(() => {});
    }).finally(() => {
      this.held.delete(id);
      this.tasks.delete(task);
      this.schedule(0);
    });
    this.tasks.add(task);
  }

  private async process(b: Running, job: Job, p: BackfillPeriod): Promise<void> {
    const { backfills, runs } = this.o;
    let rows = await runs.periodRuns(job.name, p.scheduledAt);
    const base = p.baseAttempt ?? (await backfills.setBase(p.backfillId, p.idx, rows.at(-1)?.attempt ?? 0));
    for (;;) {
      const mine = rows.filter((r) => r.attempt > base);
      const last = mine.at(-1);
      if (last) {
        if (last.status !== 'running' && last.status !== 'pending') return backfills.finish(p.backfillId, p.idx, stateOfStatus(last.status), last.attempt, last.status);
        // Its node runs it, or the owed-work sweep resumes it: waited for, while this node holds the period.
        if (this.stopping) return backfills.release(this.o.nodeId, [p], 0);
        await new Promise((r) => setTimeout(r, WAIT_MS));
        rows = await runs.periodRuns(job.name, p.scheduledAt);
        continue;
      }
      const before: RunRecord | undefined = rows.filter((r) => r.attempt <= base).at(-1);
      if (before && before.status === 'succeeded' && !b.force) return backfills.finish(p.backfillId, p.idx, 'skipped', before.attempt, 'succeeded-before');
      if (before && (before.status === 'running' || before.status === 'pending')) {
        // The schedule (or an owed retry) has the period now: taken again later.
        return backfills.release(this.o.nodeId, [p], 5000);
      }
      if (this.stopping) return backfills.release(this.o.nodeId, [p], 0);
      const result = await this.o.runner.runPeriod(job, p.scheduledAt, 'backfill', { attempt: base + 1, checkOverlap: 'none', followOwed: true });
      if (result.claim === 'error' || (result.claim === 'stopped' && result.attempts.length === 0)) return backfills.release(this.o.nodeId, [p], result.claim === 'error' ? 2000 : 0);
      const ended = result.attempts.at(-1);
      if (ended && ended.recorded && !ended.next) return backfills.finish(p.backfillId, p.idx, stateOfStatus(ended.status), ended.attempt, ended.status);
      // Not claimed here (another node's lock or row, at the same moment): read again, not at once.
      if (result.attempts.length === 0) await new Promise((r) => setTimeout(r, 200));
      rows = await runs.periodRuns(job.name, p.scheduledAt);
    }
  }

  private async renew(): Promise<void> {
    if (this.held.size === 0) return;
    await this.o.backfills.renew(this.o.nodeId, [...this.held.values()], this.leaseMs).catch((err: unknown) => this.warn(err, 'claims not renewed'));
  }
}
