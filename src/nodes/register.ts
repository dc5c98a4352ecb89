/**
 * At the daemon's start, before any claim: this process takes its node id in the nodes table, or is
 * refused (exit 2) when another live process holds it. A restart after a crash on the same host
 * (the old pid is gone, as under systemd's Restart=) takes the id over at once, with no wait for
 * the old heartbeat to go stale.
 */
import { ConfigError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ListedNode, NodeStore, RegisteredNode } from '../store/types.js';
import { packageVersion, pidAlive, thisProcess } from './identity.js';
import { formatAge } from './view.js';

export function heldMessage(id: string, holder: ListedNode): string {
  return `node id "${id}" is held by a live process: host ${holder.host}, pid ${holder.pid}, heartbeat ${formatAge(holder.heartbeatAgeMs)} ago; set SCHEDULER_NODE_ID to another name`;
}

export async function registerNode(store: NodeStore, nodeId: string, clockOffsetMs: number, log: Logger): Promise<RegisteredNode> {
  const me = thisProcess(nodeId);
  const result = await store.register({ ...me, version: packageVersion(), clockOffsetMs }, pidAlive);
  if (result.outcome === 'held') throw new ConfigError(heldMessage(nodeId, result.holder));
  const previous = result.previous;
  if (previous && previous.state !== 'stopped') {
    log.info({ nodeId, previous: { host: previous.host, pid: previous.pid, state: previous.state, heartbeatAgeMs: previous.heartbeatAgeMs } },
      previous.alive ? 'node id taken over from a process of this host that is gone' : 'node id taken over from a process whose heartbeat had gone stale');
  }
  return result.node;
}
