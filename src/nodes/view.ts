/** How a node row is shown: by `nodes` (text and JSON) and, as NodeView, by the status views. */
import type { NodeView } from '../status/model.js';
import type { ListedNode } from '../store/types.js';

export function nodeView(n: ListedNode): NodeView {
  return {
    id: n.id,
    host: n.host,
    pid: n.pid,
    version: n.version,
    startedAt: new Date(n.startedAt).toISOString(),
    heartbeatAt: new Date(n.heartbeatAt).toISOString(),
    inFlight: n.inFlight,
    clockOffsetMs: n.clockOffsetMs,
    state: n.state,
    alive: n.alive,
    storeHost: n.storeHost,
    jobSet: n.jobSet,
  };
}

/** A short age: '0.4s', '12s', '5m03s', '2h05m', '3d04h' (at most 6 characters below 100 days). */
export function formatAge(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 10) return `${s.toFixed(1)}s`;
  if (s < 60) return `${Math.floor(s)}s`;
  const two = (n: number) => String(Math.floor(n)).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m${two(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${two((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86_400)}d${two((s % 86_400) / 3600)}h`;
}

/** A clock offset with its sign: '+0ms', '-12ms', '+1.3s'. */
export function formatOffset(ms: number): string {
  const sign = ms < 0 ? '-' : '+';
  const abs = Math.abs(ms);
  return abs < 1000 ? `${sign}${abs}ms` : `${sign}${(abs / 1000).toFixed(1)}s`;
}

/** What the table's STATE column says: the state, or 'silent' for a node whose heartbeat went stale without a stop. */
export function stateText(n: ListedNode): string {
  return n.state !== 'stopped' && !n.alive ? 'silent' : n.state;
}
