/**
 * Helpers for bench/faults.mjs: the fault suite's own harness (test/harness/, plain ESM, shared with
 * test/fault/), under the names this script uses: a private MariaDB database with its runs' rows, job
 * sources whose bodies record their own side effects, the cluster of `bin/scheduler run` processes
 * killed, paused and restarted by pid, and the store proxy that cuts a node off or sniffs its
 * heartbeat. Never touches the shared Redis on 6379 or any database other than the one it creates.
 */
export { Cluster } from '../test/harness/cluster.mjs';
export { createFaultDatabase } from '../test/harness/databases.mjs';
export { duplicates } from '../test/harness/effects.mjs';
export { longJobSource, trivialJobSource } from '../test/harness/job-sources.mjs';
export { waitFor } from '../test/harness/process.mjs';
export { StoreProxy as SniffingProxy } from '../test/harness/proxy.mjs';
export { Workspace } from '../test/harness/workspace.mjs';
