/** RunStore conformance on PostgreSQL (a fresh database on the shared server): the suite is in _run-store.ts, one file per backend. */
import { describeRunStore, postgres } from './_run-store.js';

describeRunStore(postgres);
