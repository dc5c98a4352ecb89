/**
 * scripts/test-setup.sh, the machine set-up shared by `npm test` (pretest) and .ci/run: silent and
 * quick when everything is there; a missing package it cannot install stops it with one line naming
 * the package. "Missing" is made by a PATH of links to the system's commands minus the ones named.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../harness/process.mjs';

const SCRIPT = join(ROOT, 'scripts/test-setup.sh');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A folder of links to every command in /usr/bin and /usr/sbin but `without`. */
function pathWithout(...without: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'cron-test-setup-'));
  chmodSync(dir, 0o755); // readable by nobody, below
  dirs.push(dir);
  for (const sys of ['/usr/bin', '/usr/sbin']) {
    for (const name of readdirSync(sys)) {
      if (without.includes(name)) continue;
      try {
        symlinkSync(join(sys, name), join(dir, name));
      } catch {
        // the same name in both folders: the first one wins, as on PATH
      }
    }
  }
  return dir;
}

/** The script with `path` as PATH; as nobody when `unprivileged` and this process is root. */
function run(path: string, { unprivileged = false } = {}) {
  const asNobody = unprivileged && process.getuid?.() === 0;
  const cmd = asNobody ? ['runuser', ['-u', 'nobody', '--', '/usr/bin/env', `PATH=${path}`, '/usr/bin/bash', SCRIPT]] as const : ['/usr/bin/bash', [SCRIPT]] as const;
  const t0 = Date.now();
  const r = spawnSync(cmd[0], [...cmd[1]], { encoding: 'utf8', env: { ...process.env, PATH: path }, timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, ms: Date.now() - t0 };
}

describe('scripts/test-setup.sh', () => {
  it('says nothing and is done within a few seconds when every package and service is there', () => {
    const r = run(process.env.PATH ?? '/usr/bin');
    expect(r.stderr + r.stdout).toBe('');
    expect(r.code).toBe(0);
    expect(r.ms).toBeLessThan(5000);
  });

  it('stops with one line naming the package when it is missing and there is no apt-get', () => {
    const r = run(pathWithout('faketime', 'apt-get'));
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe('[test-setup] missing Debian packages: faketime (no apt-get here to install them)\n');
    expect(r.code).toBe(1);
  });

  it('stops with one line naming the packages and the command to run when it is not root', () => {
    const r = run(pathWithout('faketime', 'promtool'), { unprivileged: true });
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe('[test-setup] missing Debian packages: faketime prometheus (as root: apt-get install faketime prometheus)\n');
    expect(r.code).toBe(1);
  });
});
