/** RunStore conformance on SQLite (a temp file): the suite is in _run-store.ts, one file per backend. */
import { describeRunStore, sqlite } from './_run-store.js';

describeRunStore(sqlite);
