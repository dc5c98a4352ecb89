/**
 * The cluster scenario shared by the MariaDB, PostgreSQL and SQLite cluster tests: N `bin/scheduler run`
 * processes on one store (and optionally Redis masters), an every-second job whose body appends one
 * line `<periodKey> <nodeId> <attempt>` to a side-effect file, and an every-2-seconds job that appends
 * a line and then throws. After SIGTERM, the side effects (what the bodies really did) are checked
 * against each other and against `history --json`.
 */
import { expect } from 'vitest';
import { Daemon, runCli } from '../helpers/cli.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace, type HistoryRun } from '../helpers/workspace.js';

/** Every second. `O_APPEND` writes of one short line are atomic across processes. */
const TICK_JOB = `
import { appendFileSync } from 'node:fs';
export default {
  schedule: '* * * * * *',
  catchUp: '30s',
  run(ctx) {
    appendFileSync(process.env.SIDE_EFFECTS, \`\${ctx.periodKey} \${ctx.nodeId} \${ctx.attempt}\\n\`);
    return { node: ctx.nodeId };
  },
};
`;

/** Every 2 seconds, in TypeScript (loaded without a build step): records its side effect, then throws. */
const BOOM_JOB = `
import { appendFileSync } from 'node:fs';
import type { JobContext } from 'cluster-cron';

export default {
  schedule: '*/2 * * * * *',
  catchUp: '30s',
  run(ctx: JobContext): never {
    appendFileSync(process.env.BOOM_EFFECTS as string, \`\${ctx.periodKey} \${ctx.nodeId} \${ctx.attempt}\\n\`);
    throw new Error(\`boom at \${ctx.periodKey}\`);
  },
};
`;

export interface ClusterScenarioOptions {
  /** SCHEDULER_STORE; for SQLite a function of the workspace folder. */
  store: string | ((ws: Workspace) => string);
  /** Redis masters (none: the row alone decides). */
  redis: string[];
  nodes: number;
  /** How many seconds of periods to observe once every node is up (10: each must run once, and more than one node must win some). */
  seconds?: number;
}

export interface SideEffect {
  periodKey: string;
  nodeId: string;
  attempt: number;
  line: string;
}

export function parseSideEffects(lines: string[]): SideEffect[] {
  return lines.map((line) => {
    const [periodKey, nodeId, attempt] = line.split(' ');
    if (!periodKey || !nodeId || !attempt) throw new Error(`malformed side-effect line: ${JSON.stringify(line)}`);
    return { periodKey, nodeId, attempt: Number(attempt), line };
  });
}

export function instantOf(periodKey: string): number {
  return new Date(periodKey.slice(periodKey.indexOf('@') + 1)).getTime();
}

/** Resolves when the daemon has logged `msg`; throws at once if it exited instead. */
export async function waitForLog(daemon: Daemon, what: string, msg: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  const result = await waitFor(what, () => {
    if (daemon.proc.exitCode !== null || daemon.proc.signalCode !== null) return 'exited' as const;
    return daemon.logs().find((l) => l.msg === msg) ?? false;
  }, timeoutMs);
  if (result === 'exited') {
    throw new Error(`${what}: the daemon exited (${daemon.proc.exitCode ?? daemon.proc.signalCode}) first.\nstdout:\n${daemon.output}\nstderr:\n${daemon.errors}`);
  }
  return result;
}

function duplicates(keys: string[]): string[] {
  const seen = new Set<string>();
  const dup = new Set<string>();
  for (const k of keys) (seen.has(k) ? dup : seen).add(k);
  return [...dup];
}

export async function runClusterScenario(options: ClusterScenarioOptions): Promise<void> {
  const seconds = options.seconds ?? 10;
  const ws = new Workspace('cron-cluster-');
  const daemons: Daemon[] = [];
  try {
    ws.writeJob('tick.mjs', TICK_JOB);
    ws.writeJob('boom.ts', BOOM_JOB);
    const store = typeof options.store === 'function' ? options.store(ws) : options.store;
    const baseEnv = {
      SCHEDULER_STORE: store,
      SCHEDULER_REDIS: options.redis.join(','),
      SCHEDULER_JOBS_DIR: ws.jobsDir,
      SCHEDULER_LOG_LEVEL: 'info',
      SIDE_EFFECTS: ws.path('ticks.txt'),
      BOOM_EFFECTS: ws.path('booms.txt'),
    };
    const nodeIds = Array.from({ length: options.nodes }, (_, i) => `node-${i + 1}`);
    const startedAt = Date.now();
    for (const nodeId of nodeIds) {
      daemons.push(new Daemon([], { cwd: ws.dir, env: { ...baseEnv, SCHEDULER_NODE_ID: nodeId } }));
    }
    const starts = await Promise.all(daemons.map((d, i) => waitForLog(d, `${nodeIds[i]} to start`, 'daemon starting')));
    for (const s of starts) expect(s.lock).toBe(options.redis.length > 0 ? 'redlock' : 'none');
    await Promise.all(daemons.map((d, i) => waitForLog(d, `${nodeIds[i]} to schedule`, 'scheduler started')));
    const allUpAt = Date.now();

    // Observe `seconds` whole periods after every node is up (generous deadline: the machine is shared).
    await waitFor(`${seconds} periods after all nodes are up`, () => {
      const periods = new Set(parseSideEffects(ws.lines('ticks.txt')).map((s) => s.periodKey).filter((k) => instantOf(k) >= allUpAt));
      return periods.size >= seconds;
    }, seconds * 1000 + 30_000, 250);

    const stopAt = Date.now();
    const codes = await Promise.all(daemons.map((d) => d.stop('SIGTERM')));
    const stoppedAt = Date.now();
    expect(codes, `exit codes; stderr:\n${daemons.map((d) => d.errors).join('\n')}`).toEqual(daemons.map(() => 0));

    // No node logged an error (failed runs are warnings; claim or store errors would be errors).
    for (const [i, d] of daemons.entries()) {
      const errors = d.logs().filter((l) => l.level === 'error' || l.level === 'fatal');
      expect(errors, `error lines of ${nodeIds[i]}`).toEqual([]);
      expect(d.logs().some((l) => l.msg === 'stopped'), `${nodeIds[i]} logged 'stopped'`).toBe(true);
    }

    const ticks = parseSideEffects(ws.lines('ticks.txt'));
    const booms = parseSideEffects(ws.lines('booms.txt'));

    // 1. At most once: no period's body ran twice, cluster-wide.
    expect(duplicates(ticks.map((t) => t.periodKey)), 'tick periods whose body ran more than once').toEqual([]);
    expect(duplicates(booms.map((t) => t.periodKey)), 'boom periods whose body ran more than once').toEqual([]);
    for (const t of [...ticks, ...booms]) {
      expect(t.attempt).toBe(1);
      expect(nodeIds).toContain(t.nodeId);
    }

    // The store agrees with the side effects.
    const history = await runCli(['history', '--json', '--limit', '1000'], { cwd: ws.dir, env: { SCHEDULER_STORE: store } });
    expect(history.code, history.stderr).toBe(0);
    const runs = JSON.parse(history.stdout) as HistoryRun[];
    expect(runs.length, 'history must not be truncated at --limit 1000').toBeLessThan(1000);
    const tickRuns = runs.filter((r) => r.job === 'tick');
    const boomRuns = runs.filter((r) => r.job === 'boom');
    expect(runs.filter((r) => r.job !== 'tick' && r.job !== 'boom')).toEqual([]);
    // A clean stop leaves nothing running or interrupted (the bodies take milliseconds).
    expect(runs.filter((r) => !['succeeded', 'failed', 'skipped'].includes(r.status))).toEqual([]);

    const lineOf = (r: HistoryRun) => `${r.periodKey} ${r.nodeId} ${r.attempt}`;
    const succeeded = tickRuns.filter((r) => r.status === 'succeeded');
    expect(tickRuns.filter((r) => r.status === 'failed')).toEqual([]);
    expect(succeeded.map(lineOf).sort(), 'succeeded tick rows vs. tick side effects').toEqual(ticks.map((t) => t.line).sort());
    for (const r of succeeded) expect(r.result).toEqual({ node: r.nodeId });

    // 2. Every period ran: the seconds from the first to the last observed form a contiguous run.
    // Contract: a period may instead be recorded `skipped` with its reason (overlap); none vanish.
    const instants = [...new Set(ticks.map((t) => instantOf(t.periodKey)))].sort((a, b) => a - b);
    expect(instants.length).toBeGreaterThanOrEqual(seconds);
    const first = instants[0]!;
    const last = instants[instants.length - 1]!;
    const skippedByInstant = new Map(tickRuns.filter((r) => r.status === 'skipped').map((r) => [new Date(r.scheduledAt).getTime(), r]));
    const ran = new Set(instants);
    const missing: string[] = [];
    for (let t = first; t <= last; t += 1000) {
      if (ran.has(t)) continue;
      const skipped = skippedByInstant.get(t);
      if (skipped && skipped.reason === 'overlap') continue;
      missing.push(`${new Date(t).toISOString()}${skipped ? ` (skipped: ${skipped.reason})` : ' (no row)'}`);
    }
    expect(missing, 'periods between the first and the last observed that neither ran nor were skipped for overlap').toEqual([]);
    // The run covers the whole life of the cluster, give or take the edges (start-up, the stop).
    expect(first, 'first period observed soon after the first node came up').toBeLessThanOrEqual(allUpAt + 1000);
    expect(first).toBeGreaterThanOrEqual(Math.floor(startedAt / 1000) * 1000 - 1000);
    expect(last, 'last period observed close to the stop').toBeGreaterThanOrEqual(Math.floor(stopAt / 1000) * 1000 - 3000);
    expect(last).toBeLessThanOrEqual(stoppedAt);
    // No period ran twice in the store either, and no skipped marker hides a period that ran.
    expect(duplicates(tickRuns.map((r) => r.periodKey))).toEqual([]);

    // 3. The work is shared: more than one node won periods.
    const winners = new Set(ticks.map((t) => t.nodeId));
    expect(winners.size, `winners: ${[...winners].join(', ')}`).toBeGreaterThan(1);

    // 4. The failing job: every body that ran is a failed row with its message, and vice versa.
    expect(booms.length).toBeGreaterThanOrEqual(Math.floor(seconds / 2) - 1);
    const failed = boomRuns.filter((r) => r.status === 'failed');
    expect(boomRuns.filter((r) => r.status === 'succeeded')).toEqual([]);
    expect(failed.map(lineOf).sort(), 'failed boom rows vs. boom side effects').toEqual(booms.map((b) => b.line).sort());
    for (const r of failed) {
      expect(r.error).toBe(`boom at ${r.periodKey}`);
      expect(r.finishedAt).not.toBeNull();
      expect(new Date(r.scheduledAt).getUTCSeconds() % 2).toBe(0);
    }
  } catch (err) {
    // Keep what the nodes said: it is what explains a failure.
    for (const [i, d] of daemons.entries()) {
      process.stderr.write(`--- node-${i + 1} stdout (tail) ---\n${d.output.slice(-4000)}\n--- stderr ---\n${d.errors.slice(-2000)}\n`);
    }
    throw err;
  } finally {
    await Promise.all(daemons.map((d) => d.stop('SIGKILL', 5000)));
    ws.cleanup();
  }
}
