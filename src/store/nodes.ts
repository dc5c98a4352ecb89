/**
 * The nodes table (`scheduler_nodes`): one row per node id, written by the node's own sweep with the
 * store's clock. Liveness is judged by that clock alone (a heartbeat fresher than NODE_ALIVE_MS), so
 * that nodes whose clocks disagree still agree on who is alive.
 */
import type { Knex } from 'knex';
import { Database } from './database.js';
import { NODES_TABLE } from './migrations.js';
import type { ListedNode, NodeOwner, PidAlive, NodeRecord, NodeRegistration, NodeState, NodeStore, RegisteredNode, RegisterResult } from './types.js';

/** How often a daemon writes its heartbeat (at most; from its once-a-second sweep). */
export const NODE_HEARTBEAT_MS = 5000;
/** A node is alive while its heartbeat is fresher than three heartbeat intervals (store clock). */
export const NODE_ALIVE_MS = 3 * NODE_HEARTBEAT_MS;
/** Rows of nodes stopped or silent for this long are deleted. */
export const NODE_FORGET_MS = 7 * 86_400_000;
/** Tries of register's read-then-compare-and-set before giving up (each lost try means another process wrote the row). */
const REGISTER_TRIES = 10;

interface Row {
  id: string;
  host: string;
  pid: number | string;
  version: string;
  started_at: number | string;
  heartbeat_at: number | string;
  in_flight: number | string;
  clock_offset_ms: number | string;
  state: string;
  proc_start: string | null;
  store_host?: string | null;
  job_set?: string | null;
  store_now: number | string;
}

const toListed = (r: Row): ListedNode => {
  const record: NodeRecord = {
    id: r.id,
    host: r.host,
    pid: Number(r.pid),
    version: r.version,
    startedAt: Number(r.started_at),
    heartbeatAt: Number(r.heartbeat_at),
    inFlight: Number(r.in_flight),
    clockOffsetMs: Number(r.clock_offset_ms),
    state: r.state as NodeState,
    procStart: r.proc_start ?? null,
    storeHost: r.store_host ?? null,
    jobSet: r.job_set ?? null,
  };
  const heartbeatAgeMs = Math.max(0, Number(r.store_now) - record.heartbeatAt);
  return { ...record, heartbeatAgeMs, alive: record.state !== 'stopped' && heartbeatAgeMs < NODE_ALIVE_MS };
};

/**
 * Whether `row` is held by another live process than `me`: alive (by the store's clock) and on
 * another host, or on our host with another pid that is still alive (the process that wrote the row:
 * `pidAlive` is given its start stamp, so that a zombie or a reused pid is not). The same host and the same pid
 * as ours is a process that is gone (a container restarted: the hostname and pid 1 are the same again).
 */
export function heldByAnother(row: ListedNode, me: NodeOwner, pidAlive: PidAlive): boolean {
  if (!row.alive) return false;
  if (row.host !== me.host) return true;
  if (row.pid === me.pid) return false;
  return pidAlive(row.pid, row.procStart);
}

const ownerOf = (o: RegisteredNode) => ({ id: o.id, host: o.host, pid: o.pid, started_at: o.startedAt });

export class KnexNodeStore implements NodeStore {
  private readonly knex: Knex;
  constructor(private readonly db: Database) {
    this.knex = db.knex;
  }

  /** Rows with the store's clock at the moment of the read, so that ages need no second clock. */
  private select(): Knex.QueryBuilder {
    return this.knex(NODES_TABLE).select('*', this.knex.raw(`${this.db.dialect.nowMs} as store_now`));
  }

  private async read(id: string): Promise<ListedNode | null> {
    const row = (await this.select().where({ id }).first()) as Row | undefined;
    return row ? toListed(row) : null;
  }

  async register(node: NodeRegistration, pidAlive: PidAlive): Promise<RegisterResult> {
    return this.db.wrap('register node', async () => {
      for (let i = 0; i < REGISTER_TRIES; i++) {
        const previous = await this.read(node.id);
        if (previous && heldByAnother(previous, node, pidAlive)) return { outcome: 'held', holder: previous };
        // The start is read from the store's clock first, so that this process knows its row by it.
        const startedAt = await this.db.now();
        const registered: RegisteredNode = { id: node.id, host: node.host, pid: node.pid, startedAt };
        const fresh = {
          host: node.host, pid: node.pid, version: node.version, started_at: startedAt, heartbeat_at: this.db.nowRaw(),
          in_flight: 0, clock_offset_ms: Math.round(node.clockOffsetMs), state: 'running', proc_start: node.procStart ?? null,
        };
        if (!previous) {
          // A new id; 0 inserted: another process inserted it between the read and here.
          if ((await this.db.dialect.insertMissing(this.knex, NODES_TABLE, [{ id: node.id, ...fresh }], ['id'])) === 1) return { outcome: 'registered', node: registered, previous: null };
          continue;
        }
        // Compare-and-set on the row as read: a process that wrote it meanwhile (another start with
        // this id, or the old process beating after all) makes this update match nothing.
        const changed = await this.knex(NODES_TABLE)
          .where({ id: node.id, host: previous.host, pid: previous.pid, started_at: previous.startedAt, heartbeat_at: previous.heartbeatAt, state: previous.state })
          .update(fresh);
        if (changed === 1) return { outcome: 'registered', node: registered, previous };
      }
      throw new Error(`node id "${node.id}": its row kept changing while this process registered (${REGISTER_TRIES} tries); another process is starting with the same id`);
    });
  }

  async get(id: string): Promise<ListedNode | null> {
    return this.db.wrap('read node', () => this.read(id));
  }

  async beat(owner: RegisteredNode, status: { inFlight: number; clockOffsetMs: number; state: NodeState; storeHost?: string | null; jobSet?: string | null }): Promise<boolean> {
    const changed = await this.db.wrap('node heartbeat', () => this.knex(NODES_TABLE).where(ownerOf(owner)).update({
      heartbeat_at: this.db.nowRaw(), in_flight: status.inFlight, clock_offset_ms: Math.round(status.clockOffsetMs), state: status.state,
      ...(status.storeHost !== undefined ? { store_host: status.storeHost === null ? null : status.storeHost.slice(0, 300) } : {}),
      ...(status.jobSet !== undefined ? { job_set: status.jobSet === null ? null : status.jobSet.slice(0, 64) } : {}),
    }));
    return changed > 0;
  }

  async setState(owner: RegisteredNode, state: NodeState): Promise<boolean> {
    const changed = await this.db.wrap('set node state', () => this.knex(NODES_TABLE).where(ownerOf(owner)).update({
      state, heartbeat_at: this.db.nowRaw(), ...(state === 'stopped' ? { in_flight: 0 } : {}),
    }));
    return changed > 0;
  }

  async list(options: { recentMs: number }): Promise<ListedNode[]> {
    const rows = await this.db.wrap('read nodes', () => this.select()
      .where('heartbeat_at', '>=', this.knex.raw(`${this.db.dialect.nowMs} - ?`, [Math.max(0, Math.round(options.recentMs))]))
      .orderBy('id'));
    return (rows as Row[]).map(toListed);
  }

  async forgetGone(olderThanMs = NODE_FORGET_MS): Promise<number> {
    // A live node beats every few seconds: a row this old is a node stopped or silent that long.
    return this.db.wrap('forget gone nodes', () => this.knex(NODES_TABLE)
      .where('heartbeat_at', '<', this.knex.raw(`${this.db.dialect.nowMs} - ?`, [Math.max(NODE_ALIVE_MS, Math.round(olderThanMs))]))
      .delete());
  }
}
