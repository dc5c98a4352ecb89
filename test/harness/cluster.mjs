/**
 * A cluster of real `bin/scheduler run` processes over one workspace (Workspace), against a store and
 * Redis servers its caller owns; nodes are killed, paused and restarted by pid.
 *
 * Slots (`n1`, `n2`...) are the cluster's places. By default a restart in a slot keeps the node id
 * (the slot's name); with `freshIds` each process gets its own (`n1`, then `n1-g2`), so that "another
 * node" in the side effects never confuses a restarted process with the one that was killed.
 */
import { join } from 'node:path';
import { Daemon, runCli } from './process.mjs';

export class Cluster {
  /**
   * `env`: every node's (the store, Redis...); `slotEnv(slot)`: one slot's on top (its own proxy);
   * `logFiles`: each process logs to logs/<node id>.log of the workspace instead of memory.
   */
  constructor(ws, env, { logLevel = 'info', slotEnv = () => ({}), freshIds = false, logFiles = false } = {}) {
    this.ws = ws;
    this.env = env;
    this.options = { logLevel, slotEnv, freshIds, logFiles };
    /** slot -> the process now in it */
    this.nodes = new Map();
    /** every process ever started, in order */
    this.all = [];
    this.generation = new Map();
  }

  start(slot, extraEnv = {}, command = undefined) {
    const gen = (this.generation.get(slot) ?? 0) + 1;
    this.generation.set(slot, gen);
    const nodeId = this.options.freshIds && gen > 1 ? `${slot}-g${gen}` : slot;
    const daemon = new Daemon([], {
      cwd: this.ws.dir,
      command,
      logFile: this.options.logFiles ? join(this.ws.logsDir, `${nodeId}.log`) : undefined,
      env: {
        ...this.env,
        SCHEDULER_NODE_ID: nodeId,
        SCHEDULER_JOBS_DIR: this.ws.jobsDir,
        SIDE_EFFECTS: this.ws.effectsFile,
        SCHEDULER_LOG_LEVEL: this.options.logLevel,
        ...this.options.slotEnv(slot),
        ...extraEnv,
      },
    });
    daemon.slot = slot;
    this.nodes.set(slot, daemon);
    this.all.push(daemon);
    return daemon;
  }

  /** Waits until the slot's process has logged 'scheduler started'. */
  async started(slot, timeoutMs = 60_000) {
    await this.nodes.get(slot).waitStarted(timeoutMs);
  }

  async startAll(slots) {
    const daemons = slots.map((s) => this.start(s));
    await Promise.all(daemons.map((d) => d.waitStarted()));
    return daemons;
  }

  /** The live process whose node id is `nodeId`. */
  byNodeId(nodeId) {
    return [...this.nodes.values()].find((d) => d.nodeId === nodeId && d.alive);
  }

  effects() {
    return this.ws.effects();
  }

  /** Every process's log lines, each with `_node` (its node id). */
  logs() {
    return this.all.flatMap((d) => d.logs().map((l) => ({ ...l, _node: d.nodeId })));
  }

  /** kill -9 of the slot's process; resolves with the moment it was seen gone. */
  async kill(slot) {
    return (await this.nodes.get(slot).kill9()).goneAt;
  }

  /** SIGTERM (after a SIGCONT) to every slot's process; their exit codes. */
  async stopAll(killAfterMs = 60_000) {
    return Promise.all([...this.nodes.values()].map(async (d) => (await d.terminate(killAfterMs)).code));
  }

  /** SIGTERM to every slot's process still running except those of `except`; their exit codes. */
  async stopOthers(except) {
    return Promise.all([...this.nodes].filter(([slot, d]) => !except.includes(slot) && d.alive).map(async ([, d]) => (await d.terminate(60_000)).code));
  }

  /** SIGKILL of every process still running (cleanup after a failed test). */
  async killAll() {
    await Promise.all(this.all.filter((d) => d.alive).map((d) => d.kill9()));
  }

  /** How every process ever started ended (or null, null while it runs). */
  exits() {
    return this.all.map((d) => ({ nodeId: d.nodeId, code: d.proc.exitCode, signal: d.proc.signalCode }));
  }

  async history() {
    const r = await runCli(['history', '--json', '--limit', '100000'], { cwd: this.ws.dir, env: { ...this.env, SCHEDULER_JOBS_DIR: this.ws.jobsDir } });
    if (r.code !== 0) throw new Error(`history exited ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout);
  }
}
