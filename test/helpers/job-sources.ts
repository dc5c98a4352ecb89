/**
 * Job files as users write them, for integration tests. Every body records its own side effects as
 * JSON lines in the file named by the SIDE_EFFECTS environment variable (one `appendFileSync` per
 * line: atomic enough across processes for short lines), so tests count what the bodies really did.
 */

export interface Effect {
  event: string;
  job: string;
  periodKey: string;
  scheduledAt: string;
  attempt: number;
  trigger: string;
  nodeId: string;
  runId: string;
  dryRun: boolean;
  pid: number;
  /** Date.now() in the body when the line was written. */
  at: number;
  [extra: string]: unknown;
}

const PRELUDE = `import { appendFileSync, existsSync } from 'node:fs';

// Appends one JSON line describing this body's side effect.
const record = (ctx, event, extra = {}) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({
  event, job: ctx.job, periodKey: ctx.periodKey, scheduledAt: ctx.scheduledAt.toISOString(), attempt: ctx.attempt,
  trigger: ctx.trigger, nodeId: ctx.nodeId, runId: ctx.runId, dryRun: ctx.dryRun, pid: process.pid, at: Date.now(), ...extra,
}) + '\\n');

// Waits ms milliseconds; rejects when the signal aborts (after recording the abort and its reason).
const sleep = (ctx, ms) => new Promise((resolve, reject) => {
  const timer = setTimeout(resolve, ms);
  const onAbort = () => {
    clearTimeout(timer);
    record(ctx, 'aborted', { reason: ctx.signal.reason });
    reject(new Error('aborted: ' + ctx.signal.reason));
  };
  if (ctx.signal.aborted) onAbort();
  else ctx.signal.addEventListener('abort', onAbort, { once: true });
});

// Waits until a file exists (the test releases the body that way), or the signal aborts.
const waitForFile = async (ctx, file, maxMs = 60000) => {
  const until = Date.now() + maxMs;
  while (!existsSync(file)) {
    if (Date.now() > until) throw new Error('never released: ' + file);
    await sleep(ctx, 50);
  }
};
`;

/**
 * A job file (ESM JavaScript; jiti loads TypeScript the same way). `fields` are the definition's
 * fields as source text (`schedule: '0 0 * * *', catchUp: '2d',`); `body` runs after the body has
 * recorded its 'start' side effect and may use record(ctx, event, extra), sleep(ctx, ms) and
 * waitForFile(ctx, path).
 */
export function jobSource(fields: string, body = ''): string {
  return `${PRELUDE}
export default {
  ${fields}
  async run(ctx) {
    record(ctx, 'start');
    ${body}
  },
};
`;
}
