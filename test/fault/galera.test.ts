/**
 * A three-node MariaDB Galera cluster (test/harness/galera.mjs: Debian's mariadb-server and galera-4,
 * rsync state transfer) under three real daemons, no Redis: a cold start of all three at once on a
 * fresh database, two nodes racing the same periods, a read-only node, one Galera node killed
 * (kill -9) mid-run and restarted, one partitioned into a minority and healed. Every period is judged
 * from the bodies' own records and the store's rows. The daemons use single-host URLs, one Galera
 * node each (the host-list URL is not parsed yet).
 */
import knexFactory from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARIADB_ADMIN } from '../harness/databases.mjs';
import { galeraMissing, GaleraCluster } from '../harness/galera.mjs';
import { randomTag, sleep, waitFor } from '../harness/process.mjs';
import { mysqlDialect, probeMysqlHost } from '../../src/store/dialect/mysql.js';
import { KnexRunStore } from '../../src/store/runs.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster, duplicateStarts, faultJob, overlappingAttempts, secondsBetween, type Effect } from './harness.js';

let galera: GaleraCluster;
const workspaces: Workspace[] = [];
const clusters: Cluster[] = [];

beforeAll(async () => {
  // No skipping: a machine without the packages fails here, naming them (scripts/test-setup.sh installs them).
  expect(galeraMissing(), 'Debian packages the Galera tests need').toEqual([]);
  galera = new GaleraCluster();
  await galera.start();
  console.log(`[galera] three nodes Synced in ${galera.startMs} ms`);
}, 120_000);

afterAll(async () => {
  await Promise.all(clusters.map((c) => c.killAll()));
  await galera?.stop();
  for (const w of workspaces) w.cleanup();
}, 60_000);

interface RunRow {
  job: string;
  period_key: string;
  scheduled_at: number;
  attempt: number;
  status: string;
  reason: string | null;
  node_id: string;
  started_at: number;
  finished_at: number | null;
}

/** The rows of a database, read on a live node. */
async function rowsOf(db: string): Promise<RunRow[]> {
  const node = galera.nodes.find((n) => n.alive)!;
  const rows = await node.query<RunRow>('SELECT job, period_key, scheduled_at, attempt, status, reason, node_id, started_at, finished_at FROM ??.scheduler_runs ORDER BY scheduled_at, attempt', [db]);
  return rows.map((r) => ({ ...r, scheduled_at: Number(r.scheduled_at), started_at: Number(r.started_at), finished_at: r.finished_at === null ? null : Number(r.finished_at), attempt: Number(r.attempt) }));
}

/** A fresh database on the cluster and a workspace with the jobs; `urls[i]`: node i's store URL. */
async function setup(prefix: string, urls: (db: string) => string[]): Promise<{ db: string; ws: Workspace; cluster: Cluster }> {
  const db = await galera.createDatabase(`cron_galera_${prefix}_${randomTag()}`);
  const ws = new Workspace(`cron-galera-${prefix}-`);
  workspaces.push(ws);
  const per = urls(db);
  const cluster = new Cluster(ws, { SCHEDULER_HTTP: '127.0.0.1:0' }, { slotEnv: (slot) => ({ SCHEDULER_STORE: per[Number(slot.slice(1)) - 1]! }) });
  clusters.push(cluster);
  return { db, ws, cluster };
}

const instantOf = (key: string): number => Date.parse(key.slice(key.indexOf('@') + 1));

/**
 * The judgement of one job between two instants: every period has a body start or a row skipped for
 * a reason that held (overlap: a body of an earlier period of the job was running when the skip was
 * recorded); no attempt started twice; attempts of a period never overlapped. Returns the figures.
 */
function judge(job: string, effects: Effect[], rows: RunRow[], logs: Array<Record<string, unknown>>, fromMs: number, toMs: number, stepMs: number) {
  const mine = effects.filter((e) => e.key.startsWith(`${job}@`));
  const starts = mine.filter((e) => e.ev === 'start');
  const started = new Set(starts.map((e) => e.key));
  const periods = secondsBetween(fromMs, toMs, stepMs).map((iso) => `${job}@${iso}`);
  const jobRows = rows.filter((r) => r.job === job);
  const byKey = new Map<string, RunRow[]>();
  for (const r of jobRows) byKey.set(r.period_key, [...(byKey.get(r.period_key) ?? []), r]);
  // A skip at `t` (store clock) is justified by a live run of an earlier period of the job whose body
  // really started: until its node recorded the outcome (its 'run ...' line; a body may have finished
  // on a node that could not reach the store yet: the row stayed live), or until it was abandoned. A
  // live row with no body behind it (a claim whose answer was lost) justifies nothing.
  const recordedAt = (key: string, attempt: number): number => {
    const line = logs.find((l) => l.periodKey === key && Number(l.attempt) === attempt && /^run (succeeded|failed|timed_out|abandoned|interrupted|cancelled)$/.test(String(l.msg)));
    if (line) return Date.parse(String(line.time));
    const row = jobRows.find((r) => r.period_key === key && r.attempt === attempt && r.status === 'abandoned');
    return row?.finished_at ?? Infinity;
  };
  const justified = (t: number, before: number) => starts.some((s) => instantOf(s.key) < before && s.t <= t + 500 && recordedAt(s.key, s.attempt) >= t - 500);
  const unjustified: string[] = [];
  const missing: string[] = [];
  for (const key of periods) {
    if (started.has(key)) continue;
    const skipped = (byKey.get(key) ?? []).filter((r) => r.status === 'skipped');
    if (skipped.length === 0) {
      missing.push(`${key}: ${JSON.stringify((byKey.get(key) ?? []).map((r) => `${r.attempt} ${r.status} ${r.reason ?? ''} ${r.node_id}`))}`);
      continue;
    }
    for (const r of skipped) if (r.reason === 'overlap' && !justified(r.started_at, instantOf(key))) unjustified.push(`${key} skipped (overlap) by ${r.node_id} at ${new Date(r.started_at).toISOString()}: no live row of an earlier period had a body`);
  }
  const late = periods.filter((k) => started.has(k)).map((k) => ({ key: k, lateMs: Math.min(...starts.filter((s) => s.key === k).map((s) => s.t)) - instantOf(k) }));
  const lateOver1s = late.filter((l) => l.lateMs > 1000);
  return {
    periods: periods.length,
    started: periods.filter((k) => started.has(k)).length,
    skipped: periods.filter((k) => !started.has(k)).length - missing.length,
    missing,
    unjustified,
    duplicateStarts: duplicateStarts(mine),
    // A body that finished (its own 'end') whose period started again as a later attempt.
    finishedRunAgain: [...new Set(mine.filter((e) => e.ev === 'end').map((e) => e.key))].filter((key) => {
      const end = mine.find((e) => e.key === key && e.ev === 'end')!;
      return starts.some((s) => s.key === key && s.attempt > end.attempt);
    }),
    duplicateDetail: duplicateStarts(mine).map((d) => {
      const key = d.slice(0, d.indexOf('#'));
      return { key, effects: mine.filter((e) => e.key === key).map((e) => `${e.ev} #${e.attempt} ${e.node} pid ${e.pid} ${new Date(e.t).toISOString()} ${e.reason ?? ''}`), rows: (byKey.get(key) ?? []).map((r) => `#${r.attempt} ${r.status} ${r.reason ?? ''} ${r.node_id} ${new Date(r.started_at).toISOString()}`) };
    }),
    lateOver1s: lateOver1s.length,
    maxLateMs: Math.max(0, ...late.map((l) => l.lateMs)),
    stillRunning: jobRows.filter((r) => r.status === 'running' || r.status === 'pending').map((r) => `${r.period_key}#${r.attempt} ${r.status} ${r.node_id}`),
  };
}

// The default lease (30 s): longer than a Galera node's outage here (killed, restarted in ~20 s), so
// that a daemon whose only host it was writes its outcomes when the host is back (not run again).
// GALERA_LOCK_TTL (e.g. 10s) tries a shorter one.
const LEASE = process.env.GALERA_LOCK_TTL ? { lockTtl: process.env.GALERA_LOCK_TTL } : {};
const TICK = faultJob({ schedule: '* * * * * *', durationMs: 50, extra: { ...LEASE, catchUp: '1m', coalesce: false, overlap: 'skip' } });
// A body of 3 s every 4 s: the fault falls while one of them runs.
const LONG = faultJob({ schedule: '*/4 * * * * *', durationMs: 3000, extra: { ...LEASE, catchUp: '1m', coalesce: false, overlap: 'skip' } });

describe('fault: Galera (three MariaDB Galera nodes, no Redis)', () => {
  it('cold start: three daemons, each on its own Galera node by a single-host URL, started at once on a fresh database: none exits, every migration applied once', async () => {
    const { db, ws, cluster } = await setup('cold', (db) => [0, 1, 2].map((i) => galera.url(i, db)));
    ws.writeJob('tick.mjs', TICK);
    for (const n of ['n1', 'n2', 'n3']) cluster.start(n);
    await Promise.all(['n1', 'n2', 'n3'].map((n) => cluster.started(n)));
    await sleep(3000);
    expect(cluster.exits().filter((e) => e.code !== null || e.signal !== null)).toEqual([]);
    const twice = await galera.node(0).query('SELECT name, COUNT(*) AS n FROM ??.scheduler_migrations GROUP BY name HAVING COUNT(*) > 1', [db]);
    expect(twice).toEqual([]);
    expect(await cluster.stopAll()).toEqual([0, 0, 0]);
  }, 90_000);

  it('two nodes claim the same periods at once, each on its own Galera node (insertRuns of 3-row batches and single rows): each period won exactly once', async () => {
    const db = await galera.createDatabase(`cron_galera_race_${randomTag()}`);
    const stores = await Promise.all([0, 1].map((i) => KnexRunStore.open({ kind: 'mysql', url: galera.url(i, db) })));
    try {
      await stores[0]!.migrate();
      // Certification failures and brute-force aborts on the two nodes, before and after.
      const conflictCount = async () => {
        let n = 0;
        for (const i of [0, 1]) for (const r of await galera.node(i).query<{ Value: string }>("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')")) n += Number(r.Value);
        return n;
      };
      const conflictsBefore = await conflictCount();
      const base = Date.UTC(2030, 0, 1);
      const run = (i: number, at: number, node: string) => ({ job: `race${i}`, scheduledAt: new Date(at), periodKey: `race${i}@${new Date(at).toISOString()}`, attempt: 1, trigger: 'schedule' as const, nodeId: node, leaseMs: 30_000 });
      const wonTwice: string[] = [];
      const wonByNone: string[] = [];
      let conflicts = 0;
      for (let k = 0; k < 120; k++) {
        const at = base + k * 1000;
        // Batches of three rows (MariaDB's multi-row INSERT ... RETURNING) for even k, one row for odd.
        const jobs = k % 2 === 0 ? [0, 1, 2] : [0];
        const answers = await Promise.all(stores.map((st, n) => st.insertRuns(jobs.map((j) => run(j, at, `n${n}`))).catch((err: unknown) => {
          conflicts++;
          return jobs.map(() => ({ outcome: 'error', err }) as const);
        })));
        for (const j of jobs) {
          const won = answers.filter((a) => a[jobs.indexOf(j)]!.outcome === 'inserted').length;
          if (won > 1) wonTwice.push(`race${j}@${at}`);
          if (won === 0) wonByNone.push(`race${j}@${at}: ${answers.map((a) => JSON.stringify(a[jobs.indexOf(j)]))}`);
        }
      }
      const rows = await galera.node(0).query<{ n: number }>('SELECT COUNT(*) AS n FROM ??.scheduler_runs', [db]);
      const certified = (await conflictCount()) - conflictsBefore;
      console.log(`[galera] race: 120 instants, ${Number(rows[0]!.n)} rows, ${certified} certification conflicts or brute-force aborts on the nodes, ${conflicts} calls failed after their deadlock retries`);
      expect(wonTwice).toEqual([]);
      expect(wonByNone).toEqual([]);
      expect(Number(rows[0]!.n)).toBe(60 * 3 + 60);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  }, 120_000);

  it('sessions on a Galera node set wsrep_sync_wait = 7 (the shared plain MariaDB: 0); a read-only node (SET GLOBAL read_only = 1): the probe says so, and a write there is classified unavailable (1290), not a real error', async () => {
    const db = await galera.createDatabase(`cron_galera_ro_${randomTag()}`);
    // A user without READ_ONLY ADMIN (root writes through read_only).
    const user = `ro_${randomTag()}`;
    await galera.node(0).query('CREATE USER ?@?', [user, '127.0.0.1']);
    await galera.node(0).query('GRANT ALL PRIVILEGES ON ??.* TO ?@?', [db, user, '127.0.0.1']);
    const node = galera.node(1);
    await node.query('SET GLOBAL read_only = 1');
    try {
      const auth = { user, database: db };
      expect(await probeMysqlHost({ host: '127.0.0.1', port: node.port }, auth)).toMatch(/^read-only/);
      expect(await probeMysqlHost({ host: '127.0.0.1', port: galera.node(0).port }, auth)).toBeNull();
      const dialect = mysqlDialect();
      const k = knexFactory(dialect.knexConfig({ kind: 'mysql', url: `mysql://${user}@127.0.0.1:${node.port}/${db}` }));
      try {
        // Every session of a Galera node waits for the cluster's committed writes (GALERA_SYNC_WAIT).
        const [sync] = (await k.raw('SELECT @@session.wsrep_sync_wait AS w')) as unknown as [Array<{ w: number }>];
        expect(Number(sync[0]!.w)).toBe(7);
        const err = await k.raw('CREATE TABLE t (id INT PRIMARY KEY)').then(() => null, (e: unknown) => e);
        expect((err as { errno?: number }).errno).toBe(1290);
        expect(dialect.classify(err)).toBe('unavailable');
      } finally {
        await k.destroy();
      }
      // The shared MariaDB (wsrep_on = OFF) is left as it is.
      const plain = knexFactory(dialect.knexConfig({ kind: 'mysql', url: MARIADB_ADMIN }));
      try {
        const [rows] = (await plain.raw('SELECT @@session.wsrep_sync_wait AS w')) as unknown as [Array<{ w: number }>];
        expect(Number(rows[0]!.w)).toBe(0);
      } finally {
        await plain.destroy();
      }
    } finally {
      await node.query('SET GLOBAL read_only = 0');
      await galera.node(0).query('DROP USER ?@?', [user, '127.0.0.1']);
    }
  }, 60_000);

  /**
   * Three daemons on the cluster; `fault` runs once the long job's body is running (what it returns:
   * the moment of the fault and what to undo later); judged from a few seconds before the fault to a
   * few seconds after the repair.
   */
  async function underFault(prefix: string, urls: (db: string) => string[], fault: (busyNode: number) => Promise<{ at: number; node: number; repair: () => Promise<void> }>, faultForMs: number) {
    const { db, ws, cluster } = await setup(prefix, urls);
    ws.writeJob('tick.mjs', TICK);
    ws.writeJob('long.mjs', LONG);
    for (const n of ['n1', 'n2', 'n3']) cluster.start(n);
    await Promise.all(['n1', 'n2', 'n3'].map((n) => cluster.started(n)));
    const t0 = Date.now() + 1000;
    // The fault while a long body runs (its node's Galera node, where each daemon has its own).
    const busy = await waitFor('a long body running', () => {
      const fx = cluster.effects().filter((e) => e.key.startsWith('long@') && e.t >= t0);
      const s = fx.find((e) => e.ev === 'start' && !fx.some((x) => x.key === e.key && x.attempt === e.attempt && x.ev !== 'start'));
      return s && Date.now() - s.t > 500 ? s : undefined;
    }, 30_000, 50);
    const { at, node: faulted, repair } = await fault(Number(busy.node.slice(1)) - 1);
    // What a host finder's probe says of each node meanwhile.
    const probes = await Promise.all(galera.nodes.map((n) => probeMysqlHost({ host: '127.0.0.1', port: n.port }, { user: 'root', database: db })));
    await sleep(Math.max(0, faultForMs - (Date.now() - at)));
    const repairStarted = Date.now();
    await repair();
    const repairedAt = Date.now();
    await sleep(8000);
    const t1 = Date.now() - 2000;
    // Every row settled (a period late by the fault caught up within catchUp, an abandoned attempt run
    // again): every period of the window has a row and none is running or pending. Past 40 s, judged as it is.
    const owed = [...secondsBetween(t0, t1, 1000).map((iso) => `tick@${iso}`), ...secondsBetween(t0, t1, 4000).map((iso) => `long@${iso}`)];
    await waitFor('every period of the judged window recorded and settled', async () => {
      const rows = await rowsOf(db);
      const keys = new Set(rows.map((r) => r.period_key));
      return owed.every((k) => keys.has(k)) && rows.filter((r) => r.scheduled_at < t1 && (r.status === 'running' || r.status === 'pending')).length === 0;
    }, 40_000, 500).catch(() => undefined);
    const exits = cluster.exits().filter((e) => e.code !== null || e.signal !== null);
    const codes = await cluster.stopAll();
    const rows = await rowsOf(db);
    const effects = cluster.effects();
    const logs = cluster.logs();
    const tick = judge('tick', effects, rows, logs, t0, t1, 1000);
    const long = judge('long', effects, rows, logs, t0, t1, 4000);
    const firstAfter = effects.filter((e) => e.ev === 'start' && e.t > at).sort((a, b) => a.t - b.t)[0];
    const report = {
      fault: prefix, faultedNodeOfBusyDaemon: busy.node, repairMs: repairedAt - repairStarted, probes,
      killToFirstStartMs: firstAfter ? firstAfter.t - at : null, firstStartAfter: firstAfter ? `${firstAfter.key} on ${firstAfter.node}` : null,
      tick, long,
    };
    console.log(`[galera] ${JSON.stringify(report, null, 1)}`);
    const notable = logs.filter((l) => Number(l.level) >= 40 || ['warn', 'error', 'fatal'].includes(String(l.level))).map((l) => `${l._node} ${String(l.msg)}`);
    if (process.env.FAULT_DEBUG) {
      console.log([...new Set(notable)].slice(0, 80).join('\n'));
      // The whole case, to read afterwards (the workspace is removed).
      const { writeFileSync } = await import('node:fs');
      const { join } = await import('node:path');
      const { tmpdir } = await import('node:os');
      const base = join(tmpdir(), `galera-${prefix}`);
      writeFileSync(`${base}-logs.jsonl`, logs.map((l) => JSON.stringify(l)).join('\n'));
      writeFileSync(`${base}-rows.json`, JSON.stringify(rows, null, 1));
      writeFileSync(`${base}-effects.jsonl`, effects.map((l) => JSON.stringify(l)).join('\n'));
      console.log(`[galera] FAULT_DEBUG: ${base}-{logs.jsonl,rows.json,effects.jsonl}`);
    }
    return { exits, codes, tick, long, effects, rows, logs, probes, faulted };
  }

  /** Every daemon said it moved from the first Galera node to another one of the list. */
  function expectMoved(r: Awaited<ReturnType<typeof underFault>>): void {
    const first = `127.0.0.1:${galera.node(0).port}`;
    const moved = new Set(r.logs.filter((l) => l.msg === 'store: writing to another host of the list (failover)' && l.previous === first).map((l) => l._node));
    expect([...moved].sort(), 'daemons that moved off the faulted first host').toEqual(['n1', 'n2', 'n3']);
  }

  function expectClean(r: Awaited<ReturnType<typeof underFault>>): void {
    expect(r.exits, 'no daemon exits during the fault').toEqual([]);
    expect(r.codes).toEqual([0, 0, 0]);
    for (const j of [r.tick, r.long]) {
      expect(j.duplicateStarts).toEqual([]);
      expect(j.finishedRunAgain, 'periods whose body finished and ran again').toEqual([]);
      expect(j.missing, 'periods with neither a body start nor a skipped row').toEqual([]);
      expect(j.unjustified, 'skipped (overlap) while nothing of the job ran').toEqual([]);
      expect(j.stillRunning).toEqual([]);
    }
    expect(overlappingAttempts(r.effects, new Map())).toEqual([]);
  }

  // The host list (`mysql://root@g1,g2,g3/db`): every daemon writes to the first Galera node; it is
  // killed, or isolated, while a long body runs, and every daemon moves to the next one.
  it('host list: the Galera node every daemon writes to killed (kill -9) while a long body runs, then restarted: every daemon moves to the next node; no duplicate, no period lost, no daemon exits', async () => {
    const r = await underFault('list-kill', (db) => [0, 1, 2].map(() => galera.multiUrl(db)), async () => {
      const at = Date.now();
      await galera.kill(0);
      return { at, node: 0, repair: () => galera.restart(0) };
    }, 12_000);
    expectMoved(r);
    expectClean(r);
  }, 180_000);

  it('host list: the Galera node every daemon writes to isolated into a minority while a long body runs, then healed: every daemon moves to the next node; no duplicate, no period lost, no daemon exits', async () => {
    const r = await underFault('list-partition', (db) => [0, 1, 2].map(() => galera.multiUrl(db)), async () => {
      const at = Date.now();
      await galera.isolate(0);
      return { at, node: 0, repair: () => galera.heal(0) };
    }, 12_000);
    expectMoved(r);
    expectClean(r);
  }, 180_000);

  it('a Galera node killed (kill -9) while a long body runs on the daemon using it, then restarted (IST): no duplicate, no period lost, no daemon exits', async () => {
    const r = await underFault('kill', (db) => [0, 1, 2].map((i) => galera.url(i, db)), async (i) => {
      const at = Date.now();
      await galera.kill(i);
      return { at, node: i, repair: () => galera.restart(i) };
    }, 12_000);
    expect(r.probes[r.faulted]).toMatch(/^down: /);
    expect(r.probes.filter((p, i) => i !== r.faulted)).toEqual([null, null]);
    expectClean(r);
  }, 180_000);

  it('a Galera node partitioned into a minority (gmcast.isolate) while a long body runs on the daemon using it, then healed: no duplicate, no period lost, no daemon exits', async () => {
    const r = await underFault('partition', (db) => [0, 1, 2].map((i) => galera.url(i, db)), async (i) => {
      const at = Date.now();
      await galera.isolate(i);
      return { at, node: i, repair: () => galera.heal(i) };
    }, 12_000);
    expect(r.probes[r.faulted]).toMatch(/^outside the primary component/);
    expect(r.probes.filter((p, i) => i !== r.faulted)).toEqual([null, null]);
    expectClean(r);
  }, 180_000);
});
