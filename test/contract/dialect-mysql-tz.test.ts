/**
 * The MySQL-family clock under a real DST zone, on a private mariadbd started for this file with
 * TZ=Europe/Berlin (the shared server has no time-zone tables, and must not get them). The dialect
 * suite on the shared servers is _dialect.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mysqlDialect } from '../../src/store/dialect/mysql.js';
import { freePort } from '../helpers/redis.js';
import { FALL_BACK_INSTANTS, OLD_MYSQL_NOW, sleep } from './_dialect.js';

const MARIADBD = ['/usr/sbin/mariadbd', '/usr/bin/mariadbd'].find((p) => existsSync(p));
const INSTALL_DB = ['/usr/bin/mariadb-install-db', '/usr/bin/mysql_install_db'].find((p) => existsSync(p));

describe('MySQL dialect clock under a real DST zone: a private mariadbd with TZ=Europe/Berlin (time_zone SYSTEM, no tz tables needed)', () => {
  let dir: string;
  let proc: ChildProcess | undefined;
  let k: Knex;

  beforeAll(async () => {
    // The machine's MariaDB server package and tz data are part of what the suite needs (as for the shared server).
    if (!MARIADBD || !INSTALL_DB) throw new Error('mariadbd and mariadb-install-db are needed (Debian package mariadb-server)');
    if (!existsSync('/usr/share/zoneinfo/Europe/Berlin')) throw new Error('/usr/share/zoneinfo/Europe/Berlin is needed (Debian package tzdata)');
    dir = mkdtempSync(join(tmpdir(), 'cron-dialect-tz-'));
    const port = await freePort();
    const asRoot = process.getuid?.() === 0 ? ['--user=root'] : [];
    await new Promise<void>((resolve, reject) => {
      const p = spawn(INSTALL_DB!, ['--no-defaults', ...asRoot, `--datadir=${join(dir, 'data')}`, '--auth-root-authentication-method=normal', '--skip-test-db'], { stdio: 'ignore' });
      p.on('error', reject);
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`mariadb-install-db exited ${code}`))));
    });
    proc = spawn(MARIADBD!, ['--no-defaults', ...asRoot, `--datadir=${join(dir, 'data')}`, `--socket=${join(dir, 'sock')}`, `--port=${port}`, '--bind-address=127.0.0.1',
      `--pid-file=${join(dir, 'pid')}`, '--innodb-buffer-pool-size=16M', '--skip-log-bin', `--log-error=${join(dir, 'err.log')}`], { env: { ...process.env, TZ: 'Europe/Berlin' }, stdio: 'ignore' });
    const url = `mysql://root@127.0.0.1:${port}/mysql`;
    k = knexFactory(mysqlDialect().knexConfig({ kind: 'mysql', url }));
    const until = Date.now() + 30_000;
    for (;;) {
      try {
        await k.raw('select 1');
        break;
      } catch (err) {
        if (Date.now() > until || proc.exitCode !== null) throw err;
        await sleep(250);
      }
    }
  });

  afterAll(async () => {
    await k?.destroy().catch(() => {});
    if (proc && proc.exitCode === null) {
      const exited = new Promise((r) => proc!.once('exit', r));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc!.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('nowMs is exact at every instant of the fall-back under the SYSTEM zone; the old expression is an hour off in the repeated hour (stated)', async () => {
    const dialect = mysqlDialect();
    const conn = await k.client.acquireConnection();
    const q = async (s: string) => ((await k.raw(s).connection(conn)) as unknown as [Array<Record<string, unknown>>])[0];
    const seen: Array<{ instant: string; local: string; nowMs: number; oldMs: number }> = [];
    try {
      await q("SET time_zone = 'SYSTEM'");
      const [zone] = await q('select @@system_time_zone as sys, @@session.time_zone as tz');
      expect(zone!.tz).toBe('SYSTEM');
      expect(['CET', 'CEST']).toContain(zone!.sys);
      for (const instant of FALL_BACK_INSTANTS) {
        await q(`SET timestamp = ${instant / 1000}`);
        const [row] = await q(`select ${dialect.nowMs} as now_ms, ${OLD_MYSQL_NOW} as old_ms, CAST(CURRENT_TIMESTAMP(3) AS CHAR) as local`);
        seen.push({ instant: new Date(instant).toISOString(), local: String(row!.local), nowMs: Number(row!.now_ms), oldMs: Number(row!.old_ms) });
      }
    } finally {
      await q('SET timestamp = DEFAULT').catch(() => {});
      await k.client.releaseConnection(conn);
    }
    for (const [i, instant] of FALL_BACK_INSTANTS.entries()) expect(seen[i]!.nowMs, JSON.stringify(seen[i])).toBe(instant);
    // Documented expectation, as observed on MariaDB 10.11: local 02:30 happens twice (CEST, then CET);
    // UNIX_TIMESTAMP() maps the repeated local time to its later instant, so the old expression
    // returned 01:30Z at 00:30Z (an hour ahead) and 01:00Z..01:30Z right.
    expect(seen.map((s) => s.local)).toEqual(['2026-10-25 02:30:00.000', '2026-10-25 02:59:59.500', '2026-10-25 02:00:00.000', '2026-10-25 02:30:00.000']);
    expect(seen.map((s) => s.oldMs - Date.parse(s.instant))).toEqual([3_600_000, 3_600_000, 0, 0]);
  });
});
