/**
 * Private databases on the shared MariaDB and PostgreSQL servers, named `<prefix>_<time>_<random>`
 * and dropped afterwards; optionally one passwordless MariaDB user per node, so that the server's
 * per-user statistics tell the nodes apart. Never touches any other database. SQL through knex
 * bindings.
 */
import { randomBytes } from 'node:crypto';
import knexFactory from 'knex';

/** The tests' admin URLs. */
export const MARIADB_ADMIN = process.env.TEST_MARIADB_URL ?? 'mysql://root@127.0.0.1:3306/test';
export const POSTGRES_ADMIN = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** The benchmarks' MariaDB admin URL. */
export const BENCH_MARIADB_ADMIN = process.env.BENCH_MYSQL_ADMIN ?? 'mysql://root@127.0.0.1:3306/';

export function databaseName(prefix) {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
}

async function asAdmin(client, url, fn) {
  const k = knexFactory({ client, connection: url, pool: { min: 0, max: 1 } });
  try {
    return await fn(k);
  } finally {
    await k.destroy();
  }
}

function urlOf(adminUrl, db, user) {
  const u = new URL(adminUrl);
  u.pathname = `/${db}`;
  if (user !== undefined) {
    u.username = user;
    u.password = '';
  }
  return u.toString();
}

// The users are created for both names a client on this machine may come from.
const USER_HOSTS = ['127.0.0.1', 'localhost'];

/**
 * A fresh MariaDB database (`name`, or one made from `prefix`) and the users `nodeUsers`, each with
 * every privilege on it and no password. `urlFor(user)` is the store URL as that user; drop() removes
 * the users and the database (once).
 */
export async function createMariaDb(prefix = 'cron_test', { adminUrl = MARIADB_ADMIN, name, nodeUsers = [] } = {}) {
  const db = name ?? databaseName(prefix);
  const dropAll = async (k) => {
    for (const user of nodeUsers) for (const host of USER_HOSTS) await k.raw('DROP USER IF EXISTS ?@?', [user, host]);
    await k.raw('DROP DATABASE IF EXISTS ??', [db]);
  };
  await asAdmin('mysql2', adminUrl, async (k) => {
    await k.raw('CREATE DATABASE ??', [db]);
    try {
      for (const user of nodeUsers) {
        for (const host of USER_HOSTS) {
          await k.raw('CREATE USER ?@?', [user, host]);
          await k.raw('GRANT ALL PRIVILEGES ON ??.* TO ?@?', [db, user, host]);
        }
      }
    } catch (err) {
      await dropAll(k).catch(() => {});
      throw err;
    }
  });
  let dropped = false;
  return {
    url: urlOf(adminUrl, db),
    name: db,
    users: [...nodeUsers],
    urlFor: (user) => urlOf(adminUrl, db, user),
    async drop() {
      if (dropped) return;
      dropped = true;
      await asAdmin('mysql2', adminUrl, dropAll);
    },
  };
}

export async function createPostgresDb(prefix = 'cron_test', { adminUrl = POSTGRES_ADMIN, name } = {}) {
  const db = name ?? databaseName(prefix);
  await asAdmin('pg', adminUrl, (k) => k.raw('CREATE DATABASE ??', [db]));
  let dropped = false;
  return {
    url: urlOf(adminUrl, db),
    name: db,
    users: [],
    urlFor: (user) => urlOf(adminUrl, db, user),
    async drop() {
      if (dropped) return;
      dropped = true;
      await asAdmin('pg', adminUrl, (k) => k.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [db]));
    },
  };
}

/**
 * A private MariaDB database for a fault benchmark (every node as the admin user), with `runs()`:
 * the rows of its runs table, times as numbers (none before the first migration).
 */
export async function createFaultDatabase(adminUrl = BENCH_MARIADB_ADMIN) {
  const created = await createMariaDb('cron_bench_faults', { adminUrl });
  const k = knexFactory({ client: 'mysql2', connection: created.url, pool: { min: 0, max: 2 } });
  const ms = (v) => (v === null ? null : Number(v));
  return {
    db: created.name,
    url: created.url,
    /** `where`: a knex whereRaw fragment with `?` bindings in `params`. */
    async runs(where = '1=1', params = []) {
      try {
        const rows = await k('scheduler_runs').whereRaw(where, params).orderBy('id');
        return rows.map((r) => ({
          ...r, scheduled_at: Number(r.scheduled_at), started_at: ms(r.started_at), heartbeat_at: ms(r.heartbeat_at),
          finished_at: ms(r.finished_at), lease_ms: Number(r.lease_ms),
        }));
      } catch (err) {
        if (err?.code === 'ER_NO_SUCH_TABLE') return [];
        throw err;
      }
    },
    async drop() {
      await k.destroy().catch(() => {});
      await created.drop();
    },
  };
}
