#!/usr/bin/env node
/**
 * docs/reference/metrics.md from the daemon's own metric registry (SchedulerMetrics, as the daemon
 * builds it; from dist/, so `npm run build` first): every family of /metrics with its type, labels
 * and help. `node scripts/reference/metrics.mjs --write` writes the page; without --write it prints it.
 * test/unit/metrics-reference.test.ts fails when the committed page differs from generate().
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { SchedulerMetrics } from '../../dist/http/metrics.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The page, relative to the project's root. */
export const file = 'docs/reference/metrics.md';
/** The command that writes the page (named in its header and in the test's failure). */
export const command = 'npm run docs:reference';

/** A table cell: `|` would end the cell, a line feed the row. */
const cell = (text) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

/** The families a daemon's registry holds: no job, no store (a family's name, type, labels and help do not depend on them). */
export function families() {
  const cache = { summaries: new Map(), paused: new Map(), onceRetried: 0, readAt: 0 };
  const state = { jobs: [], next: () => new Map(), redis: () => 'none', storeUp: () => true, clockOffsetMs: () => 0, jobSet: () => null };
  return new SchedulerMetrics(state, cache, '0.0.0').families();
}

export function generate() {
  // The scheduler's own families first, then prom-client's default process and Node.js ones; by name in each.
  const ours = (f) => f.name.startsWith('scheduler_');
  const byName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const all = families();
  const rows = [...all.filter(ours).sort(byName), ...all.filter((f) => !ours(f)).sort(byName)].map((f) =>
    `| \`${f.name}\` | ${f.type} | ${f.labelNames.map((l) => `\`${l}\``).join(', ')} | ${cell(f.help)} |`);
  return [
    '# Metrics reference',
    '',
    `Generated from the daemon's metric registry by \`${command}\`: do not edit by hand.`,
    '',
    '| metric | type | labels | help |',
    '|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const text = generate();
  if (process.argv.includes('--write')) {
    writeFileSync(join(ROOT, file), text);
    process.stdout.write(`wrote ${file}\n`);
  } else process.stdout.write(text);
}

export default { file, generate };
