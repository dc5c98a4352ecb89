#!/usr/bin/env node
// The reconciling sweep's period math alone: periodsToCheck for N yearly jobs, once per simulated
// second, as a node's sweep asks it (the anchor creeping a second at a time). Prints the time of the
// first sweep (which fills each schedule's kept answers) and the p50/max of the others.
// Usage: npm run build && node bench/sweep-periods.mjs [--jobs 1000] [--sweeps 30]
import { compileSchedule } from '../dist/time/schedule.js';
import { periodsToCheck } from '../dist/run/reconcile.js';
import { benchOptions } from './lib.mjs';

const flags = benchOptions(process.argv.slice(2), { strings: ['jobs', 'sweeps'], usage: 'usage: npm run build && node bench/sweep-periods.mjs [--jobs 1000] [--sweeps 30]' });
const count = Number(flags.jobs ?? 1000);
const sweeps = Number(flags.sweeps ?? 30);
const jobs = Array.from({ length: count }, (_, i) => ({
  name: `j${i}`, schedule: compileSchedule(`${i % 60} ${i % 60} ${i % 24} 1 1 *`, 'UTC'), catchUpMs: 60_000, shards: 1,
}));
let now = Date.now();
const times = [];
for (let s = 0; s < sweeps; s++) {
  const t = performance.now();
  for (const job of jobs) periodsToCheck(job, { fromExclusive: now - 4000, upTo: now - 3000, now });
  times.push(performance.now() - t);
  now += 1000;
}
const rest = times.slice(1).sort((a, b) => a - b);
console.log(`${count} yearly jobs, ${sweeps} sweeps: first ${times[0].toFixed(1)} ms, then p50 ${rest[Math.floor(rest.length / 2)].toFixed(1)} ms, max ${rest[rest.length - 1].toFixed(1)} ms`);
