/**
 * A PostgreSQL primary and a streaming standby from Debian's binaries (/usr/lib/postgresql/<v>/bin),
 * for the tests and benchmarks that need a store that fails over: each server on a free port of its
 * own, in a temporary folder, run as the `postgres` user (PostgreSQL refuses root), listening on
 * 127.0.0.1 only. Never touches the shared server on 5432.
 *
 *   startPgReplicas({ sync })   primary + standby (pg_basebackup -R), synchronous (the primary's
 *                               synchronous_standby_names = '*') or asynchronous
 *   pair.crash(i)               an immediate stop of server i (SIGQUIT: no checkpoint, as a crash)
 *   pair.promote(i)             pg_ctl promote, until it takes writes
 *   pair.rejoin(i)              the old primary back as a standby of the new one (a fresh base backup)
 *   pair.cutReplication()       the standby's WAL receiver stopped (async: its tail is then lost)
 *   pair.stop()                 every server stopped, every folder removed (also on process exit)
 *
 * A standby's synchronous_standby_names is always '' (pg_basebackup copies the primary's, and a
 * promoted standby with '*' and no standby of its own would wait for ever at every COMMIT).
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts, waitFor } from './process.mjs';

function pgBin() {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a)) : [];
  if (versions.length === 0) throw new Error('pg-replicas: no PostgreSQL server binaries under /usr/lib/postgresql (Debian package postgresql)');
  return join(root, versions[0], 'bin');
}

/** Runs a PostgreSQL binary as the postgres user; throws with its output when it fails. */
function asPostgres(bin, args, { allowFail = false } = {}) {
  const r = spawnSync('runuser', ['-u', 'postgres', '--', join(pgBin(), bin), ...args], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0 && !allowFail) throw new Error(`pg-replicas: ${bin} ${args.join(' ')} failed (${r.status}): ${(r.stderr || r.stdout).trim().slice(-2000)}`);
  return r;
}

const live = new Set();
process.once('exit', () => {
  for (const pair of live) pair.stopNow();
});

/** psql as postgres over TCP, one statement; the output's trimmed text. */
export function psql(port, sql, database = 'postgres') {
  const r = spawnSync('psql', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-d', database, '-tAXc', sql], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`psql :${port}: ${sql}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout.trim();
}

class PgServer {
  constructor(dir, port) {
    this.dir = dir;
    this.port = port;
    this.log = join(dir, 'server.log');
  }

  get data() {
    return join(this.dir, 'data');
  }

  configure(extra) {
    appendFileSync(join(this.data, 'postgresql.conf'), `\n# pg-replicas\n${Object.entries(extra).map(([k, v]) => `${k} = ${typeof v === 'number' ? v : `'${v}'`}`).join('\n')}\n`);
  }

  start() {
    asPostgres('pg_ctl', ['-D', this.data, '-l', this.log, '-w', '-t', '60', 'start']);
  }

  /** An immediate stop: no checkpoint, every backend ended at once (what a crashed host leaves). */
  crash() {
    asPostgres('pg_ctl', ['-D', this.data, '-m', 'immediate', '-w', 'stop'], { allowFail: true });
  }

  stopFast() {
    asPostgres('pg_ctl', ['-D', this.data, '-m', 'fast', '-w', 'stop'], { allowFail: true });
  }

  get running() {
    return asPostgres('pg_ctl', ['-D', this.data, 'status'], { allowFail: true }).status === 0;
  }

  inRecovery() {
    return psql(this.port, 'select pg_is_in_recovery()') === 't';
  }
}

export class PgReplicas {
  constructor(root, servers, sync) {
    this.root = root;
    /** [0] starts as the primary, [1] as its standby. */
    this.servers = servers;
    this.sync = sync;
    this.primaryIndex = 0;
    live.add(this);
  }

  get primary() {
    return this.servers[this.primaryIndex];
  }

  get standby() {
    return this.servers[1 - this.primaryIndex];
  }

  /** `postgres://postgres@127.0.0.1:<p0>,127.0.0.1:<p1>/<db>?target_session_attrs=read-write` (or another attribute). */
  url(database, attrs = 'read-write') {
    return `postgres://postgres@${this.servers.map((s) => `127.0.0.1:${s.port}`).join(',')}/${database}${attrs ? `?target_session_attrs=${attrs}` : ''}`;
  }

  /** A database on the primary (replicated to the standby); returns its name. */
  createDatabase(name) {
    psql(this.primary.port, `create database ${name}`);
    return name;
  }

  /** Rows of a query on server i (the current primary by default), as JSON objects. */
  rows(sql, database, i = this.primaryIndex) {
    const out = psql(this.servers[i].port, `select coalesce(json_agg(t), '[]') from (${sql}) t`, database);
    return JSON.parse(out);
  }

  /** Until the standby streams from the primary (and, synchronous, is its sync standby). */
  async replicating(timeoutMs = 60_000) {
    await waitFor('the standby to stream', () => {
      const state = psql(this.primary.port, "select coalesce(string_agg(state || ':' || sync_state, ','), '') from pg_stat_replication");
      return this.sync ? state.includes('streaming:sync') : state.includes('streaming');
    }, timeoutMs, 100);
  }

  crash(i = this.primaryIndex) {
    this.servers[i].crash();
  }

  /** Promotes server i and waits until it takes writes. */
  async promote(i = 1 - this.primaryIndex) {
    asPostgres('pg_ctl', ['-D', this.servers[i].data, '-w', '-t', '60', 'promote']);
    await waitFor('the promoted server to take writes', () => !this.servers[i].inRecovery(), 30_000, 50);
    this.primaryIndex = i;
  }

  /**
   * A controlled switchover (what `patronictl switchover` does): the primary stopped cleanly (a
   * fast shutdown: its last WAL, the shutdown checkpoint included, reaches the streaming standby),
   * then the standby promoted at once.
   */
  async switchover() {
    this.primary.stopFast();
    await this.promote();
  }

  /** The WAL receiver of the standby stopped: its primary's later commits do not reach it (asynchronous only). */
  cutReplication() {
    psql(this.standby.port, "alter system set primary_conninfo = ''");
    psql(this.standby.port, 'select pg_reload_conf()');
    return waitFor('the WAL receiver to stop', () => psql(this.standby.port, 'select count(*) from pg_stat_wal_receiver') === '0', 30_000, 100);
  }

  /** The old primary (stopped) back as a standby of the current primary: a fresh base backup into its folder. */
  async rejoin(i = 1 - this.primaryIndex) {
    const s = this.servers[i];
    if (s.running) s.crash();
    rmSync(s.data, { recursive: true, force: true });
    asPostgres('pg_basebackup', ['-h', '127.0.0.1', '-p', String(this.primary.port), '-U', 'postgres', '-D', s.data, '-R', '-X', 'stream', '-c', 'fast']);
    s.configure({ port: s.port, unix_socket_directories: s.dir, synchronous_standby_names: '' });
    s.start();
    // A synchronous pair again: the new primary waits for its new standby (as Patroni rewrites it).
    if (this.sync) {
      psql(this.primary.port, "alter system set synchronous_standby_names = '*'");
      psql(this.primary.port, 'select pg_reload_conf()');
    }
    await this.replicating();
  }

  stopNow() {
    for (const s of this.servers) if (existsSync(s.data)) s.crash();
    rmSync(this.root, { recursive: true, force: true });
    live.delete(this);
  }

  async stop() {
    this.stopNow();
  }
}

/**
 * A primary and a standby, both started and streaming. `sync`: the standby is synchronous (every
 * COMMIT waits for it), so a failover loses nothing; otherwise asynchronous.
 */
export async function startPgReplicas({ sync = true } = {}) {
  const root = mkdtempSync(join(tmpdir(), 'cron-pg-'));
  chmodSync(root, 0o777);
  const [p0, p1] = await freePorts(2);
  const dirs = ['a', 'b'].map((n) => {
    const d = join(root, n);
    spawnSync('mkdir', ['-m', '0777', d]);
    return d;
  });
  const primary = new PgServer(dirs[0], p0);
  const standby = new PgServer(dirs[1], p1);
  const pair = new PgReplicas(root, [primary, standby], sync);
  try {
    asPostgres('initdb', ['-D', primary.data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    primary.configure({
      port: p0, listen_addresses: '127.0.0.1', unix_socket_directories: primary.dir, wal_level: 'replica', max_wal_senders: 5,
      hot_standby: 'on', fsync: 'off', full_page_writes: 'on', max_connections: 100, wal_keep_size: '64MB',
      synchronous_standby_names: sync ? '*' : '', synchronous_commit: 'on',
    });
    appendFileSync(join(primary.data, 'pg_hba.conf'), '\nhost replication all 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 trust\n');
    // A synchronous primary with no standby yet waits at every COMMIT: the standby is made first.
    primary.start();
    asPostgres('pg_basebackup', ['-h', '127.0.0.1', '-p', String(p0), '-U', 'postgres', '-D', standby.data, '-R', '-X', 'stream', '-c', 'fast']);
    standby.configure({ port: p1, unix_socket_directories: standby.dir, synchronous_standby_names: '' });
    standby.start();
    await pair.replicating();
    return pair;
  } catch (err) {
    const logs = [primary, standby].map((s) => (existsSync(s.log) ? readFileSync(s.log, 'utf8').slice(-1500) : '')).join('\n---\n');
    pair.stopNow();
    throw new Error(`${err.message}\n${logs}`);
  }
}
