/**
 * A fresh database per test file on the shared MariaDB and PostgreSQL servers, dropped afterwards.
 * Never touches other databases.
 */
import { randomBytes } from 'node:crypto';
import knexFactory from 'knex';

export const MARIADB_ADMIN = process.env.TEST_MARIADB_URL ?? 'mysql://root@127.0.0.1:3306/test';
export const POSTGRES_ADMIN = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

function name(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
}

export async function createMariaDb(prefix = 'cron_test'): Promise<TestDatabase> {
  const db = name(prefix);
  const admin = knexFactory({ client: 'mysql2', connection: MARIADB_ADMIN, pool: { min: 0, max: 1 } });
  try {
    await admin.raw('CREATE DATABASE ??', [db]);
  } finally {
    await admin.destroy();
  }
  const base = new URL(MARIADB_ADMIN);
  base.pathname = `/${db}`;
  return {
    url: base.toString(),
    name: db,
    async drop() {
      const k = knexFactory({ client: 'mysql2', connection: MARIADB_ADMIN, pool: { min: 0, max: 1 } });
      try {
        await k.raw('DROP DATABASE IF EXISTS ??', [db]);
      } finally {
        await k.destroy();
      }
    },
  };
}

export async function createPostgresDb(prefix = 'cron_test'): Promise<TestDatabase> {
  const db = name(prefix);
  const admin = knexFactory({ client: 'pg', connection: POSTGRES_ADMIN, pool: { min: 0, max: 1 } });
  try {
    await admin.raw('CREATE DATABASE ??', [db]);
  } finally {
    await admin.destroy();
  }
  const base = new URL(POSTGRES_ADMIN);
  base.pathname = `/${db}`;
  return {
    url: base.toString(),
    name: db,
    async drop() {
      const k = knexFactory({ client: 'pg', connection: POSTGRES_ADMIN, pool: { min: 0, max: 1 } });
      try {
        await k.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [db]);
      } finally {
        await k.destroy();
      }
    },
  };
}
