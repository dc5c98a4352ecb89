/**
 * The nodes table as an operator sees it, through the real `bin/scheduler`: daemons on one store
 * listed by `nodes --json` with their pids and runs in flight; a start with a node id that a live
 * process holds refused (exit 2) naming its host and pid; a restart after `kill -9` taking the id over
 * at once, even while the killed process is a zombie not yet reaped; a node whose id another live
 * process took over shutting down with exit 2; a stopped node shown as stopped.
 */
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { BIN, Daemon, runCli } from '../helpers/cli.js';
import { jobSource } from '../helpers/job-sources.js';
import { waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';
import type { Workspace } from '../helpers/workspace.js';
import { Database } from '../../src/store/database.js';
import { NODES_TABLE } from '../../src/store/migrations.js';
import { KnexNodeStore, NODE_ALIVE_MS } from '../../src/store/nodes.js';
import { waitForLog } from './cluster-scenario.js';

const { workspace, envOf, start, cleanup } = singleNode('cron-nodes-', 'nodes-node');

interface NodeJson {
  id: string;
  host: string;
  pid: number;
  version: string;
  startedAt: string;
  heartbeatAt: string;
  inFlight: number;
  clockOffsetMs: number;
  state: string;
  alive: boolean;
  storeHost: string | null;
}

/** A job of its own for each node (a folder each): every second, a body that runs until its signal aborts. */
function holdingJobs(ws: Workspace, name: string): string {
  const dir = ws.path(`jobs-${name}`);
  ws.writeJob(`hold-${name}.mjs`, jobSource(`schedule: '* * * * * *', catchUp: '1s',`, `await sleep(ctx, 120000);`), dir);
  return dir;
}

async function nodes(ws: Workspace): Promise<NodeJson[]> {
  const r = await runCli(['nodes', '--json'], { cwd: ws.dir, env: envOf(ws) });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as NodeJson[];
}

function startNode(ws: Workspace, id: string, jobsDir: string): Daemon {
  return start(ws, { SCHEDULER_NODE_ID: id, SCHEDULER_JOBS_DIR: jobsDir, SCHEDULER_GRACE_PERIOD: '1s' });
}

describe('nodes', () => {
  it('two daemons are listed alive with their pids and runs in flight; a start with a live id, from this host or another, is refused naming host and pid', async () => {
    const ws = workspace();
    const a = startNode(ws, 'node-a', holdingJobs(ws, 'a'));
    const b = startNode(ws, 'node-b', holdingJobs(ws, 'b'));
    const listed = await waitFor('both nodes alive, each with its run in flight', async () => {
      const all = await nodes(ws);
      const byId = new Map(all.map((n) => [n.id, n]));
      return byId.get('node-a')?.inFlight === 1 && byId.get('node-b')?.inFlight === 1 ? all : false;
    }, 60_000, 500);
    expect(listed.map((n) => n.id).sort()).toEqual(['node-a', 'node-b']);
    for (const [n, d] of [[listed.find((x) => x.id === 'node-a')!, a], [listed.find((x) => x.id === 'node-b')!, b]] as const) {
      // SQLite: no store host to name.
      expect(n).toMatchObject({ host: hostname(), pid: d.proc.pid, state: 'running', alive: true, clockOffsetMs: 0, storeHost: null });
      expect(n.version).toMatch(/^\d+\.\d+\.\d+/);
      expect(Date.parse(n.heartbeatAt)).toBeGreaterThanOrEqual(Date.parse(n.startedAt));
    }
    const text = await runCli(['nodes'], { cwd: ws.dir, env: envOf(ws) });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout.split('\n')[0]).toMatch(/^ID\s+HOST\s+PID\s+VERSION\s+STARTED\s+HEARTBEAT\s+RUNS\s+OFFSET\s+STATE$/);
    expect(text.stdout).toMatch(new RegExp(`node-a\\s+\\S+\\s+${a.proc.pid}\\s+\\S+\\s+\\S+ ago\\s+\\S+ ago\\s+1\\s+\\+0ms\\s+running`));
    for (const line of text.stdout.split('\n')) expect(line.length).toBeLessThanOrEqual(100);

    // node-a's id from this host while node-a lives: refused before any claim.
    const third = await runCli(['run'], { cwd: ws.dir, env: envOf(ws, { SCHEDULER_NODE_ID: 'node-a', SCHEDULER_JOBS_DIR: ws.path('jobs-b'), SCHEDULER_LOG_LEVEL: 'info' }) });
    expect(third.code, third.stdout + third.stderr).toBe(2);
    expect(third.stderr.trim()).toMatch(new RegExp(`^scheduler: node id "node-a" is held by a live process: host ${hostname()}, pid ${a.proc.pid}, heartbeat \\d+(\\.\\d)?s ago; set SCHEDULER_NODE_ID to another name$`));
    expect(third.stdout).not.toContain('scheduler started');

    // An id held by a live node of another host: its row, written (and kept fresh) through the store.
    const db = await Database.open({ kind: 'sqlite', path: ws.path('scheduler.db'), url: ws.sqliteStore() });
    const store = new KnexNodeStore(db);
    const registered = await store.register({ id: 'remote-1', host: 'db-2', pid: 4242, version: '0.0.1', clockOffsetMs: 0 }, () => false);
    if (registered.outcome !== 'registered') throw new Error('remote-1 could not be registered');
    const remote = registered.node;
    const beating = setInterval(() => void store.beat(remote, { inFlight: 0, clockOffsetMs: 0, state: 'running' }), 1000);
    cleanup(async () => {
      clearInterval(beating);
      await db.close();
    });
    const fromHere = await runCli(['run'], { cwd: ws.dir, env: envOf(ws, { SCHEDULER_NODE_ID: 'remote-1', SCHEDULER_JOBS_DIR: ws.path('jobs-b') }) });
    expect(fromHere.code, fromHere.stderr).toBe(2);
    expect(fromHere.stderr).toMatch(/^scheduler: node id "remote-1" is held by a live process: host db-2, pid 4242, heartbeat \d+(\.\d)?s ago; set SCHEDULER_NODE_ID to another name\n$/);
  });

  // The cases below side by side (it.concurrent): each has its own workspace, SQLite file and node id,
  // and none judges time closer than 'within 30 s'. The first one, which reads the measured clock
  // offset (0), runs alone.
  it.concurrent('after kill -9 a restart on this host takes its id over at once; after SIGTERM the node shows stopped', async () => {
    const ws = workspace();
    const jobs = holdingJobs(ws, 'a');
    const first = startNode(ws, 'node-a', jobs);
    await waitFor('node-a alive', async () => (await nodes(ws)).find((n) => n.id === 'node-a' && n.alive && n.pid === first.proc.pid), 60_000, 500);
    first.proc.kill('SIGKILL');
    await first.exited;

    const second = startNode(ws, 'node-a', jobs);
    const took = await waitForLog(second, 'the restart to take its id over', 'node id taken over from a process of this host that is gone');
    // The old row was still fresh: the restart did not wait for it to go stale.
    expect(took.previous).toMatchObject({ host: hostname(), pid: first.proc.pid, state: 'running' });
    await waitForLog(second, 'the restart to schedule', 'scheduler started');
    const after = await waitFor('the new process in the row', async () => (await nodes(ws)).find((n) => n.id === 'node-a' && n.pid === second.proc.pid), 30_000, 500);
    expect(after).toMatchObject({ alive: true, state: 'running' });

    expect(await second.stop('SIGTERM')).toBe(0);
    const [stopped] = await nodes(ws);
    expect(stopped).toMatchObject({ id: 'node-a', pid: second.proc.pid, state: 'stopped', alive: false, inFlight: 0 });
  });

  it.runIf(existsSync('/proc/self/stat')).concurrent('a restart right after kill -9 takes the id over while the killed process is a zombie (not yet reaped by its parent)', async () => {
    const ws = workspace();
    const jobs = holdingJobs(ws, 'z');
    const pidFile = ws.path('first.pid');
    // The daemon under a parent that never reaps: sh starts it in the background and becomes `sleep`.
    const first = new Daemon([], {
      cwd: ws.dir, env: envOf(ws, { SCHEDULER_NODE_ID: 'node-z', SCHEDULER_JOBS_DIR: jobs, SCHEDULER_GRACE_PERIOD: '1s', PID_FILE: pidFile }),
      command: ['sh', '-c', '"$0" "$@" & echo $! > "$PID_FILE"; exec sleep 300', process.execPath, BIN],
    });
    cleanup(async () => {
      await first.stop('SIGKILL', 5000);
    });
    const pid = await waitFor('the daemon in the nodes table', async () => {
      const written = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) : 0;
      return written > 0 && (await nodes(ws)).some((n) => n.id === 'node-z' && n.alive && n.pid === written) ? written : false;
    }, 60_000, 500);
    process.kill(pid, 'SIGKILL');
    await waitFor('the killed daemon to be a zombie', async () => / Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\)/s, ' ')), 10_000, 20);

    const second = startNode(ws, 'node-z', jobs);
    const took = await waitForLog(second, 'the restart to take its id over', 'node id taken over from a process of this host that is gone');
    expect(took.previous).toMatchObject({ host: hostname(), pid, state: 'running' });
    await waitForLog(second, 'the restart to schedule', 'scheduler started');
    expect(await second.stop('SIGTERM')).toBe(0);
  });

  it.concurrent('a node whose id another live process took over stops claiming and exits 2, naming that process; the row stays the other\'s', async () => {
    const ws = workspace();
    const d = startNode(ws, 'node-t', holdingJobs(ws, 't'));
    await waitFor('node-t alive with its run in flight', async () => (await nodes(ws)).find((n) => n.id === 'node-t' && n.inFlight === 1), 60_000, 500);

    // A process of another host takes the id over, as after a silence of node-t past the liveness
    // window (its heartbeat aged by hand; again if node-t beat in between).
    const db = await Database.open({ kind: 'sqlite', path: ws.path('scheduler.db'), url: ws.sqliteStore() });
    const store = new KnexNodeStore(db);
    const remote = await waitFor('the id taken over from db-2', async () => {
      await db.knex(NODES_TABLE).where({ id: 'node-t' }).update({ heartbeat_at: db.knex.raw(`${db.dialect.nowMs} - ?`, [NODE_ALIVE_MS + 1000]) });
      const r = await store.register({ id: 'node-t', host: 'db-2', pid: 4242, version: '0.0.1', clockOffsetMs: 0 }, () => false);
      return r.outcome === 'registered' ? r.node : false;
    }, 10_000, 100);
    const beating = setInterval(() => void store.beat(remote, { inFlight: 0, clockOffsetMs: 0, state: 'running' }), 1000);
    cleanup(async () => {
      clearInterval(beating);
      await db.close();
    });

    // Its next heartbeat (within 5 s) finds the row another's: a shutdown as on SIGTERM (grace 1s), then exit 2.
    const code = await Promise.race([d.exited, new Promise((r) => setTimeout(() => r('still running'), 30_000))]);
    expect(code, d.output).toBe(2);
    const errors = d.logs().filter((l) => l.level === 'error');
    expect(errors.map((l) => l.msg)).toEqual(['node id "node-t" was taken over by another live process: host db-2, pid 4242; this node stops claiming and shuts down (exit 2); give each node its own SCHEDULER_NODE_ID']);
    const msgs = d.logs().map((l) => l.msg);
    expect(msgs).toContain('shutdown: the node id was taken over by another live process');
    expect(msgs.at(-1)).toBe('stopped');
    // Its run in flight was ended as a shutdown ends it: recorded, not left running.
    const runs = await runCli(['history', '--json', 'hold-t'], { cwd: ws.dir, env: envOf(ws) });
    const rows = JSON.parse(runs.stdout) as Array<{ status: string }>;
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.map((r) => r.status)).not.toContain('running');
    expect((await nodes(ws)).find((n) => n.id === 'node-t')).toMatchObject({ host: 'db-2', pid: 4242, state: 'running', alive: true });
  });

  it.concurrent('exit 4 with one line (password redacted) when the store cannot be reached', async () => {
    const r = await runCli(['nodes', '--store', 'postgres://postgres:secret@127.0.0.1:1/none']);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^scheduler: store postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:1\/none cannot be reached/);
    expect(r.stderr).not.toContain('secret');
    expect(r.stdout).toBe('');
  });
});
