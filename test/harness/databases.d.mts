/** Types of test/harness/databases.mjs. */
export const MARIADB_ADMIN: string;
export const POSTGRES_ADMIN: string;
export const BENCH_MARIADB_ADMIN: string;
export function databaseName(prefix: string): string;

export interface TestDatabase {
  url: string;
  name: string;
  /** The node users created with it (MariaDB). */
  users: string[];
  /** The database's URL as `user`, no password. */
  urlFor(user: string): string;
  drop(): Promise<void>;
}
export function createMariaDb(prefix?: string, options?: { adminUrl?: string; name?: string; nodeUsers?: string[] }): Promise<TestDatabase>;
export function createPostgresDb(prefix?: string, options?: { adminUrl?: string; name?: string }): Promise<TestDatabase>;

export interface FaultDatabase {
  db: string;
  url: string;
  runs(where?: string, params?: unknown[]): Promise<Array<Record<string, unknown>>>;
  drop(): Promise<void>;
}
export function createFaultDatabase(adminUrl?: string): Promise<FaultDatabase>;
