/**
 * A three-node MariaDB Galera cluster from Debian's packages (mariadb-server, galera-4, rsync), for
 * the tests and benchmarks that need a replicated store: each node a `mariadbd --no-defaults` of its
 * own on free ports, in a temporary folder, run as the `mysql` user (the rsync state transfer fails
 * as root); only the first datadir initialised, the joiners filled by rsync SST. Never touches the
 * shared server on 3306. Nodes are killed (SIGKILL) by pid, never by name.
 *
 *   kill(i)       SIGKILL of node i (a crashed host)
 *   restart(i)    node i again on its datadir, rejoining through IST (or SST), until Synced
 *   isolate(i)    node i cut from the others (gmcast.isolate=1): a minority of one, outside the
 *                 primary component, still answering clients (with error 1047); heal(i) ends it
 *   stop()        every node killed and every folder removed (also from a process 'exit' handler)
 */
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { exited, freePorts, waitFor } from './process.mjs';

export const GALERA_PROVIDER = '/usr/lib/galera/libgalera_smm.so';

/** A small datadir (26 MB instead of 114): the state transfer copies it whole. */
const SMALL_INNODB = ['--innodb-buffer-pool-size=64M', '--innodb-log-file-size=8M'];

/** Whether this machine can run a Galera cluster (what scripts/test-setup.sh installs), with what is missing. */
export function galeraMissing() {
  const missing = [];
  if (!existsSync(GALERA_PROVIDER)) missing.push('galera-4');
  if (spawnSync('sh', ['-c', 'command -v rsync']).status !== 0) missing.push('rsync');
  if (spawnSync('sh', ['-c', 'command -v mariadbd && command -v mariadb-install-db']).status !== 0) missing.push('mariadb-server');
  if (spawnSync('id', ['-u', 'mysql']).status !== 0) missing.push('the mysql user');
  return missing;
}

function mysqlIds() {
  const uid = Number(spawnSync('id', ['-u', 'mysql'], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'mysql'], { encoding: 'utf8' }).stdout.trim());
  return { uid, gid };
}

/** Every cluster of this process, killed on exit if the test did not stop it. */
const live = new Set();
process.once('exit', () => {
  for (const c of live) c.killNow();
});

export class GaleraNode {
  constructor(cluster, index, ports) {
    this.cluster = cluster;
    this.index = index;
    this.port = ports.port;
    this.gcommPort = ports.gcomm;
    this.istPort = ports.ist;
    this.sstPort = ports.sst;
    this.dir = join(cluster.dir, `node${index + 1}`);
    this.datadir = join(this.dir, 'data');
    this.proc = undefined;
    this.exitedAt = undefined;
  }

  get name() {
    return `galera${this.index + 1}`;
  }

  get alive() {
    return this.proc !== undefined && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  get pid() {
    return this.proc?.pid;
  }

  get errorLog() {
    return join(this.dir, 'error.log');
  }

  /** The last lines of the node's error log, for a failure message. */
  logTail(n = 15) {
    return existsSync(this.errorLog) ? readFileSync(this.errorLog, 'utf8').trim().split('\n').slice(-n).join('\n') : '(no error log)';
  }

  args(bootstrap) {
    const c = this.cluster;
    const provider = [`gmcast.listen_addr=tcp://127.0.0.1:${this.gcommPort}`, `ist.recv_addr=127.0.0.1:${this.istPort}`, 'gcache.size=64M', ...c.providerOptions].join('; ');
    return [
      '--no-defaults',
      `--datadir=${this.datadir}`,
      `--port=${this.port}`,
      '--bind-address=127.0.0.1',
      `--socket=${join(this.dir, 'mysqld.sock')}`,
      `--pid-file=${join(this.dir, 'mysqld.pid')}`,
      `--log-error=${this.errorLog}`,
      `--tmpdir=${this.dir}`,
      '--user=mysql',
      '--skip-name-resolve',
      // Small and fast: a test cluster, thrown away afterwards.
      ...SMALL_INNODB,
      '--innodb-flush-log-at-trx-commit=2',
      '--max-connections=300',
      '--performance-schema=OFF',
      '--binlog-format=ROW',
      '--default-storage-engine=InnoDB',
      '--innodb-autoinc-lock-mode=2',
      '--wsrep-on=ON',
      `--wsrep-provider=${GALERA_PROVIDER}`,
      `--wsrep-cluster-name=${c.name}`,
      `--wsrep-cluster-address=gcomm://${c.nodes.map((n) => `127.0.0.1:${n.gcommPort}`).join(',')}`,
      `--wsrep-node-address=127.0.0.1:${this.gcommPort}`,
      `--wsrep-node-incoming-address=127.0.0.1:${this.port}`,
      `--wsrep-node-name=${this.name}`,
      `--wsrep-provider-options=${provider}`,
      '--wsrep-sst-method=rsync',
      `--wsrep-sst-receive-address=127.0.0.1:${this.sstPort}`,
      ...(bootstrap ? ['--wsrep-new-cluster'] : []),
    ];
  }

  /** Starts mariadbd as the mysql user (uid/gid of the spawn: the pid is mariadbd's own, for kill -9). */
  spawn(bootstrap = false) {
    if (this.alive) throw new Error(`${this.name} is running already`);
    const { uid, gid } = this.cluster.ids;
    this.proc = spawn('/usr/sbin/mariadbd', this.args(bootstrap), { uid, gid, stdio: 'ignore', env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', HOME: this.dir } });
    this.proc.once('exit', () => (this.exitedAt = Date.now()));
    this.exitedAt = undefined;
  }

  /** A connection as root over TCP (root@127.0.0.1, made at set-up). */
  connect(timeoutMs = 2000) {
    return mysql.createConnection({ host: '127.0.0.1', port: this.port, user: 'root', connectTimeout: timeoutMs });
  }

  /** The node's wsrep status: cluster size, local state, component, ready. Throws when it does not answer. */
  async status(timeoutMs = 2000) {
    const conn = await this.connect(timeoutMs);
    try {
      const [rows] = await conn.query({ sql: "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', 'wsrep_local_state_comment', 'wsrep_cluster_status', 'wsrep_ready', 'wsrep_connected')", timeout: timeoutMs });
      const v = Object.fromEntries(rows.map((r) => [r.Variable_name, r.Value]));
      return { size: Number(v.wsrep_cluster_size), state: v.wsrep_local_state_comment, component: v.wsrep_cluster_status, ready: v.wsrep_ready === 'ON', connected: v.wsrep_connected === 'ON' };
    } finally {
      conn.destroy();
    }
  }

  /** Synced in a primary component of `size` nodes. */
  async synced(size) {
    const s = await this.status();
    return s.state === 'Synced' && s.component === 'Primary' && s.ready && s.size === size;
  }

  async waitSynced(size, timeoutMs = 60_000) {
    await waitFor(`${this.name} Synced in a cluster of ${size}`, async () => {
      if (!this.alive) throw new Error(`${this.name} exited (${this.proc?.exitCode ?? this.proc?.signalCode}): ${this.logTail()}`);
      return this.synced(size);
    }, timeoutMs, 200).catch((err) => {
      throw new Error(`${String(err.message ?? err)}\n--- ${this.name} error log ---\n${this.logTail()}`);
    });
  }

  /** SIGKILL (a crashed host); resolves once it has exited. */
  async kill() {
    const p = this.proc;
    if (!p || !this.alive) return;
    const done = exited(p);
    p.kill('SIGKILL');
    await done;
  }

  /** SIGTERM: a clean shutdown (grastate.dat written with its seqno); resolves once it has exited. */
  async terminate(timeoutMs = 60_000) {
    const p = this.proc;
    if (!p || !this.alive) return;
    const done = exited(p);
    p.kill('SIGTERM');
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    await done;
    clearTimeout(timer);
  }

  async query(sql, values = []) {
    const conn = await this.connect();
    try {
      const [rows] = await conn.query({ sql, values, timeout: 10_000 });
      return rows;
    } finally {
      conn.destroy();
    }
  }
}

export class GaleraCluster {
  /**
   * @param options.size nodes (3)
   * @param options.providerOptions extra wsrep_provider_options, e.g. 'evs.suspect_timeout=PT3S'
   */
  constructor({ size = 3, providerOptions = [] } = {}) {
    this.size = size;
    this.providerOptions = providerOptions;
    this.dir = mkdtempSync(join(tmpdir(), 'cron-galera-'));
    this.name = `cron-test-${process.pid}-${Date.now().toString(36)}`;
    this.nodes = [];
    this.ids = mysqlIds();
    /** How long start() took, ms. */
    this.startMs = undefined;
    this.stopped = false;
  }

  /**
   * The cluster, every node Synced in a primary component of `size`: the first datadir initialised
   * and bootstrapped (--wsrep-new-cluster), root@127.0.0.1 made there, then the joiners together.
   */
  async start() {
    const t0 = Date.now();
    live.add(this);
    try {
      const ports = await freePorts(this.size * 4);
      for (let i = 0; i < this.size; i++) this.nodes.push(new GaleraNode(this, i, { port: ports[i * 4], gcomm: ports[i * 4 + 1], ist: ports[i * 4 + 2], sst: ports[i * 4 + 3] }));
      const { uid, gid } = this.ids;
      // The mysql user must reach every folder: the temp dir itself is 0700 root.
      chownSync(this.dir, uid, gid);
      for (const n of this.nodes) {
        mkdirSync(n.datadir, { recursive: true });
        chownSync(n.dir, uid, gid);
        chownSync(n.datadir, uid, gid);
      }
      const first = this.nodes[0];
      const init = spawnSync('runuser', ['-u', 'mysql', '--', 'mariadb-install-db', '--no-defaults', `--datadir=${first.datadir}`, '--auth-root-authentication-method=normal', '--skip-test-db', '--skip-name-resolve', ...SMALL_INNODB], { encoding: 'utf8' });
      if (init.status !== 0) throw new Error(`mariadb-install-db failed (${init.status}): ${init.stderr || init.stdout}`);
      first.spawn(true);
      // The bootstrap node: its socket first (root@localhost), then TCP's root@127.0.0.1.
      await waitFor(`${first.name} to accept connections on its socket`, () => {
        if (!first.alive) throw new Error(`${first.name} exited: ${first.logTail()}`);
        return spawnSync('mariadb', ['--no-defaults', `--socket=${join(first.dir, 'mysqld.sock')}`, '-uroot', '-e', 'select 1']).status === 0;
      }, 60_000, 200);
      const sql = "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;";
      const made = spawnSync('mariadb', ['--no-defaults', `--socket=${join(first.dir, 'mysqld.sock')}`, '-uroot', '-e', sql], { encoding: 'utf8' });
      if (made.status !== 0) throw new Error(`creating root@127.0.0.1 failed: ${made.stderr}`);
      await first.waitSynced(1);
      // The joiners get a copy of the bootstrapped datadir, cleanly shut down (its grastate.dat holds
      // the cluster's id and last seqno): they join with nothing to transfer, side by side, instead of
      // one rsync state transfer after the other from the one donor (16 s for three nodes here, 7 s so).
      await first.terminate();
      for (const n of this.nodes.slice(1)) {
        const cp = spawnSync('cp', ['-a', `${first.datadir}/.`, n.datadir], { encoding: 'utf8' });
        if (cp.status !== 0) throw new Error(`copying the datadir failed: ${cp.stderr}`);
      }
      first.spawn(true);
      await first.waitSynced(1);
      for (const n of this.nodes.slice(1)) n.spawn(false);
      await Promise.all(this.nodes.map((n) => n.waitSynced(this.size, 90_000)));
      this.startMs = Date.now() - t0;
      return this;
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  node(i) {
    const n = this.nodes[i];
    if (!n) throw new Error(`no Galera node ${i}`);
    return n;
  }

  /** `mysql://root@127.0.0.1:<port>/<db>` of node i. */
  url(i, db) {
    return `mysql://root@127.0.0.1:${this.node(i).port}/${db}`;
  }

  /** Every node, in order, as one URL: `mysql://root@127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3/<db>`. */
  multiUrl(db, order = this.nodes.map((_, i) => i)) {
    return `mysql://root@${order.map((i) => `127.0.0.1:${this.node(i).port}`).join(',')}/${db}`;
  }

  /** A database (replicated to every node by the DDL's total order isolation). */
  async createDatabase(name) {
    const n = this.nodes.find((x) => x.alive) ?? this.node(0);
    await n.query('CREATE DATABASE ??', [name]);
    return name;
  }

  /** SIGKILL of node i. */
  async kill(i) {
    await this.node(i).kill();
  }

  /** Node i again on its datadir (not bootstrapping): rejoins through IST, or SST, until Synced. */
  async restart(i, timeoutMs = 90_000) {
    const n = this.node(i);
    if (n.alive) throw new Error(`${n.name} is still running`);
    n.spawn(false);
    await n.waitSynced(this.size, timeoutMs);
  }

  /**
   * Node i cut from the others at the group communication (gmcast.isolate=1, Galera's switch for
   * tests): the others form a primary component of size - 1; node i is non-primary and answers
   * its clients' statements with error 1047 until heal(i).
   */
  async isolate(i) {
    await this.node(i).query("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'");
    const others = this.nodes.filter((n, j) => j !== i && n.alive);
    await Promise.all(others.map((n) => waitFor(`${n.name} in a primary component without galera${i + 1}`, () => n.synced(others.length), 60_000, 200)));
    await waitFor(`galera${i + 1} outside the primary component`, async () => (await this.node(i).status()).component !== 'Primary', 60_000, 200);
  }

  /** Ends isolate(i): node i joins again (IST) until every node is Synced. */
  async heal(i, timeoutMs = 90_000) {
    await this.node(i).query("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'");
    const alive = this.nodes.filter((n) => n.alive);
    await Promise.all(alive.map((n) => n.waitSynced(alive.length, timeoutMs)));
  }

  /** Synchronous SIGKILL of every node (the 'exit' handler). */
  killNow() {
    for (const n of this.nodes) {
      if (n.alive) {
        try {
          n.proc.kill('SIGKILL');
        } catch {
          // gone already
        }
      }
    }
  }

  /** Every node killed and the folder removed (the cluster is thrown away: no clean shutdown needed). */
  async stop() {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.nodes.map((n) => n.kill()));
    live.delete(this);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A started cluster of `size` nodes (3). */
export async function startGalera(options = {}) {
  const cluster = new GaleraCluster(options);
  return cluster.start();
}
