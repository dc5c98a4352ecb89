/**
 * Store URLs with a host list (libpq's multi-host form for PostgreSQL, a list of MySQL/MariaDB hosts):
 * what is parsed, what is refused at start (one line naming the part, the password never shown), and
 * the writer finder's order and memory. The finder's probes here are functions; the fault suite
 * runs it against real replicated servers.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { NoWriterError, parseStoreHosts, WriterFinder, type StoreHost } from '../../src/store/hosts.js';

describe('parseStoreHosts', () => {
  it('reads libpq\'s multi-host form: hosts in order, default ports, IPv6, escaped credentials, target_session_attrs, other parameters kept', () => {
    const p = parseStoreHosts('postgres://sch%40ed:p%3Ass@pg-a:5433,pg-b,[::1]:6000/cron?target_session_attrs=read-write&sslmode=require', 'postgres');
    expect(p.hosts).toEqual([{ host: 'pg-a', port: 5433 }, { host: 'pg-b', port: 5432 }, { host: '::1', port: 6000 }]);
    expect(p).toMatchObject({ user: 'sch@ed', password: 'p:ss', database: 'cron', targetSessionAttrs: 'read-write' });
    expect(p.params.get('sslmode')).toBe('require');
    expect(p.params.has('target_session_attrs')).toBe(false);
    expect(parseStoreHosts('postgres://u@h/db', 'postgres').targetSessionAttrs).toBe('any');
    expect(parseStoreHosts('postgres://u@h/db?target_session_attrs=primary', 'postgres').targetSessionAttrs).toBe('primary');
  });

  it('reads a MySQL host list', () => {
    const p = parseStoreHosts('mysql://root:secret@g1:3307,g2:3308,g3/scheduler', 'mysql');
    expect(p.hosts).toEqual([{ host: 'g1', port: 3307 }, { host: 'g2', port: 3308 }, { host: 'g3', port: 3306 }]);
    expect(p.database).toBe('scheduler');
  });

  it.each([
    ['postgres://u:p@h1:5432,,h2/db', /an empty host/],
    ['postgres://u:p@h1:99999,h2/db', /port 99999, expected 1-65535/],
    ['postgres://u:p@h1:,h2/db', /empty port/],
    ['postgres://u:p@h1,h1:5432/db', /listed twice/],
    ['postgres://u:p@h1,h2/', /no database/],
    ['postgres://u:p@h1,h2/db?target_session_attrs=standby', /the scheduler writes/],
    ['postgres://u:p@h1,h2/db?target_session_attrs=rw', /expected read-write, primary or any/],
    ['mysql://u:p@h1,h2/db?target_session_attrs=read-write', /a PostgreSQL parameter/],
  ])('refuses %s', (url, why) => {
    expect(() => parseStoreHosts(url, url.startsWith('mysql') ? 'mysql' : 'postgres')).toThrow(why);
  });
});

describe('SCHEDULER_STORE with a host list', () => {
  const load = (store: string) => loadConfig({ env: { SCHEDULER_STORE: store }, cwd: '/tmp' });
  it('is accepted, with its hosts and target_session_attrs', () => {
    expect(load('postgres://u:p@pg-a:5432,pg-b:5433/db?target_session_attrs=read-write').store).toMatchObject({
      kind: 'postgres', hosts: [{ host: 'pg-a', port: 5432 }, { host: 'pg-b', port: 5433 }], targetSessionAttrs: 'read-write',
    });
    expect(load('mariadb://u:p@g1,g2:3307/db').store).toMatchObject({ kind: 'mysql', url: 'mysql://u:p@g1,g2:3307/db', hosts: [{ host: 'g1', port: 3306 }, { host: 'g2', port: 3307 }] });
  });

  it('a malformed list or an unknown target_session_attrs is one line naming the part, the password redacted', () => {
    for (const [url, part] of [['postgres://u:hunter2@pg-a:5432,pg-b:70000/db', 'pg-b:70000'], ['postgres://u:hunter2@pg-a,pg-b/db?target_session_attrs=bogus', 'target_session_attrs=bogus']] as const) {
      let message = '';
      try {
        load(url);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toContain('SCHEDULER_STORE');
      expect(message).toContain(part);
      expect(message).not.toContain('hunter2');
      expect(message.split('\n')).toHaveLength(1);
    }
  });
});

describe('WriterFinder', () => {
  const hosts: StoreHost[] = [{ host: 'a', port: 1 }, { host: 'b', port: 2 }, { host: 'c', port: 3 }];

  it('takes the first host that takes writes, keeps it until suspected, then tries it first again', async () => {
    const state: Record<string, string | null> = { a: 'in recovery (a standby)', b: null, c: null };
    const probed: string[] = [];
    const finder = new WriterFinder(hosts, async (h) => {
      probed.push(h.host);
      return state[h.host]!;
    });
    expect(await finder.writer()).toEqual(hosts[1]);
    expect(finder.passedOver).toEqual([{ host: 'a:1', why: 'in recovery (a standby)' }]);
    const gen = finder.generation;
    expect(await finder.writer()).toEqual(hosts[1]);
    expect(probed).toEqual(['a', 'b']);
    // b fails over to c: the search starts at b, then goes on in order.
    state.b = 'down: connect ECONNREFUSED';
    finder.suspect();
    expect(await finder.writer()).toEqual(hosts[2]);
    expect(probed).toEqual(['a', 'b', 'b', 'a', 'c']);
    expect(finder.generation).toBe(gen + 1);
  });

  it('with no host that takes writes: NoWriterError naming each host and why, one log line per 5 s', async () => {
    const lines: string[] = [];
    const finder = new WriterFinder(hosts, async (h) => (h.host === 'a' ? 'down: connect ECONNREFUSED 127.0.0.1:1' : 'read-only (default_transaction_read_only = on)'));
    finder.log = (_level, _fields, msg) => lines.push(msg);
    await expect(finder.writer()).rejects.toThrow(NoWriterError);
    await expect(finder.writer()).rejects.toThrow('no host of the list takes writes: a:1 down: connect ECONNREFUSED 127.0.0.1:1; b:2 read-only (default_transaction_read_only = on); c:3 read-only');
    expect(lines).toEqual(['store: no host of the list takes writes: a:1 down: connect ECONNREFUSED 127.0.0.1:1; b:2 read-only (default_transaction_read_only = on); c:3 read-only (default_transaction_read_only = on)']);
  });
});
