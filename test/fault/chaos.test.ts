/**
 * A seeded chaos soak (test/harness/chaos.mjs; the long form is bench/chaos.mjs): five real daemons,
 * three Redis masters, MariaDB behind a proxy that can cut it, about 45 s of faults (kill -9 and
 * restart, SIGSTOP past the lease, SIGTERM and restart, Redis masters down, the store cut; the plan
 * has each of these kinds at least once: planFaults' everyKind) from a PRNG seeded by CHAOS_SEED
 * (random otherwise; printed first). Then the cluster settles, the nodes stop,
 * and the bodies' own records plus `history --json` must show: no (period, attempt) started twice, no
 * overlapping attempts, a row for every period of the fault phase, every started period finished
 * (succeeded, or failed after its retries), history agreeing with the side effects, no row left
 * running or pending past due. A failure prints the seed and the offending periods: replay with
 * CHAOS_SEED=<seed> npx vitest run test/fault/chaos.test.ts (or node bench/chaos.mjs --seed <seed>).
 */
import { describe, expect, it } from 'vitest';
import { resolveSeed, runChaos, type ChaosEngine, type ChaosFault } from '../harness/chaos.mjs';
import { BIN } from '../helpers/cli.js';

const seconds = Number(process.env.CHAOS_SECONDS ?? 45);
// CHAOS_STORE: the store under the soak (mariadb by default; pg-sync, pg-async, galera: a failover instead of the cut).
const engine = (process.env.CHAOS_STORE ?? 'mariadb') as ChaosEngine;
const KINDS: ChaosFault['kind'][] = ['kill9', 'pause', 'term', 'redis', engine === 'mariadb' ? 'store' : 'failover'];

describe('fault: seeded chaos soak', () => {
  it(`${seconds} s of overlapping faults on five nodes: every fault kind, every period once, none lost, history agrees with the side effects`, async () => {
    const seed = resolveSeed(process.env.CHAOS_SEED);
    process.stderr.write(`chaos seed=${seed}\n`);
    const result = await runChaos({ engine, seconds, seed, bin: BIN, settleMs: 40_000, keep: process.env.CHAOS_KEEP === '1', everyKind: true });
    process.stderr.write(`${result.report}\n`);
    expect(KINDS.filter((k) => !result.plan.some((f) => f.kind === k)), `chaos seed=${seed}: fault kinds missing from the plan`).toEqual([]);
    expect(Object.keys(result.summary.faultsByKind).length, `chaos seed=${seed}: no fault was injected`).toBeGreaterThan(0);
    expect(result.violations, `chaos seed=${seed}: ${result.violationCount} violation(s), see the report above`).toEqual({});
  }, 240_000);
});
