/**
 * The alert outbox (`scheduler_alerts`): an alert owed for a period is a row, written once across the
 * cluster (unique event key) by the node that recorded the event, and delivered by any node that
 * claims it. Like pending runs, rows are timed by the store's clock: `next_at` is when a pending row
 * is due, and, while a node is sending it, when that node's lease runs out (then any node may claim
 * it again: delivery is at least once).
 */
import type { Knex } from 'knex';
import { StoreUnavailableError } from '../errors.js';
import type { Database } from '../store/database.js';
import { ALERTS_TABLE } from '../store/migrations.js';
import { storableText } from '../store/runs/rows.js';

export type AlertState = 'pending' | 'sending' | 'sent' | 'dropped';

export interface NewAlert {
  eventKey: string;
  /** The JSON body, as it is POSTed. */
  body: string;
}

export interface AlertRecord {
  id: string;
  eventKey: string;
  body: string;
  /** Delivery attempts claimed so far (a claim counts, whether or not its POST got an answer). */
  attempts: number;
  state: AlertState;
  /** Store clock, epoch ms: due (pending), or the sender's lease end (sending). */
  nextAt: number;
  claimedBy: string | null;
  claimedAt: number | null;
  createdAt: number;
  sentAt: number | null;
  lastError: string | null;
}

interface Row {
  id: number | string;
  event_key: string;
  body: string;
  attempts: number | string;
  state: string;
  next_at: number | string;
  claimed_by: string | null;
  claimed_at: number | string | null;
  created_at: number | string;
  sent_at: number | string | null;
  last_error: string | null;
}

const num = (v: number | string | null): number | null => (v === null || v === undefined ? null : Number(v));

function toRecord(r: Row): AlertRecord {
  return {
    id: String(r.id), eventKey: r.event_key, body: r.body, attempts: Number(r.attempts), state: r.state as AlertState,
    nextAt: Number(r.next_at), claimedBy: r.claimed_by, claimedAt: num(r.claimed_at), createdAt: Number(r.created_at),
    sentAt: num(r.sent_at), lastError: r.last_error,
  };
}

export class AlertOutbox {
  private readonly knex: Knex;
  constructor(private readonly db: Database) {
    this.knex = db.knex;
  }

  /** Inserts the alerts whose key is new (a key that exists is left as it is); returns how many were inserted. */
  async enqueue(alerts: NewAlert[]): Promise<number> {
    if (alerts.length === 0) return 0;
    const rows = alerts.map((a) => ({
      event_key: a.eventKey.slice(0, 255), body: a.body, attempts: 0, next_at: this.db.nowRaw(), state: 'pending',
      claimed_by: null, claimed_at: null, created_at: this.db.nowRaw(), sent_at: null, last_error: null,
    }));
    return this.db.wrap('write alerts', () => this.db.dialect.insertMissing(this.knex, ALERTS_TABLE, rows, ['event_key']));
  }

  /**
   * Claims up to `limit` due rows for `nodeId` by compare-and-set: a pending row that is due, or a
   * sending row whose sender's lease ran out (the sender died mid-POST). The claim counts an attempt
   * and holds the row for `leaseMs` (store clock). Rows another node claimed first are left out.
   */
  async claimDue(nodeId: string, leaseMs: number, limit = 20): Promise<AlertRecord[]> {
    const candidates = (await this.db.wrap('read due alerts', () => this.knex(ALERTS_TABLE).select('id', 'state', 'next_at', 'attempts')
      .whereIn('state', ['pending', 'sending']).andWhereRaw(`next_at <= ${this.db.dialect.nowMs}`)
      .orderBy('next_at', 'asc').limit(limit))) as Array<Pick<Row, 'id' | 'state' | 'next_at' | 'attempts'>>;
    const claimed: AlertRecord[] = [];
    for (const seen of candidates) {
      // Compare-and-set on the row as read (every claim and every failure changes next_at and
      // attempts or state): of two nodes that read the same row, one updates it. The primary key
      // leads, so that InnoDB locks that one row (no range of the state index).
      let updated: number;
      try {
        updated = Number(await this.db.wrap('claim alert', () => this.knex(ALERTS_TABLE)
          .where({ id: seen.id, state: seen.state, next_at: seen.next_at, attempts: seen.attempts })
          .update({ state: 'sending', claimed_by: nodeId, claimed_at: this.db.nowRaw(), next_at: this.db.nowPlus(leaseMs), attempts: Number(seen.attempts) + 1 })));
      } catch (err) {
        // A deadlock or lock wait with another claimer: that row is theirs, or due again next round.
        if (err instanceof StoreUnavailableError && err.transient) continue;
        throw err;
      }
      if (updated === 0) continue;
      const row = await this.db.wrap('read alert', () => this.knex(ALERTS_TABLE).where({ id: seen.id, claimed_by: nodeId, state: 'sending' }).first<Row | undefined>());
      if (row) claimed.push(toRecord(row));
    }
    return claimed;
  }

  /** The POST was answered 2xx: done. False when the row is no longer this node's claim (its lease ran out and another node has it). */
  async markSent(id: string, nodeId: string): Promise<boolean> {
    const updated = await this.db.wrap('mark alert sent', () => this.knex(ALERTS_TABLE).where({ id, claimed_by: nodeId, state: 'sending' })
      .update({ state: 'sent', sent_at: this.db.nowRaw(), last_error: null }));
    return Number(updated) > 0;
  }

  /** The POST failed: due again `retryInMs` from now (store clock), or dropped when null. */
  async markFailed(id: string, nodeId: string, error: string, retryInMs: number | null): Promise<boolean> {
    const columns = retryInMs === null
      ? { state: 'dropped', sent_at: this.db.nowRaw(), last_error: storableText(error, 2000) }
      : { state: 'pending', next_at: this.db.nowPlus(retryInMs), last_error: storableText(error, 2000) };
    const updated = await this.db.wrap('mark alert failed', () => this.knex(ALERTS_TABLE).where({ id, claimed_by: nodeId, state: 'sending' }).update(columns));
    return Number(updated) > 0;
  }

  /** Every row, oldest first (for tests and inspection). */
  async list(): Promise<AlertRecord[]> {
    const rows = await this.db.wrap('read alerts', () => this.knex(ALERTS_TABLE).orderBy('id', 'asc'));
    return (rows as Row[]).map(toRecord);
  }

  /** Deletes sent and dropped rows finished more than `olderThanMs` ago (store clock); returns how many. */
  async prune(olderThanMs: number): Promise<number> {
    const deleted = await this.db.wrap('prune alerts', () => this.knex(ALERTS_TABLE).whereIn('state', ['sent', 'dropped'])
      .andWhereRaw(`sent_at < ${this.db.dialect.nowMs} - ?`, [Math.max(0, Math.round(olderThanMs))]).delete());
    return Number(deleted);
  }
}
