#!/usr/bin/env node
/**
 * Store failovers under three daemons, N times in a row (issue 20's figures):
 *
 *   node bench/failover.mjs [--scenario pg-sync|pg-async|galera-kill|galera-partition|all] [--rounds 10] [--promote-after 2] [--json-out FILE]
 *
 * pg-sync: a PostgreSQL primary and a synchronous standby started here (test/harness/pg-replicas.mjs),
 * the daemons on libpq's multi-host URL, no Redis. Each round: a long body running, the primary
 * crashed (immediate stop), the standby promoted 2 s later, the old primary rebuilt as the new one's
 * standby. galera-kill: three MariaDB Galera nodes (test/harness/galera.mjs), the daemons on the host
 * list, no Redis; each round the node the daemons write to is killed (kill -9) while a long body
 * runs, restarted 12 s later, and the round ends once it is synced again; galera-partition: the same
 * node isolated into a minority (gmcast.isolate) instead, healed 12 s later. The node faulted is the one
 * the daemons last said they moved to (node 0 at first), so rounds alternate between nodes 0 and 1.
 * pg-async: the same pair with an asynchronous standby, and three Redis masters started here (the
 * lock keys are what keep a period whose row was lost from running again); each round the WAL
 * receiver is cut for 4 s while the long body runs, then the primary is crashed and the standby
 * promoted 2 s later: the rows committed on the old primary during the cut are gone. Counted beside
 * the rest: rows said lost by their nodes, how many were written back, and periods started twice.
 * `--promote-after S` (pg-sync, pg-async): the seconds between the crash and the promotion (2; a
 * managed PostgreSQL takes 30-120 s, longer than any lease and than the 30 s the nodes keep their
 * written outcomes after the store last answered).
 * Jobs: an every-second job (50 ms body, catchUp 1m) and a 20 s job whose 8 s body spans the fault.
 * Counted from the bodies' own records and the rows (`history --json`): the time from the kill to the
 * first run recorded after it (Galera: of a period due after the kill; PostgreSQL: also from the promotion's end), periods run more than 1 s
 * late and the latest, duplicate starts, lost periods (an every-second period of the window with no
 * body start and no row), lost outcomes (a body that ended whose row is not final with that outcome),
 * starts with no row, daemon exits. Exit 1 on a duplicate, a period started twice, a lost period, a
 * lost outcome, a start with no row, an exit, or a row said lost and not written back.
 */
import { writeFileSync } from 'node:fs';
import { Cluster } from '../test/harness/cluster.mjs';
import { duplicateStarts, secondsBetween } from '../test/harness/effects.mjs';
import { attemptJob, faultJob } from '../test/harness/job-sources.mjs';
import { startGalera, galeraMissing } from '../test/harness/galera.mjs';
import { startPgReplicas } from '../test/harness/pg-replicas.mjs';
import { sleep, waitFor } from '../test/harness/process.mjs';
import { startRedisServers } from '../test/harness/redis.mjs';
import { Workspace } from '../test/harness/workspace.mjs';
import { benchOptions } from './lib.mjs';

const SCENARIOS = ['pg-sync', 'pg-async', 'galera-kill', 'galera-partition'];
const say = (line) => process.stderr.write(`[failover ${new Date().toISOString().slice(11, 23)}] ${line}\n`);

const JOBS = {
  'tick.mjs': faultJob({ schedule: '* * * * * *', durationMs: 50, extra: { catchUp: '1m', coalesce: false, overlap: 'allow' } }),
  'long.mjs': attemptJob({ schedule: '*/20 * * * * *', durationsMs: [8000], extra: { catchUp: '1m' } }),
};

/** The store under the daemons: its URL, how to fault it once, and how to read when a run was recorded. */
async function pgPair(sync, promoteAfterMs) {
  const pair = await startPgReplicas({ sync });
  const db = pair.createDatabase(`cron_fobench_${Date.now().toString(36)}`);
  // Asynchronous: the locks are Redis's (three masters), as in production; the store alone cannot
  // keep a period whose row it lost from being claimed again.
  const redis = sync ? [] : await startRedisServers(3);
  return {
    url: pair.url(db),
    env: sync ? {} : { SCHEDULER_REDIS: redis.map((r) => r.url).join(','), SCHEDULER_REDIS_PREFIX: `fobench-${Date.now()}:` },
    async fault() {
      const old = pair.primaryIndex;
      let cutMs;
      if (!sync) {
        await pair.replicating();
        await pair.cutReplication();
        const cutAt = Date.now();
        await sleep(4000);
        cutMs = Date.now() - cutAt;
      }
      const at = Date.now();
      pair.crash();
      await sleep(promoteAfterMs);
      await pair.promote();
      return { at, promotedAt: Date.now(), ...(cutMs !== undefined ? { cutMs } : {}), repair: () => pair.rejoin(old) };
    },
    firstRunAfter(t) {
      const rows = pair.rows(`select started_at from scheduler_runs where started_at > ${t} order by started_at limit 1`, db);
      return rows[0] ? Number(rows[0].started_at) : undefined;
    },
    async stop() {
      await pair.stop();
      await Promise.all(redis.map((r) => r.cleanup()));
    },
  };
}

async function galeraKill(logs, partition = false) {
  const missing = galeraMissing();
  if (missing.length > 0) throw new Error(`Galera needs: ${missing.join(', ')}`);
  const galera = await startGalera();
  const db = await galera.createDatabase(`cron_fobench_${Date.now().toString(36)}`);
  const byPort = new Map(galera.nodes.map((n, i) => [`127.0.0.1:${n.port}`, i]));
  return {
    url: galera.multiUrl(db),
    async fault() {
      // The node the daemons write to: the last one a daemon said it moved to (the first at the start).
      const moved = logs().filter((l) => l.msg === 'store: writing to another host of the list (failover)').at(-1);
      const i = moved ? byPort.get(String(moved.storeHost)) ?? 0 : 0;
      const at = Date.now();
      if (partition) await galera.isolate(i);
      else await galera.kill(i);
      return { at, node: i, repair: async () => { await sleep(Math.max(0, at + 12_000 - Date.now())); await (partition ? galera.heal(i) : galera.restart(i)); } };
    },
    async firstRunAfter(t) {
      for (const n of galera.nodes) {
        try {
          // A period due after the kill: a row committed at the kill's instant (replicated before the node died) says nothing.
          const rows = await n.query('SELECT started_at FROM ??.scheduler_runs WHERE started_at > ? AND scheduled_at > ? ORDER BY started_at LIMIT 1', [db, t, t]);
          return rows[0] ? Number(rows[0].started_at) : undefined;
        } catch {
          // That node is the one down: the next.
        }
      }
      return undefined;
    },
    stop: () => galera.stop(),
  };
}

async function scenario(name, rounds, promoteAfterMs) {
  const ws = new Workspace('cron-failover-bench-');
  let cluster;
  let store;
  try {
    const logs = () => cluster?.logs() ?? [];
    store = name.startsWith('pg-') ? await pgPair(name === 'pg-sync', promoteAfterMs) : await galeraKill(logs, name === 'galera-partition');
    running = { ws, cluster: () => cluster, store };
    cluster = new Cluster(ws, { SCHEDULER_STORE: store.url, ...store.env });
    for (const [file, src] of Object.entries(JOBS)) ws.writeJob(file, src);
    for (const n of ['f1', 'f2', 'f3']) cluster.start(n);
    await Promise.all(['f1', 'f2', 'f3'].map((n) => cluster.started(n)));
    const t0 = Date.now();
    const per = [];
    for (let round = 1; round <= rounds; round++) {
      const since = Date.now();
      const long = await waitFor('a long body to start', () => cluster.effects().find((e) => e.ev === 'start' && e.key.startsWith('long@') && e.t > since), 60_000);
      await sleep(Math.max(0, long.t + 2000 - Date.now()));
      const f = await store.fault();
      const first = await waitFor('a run recorded after the fault', () => store.firstRunAfter(f.promotedAt ?? f.at), 60_000, 100);
      await f.repair();
      await waitFor('the long body to end', () => cluster.effects().some((e) => e.key === long.key && e.ev !== 'start'), 60_000);
      const r = { round, killToFirstRunMs: first - f.at, ...(f.promotedAt ? { promotedToFirstRunMs: first - f.promotedAt } : {}), ...(f.cutMs !== undefined ? { cutMs: f.cutMs } : {}), ...(f.node !== undefined ? { node: f.node } : {}) };
      per.push(r);
      say(`${name} round ${round}: ${JSON.stringify(r)}`);
    }
    const t1 = Date.now() - 3000;
    await waitFor('every second of the window to have started or a row', () => {
      const started = new Set(cluster.effects().filter((e) => e.ev === 'start').map((e) => e.key));
      return secondsBetween(t0, t1).every((iso) => started.has(`tick@${iso}`));
    }, 60_000, 250).catch(() => undefined);
    const exits = cluster.exits().filter((e) => e.code !== null || e.signal !== null).length;
    const codes = await cluster.stopAll();
    const effects = cluster.effects();
    const runs = await cluster.history();
    const rowOf = new Map(runs.map((r) => [`${r.periodKey}#${r.attempt}`, r]));
    const started = new Set(effects.filter((e) => e.ev === 'start').map((e) => e.key));
    const rowKeys = new Set(runs.map((r) => r.periodKey));
    const lost = secondsBetween(t0, t1).map((iso) => `tick@${iso}`).filter((k) => !started.has(k) && !rowKeys.has(k));
    const lostOutcomes = effects.filter((e) => e.ev === 'end').filter((e) => rowOf.get(`${e.key}#${e.attempt}`)?.status !== 'succeeded').map((e) => `${e.key}#${e.attempt}`);
    const noRow = effects.filter((e) => e.ev === 'start' && !rowOf.has(`${e.key}#${e.attempt}`)).map((e) => `${e.key}#${e.attempt}`);
    const late = effects.filter((e) => e.ev === 'start' && e.key.startsWith('tick@') && e.attempt === 1).map((e) => e.t - Date.parse(e.key.slice(5)));
    const lostLines = cluster.logs().filter((l) => /^the store lost this/.test(String(l.msg)));
    const writtenBack = lostLines.filter((l) => String(l.msg).includes('written back')).length;
    const tickStarts = effects.filter((e) => e.ev === 'start' && e.key.startsWith('tick@')).map((e) => e.key);
    const ranTwice = [...new Set(tickStarts.filter((k, i) => tickStarts.indexOf(k) !== i))];
    const ms = (k) => per.map((p) => p[k]).filter((v) => v !== undefined);
    const range = (v) => (v.length ? `${Math.min(...v)}-${Math.max(...v)} ms (median ${[...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]})` : 'n/a');
    const summary = {
      scenario: name, rounds: per.length,
      killToFirstRun: range(ms('killToFirstRunMs')), promotedToFirstRun: range(ms('promotedToFirstRunMs')),
      periodsLateOver1s: late.filter((l) => l > 1000).length, maxLateMs: Math.max(0, ...late),
      duplicates: duplicateStarts(effects).length, lostPeriods: lost.length, lostOutcomes: lostOutcomes.length, startsWithoutRow: noRow.length,
      periodsRanTwice: ranTwice.length, rowsSaidLost: lostLines.length, rowsWrittenBack: writtenBack, exits, finalCodes: codes, per,
      detail: { duplicates: duplicateStarts(effects), ranTwice, lost, lostOutcomes, noRow },
    };
    return summary;
  } finally {
    running = undefined;
    await cluster?.stopAll().catch(() => undefined);
    await store?.stop().catch(() => undefined);
    ws.cleanup();
  }
}

/** What a scenario has started, for Ctrl-C: daemons, database servers, Redis servers, the workspace. */
let running;
process.once('SIGINT', () => {
  say('interrupted: stopping the daemons and the servers started here');
  const r = running;
  Promise.resolve()
    .then(() => r?.cluster()?.stopAll())
    .catch(() => undefined)
    .then(() => r?.store.stop())
    .catch(() => undefined)
    .finally(() => {
      r?.ws.cleanup();
      process.exit(130);
    });
});

async function main() {
  const flags = benchOptions(process.argv.slice(2), {
    strings: ['scenario', 'rounds', 'promote-after', 'json-out'],
    usage: 'usage: node bench/failover.mjs [--scenario pg-sync|pg-async|galera-kill|galera-partition|all] [--rounds 10] [--promote-after 2] [--json-out FILE]\n',
  });
  const promoteAfter = Number(flags['promote-after'] ?? 2);
  if (!Number.isFinite(promoteAfter) || promoteAfter < 0) throw new Error(`--promote-after: expected seconds >= 0, got ${flags['promote-after']}`);
  const rounds = Number(flags.rounds ?? 10);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds: expected a whole number >= 1, got ${flags.rounds}`);
  const wanted = flags.scenario ?? 'pg-sync';
  const list = wanted === 'all' ? SCENARIOS : [wanted];
  if (!list.every((s) => SCENARIOS.includes(s))) throw new Error(`--scenario: expected one of ${SCENARIOS.join(', ')}, all; got ${wanted}`);
  const out = [];
  let bad = false;
  for (const s of list) {
    const r = await scenario(s, rounds, promoteAfter * 1000);
    out.push(r);
    bad ||= r.duplicates > 0 || r.periodsRanTwice > 0 || r.lostPeriods > 0 || r.lostOutcomes > 0 || r.startsWithoutRow > 0 || r.exits > 0 || r.rowsWrittenBack < r.rowsSaidLost;
    process.stdout.write(`${s}: ${r.rounds} failovers; kill -> first run recorded ${r.killToFirstRun}${s.startsWith('pg-') ? `; promoted -> first run ${r.promotedToFirstRun}` : ''}; periods >1 s late ${r.periodsLateOver1s} (latest ${r.maxLateMs} ms); duplicates ${r.duplicates}; periods started twice ${r.periodsRanTwice}; lost periods ${r.lostPeriods}; lost outcomes ${r.lostOutcomes}; starts without a row ${r.startsWithoutRow}; rows said lost ${r.rowsSaidLost} (written back ${r.rowsWrittenBack}); exits ${r.exits} (final codes ${r.finalCodes.join(',')})\n`);
    if (r.duplicates || r.periodsRanTwice || r.lostPeriods || r.lostOutcomes || r.startsWithoutRow) process.stdout.write(`  detail: ${JSON.stringify(r.detail)}\n`);
  }
  process.stdout.write(`${JSON.stringify({ bench: 'failover', rounds, promoteAfterS: promoteAfter, results: out.map(({ per, detail, ...r }) => r) })}\n`);
  if (flags['json-out']) writeFileSync(flags['json-out'], JSON.stringify(out, null, 1));
  process.exit(bad ? 1 : 0);
}

main().catch((err) => {
  process.stderr.write(`failover: ${err.stack ?? err.message}\n`);
  process.exit(2);
});
