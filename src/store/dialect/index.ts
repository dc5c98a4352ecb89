import { mysqlDialect } from './mysql.js';
import { postgresDialect } from './postgres.js';
import { sqliteDialect } from './sqlite.js';
import type { Dialect, StoreKind } from './types.js';

export type { Dialect, ErrorClass, StoreKind } from './types.js';

export function dialectFor(kind: StoreKind): Dialect {
  return kind === 'sqlite' ? sqliteDialect : kind === 'mysql' ? mysqlDialect() : postgresDialect;
}
