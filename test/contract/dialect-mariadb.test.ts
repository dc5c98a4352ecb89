/** Dialect conformance on MariaDB (a fresh database on the shared server): the suite is in _dialect.ts, one file per backend. */
import { describeDialect, mariadb } from './_dialect.js';

describeDialect(mariadb);
