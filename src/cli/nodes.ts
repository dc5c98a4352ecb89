/** `nodes`: the live and recently stopped nodes, from the nodes table. */
import type { Command } from 'commander';
import { formatAge, formatOffset, nodeView, stateText } from '../nodes/view.js';
import { openStores } from './lazy.js';
import type { ListedNode } from '../store/types.js';
import { withExitStatuses } from './exit.js';
import { print, setup, table, withCommonOptions, type CommonOptions } from './common.js';

/** Nodes stopped (or silent) longer ago than this are not shown. */
const RECENT_MS = 86_400_000;

/** Cuts a cell to `max` characters, so that the table fits 100 columns. */
const cut = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

export function nodesCommand(program: Command): void {
  withExitStatuses(withCommonOptions(program.command('nodes')), { 0: 'ok', 2: 'bad usage or setting', 4: 'store unreachable' })
    .description('the live and recently stopped nodes (last 24 h): id, host, pid, version, started, last heartbeat, runs in flight, clock offset to the store')
    .action(async (options: CommonOptions) => {
      const { config } = await setup(options);
      const stores = await openStores(config);
      let nodes: ListedNode[];
      try {
        nodes = await stores.nodeStore.list({ recentMs: RECENT_MS });
      } finally {
        await stores.close();
      }
      // The live ones first, each group by id.
      nodes.sort((a, b) => Number(b.alive) - Number(a.alive) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      print(options.json, nodes.map(nodeView), () => nodesText(nodes));
    });
}

/**
 * The text table, within 100 columns: the id and the host are cut (ages stay under 11 characters
 * below 100 days, a Linux pid under 8 digits). The pid is the one a refused start names.
 */
export function nodesText(nodes: ListedNode[]): string {
  if (nodes.length === 0) return 'no node has run in the last 24 h';
  return `${nodesTable(nodes)}${storeHostsText(nodes)}${jobSetsText(nodes)}`;
}

/**
 * Below the table, the version of the job set each live node runs, one line a version: after a
 * deploy of new job files, one line once every node has them; two while some do not.
 */
function jobSetsText(nodes: ListedNode[]): string {
  const byVersion = new Map<string, string[]>();
  for (const n of nodes) if (n.alive && n.jobSet) byVersion.set(n.jobSet, [...(byVersion.get(n.jobSet) ?? []), n.id]);
  const lines = [...byVersion].map(([v, ids]) => `\njob set ${v}: ${ids.join(', ')}`).join('');
  return byVersion.size > 1 ? `${lines}\nthe live nodes run ${byVersion.size} different job sets: their jobs folders differ` : lines;
}

/**
 * Below the table, which store host the live nodes write to, one line a host (the table has no room
 * for it within 100 columns): after a failover, the nodes still on the old primary stand out.
 */
function storeHostsText(nodes: ListedNode[]): string {
  const byHost = new Map<string, string[]>();
  for (const n of nodes) if (n.alive && n.storeHost) byHost.set(n.storeHost, [...(byHost.get(n.storeHost) ?? []), n.id]);
  return [...byHost].map(([host, ids]) => `\nwrites to ${host}: ${ids.join(', ')}`).join('');
}

function nodesTable(nodes: ListedNode[]): string {
  return table([
    ['ID', 'HOST', 'PID', 'VERSION', 'STARTED', 'HEARTBEAT', 'RUNS', 'OFFSET', 'STATE'],
    ...nodes.map((n) => [
      cut(n.id, 18), cut(n.host, 13), String(n.pid), cut(n.version, 7), `${formatAge(n.heartbeatAgeMs + n.heartbeatAt - n.startedAt)} ago`,
      `${formatAge(n.heartbeatAgeMs)} ago`, String(n.inFlight), formatOffset(n.clockOffsetMs), stateText(n),
    ]),
  ]);
}
