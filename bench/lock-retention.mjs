#!/usr/bin/env node
/**
 * What keeping a first attempt's lock key until its period is older than catchUp costs in Redis
 * memory (issue 20: a row the store lost must not make a period run again). Through the compiled
 * lock provider (dist/: run `npm run build` first), on a redis-server it starts on a free port.
 *
 *   node bench/lock-retention.mjs [--jobs 2000] [--seconds 60] [--catch-up 15m]
 *
 * It claims and settles, with the keep, every period of `--jobs` every-second jobs over `--seconds`
 * (keys named as the daemon names them), then reads INFO memory: bytes per kept key, and the
 * projection to `--jobs` every-second jobs with that catchUp (keys = jobs x catchUp in seconds).
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import pino from 'pino';
import { PROJECT_ROOT, fmt, startRedisServers } from './lib.mjs';

const { values: flags } = parseArgs({
  options: {
    jobs: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '60' },
    'catch-up': { type: 'string', default: '15m' },
  },
});
const jobs = Number(flags.jobs);
const seconds = Number(flags.seconds);
const { parseDuration } = await import(pathToFileURL(join(PROJECT_ROOT, 'dist', 'time', 'duration.js')).href);
const catchUpMs = parseDuration(flags['catch-up']);
if (!Number.isInteger(jobs) || jobs < 1 || !Number.isInteger(seconds) || seconds < 1 || !(catchUpMs > 0)) {
  console.error('lock-retention: --jobs and --seconds are positive integers, --catch-up a duration');
  process.exit(2);
}
const { RedlockProvider } = await import(pathToFileURL(join(PROJECT_ROOT, 'dist', 'claim', 'redlock-provider.js')).href);

const [server] = await startRedisServers(1);
const inspector = new Redis(server.url);
const used = async () => Number(/used_memory:(\d+)/.exec(await inspector.info('memory'))[1]);
try {
  const provider = new RedlockProvider({ urls: [server.url], prefix: `cluster-cron:${Date.now()}:`, log: pino({ level: 'silent' }) });
  await provider.connect();
  const before = await used();
  const start = Date.UTC(2026, 11, 6, 2, 0, 0);
  for (let s = 0; s < seconds; s++) {
    const at = new Date(start + s * 1000).toISOString();
    const leases = await Promise.all(Array.from({ length: jobs }, (_, j) => provider.tryAcquire(`job-${String(j).padStart(5, '0')}@${at}`, 30_000)));
    for (const l of leases) l?.settle(Date.now() + catchUpMs);
  }
  // The keeps are sent in the background: wait until every key has its long expiry.
  for (let i = 0; i < 200; i++) {
    const sample = await inspector.pttl((await inspector.scan('0', 'COUNT', 10))[1][0]);
    if (sample > 60_000) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const keys = await inspector.dbsize();
  const bytes = (await used()) - before;
  const perKey = bytes / keys;
  const projected = jobs * (catchUpMs / 1000) * perKey;
  console.log(`kept keys: ${keys} (${jobs} jobs x ${seconds} s); Redis used_memory grew ${fmt(bytes / 1048576, 1)} MiB: ${fmt(perKey, 0)} bytes per key`);
  console.log(`projected per master at ${jobs} every-second jobs with catchUp ${flags['catch-up']}: ${jobs * (catchUpMs / 1000)} keys, ${fmt(projected / 1048576, 0)} MiB`);
  await provider.close();
} finally {
  await inspector.quit();
  await server.cleanup();
}
