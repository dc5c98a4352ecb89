/**
 * `bin/scheduler prune` as an operator drives it: rows seeded through the store on an SQLite file,
 * made old behind the store's back (the store stamps started_at with its own clock), then pruned by
 * the real CLI: --older-than, the retention setting, --dry-run, --json, and the catchUp refusal.
 */
import knexFactory, { type Knex } from 'knex';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KnexRunStore } from '../../src/store/runs.js';
import { RUNS_TABLE } from '../../src/store/migrations.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { Workspace } from '../helpers/workspace.js';

const DAY = 86_400_000;
const BASE = Date.UTC(2026, 0, 1);

class Project {
  readonly ws = new Workspace('cron-prune-');
  readonly dbPath = this.ws.path('scheduler.db');
  readonly env: Record<string, string> = { SCHEDULER_STORE: `sqlite:${this.dbPath}`, SCHEDULER_JOBS_DIR: this.ws.jobsDir };
  private periods = 0;

  job(file: string, fields: string): void {
    this.ws.writeJob(file, `export default { ${fields} async run() {} };\n`);
  }

  cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
    return runCli(args, { cwd: this.ws.dir, env: { ...this.env, ...env } });
  }

  /** `n` succeeded runs of `job`, one a minute, each then made `ageMs` old. Returns their ids. */
  async seed(job: string, n: number, ageMs: number): Promise<number[]> {
    const store = await KnexRunStore.open({ kind: 'sqlite', path: this.dbPath, url: `sqlite:${this.dbPath}` });
    const ids: number[] = [];
    try {
      await store.migrate();
      for (let i = 0; i < n; i++) {
        const at = new Date(BASE + this.periods++ * 60_000);
        const r = await store.insertRun({ job, scheduledAt: at, periodKey: `${job}@${at.toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'seed', leaseMs: 30_000 });
        if (r.outcome !== 'inserted') throw new Error('seed: not inserted');
        await store.finishRun(r.run.id, 'seed', { status: 'succeeded' });
        ids.push(Number(r.run.id));
      }
    } finally {
      await store.close();
    }
    await this.sql((k) => k(RUNS_TABLE).whereIn('id', ids).update({ started_at: k.raw('started_at - ?', [ageMs]) }));
    return ids;
  }

  async sql<T>(fn: (k: Knex) => Promise<T>): Promise<T> {
    const k = knexFactory({ client: 'better-sqlite3', connection: { filename: this.dbPath }, useNullAsDefault: true });
    try {
      return await fn(k);
    } finally {
      await k.destroy();
    }
  }

  async count(job?: string): Promise<number> {
    return this.sql(async (k) => {
      const q = k(RUNS_TABLE).count<{ n: number }[]>({ n: '*' });
      if (job) q.where({ job });
      return Number((await q)[0]!.n);
    });
  }
}

const projects: Project[] = [];
function project(): Project {
  const p = new Project();
  projects.push(p);
  return p;
}
// The cases run side by side (describe.concurrent) and share this list: clean up once none runs.
let running = 0;
beforeEach(() => {
  running++;
});
afterEach(() => {
  if (--running > 0) return;
  for (const p of projects.splice(0)) p.ws.cleanup();
});

function expectCode(r: CliResult, code: number): void {
  expect(r.code, `exit code\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`).toBe(code);
}

interface PruneDoc {
  outcome: string;
  deleted: number;
  dryRun: boolean;
  cutoff: string | null;
  olderThan: string | null;
  olderThanMs: number | null;
  source: string;
}

// CLI commands on a project (and SQLite file) of its own per case, judging no time: side by side.
describe.concurrent('bin/scheduler prune', () => {
  it('--older-than: deletes the finished runs older than D (a job keeps its newest), prints the count and the cutoff', async () => {
    const p = project();
    p.job('report.mjs', "schedule: '0 2 * * *',");
    await p.seed('report', 5, 10 * DAY);
    await p.seed('report', 2, 1 * DAY);
    await p.seed('gone', 3, 20 * DAY);
    const before = Date.now();
    const r = await p.cli(['prune', '--older-than', '7d']);
    expectCode(r, 0);
    // 'report': 5 old ones (its newest is a young one); 'gone' (no job file any more): 2 of 3.
    const m = /deleted 7 finished run\(s\) started before (\S+) \(older than 7d, from --older-than\)/.exec(r.stdout);
    expect(m, r.stdout).not.toBeNull();
    const cutoff = Date.parse(m![1]!);
    expect(Math.abs(cutoff - (before - 7 * DAY))).toBeLessThan(30_000);
    expect(await p.count('report')).toBe(2);
    expect(await p.count('gone')).toBe(1);
  });

  it('refuses (exit 2) a D inside the largest catchUp plus the 1h margin, naming the job and its catchUp; nothing deleted', async () => {
    const p = project();
    p.job('settle.mjs', "schedule: '0 0 * * *', catchUp: '6h',");
    p.job('sync.mjs', "schedule: '*/5 * * * *',");
    await p.seed('settle', 4, 5 * 3_600_000);
    const r = await p.cli(['prune', '--older-than', '4h']);
    expectCode(r, 2);
    expect(r.stdout).toBe('');
    const line = r.stderr.trim().split('\n').pop()!;
    expect(line).toContain('--older-than 4h');
    expect(line).toContain("job 'settle' has catchUp 6h");
    expect(line).toContain('1h');
    expect(line).toContain('at least 7h');
    expect(await p.count()).toBe(4);
    // The same rule for the retention setting.
    const viaSetting = await p.cli(['prune', '--json'], { SCHEDULER_RETENTION: '6h30m' });
    expectCode(viaSetting, 2);
    expect(viaSetting.stderr).toMatch(/retention 6h30m.*job 'settle' has catchUp 6h/);
    // At exactly catchUp + margin it goes ahead (and these rows are younger: nothing to delete).
    const ok = await p.cli(['prune', '--older-than', '7h']);
    expectCode(ok, 0);
    expect(ok.stdout).toContain('deleted 0 finished run(s)');
  });

  it('--json: one document; D defaults to the retention setting (30d by default)', async () => {
    const p = project();
    p.job('report.mjs', "schedule: '0 2 * * *',");
    await p.seed('report', 4, 40 * DAY);
    await p.seed('report', 1, 2 * DAY);
    const before = Date.now();
    const r = await p.cli(['prune', '--json']);
    expectCode(r, 0);
    const doc = JSON.parse(r.stdout) as PruneDoc;
    expect(doc).toMatchObject({ outcome: 'pruned', deleted: 4, dryRun: false, olderThan: '30d', olderThanMs: 30 * DAY, source: 'retention' });
    expect(Math.abs(Date.parse(doc.cutoff!) - (before - 30 * DAY))).toBeLessThan(30_000);
    expect(await p.count()).toBe(1);
    // SCHEDULER_RETENTION sets the default D.
    await p.seed('report', 3, 3 * DAY);
    const viaEnv = JSON.parse((await p.cli(['prune', '--json'], { SCHEDULER_RETENTION: '2d' })).stdout) as PruneDoc;
    expect(viaEnv).toMatchObject({ deleted: 1 + 3 - 1, olderThan: '2d' });
  });

  it('--dry-run: prints how many would go, deletes nothing', async () => {
    const p = project();
    p.job('report.mjs', "schedule: '0 2 * * *',");
    await p.seed('report', 6, 10 * DAY);
    const text = await p.cli(['prune', '--older-than', '7d', '--dry-run']);
    expectCode(text, 0);
    expect(text.stdout).toMatch(/would delete 5 finished run\(s\) started before \S+Z .*dry run: nothing deleted/);
    const json = await p.cli(['prune', '--older-than', '7d', '--dry-run', '--json']);
    expectCode(json, 0);
    expect(JSON.parse(json.stdout)).toMatchObject({ outcome: 'pruned', deleted: 5, dryRun: true, source: '--older-than' });
    expect(await p.count()).toBe(6);
  });

  it('retention off and no --older-than: prunes nothing and says so; a bad setting or D is exit 2; an unreachable store exit 4', async () => {
    const p = project();
    p.job('report.mjs', "schedule: '0 2 * * *',");
    await p.seed('report', 3, 400 * DAY);
    const off = await p.cli(['prune'], { SCHEDULER_RETENTION: 'off' });
    expectCode(off, 0);
    expect(off.stdout).toContain('retention is off');
    expect(off.stdout).toContain('nothing pruned');
    expect(await p.count()).toBe(3);
    const bad = await p.cli(['prune'], { SCHEDULER_RETENTION: 'forever' });
    expectCode(bad, 2);
    expect(bad.stderr).toMatch(/SCHEDULER_RETENTION=forever: expected .*'off'/);
    const badD = await p.cli(['prune', '--older-than', 'soon']);
    expectCode(badD, 2);
    expect(badD.stderr).toContain('--older-than soon');
    const down = await p.cli(['prune', '--older-than', '7d', '--store', 'postgres://postgres:pw@127.0.0.1:1/x']);
    expectCode(down, 4);
    expect(down.stderr).not.toContain(':pw@');
  });
});
