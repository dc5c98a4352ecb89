/**
 * The live nodes' job sets compared: after a deploy of new job files, every node should run the same
 * version (src/jobs/job-set.ts) within seconds. A node whose version has differed from this node's for
 * longer than JOB_SET_SKEW_MS is named in one warning (again if the set of such nodes changes), and
 * one line says when every live node runs the same set again. Fed by each read of the live nodes.
 */
import type { Logger } from '../log.js';
import type { ListedNode } from '../store/types.js';

export const JOB_SET_SKEW_MS = 60_000;

export class JobSetSkew {
  /** Node id -> since when (monotonic ms) its version has differed from ours. */
  private readonly since = new Map<string, number>();
  private warned = '';

  constructor(private readonly nodeId: string, private readonly log: Logger, private readonly skewMs = JOB_SET_SKEW_MS, private readonly now = () => performance.now()) {}

  observe(nodes: ListedNode[], mine: string | null): void {
    if (mine === null) return;
    const t = this.now();
    const differing = new Map<string, string>();
    for (const n of nodes) if (n.alive && n.id !== this.nodeId && n.jobSet && n.jobSet !== mine) differing.set(n.id, n.jobSet);
    for (const id of [...this.since.keys()]) if (!differing.has(id)) this.since.delete(id);
    for (const id of differing.keys()) if (!this.since.has(id)) this.since.set(id, t);
    const long = [...differing].filter(([id]) => t - this.since.get(id)! >= this.skewMs).sort(([a], [b]) => (a < b ? -1 : 1));
    const key = long.map(([id, v]) => `${id}=${v}`).join(',');
    if (key === this.warned) return;
    if (long.length > 0) {
      this.log.warn({ jobSet: mine, differing: Object.fromEntries(long) },
        `job sets differ for over ${Math.round(this.skewMs / 1000)} s: this node runs ${mine}; ${long.map(([id, v]) => `${id} runs ${v}`).join(', ')}: their jobs folders are not the same`);
    } else if (this.warned !== '') {
      this.log.info({ jobSet: mine }, `job sets agree again: every live node runs ${mine}`);
    }
    this.warned = key;
  }
}
