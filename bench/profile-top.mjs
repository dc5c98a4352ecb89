#!/usr/bin/env node
/**
 * The top frames of V8 CPU profiles (`.cpuprofile`, as `node --cpu-prof` writes them), by self time.
 *
 *   node bench/profile-top.mjs FILE_OR_DIR... [--top 15] [--exclude NAME]... [--json]
 *
 * Each file's samples are summed per frame (function name, file and line); a folder stands for the
 * `.cpuprofile` files in it, each reported apart, then all together. `--exclude NAME` leaves out the
 * samples taken in a frame of that name (`throughput.mjs --profile` leaves out `writeHeapSnapshot`,
 * its own snapshot after the window). Self time is the time a sample
 * was taken in the frame itself; "(idle)" and "(program)" are V8's, the rest is JavaScript or native
 * code called from it ("(garbage collector)" is the collector). `bench/throughput.mjs --profile DIR`
 * writes the profiles and prints this summary.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { parseArgs } from 'node:util';

/** Self time per frame of one profile: [{ frame, ms, share }] sorted by ms, and the profile's span. */
export function topFrames(profile, { exclude = [] } = {}) {
  const skip = new Set(exclude);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]);
    if (!node) continue;
    const f = node.callFrame;
    if (skip.has(f.functionName)) continue;
    const where = f.url ? `${shortUrl(f.url)}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
    // A sample's weight is the time to the next one (the last sample weighs the mean).
    const ms = (deltas[i + 1] ?? deltas[i] ?? 0) / 1000;
    self.set(key, (self.get(key) ?? 0) + ms);
  }
  const totalMs = [...self.values()].reduce((a, b) => a + b, 0);
  const busyMs = totalMs - (self.get('(idle)') ?? 0);
  const frames = [...self].map(([frame, ms]) => ({ frame, ms, share: busyMs > 0 ? ms / busyMs : 0 }))
    .filter((f) => f.frame !== '(idle)').sort((a, b) => b.ms - a.ms);
  return { totalMs, busyMs, frames };
}

function shortUrl(url) {
  const path = url.replace(/^file:\/\//, '');
  const at = path.lastIndexOf('/node_modules/');
  if (at >= 0) return path.slice(at + '/node_modules/'.length);
  const dist = path.search(/\/(dist|src|bench)\//);
  return dist >= 0 ? path.slice(dist + 1) : relative(process.cwd(), path) || basename(path);
}

/** Several profiles summed (the frames of every node together). */
export function mergeTop(results) {
  const sum = new Map();
  let totalMs = 0;
  let busyMs = 0;
  for (const r of results) {
    totalMs += r.totalMs;
    busyMs += r.busyMs;
    for (const f of r.frames) sum.set(f.frame, (sum.get(f.frame) ?? 0) + f.ms);
  }
  const frames = [...sum].map(([frame, ms]) => ({ frame, ms, share: busyMs > 0 ? ms / busyMs : 0 })).sort((a, b) => b.ms - a.ms);
  return { totalMs, busyMs, frames };
}

export function formatTop(title, r, top = 15) {
  const lines = [`${title}: ${(r.busyMs / 1000).toFixed(1)} s busy of ${(r.totalMs / 1000).toFixed(1)} s sampled`];
  for (const f of r.frames.slice(0, top)) lines.push(`  ${(f.share * 100).toFixed(1).padStart(5)}%  ${f.ms.toFixed(0).padStart(7)} ms  ${f.frame}`);
  return lines.join('\n');
}

export function profileFiles(paths) {
  return paths.flatMap((p) => (statSync(p).isDirectory()
    ? readdirSync(p).filter((f) => f.endsWith('.cpuprofile')).sort().map((f) => join(p, f))
    : [p]));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '15' }, exclude: { type: 'string', multiple: true, default: [] }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } } });
  if (values.help || positionals.length === 0) {
    process.stdout.write('usage: node bench/profile-top.mjs FILE_OR_DIR... [--top 15] [--exclude NAME]... [--json]\n');
    process.exit(positionals.length === 0 && !values.help ? 2 : 0);
  }
  const files = profileFiles(positionals);
  const results = files.map((f) => ({ file: f, ...topFrames(JSON.parse(readFileSync(f, 'utf8')), { exclude: values.exclude }) }));
  const top = Number(values.top);
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ files: results.map((r) => ({ ...r, frames: r.frames.slice(0, top) })), all: { ...mergeTop(results), frames: mergeTop(results).frames.slice(0, top) } })}\n`);
  } else {
    for (const r of results) process.stdout.write(`${formatTop(basename(r.file), r, top)}\n\n`);
    if (results.length > 1) process.stdout.write(`${formatTop(`all ${results.length} profiles`, mergeTop(results), top)}\n`);
  }
}
