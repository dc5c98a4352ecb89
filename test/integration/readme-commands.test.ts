/**
 * The README's commands, run as written (issue 21): the first job's block (validate, next, run-once,
 * history on SQLite, with the job file the README shows) and the three-node cluster's block, on
 * MariaDB and on PostgreSQL with the local Redis. Each block is read from README.md itself and run by
 * bash in a scratch folder laid out like a checkout (bin/, dist/, node_modules/, the example jobs),
 * so that a README edit that breaks a command fails here. Two substitutions, each asserted to have
 * happened: the database name `scheduler` becomes a private one (the shared servers are not ours),
 * and the status-page ports 9471-9473 become free ones; and the Redis keys get a prefix of this
 * file's own (an environment variable beside the commands). The quick start's `npm start` is run by
 * test/unit/start-script.test.ts, and `npm test` is this suite.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knexFactory from 'knex';
import { afterAll, describe, expect, it } from 'vitest';
import { databaseName, MARIADB_ADMIN, POSTGRES_ADMIN } from '../harness/databases.mjs';
import { freePort } from '../harness/process.mjs';
import { ROOT } from '../unit/_fixtures.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** The fenced blocks of one `## ` section, in order, as `{ lang, body }`. */
function blocksOf(section: string): Array<{ lang: string; body: string }> {
  const start = README.indexOf(`\n## ${section}\n`);
  expect(start, `README section "${section}"`).toBeGreaterThan(-1);
  const end = README.indexOf('\n## ', start + 4);
  const text = README.slice(start, end === -1 ? undefined : end);
  return [...text.matchAll(/```(\w*)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1]!, body: m[2]! }));
}

/** `from` replaced by `to` in `text`, failing when the README no longer has it (the test would say nothing). */
function substitute(text: string, from: string | RegExp, to: string): string {
  const out = text.replace(from, to);
  expect(out, `README command containing ${String(from)}`).not.toBe(text);
  return out;
}

/** A folder laid out like a checkout: the project's bin/, dist/, node_modules/, package.json, and `jobs`. */
function checkoutLike(jobs: 'examples' | Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'cron-readme-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  for (const name of ['bin', 'dist', 'node_modules', 'package.json']) symlinkSync(join(ROOT, name), join(dir, name));
  if (jobs === 'examples') symlinkSync(join(ROOT, 'jobs'), join(dir, 'jobs'));
  else {
    mkdirSync(join(dir, 'jobs'));
    for (const [file, src] of Object.entries(jobs)) writeFileSync(join(dir, 'jobs', file), src);
  }
  return dir;
}

/** A Redis key prefix of this file's own on the shared Redis (the README's commands name none). */
const REDIS_PREFIX = `readme-${process.pid}-${Date.now().toString(36)}:`;

/** Runs `script` with bash -e in `cwd`, with none of the SCHEDULER_* settings of the test's own environment but its key prefix. */
function bash(script: string, cwd: string, timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { SCHEDULER_REDIS_PREFIX: REDIS_PREFIX };
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SCHEDULER_')) env[k] = v;
  return new Promise((resolve) => {
    const child = spawn('bash', ['-e', '-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("the README's commands, as written", () => {
  it('your first job: the file it shows, then validate, next, run-once and history on SQLite', async () => {
    const blocks = blocksOf('Your first job');
    const job = blocks.find((b) => b.lang === 'js');
    const commands = blocks.find((b) => b.lang === 'sh');
    expect(job && commands, 'a js block (the job file) and an sh block (the commands)').toBeTruthy();
    expect(README).toContain('`jobs/hello.mjs`');
    const dir = checkoutLike({ 'hello.mjs': job!.body });
    const r = await bash(commands!.body, dir, 60_000);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/hello/);
    // run-once ran the body once, and history shows that run, succeeded.
    const history = await bash('bin/scheduler history hello --json', dir, 30_000);
    const runs = JSON.parse(history.stdout) as Array<{ job: string; trigger: string; status: string; result: unknown }>;
    expect(runs.map((x) => [x.job, x.trigger, x.status, x.result])).toEqual([['hello', 'manual', 'succeeded', { greeted: 'hello' }]]);
  });

  const clusterOn = async (store: 'mariadb' | 'postgres') => {
    const [mariaBlock, pgBlock] = blocksOf('A three-node cluster').filter((b) => b.lang === 'sh');
    expect(mariaBlock && pgBlock, 'the cluster block and its PostgreSQL lines').toBeTruthy();
    const db = databaseName('cron_readme');
    let script = mariaBlock!.body;
    if (store === 'postgres') {
      // "the same commands with this store instead of the first two lines"
      const lines = script.split('\n');
      script = [...pgBlock!.body.trimEnd().split('\n'), ...lines.slice(2)].join('\n');
      script = substitute(script, /(createdb .*) scheduler$/m, `$1 ${db}`);
      script = substitute(script, ':5432/scheduler\'', `:5432/${db}'`);
      cleanups.push(async () => {
        const k = knexFactory({ client: 'pg', connection: POSTGRES_ADMIN, pool: { min: 0, max: 1 } });
        await k.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [db]).finally(() => k.destroy());
      });
    } else {
      script = substitute(script, "CREATE DATABASE IF NOT EXISTS scheduler'", `CREATE DATABASE IF NOT EXISTS ${db}'`);
      script = substitute(script, ":3306/scheduler'", `:3306/${db}'`);
      cleanups.push(async () => {
        const k = knexFactory({ client: 'mysql2', connection: MARIADB_ADMIN, pool: { min: 0, max: 1 } });
        await k.raw('DROP DATABASE IF EXISTS ??', [db]).finally(() => k.destroy());
      });
    }
    for (const n of [1, 2, 3]) script = substitute(script, `127.0.0.1:947${n}`, `127.0.0.1:${await freePort()}`);
    const dir = checkoutLike('examples');
    const r = await bash(script, dir, 120_000);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    // `nodes` listed the three; `history heartbeat --limit 6` showed heartbeat periods, each once.
    for (const n of ['node-1', 'node-2', 'node-3']) expect(r.stdout).toContain(n);
    const storeEnv = `SCHEDULER_STORE=${JSON.stringify(store === 'postgres' ? `postgres://postgres@127.0.0.1:5432/${db}` : `mysql://root@127.0.0.1:3306/${db}`)}`;
    const history = await bash(`${storeEnv} bin/scheduler history heartbeat --json --limit 1000`, dir, 30_000);
    const runs = JSON.parse(history.stdout) as Array<{ periodKey: string; attempt: number; status: string; nodeId: string }>;
    expect(runs.length, 'heartbeat periods in 35 s (every 10 s)').toBeGreaterThanOrEqual(3);
    expect(new Set(runs.map((x) => `${x.periodKey}#${x.attempt}`)).size, 'each period once').toBe(runs.length);
    expect(runs.filter((x) => x.status !== 'succeeded'), 'all succeeded, none left running by the stop').toEqual([]);
    // `kill $(jobs -p)` stopped each node cleanly: each says so in the nodes table.
    const nodes = JSON.parse((await bash(`${storeEnv} bin/scheduler nodes --json`, dir, 30_000)).stdout) as Array<{ id: string; state: string }>;
    expect(nodes.map((n) => [n.id, n.state]).sort()).toEqual([['node-1', 'stopped'], ['node-2', 'stopped'], ['node-3', 'stopped']]);
  };

  it('a three-node cluster on MariaDB with Redis: the block as written', () => clusterOn('mariadb'));
  it('the same on PostgreSQL: its two lines instead of the first two', () => clusterOn('postgres'));
});
