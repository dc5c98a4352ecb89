// A liveness heartbeat: every 10 seconds, one node of the cluster logs that the cluster is alive.
// Copy it to see scheduling at work; in production, point it at your monitoring (a push URL).
import { defineJob } from 'cluster-cron';

export default defineJob({
  schedule: '*/10 * * * * *',
  lockTtl: '10s',
  catchUp: '10s',
  async run(ctx) {
    // ctx.log already names the node, job, period and attempt on every line.
    ctx.log.info('cluster heartbeat');
    return { node: ctx.nodeId, at: ctx.scheduledAt.toISOString() };
  },
});
