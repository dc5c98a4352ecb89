/** Dialect conformance on SQLite (a temp file): the suite is in _dialect.ts, one file per backend. */
import { describeDialect, sqlite } from './_dialect.js';

describeDialect(sqlite);
