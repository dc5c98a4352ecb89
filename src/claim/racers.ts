/**
 * Fewer racers per period: not every node races every period. The live nodes (the nodes table, read
 * every few seconds) are ranked per period by rendezvous hashing (highest random weight) of the period
 * key: the first node races at the tick, the second steps in shortly after the instant if no row has
 * appeared by then (the first is dead, stopped or slow), and the others leave it to the reconciling
 * sweep. Every node computes the same ranking from the same list, so a period has one racer in the
 * steady state, and each node's share is about 1/n of the periods whatever their names.
 *
 * Nothing depends on the list being right: the run row stays the fence. Two nodes that disagree (one
 * started or stopped since the other's last read) may both race a period (the lock and the row
 * decide) or neither at the tick (the second-ranked node or the sweep runs it, late).
 */
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { ListedNode, NodeStore } from '../store/types.js';
import { NODE_ALIVE_MS } from '../store/nodes.js';

/** How often the live nodes are read. */
export const MEMBERSHIP_EVERY_MS = 5000;
/**
 * A node that registered at most this long before this one began counts as alive (see Racers.unsure):
 * nodes started together (every node of a cold start comes up within a second or two of the others)
 * have not beaten since each other began. One of them that died meanwhile is a node dying in a
 * running cluster: its periods go to their second-ranked nodes and the sweep.
 */
const STARTED_TOGETHER_MS = 5000;
/** How often the live nodes are read while one of them is unproven (see Racers.unsure). */
const UNSURE_EVERY_MS = 1000;
/** The second-ranked node claims a period that has no row this long after its instant. */
export const STEP_IN_AFTER_MS = 250;

/** 32-bit FNV-1a of a string's UTF-16 code units. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** murmur3's finaliser: every input bit reaches every output bit, so nearby seeds give unrelated weights. */
function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The rendezvous weight of a node (by its seed) for a period (by its key's hash). */
const weight = (keyHash: number, seed: number): number => mix(keyHash ^ seed);

/** This node's rank for `key` among `nodes` (seeds, this node's included): 0 races first. Ties go to the lower seed. */
export function rankOf(key: string, self: number, nodes: readonly number[]): number {
  const k = fnv1a(key);
  const mine = weight(k, self);
  let rank = 0;
  for (const seed of nodes) {
    if (seed === self) continue;
    const w = weight(k, seed);
    if (w > mine || (w === mine && seed < self)) rank += 1;
  }
  return rank;
}

export function nodeSeed(nodeId: string): number {
  return mix(fnv1a(nodeId));
}

export class Racers {
  private readonly self: number;
  /** The live nodes' seeds, this node's always among them. */
  private seeds: number[];
  private lastRead = -Infinity;
  private reading: Promise<void> | undefined;
  private warnedAt = -Infinity;
  /** When this node began ranking (monotonic ms): a node is proven alive by a heartbeat after it. */
  private readonly since = performance.now();
  /** The seeds of listed nodes known alive: beaten after this node began, or started together with it (this node's own among them). */
  private readonly proven = new Set<number>();

  /** Told each list of nodes read (the job sets' comparison reads no list of its own). */
  private listeners: Array<(listed: ListedNode[]) => void> = [];

  constructor(
    private readonly nodeId: string,
    private readonly nodes: Pick<NodeStore, 'list'>,
    private readonly log: Logger,
    private readonly everyMs = MEMBERSHIP_EVERY_MS,
  ) {
    this.self = nodeSeed(nodeId);
    this.seeds = [this.self];
    this.proven.add(this.self);
  }

  /**
   * Some node on the list has not been seen beating since this node began: it may have died just
   * before (a whole cluster killed, this node the first back), and it keeps its share of the periods
   * until its heartbeat ages out (NODE_ALIVE_MS). Every node that lives beats within NODE_HEARTBEAT_MS.
   */
  get unsure(): boolean {
    return this.seeds.some((s) => !this.proven.has(s));
  }

  /**
   * Whether no node ranked ahead of this one for `key` is known alive (see unsure): this node is then
   * the first one known alive for the period, and steps in for it. A node behind a proven one leaves
   * the period to it (a pile-on of every node's step-in, each one's claim a statement and three Redis
   * commands, is what tipped 2,000 every-second jobs into overload at a staggered start).
   */
  firstProven(key: string): boolean {
    const k = fnv1a(key);
    const mine = weight(k, this.self);
    for (const seed of this.seeds) {
      if (seed === this.self || !this.proven.has(seed)) continue;
      const w = weight(k, seed);
      if (w > mine || (w === mine && seed < this.self)) return false;
    }
    return true;
  }

  onListed(listener: (listed: ListedNode[]) => void): void {
    this.listeners.push(listener);
  }

  /** How many nodes this node ranks over now. */
  get size(): number {
    return this.seeds.length;
  }

  /** This node's rank for a period (0: it races at the tick; 1: it steps in; more: the sweep's). */
  rank(key: string): number {
    return this.seeds.length === 1 ? 0 : rankOf(key, this.self, this.seeds);
  }

  /**
   * Reads the live nodes again when the last read is MEMBERSHIP_EVERY_MS old. Best effort: a read
   * that fails keeps the last list (and says so at most every 30 s); never throws.
   */
  refresh(): Promise<void> {
    // While some listed node is unproven, every second: a node that lives is proven within its next
    // beat. In this node's first NODE_ALIVE_MS too: the nodes of a cold start register over a second
    // or two, and the first one up, alone on its first read, would rank first for every period for
    // a whole MEMBERSHIP_EVERY_MS.
    const young = performance.now() - this.since < NODE_ALIVE_MS;
    const every = this.unsure || young ? Math.min(this.everyMs, UNSURE_EVERY_MS) : this.everyMs;
    if (this.reading || performance.now() - this.lastRead < every) return this.reading ?? Promise.resolve();
    const sentAt = performance.now();
    this.lastRead = sentAt;
    this.reading = this.nodes.list({ recentMs: NODE_ALIVE_MS }).then((listed) => {
      for (const l of this.listeners) {
        try {
          l(listed);
        } catch (err) {
          this.log.warn({ err: { message: errorMessage(err) } }, 'a reader of the live nodes failed');
        }
      }
      // Running nodes only: a stopping node claims nothing new, and its share goes to the others at once.
      const running = listed.filter((n) => n.alive && n.state === 'running');
      const ids = new Set(running.map((n) => n.id));
      ids.add(this.nodeId);
      this.seeds = [...ids].map(nodeSeed);
      // Beat after this node began, by the read's send time (an age on the store's clock, which the
      // answer's delay can only make look older), or started at most STARTED_TOGETHER_MS before it (a
      // cluster started together: a cold start, a deploy): proven alive. A node that began long before
      // and has not beaten since may have died before this one started.
      for (const n of running) {
        const startedAgoMs = n.heartbeatAgeMs + n.heartbeatAt - n.startedAt;
        if (sentAt - n.heartbeatAgeMs > this.since || sentAt - startedAgoMs > this.since - STARTED_TOGETHER_MS) this.proven.add(nodeSeed(n.id));
      }
    }, (err: unknown) => {
      if (performance.now() - this.warnedAt >= 30_000) {
        this.warnedAt = performance.now();
        this.log.warn({ err: { message: errorMessage(err) } }, 'live nodes not read: ranking periods over the last list');
      }
    }).finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }
}
