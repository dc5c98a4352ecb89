/**
 * A fresh database per test file on the shared MariaDB and PostgreSQL servers, dropped afterwards
 * (test/harness/databases.mjs, shared with bench/), and the store backends of the conformance suites.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StoreConfig } from '../../src/config/config.js';
import { createMariaDb, createPostgresDb } from '../harness/databases.mjs';

export { MARIADB_ADMIN, POSTGRES_ADMIN, createMariaDb, createPostgresDb, type TestDatabase } from '../harness/databases.mjs';

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
