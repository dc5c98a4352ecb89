/**
 * NodeStore conformance: the nodes table (`scheduler_nodes`) on every backend, on real servers
 * (SQLite on a temp file, MariaDB and PostgreSQL on a fresh database each): registration and who holds
 * an id, its compare-and-set under concurrent starts, heartbeats and states by the store's clock,
 * listing the recent nodes, and forgetting the long-gone ones.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/store/database.js';
import { NODES_TABLE } from '../../src/store/migrations.js';
import { KnexNodeStore, NODE_ALIVE_MS } from '../../src/store/nodes.js';
import type { NodeRegistration, RegisteredNode } from '../../src/store/types.js';
import { storeBackends, type StoreBackend } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';

const backends = storeBackends('cron_nodes');

const uid = (): string => randomBytes(4).toString('hex');
const alivePids = (...pids: number[]) => (pid: number) => pids.includes(pid);
const nonePids = () => false;

for (const backend of backends) {
  describe(`NodeStore contract: ${backend.name}`, () => {
    let fresh: Awaited<ReturnType<StoreBackend['fresh']>>;
    let db: Database;
    let nodes: KnexNodeStore;
    const node = (id: string, host: string, pid: number, extra: Partial<NodeRegistration> = {}): NodeRegistration => ({ id, host, pid, version: '1.2.3', clockOffsetMs: 0, ...extra });
    /** Moves a row's heartbeat back by `ms`, as if its node had been silent that long (the store API cannot). */
    const ageRow = (id: string, ms: number) => db.knex(NODES_TABLE).where({ id }).update({ heartbeat_at: db.knex.raw(`${db.dialect.nowMs} - ?`, [ms]) });
    /** Registers a node that must get its id; returns its row's owner. */
    const registered = async (n: NodeRegistration, pidAlive: (pid: number) => boolean = nonePids): Promise<RegisteredNode> => {
      const r = await nodes.register(n, pidAlive);
      if (r.outcome !== 'registered') throw new Error(`${n.id} is held by ${r.holder.host}/${r.holder.pid}`);
      return r.node;
    };
    const listed = async (id: string) => (await nodes.list({ recentMs: 86_400_000 })).find((n) => n.id === id);

    beforeAll(async () => {
      fresh = await backend.fresh();
      db = await Database.open(fresh.config);
      await db.migrate();
      nodes = new KnexNodeStore(db);
    });

    afterAll(async () => {
      await db?.close();
      await fresh?.drop();
    });

    it('register writes a new id as running, stamped by the store clock; list reads it back alive', async () => {
      const id = `web-${uid()}`;
      const before = await db.now();
      const r = await nodes.register(node(id, 'db-2', 4242, { clockOffsetMs: -37.4 }), nonePids);
      const after = await db.now();
      expect(r).toMatchObject({ outcome: 'registered', previous: null, node: { id, host: 'db-2', pid: 4242 } });
      const n = await listed(id);
      expect(r.outcome === 'registered' && r.node.startedAt).toBe(n!.startedAt);
      expect(n).toMatchObject({ id, host: 'db-2', pid: 4242, version: '1.2.3', inFlight: 0, clockOffsetMs: -37, state: 'running', alive: true });
      expect(n!.startedAt).toBeGreaterThanOrEqual(before - 2);
      expect(n!.startedAt).toBeLessThanOrEqual(after + 2);
      expect(n!.heartbeatAt).toBeGreaterThanOrEqual(n!.startedAt);
      expect(n!.heartbeatAgeMs).toBeGreaterThanOrEqual(0);
      expect(n!.heartbeatAgeMs).toBeLessThan(NODE_ALIVE_MS);
      // Written before the column, or where there is no /proc: no stamp.
      expect(n!.procStart).toBeNull();
      expect(await nodes.get(id)).toMatchObject({ id, host: 'db-2', pid: 4242, alive: true, procStart: null });
      expect(await nodes.get(`none-${uid()}`)).toBeNull();
    });

    it("the holder's start stamp is stored and given to pidAlive with its pid, so that a reused pid is not taken for the holder", async () => {
      const id = `stamp-${uid()}`;
      const stamp = 'f2a1ee80-5c89-4630-a80a-337af0c23bc8:171563';
      await nodes.register(node(id, 'db-2', 4242, { procStart: stamp }), nonePids);
      expect(await nodes.get(id)).toMatchObject({ pid: 4242, procStart: stamp });
      const asked: Array<[number, string | null]> = [];
      // pid 4242 is alive, but under another start: another process was given the pid since.
      const r = await nodes.register(node(id, 'db-2', 5000, { procStart: 'f2a1ee80-5c89-4630-a80a-337af0c23bc8:999' }), (pid, start) => {
        asked.push([pid, start]);
        return start !== stamp;
      });
      expect(asked).toEqual([[4242, stamp]]);
      expect(r.outcome).toBe('registered');
      expect(await nodes.get(id)).toMatchObject({ pid: 5000, procStart: 'f2a1ee80-5c89-4630-a80a-337af0c23bc8:999' });
      // The same process (its stamp matches): held.
      const held = await nodes.register(node(id, 'db-2', 6000), (pid, start) => pid === 5000 && start === 'f2a1ee80-5c89-4630-a80a-337af0c23bc8:999');
      expect(held.outcome === 'held' && held.holder.pid).toBe(5000);
    });

    it('a live holder on another host refuses the id (nothing written); on this host only while its pid is alive', async () => {
      const id = `held-${uid()}`;
      await nodes.register(node(id, 'db-2', 4242), nonePids);
      const first = await listed(id);

      // Another host: refused whatever the pids say.
      const other = await nodes.register(node(id, 'web-9', 7), nonePids);
      expect(other.outcome).toBe('held');
      expect(other.outcome === 'held' && other.holder).toMatchObject({ id, host: 'db-2', pid: 4242, alive: true });
      expect(await listed(id)).toMatchObject({ host: 'db-2', pid: 4242, startedAt: first!.startedAt, heartbeatAt: first!.heartbeatAt });

      // The holder's host, another pid: refused while the holder's pid is alive, taken over once it is gone.
      const whileAlive = await nodes.register(node(id, 'db-2', 5000), alivePids(4242));
      expect(whileAlive.outcome === 'held' && whileAlive.holder.pid).toBe(4242);
      const afterCrash = await nodes.register(node(id, 'db-2', 5000, { version: '1.2.4' }), alivePids(5000));
      expect(afterCrash.outcome).toBe('registered');
      expect(afterCrash.outcome === 'registered' && afterCrash.previous).toMatchObject({ host: 'db-2', pid: 4242, state: 'running', alive: true });
      expect(await listed(id)).toMatchObject({ host: 'db-2', pid: 5000, version: '1.2.4', state: 'running', alive: true });

      // The same host and the same pid as the holder: the holder is gone (a container restarted as pid 1).
      const restarted = await nodes.register(node(id, 'db-2', 5000), alivePids(5000));
      expect(restarted.outcome).toBe('registered');
    });

    it('a stale heartbeat or a stopped row gives the id to anyone, from any host', async () => {
      const stale = `stale-${uid()}`;
      await nodes.register(node(stale, 'db-2', 4242), nonePids);
      await ageRow(stale, NODE_ALIVE_MS + 1000);
      expect((await listed(stale))!.alive).toBe(false);
      const r = await nodes.register(node(stale, 'web-9', 7), alivePids(4242));
      expect(r.outcome === 'registered' && r.previous).toMatchObject({ host: 'db-2', pid: 4242, alive: false });
      expect(await listed(stale)).toMatchObject({ host: 'web-9', pid: 7, alive: true });

      const stopped = `stopped-${uid()}`;
      expect(await nodes.setState(await registered(node(stopped, 'db-2', 4242)), 'stopped')).toBe(true);
      const again = await nodes.register(node(stopped, 'web-9', 7), alivePids(4242));
      expect(again.outcome === 'registered' && again.previous).toMatchObject({ state: 'stopped', alive: false });
    });

    it('concurrent starts with one id, on separate pools: exactly one wins, for a new id and for a stale row', async () => {
      const pools = await Promise.all([0, 1, 2].map(() => Database.open(fresh.config)));
      try {
        const stores = [nodes, ...pools.map((p) => new KnexNodeStore(p))];
        for (const prepare of ['new', 'stale'] as const) {
          const id = `race-${prepare}-${uid()}`;
          if (prepare === 'stale') {
            await nodes.register(node(id, 'old-host', 1), nonePids);
            await ageRow(id, NODE_ALIVE_MS + 1000);
          }
          // Each on a host of its own: a live winner refuses every other.
          const results = await Promise.all(stores.flatMap((s, i) => [s.register(node(id, `host-${i}-a`, 100 + i), nonePids), s.register(node(id, `host-${i}-b`, 200 + i), nonePids)]));
          const winners = results.filter((r) => r.outcome === 'registered');
          expect(winners, prepare).toHaveLength(1);
          const row = await listed(id);
          for (const r of results) if (r.outcome === 'held') expect(r.holder.host, prepare).toBe(row!.host);
        }
      } finally {
        await Promise.all(pools.map((p) => p.close()));
      }
    });

    it('beat refreshes the heartbeat by the store clock with the runs in flight, the offset and the state; only for its owner', async () => {
      const id = `beat-${uid()}`;
      const owner = await registered(node(id, 'db-2', 4242));
      const first = (await listed(id))!;
      await waitFor('the store clock to move on', async () => (await db.now()) > first.heartbeatAt + 20, 5_000, 10);
      expect(await nodes.beat(owner, { inFlight: 3, clockOffsetMs: 250, state: 'running' })).toBe(true);
      const beaten = (await listed(id))!;
      expect(beaten).toMatchObject({ inFlight: 3, clockOffsetMs: 250, state: 'running', startedAt: first.startedAt, alive: true });
      expect(beaten.heartbeatAt).toBeGreaterThan(first.heartbeatAt);

      // Another process (same id, another pid or host) writes nothing.
      expect(await nodes.beat({ ...owner, pid: 1 }, { inFlight: 9, clockOffsetMs: 0, state: 'running' })).toBe(false);
      expect(await nodes.beat({ ...owner, host: 'web-9' }, { inFlight: 9, clockOffsetMs: 0, state: 'running' })).toBe(false);
      expect(await nodes.setState({ ...owner, pid: 1 }, 'stopped')).toBe(false);
      expect((await listed(id))!).toMatchObject({ inFlight: 3, state: 'running' });

      // A twin (the same host name and pid: containers given one fixed host name) takes the row over
      // as a restart would; the first process's beats then find the row no longer theirs.
      await waitFor('the store clock to move on', async () => (await db.now()) > beaten.startedAt + 5, 5_000, 5);
      const twin = await registered(node(id, 'db-2', 4242), alivePids(4242));
      expect(twin.startedAt).toBeGreaterThan(owner.startedAt);
      expect(await nodes.beat(owner, { inFlight: 1, clockOffsetMs: 0, state: 'running' })).toBe(false);
      expect(await nodes.beat(twin, { inFlight: 1, clockOffsetMs: 0, state: 'running' })).toBe(true);
    });

    it("stopping keeps a node alive; stopped is not alive, with no run in flight; list shows what beat within recentMs", async () => {
      const id = `state-${uid()}`;
      const owner = await registered(node(id, 'db-2', 4242));
      await nodes.beat(owner, { inFlight: 2, clockOffsetMs: 0, state: 'running' });
      expect(await nodes.setState(owner, 'stopping')).toBe(true);
      expect(await listed(id)).toMatchObject({ state: 'stopping', alive: true, inFlight: 2 });
      // A stopping node still holds its id.
      expect((await nodes.register(node(id, 'db-2', 5000), alivePids(4242))).outcome).toBe('held');
      expect(await nodes.setState(owner, 'stopped')).toBe(true);
      expect(await listed(id)).toMatchObject({ state: 'stopped', alive: false, inFlight: 0 });

      await ageRow(id, 2 * 3600_000);
      expect((await nodes.list({ recentMs: 3 * 3600_000 })).map((n) => n.id)).toContain(id);
      expect((await nodes.list({ recentMs: 3600_000 })).map((n) => n.id)).not.toContain(id);
    });

    it('forgetGone deletes the rows silent or stopped for over 7 days, and no other', async () => {
      const gone = `gone-${uid()}`;
      const recent = `recent-${uid()}`;
      const live = `live-${uid()}`;
      for (const id of [gone, recent, live]) await nodes.register(node(id, 'db-2', 4242), nonePids);
      await ageRow(gone, 8 * 86_400_000);
      await ageRow(recent, 6 * 86_400_000);
      expect(await nodes.forgetGone()).toBe(1);
      const ids = (await db.knex(NODES_TABLE).select('id')).map((r: { id: string }) => r.id);
      expect(ids).not.toContain(gone);
      expect(ids).toEqual(expect.arrayContaining([recent, live]));
      // Never a live row, whatever the age asked for.
      await nodes.forgetGone(0);
      expect((await db.knex(NODES_TABLE).select('id')).map((r: { id: string }) => r.id)).toContain(live);
    });
  });
}
