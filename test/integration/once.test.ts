/**
 * ctx.once through the real `bin/scheduler` on SQLite: a worker-isolated body (the parent does the
 * store's part over messages) runs each key's fn once and replays it in later runs; a dry run writes
 * no key; a result JSON cannot hold fails the run with one line naming the job and the key and leaves
 * the key failed; `keys` lists them for an audit; `prune` deletes the expired ones.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/store/database.js';
import { ONCE_TABLE } from '../../src/store/migrations.js';
import { runCli } from '../helpers/cli.js';
import { Workspace } from '../helpers/workspace.js';

const ws = new Workspace('cron-it-once-');
afterAll(() => ws.cleanup());

ws.writeJob('deliver.mjs', `import { appendFileSync } from 'node:fs';
import { OnceFingerprintMismatchError } from 'cluster-cron';
export default {
  schedule: '0 0 0 1 1 *',
  isolation: 'worker',
  async run(ctx) {
    const out = [];
    for (const id of ['A', 'B', 'C']) {
      const r = await ctx.once.detailed('order_delivery:' + id, () => {
        if (!ctx.dryRun) appendFileSync(process.env.SIDE_EFFECTS, id + '\\n');
        return { id, by: ctx.runId };
      }, { fingerprint: 'v1:' + id });
      out.push({ id: r.value.id, replayed: r.replayed });
    }
    // The same key for another action: refused in the worker with the package's own error class.
    const reused = await ctx.once('order_delivery:A', () => 'other', { fingerprint: 'v2:A' }).then(() => null, (err) => ({
      mismatch: err instanceof OnceFingerprintMismatchError, code: err.code, stored: err.storedFingerprint,
    }));
    return ctx.dryRun ? out : { out, reused };
  },
};
`);
ws.writeJob('bad.mjs', `export default {
  schedule: '0 0 0 1 1 *',
  async run(ctx) {
    await ctx.once('bad:bigint', () => ({ total: 10n }));
  },
};
`);

const env = { SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: ws.jobsDir, SIDE_EFFECTS: ws.path('side.txt') };
const cli = async (...args: string[]) => runCli(args, { cwd: ws.dir, env });
const resultOf = (stdout: string, job: string) => (JSON.parse(stdout) as { runs: Array<{ job: string; status: string; result: unknown; error: string | null }> }).runs.find((r) => r.job === job)!;

describe('ctx.once through bin/scheduler (SQLite)', () => {
  it('a worker body runs each key once and replays it after; a dry run writes no key; a BigInt result leaves its key failed; keys lists them', async () => {
    const dry = await cli('run-once', 'deliver', '--dry-run', '--json');
    expect(dry.code, dry.stderr).toBe(0);
    expect(resultOf(dry.stdout, 'deliver').result).toEqual([{ id: 'A', replayed: false }, { id: 'B', replayed: false }, { id: 'C', replayed: false }]);
    const none = await cli('keys', '--json');
    expect(JSON.parse(none.stdout)).toEqual([]);

    const first = await cli('run-once', 'deliver', 'bad', '--json');
    expect(first.code).toBe(1);
    expect(resultOf(first.stdout, 'deliver')).toMatchObject({ status: 'succeeded', result: {
      out: [{ id: 'A', replayed: false }, { id: 'B', replayed: false }, { id: 'C', replayed: false }],
      reused: { mismatch: true, code: 'E_ONCE_FINGERPRINT', stored: 'v1:A' },
    } });
    expect(resultOf(first.stdout, 'bad')).toMatchObject({ status: 'failed' });
    expect(resultOf(first.stdout, 'bad').error).toMatch(/^ctx\.once\('bad:bigint'\) in job 'bad': fn's result cannot be stored: not JSON-serialisable \(.*BigInt.*\); the key is left failed$/);

    const again = await cli('run-once', 'deliver', '--json');
    expect(again.code, again.stderr).toBe(0);
    expect((resultOf(again.stdout, 'deliver').result as { out: unknown }).out).toEqual([{ id: 'A', replayed: true }, { id: 'B', replayed: true }, { id: 'C', replayed: true }]);
    expect(ws.lines('side.txt')).toEqual(['A', 'B', 'C']);

    const failed = await cli('keys', '--status', 'failed', '--json');
    expect(JSON.parse(failed.stdout)).toEqual([expect.objectContaining({ key: 'bad:bigint', job: 'bad', status: 'failed', attempts: 1, error: expect.stringContaining('not JSON-serialisable') })]);
    const text = await cli('keys', '--prefix', 'order_delivery:');
    expect(text.code).toBe(0);
    const lines = text.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^KEY\s+STATUS\s+ATTEMPTS\s+FIRST RUN\s+LAST RUN\s+RESULT \/ ERROR$/);
    // Newest first; keys written in the same millisecond come in key order, so compare as a set.
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 3)).sort()).toEqual([
      ['order_delivery:A', 'succeeded', '1'], ['order_delivery:B', 'succeeded', '1'], ['order_delivery:C', 'succeeded', '1'],
    ]);
    const bad = await cli('keys', '--status', 'done');
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toBe('scheduler: invalid --status done: expected one of processing, succeeded, failed');

    // An expired key goes with the history: `prune` deletes it (it already counted as absent).
    const db = await Database.open({ kind: 'sqlite', path: ws.path('scheduler.db'), url: ws.sqliteStore() });
    try {
      await db.knex(ONCE_TABLE).where({ key: 'order_delivery:A' }).update({ expires_at: db.knex.raw(`${db.dialect.nowMs} - 1`) });
    } finally {
      await db.close();
    }
    const pruned = await cli('prune', '--older-than', '2h', '--json');
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(JSON.parse(pruned.stdout)).toMatchObject({ outcome: 'pruned', expiredKeys: 1 });
    expect((JSON.parse((await cli('keys', '--json')).stdout) as Array<{ key: string }>).map((k) => k.key).sort()).toEqual(['bad:bigint', 'order_delivery:B', 'order_delivery:C']);
  });
});
