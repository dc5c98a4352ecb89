/** Dialect conformance on PostgreSQL (a fresh database on the shared server): the suite is in _dialect.ts, one file per backend. */
import { describeDialect, postgres } from './_dialect.js';

describeDialect(postgres);
