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
export function thisProcess(nodeId: string): NodeOwner {
  return { id: nodeId, host: hostname(), pid: process.pid };
}

/** Whether a process of this machine is alive: signal 0 checks without sending; EPERM means it exists under another user. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
