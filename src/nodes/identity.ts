/** Who this process is, as the nodes table records it. */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { NodeOwner } from '../store/types.js';

let version: string | undefined;

/** The package's version (package.json), as `--version` prints it. */
export function packageVersion(): string {
  version ??= (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  return version;
}

/** This process under the node id: the host is the same `os.hostname()` the default id is made of. */
export function thisProcess(nodeId: string): NodeOwner & { procStart: string | null } {
  return { id: nodeId, host: hostname(), pid: process.pid, procStart: processStamp() };
}

/** What /proc/<pid>/stat says of a process: its state letter and its start (clock ticks after boot). */
export interface ProcStat {
  state: string;
  startTicks: string;
}

/**
 * Parses /proc/<pid>/stat: `pid (comm) state ppid ...`, where comm may hold spaces and parentheses,
 * so the fields are counted from the last ')'. The state is field 3, the start time field 22.
 */
export function parseProcStat(text: string): ProcStat | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  const fields = text.slice(close + 1).trim().split(/\s+/);
  const state = fields[0];
  const startTicks = fields[19];
  if (!state || !startTicks || !/^\d+$/.test(startTicks)) return null;
  return { state, startTicks };
}

let procChecked: boolean | undefined;
let bootId: string | undefined;

/** Whether this system has a Linux /proc (macOS and the BSDs have none): checked once. */
function hasProc(): boolean {
  procChecked ??= parseProcStat(readOr(`/proc/${process.pid}/stat`) ?? '') !== null;
  return procChecked;
}

function readOr(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/**
 * A stamp of a process's start that a later process with the same pid cannot share: the boot id
 * and the start time in clock ticks from /proc. Null where there is no /proc (or no such process).
 */
export function processStamp(pid: number = process.pid): string | null {
  if (!hasProc()) return null;
  const stat = parseProcStat(readOr(`/proc/${pid}/stat`) ?? '');
  if (!stat) return null;
  bootId ??= (readOr('/proc/sys/kernel/random/boot_id') ?? '').trim();
  return `${bootId}:${stat.startTicks}`;
}

/** Signal 0 checks without sending; EPERM means the process exists under another user. */
function signalAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether the process that wrote a node row is still alive on this machine: its pid exists, is not
 * a zombie (killed, not yet reaped by its parent: `kill -0` would still find it, and a restart right
 * after `kill -9` was refused), and, when the row has the stamp that process wrote (`stamp`), has
 * the same start: another process given the pid later is not the old one. Without /proc (macOS),
 * `kill -0` alone.
 */
export function pidAlive(pid: number, stamp: string | null = null): boolean {
  if (!hasProc()) return signalAlive(pid);
  const stat = parseProcStat(readOr(`/proc/${pid}/stat`) ?? '');
  // Not in /proc: gone, unless /proc hides it (mounted hidepid) and the signal finds it under another user.
  if (!stat) return signalAlive(pid);
  if (stat.state === 'Z' || stat.state === 'X') return false;
  if (stamp !== null) {
    bootId ??= (readOr('/proc/sys/kernel/random/boot_id') ?? '').trim();
    if (stamp !== `${bootId}:${stat.startTicks}`) return false;
  }
  return true;
}
