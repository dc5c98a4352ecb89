/**
 * Configuration: defaults < config file (config/scheduler.json in cwd, or --config) < SCHEDULER_* env
 * < flags. Every bad value is refused with a ConfigError of ONE line naming the setting as the user
 * wrote it, the value (passwords redacted) and what was expected.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { describeConfig, loadConfig, type LoadOptions } from '../../src/config/config.js';
import { redactText, redactUrl } from '../../src/config/redact.js';
import pino from 'pino';
import { loggerOptions } from '../../src/log-options.js';
import { ConfigError } from '../../src/errors.js';

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cron-unit-config-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function writeJson(path: string, value: unknown): void {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value, null, 2));
}

/** The ConfigError thrown by loadConfig; fails the test when the options are accepted. */
function refusal(options: LoadOptions): ConfigError {
  try {
    loadConfig(options);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('E_CONFIG');
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(options)}`);
}

/** The message is one line and names the setting, the value and what was expected. */
function expectOneLine(message: string, ...parts: string[]): void {
  expect(message).not.toContain('\n');
  expect(message).not.toContain('\r');
  for (const p of parts) expect(message).toContain(p);
  expect(message).toMatch(/expected/);
}

let cwd: string;
beforeEach(() => {
  cwd = tempDir();
});

describe('defaults', () => {
  it('with no file, environment or flags: ./jobs, SQLite under ./data, no Redis, UTC, info, http on 127.0.0.1:9464 (no token), 30s grace', () => {
    const c = loadConfig({ cwd, env: {}, flags: {} });
    expect(c.jobsDir).toBe(join(cwd, 'jobs'));
    expect(c.store).toEqual({ kind: 'sqlite', path: join(cwd, 'data', 'scheduler.db'), url: `sqlite:${join(cwd, 'data', 'scheduler.db')}` });
    expect(c.redis).toEqual([]);
    expect(c.timezone).toBe('UTC');
    expect(c.logLevel).toBe('info');
    expect(c.http).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(c.httpOrigin).toBeNull();
    expect(c.httpToken).toBeNull();
    expect(c.gracePeriodMs).toBe(30_000);
    expect(c.retentionMs).toBe(30 * 86_400_000);
    expect(c.nodeId).toBe(`${hostname()}-${process.pid}`);
    expect(c.configFile).toBeUndefined();
  });
});

describe('precedence: defaults < config file < environment < flags', () => {
  const fileSettings = {
    jobsDir: 'file-jobs',
    store: 'sqlite:file.db',
    timezone: 'Europe/Berlin',
    logLevel: 'warn',
    nodeId: 'file-node',
    http: '127.0.0.1:9464',
    gracePeriod: '1m',
    redis: 'redis://file-redis:6379',
  };

  it('config/scheduler.json in the working directory overrides the defaults; relative paths resolve against the working directory', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), fileSettings);
    const c = loadConfig({ cwd, env: {} });
    expect(c.jobsDir).toBe(join(cwd, 'file-jobs'));
    expect(c.store).toMatchObject({ kind: 'sqlite', path: join(cwd, 'file.db') });
    expect(c.timezone).toBe('Europe/Berlin');
    expect(c.logLevel).toBe('warn');
    expect(c.nodeId).toBe('file-node');
    expect(c.http).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(c.gracePeriodMs).toBe(60_000);
    expect(c.redis).toEqual(['redis://file-redis:6379']);
    expect(c.configFile).toBe(join(cwd, 'config', 'scheduler.json'));
  });

  it('--config names another file, which replaces config/scheduler.json', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), { timezone: 'Europe/Berlin', logLevel: 'warn' });
    writeJson(join(cwd, 'other', 'mine.json'), { timezone: 'Asia/Tokyo' });
    const c = loadConfig({ cwd, env: {}, flags: { config: 'other/mine.json' } });
    expect(c.timezone).toBe('Asia/Tokyo');
    expect(c.logLevel).toBe('info');
    expect(c.configFile).toBe(join(cwd, 'other', 'mine.json'));
  });

  it('the file accepts redis as a JSON array', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), { redis: ['redis://a:6379', 'redis://b:6379', 'redis://c:6379'] });
    expect(loadConfig({ cwd, env: {} }).redis).toEqual(['redis://a:6379', 'redis://b:6379', 'redis://c:6379']);
  });

  it('SCHEDULER_* environment variables override the file', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), fileSettings);
    const c = loadConfig({
      cwd,
      env: {
        SCHEDULER_JOBS_DIR: 'env-jobs',
        SCHEDULER_STORE: 'mysql://app:pw@db.example:3306/app',
        SCHEDULER_REDIS: 'redis://r1:6379,redis://r2:6379, redis://r3:6379',
        SCHEDULER_NODE_ID: 'env-node',
        SCHEDULER_TIMEZONE: 'America/New_York',
        SCHEDULER_HTTP: 'off',
        SCHEDULER_LOG_LEVEL: 'debug',
        SCHEDULER_GRACE_PERIOD: '5s',
      },
    });
    expect(c.jobsDir).toBe(join(cwd, 'env-jobs'));
    expect(c.store).toEqual({ kind: 'mysql', url: 'mysql://app:pw@db.example:3306/app', hosts: [{ host: 'db.example', port: 3306 }] });
    expect(c.redis).toEqual(['redis://r1:6379', 'redis://r2:6379', 'redis://r3:6379']);
    expect(c.nodeId).toBe('env-node');
    expect(c.timezone).toBe('America/New_York');
    expect(c.http).toBe('off');
    expect(c.logLevel).toBe('debug');
    expect(c.gracePeriodMs).toBe(5000);
  });

  it('an empty environment variable counts as unset (the file value stays)', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), { timezone: 'Europe/Berlin' });
    expect(loadConfig({ cwd, env: { SCHEDULER_TIMEZONE: '' } }).timezone).toBe('Europe/Berlin');
  });

  it('flags override the environment and the file', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), fileSettings);
    const c = loadConfig({
      cwd,
      env: { SCHEDULER_TIMEZONE: 'America/New_York', SCHEDULER_LOG_LEVEL: 'debug', SCHEDULER_STORE: 'sqlite:env.db', SCHEDULER_JOBS_DIR: 'env-jobs', SCHEDULER_NODE_ID: 'env-node' },
      flags: { timezone: 'Asia/Shanghai', logLevel: 'error', store: 'postgres://u:pw@pg:5432/cron', jobsDir: '/abs/jobs', nodeId: 'flag-node', redis: 'redis://flag:6379' },
    });
    expect(c.timezone).toBe('Asia/Shanghai');
    expect(c.logLevel).toBe('error');
    expect(c.store).toEqual({ kind: 'postgres', url: 'postgres://u:pw@pg:5432/cron', hosts: [{ host: 'pg', port: 5432 }], targetSessionAttrs: 'any' });
    expect(c.jobsDir).toBe('/abs/jobs');
    expect(c.nodeId).toBe('flag-node');
    expect(c.redis).toEqual(['redis://flag:6379']);
    // Settings without a flag keep the environment's or the file's value.
    expect(c.gracePeriodMs).toBe(60_000);
  });

  it('undefined flags (options the user did not pass) do not hide the environment', () => {
    const c = loadConfig({ cwd, env: { SCHEDULER_TIMEZONE: 'Europe/Berlin' }, flags: { timezone: undefined } });
    expect(c.timezone).toBe('Europe/Berlin');
  });

  it('store forms: sqlite relative and absolute paths, sqlite::memory:, mysql, mariadb, postgres, postgresql', () => {
    expect(loadConfig({ cwd, env: { SCHEDULER_STORE: 'sqlite:./x/y.db' } }).store).toMatchObject({ kind: 'sqlite', path: join(cwd, 'x', 'y.db') });
    expect(loadConfig({ cwd, env: { SCHEDULER_STORE: 'sqlite:/var/lib/s.db' } }).store).toMatchObject({ kind: 'sqlite', path: '/var/lib/s.db' });
    expect(loadConfig({ cwd, env: { SCHEDULER_STORE: 'sqlite:///var/lib/s.db' } }).store).toMatchObject({ kind: 'sqlite', path: '/var/lib/s.db' });
    expect(loadConfig({ cwd, env: { SCHEDULER_STORE: 'sqlite::memory:' } }).store).toMatchObject({ kind: 'sqlite', path: ':memory:' });
    expect(loadConfig({ cwd, env: { SCHEDULER_STORE: 'mariadb://u:p@h:3306/d' } }).store).toEqual({ kind: 'mysql', url: 'mysql://u:p@h:3306/d', hosts: [{ host: 'h', port: 3306 }] });
    expect(loadConfig({ cwd, env: { SCHEDULER_STORE: 'postgresql://u@h/d' } }).store).toMatchObject({ kind: 'postgres' });
  });

  it('http accepts host:port, [ipv6]:port and off', () => {
    expect(loadConfig({ cwd, env: { SCHEDULER_HTTP: '0.0.0.0:8080' } }).http).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(loadConfig({ cwd, env: { SCHEDULER_HTTP: '[::1]:9464' } }).http).toEqual({ host: '::1', port: 9464 });
    expect(loadConfig({ cwd, env: { SCHEDULER_HTTP: 'off' } }).http).toBe('off');
    expect(loadConfig({ cwd, env: { SCHEDULER_HTTP: '127.0.0.1:0' } }).http).toEqual({ host: '127.0.0.1', port: 0 });
    expect(loadConfig({ cwd, env: { SCHEDULER_HTTP: '127.0.0.1:0' } }).httpOrigin).toBe('SCHEDULER_HTTP');
    expect(loadConfig({ cwd, env: {}, flags: { http: '127.0.0.1:1' } }).httpOrigin).toBe('--http');
  });

  it('SCHEDULER_HTTP_TOKEN is kept for the server and never shown', () => {
    const c = loadConfig({ cwd, env: { SCHEDULER_HTTP_TOKEN: 's3cret-token' } });
    expect(c.httpToken).toBe('s3cret-token');
    expect(JSON.stringify(describeConfig(c))).not.toContain('s3cret-token');
    expect(describeConfig(c).httpToken).toBe('***');
    expect(() => loadConfig({ cwd, env: { SCHEDULER_HTTP_TOKEN: 'two words' } })).toThrow(/SCHEDULER_HTTP_TOKEN=\*\*\*: expected a token without spaces/);
  });
});

describe('retention', () => {
  it('default 30d; a duration or off from the file, the environment or the flag', () => {
    expect(loadConfig({ cwd, env: {} }).retentionMs).toBe(30 * 86_400_000);
    expect(describeConfig(loadConfig({ cwd, env: {} })).retention).toBe('30d');
    writeJson(join(cwd, 'config', 'scheduler.json'), { retention: '7d' });
    expect(loadConfig({ cwd, env: {} }).retentionMs).toBe(7 * 86_400_000);
    expect(loadConfig({ cwd, env: { SCHEDULER_RETENTION: 'off' } }).retentionMs).toBeNull();
    expect(describeConfig(loadConfig({ cwd, env: { SCHEDULER_RETENTION: 'off' } })).retention).toBe('off');
    expect(loadConfig({ cwd, env: { SCHEDULER_RETENTION: 'off' }, flags: { retention: '1d12h' } }).retentionMs).toBe(36 * 3_600_000);
    expect(loadConfig({ cwd, env: { SCHEDULER_RETENTION: 'OFF' } }).retentionMs).toBeNull();
  });

  it('milliseconds as a JSON number in the file are a duration too', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), { retention: 86_400_000 });
    expect(loadConfig({ cwd, env: {} }).retentionMs).toBe(86_400_000);
  });

  it('a bad value in the file names the file key', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), { retention: true });
    expectOneLine(refusal({ cwd, env: {} }).message, 'scheduler.json', 'retention', 'true', "'off'");
  });
});

describe('bad values are refused with one line naming the setting, the value and what was expected', () => {
  const cases: Array<{ what: string; env?: Record<string, string>; flags?: LoadOptions['flags']; names: string[] }> = [
    { what: 'store with an unknown scheme', env: { SCHEDULER_STORE: 'ftp://x' }, names: ['SCHEDULER_STORE', 'ftp://x', 'sqlite:', 'mysql://', 'postgres://'] },
    { what: 'store that is not a URL', env: { SCHEDULER_STORE: 'nonsense' }, names: ['SCHEDULER_STORE', 'nonsense'] },
    { what: 'sqlite store without a path', env: { SCHEDULER_STORE: 'sqlite:' }, names: ['SCHEDULER_STORE', 'sqlite:'] },
    { what: 'mysql store without a database', env: { SCHEDULER_STORE: 'mysql://db.example:3306' }, names: ['SCHEDULER_STORE', 'mysql://db.example:3306', 'database'] },
    { what: 'store given as a flag', flags: { store: 'mongodb://h/d' }, names: ['--store', 'mongodb://h/d'] },
    { what: 'redis URL with another scheme', env: { SCHEDULER_REDIS: 'redis://a:6379,http://b:6379' }, names: ['SCHEDULER_REDIS', 'http://b:6379', 'redis://'] },
    { what: 'redis that is not a URL', env: { SCHEDULER_REDIS: 'localhost' }, names: ['SCHEDULER_REDIS', 'localhost'] },
    { what: 'redis given twice', env: { SCHEDULER_REDIS: 'redis://a:6379,redis://a:6379' }, names: ['SCHEDULER_REDIS', 'twice'] },
    { what: 'an even number of redis masters', env: { SCHEDULER_REDIS: 'redis://a:6379,redis://b:6379' }, names: ['SCHEDULER_REDIS', 'odd number'] },
    { what: 'redis as a flag', flags: { redis: 'tcp://r:6379' }, names: ['--redis', 'tcp://r:6379'] },
    { what: 'unknown time zone (env)', env: { SCHEDULER_TIMEZONE: 'Mars/Olympus' }, names: ['SCHEDULER_TIMEZONE', 'Mars/Olympus', 'IANA'] },
    { what: 'unknown time zone (flag)', flags: { timezone: 'Mars/Olympus' }, names: ['--timezone', 'Mars/Olympus', 'IANA'] },
    { what: 'unknown log level', env: { SCHEDULER_LOG_LEVEL: 'loud' }, names: ['SCHEDULER_LOG_LEVEL', 'loud', 'info', 'debug'] },
    { what: 'log level as a flag', flags: { logLevel: 'verbose' }, names: ['--log-level', 'verbose', 'info'] },
    { what: 'http without a port', env: { SCHEDULER_HTTP: 'nope' }, names: ['SCHEDULER_HTTP', 'nope', 'host:port', 'off'] },
    { what: 'http with a port out of range', env: { SCHEDULER_HTTP: '127.0.0.1:99999' }, names: ['SCHEDULER_HTTP', '127.0.0.1:99999', 'host:port'] },
    { what: 'http without a host', env: { SCHEDULER_HTTP: ':8080' }, names: ['SCHEDULER_HTTP', ':8080'] },
    { what: 'grace period that is not a duration', env: { SCHEDULER_GRACE_PERIOD: 'soon' }, names: ['SCHEDULER_GRACE_PERIOD', 'soon', '30s'] },
    { what: 'negative grace period', flags: { gracePeriod: '-5s' }, names: ['--grace-period', '-5s'] },
    { what: 'retention that is not a duration', env: { SCHEDULER_RETENTION: 'forever' }, names: ['SCHEDULER_RETENTION', 'forever', '30d', "'off'"] },
    { what: 'retention of zero', env: { SCHEDULER_RETENTION: '0d' }, names: ['SCHEDULER_RETENTION', '0d', 'more than 0'] },
    { what: 'negative retention (flag)', flags: { retention: '-30d' }, names: ['--retention', '-30d', "'off'"] },
    { what: 'node id longer than 100 characters', env: { SCHEDULER_NODE_ID: 'n'.repeat(101) }, names: ['SCHEDULER_NODE_ID', 'n'.repeat(101), '100'] },
  ];
  for (const c of cases) {
    it(`${c.what}: names ${c.names[0]}`, () => {
      const err = refusal({ cwd, env: c.env ?? {}, flags: c.flags ?? {} });
      expectOneLine(err.message, ...c.names);
    });
  }

  it('a bad value in the config file names the file and the key as written there', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), { timezone: 'Mars/Olympus' });
    const err = refusal({ cwd, env: {} });
    expectOneLine(err.message, 'scheduler.json', 'timezone', 'Mars/Olympus', 'IANA');
  });

  it('a value of the wrong JSON type in the file is shown as JSON', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), { http: 8080 });
    expectOneLine(refusal({ cwd, env: {} }).message, 'scheduler.json', 'http', '8080', 'host:port');
    writeJson(join(cwd, 'config', 'scheduler.json'), { logLevel: 3 });
    expectOneLine(refusal({ cwd, env: {} }).message, 'logLevel', '3', 'info');
  });

  it('an unknown key in the file (a typo) is refused, naming it and the known keys', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), { timezone: 'UTC', timezon: 'Europe/Berlin' });
    const err = refusal({ cwd, env: {} });
    expectOneLine(err.message, 'scheduler.json', "'timezon'", 'timezone', 'jobsDir', 'store');
  });

  it('a file that is not valid JSON is refused, naming the file', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), '{ "timezone": "Europe/Berlin", }');
    const err = refusal({ cwd, env: {} });
    expect(err.message).not.toContain('\n');
    expect(err.message).toContain(join(cwd, 'config', 'scheduler.json'));
    expect(err.message).toMatch(/is not valid JSON: \S/);
  });

  it('a file whose JSON is not an object is refused', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), '["UTC"]');
    expect(refusal({ cwd, env: {} }).message).toMatch(/scheduler\.json.*expected a JSON object/);
  });

  it('a missing --config file is refused, naming --config, the value and the resolved path', () => {
    const err = refusal({ cwd, env: {}, flags: { config: 'nope/missing.json' } });
    expectOneLine(err.message, '--config', 'nope/missing.json', join(cwd, 'nope', 'missing.json'));
  });

  it('the value of a flag wins even when it is bad (a good environment value does not hide it)', () => {
    const err = refusal({ cwd, env: { SCHEDULER_TIMEZONE: 'UTC' }, flags: { timezone: 'Nowhere/Land' } });
    expectOneLine(err.message, '--timezone', 'Nowhere/Land');
  });

  it('a bad environment value is refused even when the file is good', () => {
    writeJson(join(cwd, 'config', 'scheduler.json'), { logLevel: 'warn' });
    expectOneLine(refusal({ cwd, env: { SCHEDULER_LOG_LEVEL: 'noisy' } }).message, 'SCHEDULER_LOG_LEVEL', 'noisy');
  });
});

describe('passwords never appear in a message', () => {
  const SECRET = 'secretpw';
  const cases: Array<{ what: string; options: () => LoadOptions; names: string[] }> = [
    { what: 'store with an unknown scheme', options: () => ({ cwd, env: { SCHEDULER_STORE: `ftp://user:${SECRET}@host/x` } }), names: ['SCHEDULER_STORE', 'ftp://user:***@host/x'] },
    { what: 'mysql store without a database', options: () => ({ cwd, env: { SCHEDULER_STORE: `mysql://root:${SECRET}@db.example:3306` } }), names: ['SCHEDULER_STORE', 'mysql://root:***@db.example:3306'] },
    { what: 'postgres store without a host, from the file', options: () => {
      writeJson(join(cwd, 'config', 'scheduler.json'), { store: `postgres://u:${SECRET}@/` });
      return { cwd, env: {} };
    }, names: ['store', 'postgres://u:***@'] },
    { what: 'store flag', options: () => ({ cwd, env: {}, flags: { store: `mongodb://u:${SECRET}@h/d` } }), names: ['--store', 'mongodb://u:***@h/d'] },
    { what: 'a password that contains @', options: () => ({ cwd, env: { SCHEDULER_STORE: `mysql://u:${SECRET}@x@db.example` } }), names: ['SCHEDULER_STORE', 'mysql://u:***@db.example'] },
    { what: 'redis with another scheme', options: () => ({ cwd, env: { SCHEDULER_REDIS: `http://:${SECRET}@r:6379` } }), names: ['SCHEDULER_REDIS', 'http://:***@r:6379'] },
    { what: 'redis listed twice (every URL of the list is redacted)', options: () => ({ cwd, env: { SCHEDULER_REDIS: `redis://:${SECRET}@a:6379,redis://:${SECRET}@a:6379` } }), names: ['SCHEDULER_REDIS', 'redis://:***@a:6379'] },
    { what: 'redis listed twice in the file as an array', options: () => {
      writeJson(join(cwd, 'config', 'scheduler.json'), { redis: [`redis://u:${SECRET}@a:6379`, `redis://u:${SECRET}@a:6379`] });
      return { cwd, env: {} };
    }, names: ['redis', 'redis://u:***@a:6379'] },
  ];
  for (const c of cases) {
    it(`${c.what}: redacted as ***`, () => {
      const err = refusal(c.options());
      expectOneLine(err.message, ...c.names);
      expect(err.message).not.toContain(SECRET);
    });
  }

  it('describeConfig shows the store and Redis URLs without their passwords', () => {
    const c = loadConfig({ cwd, env: { SCHEDULER_STORE: `mysql://app:${SECRET}@db:3306/app`, SCHEDULER_REDIS: `redis://:${SECRET}@r1:6379,rediss://u:${SECRET}@r2:6380,redis://r3:6379` } });
    const shown = JSON.stringify(describeConfig(c));
    expect(shown).not.toContain(SECRET);
    expect(describeConfig(c)).toMatchObject({ store: 'mysql://app:***@db:3306/app', redis: ['redis://:***@r1:6379', 'rediss://u:***@r2:6380', 'redis://r3:6379'] });
  });
});

describe('log redaction', () => {
  it("a logged `url` keeps its address and loses only its password; `password` fields go whole", () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = pino(loggerOptions('info'), { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
    log.info({ url: 'http://127.0.0.1:9464', store: { url: 'postgres://app:hunter2@db/x' }, password: 'hunter3' }, 'x');
    expect(lines[0]).toMatchObject({ url: 'http://127.0.0.1:9464', store: { url: 'postgres://app:***@db/x' }, password: '***' });
    log.info({ url: { nested: 'hunter4' } }, 'y');
    expect(lines[1]!.url).toBe('***');
  });
});

describe('redactUrl / redactText', () => {
  it('hide user passwords, password-only credentials and passwords containing @', () => {
    expect(redactUrl('mysql://app:secret@db/x')).toBe('mysql://app:***@db/x');
    expect(redactUrl('redis://:secret@r:6379')).toBe('redis://:***@r:6379');
    expect(redactUrl('postgres://u:p@ss@h:5432/d')).toBe('postgres://u:***@h:5432/d');
  });

  it('leave URLs without a password alone', () => {
    expect(redactUrl('mysql://root@127.0.0.1:3306/test')).toBe('mysql://root@127.0.0.1:3306/test');
    expect(redactUrl('sqlite:/tmp/x.db')).toBe('sqlite:/tmp/x.db');
    expect(redactUrl('redis://r1:6379')).toBe('redis://r1:6379');
  });

  it('redactText hides every URL password in a free text', () => {
    const text = 'connect to mysql://root:pw1@h:1/x failed; also redis://:pw2@r:6379 and postgres://u:pw3@p/d';
    const out = redactText(text);
    for (const pw of ['pw1', 'pw2', 'pw3']) expect(out).not.toContain(pw);
    expect(out).toBe('connect to mysql://root:***@h:1/x failed; also redis://:***@r:6379 and postgres://u:***@p/d');
  });
});
