#!/usr/bin/env node
/**
 * The seeded chaos soak, long form (the short form is test/fault/chaos.test.ts; both use
 * test/harness/chaos.mjs):
 *
 *   node bench/chaos.mjs [--seconds 120] [--seed S] [--settle 120] [--every-kind] [--store mariadb|pg-sync|pg-async|galera] [--no-build] [--keep] [--log-level info] [--json-out FILE]
 *   (env: CHAOS_SEED when --seed is not given; BENCH_MYSQL_ADMIN=mysql://root@127.0.0.1:3306/)
 *
 * Five `bin/scheduler run` daemons, three Redis masters started here, MariaDB (a private database)
 * behind a TCP proxy; a fault every 8-15 s from a PRNG seeded by S (printed first; --every-kind: one of
 * each kind first, as the test plans them). By default the
 * daemons run from a private build of src/ (bench/lib.mjs buildSnapshot), so that rebuilds of dist/
 * during the soak cannot change what runs; --no-build runs bin/scheduler of the checkout as it is.
 * --store: the store under the soak. mariadb (the default): the store's fault is a cut at the proxy.
 * pg-sync / pg-async: a PostgreSQL primary and a synchronous / asynchronous standby started here,
 * the daemons on libpq's multi-host URL; the fault is the primary crashed and the standby promoted
 * 1.5-4 s later, then the old primary rebuilt as its standby (pg-async first cuts the replication
 * 2-4 s, a tail the promoted standby lacks; no node is killed within 10 s of it and a majority of
 * Redis masters never restarts empty then, the two faults asynchronous replication cannot cover).
 * galera: three MariaDB Galera nodes on a host list; a node killed and restarted, or isolated and
 * healed. Each needs Debian's postgresql or mariadb-server + galera-4 (scripts/test-setup.sh installs them).
 * Prints a summary (faults by kind, periods, runs by status, violations); exit 1 on any violation,
 * 2 when the soak itself could not run.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENGINES, resolveSeed, runChaos } from '../test/harness/chaos.mjs';
import { buildSnapshot, sourceState, benchOptions } from './lib.mjs';

function parseOptions(argv) {
  const flags = benchOptions(argv, {
    strings: ['seconds', 'seed', 'settle', 'log-level', 'json-out', 'store'],
    booleans: ['no-build', 'keep', 'every-kind'],
    usage: 'usage: node bench/chaos.mjs [--seconds 120] [--seed S] [--settle 120] [--every-kind] [--store mariadb|pg-sync|pg-async|galera] [--no-build] [--keep] [--log-level info] [--json-out FILE]\n',
  });
  const seconds = Number(flags.seconds ?? 120);
  if (!Number.isFinite(seconds) || seconds < 20) throw new Error(`--seconds: expected a number >= 20, got ${flags.seconds}`);
  const settle = Number(flags.settle ?? 120);
  if (!Number.isFinite(settle) || settle < 10) throw new Error(`--settle: expected a number of seconds >= 10, got ${flags.settle}`);
  const engine = flags.store ?? 'mariadb';
  if (!ENGINES.includes(engine)) throw new Error(`--store: expected one of ${ENGINES.join(', ')}, got ${engine}`);
  return { engine, seconds, seed: resolveSeed(flags.seed ?? process.env.CHAOS_SEED), settleMs: settle * 1000, build: !flags['no-build'], keep: Boolean(flags.keep), logLevel: flags['log-level'] ?? 'info', jsonOut: flags['json-out'], everyKind: Boolean(flags['every-kind']) };
}

async function main() {
  let opts;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`chaos: ${err.message}\n`);
    process.exit(2);
  }
  process.stdout.write(`chaos seed=${opts.seed}\n`);
  const state = sourceState();
  let snapshot;
  if (opts.build) snapshot = buildSnapshot();
  const bin = snapshot ? join(snapshot, 'bin', 'scheduler') : undefined;
  process.stderr.write(`[chaos] source ${state.head ?? '?'}${state.srcChanges.length ? ` with uncommitted changes in ${state.srcChanges.length} file(s) under src/` : ''}; daemons from ${snapshot ?? 'bin/scheduler of the checkout'}\n`);
  const onSignal = (sig) => process.stderr.write(`[chaos] ${sig}: finishing the current step, then cleaning up\n`);
  process.on('SIGINT', onSignal);
  try {
    const result = await runChaos({ engine: opts.engine, seconds: opts.seconds, seed: opts.seed, settleMs: opts.settleMs, keep: opts.keep, logLevel: opts.logLevel, everyKind: opts.everyKind, ...(bin ? { bin } : {}) });
    process.stdout.write(`${result.report}\n`);
    if (opts.jsonOut) writeFileSync(opts.jsonOut, `${JSON.stringify({ ...result, source: state }, null, 2)}\n`);
    process.stdout.write(`${JSON.stringify({ bench: 'chaos', store: opts.engine, seed: result.seed, seconds: result.seconds, pass: result.violationCount === 0, faults: result.summary.faultsByKind, runsByStatus: result.summary.runsByStatus, violations: Object.fromEntries(Object.entries(result.violations).map(([k, l]) => [k, l.length])), elapsedS: result.summary.elapsedS })}\n`);
    process.exitCode = result.violationCount === 0 ? 0 : 1;
  } finally {
    if (snapshot) rmSync(snapshot, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`chaos: the soak could not run: ${err.stack ?? err}\n`);
  process.exit(2);
});
