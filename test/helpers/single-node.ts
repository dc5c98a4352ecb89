/**
 * One `bin/scheduler` node on a SQLite workspace of its own, for integration tests: workspaces and
 * daemons made here are cleaned up (daemons killed) after the tests of the file that calls it.
 */
import { afterEach, beforeEach, expect } from 'vitest';
import { Daemon, runCli } from './cli.js';
import { Workspace, type HistoryRun } from './workspace.js';

export interface SingleNode {
  workspace(): Workspace;
  envOf(ws: Workspace, extra?: Record<string, string>): Record<string, string>;
  start(ws: Workspace, extra?: Record<string, string>): Daemon;
  /** `history --json` (exit 0 expected). */
  history(ws: Workspace, ...args: string[]): Promise<HistoryRun[]>;
  /** Something else to undo after the test (in reverse order of registration). */
  cleanup(fn: () => Promise<void> | void): void;
}

/**
 * Call at the top level of a test file: it registers the hooks that clean up. The cleanups run once
 * no test of the file is running any more: under describe.concurrent, the first test to finish must
 * not kill the daemons and remove the workspaces of the tests still running (it did: a fast test
 * ended a slow one's daemon, which then waited in vain for its output).
 */
export function singleNode(prefix: string, nodeId: string): SingleNode {
  const cleanups: Array<() => Promise<void> | void> = [];
  let running = 0;
  beforeEach(() => {
    running++;
  });
  afterEach(async () => {
    running--;
    if (running > 0) return;
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const envOf = (ws: Workspace, extra: Record<string, string> = {}): Record<string, string> => ({
    SCHEDULER_STORE: ws.sqliteStore(),
    SCHEDULER_JOBS_DIR: ws.jobsDir,
    SCHEDULER_NODE_ID: nodeId,
    SCHEDULER_LOG_LEVEL: 'info',
    SIDE_EFFECTS: ws.path('effects.jsonl'),
    ...extra,
  });
  return {
    workspace() {
      const ws = new Workspace(prefix);
      cleanups.push(() => ws.cleanup());
      return ws;
    },
    envOf,
    start(ws, extra = {}) {
      const d = new Daemon([], { cwd: ws.dir, env: envOf(ws, extra) });
      cleanups.push(async () => {
        await d.stop('SIGKILL', 5000);
      });
      return d;
    },
    async history(ws, ...args) {
      const r = await runCli(['history', '--json', '--limit', '1000', ...args], { cwd: ws.dir, env: envOf(ws) });
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as HistoryRun[];
    },
    cleanup(fn) {
      cleanups.push(fn);
    },
  };
}
