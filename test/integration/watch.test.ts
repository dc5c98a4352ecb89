/**
 * Job files picked up by themselves (issue 23, item 3): three real daemons on one MariaDB database,
 * each with a jobs folder of its own, as three machines have; no signal is sent. A job file added,
 * changed and removed in every folder is running as changed on every node within 5 s of the last
 * folder's change (measured from the last write to each node's own log line); a broken file is
 * refused with its error while the previous definition runs on; node 3's folder is laid out as a
 * Kubernetes ConfigMap volume (files as symlinks through `..data`, swapped atomically) and follows
 * the same changes. Judged from each node's log and the bodies' own records.
 */
import { mkdirSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Daemon, runCli } from '../helpers/cli.js';
import { createMariaDb, type TestDatabase } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';

const dbs: TestDatabase[] = [];
const daemons: Daemon[] = [];
const workspaces: Workspace[] = [];

afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop('SIGTERM')));
  for (const db of dbs) await db.drop();
  for (const w of workspaces) w.cleanup();
});

/** Every second; records its job, version and node. */
const job = (version: number) => `
import { appendFileSync } from 'node:fs';
export default {
  schedule: '* * * * * *',
  run(ctx) { appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ job: ctx.job, version: ${version}, node: ctx.nodeId, key: ctx.periodKey }) + '\\n'); },
};
`;

/** A ConfigMap volume: `..<n>/` holds the files, `..data` points at it, each file is a symlink through `..data`. */
class ConfigMapFolder {
  private n = 0;
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  /** Publishes `files` as the kubelet does: a new data folder, `..data` swapped by a rename, then the file links added or removed. */
  publish(files: Record<string, string>): void {
    const data = `..2026_12_07_${String(++this.n).padStart(2, '0')}`;
    mkdirSync(join(this.dir, data));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(this.dir, data, name), text);
    symlinkSync(data, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
    for (const name of Object.keys(files)) {
      try {
        symlinkSync(join('..data', name), join(this.dir, name));
      } catch {
        // The link is there already: it follows `..data`.
      }
    }
    for (const name of this.names) if (!(name in files)) unlinkSync(join(this.dir, name));
    this.names = Object.keys(files);
    if (this.n > 1) rmSync(join(this.dir, `..2026_12_07_${String(this.n - 1).padStart(2, '0')}`), { recursive: true });
  }

  private names: string[] = [];
}

describe('job files picked up by themselves', () => {
  it('added, changed, removed and broken files in three folders (one a ConfigMap volume): every node runs the change within 5 s, with no signal', async () => {
    const db = await createMariaDb('cron_watch');
    dbs.push(db);
    const ws = new Workspace('cron-watch-');
    workspaces.push(ws);
    const plain = [ws.path('node1-jobs'), ws.path('node2-jobs')];
    for (const dir of plain) mkdirSync(dir);
    const cm = new ConfigMapFolder(ws.path('node3-jobs'));
    const files: Record<string, string> = { 'a.mjs': job(1) };
    const write = (name: string, text: string | null) => {
      for (const dir of plain) {
        if (text === null) unlinkSync(join(dir, name));
        else writeFileSync(join(dir, name), text);
      }
      if (text === null) delete files[name];
      else files[name] = text;
      cm.publish({ ...files });
      return Date.now();
    };
    for (const dir of plain) writeFileSync(join(dir, 'a.mjs'), job(1));
    cm.publish({ ...files });
    const folders = [...plain, cm.dir];
    for (const [i, dir] of folders.entries()) {
      daemons.push(new Daemon([], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: dir, SCHEDULER_NODE_ID: `node${i + 1}`, SCHEDULER_HTTP: 'off', SCHEDULER_LOG_LEVEL: 'info', SIDE_EFFECTS: ws.path('effects.txt') } }));
    }
    await Promise.all(daemons.map((d) => d.waitStarted()));
    const effects = () => ws.lines('effects.txt').map((l) => JSON.parse(l) as { job: string; version: number; node: string; key: string });
    /** Each node's first log line matching `msg` after `since`, as its delay from `since` (ms). */
    const seenBy = (msg: RegExp, since: number) => waitFor(`every node to log ${msg}`, () => {
      const at = daemons.map((d) => d.logs().find((l) => msg.test(String(l.msg)) && Date.parse(String(l.time)) >= since - 50));
      return at.every(Boolean) ? at.map((l) => Date.parse(String(l!.time)) - since) : undefined;
    }, 30_000, 100);
    const delays: Record<string, number[]> = {};

    // Added.
    const added = write('b.mjs', job(1));
    delays.added = await seenBy(/^job added: b /, added);
    await waitFor('a body of b', () => effects().some((e) => e.job === 'b'), 30_000, 100);
    // Changed: every node has version 2 of a (a body of version 2 runs, and no version 1 after the last node's reload).
    const changed = write('a.mjs', job(2));
    delays.changed = await seenBy(/^job changed: a: /, changed);
    const doneAt = Math.max(...daemons.map((d) => Date.parse(String(d.logs().filter((l) => /^reload done/.test(String(l.msg))).at(-1)!.time))));
    await waitFor('a body of a version 2', () => effects().some((e) => e.job === 'a' && e.version === 2), 30_000, 100);
    const seconds = (k: string) => Date.parse(k.slice(k.indexOf('@') + 1));
    expect(effects().filter((e) => e.job === 'a' && e.version === 1 && seconds(e.key) > doneAt + 1000), 'version 1 of a after every node reloaded').toEqual([]);
    // A broken file: refused with its error on every node; the previous definition runs on.
    const broken = write('a.mjs', 'export default { schedule: ');
    const refusals = await seenBy(/a\.mjs.*the previous definition of 'a' stays scheduled/, broken);
    const count = effects().filter((e) => e.job === 'a').length;
    await waitFor('a runs on, at version 2', () => effects().filter((e) => e.job === 'a' && e.version === 2).length >= count + 2, 30_000, 100);
    // Removed.
    write('a.mjs', job(2));
    const removed = write('b.mjs', null);
    delays.removed = await seenBy(/^job removed: b /, removed);

    console.log(`[watch] from the last folder's change to each node's log line (node1, node2, node3 ConfigMap), ms: ${Object.entries(delays).map(([k, v]) => `${k} ${v.join('/')}`).join('; ')}; broken file refused after ${refusals.join('/')}`);
    for (const [what, ms] of Object.entries(delays)) for (const d of ms) expect(d, what).toBeLessThanOrEqual(5000);
    // No signal was sent: every reload says what changed.
    for (const d of daemons) {
      const causes = d.logs().filter((l) => /^reload requested/.test(String(l.msg))).map((l) => String(l.cause));
      expect(causes.length, d.nodeId).toBeGreaterThan(0);
      expect(causes.every((c) => c.startsWith('a file changed: ')), `${d.nodeId}: ${causes.join(', ')}`).toBe(true);
    }
    // `nodes` shows one job-set version once every node has beaten since its last reload: the three
    // folders hold the same files (node 3's through the ConfigMap's links), and the version is each
    // node's last logged one.
    // The version is logged when a reload is applied, just after its 'job removed' line: waited for.
    const lastVersions = () => daemons.map((d) => String(d.logs().filter((l) => /^job set version /.test(String(l.msg))).at(-1)?.jobSet));
    const versions = (await waitFor('every node to log the same job set version', () => (new Set(lastVersions()).size === 1 ? lastVersions() : undefined), 15_000, 100).catch(() => lastVersions()));
    expect(new Set(versions).size, versions.join(', ')).toBe(1);
    const listed = await waitFor('every node to show the same job set in nodes --json', async () => {
      const r = await runCli(['nodes', '--json'], { cwd: ws.dir, env: { SCHEDULER_STORE: db.url, SCHEDULER_JOBS_DIR: plain[0]! } });
      const nodes = (JSON.parse(r.stdout) as { nodes?: Array<{ id: string; jobSet: string | null; alive: boolean }> } | Array<{ id: string; jobSet: string | null; alive: boolean }>);
      const list = Array.isArray(nodes) ? nodes : nodes.nodes ?? [];
      const sets = list.filter((n) => n.alive).map((n) => n.jobSet);
      return sets.length === 3 && sets.every((s) => s === versions[0]) ? sets : undefined;
    }, 30_000, 500);
    expect(listed).toEqual([versions[0], versions[0], versions[0]]);
  }, 180_000);
});
