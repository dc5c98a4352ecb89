/**
 * deploy/systemd: the units pass `systemd-analyze verify` with no output at all (warnings included),
 * once their install path (/opt/cluster-cron) is this checkout; they carry the hardening, stop and
 * restart settings the docs promise (docs/deploying.md); their settings are ones the scheduler reads and accepts.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/config.js';
import { JOB_DEFAULTS } from '../../src/jobs/validate.js';
import { STOP_MARGIN_MS } from '../../src/daemon/stop-budget.js';
import { parseDuration } from '../../src/time/duration.js';
import { runCli } from '../helpers/cli.js';
import { DEPLOY, knownVariables, last, parseUnit, ROOT, timespanMs, type Unit } from './deploy-kit.js';

const DIR = join(DEPLOY, 'systemd');
const INSTALL = '/opt/cluster-cron';
const DAEMON = 'cluster-cron.service';
const PASS = 'cluster-cron-run-once.service';
const TIMER = 'cluster-cron-run-once.timer';
const FILES = [DAEMON, PASS, TIMER];

const text = (name: string) => readFileSync(join(DIR, name), 'utf8');
const unit = (name: string): Unit => parseUnit(text(name));
const tmp = mkdtempSync(join(tmpdir(), 'deploy-systemd-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The units as installed from this checkout: /opt/cluster-cron replaced by the checkout's path. */
function installed(transform: (name: string, text: string) => string = (_n, t) => t): string {
  const dir = mkdtempSync(join(tmp, 'units-'));
  for (const name of FILES) writeFileSync(join(dir, name), transform(name, text(name).replaceAll(INSTALL, ROOT.replace(/\/$/, ''))));
  return dir;
}

function verify(dir: string, names = FILES) {
  const r = spawnSync('systemd-analyze', ['verify', ...names.map((n) => `./${n}`)], { cwd: dir, encoding: 'utf8' });
  if (r.error) throw new Error(`systemd-analyze is needed (Debian package systemd; scripts/test-setup.sh installs it): ${r.error.message}`);
  return { code: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

/** Environment= assignments of a service, in order, with %H expanded as systemd would. */
function environment(u: Unit): Record<string, string> {
  const env: Record<string, string> = {};
  for (const value of u.Service?.Environment ?? []) {
    for (const assignment of value.split(/\s+/)) {
      const eq = assignment.indexOf('=');
      env[assignment.slice(0, eq)] = assignment.slice(eq + 1).replaceAll('%H', 'node-a');
    }
  }
  return env;
}

describe('systemd units', () => {
  it('pass systemd-analyze verify with no warning or error', () => {
    expect(text(DAEMON)).toContain(`ExecStart=${INSTALL}/bin/scheduler run`);
    expect(text(PASS)).toContain(`ExecStart=${INSTALL}/bin/scheduler run-once`);
    const r = verify(installed());
    expect(r.output).toBe('');
    expect(r.code).toBe(0);
  });

  it('the verify step does catch a broken unit (a misspelt key, a missing binary)', () => {
    const misspelt = verify(installed((name, t) => (name === DAEMON ? t.replace('KillMode=', 'KilMode=') : t)), [DAEMON]);
    expect(misspelt.output).toMatch(/Unknown key 'KilMode'/);
    const missing = verify(installed((name, t) => (name === PASS ? t.replace(/^ExecStart=\S+/m, 'ExecStart=/nonexistent/scheduler') : t)), [PASS]);
    expect(missing.output).toMatch(/nonexistent\/scheduler is not executable/);
    expect(missing.code).not.toBe(0);
  });

  it('are hardened: systemd-analyze security rates both services "OK" (exposure below 2.0)', () => {
    const dir = installed();
    for (const name of [DAEMON, PASS]) {
      const out = execFileSync('systemd-analyze', ['security', '--offline=yes', '--no-pager', join(dir, name)], { encoding: 'utf8' });
      const m = /Overall exposure level for \S+: ([\d.]+)/.exec(out);
      expect(m, out).not.toBeNull();
      expect(Number(m![1]), `${name} exposure`).toBeLessThan(2.0);
    }
  });

  it('both services: dedicated user, read-only system, only the state folder writable, settings file', () => {
    for (const name of [DAEMON, PASS]) {
      const u = unit(name);
      const s = (key: string) => last(u, 'Service', key);
      expect(s('DynamicUser'), name).toBe('yes');
      expect(s('User'), name).toBe('cluster-cron');
      expect(s('NoNewPrivileges'), name).toBe('yes');
      expect(s('ProtectSystem'), name).toBe('strict');
      expect(s('ProtectHome'), name).toBe('yes');
      expect(s('PrivateTmp'), name).toBe('yes');
      expect(s('CapabilityBoundingSet'), name).toBe('');
      expect(s('StateDirectory'), name).toBe('cluster-cron');
      expect(u.Service?.ReadWritePaths, `${name}: nothing writable beside the state folder`).toBeUndefined();
      // V8's JIT needs writable executable memory: this setting would crash Node at start.
      expect(s('MemoryDenyWriteExecute'), name).toBeUndefined();
      expect(s('EnvironmentFile'), name).toBe('-/etc/cluster-cron/scheduler.env');
      const env = environment(u);
      expect(env.SCHEDULER_STORE, `${name}: the SQLite file is in the state folder`).toBe('sqlite:/var/lib/cluster-cron/scheduler.db');
      expect(s('WorkingDirectory'), name).toBe('/var/lib/cluster-cron');
    }
    // The two share one dynamic user, so both own the same state folder (and SQLite file).
    expect(environment(unit(DAEMON))).toEqual(environment(unit(PASS)));
  });

  it('the daemon: SIGTERM to stop, within a TimeoutStopSec above gracePeriod + lockTtl; SIGHUP on reload; restarted on failure', () => {
    const u = unit(DAEMON);
    const s = (key: string) => last(u, 'Service', key);
    expect(s('ExecStart')).toBe(`${INSTALL}/bin/scheduler run`);
    expect(s('ExecReload')).toMatch(/^\/bin\/kill -HUP \$MAINPID$/);
    expect(s('KillSignal')).toBe('SIGTERM');
    // A stop takes at most gracePeriod + the job's lockTtl + STOP_MARGIN_MS (8.5 s) (docs/how-it-works.md, Shutdown).
    const stopMs = parseDuration(DEFAULTS.gracePeriod)! + parseDuration(JOB_DEFAULTS.lockTtl)! + STOP_MARGIN_MS;
    // The docs' figures are the code's.
    const howItWorks = readFileSync(join(ROOT, 'docs/how-it-works.md'), 'utf8');
    const deploying = readFileSync(join(ROOT, 'docs/deploying.md'), 'utf8');
    expect(howItWorks).toContain(`the largest \`lockTtl\` of its jobs + ${STOP_MARGIN_MS / 1000} s`);
    expect(deploying).toContain(`+ ${STOP_MARGIN_MS / 1000} s (see [Shutdown](how-it-works.md#shutdown)): ${stopMs / 1000} s with`);
    expect(timespanMs(s('TimeoutStopSec')!)).toBeGreaterThan(stopMs);
    expect(['on-failure', 'always']).toContain(s('Restart'));
    expect(timespanMs(s('RestartSec')!)).toBeGreaterThanOrEqual(1000);
    // Exit 2 is a bad configuration or job file: a restart loop would not fix it.
    expect(s('RestartPreventExitStatus')).toBe('2');
    expect(last(u, 'Install', 'WantedBy')).toBe('multi-user.target');
  });

  it('the timer starts the run-once oneshot every minute, catching up after downtime', () => {
    const t = unit(TIMER);
    expect(last(t, 'Timer', 'Unit')).toBe(PASS);
    expect(last(t, 'Timer', 'Persistent')).toBe('true');
    expect(last(t, 'Install', 'WantedBy')).toBe('timers.target');
    const calendar = last(t, 'Timer', 'OnCalendar')!;
    const out = execFileSync('systemd-analyze', ['calendar', '--iterations=2', calendar], { encoding: 'utf8' });
    const next = [...out.matchAll(/(?:Next elapse|Iter\. #2):\s+\w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)/g)].map((m) => Date.parse(`${m[1]}Z`));
    expect(next).toHaveLength(2);
    expect(next[1]! - next[0]!).toBe(60_000);
    const p = unit(PASS);
    expect(last(p, 'Service', 'Type')).toBe('oneshot');
    expect(last(p, 'Service', 'ExecStart')).toBe(`${INSTALL}/bin/scheduler run-once`);
    expect(timespanMs(last(p, 'Service', 'TimeoutStartSec')!)).toBeGreaterThanOrEqual(600_000);
  });

  it('every SCHEDULER_* name in the units and the settings example is one the scheduler reads', () => {
    const known = knownVariables();
    const used = new Set<string>();
    for (const name of [...FILES, 'scheduler.env.example']) for (const m of text(name).matchAll(/SCHEDULER_[A-Z_]+/g)) used.add(m[0]);
    expect(used.size).toBeGreaterThan(5);
    expect([...used].filter((n) => !known.has(n))).toEqual([]);
  });

  it('the scheduler accepts the units\' settings with every line of scheduler.env.example switched on', async () => {
    const env: Record<string, string> = { ...environment(unit(DAEMON)) };
    for (const line of text('scheduler.env.example').split('\n')) {
      const m = /^#?(SCHEDULER_[A-Z_]+)=(.*)$/.exec(line.trim());
      if (m) env[m[1]!] = m[2]!;
    }
    expect(env.SCHEDULER_REDIS).toBeDefined();
    // The paths of a real install do not exist here: an empty jobs folder and a temp data folder.
    const jobs = join(tmp, 'jobs');
    mkdirSync(jobs, { recursive: true });
    env.SCHEDULER_JOBS_DIR = jobs;
    const r = await runCli(['validate', '--json'], { env, cwd: tmp });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ valid: true });
  });
});
