/**
 * The events seam: what happens on this node, as plain values, for the consumers that are not on the
 * run path (metrics, the status page, alerts, the one-line terminal output). Emitting never throws
 * and never waits: an observer that fails is logged once and the run goes on.
 *
 * Each event is emitted by the node that did the thing (the one whose write landed), so an event
 * recorded in the store (a run's outcome, a missed period, a takeover) is emitted once across the
 * cluster. Node-local facts (this node lost the store or the Redis quorum) are per node.
 */
import type { Trigger } from '../jobs/types.js';
import type { Logger } from 'pino';
import type { QuorumState } from '../claim/lock.js';
import type { FinalStatus, SkipReason } from '../store/types.js';

/** How a claim ended, as `scheduler_claims_total{outcome}` counts it. */
export type ClaimOutcome = 'won' | 'lost_lock' | 'lost_row' | 'skipped' | 'blocked' | 'error';

interface PeriodRef {
  job: string;
  periodKey: string;
  /** The period's instant. */
  scheduledAt: Date;
  /** The shard of a sharded job's period, when not 0. */
  shard?: number;
}

/** How a ctx.once call ended, as `scheduler_once_total{result}` counts it (a refusal by retryFailed: false, a fence or bad input is not counted). */
export type OnceResult = 'executed' | 'replayed' | 'in_progress' | 'failed';
export const ONCE_RESULTS: readonly OnceResult[] = ['executed', 'replayed', 'in_progress', 'failed'];

export type SchedulerEvent =
  | (PeriodRef & { type: 'claim'; attempt: number; trigger: Trigger; outcome: ClaimOutcome })
  /** A body began; `delayMs` from the period's instant (store clock) for scheduled periods, from the claim otherwise. */
  | (PeriodRef & { type: 'run-started'; attempt: number; trigger: Trigger; runId: string; delayMs: number })
  /**
   * An attempt ended and this node wrote its outcome (`recorded`), or could not (lease lost, shutdown
   * past its deadline). `final`: no attempt is owed after this one (the period's last word).
   */
  | (PeriodRef & {
      type: 'run-finished'; attempt: number; trigger: Trigger; runId: string; status: FinalStatus; reason: string | null;
      durationMs: number; error: string | null; recorded: boolean; final: boolean; nextAttempt: { attempt: number; runAt: Date | null } | null;
    })
  /** Periods recorded skipped by this node without a body (overlap, coalesced, missed, paused, calendar). */
  | { type: 'skipped'; job: string; reason: SkipReason; count: number; first: Date; last: Date }
  /** This node ended another attempt whose lease ran out: `owed` the next attempt, `failed` none left, `dropped` job defined nowhere. */
  | (PeriodRef & { type: 'takeover'; attempt: number; deadNode: string; result: 'owed' | 'failed' | 'dropped' | 'cancelled' })
  /** This node's attempt lost its lease (self-fenced, row taken, another holder's majority). */
  | (PeriodRef & { type: 'lease-lost'; attempt: number; runId: string; cause: string })
  /**
   * The store no longer has this node's attempt row, or no longer its outcome (found by a heartbeat,
   * the outcome write, or the read-back of recent outcomes after the store moved): a failover to a
   * replica that had not received it. `restored`: written back by this node.
   */
  | (PeriodRef & { type: 'row-lost'; attempt: number; runId: string; restored: boolean })
  /** A ctx.once call of a body on this node: fn ran and its result was stored (executed) or it failed, a stored result was replayed, or the caller gave up waiting (in_progress). */
  | { type: 'once'; job: string; key: string; runId: string; result: OnceResult }
  /**
   * A tick of this node left `count` periods it would have raced to the other nodes and the catch-up
   * sweep: its oldest claim in progress had waited `behindMs` (overload; see the scheduler).
   */
  | { type: 'deferred'; count: number; behindMs: number }
  /** Lines of an attempt's stored log that could not be stored (the store away too long, or the node's buffer full). */
  | { type: 'run-log-dropped'; job: string; count: number }
  | { type: 'store'; state: 'ok' | 'down'; error?: string }
  | { type: 'redis'; state: QuorumState }
  | { type: 'clock'; offsetMs: number; rttMs: number };

export type EventType = SchedulerEvent['type'];

export interface SchedulerObserver {
  emit(event: SchedulerEvent): void;
}

export const noEvents: SchedulerObserver = { emit() {} };

/** Several observers behind one; a throwing observer is logged (once per observer) and skipped. */
export class EventBus implements SchedulerObserver {
  private readonly observers: SchedulerObserver[] = [];
  private readonly complained = new Set<SchedulerObserver>();
  constructor(private readonly log?: Logger) {}

  add(observer: SchedulerObserver): () => void {
    this.observers.push(observer);
    return () => {
      const i = this.observers.indexOf(observer);
      if (i >= 0) this.observers.splice(i, 1);
    };
  }

  emit(event: SchedulerEvent): void {
    for (const o of this.observers) {
      try {
        o.emit(event);
      } catch (err) {
        if (!this.complained.has(o)) {
          this.complained.add(o);
          this.log?.warn({ event: event.type, err: { message: err instanceof Error ? err.message : String(err) } }, 'an event observer failed (reported once)');
        }
      }
    }
  }
}

/** Every event at debug level, as one JSON line each (SCHEDULER_LOG_LEVEL=debug). */
export class LoggingObserver implements SchedulerObserver {
  constructor(private readonly log: Logger) {}
  emit(event: SchedulerEvent): void {
    this.log.debug({ event }, `event ${event.type}`);
  }
}

/** Keeps every event, for tests and read-only views. */
export class RecordingObserver implements SchedulerObserver {
  readonly events: SchedulerEvent[] = [];
  private readonly waiters = new Set<() => void>();

  emit(event: SchedulerEvent): void {
    this.events.push(event);
    for (const wake of [...this.waiters]) wake();
  }

  of<T extends EventType>(type: T): Array<Extract<SchedulerEvent, { type: T }>> {
    return this.events.filter((e): e is Extract<SchedulerEvent, { type: T }> => e.type === type);
  }

  /** Resolves with the first event (already recorded or to come) that matches, or rejects after `timeoutMs`. */
  waitFor<T extends EventType>(type: T, match: (e: Extract<SchedulerEvent, { type: T }>) => boolean = () => true, timeoutMs = 30_000): Promise<Extract<SchedulerEvent, { type: T }>> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.of(type).find(match);
        if (!found) return false;
        cleanup();
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`no '${type}' event matched within ${timeoutMs} ms; recorded: ${this.events.map((e) => e.type).join(', ') || 'none'}`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
      };
      const wake = () => void check();
      if (!check()) this.waiters.add(wake);
    });
  }
}
