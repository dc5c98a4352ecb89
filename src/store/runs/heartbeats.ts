/**
 * Lease and heartbeat: a running attempt's lease is kept by refreshing heartbeat_at (store clock).
 * The beats of one node's runs called within one turn of the event loop go out as one UPDATE on the
 * lease keepers' own connections (see Coalescer), each caller answered as it would be alone.
 */
import { Coalescer, type Queued } from '../../batch/coalescer.js';
import { StoreUnavailableError } from '../../errors.js';
import type { AttemptKey } from '../types.js';
import { BATCH_MAX, type RunsContext } from './context.js';
import { isDeadlock, keyColumns, numericId, smallestLease } from './rows.js';

/** Coalesced heartbeat batches of one node in flight at once: the lease pool's size. */
const BEAT_BATCHES_IN_FLIGHT = 2;

interface BeatCall {
  runId: string;
  leaseMs?: number;
  key?: AttemptKey;
}

export class Heartbeats {
  private readonly queue = new Coalescer<BeatCall, boolean>(BATCH_MAX, (nodeId, batch) => this.sendHeartbeats(nodeId, batch), BEAT_BATCHES_IN_FLIGHT);

  constructor(private readonly ctx: RunsContext) {}

  heartbeat(runId: string, nodeId: string, leaseMs?: number, key?: AttemptKey): Promise<boolean> {
    return this.queue.add(nodeId, { runId, leaseMs, key });
  }

  /** Sends (and answers) every queued beat. */
  drain(): Promise<void> {
    return this.queue.drain();
  }

  /** One beat on its own, as every beat went before coalescing (bench/store-batch.mjs times the two). */
  async beatAlone(runId: string, nodeId: string, leaseMs?: number, key?: AttemptKey): Promise<boolean> {
    // On the lease keepers' own connections: a burst of claims on the main pool cannot delay it.
    return this.ctx.leased('heartbeat', leaseMs, async () => {
      const updated = await this.ctx.table(this.ctx.db.leaseKnex).where({ id: runId, node_id: nodeId, status: 'running', ...(key ? keyColumns(key) : {}) }).update({ heartbeat_at: this.ctx.db.nowRaw() });
      return Number(updated) > 0;
    });
  }

  private async beatsAlone(nodeId: string, calls: Array<Queued<BeatCall, boolean>>): Promise<void> {
    await Promise.all(calls.map((q) => this.beatAlone(q.item.runId, nodeId, q.item.leaseMs, q.item.key).then(q.resolve, q.reject)));
  }

  /**
   * The heartbeats of one node's runs queued in one flush: ONE UPDATE on the lease connections,
   * bounded by the smallest of their leases. Which rows it refreshed: RETURNING id (PostgreSQL,
   * SQLite); on MySQL all when it matched them all, otherwise each beat alone to learn which.
   */
  private async sendHeartbeats(nodeId: string, batch: Array<Queued<BeatCall, boolean>>): Promise<void> {
    const byId = new Map<number, Array<Queued<BeatCall, boolean>>>();
    const alone: Array<Queued<BeatCall, boolean>> = [];
    for (const q of batch) {
      const id = numericId(q.item.runId);
      // A beat without its attempt's key (a caller that knows only the id) goes alone.
      if (id === null || !q.item.key) alone.push(q);
      else byId.set(id, [...(byId.get(id) ?? []), q]);
    }
    const ids = [...byId.keys()];
    // Beats of one run in one flush get one answer.
    const answer = (id: number, value: boolean) => byId.get(id)!.forEach((q) => q.resolve(value));
    if (ids.length === 1) {
      alone.push(...byId.get(ids[0]!)!);
    } else if (ids.length > 1) {
      const returning = this.ctx.kind !== 'mysql';
      try {
        const updated = await this.ctx.leased('heartbeats', smallestLease(batch.map((q) => q.item.leaseMs)), async (): Promise<unknown> => {
          const tuples = ids.map((id) => {
            const k = keyColumns(byId.get(id)![0]!.item.key!);
            return [id, k.job, k.scheduled_at, k.shard, k.attempt];
          });
          // `id IN` beside the tuples: the primary key is what the optimizer should range over (MariaDB
          // takes it for the ids; for the row constructor alone it may take the status index).
          const q = this.ctx.table(this.ctx.db.leaseKnex).whereIn('id', ids).whereIn(['id', 'job', 'scheduled_at', 'shard', 'attempt'], tuples).andWhere({ node_id: nodeId, status: 'running' });
          return returning ? q.update({ heartbeat_at: this.ctx.db.nowRaw() }, ['id']) : q.update({ heartbeat_at: this.ctx.db.nowRaw() });
        });
        if (returning) {
          const beaten = new Set((updated as Array<{ id: number | string }>).map((r) => Number(r.id)));
          for (const id of ids) answer(id, beaten.has(id));
        } else if (Number(updated) === ids.length) {
          for (const id of ids) answer(id, true);
        } else {
          alone.push(...ids.flatMap((id) => byId.get(id)!));
        }
      } catch (err) {
        if (err instanceof StoreUnavailableError && !isDeadlock(err)) for (const q of batch) q.reject(err);
        else alone.push(...ids.flatMap((id) => byId.get(id)!));
      }
    }
    await this.beatsAlone(nodeId, alone);
  }
}
