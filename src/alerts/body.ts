/**
 * What an alert says: the JSON body POSTed to SCHEDULER_ALERT_WEBHOOK (a stable shape, documented in
 * the README), derived from the scheduler's events. Every key is always present (null when it does
 * not apply). `id` is a stable key of the event: the same event gives the same id on every node and
 * in every delivery, and is sent as the Idempotency-Key header too.
 */
import type { SchedulerEvent } from '../events/events.js';
import { periodKey } from '../time/schedule.js';

export type AlertKind = 'failed' | 'timed_out' | 'missed' | 'abandoned' | 'store_lost' | 'store_back' | 'store_row_lost' | 'redis_lost' | 'redis_back';

export interface AlertBody {
  kind: AlertKind;
  job: string | null;
  /** The period's instant (ISO); for `missed`, the first missed period. */
  period: string | null;
  periodKey: string | null;
  attempt: number | null;
  /** The status recorded for the period (`failed`, `timed_out`, `skipped`); null for node alerts. */
  status: string | null;
  /** The error's first line (a node alert: why the store or Redis was lost). */
  error: string | null;
  /** Periods the alert covers: 1, or the number of missed periods in `missed`. */
  count: number;
  /** The node that recorded the event. */
  node: string;
  /** When it happened (ISO; the node's clock corrected to the store's). */
  at: string;
  id: string;
}

/** Period alerts go through the store's outbox; node alerts (this node lost the store or Redis) are sent from memory. */
export type Alert = { scope: 'period' | 'node'; body: AlertBody };

const firstLine = (text: string | null | undefined): string | null => {
  if (text === null || text === undefined) return null;
  const line = text.split('\n', 1)[0]!.trim();
  return line.length > 500 ? `${line.slice(0, 499)}…` : line;
};

/**
 * The alert an event calls for, or null. `redisBefore` is the quorum's previous state on this node
 * (an alert is for losing it, `down`, and for regaining it after that).
 */
export function alertFor(event: SchedulerEvent, node: string, at: Date, redisBefore: string): Alert | null {
  const alert = alertOf(event, node, at, redisBefore);
  return alert && { scope: alert.scope, body: ordered(alert.body) };
}

/** The documented key order, whatever order the body was built in. */
function ordered(b: AlertBody): AlertBody {
  return { kind: b.kind, job: b.job, period: b.period, periodKey: b.periodKey, attempt: b.attempt, status: b.status, error: b.error, count: b.count, node: b.node, at: b.at, id: b.id };
}

function alertOf(event: SchedulerEvent, node: string, at: Date, redisBefore: string): Alert | null {
  const base = { node, at: at.toISOString(), count: 1, job: null, period: null, periodKey: null, attempt: null, status: null, error: null };
  switch (event.type) {
    case 'run-finished': {
      if (!event.recorded || !event.final || (event.status !== 'failed' && event.status !== 'timed_out')) return null;
      const kind: AlertKind = event.status;
      return {
        scope: 'period',
        body: {
          ...base, kind, job: event.job, period: event.scheduledAt.toISOString(), periodKey: event.periodKey, attempt: event.attempt,
          status: event.status, error: firstLine(event.error), id: `${kind}:${event.periodKey}:${event.attempt}`,
        },
      };
    }
    case 'takeover': {
      if (event.result !== 'failed') return null;
      return {
        scope: 'period',
        body: {
          ...base, kind: 'abandoned', job: event.job, period: event.scheduledAt.toISOString(), periodKey: event.periodKey, attempt: event.attempt,
          status: 'failed', error: `attempt ${event.attempt} abandoned (node ${event.deadNode} stopped heartbeating) and no attempt is left`,
          id: `abandoned:${event.periodKey}:${event.attempt}`,
        },
      };
    }
    case 'skipped': {
      if (event.reason !== 'missed') return null;
      const key = periodKey(event.job, event.first);
      return {
        scope: 'period',
        body: {
          ...base, kind: 'missed', job: event.job, period: event.first.toISOString(), periodKey: key, status: 'skipped', count: event.count,
          error: event.count === 1 ? 'period missed: no node could run it within catchUp' : `${event.count} periods missed (${event.first.toISOString()} to ${event.last.toISOString()}): no node could run them within catchUp`,
          id: `missed:${key}:${event.last.toISOString()}`,
        },
      };
    }
    case 'store': {
      const kind: AlertKind = event.state === 'down' ? 'store_lost' : 'store_back';
      return { scope: 'node', body: { ...base, kind, error: firstLine(event.error), id: `${node}:${kind}:${base.at}` } };
    }
    case 'row-lost': {
      // Sent from memory: the store that lost the row is the one the outbox would be written to.
      return {
        scope: 'node',
        body: {
          ...base, kind: 'store_row_lost', job: event.job, period: event.scheduledAt.toISOString(), periodKey: event.periodKey, attempt: event.attempt,
          error: `the store lost the row of attempt ${event.attempt} (a failover to a replica that lacked it?); ${event.restored ? 'written back by this node' : 'not written back: the period has a row of that attempt again'}`,
          id: `store_row_lost:${event.periodKey}:${event.attempt}`,
        },
      };
    }
    case 'redis': {
      let kind: AlertKind;
      if (event.state === 'down' && redisBefore !== 'down') kind = 'redis_lost';
      else if (event.state !== 'down' && event.state !== 'none' && redisBefore === 'down') kind = 'redis_back';
      else return null;
      return { scope: 'node', body: { ...base, kind, error: kind === 'redis_lost' ? 'the Redis quorum is lost: claims go on through the run row alone' : null, id: `${node}:${kind}:${base.at}` } };
    }
    default:
      return null;
  }
}
