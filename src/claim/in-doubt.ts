/**
 * Claims in doubt: a claim statement (the INSERT of attempt 1, the compare-and-set of an owed
 * attempt) whose answer was lost (a statement timeout, a connection dropped at COMMIT, a Galera node
 * lost mid-commit) may have committed all the same. The node then holds, in the store, a `running`
 * row with no body behind it: left alone, it would look live for a whole lease (later periods of an
 * overlap 'skip' job recorded skipped because of it) and then be taken over as abandoned.
 *
 * So the node remembers each such claim and resolves it as soon as the store answers: a row of the
 * period's attempt that is this node's, running, and not held by this node (no body started) is
 * given back at once as `pending`, due now, for any node to claim and run as the same attempt.
 * A row that is absent (nothing committed) or another node's needs nothing: the reconciler catches
 * the period up, or the other node runs it.
 */
import { StoreUnavailableError, errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { RunStore } from '../store/types.js';

export interface DoubtfulClaim {
  job: string;
  scheduledAt: Date;
  periodKey: string;
  shard: number;
  attempt: number;
}

/** Past this many, the oldest are dropped (their rows are then left to the takeover, as before). */
const MAX_IN_DOUBT = 10_000;

export class InDoubtClaims {
  private readonly claims = new Map<string, DoubtfulClaim>();

  get size(): number {
    return this.claims.size;
  }

  /** A claim whose statement may have committed: its error was the store's absence, not a refusal. */
  note(claim: DoubtfulClaim, err: unknown): void {
    // A statement that never left this node (no pooled connection was free in time) committed nothing.
    if (!(err instanceof StoreUnavailableError) || err.busy) return;
    this.remember(claim);
  }

  /**
   * A claim whose row committed (its statement answered) but whose claim failed after it (a read
   * beside the INSERT, the skip or give-back written after it): the row is this node's, running,
   * with no body. Resolved like a claim in doubt.
   */
  committed(claim: DoubtfulClaim): void {
    this.remember(claim);
  }

  private remember(claim: DoubtfulClaim): void {
    this.claims.set(`${claim.periodKey}#${claim.shard}#${claim.attempt}`, claim);
    if (this.claims.size > MAX_IN_DOUBT) this.claims.delete(this.claims.keys().next().value!);
  }

  /**
   * Resolves what it can now (one read per claim; called after a sweep found the store answering).
   * `holds`: whether this node runs the attempt (a later claim of the same attempt won meanwhile).
   * Returns how many rows were given back.
   */
  async resolve(store: RunStore, nodeId: string, holds: (runId: string) => boolean, log: Logger): Promise<number> {
    let released = 0;
    for (const [k, c] of this.claims) {
      try {
        const row = (await store.periodRuns(c.job, c.scheduledAt, c.shard)).find((r) => r.attempt === c.attempt);
        if (row && row.nodeId === nodeId && row.status === 'running' && !holds(row.id)) {
          if (await store.releasePending(row.id, nodeId)) {
            released++;
            log.warn({ job: c.job, periodKey: c.periodKey, attempt: c.attempt, ...(c.shard > 0 ? { shard: c.shard } : {}) },
              'claim in doubt resolved: its row had been committed although the answer was lost; no body started, so it is given back (pending, due now) for any node to run');
          }
        }
        this.claims.delete(k);
      } catch (err) {
        if (err instanceof StoreUnavailableError) return released;
        log.warn({ err: { message: errorMessage(err) }, periodKey: c.periodKey }, 'claim in doubt not resolved');
        this.claims.delete(k);
      }
    }
    return released;
  }
}
