/**
 * ctx.once under faults: three real daemons on MariaDB with three Redis masters, a job that runs every
 * 2 s with overlap allowed (so scheduled runs, retries and manual `run-once` runs call ctx.once for the
 * same 50 keys at once), a SIGSTOP past the lease in the middle of a key's fn, and a kill -9 in the
 * middle of another's. Every key's fn side effect (a line its fn appends, counted from the file, not
 * from the table) happened exactly once; the paused caller, woken, stored nothing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cleanEnv, runCli } from '../helpers/cli.js';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, waitFor, type RedisServer } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { Cluster } from './harness.js';

const KEYS = 50;
/** These keys' fn takes 2 s (the others 20 ms): the pause and the kill land in the middle of them. */
const PAUSED_KEY = 12;
const KILLED_KEY = 37;

/**
 * The body: keys 0..upTo-1 (upTo read from control.json, so that the test opens the second half when
 * it is ready), each run starting at its own offset so that concurrent runs meet on different keys.
 * fn records 'fn-start', checks its signal right before its write (as a fenced write should), then
 * appends 'done': the side effect counted.
 */
const JOB = `import { appendFileSync, readFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
const upTo = () => JSON.parse(readFileSync(process.env.ONCE_CONTROL, 'utf8')).upTo;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export default {
  schedule: '*/2 * * * * *',
  lockTtl: '2s',
  overlap: 'allow',
  catchUp: '30s',
  retries: 5,
  retryDelay: '1s',
  async run(ctx) {
    const offset = (Number(ctx.runId) * 13) % ${KEYS};
    let replayed = 0;
    for (let n = 0; n < ${KEYS}; n++) {
      const i = (offset + n) % ${KEYS};
      if (i >= upTo()) continue;
      const key = 'order_delivery:ORDER_' + i;
      const r = await ctx.once.detailed(key, async ({ signal, attempt }) => {
        const me = { key, run: ctx.runId, node: ctx.nodeId, attempt };
        rec({ ev: 'fn-start', ...me });
        await sleep(i === ${PAUSED_KEY} || i === ${KILLED_KEY} ? 2000 : 20);
        signal.throwIfAborted();
        rec({ ev: 'done', ...me });
        return { delivered: i, by: ctx.nodeId };
      }, { wait: '20s' });
      if (r.replayed) replayed++;
    }
    return { replayed };
  },
};
`;

interface Fx { ev: 'fn-start' | 'done'; key: string; run: string; node: string; attempt: number; t: number }
interface KeyJson { key: string; status: string; attempts: number; lastRunId: string; firstRunId: string; result: unknown }

let db: TestDatabase;
let redis: RedisServer[];
let ws: Workspace;
let cluster: Cluster;
const manual: ChildProcess[] = [];

beforeAll(async () => {
  [db, redis] = await Promise.all([createMariaDb('cron_once_fault'), startRedisServers(3)]);
});

afterAll(async () => {
  for (const m of manual) if (m.exitCode === null && m.signalCode === null) m.kill('SIGKILL');
  await cluster?.killAll();
  await Promise.all(redis.map((r) => r.cleanup()));
  await db.drop();
  ws?.cleanup();
});

describe('fault: ctx.once under pause, kill and concurrent manual runs', () => {
  it('50 keys on 3 nodes with manual runs beside: every fn side effect exactly once; the paused caller stores nothing', async () => {
    ws = new Workspace('cron-fault-once-');
    ws.writeJob('deliver.mjs', JOB);
    const control = ws.path('control.json');
    writeFileSync(control, JSON.stringify({ upTo: KILLED_KEY }));
    const env = {
      SCHEDULER_STORE: db.url,
      SCHEDULER_REDIS: redis.map((r) => r.url).join(','),
      SCHEDULER_REDIS_PREFIX: `fault-once-${Date.now()}:`,
      ONCE_CONTROL: control,
    };
    cluster = new Cluster(ws, env);
    const nodes = ['o1', 'o2', 'o3'];
    for (const n of nodes) cluster.start(n, { ONCE_CONTROL: control });
    await Promise.all(nodes.map((n) => cluster.started(n)));
    const effects = () => ws.records<Fx>('effects.jsonl');
    const key = (i: number) => `order_delivery:ORDER_${i}`;
    /** A manual run, as an operator starts one beside the daemons: `run-once deliver`. */
    const runOnce = (id: string): { proc: ChildProcess; exited: Promise<number | null> } => {
      const proc = spawn(process.execPath, [BIN, 'run-once', 'deliver'], {
        cwd: ws.dir, stdio: 'ignore',
        env: cleanEnv({ ...env, SCHEDULER_NODE_ID: id, SCHEDULER_JOBS_DIR: ws.jobsDir, SIDE_EFFECTS: ws.path('effects.jsonl') }),
      });
      manual.push(proc);
      return { proc, exited: new Promise((r) => proc.on('exit', (code) => r(code))) };
    };

    // The pause: the node in the middle of key 12's fn stops past its lease (2 s).
    const pausedStart = await waitFor('a node to start the slow fn of key 12', () => effects().find((e) => e.ev === 'fn-start' && e.key === key(PAUSED_KEY)), 30_000);
    const paused = cluster.nodes.get(pausedStart.node)!;
    paused.proc.kill('SIGSTOP');
    const m1 = runOnce('manual-1');
    const takenOver = await waitFor('another caller to take key 12 over and finish its fn', () =>
      effects().find((e) => e.ev === 'done' && e.key === key(PAUSED_KEY) && e.node !== pausedStart.node), 30_000);
    paused.proc.kill('SIGCONT');
    const resumedAt = Date.now();

    // The second half, with another manual run; the node in the middle of key 37's fn is killed.
    writeFileSync(control, JSON.stringify({ upTo: KEYS }));
    const m2 = runOnce('manual-2');
    const killedStart = await waitFor('a caller to start the slow fn of key 37', () => effects().find((e) => e.ev === 'fn-start' && e.key === key(KILLED_KEY)), 30_000);
    if (killedStart.node.startsWith('manual')) {
      (killedStart.node === 'manual-1' ? m1 : m2).proc.kill('SIGKILL');
    } else {
      await cluster.kill(killedStart.node);
    }

    const keysNow = async (): Promise<KeyJson[]> => {
      const r = await runCli(['keys', '--json', '--prefix', 'order_delivery:', '--limit', '1000'], { cwd: ws.dir, env: { ...env, SCHEDULER_JOBS_DIR: ws.jobsDir } });
      if (r.code !== 0) throw new Error(`keys exited ${r.code}: ${r.stderr}`);
      return JSON.parse(r.stdout) as KeyJson[];
    };
    const keys = await waitFor('every key to succeed', async () => {
      const k = await keysNow();
      return k.length === KEYS && k.every((x) => x.status === 'succeeded') ? k : undefined;
    }, 60_000, 500);

    // The woken caller: its signal aborted (lease-lost) and it stored nothing; its run is not a success.
    await waitFor('the paused node to log its unstored result', () => paused.logs().some((l) => l.onceKey === key(PAUSED_KEY) && /not stored/.test(String(l.msg))), 15_000);
    console.log(`key 12 taken over ${takenOver.t - pausedStart.t} ms after its fn started on the paused node; woken at +${resumedAt - pausedStart.t} ms`);

    for (const m of [m1, m2]) if (m.proc.exitCode === null && m.proc.signalCode === null) await m.exited;
    await cluster.stopOthers([]);

    // Exactly once, counted from the side effects.
    const done = effects().filter((e) => e.ev === 'done');
    const perKey = new Map<string, Fx[]>();
    for (const d of done) perKey.set(d.key, [...(perKey.get(d.key) ?? []), d]);
    const wrong = Array.from({ length: KEYS }, (_, i) => key(i)).filter((k) => perKey.get(k)?.length !== 1).map((k) => `${k} x${perKey.get(k)?.length ?? 0}`);
    expect(wrong).toEqual([]);

    // Every stored result is the one the side effect's caller returned; the paused and killed keys were tried twice or more.
    for (const k of keys) {
      const d = perKey.get(k.key)![0]!;
      expect(k.lastRunId).toBe(d.run);
      expect(k.result).toEqual({ delivered: Number(k.key.split('_').pop()), by: d.node });
    }
    const byKey = new Map(keys.map((k) => [k.key, k]));
    expect(byKey.get(key(PAUSED_KEY))!.attempts).toBeGreaterThanOrEqual(2);
    expect(byKey.get(key(PAUSED_KEY))!.firstRunId).toBe(pausedStart.run);
    expect(byKey.get(key(PAUSED_KEY))!.lastRunId).not.toBe(pausedStart.run);
    expect(byKey.get(key(KILLED_KEY))!.attempts).toBeGreaterThanOrEqual(2);
    expect(perKey.get(key(KILLED_KEY))![0]!.node).not.toBe(killedStart.node);

    const history = await cluster.history();
    const pausedRun = history.find((r) => r.id === pausedStart.run);
    expect(pausedRun?.status).toBe('abandoned');
    expect(history.filter((r) => r.status === 'running')).toEqual([]);
    // The manual runs were recorded like any other.
    expect(history.filter((r) => r.trigger === 'manual').length).toBeGreaterThanOrEqual(2);
  });
});
