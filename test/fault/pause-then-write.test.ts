/**
 * A body that checks its signal right before each write, woken from a process pause past its lease:
 * every timer is overdue at once, and the body's own may run before the fence's periodic check. Its
 * check must fail all the same (reading ctx.signal proves the lease then and there), inline and in a
 * worker thread: no write lands after the pause. On MariaDB, as in production: a store whose answers
 * come back on a later turn of the event loop (with SQLite's synchronous driver a heartbeat sent on
 * waking is confirmed before the next timer runs: nobody took the row over meanwhile, and the lease
 * simply goes on).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';
import { singleNode } from '../helpers/single-node.js';

const { workspace, start } = singleNode('cron-pause-write-', 'pause-node');
let db: TestDatabase;
beforeAll(async () => {
  db = await createMariaDb('cron_pause_write');
});
afterAll(async () => {
  await db?.drop();
});

/** Writes a line every 100 ms for up to 15 s (until its signal aborts), each right after checking its signal. */
const writer = (isolation: 'inline' | 'worker') => `import { appendFileSync } from 'node:fs';
export default {
  schedule: '*/20 * * * * *',
  lockTtl: '2s',
  catchUp: '1s',
  isolation: '${isolation}',
  async run(ctx) {
    for (const until = Date.now() + 15000; Date.now() < until; ) {
      await new Promise((r) => setTimeout(r, 100));
      if (ctx.signal.aborted) throw new Error('fenced: ' + String(ctx.signal.reason));
      appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ job: ctx.job, runId: ctx.runId, t: Date.now() }) + '\\n');
    }
  },
};
`;

describe('a write after a pause past the lease', () => {
  it('inline and in a worker: the body\'s own check right after the pause fails (lease-lost), no write lands after it', async () => {
    const ws = workspace();
    ws.writeJob('inline-writer.mjs', writer('inline'));
    ws.writeJob('worker-writer.mjs', writer('worker'));
    const d = start(ws, { SIDE_EFFECTS: ws.path('effects.jsonl'), SCHEDULER_STORE: db.url });
    const writes = () => ws.records<{ job: string; runId: string; t: number }>('effects.jsonl');
    await waitFor('both bodies writing', () => ['inline-writer', 'worker-writer'].every((j) => writes().filter((w) => w.job === j).length >= 3), 40_000);
    d.proc.kill('SIGSTOP');
    const stoppedAt = Date.now();
    await new Promise((r) => setTimeout(r, 4000)); // twice the lease
    const resumedAt = Date.now();
    d.proc.kill('SIGCONT');
    await waitFor('both attempts to end with lease-lost', () => ['inline-writer', 'worker-writer'].every((j) => d.logs().some((l) => l.job === j && l.msg === 'run abandoned')), 20_000).catch((err: Error) => {
      const said = d.logs().filter((l) => Number(l.level) >= 40 || String(l.msg).startsWith('run ')).map((l) => `${String(l.time)} ${String(l.job ?? '')} ${String(l.msg)}`);
      throw new Error(`${err.message} (stopped ${new Date(stoppedAt).toISOString()}, resumed ${new Date(resumedAt).toISOString()}); the daemon said:\n${said.join('\n')}\nwrites: ${JSON.stringify([...new Set(writes().map((w) => `${w.job}#${w.runId}`))])}`);
    });
    const byRun = new Map<string, number[]>();
    for (const w of writes()) byRun.set(`${w.job}#${w.runId}`, [...(byRun.get(`${w.job}#${w.runId}`) ?? []), w.t]);
    // The attempts that were paused: the ones writing when the node stopped.
    const paused = [...byRun].filter(([, ts]) => ts.some((t) => t < stoppedAt) && ts.some((t) => t >= stoppedAt - 1000));
    expect(paused.map(([k]) => k.split('#')[0]).sort()).toEqual(['inline-writer', 'worker-writer']);
    for (const [key, ts] of paused) expect(ts.filter((t) => t >= resumedAt), `${key} wrote after the pause`).toEqual([]);
  });
});
