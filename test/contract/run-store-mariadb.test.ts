/**
 * RunStore conformance on MariaDB (a fresh database on the shared server): the suite is in
 * _run-store.ts, one file per backend. Also here: open() on an unreachable MariaDB or PostgreSQL.
 */
import { describeOpenUnreachable, describeRunStore, mariadb } from './_run-store.js';

describeRunStore(mariadb);
describeOpenUnreachable();
