/**
 * The daemon's row in the nodes table, kept fresh from its sweep: a heartbeat at most every
 * NODE_HEARTBEAT_MS with the runs in flight and the clock offset. During the shutdown the sweeps have
 * ended, so the row is beaten as 'stopping' on a timer of its own (a grace period may outlast the
 * liveness window), and set 'stopped' at the end. Every write is best effort: the store may be down,
 * and the sweep reports that already.
 *
 * A heartbeat that finds the row no longer this process's, held by another live process (one that
 * judged this one gone after a silence past the liveness window, or a twin with the same host name
 * and pid), ends this node: one error line naming the other's host and pid, then `onTakenOver`, which
 * shuts the daemon down as a signal would (in-flight runs finish or are handed over) and exits 2.
 * Two processes claiming under one id would each take the other's runs for their own.
 */
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import { NODE_HEARTBEAT_MS } from '../store/nodes.js';
import type { ListedNode, NodeState, NodeStore, RegisteredNode } from '../store/types.js';
import { NODE_ROW_STOP_MS } from '../daemon/stop-budget.js';

/** How often the rows of long-gone nodes are deleted (the first time at the first pulse). */
const FORGET_EVERY_MS = 3600_000;
/** The last write at a stop waits at most this long for the store. */
const STOP_WRITE_MS = NODE_ROW_STOP_MS;

export interface NodeHeartbeatOptions {
  store: NodeStore;
  owner: RegisteredNode;
  inFlight: () => number;
  clockOffsetMs: () => number;
  /** The store host this node writes to now (`host:port`), or null (SQLite); none: not written. */
  storeHost?: () => string | null;
  /** The version of the job set this node runs now; none: not written. */
  jobSet?: () => string | null;
  log: Logger;
  everyMs?: number;
  /** Another live process holds the row now: called once, to shut down. */
  onTakenOver?: (holder: ListedNode) => void;
}

/** The one line a node whose id was taken over by another live process logs. */
export function takenOverMessage(id: string, holder: ListedNode): string {
  return `node id "${id}" was taken over by another live process: host ${holder.host}, pid ${holder.pid}; this node stops claiming and shuts down (exit 2); give each node its own SCHEDULER_NODE_ID`;
}

export class NodeHeartbeat {
  private state: NodeState = 'running';
  /** Writes go one after the other, so that a heartbeat sent before a state change cannot land after it. */
  private chain: Promise<void> = Promise.resolve();
  private queued = 0;
  /** Registration wrote the first heartbeat. */
  private lastBeat = performance.now();
  private lastForget = -Infinity;
  private stoppingTimer: NodeJS.Timeout | undefined;
  private warnedLost = false;
  /** The live process that holds the row now: nothing more is written. */
  private takenBy: ListedNode | undefined;
  private readonly everyMs: number;

  constructor(private readonly options: NodeHeartbeatOptions) {
    this.everyMs = options.everyMs ?? NODE_HEARTBEAT_MS;
  }

  /** Called on every sweep; writes when the last heartbeat is NODE_HEARTBEAT_MS old. */
  pulse(): void {
    if (this.state !== 'running' || this.queued > 0 || performance.now() - this.lastBeat < this.everyMs) return;
    void this.enqueue(() => this.beat());
  }

  private enqueue(op: () => Promise<void>): Promise<void> {
    this.queued++;
    this.chain = this.chain.then(op).finally(() => {
      this.queued--;
    });
    return this.chain;
  }

  private async beat(): Promise<void> {
    const { store, owner, log } = this.options;
    if (this.takenBy) return;
    try {
      const ours = await store.beat(owner, { inFlight: this.options.inFlight(), clockOffsetMs: this.options.clockOffsetMs(), state: this.state, ...(this.options.storeHost ? { storeHost: this.options.storeHost() } : {}), ...(this.options.jobSet ? { jobSet: this.options.jobSet() } : {}) });
      this.lastBeat = performance.now();
      if (!ours && !this.warnedLost) await this.lost();
      if (performance.now() - this.lastForget >= FORGET_EVERY_MS) {
        this.lastForget = performance.now();
        const forgotten = await store.forgetGone();
        if (forgotten > 0) log.info({ forgotten }, 'deleted the rows of nodes stopped or silent for over 7 days');
      }
    } catch (err) {
      log.debug({ err: { message: errorMessage(err) } }, 'node heartbeat not written');
    }
  }

  /** The row is no longer this process's: who has it? (A read that fails is tried again at the next heartbeat.) */
  private async lost(): Promise<void> {
    const { store, owner, log } = this.options;
    const holder = await store.get(owner.id);
    if (holder && holder.alive && !(holder.host === owner.host && holder.pid === owner.pid && holder.startedAt === owner.startedAt)) {
      this.takenBy = holder;
      log.error({ nodeId: owner.id, holder: { host: holder.host, pid: holder.pid } }, takenOverMessage(owner.id, holder));
      this.options.onTakenOver?.(holder);
      return;
    }
    // Deleted, or taken by a process that has stopped since: nobody else claims under the id now.
    this.warnedLost = true;
    log.error({ nodeId: owner.id }, 'this node id\'s row in the nodes table is no longer this process\'s (deleted, or taken over by a process that has stopped since); this node keeps running unlisted');
  }

  /** The shutdown started: state 'stopping' now, then beaten on its own timer (the sweeps have ended) until stopped(). */
  stopping(): void {
    if (this.state !== 'running') return;
    this.state = 'stopping';
    void this.enqueue(() => this.setState('stopping'));
    this.stoppingTimer = setInterval(() => {
      if (this.queued === 0) void this.enqueue(() => this.beat());
    }, this.everyMs);
    this.stoppingTimer.unref();
  }

  /** The shutdown ended: state 'stopped' (waits at most STOP_WRITE_MS for the store). */
  async stopped(): Promise<void> {
    if (this.stoppingTimer) clearInterval(this.stoppingTimer);
    this.state = 'stopped';
    await Promise.race([this.enqueue(() => this.setState('stopped')), new Promise((r) => setTimeout(r, STOP_WRITE_MS).unref())]);
  }

  private async setState(state: NodeState): Promise<void> {
    if (this.takenBy) return;
    try {
      await this.options.store.setState(this.options.owner, state);
    } catch (err) {
      this.options.log.warn({ err: { message: errorMessage(err) }, state }, 'node state not written to the nodes table (the store does not answer)');
    }
  }
}
