/**
 * A fresh database per test file on the shared MariaDB and PostgreSQL servers, dropped afterwards.
 * Never touches other databases.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knexFactory from 'knex';
import type { StoreConfig } from '../../src/config/config.js';

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

/** One backend of a store conformance suite: a fresh, empty store of its kind per call. */
export interface StoreBackend {
  name: 'SQLite' | 'MariaDB' | 'PostgreSQL';
  fresh(): Promise<{ config: StoreConfig; drop(): Promise<void> }>;
}

/** SQLite on a temp file, MariaDB and PostgreSQL on a fresh database each, named `<prefix>_...`. */
export function storeBackends(prefix: string): StoreBackend[] {
  return [
    {
      name: 'SQLite',
      async fresh() {
        const dir = mkdtempSync(join(tmpdir(), `${prefix.replace(/_/g, '-')}-`));
        const path = join(dir, 'store.db');
        return { config: { kind: 'sqlite', path, url: `sqlite:${path}` }, drop: async () => rmSync(dir, { recursive: true, force: true }) };
      },
    },
    {
      name: 'MariaDB',
      async fresh() {
        const db = await createMariaDb(prefix);
        return { config: { kind: 'mysql', url: db.url }, drop: () => db.drop() };
      },
    },
    {
      name: 'PostgreSQL',
      async fresh() {
        const db = await createPostgresDb(prefix);
        return { config: { kind: 'postgres', url: db.url }, drop: () => db.drop() };
      },
    },
  ];
}
