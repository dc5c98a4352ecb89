/**
 * One BullMQ worker process for bench/throughput.mjs (started by it, never by hand). BullMQ is loaded
 * from the temporary folder the bench installed it into (BENCH_BULLMQ_DIR), never from the project.
 *
 * Each job appends one line to BENCH_RUNS_OUT: the scheduler's name, the period instant the job was
 * scheduled for, the wall-clock start (ms with a fraction) and this worker's id. The instant is
 * `job.opts.prevMillis`: JobScheduler.getNextJobOpts() sets it to the iteration's `nextMillis`, the
 * same number that ends the job id `repeat:<scheduler>:<nextMillis>` (kept in the line as a check).
 * Prints "ready" once the worker is connected; closes the worker on SIGTERM.
 */
import { appendFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const { BENCH_BULLMQ_DIR, BENCH_REDIS_PORT, BENCH_QUEUE, BENCH_RUNS_OUT, BENCH_WORKER_ID, BENCH_CONCURRENCY } = process.env;
const { Worker } = createRequire(join(BENCH_BULLMQ_DIR, 'package.json'))('bullmq');

const worker = new Worker(BENCH_QUEUE, async (job) => {
  const startMs = performance.timeOrigin + performance.now();
  const idMillis = Number(String(job.id).slice(String(job.id).lastIndexOf(':') + 1));
  appendFileSync(BENCH_RUNS_OUT, `${JSON.stringify({
    job: job.repeatJobKey ?? job.name, period: job.opts.prevMillis ?? idMillis, idMillis, startMs, node: BENCH_WORKER_ID,
  })}\n`);
}, {
  connection: { host: '127.0.0.1', port: Number(BENCH_REDIS_PORT), maxRetriesPerRequest: null },
  concurrency: Number(BENCH_CONCURRENCY || 1000),
});
worker.on('error', (err) => process.stderr.write(`worker ${BENCH_WORKER_ID}: ${err?.message ?? err}\n`));
await worker.waitUntilReady();
process.stdout.write('ready\n');

process.on('SIGTERM', () => {
  void worker.close().finally(() => process.exit(0));
});
