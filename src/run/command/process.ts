/**
 * One run of a command job's process: spawned in a process group of its own (`detached`), stdin
 * from /dev/null, stdout and stderr to the log and the output tail. It ends when the group is gone:
 * when the leader exits, whatever it left running in its group (a `sleep 300 &`) gets SIGTERM, then
 * SIGKILL after `killAfter`; on an abort of the run's signal (timeout, lease loss, shutdown) the
 * whole group gets the same, with the grace after 'lease-lost' bounded by `leaseLostGraceMs` (the
 * process must be gone before the lease can run out in the store). The caller records the outcome
 * only after this resolves, so a recorded run has no process left behind in its group.
 *
 * A process that leaves its group (setsid, a double fork into another group) is not followed.
 * When the Node process exits (a second signal, the end of a one-shot command), groups still alive
 * are sent SIGKILL synchronously (see killLiveGroups). In a process that leaves SIGTERM, SIGINT and
 * SIGHUP to their default action (every command but `run`, whose shutdown aborts the runs), such a
 * signal first stops the live groups (SIGTERM, SIGKILL after each one's killAfter, 10 s at most), then
 * is raised again; the runs it ended write no outcome (their rows are left to the takeover, as when
 * the signal ends a JavaScript body).
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { AbortReason, CommandSpec } from '../../jobs/types.js';
import type { Logger } from '../../log.js';
import { formatDuration } from '../../time/duration.js';
import { OutputTail, streamLoggers } from './output.js';

/** After SIGKILL, how long the group may take to be gone before the run is ended anyway (a process in uninterruptible sleep). */
const AFTER_KILL_MS = 5000;
/** How often a group that was signalled is looked at: often at first (most end at once on SIGTERM), then less (each look after the leader's exit scans /proc). */
const POLL_MS = 25;
const POLL_SLOW_MS = 250;
const POLL_FAST_FOR_MS = 1000;
/** After the group is gone, how long its pipes may take to deliver what is left in them. */
const DRAIN_MS = 1000;

export interface CommandRun {
  spec: CommandSpec;
  /** The variables the scheduler sets (SCHEDULER_JOB, ...); added to the daemon's environment. */
  vars: Record<string, string>;
  log: Logger;
  signal: AbortSignal;
  /**
   * Aborted when the lease is lost, also after `signal` aborted for another reason: the group being
   * stopped after a timeout or a shutdown then gets SIGKILL within leaseLostGraceMs, not killAfter.
   */
  leaseGone?: AbortSignal;
  /** The grace after a 'lease-lost' abort, at most (default: killAfter). */
  leaseLostGraceMs?: number;
  /** Called when the leader exits: from then on the run's outcome is its exit (the caller's timeout no longer applies). */
  onExit?: () => void;
}

export interface CommandEnded {
  pid: number | null;
  /** The leader's exit code (null when it was ended by a signal, or never started). */
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  /** Set when the process could not be started at all. */
  startError: string | null;
  /** Set when the scheduler stopped the group because of an abort: what it took. */
  stopped: { reason: AbortReason; text: string } | null;
  /** The last 64 KiB of stdout and stderr. */
  output: string;
  lastStderrLine: string | null;
}

/** Process groups of commands still running in this process (their leaders' pids). */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

/** Process groups of commands still running in this process, and their killAfter. */
const killAfterOf = new Map<number, number>();

/** SIGKILL to every command group still alive: the daemon is going, no command outlives it. */
export function killLiveGroups(): void {
  for (const pgid of liveGroups) signalGroup(pgid, 'SIGKILL');
}

const FATAL: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];
/** After such a signal, a group's killAfter is cut to this. */
const SIGNAL_GRACE_MAX_MS = 10_000;
const fatalHandlers = new Map<NodeJS.Signals, () => void>();
/** Set once such a signal came: this process ends by it as soon as the groups are gone. */
let endingBySignal = false;

/** While groups are alive: a signal whose default action would end this process stops them first. */
function guardFatalSignals(): void {
  for (const sig of FATAL) {
    if (fatalHandlers.has(sig) || process.listenerCount(sig) > 0) continue;
    const handler = () => {
      endingBySignal = true;
      for (const [s, h] of fatalHandlers) process.off(s, h);
      fatalHandlers.clear();
      // Each group gets SIGKILL after its own killAfter, 10 s at most: the signal asked this process to end.
      const graceOf = (g: number) => Math.min(killAfterOf.get(g) ?? 0, SIGNAL_GRACE_MAX_MS);
      for (const pgid of liveGroups) signalGroup(pgid, 'SIGTERM');
      const started = performance.now();
      const poll = setInterval(() => {
        const elapsed = performance.now() - started;
        let waiting = false;
        for (const g of liveGroups) {
          if (!groupAlive(g)) continue;
          if (elapsed >= graceOf(g)) signalGroup(g, 'SIGKILL');
          else waiting = true;
        }
        if (waiting) return;
        clearInterval(poll);
        killLiveGroups();
        process.kill(process.pid, sig);
      }, POLL_MS);
    };
    fatalHandlers.set(sig, handler);
    process.on(sig, handler);
  }
}

function releaseFatalSignals(): void {
  if (liveGroups.size > 0) return;
  for (const [s, h] of fatalHandlers) process.off(s, h);
  fatalHandlers.clear();
}

function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether any process of the group is alive. kill(-pgid, 0) also finds zombies (a stray whose new
 * parent has not reaped it yet); on Linux /proc tells them apart.
 */
export function groupAlive(pgid: number): boolean {
  if (!signalGroup(pgid, 0)) return false;
  if (process.platform !== 'linux') return true;
  return groupMembers(pgid).length > 0;
}

/** Linux: the pids of the group's processes that are not zombies. */
export function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [pgid];
  }
  for (const e of entries) {
    if (e.charCodeAt(0) < 48 || e.charCodeAt(0) > 57) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${e}/stat`, 'utf8');
    } catch {
      continue;
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so read after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X') out.push(Number(e));
  }
  return out;
}

/**
 * The command's environment: the daemon's without its own SCHEDULER_* settings (the store URL may
 * hold a password), the job's `env`, the run's variables. Hygiene, not a barrier: a command running as
 * the daemon's user can read the daemon's environment in /proc (README, Known limits).
 */
export function commandEnv(spec: CommandSpec, vars: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('SCHEDULER_')) env[k] = v;
  return { ...env, ...spec.env, ...vars };
}

export function runCommand(run: CommandRun): Promise<CommandEnded> {
  const { spec, log, signal } = run;
  const tail = new OutputTail();
  const lines = streamLoggers(log);
  const ended: CommandEnded = { pid: null, exitCode: null, exitSignal: null, startError: null, stopped: null, output: '', lastStderrLine: null };
  const finish = () => {
    lines.stdout.end();
    lines.stderr.end();
    ended.output = tail.text();
    ended.lastStderrLine = lines.stderr.last;
    return ended;
  };
  if (signal.aborted) {
    ended.stopped = { reason: signal.reason as AbortReason, text: 'not started' };
    return Promise.resolve(finish());
  }

  return new Promise<CommandEnded>((resolve) => {
    let child;
    try {
      child = spawn(spec.argv[0]!, spec.argv.slice(1), {
        cwd: spec.cwd, env: commandEnv(spec, run.vars), detached: true, stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (err) {
      ended.startError = (err as Error).message;
      resolve(finish());
      return;
    }
    const pid = child.pid;
    let exited = false;
    let exitedWake = () => {};
    const exitedNow = new Promise<void>((r) => (exitedWake = r));
    let closed = false;
    let closedWake = () => {};
    const closedNow = new Promise<void>((r) => (closedWake = r));
    child.stdout!.on('data', (b: Buffer) => {
      tail.add(b);
      lines.stdout.add(b);
    });
    child.stderr!.on('data', (b: Buffer) => {
      tail.add(b, 'stderr');
      lines.stderr.add(b);
    });
    child.on('error', (err) => {
      // Before a pid: the program could not be started (removed since the job was loaded, ...).
      if (!exited && child.pid === undefined) {
        ended.startError = err.message;
        exited = true;
        exitedWake();
        closedWake();
      } else log.warn({ err: { message: err.message } }, 'command process error');
    });
    child.on('exit', (code, sig) => {
      exited = true;
      ended.exitCode = code;
      ended.exitSignal = sig;
      exitedWake();
      run.onExit?.();
    });
    child.on('close', () => {
      closed = true;
      closedWake();
    });
    if (pid === undefined) {
      void exitedNow.then(() => resolve(finish()));
      return;
    }
    ended.pid = pid;
    liveGroups.add(pid);
    killAfterOf.set(pid, spec.killAfterMs);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on('exit', killLiveGroups);
    }
    guardFatalSignals();

    // The group's end: SIGTERM, then SIGKILL at `killAt` (an abort may bring it nearer).
    let killAt = Infinity;
    /** How long after the SIGTERM the SIGKILL came (what the run's error says). */
    let killedAfterMs = 0;
    let killedWith: 'SIGTERM' | 'SIGKILL' | null = null;
    let stopping: Promise<void> | undefined;
    let stopEndedWake = () => {};
    const stopEnded = new Promise<void>((r) => (stopEndedWake = r));
    let stopStarted = 0;
    const stopGroup = (graceMs: number): Promise<void> => {
      const now = performance.now();
      killAt = Math.min(killAt, now + graceMs);
      stopStarted ||= now;
      // While the leader has not exited the group is there (no /proc scan needed); after, strays may be.
      const alive = () => (!exited && signalGroup(pid, 0)) || groupAlive(pid);
      stopping ??= (async () => {
        if (!alive()) return;
        killedWith = 'SIGTERM';
        signalGroup(pid, 'SIGTERM');
        const termSent = performance.now();
        let killSent = Infinity;
        for (;;) {
          const before = performance.now();
          const every = before - termSent < POLL_FAST_FOR_MS ? POLL_MS : POLL_SLOW_MS;
          // No later than the SIGKILL is due.
          await sleep(killSent === Infinity ? Math.max(1, Math.min(every, killAt - before)) : every);
          if (!alive()) return;
          const now = performance.now();
          if (killSent === Infinity && now >= killAt) {
            killedWith = 'SIGKILL';
            // The deadline that held: the first one's grace, or a lost lease's that came since.
            killedAfterMs = Math.round(killAt - stopStarted);
            killSent = now;
            signalGroup(pid, 'SIGKILL');
          }
          if (now - killSent > AFTER_KILL_MS) {
            log.error({ pid }, `the command's process group is still there ${formatDuration(AFTER_KILL_MS)} after SIGKILL (uninterruptible sleep?): ending the run without it`);
            return;
          }
        }
      })().finally(() => stopEndedWake());
      return stopping;
    };

    const leaseGrace = Math.min(spec.killAfterMs, run.leaseLostGraceMs ?? spec.killAfterMs);
    const onAbort = () => {
      const reason = signal.reason as AbortReason;
      const leaseLost = reason === 'lease-lost' || run.leaseGone?.aborted === true;
      // The leader has exited: the outcome is its exit, whatever comes while its leftovers are stopped
      // or its pipes drain (a timeout, a shutdown); a lost lease only brings their SIGKILL nearer.
      if (exited) {
        if (leaseLost) void stopGroup(leaseGrace);
        return;
      }
      ended.stopped = { reason, text: '' };
      void stopGroup(leaseLost ? leaseGrace : spec.killAfterMs);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    // The lease lost while the group is being stopped (its killAfter after a timeout, or the leader's
    // leftovers): another node may start the next attempt once the lease runs out in the store, so the
    // group goes sooner.
    const onLeaseGone = () => {
      if (!ended.stopped && !exited) return;
      void stopGroup(leaseGrace);
    };
    run.leaseGone?.addEventListener('abort', onLeaseGone, { once: true });

    void (async () => {
      // An abort's stop may end without the leader's exit event (a process in uninterruptible sleep).
      // One race, no polling: a command may run for hours, and each poll would leave a handler on exitedNow.
      await Promise.race([exitedNow, stopEnded]);
      // Whatever the leader left in its group goes too (an abort has brought killAt nearer already).
      if (!ended.stopped && groupAlive(pid)) log.warn({ pid }, 'the command exited but left processes in its group: stopping them');
      await stopGroup(spec.killAfterMs);
      signal.removeEventListener('abort', onAbort);
      run.leaseGone?.removeEventListener('abort', onLeaseGone);
      liveGroups.delete(pid);
      killAfterOf.delete(pid);
      releaseFatalSignals();
      if (!closed) await Promise.race([closedNow, sleep(DRAIN_MS)]);
      if (!closed) {
        // A process outside the group holds the pipes: what it writes from now on is not ours.
        child.stdout?.destroy();
        child.stderr?.destroy();
      }
      if (ended.stopped) {
        const grace = formatDuration(killedAfterMs);
        ended.stopped.text = killedWith === 'SIGKILL' ? `SIGTERM not heeded: the process group was killed (SIGKILL) after ${grace}`
          : killedWith === 'SIGTERM' ? 'the process group ended on SIGTERM' : 'the command had ended';
      }
      // The signal, not the command, ended the leader: no outcome is written (a command's death
      // would read as its failure and owe a retry), as for a JavaScript body that such a signal ends.
      // The row stays running and is taken over once its lease runs out; this process ends by the
      // signal as soon as every group is gone.
      if (endingBySignal) return;
      resolve(finish());
    })();
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
